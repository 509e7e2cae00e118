//! CI gates: `--fail-if` and `[thresholds] fail_if` on any summary figure. A crossed threshold
//! exits 99 (the run itself completed), one that holds exits 0, a bad condition exits 2.

use crate::common;

use std::process::Output;

fn run(args: &[&str], out: &std::path::Path) -> Output {
    common::Lockbench::new()
        .args([
            "run",
            "--backend",
            "memory",
            "--workers",
            "5",
            "--sections",
            "200",
        ])
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
}

/// Overlap crosses `overlap_ms > 0` under a short TTL (exit 99, the verdict in summary.json
/// and on the terminal); the same gate holds with a TTL far above every section (exit 0).
#[test]
fn crossed_threshold_exits_99_and_a_held_one_0() {
    let dir = tempfile::tempdir().unwrap();
    let short = dir.path().join("short");
    let o = run(
        &[
            "--ttl",
            "5ms",
            "--dist",
            "exponential(mean=5ms)",
            "--fail-if",
            "overlap_ms > 0",
        ],
        &short,
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(99), "{err}");
    assert!(
        err.contains("threshold crossed") && err.contains("overlap_ms > 0"),
        "{err}"
    );
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(short.join("summary.json")).unwrap())
            .unwrap();
    assert_eq!(s["variants"][0]["thresholds"][0]["crossed"], true);
    assert!(
        std::fs::read_to_string(short.join("report.html"))
            .unwrap()
            .contains("overlap_ms &gt; 0: CROSSED")
    );

    let long = dir.path().join("long");
    let o = run(
        &[
            "--ttl",
            "30s",
            "--dist",
            "constant(1ms)",
            "--fail-if",
            "overlap_ms > 0",
        ],
        &long,
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `[thresholds] fail_if` in a profile works like the flag; a condition on a figure that does
/// not exist is bad input (exit 2) naming what is valid.
#[test]
fn profile_thresholds_and_bad_conditions() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("gate.toml");
    std::fs::write(
        &profile,
        "ttl = \"5ms\"\ndist = \"exponential(mean=5ms)\"\n[thresholds]\nfail_if = [\"overlap_incidents > 0\"]\n",
    )
    .unwrap();
    let o = common::Lockbench::new()
        .args([
            "run",
            "--backend",
            "memory",
            "--workers",
            "5",
            "--sections",
            "200",
            "--quiet",
        ])
        .arg(&profile)
        .arg("--out")
        .arg(dir.path().join("p"))
        .output();
    assert_eq!(
        o.status.code(),
        Some(99),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    let o = run(&["--fail-if", "overlap > 0"], &dir.path().join("bad"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--fail-if") && err.contains("not a figure"),
        "{err}"
    );
}

/// A gate on a figure the run does not measure is bad input, before the run, naming the
/// figure and the setting that measures it (issue 40: `lost_updates > 0` without a resource
/// read "held (0)" and passed); the same gate with the resource runs (the control).
#[test]
fn a_gate_on_a_figure_not_measured_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(
        &["--fail-if", "lost_updates > 0"],
        &dir.path().join("no-resource"),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("lost_updates > 0")
            && err.contains("does not measure lost_updates")
            && err.contains("--resource"),
        "{err}"
    );
    assert!(!dir.path().join("no-resource").join("summary.json").exists());
    let o = run(
        &["--fail-if", "stuck_locks > 0"],
        &dir.path().join("no-stuck"),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--crash-between"), "{err}");

    let o = run(
        // A TTL far above every section: no overlap, so no lost update, on any machine.
        &[
            "--resource",
            "--ttl",
            "10s",
            "--dist",
            "constant(1ms)",
            "--fail-if",
            "lost_updates > 0",
        ],
        &dir.path().join("resource"),
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
