//! Lock libraries driven through their drivers (`drivers/`, issue 33): the same workload as the
//! built-in methods, every figure from lockbench's own measurement; a driver that breaks is a
//! clear error naming the client, and the rows recorded before it are kept.

use crate::common;

use std::path::Path;

/// `compare` of `releases` on a private server with `args`, into `dir`: its exit code, its
/// stderr, and the summaries by variant name.
fn compare(
    releases: &str,
    args: &[&str],
    dir: &Path,
    env: &[(&str, &str)],
) -> (Option<i32>, String, serde_json::Value) {
    let mut cmd = common::lockbench(&["compare", "--backend", "spawn", "--release", releases])
        .args(args)
        .out(dir);
    for (k, v) in env {
        cmd = cmd.env(k, v);
    }
    let o = cmd.output();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    let summary = std::fs::read_to_string(dir.join("summary.json"))
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or_default();
    (o.status.code(), stderr, summary)
}

/// The summary of variant `name`.
fn variant<'a>(s: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    s["variants"]
        .as_array()
        .and_then(|v| v.iter().find(|v| v["variant"] == name))
        .unwrap_or_else(|| panic!("no variant {name} in {s}"))
}

/// Rows of `events.csv` per variant.
fn rows_of(dir: &Path, name: &str) -> usize {
    common::events(dir)
        .iter()
        .filter(|r| &*r.variant == name)
        .count()
}

/// A driver that dies fails the run (exit 1) with an error naming the client, the holder and
/// what it did (and its last stderr line), and the sections recorded before it are in
/// events.csv.
#[test]
fn a_driver_that_dies_is_a_clear_error_and_no_row_is_lost() {
    a_broken_driver("die", "died");
}

/// A driver that writes what is not the protocol: the same.
#[test]
fn a_driver_that_writes_garbage_is_a_clear_error_and_no_row_is_lost() {
    a_broken_driver("garbage", "not the protocol");
}

/// A driver that stops answering: the same, after the driver's patience (four command
/// timeouts, at least 10 s — so the command timeout here is 1 s; at its default of 10 s the
/// hang alone waited 40 s). The wait is idle: other tests run beside it.
#[test]
fn a_driver_that_stops_answering_is_a_clear_error_and_no_row_is_lost() {
    a_broken_driver("hang", "stopped answering");
}

/// A run of the built-in `token` and `redis-py` whose driver is the fake one in `mode`: it
/// fails with an error that `says` what the driver did, keeping what was recorded.
fn a_broken_driver(mode: &str, says: &str) {
    let fake = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/fake-drivers");
    let tmp = tempfile::tempdir().unwrap();
    let (code, stderr, summary) = compare(
        "token,redis-py",
        &[
            "--workers",
            "2",
            "--keys",
            "2",
            "--ttl",
            "1s",
            "--dist",
            "constant(5ms)",
            "--duration",
            "1s",
            "--command-timeout",
            "1s",
        ],
        tmp.path(),
        &[("LOCKBENCH_DRIVERS_ROOT", fake), ("FAKE_DRIVER", mode)],
    );
    assert_eq!(code, Some(1), "{mode}: {stderr}");
    assert!(
        stderr.contains("client redis-py (holder") && stderr.contains(says),
        "{mode}: {stderr}"
    );
    assert!(
        stderr.contains("breaking now"),
        "{mode}: its stderr: {stderr}"
    );
    // The built-in variant before it was measured and written; the library's rows too.
    assert!(variant(&summary, "token")["sections"].as_u64() > Some(0));
    assert!(rows_of(tmp.path(), "redis-py") >= 2, "{mode}: rows kept");
    if mode == "die" {
        // `report` recounts the variants that have a summary, and says which has none
        // (it used to refuse the run: "variant is absent in summary.json").
        let o = common::lockbench(&["report"]).arg(tmp.path()).output();
        let text = common::text_of(&o);
        assert_eq!(o.status.code(), Some(0), "{text}");
        assert!(
            text.contains("summary.json agrees with events.csv")
                && text.contains("not checked: variant `redis-py` failed during the run"),
            "{text}"
        );
        // The library alone: no variant finished, and the manifest says why (it had no
        // failure and no end), which `report` repeats.
        let alone = tmp.path().join("alone");
        let o = common::lockbench(&["run", "--backend", "spawn", "--release", "redis-py"])
            .args(["--workers", "2", "--duration", "1s"])
            .env("LOCKBENCH_DRIVERS_ROOT", fake)
            .env("FAKE_DRIVER", mode)
            .out(&alone)
            .output();
        assert_eq!(o.status.code(), Some(1), "{}", common::text_of(&o));
        let m: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(alone.join("manifest.json")).unwrap())
                .unwrap();
        assert!(m["failure"].as_str().unwrap().contains("died"), "{m}");
        assert!(m["ended_at"].is_string(), "{m}");
        let o = common::lockbench(&["report"]).arg(&alone).output();
        let text = common::text_of(&o);
        assert_eq!(o.status.code(), Some(2), "{text}");
        assert!(
            text.contains("the run failed before any variant finished"),
            "{text}"
        );
    }
}

