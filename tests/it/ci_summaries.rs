//! CI summaries (issue 34): `--summary-md` writes the verdict table as Markdown, `--junit` one
//! JUnit test case per variant × threshold, failed where the threshold was crossed; the same
//! table heads the terminal output and `report.html`. The JUnit files are validated against
//! the Jenkins JUnit schema vendored in `tests/fixtures/junit/` with `xmllint` (`.ci/run`
//! installs it).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

/// `lockbench ARGS` on the memory backend, short: `--out DIR/run`, the CI files in DIR.
fn run(dir: &Path, args: &[&str]) -> Output {
    common::Lockbench::new()
        .args(args)
        .args(["--backend", "memory", "--workers", "5", "--sections", "200"])
        .args(["--seed", "7", "--out"])
        .arg(dir.join("run"))
        .arg("--summary-md")
        .arg(dir.join("summary.md"))
        .arg("--junit")
        .arg(dir.join("junit.xml"))
        .output()
}

/// Overlap under a short TTL: `overlap_ms > 0` is crossed.
const SHORT: &[&str] = &["--ttl", "5ms", "--dist", "exponential(mean=5ms)"];
/// A TTL far above every section: no overlap, the same threshold holds.
const LONG: &[&str] = &["--ttl", "30s", "--dist", "constant(1ms)"];

fn read(p: PathBuf) -> String {
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The JUnit file validates against the vendored Jenkins JUnit schema.
fn validates(junit: &Path) {
    let xsd = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/junit/jenkins-junit.xsd");
    let o = std::process::Command::new("xmllint")
        .arg("--noout")
        .arg("--schema")
        .arg(&xsd)
        .arg(junit)
        .output()
        .expect("xmllint (package libxml2-utils; .ci/run installs it)");
    assert!(
        o.status.success(),
        "{} does not validate against {}: {}\n{}",
        junit.display(),
        xsd.display(),
        String::from_utf8_lossy(&o.stderr),
        read(junit.to_path_buf())
    );
}

/// An attribute of the first element `<tag …>` of `xml`.
fn attr(xml: &str, tag: &str, name: &str) -> String {
    let at = xml
        .find(&format!("<{tag} "))
        .unwrap_or_else(|| panic!("no <{tag}> in {xml}"));
    let elem = &xml[at..at + xml[at..].find('>').unwrap()];
    let key = format!(" {name}=\"");
    let v = &elem[elem.find(&key).unwrap_or_else(|| panic!("{elem}")) + key.len()..];
    v[..v.find('"').unwrap()].to_string()
}

/// The `<testcase>` of `classname` × `name`, up to its end.
fn case<'a>(xml: &'a str, classname: &str, name: &str) -> &'a str {
    let head = format!("<testcase classname=\"{classname}\" name=\"{name}\"");
    let at = xml
        .find(&head)
        .unwrap_or_else(|| panic!("no case {classname} × {name} in {xml}"));
    let rest = &xml[at..];
    let end = match (rest.find("/>\n"), rest.find("</testcase>")) {
        (Some(a), Some(b)) if a < b && !rest[..a].contains('\n') => a,
        (_, Some(b)) => b,
        (Some(a), None) => a,
        _ => rest.len(),
    };
    &rest[..end]
}

