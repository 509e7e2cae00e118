//! The demos of the article's other rules and idioms: setnx-expire, fail-open, dedup-window and
//! one-time-token, on the memory model (where they can run) and on a private redis-server,
//! through the library and through the binary; every key is gone at the end. And
//! stale-release on several servers side by side (`--redis-server`, issue 17): Redis 7.0,
//! Redis 8.2 and Valkey 8.1. And every step a story shows is the command the server ran,
//! read back from MONITOR (issue 31, item 5).

use crate::common;

use common::{redis, sync_conn};
use lockbench::MemoryStore;
use lockbench::RedisConnector;
use lockbench::SpawnedRedis;
use lockbench::Timeouts;
use lockbench::demo::side_by_side::{RUN_ID, differences};
use lockbench::demo::{
    Transcript, dedup_window, fail_open, one_time_token, setnx_expire, stale_release,
};
use lockbench::{Connector, KeySweep, LockConn};
use std::time::Duration;

/// Runs `$scenario(&mut conn, backend_name)` on a fresh model and on a private server, and
/// checks that each is left empty.
macro_rules! on_both {
    ($scenario:ident) => {{
        let mut m = MemoryStore::new(Duration::from_micros(100), true);
        $scenario(&mut m, "memory").await;
        assert!(m.is_empty(), "memory: keys left behind");
        let server = redis().await;
        let conn = RedisConnector::new(&server.url(), Timeouts::default(), false).unwrap();
        let mut r = conn.connect().await.unwrap();
        $scenario(&mut r, "redis").await;
        assert_eq!(dbsize(&server), 0, "redis: keys left behind");
        server.stop().await;
    }};
}

fn dbsize(server: &SpawnedRedis) -> i64 {
    redis::cmd("DBSIZE").query(&mut sync_conn(server)).unwrap()
}

/// (act, who, first word of the command, reply) of every step.
fn rows(steps: &[lockbench::demo::Step]) -> Vec<(String, String, String, String)> {
    steps
        .iter()
        .map(|s| {
            let verb = s.command.split_whitespace().next().unwrap().to_string();
            (s.act.to_string(), s.who.to_string(), verb, s.reply.clone())
        })
        .collect()
}
fn expect(v: &[(&str, &str, &str, &str)]) -> Vec<(String, String, String, String)> {
    v.iter()
        .map(|(a, b, c, d)| (a.to_string(), b.to_string(), c.to_string(), d.to_string()))
        .collect()
}
/// A PTTL reply of a key that has an expiry, replaced by `(integer) >0` for comparison.
fn positive_ttls(
    mut r: Vec<(String, String, String, String)>,
) -> Vec<(String, String, String, String)> {
    for row in &mut r {
        if row.2 == "PTTL" {
            let n: i64 = row.3.trim_start_matches("(integer) ").parse().unwrap();
            if n > 0 {
                row.3 = "(integer) >0".into();
            }
        }
    }
    r
}

async fn setnx_pexpire_scenario<C: LockConn>(c: &mut C, backend: &str) {
    let k = format!("lockbench:test:{backend}:setnx");
    assert!(c.setnx(&k, "a").await.unwrap(), "{backend}");
    assert!(!c.setnx(&k, "b").await.unwrap(), "{backend}");
    assert_eq!(c.get(&k).await.unwrap().as_deref(), Some("a"), "{backend}");
    assert_eq!(
        c.pttl(&k).await.unwrap(),
        -1,
        "{backend}: SETNX sets no expiry"
    );
    let sent = std::time::Instant::now();
    assert!(c.pexpire(&k, 50).await.unwrap(), "{backend}");
    let t = c.pttl(&k).await.unwrap();
    // PTTL counts down from the 50 ms just set, in whole milliseconds: never above 50, and at
    // least 50 less the time the two commands took (plus one for the rounding). Only when they
    // took the whole TTL (a loaded machine) may the key be gone (-2) or at 0.
    let took = i64::try_from(sent.elapsed().as_millis()).unwrap();
    let least = 50 - took - 1;
    if least >= 1 {
        assert!(
            (least..=50).contains(&t),
            "{backend}: {t} ({took} ms later)"
        );
    } else {
        assert!(
            t == -2 || (0..=50).contains(&t),
            "{backend}: {t} ({took} ms later)"
        );
    }
    tokio::time::sleep(Duration::from_millis(80)).await;
    assert_eq!(c.exists(&k).await.unwrap(), 0, "{backend}: expired");
    assert!(!c.pexpire(&k, 50).await.unwrap(), "{backend}: absent key");
    assert!(c.setnx(&k, "c").await.unwrap(), "{backend}");
    assert!(c.pexpire(&k, 0).await.unwrap(), "{backend}");
    assert_eq!(
        c.exists(&k).await.unwrap(),
        0,
        "{backend}: PEXPIRE 0 deletes"
    );
}

