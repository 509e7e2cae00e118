//! The resource, fencing and extension commands on hand-built interleavings, with the same
//! assertions on the memory model and on a private redis-server: the model must answer exactly
//! as Redis does, so each scenario is one generic function run against both.

use crate::common;

use common::redis;
use lockbench::ErrorKind;
use lockbench::ExtendCommand;
use lockbench::MemoryStore;
use lockbench::Timeouts;
use lockbench::{Connector, LockConn, ReadOutcome, WriteOutcome};
use lockbench::{RedisConnector, version_tuple};
use std::time::Duration;
use tokio::time::Instant;

/// Waits until `key` has expired, polling `EXISTS` (no fixed sleep: the server decides).
async fn wait_expired<C: LockConn>(c: &mut C, key: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while c.exists(key).await.unwrap() == 1 {
        assert!(Instant::now() < deadline, "{key} never expired");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Runs `scenario` on a fresh memory model (real clock) and on a private redis-server.
macro_rules! on_both {
    ($scenario:ident) => {{
        let mut m = MemoryStore::new(Duration::from_micros(100), true);
        $scenario(&mut m, "memory").await;
        let server = redis().await;
        let conn = RedisConnector::new(&server.url(), Timeouts::default(), false).unwrap();
        let mut r = conn.connect().await.unwrap();
        $scenario(&mut r, "redis").await;
        server.stop().await;
    }};
}

/// Fencing as the resource sees it in one mode.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fencing {
    Off,
    Write,
    ReadWrite,
}

/// A acquires (short TTL) and reads; its lock expires; B acquires and reads; A writes; B
/// writes. Returns A's and B's write outcomes and the final value.
async fn interleave<C: LockConn>(
    c: &mut C,
    at: &str,
    mode: Fencing,
) -> (WriteOutcome, WriteOutcome, u64, u64, u64) {
    let (lock, fence, res) = (
        format!("lockbench:test:{{{at}}}:lock"),
        format!("lockbench:test:{{{at}}}:fence"),
        format!("lockbench:test:{{{at}}}:res"),
    );
    let on_read = |f: u64| (mode == Fencing::ReadWrite).then_some(f);
    let on_write = |f: u64| (mode != Fencing::Off).then_some(f);
    let fa = c
        .set_nx_px_fenced(&lock, &fence, None, "A", 30)
        .await
        .unwrap()
        .unwrap();
    let ReadOutcome::Value(va) = c.resource_read(&res, on_read(fa)).await.unwrap() else {
        panic!("{at}: A's first read refused");
    };
    wait_expired(c, &lock).await;
    let fb = c
        .set_nx_px_fenced(&lock, &fence, None, "B", 30_000)
        .await
        .unwrap()
        .expect("B acquires the expired lock");
    let ReadOutcome::Value(vb) = c.resource_read(&res, on_read(fb)).await.unwrap() else {
        panic!("{at}: B's read refused");
    };
    let wa = c
        .resource_write(&res, &lock, "A", on_write(fa), va + 1)
        .await
        .unwrap();
    let wb = c
        .resource_write(&res, &lock, "B", on_write(fb), vb + 1)
        .await
        .unwrap();
    let value = c.resource_value(&res).await.unwrap();
    assert_eq!(c.del_many(&[lock, fence, res]).await.unwrap(), 3, "{at}");
    (wa, wb, value, fa, fb)
}

async fn lost_update_scenario<C: LockConn>(c: &mut C, backend: &str) {
    for mode in [Fencing::Off, Fencing::Write, Fencing::ReadWrite] {
        let at = format!("{backend}-{mode:?}");
        let (wa, wb, value, fa, fb) = interleave(c, &at, mode).await;
        assert_eq!((fa, fb), (1, 2), "{at}: fences");
        assert_eq!(
            wb,
            WriteOutcome::Accepted {
                holder: true,
                other_holder: false
            },
            "{at}"
        );
        assert_eq!(value, 1, "{at}: final value");
        let accepted = 1 + u64::from(matches!(wa, WriteOutcome::Accepted { .. }));
        let lost = accepted - value;
        match mode {
            // Both writes accepted, A's as an unsafe write: one update lost. Write-only
            // fencing does not help: A wrote (fence 1) before B's fence 2 reached the resource.
            Fencing::Off | Fencing::Write => {
                assert_eq!(
                    wa,
                    WriteOutcome::Accepted {
                        holder: false,
                        other_holder: true
                    },
                    "{at}"
                );
                assert_eq!(lost, 1, "{at}: lost updates");
            }
            // B's read registered fence 2, so A's write with fence 1 is refused: nothing lost.
            Fencing::ReadWrite => {
                assert_eq!(wa, WriteOutcome::Fenced { highest: 2 }, "{at}");
                assert_eq!(lost, 0, "{at}: lost updates");
            }
        }
    }
}

/// A reads, B reads, A writes, B writes (A's lock expired in between, B took it): without
/// fencing and with write-only fencing both writes are accepted and the value ends at 1, a
/// lost update; with read-write fencing A's write is refused and nothing is lost. The same
/// check catches the unsafe modes and passes the safe one, on the model and on Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_modify_write_loses_an_update_unless_reads_are_fenced() {
    on_both!(lost_update_scenario);
}

