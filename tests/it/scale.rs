//! Holders of a lock library sharing a driver process (issue 43): the figures are a shared
//! process's as they are a process per holder's, and a holder fault that signals a process is
//! refused with a shared one.

use crate::common;

/// One run of `lib` with `args`; its summary's variant.
fn run(lib: &str, args: &[&str]) -> serde_json::Value {
    let tmp = tempfile::tempdir().unwrap();
    let o = common::lockbench(&["run", "--backend", "spawn", "--release", lib])
        .args(args)
        .arg("--quiet")
        .out(tmp.path().join("run"))
        .output();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{lib} {args:?}: {}",
        common::text_of(&o)
    );
    let s: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(tmp.path().join("run/summary.json")).unwrap(),
    )
    .unwrap();
    s["variants"][0].clone()
}

/// A fraction of a run: `count` of its `sections`.
struct Fraction {
    count: f64,
    of: f64,
}

impl Fraction {
    fn of(v: &serde_json::Value, count: &str) -> Fraction {
        Fraction {
            count: v[count].as_f64().unwrap(),
            of: v["sections"].as_f64().unwrap(),
        }
    }

    fn p(&self) -> f64 {
        self.count / self.of
    }
}

/// Whether two fractions agree within sampling error: their difference within four standard
/// errors of the difference of two proportions (the pooled proportion, each run's sections);
/// where both are 0 or both 1 only equality agrees.
fn agree(a: &Fraction, b: &Fraction) -> (bool, f64) {
    let pooled = (a.count + b.count) / (a.of + b.of);
    let se = (pooled * (1.0 - pooled) * (1.0 / a.of + 1.0 / b.of)).sqrt();
    let tolerance = 4.0 * se;
    ((a.p() - b.p()).abs() <= tolerance, tolerance)
}

/// The workload: sections drawn around the TTL on two keys, so that a fair share outlast it
/// (overruns) and the next holder then takes the key while the first is still in (overlaps);
/// no holder fault, so the holders share processes by default.
const WORKLOAD: &[&str] = &[
    "--workers",
    "8",
    "--keys",
    "2",
    "--ttl",
    "100ms",
    "--dist",
    "uniform(40ms,160ms)",
    "--duration",
    "4s",
    "--seed",
    "43",
];

/// A shared driver process (the default without holder faults: every holder of the run in one
/// process here) gives a run the figures a process per holder gives it, for a Python library
/// and a Node one: the overrun and overlap fractions agree within sampling error. The control:
/// the same comparison against a run whose TTL is longer (fewer sections outlast it) finds the
/// difference, so the tolerance is not so wide that anything passes.
#[test]
fn shared_driver_processes_give_the_figures_of_one_process_per_holder() {
    let _cpu = common::alone();
    for lib in ["redis-py", "redlock4"] {
        let shared = run(lib, WORKLOAD);
        let one_each = run(lib, &[WORKLOAD, &["--holders-per-process", "1"]].concat());
        for what in ["overruns", "overlap_incidents"] {
            let (a, b) = (Fraction::of(&shared, what), Fraction::of(&one_each, what));
            assert!(
                a.p() > 0.0 && b.p() > 0.0,
                "{lib}: no {what} to compare: {} of {} shared, {} of {} one each",
                a.count,
                a.of,
                b.count,
                b.of
            );
            let (ok, tolerance) = agree(&a, &b);
            assert!(
                ok,
                "{lib}: {what} {:.3} shared vs {:.3} one process each (tolerance {tolerance:.3})",
                a.p(),
                b.p()
            );
        }
        if lib == "redis-py" {
            // The control: a TTL of 150 ms, the same sections.
            let mut longer = WORKLOAD.to_vec();
            let i = longer.iter().position(|a| *a == "100ms").unwrap();
            longer[i] = "150ms";
            let control = run(
                lib,
                &[&longer[..], &["--holders-per-process", "1"]].concat(),
            );
            let (a, b) = (
                Fraction::of(&shared, "overruns"),
                Fraction::of(&control, "overruns"),
            );
            let (ok, tolerance) = agree(&a, &b);
            assert!(
                !ok,
                "the control: overruns {:.3} at TTL 100 ms vs {:.3} at 150 ms agree within {tolerance:.3}",
                a.p(),
                b.p()
            );
        }
    }
}

/// Holders sharing a process under a holder's pause (a SIGSTOP of the process) are refused
/// before anything runs, by name: the setting, the fault, why; the same pause with a process
/// per holder (the default under it) is not.
#[test]
fn a_holder_pause_with_shared_processes_is_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let paused = [
        "--workers",
        "4",
        "--duration",
        "1s",
        "--pause",
        "constant(10ms)",
    ];
    let o = common::lockbench(&["run", "--backend", "spawn", "--release", "redis-py"])
        .args(paused)
        .args(["--holders-per-process", "4"])
        .out(tmp.path().join("shared"))
        .output();
    let err = common::text_of(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--holders-per-process 4") && err.contains("pause (--pause)"),
        "{err}"
    );
    assert!(err.contains("one process per holder"), "{err}");
    assert!(!tmp.path().join("shared/summary.json").exists());
    // The same run with the default: a process per holder, and it runs.
    let o = common::lockbench(&["run", "--backend", "spawn", "--release", "redis-py"])
        .args(paused)
        .arg("--quiet")
        .out(tmp.path().join("default"))
        .output();
    assert_eq!(o.status.code(), Some(0), "{}", common::text_of(&o));
}