/// redis-py's `Lock` on the contended workload: with sections shorter than the TTL no two
/// holders overlap and every release is the holder's own; with sections longer than the TTL
/// the holders overlap and the library refuses the stale releases (`LockNotOwnedError`:
/// refused) without deleting another holder's lock, as the built-in `token` does — while the
/// built-in `del` (the negative control, same seed) deletes other holders' locks. No key of
/// the run is left, and events.csv has a row per section.
#[test]
fn redis_py_is_measured_like_the_built_in_methods() {
    let _cpu = common::shared();
    let tmp = tempfile::tempdir().unwrap();
    let base = [
        "--workers",
        "4",
        "--keys",
        "1",
        "--busy",
        "retry",
        "--duration",
        "2s",
        "--seed",
        "5",
    ];
    let short: Vec<&str> = [&base[..], &["--ttl", "1s", "--dist", "constant(5ms)"]].concat();
    let short: Vec<&str> = [&short[..], &["--client", "redis-py", "--client", "rslock"]].concat();
    let (code, stderr, s) = compare("token", &short, tmp.path(), &[]);
    assert_eq!(code, Some(0), "{stderr}");
    let v = variant(&s, "redis-py");
    assert!(v["library"].as_str().unwrap().starts_with("redis "), "{v}");
    // redis-py sleeps 100 ms between tries of a busy lock: few sections, all clean.
    assert!(v["sections"].as_u64().unwrap() > 8, "{v}");
    assert_eq!(v["overlap_ms"], 0.0, "{v}");
    assert_eq!(v["released"], v["sections"], "{v}");
    assert_eq!(
        rows_of(tmp.path(), "redis-py") as u64,
        v["sections"].as_u64().unwrap()
    );
    // rslock, in process: the manifest's version is the one Cargo.lock pins.
    let v = variant(&s, "rslock");
    let lock = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.lock")).unwrap();
    let pinned = lock
        .split("[[package]]")
        .find(|p| p.contains("name = \"rslock\""))
        .and_then(|p| p.lines().find_map(|l| l.strip_prefix("version = ")))
        .unwrap()
        .trim_matches('"');
    assert_eq!(v["library"], format!("rslock {pinned}"), "{v}");
    assert!(v["sections"].as_u64().unwrap() > 8, "{v}");
    assert_eq!(v["overlap_ms"], 0.0, "{v}");
    assert_eq!(v["released"], v["sections"], "{v}");
    assert_eq!(
        rows_of(tmp.path(), "rslock") as u64,
        v["sections"].as_u64().unwrap()
    );

    let tmp = tempfile::tempdir().unwrap();
    let long: Vec<&str> = [
        &base[..],
        &["--ttl", "30ms", "--dist", "uniform(10ms,80ms)"],
    ]
    .concat();
    let (code, stderr, s) = compare("del,token,redis-py,rslock", &long, tmp.path(), &[]);
    assert_eq!(code, Some(0), "{stderr}");
    let lib = variant(&s, "redis-py");
    assert!(lib["overlap_ms"].as_f64().unwrap() > 0.0, "{lib}");
    assert!(lib["refused_unclassified"].as_u64().unwrap() > 0, "{lib}");
    assert_eq!(lib["wrongful_deletes"], 0, "{lib}");
    // rslock's unlock says nothing: its refusals are classified from the timeline.
    let lib = variant(&s, "rslock");
    assert!(lib["overlap_ms"].as_f64().unwrap() > 0.0, "{lib}");
    let refused =
        lib["refused_held_by_other"].as_u64().unwrap() + lib["refused_expired"].as_u64().unwrap();
    assert!(refused > 0, "{lib}");
    assert_eq!(lib["wrongful_deletes"], 0, "{lib}");
    assert_eq!(variant(&s, "token")["wrongful_deletes"], 0);
    assert!(
        variant(&s, "del")["wrongful_deletes"].as_u64().unwrap() > 0,
        "the negative control deletes other holders' locks"
    );
    let rows: u64 = ["del", "token", "redis-py", "rslock"]
        .iter()
        .map(|n| rows_of(tmp.path(), n) as u64)
        .sum();
    let sections: u64 = ["del", "token", "redis-py", "rslock"]
        .iter()
        .map(|n| variant(&s, n)["sections"].as_u64().unwrap())
        .sum();
    assert_eq!(rows, sections);
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(tmp.path().join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(manifest.get("leftover_keys"), None, "{manifest}");
    // The libraries' summaries follow the committed schema, as the built-in methods' do.
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("../../schema/summary.schema.json")).unwrap();
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(tmp.path().join("summary.json")).unwrap())
            .unwrap();
    let errors = common::schema::errors(&schema, &summary);
    assert!(errors.is_empty(), "{errors:#?}");
}

/// A name that is neither a release method nor a driver says which are.
#[test]
fn an_unknown_client_lists_the_drivers() {
    let o = common::lockbench(&["run", "--release", "redis-pie"]).output();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("redis-py") && err.contains("redlock5"),
        "{err}"
    );
    let o = common::lockbench(&["compare", "--client", "redis-pie"]).output();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--client redis-pie") && err.contains("redis-semaphore"),
        "{err}"
    );
}

/// A holder's stop-the-world pause stops its driver's process (SIGSTOP, then SIGCONT), so the
/// library's refresh timer stops with it, as in a GC pause: redis-semaphore's lock expires
/// under a 600 ms pause of a 200 ms TTL, another holder walks in (overlap), and the library
/// says the lock was lost (`onLockLost`, counted as extension failures). The control, the same
/// sections without pauses, never overlaps.
#[test]
fn a_paused_holder_freezes_its_library() {
    // The control's 50 ms sections stay under a 200 ms TTL only on an unloaded machine.
    let _cpu = common::alone();
    let run = |pause: &str| {
        let tmp = tempfile::tempdir().unwrap();
        let args = [
            "--workers",
            "3",
            "--keys",
            "1",
            "--ttl",
            "200ms",
            "--dist",
            "constant(50ms)",
            "--busy",
            "retry",
            "--duration",
            "3s",
            "--pause",
            pause,
        ];
        let (code, stderr, s) = compare("redis-semaphore", &args, tmp.path(), &[]);
        assert_eq!(code, Some(0), "{stderr}");
        variant(&s, "redis-semaphore").clone()
    };
    let paused = run("mixture(0.7*constant(0ms),0.3*constant(600ms))");
    assert!(paused["pauses"].as_u64().unwrap() > 0, "{paused}");
    assert!(paused["overlap_ms"].as_f64().unwrap() > 0.0, "{paused}");
    assert!(
        paused["extension_failures"].as_u64().unwrap() > 0,
        "{paused}"
    );
    let calm = run("constant(0ms)");
    assert_eq!(calm["overlap_ms"], 0.0, "{calm}");
    assert_eq!(calm["extension_failures"], 0, "{calm}");
}

