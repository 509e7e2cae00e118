//! The one table of figures drives every output and the recount: each figure appears in
//! summary.json, its schema, summary.csv, the terminal table and report.html, and every
//! figure `lockbench report` claims to check is caught when summary.json is tampered with.

use crate::common;

use common::lockbench;
use lockbench::figures::{Check, figures};

/// A contended compare on the memory model with a resource, extension, pauses and crashed
/// holders, so every group of figures is there.
fn run(dir: &std::path::Path) -> String {
    let o = lockbench(&[
        "compare",
        "--backend",
        "memory",
        "--workers",
        "8",
        "--keys",
        "2",
        "--ttl",
        "5ms",
        "--dist",
        "exponential(mean=4ms)",
        "--sections",
        "400",
        "--release",
        "del,token+extend+fence-rw",
        "--resource",
        "--pause",
        "mixture(0.9*constant(0ms),0.1*uniform(5ms,10ms))",
        "--crash-between",
        "0.02",
        "--fault",
        "holder-crash,probability=0.05",
        "--out",
        dir.to_str().unwrap(),
    ])
    .output();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

/// Every figure of the table is in summary.json, the schema, summary.csv and report.html; the
/// terminal shows those it should.
#[test]
fn every_figure_appears_in_every_output() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("r");
    let terminal = run(&dir);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/schema/summary.schema.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let props = &schema["$defs"]["summary"]["properties"];
    let header = csv::Reader::from_path(dir.join("summary.csv"))
        .unwrap()
        .headers()
        .unwrap()
        .clone();
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let file: lockbench::SummaryFile = serde_json::from_value(summary.clone()).unwrap();
    let mut hidden = Vec::new();
    for f in figures() {
        for v in summary["variants"].as_array().unwrap() {
            assert!(
                v.get(f.name).is_some(),
                "{} missing from summary.json",
                f.name
            );
        }
        assert!(
            props.get(f.name).is_some(),
            "{} missing from the schema",
            f.name
        );
        assert!(
            header.iter().any(|h| h == f.name),
            "{} missing from summary.csv",
            f.name
        );
        // Tables leave out a group no variant has (this run has no outage).
        if !file.variants.iter().any(|s| f.group.present(s)) {
            hidden.push(f.name);
            continue;
        }
        assert!(
            html.contains(&format!("<td>{}</td>", f.label)),
            "{} missing from report.html",
            f.label
        );
        if f.terminal {
            assert!(
                terminal.lines().any(|l| l.starts_with(&f.label)),
                "{} missing from the terminal table:\n{terminal}",
                f.label
            );
        }
    }
    assert!(
        hidden.iter().all(|n| [
            "unlocked_sections",
            "refused_unavailable",
            // The open arrival model's (tests/it/arrivals.rs checks its table).
            "requests",
            "late_arrivals",
            "dropped_arrivals"
        ]
        .contains(n)),
        "only the outage and arrival figures may be left out of this run's tables: {hidden:?}"
    );
}

/// Each figure the recount covers is caught when its value in summary.json is changed; the
/// untouched directory agrees. The tampered ones are checked with `report --check` (the same
/// recount, no charts: it draws nothing, and a chart removed before stays absent).
#[test]
fn every_checked_figure_is_recounted() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("r");
    run(&dir);
    let original = std::fs::read_to_string(dir.join("summary.json")).unwrap();
    let agree = lockbench(&["report", dir.to_str().unwrap()]).output();
    assert_eq!(
        agree.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&agree.stderr)
    );
    let checked: Vec<_> = figures()
        .into_iter()
        .filter(|f| f.check == Check::Rows || f.check == Check::Overlap)
        .collect();
    assert!(checked.len() >= 14, "{}", checked.len());
    for f in checked {
        let mut v: serde_json::Value = serde_json::from_str(&original).unwrap();
        let x = &mut v["variants"][0][f.name];
        *x = match x {
            serde_json::Value::Number(n) if n.is_u64() => (n.as_u64().unwrap() + 1).into(),
            serde_json::Value::Number(n) => (n.as_f64().unwrap() + 1.0).into(),
            other => panic!("{}: not a number: {other}", f.name),
        };
        std::fs::write(dir.join("summary.json"), serde_json::to_string(&v).unwrap()).unwrap();
        let o = lockbench(&["report", "--check", dir.to_str().unwrap()]).output();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{} tampered, not caught", f.name);
        assert!(
            err.contains(f.name) || f.name == "excess_total_us",
            "{}: {err}",
            f.name
        );
    }
    std::fs::write(dir.join("summary.json"), original).unwrap();
    std::fs::remove_file(dir.join("timeline.png")).unwrap();
    let o = lockbench(&["report", "--check", dir.to_str().unwrap()]).output();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("agrees"));
    assert!(!dir.join("timeline.png").exists(), "--check drew a chart");
}

/// A run directory written before the table existed still passes `lockbench report`.
#[test]
fn report_reads_a_run_from_before_the_foundation() {
    let tmp = tempfile::tempdir().unwrap();
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/before-foundation"
    );
    for e in std::fs::read_dir(fixture).unwrap().flatten() {
        std::fs::copy(e.path(), tmp.path().join(e.file_name())).unwrap();
    }
    let o = lockbench(&["report", tmp.path().to_str().unwrap()]).output();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("agrees"), "{out}");
}
