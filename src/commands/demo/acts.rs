//! The stories told on one lock connection (a real server or the model), each one function
//! with its transcript: `stale-release`, `fencing`, `setnx-expire`, `dedup-window` and
//! `one-time-token`. Every step is one [`Cmd`], sent and shown by [`Playback::send`].

use super::cmd::{Cmd, Reply, sha};
use super::playback::{Playback, Step, await_expiry, cmd, compact, ms, poll_every};
use crate::model::units;
use crate::store::{
    FENCED_ACQUIRE_LUA, LockConn, RESOURCE_READ_LUA, RESOURCE_WRITE_LUA, ReadOutcome, WriteOutcome,
};
use anyhow::Context;
use std::io::Write;
use std::time::Duration;

/// `SET key token NX PX ttl_ms`.
fn set<'a>(key: &'a str, token: &'a str, ttl_ms: u64) -> Cmd<'a> {
    Cmd::SetNxPx {
        key,
        value: token,
        ttl_ms,
    }
}
/// The canonical compare-and-delete of `key` by the holder of `token`.
fn cad<'a>(key: &'a str, token: &'a str) -> Cmd<'a> {
    Cmd::CompareAndDelete { key, token }
}
/// `DEL key`.
fn del(key: &str) -> Cmd<'_> {
    Cmd::Del(vec![key])
}

/// Plays both acts on `key` (which must be inside the run's own prefix) and returns the
/// transcript. `short_ttl` is A's TTL; the demo waits that long (plus 20 %) for it to expire.
pub async fn stale_release<C: LockConn, W: Write>(
    conn: &mut C,
    key: &str,
    short_ttl: Duration,
    out: W,
) -> anyhow::Result<Vec<Step>> {
    let ttl = short_ttl.as_millis().max(1) as u64;
    let mut s = Playback::new(conn, out, "del");

    for act in ["del", "token"] {
        s.title(
            act,
            if act == "del" {
                "release with DEL (the bug)"
            } else {
                "release with a token and compare-and-delete (the fix)"
            },
        )?;
        s.send("A", set(key, "tokA", ttl)).await?;
        s.say(&format!(
            "A works longer than its TTL of {}...",
            units::fmt_us(ttl * 1000, units::Style::Compact)
        ))?;
        tokio::time::sleep(Duration::from_millis(ttl + ttl / 5 + 1)).await;
        s.send("observer", Cmd::Exists(key)).await?;
        s.send("B", set(key, "tokB", 30_000)).await?;
        s.say("the lock did its job: A was slow, B moved in. Now A finishes and releases:")?;
        if act == "del" {
            s.send("A", del(key)).await?;
            s.send("observer", Cmd::Exists(key)).await?;
            s.say("A deleted B's lock. C walks in while B still works:")?;
            s.send("C", set(key, "tokC", 30_000)).await?;
            s.send("cleanup", del(key)).await?;
        } else {
            s.send("A", cad(key, "tokA")).await?;
            s.say("the same compare-and-delete without a script is DELEX (Redis >= 8.4), if this server has it:")?;
            let r = s
                .send_or_error("A", Cmd::Delex { key, token: "tokA" })
                .await?;
            let unknown = r.as_ref().is_err_and(|e| e.is_unknown_command());
            s.say(if unknown {
                "this server does not know DELEX: the script is the portable form (INFO server tells the version)."
            } else {
                "refused as well: DELEX compares and deletes in one command."
            })?;
            s.send("observer", Cmd::Get(key)).await?;
            s.send("observer", Cmd::Exists(key)).await?;
            s.say("the stale release was refused; B keeps its lock, and C is refused:")?;
            s.send("C", set(key, "tokC", 30_000)).await?;
            s.send("B", cad(key, "tokB")).await?;
            s.send("observer", Cmd::Exists(key)).await?;
            s.say("But A and B both worked between B's SET and A's release: compare-and-delete")?;
            s.say(
                "prevents deleting someone else's lock, not two holders at once. Only a fencing",
            )?;
            s.say("token checked by the protected resource refuses the stale holder.")?;
        }
    }
    Ok(s.steps)
}