/// `SETNX` sets a key without expiry, `PEXPIRE` gives an existing key one (0 deletes it) and
/// answers 0 for an absent key: the same on the model and on Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setnx_and_pexpire_follow_redis_semantics() {
    on_both!(setnx_pexpire_scenario);
}

async fn setnx_expire_scenario<C: LockConn>(c: &mut C, backend: &str) {
    let key = format!("lockbench:test:{backend}:demo:setnx-expire:lock");
    let mut out = Vec::new();
    let steps = setnx_expire(c, &key, Duration::from_millis(60), &mut out)
        .await
        .unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(
        positive_ttls(rows(&steps)),
        expect(&[
            // When A lives to send both commands.
            ("setnx", "A", "SETNX", "(integer) 1"),
            ("setnx", "A", "PEXPIRE", "(integer) 1"),
            ("setnx", "observer", "PTTL", "(integer) >0"),
            ("setnx", "A", "EVAL", "(integer) 1"),
            // A crashes between them: no expiry, B refused, still so after the wait.
            ("setnx", "A", "SETNX", "(integer) 1"),
            ("setnx", "observer", "PTTL", "(integer) -1"),
            ("setnx", "B", "SET", "(nil)"),
            ("setnx", "observer", "PTTL", "(integer) -1"),
            ("setnx", "B", "SET", "(nil)"),
            ("setnx", "operator", "DEL", "(integer) 1"),
            ("setnx", "B", "SET", "OK"),
            ("setnx", "B", "EVAL", "(integer) 1"),
            // The control: SET NX PX and the same crash; B acquires after the TTL.
            ("set-nx-px", "A", "SET", "OK"),
            ("set-nx-px", "observer", "PTTL", "(integer) >0"),
            ("set-nx-px", "B", "SET", "(nil)"),
            ("set-nx-px", "observer", "EXISTS", "(integer) 0"),
            ("set-nx-px", "B", "SET", "OK"),
            ("set-nx-px", "B", "EVAL", "(integer) 1"),
        ]),
        "{backend}: {text}"
    );
    assert!(text.contains("still -1 after"), "{backend}: {text}");
    assert!(
        text.contains("polling PTTL every") && text.contains("polling EXISTS every"),
        "{backend}: the waits are announced: {text}"
    );
}

/// `demo setnx-expire`: after `SETNX` and a crash before `EXPIRE`, `PTTL` is -1 and B is
/// refused before and after a wait longer than the intended TTL, until a `DEL`; with
/// `SET NX PX` and the same crash B acquires once the TTL has run out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_setnx_expire_sticks_and_set_nx_px_frees() {
    on_both!(setnx_expire_scenario);
}

async fn dedup_scenario<C: LockConn>(c: &mut C, backend: &str) {
    let key = format!("lockbench:test:{backend}:demo:dedup:hb:42");
    let mut out = Vec::new();
    let steps = dedup_window(c, &key, Duration::from_millis(80), &mut out)
        .await
        .unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(
        rows(&steps),
        expect(&[
            ("dedup", "first", "SET", "OK"),
            ("dedup", "dup", "SET", "(nil)"),
            ("dedup", "observer", "EXISTS", "(integer) 0"),
            ("dedup", "later", "SET", "OK"),
            ("dedup", "cleanup", "DEL", "(integer) 1"),
        ]),
        "{backend}: {text}"
    );
    assert!(
        steps[0].command.ends_with(&format!("{key} 1 NX PX 80")),
        "{backend}: a fixed value and the window as the TTL: {}",
        steps[0].command
    );
    assert!(
        text.contains("waiting for the window to close: polling EXISTS"),
        "{text}"
    );
}

