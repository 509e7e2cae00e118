//! The demos of the article's other rules and idioms: setnx-expire, fail-open, dedup-window and
//! one-time-token, on the memory model (where they can run) and on a private redis-server,
//! through the library and through the binary; every key is gone at the end.

mod common;

use common::{redis, sync_conn};
use lockbench::commands::demo::{dedup_window, fail_open, one_time_token, setnx_expire};
use lockbench::store::memory::MemoryStore;
use lockbench::store::redis::{RedisConnector, Timeouts};
use lockbench::store::spawn::SpawnedRedis;
use lockbench::store::{Connector, LockConn};
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
fn rows(steps: &[lockbench::commands::demo::Step]) -> Vec<(String, String, String, String)> {
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
    assert!(c.pexpire(&k, 50).await.unwrap(), "{backend}");
    let t = c.pttl(&k).await.unwrap();
    assert!((1..=50).contains(&t), "{backend}: {t}");
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
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_lockbench"))
        .arg("demo")
        .args(args)
        .output()
        .expect("run lockbench");
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