/// Ctrl-C at a terminal reaches the whole foreground group: lockbench and, before, its drivers,
/// which died of it (the variant failed, exit 1, its figures lost). The drivers now run in a
/// group of their own, so the interrupt is lockbench's: it ends the run, says goodbye to its
/// drivers, and exits 130 with every file, the library's variant included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_at_the_terminal_ends_a_library_run_with_its_files() {
    let server = common::redis().await;
    let tmp = tempfile::tempdir().unwrap();
    let child = common::lockbench(&["compare", "--redis", &server.url(), "--release", "redis-py"])
        .args([
            "--workers",
            "2",
            "--keys",
            "1",
            "--ttl",
            "1s",
            "--dist",
            "constant(5ms)",
        ])
        .args(["--duration", "60s", "--quiet"])
        .out(tmp.path())
        .own_group()
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut conn = common::sync_conn(&server);
    common::wait_until(
        "the library's SETs",
        std::time::Duration::from_secs(30),
        || common::set_calls(&mut conn) >= 20,
    );
    let group = format!("-{}", child.id());
    let ok = std::process::Command::new("kill")
        .args(["-INT", "--", &group])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let o = child.wait_with_output();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{err}");
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(tmp.path().join("summary.json")).unwrap())
            .unwrap();
    let v = variant(&s, "redis-py");
    assert_eq!(
        rows_of(tmp.path(), "redis-py") as u64,
        v["sections"].as_u64().unwrap()
    );
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).unwrap();
    assert!(keys.is_empty(), "{keys:?}");
}

/// A library the run cannot carry out is refused before anything runs (it used to fail after
/// the other variants had run, exit 1): a store no library reaches.
#[test]
fn a_library_the_run_cannot_carry_out_is_refused_first() {
    let tmp = tempfile::tempdir().unwrap();
    let o = common::lockbench(&["compare", "--release", "del,token", "--client", "redis-py"])
        .args(["--backend", "memory"])
        .out(tmp.path())
        .output();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("client redis-py") && err.contains("needs a Redis server"),
        "{err}"
    );
    assert!(!tmp.path().join("summary.json").exists(), "nothing ran");
}

/// Settings of lockbench's own lock that no variant takes when every variant is a library are
/// refused by name (exit 2, nothing run) — they used to be ignored — and so is a shared
/// connection, which no driver process can share. With a built-in variant beside the library
/// the same fencing runs (it is the built-in variant's).
#[test]
fn settings_no_library_takes_are_refused_by_name() {
    for (args, says) in [
        (&["--fencing", "read-write"][..], "fencing (--fencing)"),
        (&["--extend", "ttl/3"][..], "extend (--extend)"),
        (
            &["--extend-with", "set-ifeq"][..],
            "extend_with (--extend-with)",
        ),
        (
            &["--on-unavailable", "fail-open"][..],
            "on_unavailable (--on-unavailable)",
        ),
        (&["--on-lost", "abort"][..], "on_lost (--on-lost)"),
        (&["--connection", "shared"][..], "connection = \"shared\""),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let o = common::lockbench(&["run", "--backend", "spawn", "--release", "redis-py"])
            .args(["--duration", "1s"])
            .args(args)
            .out(tmp.path())
            .output();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("client redis-py") && err.contains(says),
            "{args:?}: {err}"
        );
        assert!(!tmp.path().join("summary.json").exists(), "nothing ran");
    }
    let tmp = tempfile::tempdir().unwrap();
    let (code, err, s) = compare(
        "token,redis-py",
        &[
            "--fencing",
            "read-write",
            "--sections",
            "20",
            "--workers",
            "2",
        ],
        tmp.path(),
        &[],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(variant(&s, "token+fence-rw")["sections"], 20, "{s}");
}

/// A partition under a library: its connections take the run's command timeout, so each call
/// into the partition fails after it (the library's own timeout error, counted as a timeout
/// that opens an outage) and the run ends on time — it used to wait for the driver's reply
/// until lockbench gave the driver up, with no outage counted.
#[test]
fn a_partition_under_a_library_is_an_outage_and_the_run_ends_on_time() {
    let tmp = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let o = common::lockbench(&["run", "--backend", "spawn", "--release", "redis-py"])
        .args([
            "--workers",
            "2",
            "--keys",
            "2",
            "--ttl",
            "2s",
            "--dist",
            "constant(20ms)",
        ])
        .args(["--duration", "3s", "--command-timeout", "300ms"])
        .args(["--fault", "partition@1s+1s"])
        .out(tmp.path())
        .output();
    let took = started.elapsed();
    let err = common::text_of(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(tmp.path().join("summary.json")).unwrap())
            .unwrap();
    let v = &s["variants"][0];
    assert_eq!(v["variant"], "redis-py");
    assert!(v["outages"].as_u64() >= Some(1), "{v}");
    assert!(v["errors_by_kind"]["timeout"].as_u64() >= Some(1), "{v}");
    assert_eq!(v["errors_by_kind"]["other"], 0, "{v}");
    // Planned 3 s; the slowest call ends one command timeout after the window's end.
    assert_eq!(v["stop_reason"], "limit", "{v}");
    assert!(
        v["elapsed_s"].as_f64().unwrap() < 3.0 + 0.3 + 0.5,
        "the run ended late: {v}"
    );
    assert!(took.as_secs_f64() < 30.0, "{took:?}");
}

