//! The simulator (`--backend sim`): checked against a real Redis on a contended profile, with a
//! deliberately wrong model as the negative control; deterministic; bad input refused.

mod common;

use std::path::Path;
use std::process::{Command, Output};

fn lockbench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lockbench"))
        .args(args)
        .output()
        .expect("run lockbench")
}

fn ok(o: &Output) -> &Output {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

fn summaries(dir: &Path) -> Vec<serde_json::Value> {
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    v["variants"].as_array().unwrap().clone()
}

fn profile() -> String {
    format!("{}/profiles/crosscheck.toml", env!("CARGO_MANIFEST_DIR"))
}

/// The same profile and seed, run for real on a private redis-server and then simulated with
/// the round trips and timer lateness that real run measured: overruns, stale releases,
/// wrongful deletes and overlap incidents per section and the overlap-time fraction agree, for
/// del and token. A model whose round trip is ten times too long fails the same comparison.
#[test]
fn simulation_agrees_with_a_real_redis_and_a_wrong_model_does_not() {
    assert!(
        lockbench::store::spawn::redis_server_available(),
        "this test needs redis-server on PATH"
    );
    let tmp = tempfile::tempdir().unwrap();
    let (real, sim, wrong) = (
        tmp.path().join("real"),
        tmp.path().join("sim"),
        tmp.path().join("wrong"),
    );
    let p = profile();
    let real_s = real.to_str().unwrap();
    ok(&lockbench(&[
        "compare",
        &p,
        "--backend",
        "spawn",
        "--quiet",
        "--out",
        real_s,
    ]));
    let r = summaries(&real);
    for v in &r {
        assert_eq!(
            v["backend"].as_str().map(|b| b.contains("sim")),
            Some(false)
        );
    }
    // The profile is contended enough for every figure to be there.
    let del = r.iter().find(|v| v["variant"] == "del").unwrap();
    assert!(del["wrongful_deletes"].as_u64().unwrap() > 50, "{del}");
    assert!(del["stale_releases"].as_u64().unwrap() > 50, "{del}");

    ok(&lockbench(&[
        "compare",
        &p,
        "--backend",
        "sim",
        "--sim-from",
        real_s,
        "--quiet",
        "--out",
        sim.to_str().unwrap(),
    ]));
    let s = summaries(&sim);
    assert!(s.iter().all(|v| v["simulated"].is_object()), "{s:?}");
    let check = lockbench(&["crosscheck", real_s, sim.to_str().unwrap()]);
    ok(&check);
    let table = String::from_utf8_lossy(&check.stdout);
    assert_eq!(table.matches(" yes\n").count(), 10, "{table}");

    // The negative control: round trips ten times the measured ones.
    let rel = &del["release_latency_ms"];
    let (p50, p99) = (rel["p50"].as_f64().unwrap(), rel["p99"].as_f64().unwrap());
    let rtt = format!(
        "lognormal(median={:.3}ms,p99={:.3}ms)",
        10.0 * p50,
        10.0 * p99.max(p50 * 1.5)
    );
    ok(&lockbench(&[
        "compare",
        &p,
        "--backend",
        "sim",
        "--sim-from",
        real_s,
        "--sim-rtt",
        &rtt,
        "--quiet",
        "--out",
        wrong.to_str().unwrap(),
    ]));
    let check = lockbench(&["crosscheck", real_s, wrong.to_str().unwrap()]);
    assert_eq!(check.status.code(), Some(1), "{check:?}");
    let table = String::from_utf8_lossy(&check.stdout);
    assert!(
        table
            .lines()
            .any(|l| l.contains("stale releases") && l.ends_with("NO")),
        "{table}"
    );
}

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