async fn unsafe_write_scenario<C: LockConn>(c: &mut C, backend: &str) {
    let (lock, res) = ("lockbench:test:{u}:lock", "lockbench:test:{u}:res");
    assert!(c.set_nx_px(lock, "A", 30).await.unwrap());
    assert_eq!(
        c.resource_write(res, lock, "A", None, 1).await.unwrap(),
        WriteOutcome::Accepted {
            holder: true,
            other_holder: false
        },
        "{backend}: A while holding"
    );
    wait_expired(c, lock).await;
    // Expired, nobody else yet: still not the holder.
    assert_eq!(
        c.resource_write(res, lock, "A", None, 2).await.unwrap(),
        WriteOutcome::Accepted {
            holder: false,
            other_holder: false
        },
        "{backend}: A after expiry"
    );
    assert!(c.set_nx_px(lock, "B", 30_000).await.unwrap());
    assert_eq!(
        c.resource_write(res, lock, "A", None, 3).await.unwrap(),
        WriteOutcome::Accepted {
            holder: false,
            other_holder: true
        },
        "{backend}: A after B took the lock"
    );
    assert_eq!(
        c.resource_write(res, lock, "B", None, 4).await.unwrap(),
        WriteOutcome::Accepted {
            holder: true,
            other_holder: false
        },
        "{backend}: B"
    );
    assert_eq!(c.resource_value(res).await.unwrap(), 4, "{backend}");
    assert_eq!(c.del_many(&[lock.into(), res.into()]).await.unwrap(), 2);
    assert_eq!(
        c.resource_value(res).await.unwrap(),
        0,
        "{backend}: absent = 0"
    );
}

/// The server decides "unsafe": a write accepted from a holder whose lock expired (and was
/// then taken by B) reports `holder: false`; the holder's own writes report `true`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepted_write_after_losing_the_lock_is_unsafe() {
    on_both!(unsafe_write_scenario);
}

/// Whether the server answers `SET … IFEQ` (Valkey ≥ 8.1, Redis ≥ 8.4, the model).
fn has_ifeq(version: &str) -> bool {
    let v = version_tuple(version);
    if version.starts_with("lockbench-memory-model") {
        true
    } else if version.starts_with("valkey") {
        v >= Some((8, 1))
    } else {
        v >= Some((8, 4))
    }
}