/// A holder crash under a library kills the holder's driver process (SIGKILL: no release, no
/// renewal) and starts a new one, as a supervisor restarts a crashed service: the server
/// accepts exactly one connection more per crash than the same run without crashes (each new
/// process connects as it is greeted), every crashed row has no release, and the dead holder's
/// lock blocks its key until its TTL runs out (never released early, never for ever), and
/// its section ends at its death (nobody overlaps a dead holder). Negative control: the run without crashes adds no connection and has no crashed row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_holder_s_process_is_killed_and_started_again() {
    let server = common::redis().await;
    // rslock, in process, drops its lock unreleased and opens a new lock manager (its retry
    // waits up to 200 ms at random, redis-py's 100 ms).
    for (lib, step_ms) in [("redis-py", 150.0), ("rslock", 250.0)] {
        crash_and_restart(&server, lib, step_ms);
    }
    server.stop().await;
}

fn crash_and_restart(server: &common::Server, lib: &str, step_ms: f64) {
    let mut admin = common::sync_conn(server);
    let accepted = common::connections_accepted;
    let tmp = tempfile::tempdir().unwrap();
    let mut added = Vec::new();
    for crash in [
        None,
        Some("holder-crash@300ms+600ms,probability=0.5,restart=50ms"),
    ] {
        let dir = tmp
            .path()
            .join(if crash.is_some() { "crash" } else { "calm" });
        let before = accepted(&mut admin);
        // Each holder's watch on a server connection of its own: the server then counts the
        // connections the library opened.
        let mut cmd = common::lockbench(&["run", "--release", lib, "--redis", &server.url()])
            .env("LOCKBENCH_WATCH", "per-holder")
            .args(["--workers", "3", "--keys", "1", "--ttl", "100ms"])
            .args([
                "--dist",
                "constant(50ms)",
                "--busy",
                "retry",
                "--duration",
                "1500ms",
            ])
            .args(["--seed", "4"]);
        if let Some(f) = crash {
            cmd = cmd.args(["--fault", f]);
        }
        let o = cmd.out(&dir).output();
        assert_eq!(o.status.code(), Some(0), "{}", common::text_of(&o));
        let s = &common::summaries(&dir)[0];
        let crashes = s["crashes"].as_u64().unwrap();
        let rows = common::events(&dir);
        let crashed = rows
            .iter()
            .filter(|r| r.outcome == lockbench::SectionOutcome::Crashed)
            .count() as u64;
        assert_eq!(crashed, crashes, "{s}");
        added.push((accepted(&mut admin) - before, crashes, s.clone()));
    }
    let [(calm, none, _), (crashing, crashes, s)] = &added[..] else {
        unreachable!()
    };
    assert_eq!(*none, 0);
    assert!(*crashes > 0, "no crash happened: {s}");
    assert_eq!(
        *crashing,
        calm + crashes,
        "{crashes} crashes: {calm} → {crashing} connections"
    );
    // Blocked until the TTL: typically at most the TTL after the crash (plus the retry's
    // step), and more than nothing (the lock was not released). A crash while the other
    // holders are restarting too waits for one of them to be back (their start takes hundreds
    // of ms on a loaded machine; 2.3 s seen with the machine's load at 9), so the longest is
    // bounded by the run, not by a figure of a quiet machine: a lock left without a TTL would
    // block the key to the run's end (censored, and a stuck lock).
    let blocked = &s["crash_blocked_ms"];
    assert!(
        blocked["p50"].as_f64().unwrap() <= 100.0 + step_ms,
        "{lib}: {blocked}"
    );
    assert!(
        blocked["max"].as_f64().unwrap() < s["elapsed_s"].as_f64().unwrap() * 1000.0,
        "{lib}: {blocked}"
    );
    // A block still open at the run's end (censored) is one whose key nobody took again before
    // the end — every other holder restarting too, slow to start beside compiles (seen with
    // the load at 9): not a lock left for ever, which `stuck_locks` below tells apart.
    // The dead holder's section ends at its death, not when its process is back (a restart
    // takes longer than the TTL here): nobody overlapped it.
    assert_eq!(s["overlap_ms"], 0.0, "{s}");
    assert_eq!(s["peak_holders"], 1, "{s}");
    assert!(blocked["p50"].as_f64().unwrap() > 0.0, "{lib}: {blocked}");
    assert_eq!(s["stuck_locks"], 0, "{lib}: {s}");
}