/// `demo dedup-window`: the first `SET NX` with a fixed value passes, a duplicate inside the
/// window is refused, and after the window (polled) the next one passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_dedup_window_drops_duplicates_then_reopens() {
    on_both!(dedup_scenario);
}

async fn token_scenario<C: LockConn>(c: &mut C, backend: &str) {
    let key = format!("lockbench:test:{backend}:demo:one-time-token:tok:abc");
    let steps = one_time_token(c, &key, Vec::new()).await.unwrap();
    assert_eq!(
        rows(&steps),
        expect(&[
            ("token", "issuer", "SET", "OK"),
            ("token", "first", "GETDEL", "\"tok\""),
            ("token", "second", "GETDEL", "(nil)"),
            ("token", "observer", "EXISTS", "(integer) 0"),
        ]),
        "{backend}"
    );
}

/// `demo one-time-token`: `GETDEL` gives the token to the first caller and nil to the next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_one_time_token_goes_to_the_first_caller() {
    on_both!(token_scenario);
}

/// `demo fail-open` on a paused private server: A and B time out and proceed without a lock;
/// with connections closed on the timeout neither `SET` ever runs (both see the key absent);
/// with A's connection kept its `SET` runs when the pause ends (the key holds tokA, B is
/// refused) and A's token releases it. Nothing is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_fail_open_both_proceed_without_a_lock() {
    let server = redis().await;
    let key = "lockbench:test:demo:fail-open:lock";
    let mut out = Vec::new();
    let steps = fail_open(
        &server.url(),
        false,
        key,
        Duration::from_millis(800),
        Duration::from_millis(100),
        &mut out,
    )
    .await
    .unwrap();
    let text = String::from_utf8(out).unwrap();
    let gave_up = "(no reply within 100ms: the client gave up)";
    assert_eq!(
        positive_ttls(rows(&steps)),
        expect(&[
            ("close", "admin", "CLIENT", "OK"),
            ("close", "A", "SET", gave_up),
            ("close", "B", "SET", gave_up),
            ("close", "A", "EXISTS", "(integer) 0"),
            ("close", "B", "EXISTS", "(integer) 0"),
            ("keep", "admin", "CLIENT", "OK"),
            ("keep", "A", "SET", gave_up),
            ("keep", "observer", "GET", "\"tokA\""),
            ("keep", "observer", "PTTL", "(integer) >0"),
            ("keep", "B", "SET", "(nil)"),
            ("keep", "A", "EVAL", "(integer) 1"),
        ]),
        "{text}"
    );
    assert!(
        text.contains("degrading to lock-free") && text.contains("CLIENT PAUSE 800 ALL"),
        "{text}"
    );
    assert_eq!(dbsize(&server), 0);
    server.stop().await;
}

