//! The door's regression net: bad flags and bad profile fields, each with the exit code and the
//! error lines it gets, against `tests/fixtures/bad-inputs.txt`. A change of wording shows up
//! as a diff of that file: each message must keep naming the flag (or file:line and field) and
//! what would be valid. `LOCKBENCH_BLESS=1 cargo test --test it door::` rewrites it.
//!
//! Every input here is refused before a run starts (or runs a tiny simulated one), so the
//! whole table takes a few seconds.

use crate::common::lockbench;
use std::path::Path;

/// Bad flags, each a `run` (or the named command) on the simulated backend.
const FLAGS: &[&[&str]] = &[
    &["run", "--ttl", "x"],
    &["run", "--ttl", "50"],
    &["run", "--ttl", "-1ms"],
    &["run", "--duration", "soon"],
    &["run", "--duration", "0s"],
    &["run", "--workers", "0"],
    &["run", "--workers", "many"],
    &["run", "--keys", "0"],
    &["run", "--hot-key", "2"],
    &["run", "--time-scale", "0"],
    &["run", "--busy", "nope"],
    &["run", "--connection", "x"],
    &["run", "--backend", "x"],
    &["run", "--fencing", "x"],
    &["run", "--extend", "x"],
    &["run", "--extend", "ttl/0"],
    &["run", "--extend-with", "x"],
    &["run", "--on-lost", "x"],
    &["run", "--on-unavailable", "x"],
    &["run", "--pause-at", "x"],
    &["run", "--acquire", "x"],
    &["run", "--timer", "x"],
    &["run", "--events", "x"],
    &["run", "--cluster", "x"],
    &["run", "--lock", "x"],
    &["run", "--release", "x"],
    &["run", "--release", "token+x"],
    &["run", "--dist", "uniform(1ms)"],
    &["run", "--dist", "gamma(2ms)"],
    &["run", "--think", "constant(x)"],
    &["run", "--pause", "x"],
    &["run", "--ramp-up", "x"],
    &["run", "--memory-rtt", "x"],
    &["run", "--sim-rtt", "x"],
    &["run", "--sim-service", "x"],
    &["run", "--sim-timer", "x"],
    &["run", "--sim-parallel", "0"],
    &["run", "--command-timeout", "x"],
    &["run", "--give-up-after", "x"],
    &["run", "--crash-between", "2"],
    &["run", "--arrivals", "x"],
    &["run", "--metrics", "x:y:z"],
    &["run", "--fault", "bogus"],
    &["run", "--fault", "latency@1s"],
    &["run", "--fault", "pause@x"],
    &["run", "--fault", "restart@1s,for=2s,x=1"],
    &["run", "--fail-if", "nonsense"],
    &["run", "--fail-if", "nofigure > 1"],
    &["compare", "--release", "x"],
    &["compare", "--ttl", "x"],
    &["sweep", "--ttl", "x"],
    &["sweep", "--ttl", "100ms,x"],
    &["sweep", "--release", "x"],
    &["demo", "stale-release", "--ttl", "x"],
    &["demo", "stale-release", "--backend", "x"],
];

/// Bad profile fields: the TOML text, read by `run PROFILE`.
const PROFILES: &[&str] = &[
    "ttl = \"x\"",
    "ttl = \"50\"",
    "ttl = 100",
    "duration = \"soon\"",
    "workers = 0",
    "workers = \"many\"",
    "hot_key = 2.0",
    "time_scale = 0.0",
    "busy = \"nope\"",
    "connection = \"x\"",
    "backend = \"x\"",
    "fencing = \"x\"",
    "extend = \"x\"",
    "extend_with = \"x\"",
    "on_lost = \"x\"",
    "on_unavailable = \"x\"",
    "pause_at = \"x\"",
    "acquire = \"x\"",
    "timer = \"x\"",
    "events = \"x\"",
    "cluster = \"x\"",
    "lock = \"x\"",
    "release = \"x\"",
    "releases = [\"token\", \"x\"]",
    "dist = \"uniform(1ms)\"",
    "think = \"x\"",
    "pause = \"x\"",
    "memory_rtt = \"x\"",
    "sim_rtt = \"x\"",
    "sim_service = \"x\"",
    "command_timeout = \"x\"",
    "connect_timeout = \"x\"",
    "redlock_timeout = \"x\"",
    "relase = \"del\"",
    "[retry]\nbase = \"x\"",
    "[retry]\nbase = \"10ms\"\ncap = \"1ms\"",
    "[[fault]]\nkind = \"bogus\"\nat = \"1s\"",
    "[[fault]]\nkind = \"latency\"\nat = \"1s\"",
    "[[fault]]\nkind = \"pause\"\nat = \"x\"",
    "[thresholds]\nfail_if = [\"nonsense\"]",
    "[fault]\nkind = \"pause\"",
];