/// The keys of the fencing story, all under one base (inside the run's prefix, with a hash tag
/// so they share a slot).
#[derive(Debug, Clone)]
pub struct FencingKeys {
    /// The lock.
    pub lock: String,
    /// The lock's fence counter.
    pub fence: String,
    /// The resource of the fenced act.
    pub fenced: String,
    /// The resource of the unfenced act.
    pub unfenced: String,
}

impl FencingKeys {
    /// The story's keys under `base`.
    pub fn new(base: &str) -> Self {
        Self {
            lock: format!("{base}:lock"),
            fence: format!("{base}:fence"),
            fenced: format!("{base}:res:fenced"),
            unfenced: format!("{base}:res:unfenced"),
        }
    }

    /// Every key the story may write.
    pub fn all(&self) -> Vec<String> {
        vec![
            self.lock.clone(),
            self.fence.clone(),
            self.fenced.clone(),
            self.unfenced.clone(),
        ]
    }
}

/// Plays the article's A/B story with a resource on `keys`: A acquires and reads, works past
/// its TTL, B acquires, reads and writes, then A writes late. First with a fence registered at
/// the read and checked at the write (A's write is refused: B's fence is higher), then without
/// fencing (A's write is accepted from a non-holder and B's update is lost). `short_ttl` is A's
/// TTL. Returns the transcript; the keys are deleted at the end (the last step).
pub async fn fencing<C: LockConn, W: Write>(
    conn: &mut C,
    keys: &FencingKeys,
    short_ttl: Duration,
    out: W,
) -> anyhow::Result<Vec<Step>> {
    let ttl = short_ttl.as_millis().max(1) as u64;
    let mut s = Playback::new(conn, out, "fenced");
    let (lock, fence) = (keys.lock.as_str(), keys.fence.as_str());

    writeln!(
        s.out,
        "\nlockbench's scripts, sent by EVALSHA (the SHA1 of their text):"
    )
    .map_err(super::playback::io_err)?;
    for (name, lua) in [
        (
            "fenced acquire: SET NX PX, then INCR of the fence counter",
            FENCED_ACQUIRE_LUA,
        ),
        (
            "resource read: reply {1, value}, or {0, highest fence} if refused",
            RESOURCE_READ_LUA,
        ),
        (
            "resource write: reply {1, writer holds the lock 1/0}, or {0, highest fence}",
            RESOURCE_WRITE_LUA,
        ),
    ] {
        writeln!(s.out, "\n{name}\n{}:", sha(lua)).map_err(super::playback::io_err)?;
        for line in lua.lines() {
            writeln!(s.out, "    {line}").map_err(super::playback::io_err)?;
        }
    }
    writeln!(s.out, "\nA fence argument of `-` means: no fence.")
        .map_err(super::playback::io_err)?;

    for act in ["fenced", "unfenced"] {
        let fenced = act == "fenced";
        let res = if fenced { &keys.fenced } else { &keys.unfenced }.as_str();
        s.title(
            act,
            if fenced {
                "with a fencing token: registered at the read, checked at the write"
            } else {
                "without fencing"
            },
        )?;
        // Takes the lock for `token`: the fenced acquire (its fence) or a plain SET NX PX.
        let acquire = |token, ttl_ms| {
            if fenced {
                Cmd::FencedAcquire {
                    lock,
                    fence,
                    token,
                    ttl_ms,
                }
            } else {
                set(lock, token, ttl_ms)
            }
        };
        let fence_of = |r: Reply| match r {
            Reply::Fence(f) => f,
            _ => None,
        };

        // A acquires and reads.
        let r = s.send("A", acquire("tokA", ttl)).await?;
        let fa = if fenced {
            Some(fence_of(r).context("A could not acquire a fresh lock")?)
        } else {
            None
        };
        let read = |fence| Cmd::ResourceRead { res, fence };
        let Reply::Read(ReadOutcome::Value(va)) = s.send("A", read(fa)).await? else {
            anyhow::bail!("A's first read was refused");
        };
        s.say(&format!(
            "A read {va} and works longer than its TTL of {}...",
            units::fmt_us(ttl * 1000, units::Style::Compact)
        ))?;
        await_expiry(s.conn, lock, ttl).await?;
        s.send("observer", Cmd::Exists(lock)).await?;

        // B acquires, reads and writes.
        let r = s.send("B", acquire("tokB", 30_000)).await?;
        let fb = if fenced {
            Some(fence_of(r).context("B could not acquire the expired lock")?)
        } else {
            None
        };
        let Reply::Read(ReadOutcome::Value(vb)) = s.send("B", read(fb)).await? else {
            anyhow::bail!("B's read was refused");
        };
        let write = |token, fence, value| Cmd::ResourceWrite {
            res,
            lock,
            token,
            fence,
            value,
        };
        s.send("B", write("tokB", fb, vb + 1)).await?;
        s.say(&format!(
            "B wrote {vb}+1 while holding the lock. Now A wakes up and writes its {va}+1{}:",
            fa.map_or_else(String::new, |f| format!(" with fence {f}"))
        ))?;

        // A writes late.
        let Reply::Write(w) = s.send("A", write("tokA", fa, va + 1)).await? else {
            anyhow::bail!("A's write got no write reply");
        };
        match (w, fa) {
            (WriteOutcome::Fenced { highest }, Some(f)) => s.say(&format!(
                "refused: the resource has seen fence {highest}, higher than A's fence {f}. \
                 B's update stands."
            )),
            (WriteOutcome::Accepted { holder: false, .. }, _) => s.say(
                "accepted (1) from a writer that did not hold the lock while another holder did \
                 (2): an unsafe write. A wrote over B's update.",
            ),
            (other, _) => s.say(&format!("unexpected: {other:?}")),
        }?;
        let Reply::Value(v) = s.send("observer", Cmd::ResourceValue(res)).await? else {
            anyhow::bail!("the resource's value got no value reply");
        };
        if fenced {
            s.say(&format!(
                "one accepted write, value {v}: nothing lost, although A and B overlapped."
            ))?;
        } else {
            s.say(&format!(
                "two accepted writes, value {v}: B's update is lost, and compare-and-delete \
                 cannot see it."
            ))?;
        }
        s.send("B", cad(lock, "tokB")).await?;
    }
    s.act = "cleanup";
    let all = keys.all();
    s.send(
        "cleanup",
        Cmd::Del(all.iter().map(String::as_str).collect()),
    )
    .await?;
    Ok(s.steps)
}

