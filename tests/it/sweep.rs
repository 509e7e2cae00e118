//! `sweep` on a real (spawned) Redis.

use crate::common;

use std::collections::BTreeMap;
use std::process::Command;

/// Over 5 TTLs × {del, token, delex}: the overrun fraction falls as the TTL grows; `del`
/// deletes other holders' locks where overruns meet contention, `token` never does; the
/// `delex` cells fail on Redis < 8.4 in their own rows while every other cell still runs.
#[test]
fn sweep_over_ttls_and_methods() {
    common::need_redis_server();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    let o = common::Lockbench::new()
        .args([
            "sweep",
            "--backend",
            "spawn",
            "--workers",
            "20",
            "--keys",
            "2",
            "--think",
            "constant(2ms)",
        ])
        .args([
            "--dist",
            "exponential(mean=20ms)",
            "--duration",
            "1200ms",
            "--seed",
            "5",
        ])
        .args([
            "--ttl",
            "5ms,10ms,20ms,40ms,160ms",
            "--release",
            "del,token,delex",
            "--quiet",
        ])
        .arg("--out")
        .arg(&out)
        .output();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut r = csv::Reader::from_path(out.join("sweep.csv")).unwrap();
    let header = r.headers().unwrap().clone();
    let rows: Vec<BTreeMap<String, String>> = r
        .records()
        .map(|rec| {
            header
                .iter()
                .zip(rec.unwrap().iter())
                .map(|(h, v)| (h.to_string(), v.to_string()))
                .collect()
        })
        .collect();
    assert_eq!(rows.len(), 15, "one row per TTL × method");
    let num = |row: &BTreeMap<String, String>, k: &str| {
        row[k]
            .parse::<f64>()
            .unwrap_or_else(|_| panic!("{k} = {:?}", row[k]))
    };
    for method in ["del", "token"] {
        let cells: Vec<_> = rows.iter().filter(|r| r["release"] == method).collect();
        assert_eq!(cells.len(), 5);
        let fractions: Vec<f64> = cells.iter().map(|r| num(r, "overrun_fraction")).collect();
        for w in fractions.windows(2) {
            assert!(
                w[1] < w[0],
                "{method}: overrun fraction did not fall: {fractions:?}"
            );
        }
        assert!(
            cells
                .iter()
                .all(|r| r["error"].is_empty() && num(r, "sections") > 10.0)
        );
    }
    for r in rows.iter().filter(|r| r["release"] == "token") {
        assert_eq!(
            num(r, "wrongful_deletes"),
            0.0,
            "token deleted another holder's lock at {}",
            r["ttl_ms"]
        );
    }
    let del_short: f64 = rows
        .iter()
        .filter(|r| r["release"] == "del")
        .take(2)
        .map(|r| num(r, "wrongful_deletes"))
        .sum();
    assert!(
        del_short > 0.0,
        "del made no wrongful delete where overruns meet contention"
    );
    let delex: Vec<_> = rows.iter().filter(|r| r["release"] == "delex").collect();
    assert_eq!(delex.len(), 5);
    if server_has_delex() {
        assert!(
            delex.iter().all(|r| r["error"].is_empty()),
            "{:?}",
            delex[0]
        );
    } else {
        assert!(
            delex.iter().all(|r| r["error"].contains("8.4")),
            "{:?}",
            delex[0]
        );
    }
    let png = std::fs::read(out.join("sweep.png")).expect("sweep.png");
    assert!(png.starts_with(b"\x89PNG"), "sweep.png is not a PNG");
    // Every successful cell wrote a full run directory.
    assert!(out.join("ttl-5ms-token").join("summary.json").exists());
}

/// Whether the installed redis-server is 8.4 or newer (has DELEX).
fn server_has_delex() -> bool {
    let out = Command::new("redis-server")
        .arg("--version")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let v = text
        .split("v=")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or("0.0");
    lockbench::version_tuple(v).is_some_and(|v| v >= (8, 4))
}

/// A sweep with crashing holders shows both sides of the TTL choice: overruns fall as the TTL
/// grows while the time a crashed holder's key stays blocked rises with it; the terminal
/// table gets the crash columns.
#[test]
fn sweep_with_crashes_shows_both_sides_of_the_ttl() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    let o = common::Lockbench::new()
        .args([
            "sweep",
            "--backend",
            "memory",
            "--workers",
            "8",
            "--keys",
            "4",
        ])
        .args(["--dist", "exponential(mean=10ms)", "--busy", "retry"])
        .args(["--duration", "1500ms", "--seed", "2", "--ttl", "15ms,120ms"])
        .args(["--release", "token"])
        .args(["--fault", "holder-crash,probability=0.05,restart=5ms"])
        .arg("--out")
        .arg(&out)
        .output();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout.contains("blocked/crash"), "{stdout}");
    let mut r = csv::Reader::from_path(out.join("sweep.csv")).unwrap();
    let header = r.headers().unwrap().clone();
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let rows: Vec<csv::StringRecord> = r.records().map(|x| x.unwrap()).collect();
    let f = |row: &csv::StringRecord, name: &str| row[col(name)].parse::<f64>().unwrap();
    let (short, long) = (&rows[0], &rows[1]);
    assert!(f(short, "crashes") > 0.0 && f(long, "crashes") > 0.0);
    assert!(f(short, "overrun_fraction") > f(long, "overrun_fraction"));
    assert!(
        f(short, "crash_blocked_mean_ms") < f(long, "crash_blocked_mean_ms"),
        "blocked per crash must rise with the TTL"
    );
    assert!(f(short, "crash_blocked_s_per_hour") < f(long, "crash_blocked_s_per_hour"));
}
