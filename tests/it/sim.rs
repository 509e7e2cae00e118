//! The simulator (`--backend sim`): deterministic, virtual time, bad input refused. Its check
//! against a real Redis is `sim_crosscheck.rs` (which holds the CPU alone, so that no other
//! test competes with the real run for it).

use crate::common;

use common::{crosscheck_profile as profile, lockbench, summaries};

/// Same profile, same seed: the same sections, to the microsecond.
#[test]
fn a_simulation_is_a_function_of_its_seed() {
    let tmp = tempfile::tempdir().unwrap();
    let run = |name: &str, seed: &str| {
        let out = tmp.path().join(name);
        lockbench(&[
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
        ])
        .ok();
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
    lockbench(&[
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
    ])
    .ok();
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
    let r = lockbench::render_report(&out).unwrap();
    let panel = &r.durations.panels[0];
    assert_eq!(Some(panel.marks.count), s["sections"].as_u64());
    assert_eq!(Some(panel.overruns), s["overruns"].as_u64());
    let o = lockbench(&["report", out.to_str().unwrap()]).ok();
    assert!(String::from_utf8_lossy(&o.stdout).contains("not checked"));
    // A check that has nothing to recount is not a pass.
    let o = lockbench(&["report", "--check", out.to_str().unwrap()]).output();
    assert_eq!(o.status.code(), Some(2), "{}", common::text_of(&o));
    assert!(common::text_of(&o).contains("no events.csv"));
}

/// A request every 10 ms, each taking 50 ms exactly (no round trip, no server time), `slots`
/// request slots: the summary's figures.
fn constant_arrivals(out: &std::path::Path, slots: &str) -> serde_json::Value {
    lockbench(&[
        "run",
        "--backend",
        "sim",
        "--arrivals",
        "constant(100/s)",
        "--max-in-flight",
        slots,
        "--keys",
        "1000",
        "--ttl",
        "1s",
        "--dist",
        "constant(50ms)",
        "--busy",
        "fail-fast",
        "--sim-rtt",
        "constant(0ms)",
        "--sim-service",
        "0ms",
        "--duration",
        "10s",
        "--events",
        "none",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ])
    .ok();
    summaries(out).remove(0)
}

/// With ten slots (room for 200 requests a second) every arrival finds one idle (handed to it
/// ahead) and is served at its instant. With two (40 a second) the first two arrivals find a
/// slot free and every one after waits in the backlog, counted late as a slot takes it;
/// arrivals are requests whether or not they are served.
#[test]
fn arrivals_beyond_the_slots_wait_and_are_counted_late() {
    let tmp = tempfile::tempdir().unwrap();
    let s = constant_arrivals(&tmp.path().join("room"), "10");
    let n = |k: &str| s[k].as_u64().unwrap();
    assert_eq!(n("requests"), 1000);
    assert_eq!(n("sections") + n("rejections"), 1000);
    assert_eq!((n("late_arrivals"), n("dropped_arrivals")), (0, 0));
    // Served at its instant: a request takes its 50 ms section and nothing more.
    let slowest = s["request_latency_ms"]["max"].as_f64().unwrap();
    assert!((50.0..50.1).contains(&slowest), "{slowest}");

    let s = constant_arrivals(&tmp.path().join("busy"), "2");
    let n = |k: &str| s[k].as_u64().unwrap();
    assert_eq!(n("requests"), 1000);
    let served = n("sections") + n("rejections");
    // Two slots at 20 a second each, for the run and its grace: far fewer than arrived.
    assert!((400..800).contains(&served), "{served}");
    assert_eq!(n("late_arrivals"), served - 2);
    assert_eq!(n("dropped_arrivals"), 0);
}

/// Ctrl-C in a simulated day of arrivals: the run stops at the next interval of virtual time,
/// exit code 130, the summary written and marked interrupted. Every arrival counted was served:
/// a section (one the stop cut short counts too) or a refusal; none waits in the backlog here.
#[test]
fn ctrl_c_stops_a_simulated_day_of_arrivals() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("day");
    let day = concat!(env!("CARGO_MANIFEST_DIR"), "/profiles/day.toml");
    let mut child = common::Lockbench::new()
        .args(["run", day, "--release", "token", "--quiet", "--out"])
        .arg(&out)
        .spawn();
    // The manifest is written just before the simulation starts; a day takes over a minute.
    let t0 = std::time::Instant::now();
    while !out.join("manifest.json").exists() {
        assert!(t0.elapsed().as_secs() < 60, "the run did not start");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    common::signal("-INT", child.id());
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if t0.elapsed().as_secs() >= 60 {
            let _ = child.kill();
            panic!("did not stop within a minute of Ctrl-C");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(130));
    let s = &summaries(&out)[0];
    let n = |k: &str| s[k].as_u64().unwrap();
    let elapsed = s["elapsed_s"].as_f64().unwrap();
    assert!(elapsed < 86_000.0, "{elapsed}");
    assert!(n("requests") > 0);
    assert_eq!(n("requests"), n("sections") + n("rejections"));
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["interrupted"], true);
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
        let o = lockbench(&a).output();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// `--ramp-up`: worker i of N makes its first attempt at i/N of the ramp — exactly, on the
/// virtual clock; never earlier, on the real one (the memory backend). The same check on runs
/// without it, where every worker starts at once, fails: the negative control.
#[test]
fn a_ramp_up_starts_the_workers_one_by_one() {
    let tmp = tempfile::tempdir().unwrap();
    // Ten workers on 10,000 keys: each first attempt finds its key free (a busy key would
    // move the first section past the first attempt).
    let firsts = |name: &str, backend: &str, ramp: Option<&str>| -> Vec<u64> {
        let out = tmp.path().join(name);
        let mut args = vec![
            "run",
            "--backend",
            backend,
            "--workers",
            "10",
            "--keys",
            "10000",
            "--ttl",
            "1s",
            "--dist",
            "constant(50ms)",
            "--duration",
            "2s",
            "--sim-timer",
            "constant(0ms)",
            "--quiet",
            "--out",
            out.to_str().unwrap(),
        ];
        if let Some(r) = ramp {
            args.extend(["--ramp-up", r]);
        }
        lockbench(&args).ok();
        let mut firsts = vec![u64::MAX; 10];
        for r in common::events(&out) {
            if r.seq == 0 {
                firsts[r.worker] = r.attempt_start_us;
            }
        }
        firsts
    };
    let schedule: Vec<u64> = (0..10).map(|i| i * 100_000).collect();
    assert_eq!(firsts("sim", "sim", Some("1s")), schedule);
    assert_ne!(firsts("sim-at-once", "sim", None), schedule);
    let on_schedule = |f: &[u64]| {
        f.iter()
            .zip(&schedule)
            .all(|(f, s)| f >= s && *f != u64::MAX)
    };
    let real = firsts("memory", "memory", Some("1s"));
    assert!(on_schedule(&real), "{real:?}");
    let at_once = firsts("memory-at-once", "memory", None);
    assert!(!on_schedule(&at_once), "{at_once:?}");
}