/// Runs the binary's demo and returns (exit code, stdout, stderr).
fn demo(args: &[&str]) -> (i32, String, String) {
    let o = common::Lockbench::new().arg("demo").args(args).output();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The key replies of each new story as the binary prints them, on the memory model and on a
/// private server given by `--redis URL` (left with no key), and one story on `--backend
/// spawn`. `fail-open` on the model exits 2 saying it needs a real server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_binary_prints_every_new_story() {
    let server = redis().await;
    let url = server.url();
    let stories: [(&str, &[&str]); 4] = [
        (
            "setnx-expire",
            &["(integer) -1", "still -1 after", "OK\n", "B is in."],
        ),
        (
            "dedup-window",
            &["(nil)", "gone after", "the window reopened"],
        ),
        ("one-time-token", &["\"tok\"", "(nil)"]),
        ("fail-open", &["degrading to lock-free", "\"tokA\""]),
    ];
    for (story, wanted) in stories {
        for backend in ["memory", "url"] {
            if story == "fail-open" && backend == "memory" {
                continue;
            }
            let mut args = vec![story, "--ttl", "50ms", "--backend", backend];
            if backend == "url" {
                args.extend(["--redis", &url]);
            }
            let (code, out, err) = demo(&args);
            assert_eq!(code, 0, "{story} on {backend}: {err}\n{out}");
            for w in wanted {
                assert!(
                    out.contains(w),
                    "{story} on {backend}: {w:?} missing:\n{out}"
                );
            }
            assert!(out.contains(":demo:"), "{story}: keys under the run prefix");
        }
        assert_eq!(dbsize(&server), 0, "{story}: keys left on the server");
    }
    let (code, out, err) = demo(&["one-time-token", "--backend", "spawn"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"tok\"") && out.contains("redis "), "{out}");
    let (code, _, err) = demo(&["fail-open", "--backend", "memory"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("needs a real server"), "{err}");
    server.stop().await;
}

/// The path of Debian's `redis-server` (7.0).
fn which_redis_server() -> String {
    common::redis_server_path().display().to_string()
}

/// The reply line under each `A> DELEX …` line of a transcript, in order.
fn delex_replies(out: &str) -> Vec<String> {
    let lines: Vec<&str> = out.lines().collect();
    lines
        .windows(2)
        .filter(|w| w[0].trim_start().starts_with("A> DELEX "))
        .map(|w| w[1].trim_start().to_string())
        .collect()
}

/// What Redis 7.0, Redis 8.2 and Valkey 8.1 all answer to `DELEX key IFEQ tokA` (checked with
/// redis-cli on each): the command name as sent (redis-rs sends it upper-case) and the
/// arguments echoed, with a trailing space.
fn unknown_delex(key: &str) -> String {
    format!("(error) ERR unknown command 'DELEX', with args beginning with: '{key}' 'IFEQ' 'tokA' ")
}

/// Runs `demo stale-release` on `servers` through the binary and checks what every run
/// shares: exit 0, one header per server naming its version and path, one `DELEX` step per
/// server answered with the server's own unknown-command error (its own key echoed), and the
/// side-by-side verdict. Returns stdout.
fn stale_release_on(servers: &[(&str, String)]) -> String {
    let mut args = vec!["stale-release", "--ttl", "50ms"];
    for (_, path) in servers {
        args.extend(["--redis-server", path]);
    }
    let (code, out, err) = demo(&args);
    assert_eq!(code, 0, "{err}\n{out}");
    let n = servers.len();
    for (i, (version, path)) in servers.iter().enumerate() {
        let header = format!("=== server {} of {n}: {version}", i + 1);
        let at = out
            .find(&header)
            .unwrap_or_else(|| panic!("no header {header:?}:\n{out}"));
        assert!(
            out[at..]
                .lines()
                .next()
                .unwrap()
                .ends_with(&format!("({path}) ===")),
            "the header names the binary {path}:\n{out}"
        );
        assert!(
            out.contains(&format!("  [{}] {version}", i + 1)),
            "{version} in the side-by-side list:\n{out}"
        );
    }
    let keys: Vec<&str> = out
        .lines()
        .filter_map(|l| l.strip_prefix("stale-release demo against "))
        .map(|l| l.rsplit_once("; key ").unwrap().1)
        .collect();
    assert_eq!(keys.len(), n, "one banner per server:\n{out}");
    let expected: Vec<String> = keys.iter().map(|k| unknown_delex(k)).collect();
    assert_eq!(delex_replies(&out), expected, "{out}");
    assert!(
        keys.windows(2).all(|w| w[0] != w[1]),
        "each server's run has its own run id, so the comparison had to normalise it: {keys:?}"
    );
    assert!(out.contains("\n=== side by side: "), "{out}");
    out
}

/// Issue 17's check: `demo stale-release` on Redis 7.0 (`redis-server` on PATH) and Redis 8.2
/// (`scripts/servers.sh`) prints both transcripts, and the comparison finds that they differ
/// only in the version line; the `DELEX` step is "unknown command" on both, in each server's
/// own words (`ERR unknown command 'DELEX', with args beginning with: '<its key>' …`).
#[test]
fn demo_stale_release_on_redis_7_0_and_8_2_differs_only_in_the_version_line() {
    let redis82 = common::extra_server("redis-8.2").display().to_string();
    let out = stale_release_on(&[
        ("redis 7.0.", which_redis_server()),
        ("redis 8.2.3", redis82),
    ]);
    assert!(
        out.contains("the version line differs:\n  [1] redis 7.0.")
            && out.contains("\n  [2] redis 8.2.3\n"),
        "{out}"
    );
    assert!(
        out.contains("no reply differs (17 steps compared")
            && out.contains("the servers differ only in the version line."),
        "{out}"
    );
}

/// Valkey 8.1 against Redis 7.0: the version line differs (the comparison is not blind to a
/// different server). Looked for more: Valkey 8.1 has `SET … IFEQ`, which this story does not
/// send, and answers every step the story does send as Redis 7.0 does, `DELEX` included
/// (asserted in its own words); so no reply differs. A reply that does differ is caught by
/// `side_by_side_lists_a_reply_that_differs_between_real_transcripts`.
#[test]
fn demo_stale_release_on_valkey_8_1_and_redis_7_0_differs_in_the_version_line() {
    let valkey = common::extra_server("valkey-8.1").display().to_string();
    let out = stale_release_on(&[
        ("valkey 8.1.8", valkey),
        ("redis 7.0.", which_redis_server()),
    ]);
    assert!(
        out.contains("the version line differs:\n  [1] valkey 8.1.8\n  [2] redis 7.0."),
        "{out}"
    );
    assert!(
        out.contains("the servers differ only in the version line."),
        "{out}"
    );
}

/// The negative control of the two tests above, on real transcripts: stale-release on the
/// memory model (configured with `DELEX`, as Redis 8.4 has it) and on Redis 7.0 differ in
/// exactly one step, A's `DELEX`, listed with each side's reply (`0` vs Redis's own error),
/// although the two runs used different run ids in their keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn side_by_side_lists_a_reply_that_differs_between_real_transcripts() {
    let mut transcripts = Vec::new();
    let mut model = MemoryStore::new(Duration::from_micros(100), true);
    let server = redis().await;
    let conn = RedisConnector::new(&server.url(), Timeouts::default(), false).unwrap();
    let mut r = conn.connect().await.unwrap();
    for (run_id, version) in [("run-m", "model"), ("run-r", "redis")] {
        let key = format!("lockbench:{run_id}:demo:lock");
        let steps = if version == "model" {
            stale_release(&mut model, &key, Duration::from_millis(50), Vec::new()).await
        } else {
            stale_release(&mut r, &key, Duration::from_millis(50), Vec::new()).await
        }
        .unwrap();
        transcripts.push(Transcript {
            server: version.into(),
            version: version.into(),
            run_id: run_id.into(),
            steps,
        });
    }
    let d = differences(&transcripts);
    let key = format!("lockbench:{RUN_ID}:demo:lock");
    let listed: Vec<(usize, String, Vec<String>)> = d
        .steps
        .iter()
        .map(|s| {
            let first = s.per_server[0].as_ref().unwrap();
            let replies = s
                .per_server
                .iter()
                .map(|p| p.as_ref().unwrap().reply.clone())
                .collect();
            (s.number, first.command.clone(), replies)
        })
        .collect();
    assert_eq!(
        listed,
        vec![(
            12,
            format!("DELEX {key} IFEQ tokA"),
            vec!["(integer) 0".to_string(), unknown_delex(&key)],
        )]
    );
    assert_eq!(d.compared, 17);
    assert!(d.versions.is_some());
    assert!(model.is_empty(), "model: keys left behind");
    assert_eq!(dbsize(&server), 0, "redis: keys left behind");
    server.stop().await;
}

