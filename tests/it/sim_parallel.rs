//! `sim_parallel`: a simulated run cut into consecutive parts simulated at once, each from an
//! empty server. Its figures must agree with the run in one piece (`lockbench crosscheck`, the
//! same 99 % comparison a simulation faces against a real Redis); parts much shorter than the
//! sections and the TTL — where starting each part empty and ending it without the next one's
//! arrivals does change what happens — must fail that same comparison: the negative control.

use crate::common;

use common::{lockbench, summaries};
use std::path::{Path, PathBuf};

/// The open model on a few contended keys: a fifth of the sections outlast the 1 s TTL
/// (overruns, stale releases), and a late holder's key is often taken by the next request
/// (overlap incidents). Two simulated minutes, no `events.csv` (parts need none).
const PROFILE: &str = "backend = \"sim\"\narrivals = \"poisson(200/s)\"\nmax_in_flight = 1000\n\
    keys = 20\nttl = \"1s\"\nduration = \"120s\"\ndist = \"lognormal(median=300ms,p99=2s)\"\n\
    busy = \"fail-fast\"\nrelease = \"token\"\nreleases = [\"token\"]\nevents = \"none\"\nseed = 11\n";

/// Runs the profile in `parts` parts into `<tmp>/p<parts>`.
fn run(tmp: &Path, parts: usize) -> PathBuf {
    let profile = tmp.join("p.toml");
    std::fs::write(&profile, PROFILE).unwrap();
    let out = tmp.join(format!("p{parts}"));
    lockbench(&[
        "run",
        profile.to_str().unwrap(),
        "--sim-parallel",
        &parts.to_string(),
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ])
    .ok();
    out
}

/// `lockbench crosscheck A B`: whether every figure agrees (exit 0) or one does not (exit 1).
fn agree(a: &Path, b: &Path) -> bool {
    let o = lockbench(&["crosscheck", a.to_str().unwrap(), b.to_str().unwrap()]).output();
    let text = String::from_utf8_lossy(&o.stdout);
    match o.status.code() {
        Some(0) => true,
        Some(1) => {
            eprintln!("{text}");
            false
        }
        other => panic!("crosscheck exited {other:?}: {text}"),
    }
}

#[test]
fn a_run_in_parts_agrees_with_the_run_in_one_piece() {
    let tmp = tempfile::tempdir().unwrap();
    let one = run(tmp.path(), 1);
    for parts in [2, 4] {
        let dir = run(tmp.path(), parts);
        assert!(agree(&one, &dir), "{parts} parts disagree with one piece");
        let s = &summaries(&dir)[0];
        assert_eq!(s["simulated"]["parts"], parts, "{s}");
        // Every part's requests and sections counted, its histograms added (rates alone would
        // not see a part left out).
        let whole = summaries(&one)[0]["requests"].as_f64().unwrap();
        let requests = s["requests"].as_f64().unwrap();
        assert!(
            (requests - whole).abs() <= 5.0 * whole.sqrt(),
            "{requests} requests in {parts} parts, {whole} in one piece"
        );
        assert_eq!(s["duration_ms"]["count"], s["sections"], "{s}");
        // The whole run's time: every part but the last for its length, the last to its end.
        let elapsed = s["elapsed_s"].as_f64().unwrap();
        assert!((120.0..125.0).contains(&elapsed), "{elapsed}");
        // Every part's intervals in the run's log, once: their counts add up to the sections
        // (a part's intervals lost or written twice would not), and each part's own intervals
        // (well after the part before it has finished its open sections) are on the run's clock.
        let log = dir.join("durations.hlog");
        let merged = lockbench::hlog::read_by_tag(&log).unwrap();
        let logged: u64 = merged.iter().map(|(_, h)| h.len()).sum();
        assert_eq!(Some(logged), s["sections"].as_u64(), "{}", log.display());
        let starts: Vec<f64> = std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .filter(|l| l.starts_with("Tag="))
            .map(|l| l.split(',').nth(1).unwrap().parse().unwrap())
            .collect();
        for k in 0..parts {
            let from = 120.0 * k as f64 / parts as f64 + 10.0;
            assert!(
                starts.iter().any(|&t| (from..from + 10.0).contains(&t)),
                "no interval of part {k} from {from} s: {starts:?}"
            );
        }
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".part"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
}

#[test]
fn parts_shorter_than_the_sections_fail_the_same_comparison() {
    let tmp = tempfile::tempdir().unwrap();
    let one = run(tmp.path(), 1);
    // 40 parts of 3 s, with sections of up to several seconds and a 1 s TTL: each part's end
    // loses the requests that would have found its late holders.
    let forty = run(tmp.path(), 40);
    assert!(!agree(&one, &forty), "40 parts of 3 s pass for one piece");
}

/// What a part cannot give on its own is refused before anything runs, naming the field.
#[test]
fn what_cannot_run_in_parts_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("x");
    let sim = ["--backend", "sim", "--events", "none"];
    for (extra, says) in [
        (vec!["--sim-parallel", "0"], "1 to 64"),
        (vec!["--sim-parallel", "65"], "1 to 64"),
        (vec!["--sim-parallel", "2", "--events", "all"], "events"),
        (vec!["--sim-parallel", "2", "--sections", "100"], "duration"),
        (vec!["--sim-parallel", "2", "--ramp-up", "1s"], "ramp"),
        (vec!["--sim-parallel", "2", "--resource"], "resource"),
        (
            vec!["--sim-parallel", "2", "--crash-between", "0.1"],
            "crash",
        ),
        (
            vec!["--sim-parallel", "2", "--backend", "memory"],
            "backend",
        ),
    ] {
        let mut args = vec!["run", "--duration", "10s"];
        // The simulator's settings, but for the one the case is about.
        for pair in sim.chunks(2) {
            if !extra.contains(&pair[0]) {
                args.extend(pair);
            }
        }
        args.extend(extra.iter().copied());
        args.extend(["--out", out.to_str().unwrap()]);
        let o = lockbench(&args).output();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {err}");
        assert!(
            err.contains("--sim-parallel") && err.contains(says),
            "{extra:?}: {err}"
        );
        assert!(!out.exists(), "{extra:?} wrote {}", out.display());
    }
}