/// A compare whose two variants cross `overlap_ms > 0` and hold `errors > 0`: the Markdown has
/// one row per variant and both thresholds; JUnit has a failed case per crossing and a passed
/// one per held threshold, and validates. The negative control, the same run under a TTL that
/// no section reaches, has no failed case.
#[test]
fn a_crossed_threshold_is_a_failed_case_a_held_one_passes() {
    let dir = tempfile::tempdir().unwrap();
    let gates = ["--fail-if", "overlap_ms > 0", "--fail-if", "errors > 0"];
    let crossed = dir.path().join("crossed");
    let o = run(&crossed, &[&["compare"][..], SHORT, &gates].concat());
    assert_eq!(
        o.status.code(),
        Some(99),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    let md = read(crossed.join("summary.md"));
    let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| ")).collect();
    assert_eq!(rows.len(), 3, "a header and one row per variant: {md}");
    assert!(
        rows[0].contains("`overlap_ms > 0`") && rows[0].contains("`errors > 0`"),
        "{md}"
    );
    for l in [
        "wrongful deletes",
        "lost updates",
        "stuck locks",
        "unsafe writes",
    ] {
        assert!(rows[0].contains(l), "{l}: {md}");
    }
    assert!(
        rows[1].starts_with("| del |") && rows[2].starts_with("| token |"),
        "{md}"
    );
    assert!(
        rows[1].contains("❌ crossed") && rows[1].contains("✅ held (0)"),
        "{md}"
    );
    assert!(md.contains("thresholds crossed (exit 99)"), "{md}");

    let junit = crossed.join("junit.xml");
    validates(&junit);
    let x = read(junit);
    assert_eq!(attr(&x, "testsuite", "tests"), "4", "{x}");
    assert_eq!(attr(&x, "testsuite", "failures"), "2", "{x}");
    assert_eq!(attr(&x, "testsuite", "errors"), "0", "{x}");
    let run_id = read(crossed.join("run/summary.json"));
    let run_id: serde_json::Value = serde_json::from_str(&run_id).unwrap();
    assert_eq!(
        attr(&x, "testsuite", "name"),
        format!("lockbench {}", run_id["run_id"].as_str().unwrap()),
    );
    for v in ["del", "token"] {
        let failed = case(&x, v, "overlap_ms &gt; 0");
        assert!(
            failed.contains("<failure") && failed.contains("message=\"overlap_ms = "),
            "{failed}"
        );
        let held = case(&x, v, "errors &gt; 0");
        assert!(
            !held.contains("<failure") && !held.contains("<error"),
            "{held}"
        );
    }

    let held = dir.path().join("held");
    let o = run(&held, &[&["compare"][..], LONG, &gates].concat());
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let junit = held.join("junit.xml");
    validates(&junit);
    let x = read(junit);
    assert_eq!(attr(&x, "testsuite", "tests"), "4", "{x}");
    assert_eq!(attr(&x, "testsuite", "failures"), "0", "{x}");
    assert!(!x.contains("<failure") && !x.contains("<error"), "{x}");
    let md = read(held.join("summary.md"));
    assert!(md.contains(": passed") && !md.contains("❌"), "{md}");
}

/// Without `--fail-if`, one case `run` per variant, passed.
#[test]
fn without_thresholds_one_run_case_per_variant() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(dir.path(), &[&["compare"][..], LONG].concat());
    assert_eq!(o.status.code(), Some(0));
    let junit = dir.path().join("junit.xml");
    validates(&junit);
    let x = read(junit);
    assert_eq!(attr(&x, "testsuite", "tests"), "2", "{x}");
    assert!(!case(&x, "del", "run").contains("<failure"), "{x}");
    assert!(!case(&x, "token", "run").contains("<failure"), "{x}");
    let md = read(dir.path().join("summary.md"));
    assert_eq!(
        md.lines().filter(|l| l.starts_with("| ")).count(),
        3,
        "{md}"
    );
}

/// A run that failed (exit 1: nothing listens at the URL) still writes both files; JUnit has an
/// error case for the failure and validates.
#[test]
fn a_failed_run_is_an_error_case() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("redis://127.0.0.1:{port}");
    let o = common::Lockbench::new()
        .args(["run", "--redis", &url, "--sections", "10", "-q"])
        .args(["--fail-if", "overlap_ms > 0", "--out"])
        .arg(dir.path().join("run"))
        .arg("--junit")
        .arg(dir.path().join("junit.xml"))
        .arg("--summary-md")
        .arg(dir.path().join("summary.md"))
        .output();
    assert_eq!(o.status.code(), Some(1));
    let junit = dir.path().join("junit.xml");
    validates(&junit);
    let x = read(junit);
    assert_eq!(attr(&x, "testsuite", "errors"), "1", "{x}");
    assert!(
        attr(&x, "error", "message").contains("cannot connect"),
        "{x}"
    );
    let md = read(dir.path().join("summary.md"));
    assert!(
        md.contains("failed (exit 1)") && md.contains("cannot connect"),
        "{md}"
    );
}