/// Quorum libraries take their lock on every instance of a Redlock (`--lock redlock`), as
/// lockbench's own Redlock does: contended sections shorter than the TTL never overlap, every
/// section has its row, and the summary has no lockbench Redlock block (the library counted
/// its quorums, not lockbench). A library of one server is refused by name (exit 2).
///
/// On a busy machine one acquisition once took 1.78 s against a 1 s TTL, and node-redlock's
/// drift check rightly refused the release of a lock that had expired on arrival: the figures
/// asserted are lockbench's invariants (every section released or refused, a refusal only for
/// a release the timeline shows stale, no overlap without a stale release) with a TTL (5 s)
/// that the load would have to stall an acquisition for to make any release stale at all.
#[test]
fn quorum_libraries_lock_every_instance_of_a_redlock() {
    for lib in ["pottery", "redlock5", "rslock"] {
        let tmp = tempfile::tempdir().unwrap();
        let o = common::lockbench(&[
            "run",
            "--lock",
            "redlock",
            "--instances",
            "3",
            "--release",
            lib,
        ])
        .args([
            "--workers",
            "3",
            "--keys",
            "1",
            "--ttl",
            "5s",
            "--dist",
            "constant(10ms)",
        ])
        .args(["--busy", "retry", "--sections", "30"])
        .out(tmp.path())
        .output();
        assert_eq!(o.status.code(), Some(0), "{lib}: {}", common::text_of(&o));
        let s = &common::summaries(tmp.path())[0];
        let n = |f: &str| {
            s[f].as_u64()
                .unwrap_or_else(|| panic!("{lib}: no {f}: {s}"))
        };
        assert_eq!(n("sections"), 30, "{lib}: {s}");
        let refused = n("refused_expired") + n("refused_held_by_other") + n("refused_unclassified");
        assert_eq!(
            n("released") + refused,
            30,
            "{lib}: every section released or refused: {s}"
        );
        assert_eq!(n("release_errors") + n("wrongful_deletes"), 0, "{lib}: {s}");
        // A refusal only where the lock had expired (the timeline's stale release); without a
        // stale release, no overlap and every release the holder's own.
        assert!(
            refused <= n("stale_releases"),
            "{lib}: a refusal of a live lock: {s}"
        );
        if n("stale_releases") == 0 {
            assert_eq!(s["overlap_ms"], 0.0, "{lib}: {s}");
            assert_eq!(n("released"), 30, "{lib}: {s}");
        }
        assert!(s.get("redlock").is_none_or(|r| r.is_null()), "{lib}: {s}");
        assert_eq!(rows_of(tmp.path(), lib), 30);
        let m: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(tmp.path().join("manifest.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(m["leftover_keys"], serde_json::Value::Null, "{lib}: {m}");
    }
    let tmp = tempfile::tempdir().unwrap();
    let o = common::lockbench(&[
        "run",
        "--lock",
        "redlock",
        "--instances",
        "3",
        "--release",
        "redis-py",
    ])
    .args(["--sections", "5"])
    .out(tmp.path())
    .output();
    let err = common::text_of(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("redis-py takes exactly one server, got 3"),
        "{err}"
    );
}

/// Every acquisition of a library that takes its lock with one `SET NX PX` is one `SET` at
/// the server: with no wait budget (fail-fast), the server's `SET` calls equal the run's
/// attempts exactly (redis-py's `Lock`, redis-semaphore's `Mutex`). Negative control: with a
/// wait budget (`--busy retry`) the library retries inside one attempt, and the server counts
/// more `SET`s than lockbench's attempts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempts_are_the_server_s_set_calls() {
    let server = common::redis().await;
    let mut admin = common::sync_conn(&server);
    let tmp = tempfile::tempdir().unwrap();
    for (lib, busy) in [
        ("redis-py", "fail-fast"),
        ("redis-semaphore", "fail-fast"),
        ("rslock", "fail-fast"),
        ("redis-py", "retry"),
        ("rslock", "retry"),
    ] {
        let dir = tmp.path().join(format!("{lib}-{busy}"));
        let before = common::set_calls(&mut admin);
        let o = common::lockbench(&["run", "--release", lib, "--redis", &server.url()])
            .args([
                "--workers",
                "3",
                "--keys",
                "1",
                "--ttl",
                "2s",
                "--dist",
                "constant(20ms)",
            ])
            .args(["--busy", busy, "--duration", "1s", "--seed", "2"])
            .out(&dir)
            .output();
        assert_eq!(o.status.code(), Some(0), "{lib}: {}", common::text_of(&o));
        let sets = common::set_calls(&mut admin) - before;
        let s = &common::summaries(&dir)[0];
        let attempts = s["attempts"].as_u64().unwrap();
        if busy == "fail-fast" {
            assert!(s["rejections"].as_u64() > Some(0), "{lib}: contended: {s}");
            assert_eq!(sets, attempts, "{lib}: SET calls = attempts");
        } else {
            assert!(
                sets > attempts,
                "{lib} {busy}: {sets} SETs, {attempts} attempts"
            );
        }
    }
    server.stop().await;
}

/// Ctrl-C while a library's driver hangs ends the run at once, as interrupted (exit 130), with
/// its files: the stop does not wait for a reply that will not come (it used to wait out the
/// driver's patience, 40 s, and then exit 1 as a broken driver) — also when the Ctrl-C comes
/// after the run's end has stopped the workers (a 200 ms run, whose stop comes 5 s after its
/// end: the stop awaited the reply and missed a later Ctrl-C until the driver's patience, 40 s
/// from the section's start, ran out, then exited 1).
#[test]
fn ctrl_c_does_not_wait_for_a_hung_driver() {
    for duration in ["60s", "200ms"] {
        ctrl_c_while_a_driver_hangs(duration);
    }
}

fn ctrl_c_while_a_driver_hangs(duration: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let fake = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/fake-drivers");
    let mark = tmp.path().join("breaking");
    let mut child = common::lockbench(&["run", "--backend", "spawn", "--release", "redis-py"])
        .args(["--workers", "2", "--keys", "1", "--dist", "constant(5ms)"])
        .args(["--duration", duration, "--quiet"])
        // The fake driver hangs its whole process: a process each, so that the holder that
        // did not hang is answered (the hang of a shared process holds all its holders).
        .args(["--holders-per-process", "1"])
        .env("LOCKBENCH_DRIVERS_ROOT", fake)
        .env("FAKE_DRIVER", "hang")
        .env("FAKE_DRIVER_MARK", &mark)
        .out(tmp.path().join("run"))
        .own_group()
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    common::wait_until("a driver hangs", std::time::Duration::from_secs(30), || {
        std::fs::read_dir(tmp.path()).unwrap().any(|e| {
            e.unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("breaking.")
        })
    });
    if duration == "200ms" {
        // The hang began after the run's start, so the run's end (200 ms) and the stop that
        // follows it (5 s later, `end_grace`) have come 5.6 s after the mark.
        std::thread::sleep(std::time::Duration::from_millis(5_600));
    }
    common::signal("-INT", child.id());
    // Well under the driver's patience (4 × the command timeout: 40 s from the hang), with
    // room for the files of a loaded machine.
    let code = child.exit_code_within(std::time::Duration::from_secs(15));
    let o = child.wait_with_output();
    assert_eq!(code, Some(130), "{duration}: {}", common::text_of(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("the run stopped while redis-py was acquiring"),
        "{duration}: {err}"
    );
    assert!(tmp.path().join("run/summary.json").exists());
}

/// A driver that cannot be greeted — it exits at once, or replies with a line of 8 MiB — fails
/// the run (exit 1) with an error naming the client and what it did, and leaves no `--out`
/// behind: nothing ran, and a manifest there made the next run refuse the directory as
/// holding a run. The long line is read no further than 1 MiB (lockbench read it all: a line
/// that never ends grew its memory without bound).
#[test]
fn a_driver_that_cannot_be_greeted_leaves_no_out_directory() {
    let fake = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/fake-drivers");
    for (mode, says) in [
        ("exit-at-hello", "died"),
        ("long-line-at-hello", "wrote a line longer than 1 MiB"),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("run");
        let o = common::lockbench(&["run", "--backend", "spawn", "--release", "redis-py"])
            .args(["--workers", "2", "--duration", "1s", "--quiet"])
            .env("LOCKBENCH_DRIVERS_ROOT", fake)
            .env("FAKE_DRIVER", mode)
            .out(&out)
            .output();
        let err = common::text_of(&o);
        assert_eq!(o.status.code(), Some(1), "{mode}: {err}");
        assert!(
            // Either holder's greeting may fail first: they start together.
            err.contains("client redis-py (holder ") && err.contains(says),
            "{mode}: {err}"
        );
        assert!(!out.exists(), "{mode}: a partial --out was left");
    }
}

/// The drivers come from `LOCKBENCH_DRIVERS_ROOT`, else the checkout the binary sits in, else
/// the source tree it was built from. A binary copied into another checkout runs that
/// checkout's drivers (here the fake ones, which break at their greeting); it used to run the
/// build tree's, whatever checkout it was in. A `LOCKBENCH_DRIVERS_ROOT` that holds no
/// drivers is bad input (exit 2) naming it and what it must hold.
#[test]
fn drivers_come_from_the_binary_s_checkout_or_the_named_root() {
    let fake = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fake-drivers");
    let tmp = tempfile::tempdir().unwrap();
    let checkout = tmp.path().join("checkout");
    std::fs::create_dir_all(checkout.join("scripts")).unwrap();
    std::fs::create_dir_all(checkout.join("target/release")).unwrap();
    std::fs::copy(fake.join("fake.py"), checkout.join("fake.py")).unwrap();
    std::fs::copy(
        fake.join("scripts/drivers.sh"),
        checkout.join("scripts/drivers.sh"),
    )
    .unwrap();
    let exe = checkout.join("target/release/lockbench");
    std::fs::copy(env!("CARGO_BIN_EXE_lockbench"), &exe).unwrap();
    let run = |root: Option<&Path>| {
        let mut cmd = std::process::Command::new(&exe);
        cmd.args(["run", "--backend", "spawn", "--release", "redis-py"])
            .args(["--workers", "1", "--duration", "300ms", "--quiet"])
            .arg("--out")
            .arg(tmp.path().join(format!("out-{}", root.is_some())))
            .env("FAKE_DRIVER", "exit-at-hello")
            .env_remove("LOCKBENCH_DRIVERS_ROOT");
        if let Some(r) = root {
            cmd.env("LOCKBENCH_DRIVERS_ROOT", r);
        }
        cmd.output().unwrap()
    };
    let o = run(None);
    let text = common::text_of(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.contains("fake driver: breaking at hello"), "{text}");
    let o = run(Some(&tmp.path().join("nowhere")));
    let text = common::text_of(&o);
    assert_eq!(o.status.code(), Some(2), "{text}");
    assert!(
        text.contains("LOCKBENCH_DRIVERS_ROOT=") && text.contains("has no scripts/drivers.sh"),
        "{text}"
    );
}

/// Ctrl-C while a library's drivers are being greeted (they never answer) ends lockbench at
/// once as interrupted (exit 130), leaves no `--out` behind (nothing ran) and no driver process
/// (the fake one would sleep an hour). It used to wait out the greeting's 30 s, and leave a
/// manifest that made the next run refuse the directory. Two processes of two holders each,
/// started together.
#[test]
fn ctrl_c_during_a_driver_s_greeting_stops_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let fake = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/fake-drivers");
    let mark = tmp.path().join("greeting");
    let out = tmp.path().join("run");
    let mut child = common::lockbench(&["run", "--backend", "spawn", "--release", "redis-py"])
        .args(["--workers", "4", "--holders-per-process", "2"])
        .args(["--duration", "60s", "--quiet"])
        .env("LOCKBENCH_DRIVERS_ROOT", fake)
        .env("FAKE_DRIVER", "hang-at-hello")
        .env("FAKE_DRIVER_MARK", &mark)
        .out(&out)
        .own_group()
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    common::wait_until(
        "a driver's greeting",
        std::time::Duration::from_secs(30),
        || {
            std::fs::read_dir(tmp.path()).unwrap().any(|e| {
                e.unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with("greeting.")
            })
        },
    );
    common::signal("-INT", child.id());
    // Well under the greeting's patience (30 s), with room for a loaded machine.
    let code = child.exit_code_within(std::time::Duration::from_secs(15));
    let o = child.wait_with_output();
    assert_eq!(code, Some(130), "{}", common::text_of(&o));
    assert!(!out.exists(), "a partial --out was left");
    // Every driver that was greeted (its mark names its pid) is gone, or a zombie awaiting
    // its reaper.
    let pids: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            name.strip_prefix("greeting.").map(str::to_string)
        })
        .collect();
    assert!(!pids.is_empty());
    let alive = |pid: &str| {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| !r.trim_start().starts_with('Z'))
        })
    };
    common::wait_until(
        "the drivers gone",
        std::time::Duration::from_secs(5),
        || !pids.iter().any(|p| alive(p)),
    );
}