async fn extend_scenario<C: LockConn>(c: &mut C, backend: &str) {
    let version = c.server_version().await.unwrap();
    let key = "lockbench:test:{e}:lock";
    for how in [ExtendCommand::Script, ExtendCommand::SetIfeq] {
        let at = format!("{backend} {}", how.name());
        if how == ExtendCommand::SetIfeq && !has_ifeq(&version) {
            // Redis 7.0 does not know IFEQ: an error, never a silent "lock lost".
            assert!(c.set_nx_px(key, "A", 30_000).await.unwrap());
            let e = c.extend(key, "A", 5_000, how).await.unwrap_err();
            assert_eq!(e.kind, ErrorKind::Server, "{at} on {version}: {e}");
            assert!(
                c.del(key).await.unwrap() == 1,
                "{at}: the lock is untouched"
            );
            continue;
        }
        // Before expiry: re-armed above what remained.
        assert!(c.set_nx_px(key, "A", 300).await.unwrap(), "{at}");
        let deadline = Instant::now() + Duration::from_secs(5);
        let remaining = loop {
            let p = c.pttl(key).await.unwrap();
            if p < 250 {
                break p;
            }
            assert!(Instant::now() < deadline, "{at}: PTTL never fell");
            tokio::time::sleep(Duration::from_millis(2)).await;
        };
        assert!(
            remaining > 0,
            "{at}: expired before the test could extend it"
        );
        assert!(c.extend(key, "A", 5_000, how).await.unwrap(), "{at}");
        let p = c.pttl(key).await.unwrap();
        assert!(
            p > remaining && p <= 5_000,
            "{at}: PTTL {p} after, {remaining} before"
        );
        assert_eq!(c.get(key).await.unwrap().as_deref(), Some("A"), "{at}");
        // Another token: refused, untouched.
        assert!(!c.extend(key, "B", 60_000, how).await.unwrap(), "{at}");
        assert!(c.pttl(key).await.unwrap() <= 5_000, "{at}");
        assert_eq!(c.del(key).await.unwrap(), 1);
        // After expiry: an extension failure, and the lock is not re-created.
        assert!(c.set_nx_px(key, "A", 30).await.unwrap(), "{at}");
        wait_expired(c, key).await;
        assert!(!c.extend(key, "A", 5_000, how).await.unwrap(), "{at}");
        assert_eq!(c.exists(key).await.unwrap(), 0, "{at}");
    }
}

/// `extend` re-arms a held lock before expiry (PTTL above what remained), fails after expiry
/// and for another token; `SET … IFEQ` on Redis 7.0 is a server error, not `false`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extension_rearms_before_expiry_and_fails_after() {
    on_both!(extend_scenario);
}

async fn fence_scenario<C: LockConn>(c: &mut C, backend: &str) {
    let (k1, f1) = ("lockbench:test:{f1}:lock", "lockbench:test:{f1}:fence");
    let (k2, f2) = ("lockbench:test:{f2}:lock", "lockbench:test:{f2}:fence");
    let mut last = 0;
    for i in 0..5 {
        let f = c.set_nx_px_fenced(k1, f1, None, "A", 30_000).await.unwrap();
        let f = f.unwrap_or_else(|| panic!("{backend}: acquisition {i}"));
        assert!(f > last, "{backend}: fence {f} after {last}");
        // A refused acquisition takes no fence and leaves the holder's token.
        assert_eq!(
            c.set_nx_px_fenced(k1, f1, None, "B", 30_000).await.unwrap(),
            None
        );
        assert_eq!(c.get(k1).await.unwrap().as_deref(), Some("A"));
        assert_eq!(c.release_script(k1, "A").await.unwrap(), 1);
        last = f;
    }
    assert_eq!(last, 5, "{backend}: one fence per acquisition");
    assert_eq!(
        c.set_nx_px_fenced(k2, f2, None, "A", 30_000).await.unwrap(),
        Some(1)
    );
    assert_eq!(
        c.pttl(f1).await.unwrap(),
        -1,
        "{backend}: the counter has no TTL"
    );
    let keys = [f1, k2, f2].map(String::from);
    assert_eq!(c.del_many(&keys).await.unwrap(), 3);
}