/// CI files that cannot be written, or would overwrite each other, the profile or the run's
/// own files, are refused before anything runs (exit 2, naming the flag and the file) — they
/// used to be found only after the run, or to overwrite silently; the profile is untouched.
#[test]
fn a_ci_file_that_cannot_be_written_or_would_overwrite_is_refused_first() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let profile = d.join("p.toml");
    std::fs::write(&profile, "workers = 2\n").unwrap();
    let run_dir = d.join("run");
    let link = d.join("link.toml");
    std::os::unix::fs::symlink(&profile, &link).unwrap();
    let hard = d.join("hard.toml");
    std::fs::hard_link(&profile, &hard).unwrap();
    let script = d.join("release.lua");
    std::fs::write(&script, "return redis.call('del', KEYS[1])\n").unwrap();
    let fifo = d.join("fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let link_a = d.join("a-link.md");
    std::fs::write(d.join("a.xml"), "").unwrap();
    std::os::unix::fs::symlink(d.join("a.xml"), &link_a).unwrap();
    // Under a plain file: no directory can be made there.
    let missing = profile.join("junit.xml");
    let cases: Vec<(Vec<std::ffi::OsString>, String)> = vec![
        (
            vec!["--junit".into(), missing.clone().into()],
            format!("--junit {}: cannot be written", missing.display()),
        ),
        (
            vec![
                "--junit".into(),
                d.join("x.md").into(),
                "--summary-md".into(),
                d.join("./x.md").into(),
            ],
            "--summary-md and --junit name one file".into(),
        ),
        (
            vec![
                profile.clone().into(),
                "--junit".into(),
                profile.clone().into(),
            ],
            "that is the profile this run reads".into(),
        ),
        (
            vec!["--summary-md".into(), run_dir.join("summary.json").into()],
            "inside the run's directory".into(),
        ),
        (vec!["--junit".into(), d.into()], "is a directory".into()),
        // Through a link, the profile is still the profile (it used to be overwritten).
        (
            vec![
                profile.clone().into(),
                "--junit".into(),
                link.clone().into(),
            ],
            "that is the profile this run reads".into(),
        ),
        (
            vec![
                profile.clone().into(),
                "--summary-md".into(),
                hard.clone().into(),
            ],
            "that is the profile this run reads".into(),
        ),
        // Any other file lockbench did not write: an input, another run's result.
        (
            vec!["--junit".into(), script.clone().into()],
            "is not a file lockbench wrote".into(),
        ),
        (
            vec!["--summary-md".into(), fifo.clone().into()],
            "is not a regular file".into(),
        ),
        (
            vec!["--junit".into(), run_dir.join("sub/j.xml").into()],
            "inside the run's directory".into(),
        ),
        (
            vec![
                "--junit".into(),
                d.join("a.xml").into(),
                "--summary-md".into(),
                link_a.clone().into(),
            ],
            "name one file".into(),
        ),
    ];
    for (args, says) in cases {
        let o = common::Lockbench::new()
            .args(["run", "--backend", "memory", "--sections", "20", "-q"])
            .args(&args)
            .arg("--out")
            .arg(&run_dir)
            .output();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(&says), "{args:?}: {err}");
        assert!(
            !run_dir.join("summary.json").exists(),
            "{args:?}: nothing ran"
        );
    }
    assert_eq!(std::fs::read_to_string(&profile).unwrap(), "workers = 2\n");
    assert!(
        std::fs::read_to_string(&script)
            .unwrap()
            .starts_with("return")
    );
    // A run refused after the check (a bad --fail-if) still leaves its CI files, saying it
    // was refused (exit 2), and no empty file.
    let (junit, md) = (d.join("refused.xml"), d.join("refused.md"));
    let o = common::Lockbench::new()
        .args(["run", "--backend", "memory", "--sections", "20", "-q"])
        .args(["--fail-if", "nosuch > 0"])
        .arg("--junit")
        .arg(&junit)
        .arg("--summary-md")
        .arg(&md)
        .arg("--out")
        .arg(&run_dir)
        .output();
    assert_eq!(o.status.code(), Some(2), "{}", common::text_of(&o));
    assert!(read(md).contains("(exit 2)"));
    let xml = read(junit.clone());
    assert!(xml.contains("<error"), "{xml}");
    validates(&junit);
}