/// `--redis-server` refuses, with exit 2 and a one-line message naming the flag and the path,
/// a path that does not exist, a file that is not executable, a program that is not a server
/// (`/bin/true`: it starts but never becomes ready; the first server's transcript is printed
/// before the second is found bad), and a combination with `--redis URL`.
#[test]
fn demo_refuses_a_bad_redis_server() {
    let (code, _, err) = demo(&[
        "stale-release",
        "--redis-server",
        "/nonexistent/redis-server",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--redis-server") && err.contains("/nonexistent/redis-server"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("redis-server");
    std::fs::write(&plain, "not a program").unwrap();
    let plain = plain.display().to_string();
    let (code, _, err) = demo(&["one-time-token", "--redis-server", &plain]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!("{plain}: not an executable file")),
        "{err}"
    );
    let redis70 = which_redis_server();
    let (code, out, err) = demo(&[
        "one-time-token",
        "--redis-server",
        &redis70,
        "--redis-server",
        "/bin/true",
    ]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--redis-server (server 2 of 2): /bin/true did not start as a Redis server"),
        "{err}"
    );
    assert!(out.contains("=== server 1 of 2: redis 7.0."), "{out}");
    let (code, _, err) = demo(&[
        "one-time-token",
        "--redis",
        "redis://127.0.0.1:1",
        "--redis-server",
        &redis70,
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--redis-server") && err.contains("--redis"),
        "{err}"
    );
}

/// redis-cli's reading of a line (its `sdssplitargs`): bare words, and `"…"` with `\"`, `\\`,
/// `\n`, `\r`, `\t`, `\b`, `\a` and `\xHH` escapes. `MONITOR` prints each argument that way.
fn split_args(line: &str) -> Vec<Vec<u8>> {
    let b = line.as_bytes();
    let (mut out, mut i) = (Vec::new(), 0);
    loop {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == b.len() {
            return out;
        }
        let mut arg = Vec::new();
        if b[i] == b'"' {
            i += 1;
            while b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                    match b[i] {
                        b'x' => {
                            arg.push(u8::from_str_radix(&line[i + 1..i + 3], 16).unwrap());
                            i += 2;
                        }
                        b'n' => arg.push(b'\n'),
                        b'r' => arg.push(b'\r'),
                        b't' => arg.push(b'\t'),
                        b'b' => arg.push(8),
                        b'a' => arg.push(7),
                        c => arg.push(c),
                    }
                } else {
                    arg.push(b[i]);
                }
                i += 1;
            }
            i += 1;
        } else {
            while i < b.len() && !b[i].is_ascii_whitespace() {
                assert!(
                    b[i] != b'"' && b[i] != b'\'',
                    "a quote inside a bare word: {line}"
                );
                arg.push(b[i]);
                i += 1;
            }
        }
        out.push(arg);
    }
}