/// Exit code and the error's lines (the temporary directory written `$DIR`, clap's usage and
/// hint lines left out).
fn outcome(args: &[String], dir: &Path) -> String {
    let o = lockbench(args).output();
    let stderr = String::from_utf8_lossy(&o.stderr).replace(dir.to_str().unwrap(), "$DIR");
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("Usage:") && !l.starts_with("For more"))
        .take(6)
        .collect();
    format!("{:?} | {}", o.status.code(), lines.join(" ⏎ "))
}

/// A flag case's full command line: a tiny simulated run unless the case names the backend or
/// the run length itself.
fn flag_args(case: &[&str], out: &Path) -> Vec<String> {
    let mut args: Vec<String> = case.iter().map(|s| s.to_string()).collect();
    if case[0] != "demo" {
        args.extend(["--quiet".into(), "--out".into(), out.display().to_string()]);
        if !case.contains(&"--backend") {
            args.extend(["--backend".into(), "sim".into()]);
        }
        if !case
            .iter()
            .any(|a| ["--duration", "--sections", "--arrivals"].contains(a))
        {
            args.extend(["--sections".into(), "20".into()]);
        }
    }
    args
}

/// A profile case's text: a tiny simulated run unless the case sets the backend or the length.
fn profile_text(case: &str) -> String {
    let mut text = String::new();
    if !case.contains("backend") {
        text.push_str("backend = \"sim\"\n");
    }
    if !case.contains("duration") {
        text.push_str("sections = 20\n");
    }
    text + case + "\n"
}

#[test]
fn bad_inputs_keep_their_messages_and_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = String::from(
        "# Bad inputs: exit code | the error's lines. Rewritten by\n\
         # LOCKBENCH_BLESS=1 cargo test --test it door:: (read the diff line by line).\n",
    );
    for (i, case) in FLAGS.iter().enumerate() {
        let out = dir.path().join(format!("flag{i}"));
        let got = outcome(&flag_args(case, &out), dir.path());
        table.push_str(&format!("flags: {} => {got}\n", case.join(" ")));
    }
    for (i, case) in PROFILES.iter().enumerate() {
        let file = dir.path().join(format!("p{i}.toml"));
        std::fs::write(&file, profile_text(case)).unwrap();
        let out = dir.path().join(format!("prof{i}"));
        let args: Vec<String> = ["run", file.to_str().unwrap(), "--quiet", "--out"]
            .iter()
            .map(|s| s.to_string())
            .chain([out.display().to_string()])
            .collect();
        let got = outcome(&args, dir.path()).replace(&format!("p{i}.toml"), "p.toml");
        table.push_str(&format!("toml: {} => {got}\n", case.replace('\n', "⏎")));
    }
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bad-inputs.txt");
    if std::env::var_os("LOCKBENCH_BLESS").is_some() {
        std::fs::write(&fixture, &table).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&fixture)
        .unwrap_or_else(|e| panic!("{}: {e} (LOCKBENCH_BLESS=1 writes it)", fixture.display()));
    if want != table {
        let diff: Vec<String> = want
            .lines()
            .zip(table.lines())
            .filter(|(w, g)| w != g)
            .map(|(w, g)| format!("- {w}\n+ {g}"))
            .collect();
        panic!(
            "bad-input messages changed (LOCKBENCH_BLESS=1 rewrites {}):\n{}",
            fixture.display(),
            diff.join("\n")
        );
    }
}