/// In a compare, a library that refuses the run's settings is refused before anything runs
/// (exit 2, nothing measured), not after the built-in variants before it have run (it used to
/// end in exit 1 with their results).
#[test]
fn a_library_s_refusal_in_a_compare_comes_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let o = common::lockbench(&[
        "compare",
        "--backend",
        "spawn",
        "--release",
        "token,python-redis-lock",
    ])
    .args(["--ttl", "500ms", "--duration", "1s"])
    .out(tmp.path())
    .output();
    let err = common::text_of(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("refused the run's settings at hello"), "{err}");
    assert!(!tmp.path().join("summary.json").exists(), "nothing ran");
}

/// python-redis-lock with `auto_renewal` leaves a crashed holder's key unused for a waiter's
/// whole wait budget, not the TTL: its waiters sleep in `BLPOP` on the lock's signal list with
/// the budget as timeout (without renewal the library caps it at the TTL, l. 225–229 of its
/// 4.0.1), and only a release pushes that signal — a crash pushes none. The first section
/// crashes (probability 1 in the first 100 ms), 2 holders, TTL 1 s, a budget of 3 s: the
/// renewing library's key stays blocked ≥ 2 s; the same library without renewal (the control,
/// same seed and crash) ≤ 1.4 s (the TTL, Redis's 100 ms timeout check, the retry).
#[test]
fn a_crashed_python_redis_lock_renew_holder_blocks_its_key_for_the_wait_budget() {
    let _cpu = common::shared();
    let tmp = tempfile::tempdir().unwrap();
    let profile = tmp.path().join("wait3s.toml");
    std::fs::write(&profile, "busy = \"retry\"\n[retry]\nmax_wait = \"3s\"\n").unwrap();
    for lib in ["python-redis-lock-renew", "python-redis-lock"] {
        let dir = tmp.path().join(lib);
        let o = common::lockbench(&["run", profile.to_str().unwrap(), "--backend", "spawn"])
            .args([
                "--release",
                lib,
                "--workers",
                "2",
                "--keys",
                "1",
                "--ttl",
                "1s",
            ])
            .args([
                "--dist",
                "constant(300ms)",
                "--duration",
                "4s",
                "--seed",
                "1",
            ])
            .args([
                "--fault",
                "holder-crash@0ms+100ms,probability=1,restart=100ms",
            ])
            .out(&dir)
            .output();
        assert_eq!(o.status.code(), Some(0), "{lib}: {}", common::text_of(&o));
        let s = &common::summaries(&dir)[0];
        assert_eq!(s["crashes"], 1, "{lib}: {s}");
        assert_eq!(s["crash_blocked_censored"], 0, "{lib}: {s}");
        let blocked = &s["crash_blocked_ms"];
        if lib.ends_with("-renew") {
            assert!(
                blocked["p50"].as_f64().unwrap() >= 2000.0,
                "{lib}: {blocked}"
            );
        } else {
            assert!(
                blocked["max"].as_f64().unwrap() <= 1400.0,
                "{lib}: {blocked}"
            );
        }
    }
}

