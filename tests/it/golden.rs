//! Golden summaries: fixed seeds on the simulator (virtual time, deterministic) give the same
//! `summary.json` today as when the files under `tests/fixtures/golden/` were written, with the
//! fields that hold wall-clock values masked. It guards refactors that must not change a figure:
//! written first on the code before the change, then kept green through it.
//!
//! `LOCKBENCH_BLESS=1 cargo test --test it golden::` rewrites the files (only for a change that is
//! meant to change figures; say why in the commit).

use crate::common::lockbench;
use serde_json::Value;
use std::path::Path;

/// Fields that hold wall-clock values or a fresh id, masked wherever they appear.
const WALL_CLOCK: &[&str] = &[
    "run_id",
    "wall_s",
    "events_per_wall_s",
    "simulated_s_per_wall_s",
];

fn mask(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if WALL_CLOCK.contains(&k.as_str()) {
                    *x = Value::String("<masked>".into());
                } else {
                    mask(x);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(mask),
        _ => {}
    }
}

/// Runs `args` (a command and its flags, without `--out`) and compares its masked
/// `summary.json` with `tests/fixtures/golden/NAME.json`.
fn golden(name: &str, args: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join(name);
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--quiet", "--out", out.to_str().unwrap()]);
    lockbench(&all).ok();
    let mut got = summaries(&out);
    mask(&mut got);
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/golden")
        .join(format!("{name}.json"));
    if std::env::var_os("LOCKBENCH_BLESS").is_some() {
        std::fs::write(&file, serde_json::to_string_pretty(&got).unwrap() + "\n").unwrap();
        return;
    }
    let want: Value = serde_json::from_str(
        &std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("{}: {e} (LOCKBENCH_BLESS=1 writes it)", file.display())),
    )
    .unwrap();
    if got != want {
        let (g, w) = (flat(&got), flat(&want));
        let diff: Vec<String> = g
            .iter()
            .filter(|(k, v)| w.get(*k) != Some(v))
            .map(|(k, v)| {
                format!(
                    "{k}: got {v}, golden {}",
                    w.get(k).map_or("(absent)".into(), |x| x.to_string())
                )
            })
            .chain(
                w.keys()
                    .filter(|k| !g.contains_key(*k))
                    .map(|k| format!("{k}: missing")),
            )
            .take(20)
            .collect();
        panic!(
            "{name}: summary.json differs from {}:\n{}",
            file.display(),
            diff.join("\n")
        );
    }
}

/// The run's `summary.json`, or for a sweep each cell's, by the cell's directory name.
fn summaries(out: &Path) -> Value {
    let read = |dir: &Path| -> Value {
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap()
    };
    if out.join("summary.json").exists() {
        return read(out);
    }
    let mut cells: Vec<_> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("summary.json").exists())
        .collect();
    cells.sort();
    assert!(!cells.is_empty(), "{}: no summary.json", out.display());
    Value::Object(
        cells
            .iter()
            .map(|c| {
                (
                    c.file_name().unwrap().to_string_lossy().into_owned(),
                    read(c),
                )
            })
            .collect(),
    )
}

fn flat(v: &Value) -> std::collections::BTreeMap<String, Value> {
    fn go(v: &Value, p: String, m: &mut std::collections::BTreeMap<String, Value>) {
        match v {
            Value::Object(o) => o.iter().for_each(|(k, x)| go(x, format!("{p}.{k}"), m)),
            Value::Array(a) => a
                .iter()
                .enumerate()
                .for_each(|(i, x)| go(x, format!("{p}[{i}]"), m)),
            _ => {
                m.insert(p, v.clone());
            }
        }
    }
    let mut m = Default::default();
    go(v, String::new(), &mut m);
    m
}

fn profile(name: &str) -> String {
    format!("{}/profiles/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// `run` of the quick profile: the closed loop, retry policy, token release.
#[test]
fn run_quick() {
    golden(
        "run-quick",
        &[
            "run",
            &profile("quick.toml"),
            "--backend",
            "sim",
            "--seed",
            "11",
            "--duration",
            "2s",
        ],
    );
}

/// `run` of the open model with paused holders, extension and fencing.
#[test]
fn run_arrivals() {
    golden(
        "run-arrivals",
        &[
            "run",
            "--backend",
            "sim",
            "--seed",
            "12",
            "--arrivals",
            "poisson(400/s)",
            "--max-in-flight",
            "50",
            "--keys",
            "4",
            "--ttl",
            "30ms",
            "--dist",
            "lognormal(median=10ms,p99=60ms)",
            "--busy",
            "fail-fast",
            "--duration",
            "2s",
            "--pause",
            "mixture(0.95*constant(0ms),0.05*uniform(40ms,80ms))",
            "--extend",
            "ttl/3",
            "--fencing",
            "read-write",
        ],
    );
}

/// `compare` of naive and token releases.
#[test]
fn compare_naive_vs_token() {
    golden(
        "compare-naive-vs-token",
        &[
            "compare",
            &profile("naive-vs-token.toml"),
            "--backend",
            "sim",
            "--seed",
            "13",
            "--duration",
            "2s",
        ],
    );
}

/// `compare` of the fencing profile: the resource, fencing, extension, crashes.
#[test]
fn compare_fencing() {
    golden(
        "compare-fencing",
        &[
            "compare",
            &profile("fencing.toml"),
            "--backend",
            "sim",
            "--seed",
            "14",
            "--duration",
            "2s",
            "--fault",
            "holder-crash,probability=0.02,restart=50ms",
        ],
    );
}

/// `sweep` over TTLs and methods.
#[test]
fn sweep_ttls() {
    golden(
        "sweep",
        &[
            "sweep",
            "--backend",
            "sim",
            "--seed",
            "15",
            "--workers",
            "20",
            "--keys",
            "2",
            "--dist",
            "lognormal(median=10ms,p99=60ms)",
            "--ttl",
            "20ms,50ms,100ms",
            "--release",
            "del,token",
            "--duration",
            "1s",
        ],
    );
}