/// The article's rule "take the lock with one command, never SETNX then EXPIRE", shown on
/// `key`. First the two commands when A lives (`SETNX`, `PEXPIRE`: the key expires), then A
/// crashing between them: `PTTL` answers -1, B is refused, a wait of `ttl` changes nothing, and
/// only a `DEL` frees the key. Then `SET NX PX` and the same crash: the key has a TTL, and B
/// acquires once the server has expired it. Returns the transcript; the key is deleted.
pub async fn setnx_expire<C: LockConn, W: Write>(
    conn: &mut C,
    key: &str,
    ttl: Duration,
    out: W,
) -> anyhow::Result<Vec<Step>> {
    let t = ms(ttl);
    let mut s = Playback::new(conn, out, "setnx");
    let setnx = Cmd::SetNx { key, value: "tokA" };
    let pexpire = Cmd::Pexpire { key, ms: t };
    s.title("setnx", "SETNX, then PEXPIRE: two commands")?;
    s.send("A", setnx.clone()).await?;
    s.send("A", pexpire.clone()).await?;
    s.send("observer", Cmd::Pttl(key)).await?;
    s.say("when A lives to send both, the lock has its TTL. A releases:")?;
    s.send("A", cad(key, "tokA")).await?;

    s.say("now A crashes between the two commands:")?;
    s.send("A", setnx).await?;
    s.say(&format!("A crashes before its {} is sent.", pexpire.cli()))?;
    s.send("observer", Cmd::Pttl(key)).await?;
    s.say("-1: the key exists and has no expiry.")?;
    b_tries(&mut s, key).await?;
    // Wait longer than the TTL A meant to set, watching the key's TTL (not a blind sleep).
    let wait = ttl + ttl / 5;
    s.say(&format!(
        "waiting {} (longer than the TTL A meant to set), polling PTTL every {}...",
        compact(ms(wait)),
        units::fmt_us(poll_every(wait).as_micros() as u64, units::Style::Compact)
    ))?;
    let start = tokio::time::Instant::now();
    let mut polls = 0u32;
    let last = loop {
        polls += 1;
        let r = cmd(s.conn.pttl(key).await)?;
        if r != -1 || start.elapsed() >= wait {
            break r;
        }
        tokio::time::sleep(poll_every(wait)).await;
    };
    s.show("observer", &Cmd::Pttl(key), Reply::Int(last).cli())?;
    s.say(&format!(
        "{} after {polls} polls over {}",
        if last == -1 { "still -1" } else { "changed" },
        compact(ms(start.elapsed()))
    ))?;
    b_tries(&mut s, key).await?;
    s.say("the lock is stuck: nobody holds it and it never expires. Only a DEL frees it:")?;
    s.send("operator", del(key)).await?;
    if b_tries(&mut s, key).await? {
        s.send("B", cad(key, "tokB")).await?;
    }

    s.title("set-nx-px", "SET NX PX: one command")?;
    s.send("A", set(key, "tokA", t)).await?;
    s.say("A crashes at the same point: the TTL went with the key.")?;
    s.send("observer", Cmd::Pttl(key)).await?;
    b_tries(&mut s, key).await?;
    let limit = 2 * wait + Duration::from_secs(5);
    s.show_until_gone(key, poll_every(ttl), limit, "waiting for the TTL")
        .await?;
    if b_tries(&mut s, key).await? {
        s.say("the server freed the crashed holder's lock: B is in.")?;
        s.send("B", cad(key, "tokB")).await?;
    }
    Ok(s.steps)
}

