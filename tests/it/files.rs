//! Output directories and files: a reused `--out` never mixes two runs, and a failed write
//! (a full disk, simulated with symlinks to `/dev/full`) names its file and fails the command.

use crate::common;

use lockbench::Collector;
use lockbench::EventsWriter;
use lockbench::Recorder;
use lockbench::ReleaseMethod::Token;
use lockbench::{EventRow, HistSet, Metric};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use common::lockbench;

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Every file under `dir` (relative path → bytes).
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, d: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            // Never read through a link to /dev/full (it reads as endless zeros).
            if p.symlink_metadata().unwrap().file_type().is_symlink() {
                continue;
            }
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_path_buf();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// Issue 7, defect 2: `compare` then `run` into the same `--out` used to append the second
/// run's rows to the first's `events.csv` (199 rows of two runs, "del: variant is absent").
/// Now the second run is refused with exit 2, naming the directory and `--force`, and not one
/// byte of the first run changes; with `--force` the old files are deleted first (the compare's
/// per-variant `.hgrm` files too) and `report` finds a consistent single run.
#[test]
fn reusing_out_is_refused_and_force_replaces_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("D");
    let ds = d.to_str().unwrap();
    let o = lockbench(&[
        "compare",
        "--backend",
        "memory",
        "--duration",
        "500ms",
        "--out",
        ds,
        "-q",
    ])
    .output();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let before = snapshot(&d);
    assert!(before.contains_key(Path::new("durations-del.hgrm")));

    let run = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "--backend",
            "memory",
            "--duration",
            "300ms",
            "--out",
            ds,
            "-q",
        ];
        args.extend_from_slice(extra);
        lockbench(&args).output()
    };
    let o = run(&[]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(ds) && err.contains("--force") && err.contains("mix"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(
        snapshot(&d),
        before,
        "the refused run changed the first run's files"
    );

    let o = run(&["--force"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let after = snapshot(&d);
    assert!(!after.contains_key(Path::new("durations-del.hgrm")));
    assert!(after.contains_key(Path::new("durations.hgrm")));
    let rows = common::events(&d);
    assert!(!rows.is_empty() && rows.iter().all(|r| &*r.variant == "token"));

    let o = lockbench(&["report", ds]).output();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    assert!(out.contains("agrees"), "{out}");
}

/// Files lockbench did not write are never deleted, with or without `--force`: the directory
/// is refused (exit 2) naming the file, and everything in it stays as it was.
#[test]
fn foreign_files_refuse_the_directory_even_with_force() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("D");
    std::fs::create_dir(&d).unwrap();
    std::fs::write(d.join("notes.txt"), "mine").unwrap();
    std::fs::write(d.join("manifest.json"), "{}").unwrap();
    std::fs::create_dir(d.join("ttl-1s-del")).unwrap();
    std::fs::write(d.join("ttl-1s-del").join("thesis.tex"), "mine too").unwrap();
    let before = snapshot(&d);
    for force in [false, true] {
        let mut args = vec![
            "run",
            "--backend",
            "memory",
            "--sections",
            "5",
            "--out",
            d.to_str().unwrap(),
        ];
        if force {
            args.push("--force");
        }
        let o = lockbench(&args).output();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(
            err.contains("notes.txt") && err.contains("did not write"),
            "{err}"
        );
        assert!(err.contains("ttl-1s-del"), "{err}");
        assert_eq!(snapshot(&d), before);
    }
    // An existing empty directory is fine.
    let e = tmp.path().join("E");
    std::fs::create_dir(&e).unwrap();
    let o = lockbench(&[
        "run",
        "--backend",
        "memory",
        "--sections",
        "5",
        "--out",
        e.to_str().unwrap(),
        "-q",
    ])
    .output();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// A sweep directory (`sweep.csv` and `ttl-…` cell directories) is refused on reuse too, and
/// `--force` replaces it with the new sweep's cells only.
#[test]
fn sweep_reuse_is_refused_and_force_replaces_it() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("S");
    let sweep = |ttls: &str, force: bool| {
        let mut args = vec![
            "sweep",
            "--backend",
            "memory",
            "--ttl",
            ttls,
            "--release",
            "token",
            "--sections",
            "20",
            "--dist",
            "constant(1ms)",
            "--out",
            d.to_str().unwrap(),
            "-q",
        ];
        if force {
            args.push("--force");
        }
        lockbench(&args).output()
    };
    let o = sweep("50ms,100ms", false);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let before = snapshot(&d);
    let o = sweep("200ms", false);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(snapshot(&d), before);
    let o = sweep("200ms", true);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let cells: Vec<String> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("ttl-"))
        .collect();
    assert_eq!(cells, ["ttl-200ms-token"]);
}

/// A directory of symlinks to `/dev/full` named like the run's files: every write fails with
/// "No space left on device", as on a full disk.
fn full_disk(names: &[&str]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for n in names {
        std::os::unix::fs::symlink("/dev/full", tmp.path().join(n)).unwrap();
    }
    tmp
}

fn assert_names(e: &anyhow::Error, file: &str) {
    let text = format!("{e:#}");
    assert!(
        text.contains(file) && text.contains("No space left"),
        "the error does not name {file}: {text}"
    );
}

/// Issue 7, defect 11: on a full disk every writer of a run names its file (it used to say
/// only "No space left on device"), including errors that surface only when a buffer is
/// flushed: summary.json, manifest.json, summary.csv, the .hgrm files, events.csv, the .hlog
/// files.
#[test]
fn full_disk_errors_name_the_file() {
    let d = full_disk(&[
        "summary.json",
        "manifest.json",
        "summary.csv",
        "durations.hgrm",
        "events.csv",
        "durations.hlog",
    ]);
    let dir = d.path();
    let value = serde_json::json!({"run_id": "x"});
    assert_names(
        &lockbench::write_json(&dir.join("summary.json"), &value).unwrap_err(),
        "summary.json",
    );
    assert_names(
        &lockbench::write_json(&dir.join("manifest.json"), &value).unwrap_err(),
        "manifest.json",
    );
    assert_names(
        &lockbench::write_summary_csv_file(dir, &[]).unwrap_err(),
        "summary.csv",
    );
    let mut hists = HistSet::default();
    hists.record(Metric::Duration, 1500);
    assert_names(
        &lockbench::write_hgrms(dir, &hists, None).unwrap_err(),
        "durations.hgrm",
    );

    // events.csv: the row fits in the buffer, so the error appears at the final flush.
    let w = EventsWriter::start(&dir.join("events.csv"), true).unwrap();
    w.tx.blocking_send(row()).unwrap();
    assert_names(&w.finish().unwrap_err(), "events.csv");

    // .hlog: likewise buffered until the collector's last flush.
    let rec = Arc::new(Recorder::new(1, 1));
    rec.record(0, Metric::Duration, 1500);
    let c = Collector::start(
        rec,
        dir,
        "token",
        SystemTime::now(),
        Duration::ZERO,
        Duration::from_secs(3600),
    )
    .unwrap();
    assert_names(&c.finish().unwrap_err(), "durations.hlog");
}

fn row() -> EventRow {
    EventRow {
        variant: "token".into(),
        worker: 0,
        key: 0,
        seq: 0,
        attempt_start_us: 0,
        set_sent_us: 1,
        acquired_us: 2,
        released_us: 1002,
        intended_us: 1000,
        duration_us: 1000,
        ttl_us: 100_000,
        overrun: false,
        excess_us: 0,
        holders_at_start: 0,
        attempts: 1,
        acquire_latency_us: 2,
        release_latency_us: 1,
        release: "token".into(),
        outcome: lockbench::SectionOutcome::Release(lockbench::ReleaseOutcome::Released),
        interrupted: false,
        ..EventRow::default()
    }
}

/// A report that cannot be written after a run is an error naming report.html (it used to be
/// a warning hidden by `-q`, exit 0), and the run's data files stay exactly as written. (The
/// page is a directory here: a link to `/dev/full` is replaced by the report, which never
/// writes through a link.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_disk_report_is_an_error_and_keeps_the_data() {
    let tmp = tempfile::tempdir().unwrap();
    let p = common::plan("workers = 2\nsections = 30\ndist = \"constant(1ms)\"\n");
    let _ = common::run_memory(&p, &[Token], tmp.path()).await;
    std::fs::remove_file(tmp.path().join("report.html")).unwrap();
    std::fs::create_dir(tmp.path().join("report.html")).unwrap();
    let before: BTreeMap<_, _> = snapshot(tmp.path())
        .into_iter()
        .filter(|(p, _)| p.extension().is_some_and(|e| e != "png" && e != "html"))
        .collect();
    let e = lockbench::render_after_run(tmp.path()).unwrap_err();
    assert!(format!("{e:#}").contains("report.html"), "{e:#}");
    let after: BTreeMap<_, _> = snapshot(tmp.path())
        .into_iter()
        .filter(|(p, _)| p.extension().is_some_and(|e| e != "png" && e != "html"))
        .collect();
    assert_eq!(before, after);
    assert!(before.contains_key(Path::new("summary.json")));
}