/// Fences strictly increase per key, only a successful acquisition takes one, and each key
/// has its own counter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fences_strictly_increase_per_key() {
    on_both!(fence_scenario);
}

async fn demo_scenario<C: LockConn>(c: &mut C, backend: &str) {
    use lockbench::demo::{FencingKeys, fencing};
    let keys = FencingKeys::new(&format!("lockbench:test:demo-{backend}:{{fencing}}"));
    let mut out = Vec::new();
    let steps = fencing(c, &keys, Duration::from_millis(30), &mut out)
        .await
        .unwrap();
    let text = String::from_utf8(out).unwrap();
    // (who, first word of the command, reply) of one act.
    let act = |name: &str| -> Vec<(String, String, String)> {
        steps
            .iter()
            .filter(|s| s.act == name)
            .map(|s| {
                let verb = s.command.split_whitespace().next().unwrap().to_string();
                (s.who.to_string(), verb, s.reply.clone())
            })
            .collect()
    };
    let rows = |v: &[(&str, &str, &str)]| -> Vec<(String, String, String)> {
        v.iter()
            .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
            .collect()
    };
    let (read0, held, refused, unsafe_) = (
        "1) (integer) 1\n2) (integer) 0",
        "1) (integer) 1\n2) (integer) 1",
        "1) (integer) 0\n2) (integer) 2",
        // Accepted (1) while another holder held the lock (2).
        "1) (integer) 1\n2) (integer) 2",
    );
    assert_eq!(
        act("fenced"),
        rows(&[
            ("A", "EVALSHA", "(integer) 1"),
            ("A", "EVALSHA", read0),
            ("observer", "EXISTS", "(integer) 0"),
            ("B", "EVALSHA", "(integer) 2"),
            ("B", "EVALSHA", read0),
            ("B", "EVALSHA", held),
            ("A", "EVALSHA", refused),
            ("observer", "HGET", "\"1\""),
            ("B", "EVAL", "(integer) 1"),
        ]),
        "{backend}"
    );
    assert_eq!(
        act("unfenced"),
        rows(&[
            ("A", "SET", "OK"),
            ("A", "EVALSHA", read0),
            ("observer", "EXISTS", "(integer) 0"),
            ("B", "SET", "OK"),
            ("B", "EVALSHA", read0),
            ("B", "EVALSHA", held),
            ("A", "EVALSHA", unsafe_),
            ("observer", "HGET", "\"1\""),
            ("B", "EVAL", "(integer) 1"),
        ]),
        "{backend}"
    );
    assert!(
        text.contains("refused: the resource has seen fence 2, higher than A's fence 1"),
        "{backend}: {text}"
    );
    assert!(text.contains("an unsafe write"), "{backend}: {text}");
    for k in keys.all() {
        assert_eq!(c.exists(&k).await.unwrap(), 0, "{backend}: {k} left behind");
    }
}

/// `demo fencing` replays the story with the server's real replies: with a fence A's late write
/// is refused (B's fence 2 is higher) and nothing is lost; without, A's late write is accepted
/// from a non-holder and B's update is lost. Every key is deleted at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_fencing_refuses_the_late_write() {
    on_both!(demo_scenario);
}

/// `lockbench demo fencing` through the binary, on the memory model and on a spawned server,
/// prints the refusal and exits 0.
#[test]
fn demo_fencing_binary_prints_the_refusal() {
    for backend in ["memory", "spawn"] {
        let o = common::Lockbench::new()
            .args(["demo", "fencing", "--ttl", "30ms", "--backend", backend])
            .output();
        let (out, err) = (
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr),
        );
        assert!(o.status.success(), "{backend}: {err}");
        assert!(
            out.contains("refused: the resource has seen fence 2, higher than A's fence 1"),
            "{backend}: {out}"
        );
        assert!(
            out.contains("1) (integer) 0\n          2) (integer) 2"),
            "{backend}: {out}"
        );
    }
}