/// The commands `server` executes from now until an `ECHO monitor-end`, each as its argv, in
/// order (`MONITOR` on a connection of its own; the commands a script sends are left out).
fn monitor(server: &SpawnedRedis) -> std::thread::JoinHandle<Vec<Vec<Vec<u8>>>> {
    let mut con = sync_conn(server);
    let _: () = redis::cmd("MONITOR").query(&mut con).unwrap();
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        loop {
            let line = match con.recv_response().unwrap() {
                redis::Value::SimpleString(s) => s,
                other => panic!("MONITOR sent {other:?}"),
            };
            let (client, args) = line.split_once("] ").expect("a MONITOR line");
            if client.ends_with(" lua") {
                continue;
            }
            let argv = split_args(args);
            if argv == [b"ECHO".to_vec(), b"monitor-end".to_vec()] {
                return seen;
            }
            seen.push(argv);
        }
    })
}

/// Each step's command line, read back as redis-cli reads it, is a command the server
/// executed, in the transcript's order (the server runs more: polls, the client's setup).
/// The canonical compare-and-delete, shown as `EVAL "<text>"`, is sent by its SHA1; a
/// command the server does not know never reaches MONITOR. Returns how many of `seen` the
/// story used: the next story's commands come after.
fn assert_sent_as_shown(
    story: &str,
    steps: &[lockbench::demo::Step],
    seen: &[Vec<Vec<u8>>],
) -> usize {
    let mut at = 0;
    for s in steps {
        if s.reply.starts_with("(error) ERR unknown command") {
            continue;
        }
        let mut argv = split_args(&s.command);
        if argv[0] == b"EVAL" {
            let text = String::from_utf8(argv[1].clone()).unwrap();
            argv[0] = b"EVALSHA".to_vec();
            argv[1] = lockbench::demo::cmd::sha(&text).into_bytes();
        }
        let same = |c: &Vec<Vec<u8>>| {
            c.len() == argv.len() && c[0].eq_ignore_ascii_case(&argv[0]) && c[1..] == argv[1..]
        };
        match seen[at..].iter().position(same) {
            Some(i) => at += i + 1,
            None => panic!(
                "{story}: `{}` ({}) is not what the server executed next; it executed:\n{}",
                s.command,
                s.who,
                seen[at..]
                    .iter()
                    .map(|c| c
                        .iter()
                        .map(|a| String::from_utf8_lossy(a))
                        .collect::<Vec<_>>()
                        .join(" "))
                    .collect::<Vec<_>>()
                    .join("\n")
            ),
        }
    }
    at
}