/// Issue 40, item 5: a file that never ends (`/dev/zero`) or never starts (a FIFO with no
/// writer), given wherever lockbench reads a file, is refused by name at once with exit 2; it
/// used to be read until memory ran out (6.6 GB in 6 s), or to wait forever.
#[test]
fn inputs_that_are_not_files_are_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("durations.csv");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo");
    let fifo = fifo.display().to_string();
    let folder = tmp.path().join("folder.csv");
    std::fs::create_dir(&folder).unwrap();
    let folder = folder.display().to_string();
    for (args, named, found) in [
        (
            vec![
                "run",
                "--release",
                "script",
                "--release-script",
                "/dev/zero",
            ],
            "/dev/zero",
            "a character device",
        ),
        (vec!["run", "/dev/zero"], "/dev/zero", "a character device"),
        (
            vec![
                "run",
                "--backend",
                "memory",
                "--dist",
                "empirical(file=/dev/zero)",
            ],
            "/dev/zero",
            "a character device",
        ),
        (vec!["run", "--backend", "memory", &fifo], &fifo, "a FIFO"),
        (vec!["recommend", "--durations", &fifo], &fifo, "a FIFO"),
        (
            vec!["recommend", "--durations", &folder],
            &folder,
            "a directory",
        ),
    ] {
        let mut cmd = lockbench(&args);
        if args[0] == "run" {
            cmd = cmd.out(tmp.path().join("out"));
        }
        // Refused before anything is read; a bound far above that, for a busy machine.
        let o = cmd.timeout(Duration::from_secs(60)).output();
        let text = common::text_of(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {text}");
        assert!(
            text.contains(named) && text.contains(found) && text.contains("not a regular file"),
            "{args:?}: {text}"
        );
    }
}