/// `report.html`'s first table is the verdict table: a row per variant, the key figures
/// coloured by zero / non-zero, the thresholds held or crossed.
#[test]
fn the_report_opens_with_the_verdict_table() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(
        dir.path(),
        &[&["compare"][..], SHORT, &["--fail-if", "overlap_ms > 0"]].concat(),
    );
    assert_eq!(o.status.code(), Some(99));
    let html = read(dir.path().join("run/report.html"));
    let first = &html[html.find("<table").unwrap()..];
    let first = &first[..first.find("</table>").unwrap()];
    assert!(first.starts_with("<table class=\"verdict\">"), "{first}");
    for h in [
        "overlap (ms / incidents)",
        "wrongful deletes",
        "overlap_ms &gt; 0",
    ] {
        assert!(first.contains(h), "{h}: {first}");
    }
    assert_eq!(first.matches("<tr><td>").count(), 2, "{first}");
    assert!(
        first.contains("<td class=\"nonzero\" title=\"overlap_ms = "),
        "{first}"
    );
    assert!(first.contains("<td class=\"zero\">0</td>"), "{first}");
    assert!(html.find("class=\"verdict\"") < html.find("<h2>Summary</h2>"));
}

/// The terminal shows the verdict table above the full table, uncoloured when piped.
#[test]
fn the_terminal_shows_the_verdict_above_the_full_table() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(dir.path(), &[&["compare"][..], LONG].concat());
    assert_eq!(o.status.code(), Some(0));
    let out = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = out.lines().collect();
    let at = |p: &dyn Fn(&str) -> bool| lines.iter().position(|l| p(l));
    let verdict = at(&|l| l == "verdict: passed").expect("a verdict line");
    let header = at(&|l| l.starts_with("variant") && l.contains("wrongful deletes")).unwrap();
    let full = at(&|l| l.starts_with("release ")).expect("the full table");
    assert!(verdict < header && header < full, "{out}");
    assert!(lines[header + 1].starts_with("del "), "{out}");
    assert!(lines[header + 2].starts_with("token "), "{out}");
    assert!(!out.contains('\x1b'), "no colour when piped: {out}");
}

/// `lockbench merge` of two agents writes the same files for the merged run: the thresholds
/// the agents were given, one case per variant × threshold, and validates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_writes_them_for_the_merged_run() {
    let server = common::redis().await;
    let url = server.url();
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    let agent = |i: &str| {
        common::Lockbench::new()
            .current_dir(cwd)
            .env_remove("JOB_COMPLETION_INDEX")
            .env_remove("LOCKBENCH_AGENTS")
            .args(["run", "--redis", &url, "--run-id", "ci", "--agent", i, "-q"])
            .args(["--workers", "2", "--sections", "20", "--ttl", "30s"])
            .args(["--dist", "constant(1ms)", "--fail-if", "overlap_ms > 0"])
            .spawn()
    };
    let (a0, a1) = (agent("0/2"), agent("1/2"));
    for a in [a0, a1] {
        let o = a.wait_with_output();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let o = common::Lockbench::new()
        .current_dir(cwd)
        .args(["merge", "results/ci/agent-0", "results/ci/agent-1"])
        .args(["--junit", "junit.xml", "--summary-md", "summary.md"])
        .output();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.starts_with("verdict: passed\n"), "{out}");
    let junit = cwd.join("junit.xml");
    validates(&junit);
    let x = read(junit);
    assert_eq!(attr(&x, "testsuite", "name"), "lockbench ci", "{x}");
    assert_eq!(attr(&x, "testsuite", "tests"), "1", "{x}");
    assert!(
        !case(&x, "token", "overlap_ms &gt; 0").contains("<failure"),
        "{x}"
    );
    let md = read(cwd.join("summary.md"));
    assert!(
        md.contains("| token | 🟢 0 / 0 |") && md.contains("✅ held (0)"),
        "{md}"
    );
}