/// rslock keeps 1 % + 2 ms of a TTL for clock drift: a TTL it cannot keep any of is refused
/// before the run (exit 2, naming it), not turned into a run of errors; 3 ms is accepted and
/// runs. (Whether its acquisitions then fit the 0.97 ms left is the machine's: on a busy one
/// rslock itself refuses some, and the run reports them as errors — exit 1, never 2.)
#[test]
fn rslock_refuses_a_ttl_it_cannot_keep() {
    let tmp = tempfile::tempdir().unwrap();
    for (ttl, refused) in [("2ms", true), ("3ms", false)] {
        let dir = tmp.path().join(ttl);
        let o = common::lockbench(&["run", "--backend", "spawn", "--release", "rslock"])
            .args(["--ttl", ttl, "--dist", "constant(0ms)", "--sections", "3"])
            .out(&dir)
            .output();
        let text = common::text_of(&o);
        assert_eq!(
            text.contains("rslock cannot take a TTL of 2 ms"),
            refused,
            "{text}"
        );
        if refused {
            assert_eq!(o.status.code(), Some(2), "{ttl}: {text}");
            assert!(
                !dir.join("summary.json").exists(),
                "{ttl}: refused, yet it ran"
            );
        } else {
            assert!(matches!(o.status.code(), Some(0 | 1)), "{ttl}: {text}");
            let s = &common::summaries(&dir)[0];
            assert!(
                s["attempts"].as_u64() > Some(0),
                "{ttl}: it did not run: {s}"
            );
        }
    }
}

