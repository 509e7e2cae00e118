//! The simulator (`--backend sim`): deterministic, virtual time, bad input refused. Its check
//! against a real Redis is `tests/sim_crosscheck.rs` (a binary of its own, so that no other
//! test competes with the real run for the CPU).

mod common;

use common::{cli as lockbench, cli_ok as ok, crosscheck_profile as profile, summaries};

/// Same profile, same seed: the same sections, to the microsecond.
#[test]
fn a_simulation_is_a_function_of_its_seed() {
    let tmp = tempfile::tempdir().unwrap();
    let run = |name: &str, seed: &str| {
        let out = tmp.path().join(name);
        ok(&lockbench(&[
            "compare",
            &profile(),
            "--backend",
            "sim",
            "--seed",
            seed,
            "--duration",
            "3s",
            "--quiet",
            "--out",
            out.to_str().unwrap(),
        ]));
        std::fs::read_to_string(out.join("events.csv")).unwrap()
    };
    let (a, b, c) = (run("a", "7"), run("b", "7"), run("c", "8"));
    assert!(a.lines().count() > 500);
    assert_eq!(a, b);
    assert_ne!(a, c);
}

/// A simulated hour of the open model with 1,000 request slots on 10,000 keys: the clock is
/// virtual (an hour of figures), every arrival is a request, and nothing is left behind.
#[test]
fn an_hour_of_arrivals_in_virtual_time() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("hour");
    ok(&lockbench(&[
        "run",
        "--backend",
        "sim",
        "--arrivals",
        "poisson(20/s)",
        "--max-in-flight",
        "1000",
        "--keys",
        "10000",
        "--ttl",
        "30s",
        "--dist",
        "lognormal(median=2s,p99=12s)",
        "--busy",
        "fail-fast",
        "--duration",
        "1h",
        "--events",
        "none",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]));
    assert!(!out.join("events.csv").exists());
    let s = &summaries(&out)[0];
    let elapsed = s["elapsed_s"].as_f64().unwrap();
    assert!((3600.0..3700.0).contains(&elapsed), "{elapsed}");
    let requests = s["requests"].as_u64().unwrap();
    // 72,000 expected: Poisson's 99.99 % range.
    assert!((70_900..73_100).contains(&requests), "{requests}");
    assert_eq!(s["dropped_arrivals"].as_u64(), Some(0));
    assert_eq!(
        s["sections"].as_u64().unwrap() + s["rejections"].as_u64().unwrap(),
        requests
    );
    assert!(s["simulated"]["events"].as_u64().unwrap() > requests);
    // Without rows the report is drawn from the interval logs: every section is in the
    // durations chart, the overruns are the summary's, and there is no timeline to draw.
    assert!(out.join("report.html").exists() && out.join("durations.png").exists());
    assert!(!out.join("timeline.png").exists());
    let r = lockbench::report::render(&out).unwrap();
    let panel = &r.durations.panels[0];
    assert_eq!(Some(panel.marks.count), s["sections"].as_u64());
    assert_eq!(Some(panel.overruns), s["overruns"].as_u64());
    let o = lockbench(&["report", out.to_str().unwrap()]);
    ok(&o);
    assert!(String::from_utf8_lossy(&o.stdout).contains("not checked"));
}

/// What a simulation cannot do is refused before anything runs: server faults (the model has
/// no server to pause), a demo (a story told in real time), a missing real run to measure.
#[test]
fn what_cannot_be_simulated_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("x");
    for (args, says) in [
        (
            vec!["run", "--backend", "sim", "--fault", "server-pause@1s+1s"],
            "server-pause",
        ),
        (
            vec!["demo", "stale-release", "--backend", "sim"],
            "real time",
        ),
        (
            vec!["run", "--backend", "sim", "--sim-from", "/nonexistent/run"],
            "events.csv",
        ),
        (
            vec!["run", "--backend", "sim", "--events", "some"],
            "events",
        ),
    ] {
        let mut a = args.clone();
        if a[0] == "run" {
            a.extend(["--out", out.to_str().unwrap()]);
        }
        let o = lockbench(&a);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