/// B's attempt in the setnx-expire story: `SET key tokB NX PX 30000`, shown; `true` = acquired.
async fn b_tries<C: LockConn, W: Write>(
    s: &mut Playback<'_, C, W>,
    key: &str,
) -> anyhow::Result<bool> {
    Ok(s.send("B", set(key, "tokB", 30_000)).await?.is_set())
}

/// The article's deduplication window (`SET hb:dedup:42 1 NX EX 2`) on `key`: the first
/// `SET NX` with a fixed value wins, a duplicate within the window is refused, and once the
/// server has expired the key (polled with `EXISTS`) the next one wins again. `window` is the
/// key's TTL. Returns the transcript; the key is deleted.
pub async fn dedup_window<C: LockConn, W: Write>(
    conn: &mut C,
    key: &str,
    window: Duration,
    out: W,
) -> anyhow::Result<Vec<Step>> {
    let w = ms(window);
    let mut s = Playback::new(conn, out, "dedup");
    s.title(
        "dedup",
        "a deduplication window: SET NX with a fixed value, never released",
    )?;
    s.send("first", set(key, "1", w)).await?;
    s.say(&format!(
        "the first heartbeat passes (the article sends SET hb:dedup:42 1 NX EX 2: the same with a window of {})",
        compact(w)
    ))?;
    s.send("dup", set(key, "1", w)).await?;
    s.say("a duplicate within the window is suppressed")?;
    let limit = 2 * window + Duration::from_secs(5);
    s.show_until_gone(
        key,
        poll_every(window),
        limit,
        "waiting for the window to close",
    )
    .await?;
    s.send("later", set(key, "1", w)).await?;
    s.say("the window reopened. A fixed value is right here: nobody releases the key, so nobody has to prove they set it; it only expires.")?;
    s.send("cleanup", del(key)).await?;
    Ok(s.steps)
}

/// The article's one-time token (`GETDEL`) on `key`: the first caller gets the token, the
/// next gets nil, because reading and deleting are one command. Returns the transcript; the
/// key is gone at the end (consumed).
pub async fn one_time_token<C: LockConn, W: Write>(
    conn: &mut C,
    key: &str,
    out: W,
) -> anyhow::Result<Vec<Step>> {
    let mut s = Playback::new(conn, out, "token");
    s.title(
        "token",
        "a one-time token: GETDEL reads and deletes in one command",
    )?;
    s.send("issuer", set(key, "tok", 60_000)).await?;
    s.say("the token is issued (the article: SET bk:tok:abc 1 EX 60); two callers redeem it:")?;
    for who in ["first", "second"] {
        s.send(who, Cmd::GetDel(key)).await?;
    }
    s.send("observer", Cmd::Exists(key)).await?;
    s.say("exactly one caller got the token: no window between the read and the delete, and no holder that must prove anything at a release.")?;
    Ok(s.steps)
}