/// Every library lockbench drives, in one compare on one private server, the same seed:
/// contended sections far shorter than the TTL never overlap, every release is the holder's
/// own, `events.csv` has a row per section, and no key of the run is left on the server. (The
/// negative controls — overlap when sections outlast the TTL, wrongful deletes of a plain
/// `DEL` — are in the tests above and in `watch.rs`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_library_keeps_contended_short_sections_apart() {
    let server = common::redis().await;
    let mut conn = common::sync_conn(&server);
    let tmp = tempfile::tempdir().unwrap();
    let all: Vec<&str> = lockbench::Client::ALL.iter().map(|c| c.name()).collect();
    let releases = all.join(",");
    let o = common::lockbench(&["compare", "--redis", &server.url(), "--release", &releases])
        // Whole seconds for python-redis-lock; over 600 ms for redlock5's `using()`.
        .args(["--workers", "3", "--keys", "1", "--ttl", "2s"])
        .args([
            "--dist",
            "constant(5ms)",
            "--busy",
            "retry",
            "--sections",
            "12",
        ])
        .args(["--seed", "7"])
        .out(tmp.path())
        .output();
    assert_eq!(o.status.code(), Some(0), "{}", common::text_of(&o));
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(tmp.path().join("summary.json")).unwrap())
            .unwrap();
    for lib in &all {
        let v = variant(&s, lib);
        assert_eq!(v["sections"], 12, "{lib}: {v}");
        assert_eq!(v["overlap_ms"], 0.0, "{lib}: {v}");
        assert_eq!(v["peak_holders"], 1, "{lib}: {v}");
        assert_eq!(v["released"], 12, "{lib}: {v}");
        assert_eq!(v["errors"], 0, "{lib}: {v}");
        assert_eq!(rows_of(tmp.path(), lib), 12, "{lib}");
    }
    let keys: u64 = redis::cmd("DBSIZE").query(&mut conn).unwrap();
    assert_eq!(keys, 0, "keys of the run are left");
    server.stop().await;
}

/// A library's section opens when its acquire returned, by the driver's stamp, not when the
/// `held` line reaches lockbench (issue 43). The drivers' test hook holds holder 0's `held` line
/// back 150 ms (what a loaded machine does to it) with a TTL of 100 ms and sections of 60 ms on
/// one key: holder 0's lock expires while its line is on the way, and holder 1, which tries
/// every 100 ms (redis-py's sleep), takes the key before holder 0's section, as lockbench times
/// it on the line's arrival, ends (150 + 60 ms after the acquire). Timed by the stamps (the
/// section then lasts its 60 ms from the acquire, so it ends as the line arrives), every
/// section of holder 0 includes the lag (all overrun) and the overlaps are explained by the
/// excesses. The negative control, the same run timed on the lines' arrival
/// (`LOCKBENCH_DRIVER_TIMES=off`, as before the fix): overlap without one overrun, the contract
/// of DESIGN (overlap time ≤ sum of excesses) broken.
#[test]
fn a_library_s_section_starts_when_its_driver_says_the_lock_was_held() {
    let _cpu = common::alone();
    const LAG_MS: u64 = 150;
    let lag = LAG_MS.to_string();
    let args = [
        "--workers",
        "2",
        "--keys",
        "1",
        "--ttl",
        "100ms",
        "--dist",
        "constant(60ms)",
        // Each holder thinks after its release: holder 1 does not starve holder 0.
        "--think",
        "constant(100ms)",
        "--busy",
        "retry",
        "--duration",
        "3s",
        "--seed",
        "3",
    ];
    let run = |times: &str| {
        let tmp = tempfile::tempdir().unwrap();
        let env = [
            ("LOCKBENCH_DRIVER_HELD_LAG_MS", lag.as_str()),
            ("LOCKBENCH_DRIVER_HELD_LAG_HOLDERS", "0"),
            ("LOCKBENCH_DRIVER_TIMES", times),
        ];
        let (code, stderr, s) = compare("redis-py", &args, tmp.path(), &env);
        assert_eq!(code, Some(0), "{stderr}");
        let v = variant(&s, "redis-py").clone();
        let lagged: Vec<u64> = common::events(tmp.path())
            .iter()
            .filter(|r| r.worker == 0)
            .map(|r| r.duration_us)
            .collect();
        assert!(!lagged.is_empty(), "holder 0 held no section: {v}");
        // The summary's overlap (from the sections' intervals) is what `report` recomputes
        // from events.csv.
        let o = common::lockbench(&["report"]).arg(tmp.path()).output();
        assert_eq!(o.status.code(), Some(0), "{}", common::text_of(&o));
        (v, lagged)
    };
    let ms = |v: &serde_json::Value, f: &str| v[f].as_f64().unwrap_or_else(|| panic!("{f}: {v}"));

    let (v, lagged) = run("on");
    assert!(
        lagged.iter().all(|&d| d >= LAG_MS * 1000),
        "every section of holder 0 includes its {LAG_MS} ms lag: {lagged:?}"
    );
    assert!(
        v["overruns"].as_u64().unwrap() >= lagged.len() as u64,
        "{v}"
    );
    // The excess of a section is counted from its acquire's reply, the lock's expiry from the
    // server's SET, a round trip earlier (and in whole ms): 2 ms per incident covers that.
    let slack = 2.0 * v["overlap_incidents"].as_f64().unwrap_or(0.0);
    assert!(
        ms(&v, "overlap_ms") <= ms(&v, "excess_total_ms") + slack,
        "overlap time <= sum of excesses: {v}"
    );

    let (v, lagged) = run("off");
    assert!(
        lagged.iter().all(|&d| d < 100_000),
        "timed on arrival, holder 0's sections miss the lag: {lagged:?}"
    );
    assert_eq!(v["overruns"], 0, "{v}");
    assert!(
        ms(&v, "overlap_ms") > 0.0,
        "the negative control: overlap with no overrun to explain it: {v}"
    );
}