/// What each story prints is what the server received: every step's command line, read as
/// redis-cli reads it, is found in order among the commands MONITOR saw on a private server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_step_shown_is_the_command_the_server_ran() {
    use lockbench::demo::{FencingKeys, fencing};
    let server = redis().await;
    let conn = RedisConnector::new(&server.url(), Timeouts::default(), false).unwrap();
    let mut c = conn.connect().await.unwrap();
    let seen = monitor(&server);
    let ttl = Duration::from_millis(100);
    let base = "lockbench:test:monitor:demo";
    let mut stories = Vec::new();
    let key = format!("{base}:lock");
    let steps = stale_release(&mut c, &key, ttl, Vec::new()).await.unwrap();
    stories.push(("stale-release", steps));
    let keys = FencingKeys::new(&format!("{base}:{{fencing}}"));
    let steps = fencing(&mut c, &keys, ttl, Vec::new()).await.unwrap();
    stories.push(("fencing", steps));
    let key = format!("{base}:setnx-expire:lock");
    let steps = setnx_expire(&mut c, &key, ttl, Vec::new()).await.unwrap();
    c.del(&key).await.unwrap();
    stories.push(("setnx-expire", steps));
    let key = format!("{base}:dedup:hb:42");
    let steps = dedup_window(&mut c, &key, ttl, Vec::new()).await.unwrap();
    stories.push(("dedup-window", steps));
    let key = format!("{base}:one-time-token:tok:abc");
    let steps = one_time_token(&mut c, &key, Vec::new()).await.unwrap();
    stories.push(("one-time-token", steps));
    let _: () = redis::cmd("ECHO")
        .arg("monitor-end")
        .query(&mut sync_conn(&server))
        .unwrap();
    let seen = seen.join().unwrap();
    let mut from = 0;
    for (story, steps) in &stories {
        assert!(steps.len() >= 4, "{story}: {steps:?}");
        from += assert_sent_as_shown(story, steps, &seen[from..]);
    }
    // The check can fail: a line with an argument the server never received.
    let mut forged = stories[0].1.clone();
    forged[0].command = forged[0].command.replace("tokA", "tokZ");
    let caught = std::panic::catch_unwind(|| assert_sent_as_shown("forged", &forged, &seen));
    assert!(caught.is_err(), "a forged line passed");
    assert_eq!(dbsize(&server), 0, "keys left behind");
    server.stop().await;
}

/// `demo` reads its flags as `run` does: `--ttl x` exits 2 with `run`'s message (it exited 1,
/// the error's type dropped), a TTL Redis PX cannot express is refused as `run` refuses it, and
/// the demo's own bound and `--backend url` without `--redis` are bad input too.
#[test]
fn demo_refuses_a_bad_flag_as_run_does() {
    let run = |args: &[&str]| {
        let o = common::Lockbench::new()
            .args(["run", "--backend", "memory"])
            .args(args)
            .output();
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    for ttl in ["x", "0ms", "1500us"] {
        let (code, _, err) = demo(&["stale-release", "--ttl", ttl, "--backend", "memory"]);
        let (run_code, run_err) = run(&["--ttl", ttl]);
        assert_eq!(run_code, 2, "run --ttl {ttl}: {run_err}");
        assert_eq!((code, err.trim()), (2, run_err.trim()), "--ttl {ttl}");
    }
    let (code, _, err) = demo(&["stale-release", "--ttl", "61s", "--backend", "memory"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--ttl: use 1ms to 60s"), "{err}");
    let (code, _, err) = demo(&["stale-release", "--backend", "url"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--redis"), "{err}");
    // The control: a good TTL still plays.
    let (code, out, err) = demo(&["stale-release", "--ttl", "20ms", "--backend", "memory"]);
    assert_eq!(code, 0, "{err}\n{out}");
}
