//! (Over 800 lines: six stories, each step written twice — the call and its redis-cli text;
//! declaring a step once and rendering both is the split this file waits for.)
//! The demos, each replayed against a real server (or the model) and printed redis-cli style;
//! every reply shown is the server's reply to the command shown, a server's error in its own
//! words. With `--redis-server` given more than once a story runs on each server in turn and
//! [`side_by_side`] says which replies differ. `stale-release`: the A/B/C story of the design
//! notes, with the article's `DELEX` attempt; `fencing`: the article's A/B story with a
//! fencing token at the resource; `setnx-expire`: the lock a crash between `SETNX` and
//! `EXPIRE` leaves forever; `fail-open`: a paused server and two clients that proceed without
//! a lock; `dedup-window` and `one-time-token`: the article's two look-alikes that are not
//! locks.
//!
//! Over 800 lines: one file per the brief that added the last four stories; each story is one
//! function with its transcript, sharing the printing and polling helpers at the top.

pub mod side_by_side;

use crate::backend::{Backend, Store};
use crate::model::error::CmdResult;
use crate::model::units;
use crate::profile::{BackendChoice, Profile};
use crate::store::{
    CANONICAL_CAD_LUA, Connector, FENCED_ACQUIRE_LUA, LockConn, RESOURCE_READ_LUA,
    RESOURCE_WRITE_LUA, ReadOutcome, WriteOutcome, fence_arg,
};
use anyhow::Context;
use clap::Args;
pub use side_by_side::Transcript;
use std::io::Write;
use std::time::Duration;

/// One command of the transcript and the server's reply, formatted as redis-cli prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// Which act of the story (`del` or `token`; `fenced` or `unfenced`).
    pub act: &'static str,
    /// Who sends it (A, B, C, or "observer").
    pub who: &'static str,
    /// The command, redis-cli style.
    pub command: String,
    /// The reply, redis-cli style: `OK`, `(nil)`, `(integer) 1`, `"tokB"`, or an array's
    /// numbered lines (`1) (integer) 0` newline `2) (integer) 2`).
    pub reply: String,
}

fn cmd<T>(r: CmdResult<T>) -> anyhow::Result<T> {
    r.map_err(|e| anyhow::anyhow!("the server did not answer: {e}"))
}
/// The reply as redis-cli shows it, a server's error included: `(error) ` and the server's
/// own text, verbatim. Any other failure (timeout, lost connection) ends the demo.
fn server_reply<T>(r: CmdResult<T>, show: impl FnOnce(T) -> String) -> anyhow::Result<String> {
    match r {
        Ok(v) => Ok(show(v)),
        Err(e) if e.kind == crate::model::error::ErrorKind::Server => {
            Ok(format!("(error) {}", e.detail))
        }
        Err(e) => cmd(Err(e)),
    }
}
fn ok_nil(r: bool) -> String {
    if r { "OK".into() } else { "(nil)".into() }
}
fn int(i: i64) -> String {
    format!("(integer) {i}")
}
fn bulk(v: Option<String>) -> String {
    v.map_or_else(|| "(nil)".to_string(), |v| format!("\"{v}\""))
}

struct Script<'a, C, W> {
    conn: &'a mut C,
    out: W,
    steps: Vec<Step>,
    act: &'static str,
}

impl<'a, C: LockConn, W: Write> Script<'a, C, W> {
    /// A transcript of the story's first act `act`, printed to `out`.
    fn new(conn: &'a mut C, out: W, act: &'static str) -> Self {
        Self {
            conn,
            out,
            steps: Vec::new(),
            act,
        }
    }

    fn show(&mut self, who: &'static str, command: String, reply: String) -> std::io::Result<()> {
        writeln!(self.out, "{who:>8}> {command}")?;
        for line in reply.lines() {
            writeln!(self.out, "{:>8}  {line}", "")?;
        }
        self.steps.push(Step {
            act: self.act,
            who,
            command,
            reply,
        });
        Ok(())
    }
    fn say(&mut self, text: &str) -> std::io::Result<()> {
        writeln!(self.out, "          # {text}")
    }
    /// A `== title ==` line opening an act.
    fn title(&mut self, act: &'static str, text: &str) -> std::io::Result<()> {
        self.act = act;
        writeln!(self.out, "\n== {text} ==")
    }
    /// Polls `EXISTS key` every `every` until the server answers 0, for at most `limit`, and
    /// shows the last reply with how long it took. The wait is announced before it starts.
    async fn show_until_gone(
        &mut self,
        key: &str,
        every: Duration,
        limit: Duration,
        why: &str,
    ) -> anyhow::Result<i64> {
        let io = io_err;
        self.say(&format!(
            "{why}: polling EXISTS every {}...",
            units::fmt_us(every.as_micros() as u64, units::Style::Compact)
        ))
        .map_err(io)?;
        let start = tokio::time::Instant::now();
        let mut polls = 0u32;
        let last = loop {
            polls += 1;
            let r = cmd(self.conn.exists(key).await)?;
            if r == 0 || start.elapsed() >= limit {
                break r;
            }
            tokio::time::sleep(every).await;
        };
        self.show("observer", format!("EXISTS {key}"), int(last))
            .map_err(io)?;
        let took = compact(ms(start.elapsed()));
        if last == 0 {
            self.say(&format!("gone after {polls} polls over {took}"))
        } else {
            self.say(&format!("still there after {polls} polls over {took}"))
        }
        .map_err(io)?;
        Ok(last)
    }
}

/// The polling interval for a wait of `d`: about 20 polls, 5 ms to 100 ms apart.
fn poll_every(d: Duration) -> Duration {
    (d / 20).clamp(Duration::from_millis(5), Duration::from_millis(100))
}
fn ms(d: Duration) -> u64 {
    d.as_millis().max(1) as u64
}
fn compact(ms: u64) -> String {
    units::fmt_us(ms * 1000, units::Style::Compact)
}
fn io_err(e: std::io::Error) -> anyhow::Error {
    anyhow::anyhow!("cannot print the demo: {e}")
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
    let mut s = Script::new(conn, out, "del");
    let io = io_err;

    for act in ["del", "token"] {
        s.act = act;
        writeln!(
            s.out,
            "\n== release with {} ==",
            if act == "del" {
                "DEL (the bug)"
            } else {
                "a token and compare-and-delete (the fix)"
            }
        )
        .map_err(io)?;
        let r = cmd(s.conn.set_nx_px(key, "tokA", ttl).await)?;
        s.show("A", format!("SET {key} tokA NX PX {ttl}"), ok_nil(r))
            .map_err(io)?;
        s.say(&format!(
            "A works longer than its TTL of {}...",
            units::fmt_us(ttl * 1000, units::Style::Compact)
        ))
        .map_err(io)?;
        tokio::time::sleep(Duration::from_millis(ttl + ttl / 5 + 1)).await;
        let r = cmd(s.conn.exists(key).await)?;
        s.show("observer", format!("EXISTS {key}"), int(r))
            .map_err(io)?;
        let r = cmd(s.conn.set_nx_px(key, "tokB", 30_000).await)?;
        s.show("B", format!("SET {key} tokB NX PX 30000"), ok_nil(r))
            .map_err(io)?;
        s.say("the lock did its job: A was slow, B moved in. Now A finishes and releases:")
            .map_err(io)?;
        if act == "del" {
            let r = cmd(s.conn.del(key).await)?;
            s.show("A", format!("DEL {key}"), int(r)).map_err(io)?;
            let r = cmd(s.conn.exists(key).await)?;
            s.show("observer", format!("EXISTS {key}"), int(r))
                .map_err(io)?;
            s.say("A deleted B's lock. C walks in while B still works:")
                .map_err(io)?;
            let r = cmd(s.conn.set_nx_px(key, "tokC", 30_000).await)?;
            s.show("C", format!("SET {key} tokC NX PX 30000"), ok_nil(r))
                .map_err(io)?;
            let r = cmd(s.conn.del(key).await)?;
            s.show("cleanup", format!("DEL {key}"), int(r))
                .map_err(io)?;
        } else {
            let eval = |tok: &str| format!("EVAL \"{CANONICAL_CAD_LUA}\" 1 {key} {tok}");
            let r = cmd(s.conn.canonical_cad(key, "tokA").await)?;
            s.show("A", eval("tokA"), int(r)).map_err(io)?;
            s.say("the same compare-and-delete without a script is DELEX (Redis >= 8.4), if this server has it:")
                .map_err(io)?;
            let r = s.conn.delex(key, "tokA").await;
            let unknown = r.as_ref().is_err_and(|e| e.is_unknown_command());
            s.show("A", format!("DELEX {key} IFEQ tokA"), server_reply(r, int)?)
                .map_err(io)?;
            s.say(if unknown {
                "this server does not know DELEX: the script is the portable form (INFO server tells the version)."
            } else {
                "refused as well: DELEX compares and deletes in one command."
            })
            .map_err(io)?;
            let r = cmd(s.conn.get(key).await)?;
            s.show("observer", format!("GET {key}"), bulk(r))
                .map_err(io)?;
            let r = cmd(s.conn.exists(key).await)?;
            s.show("observer", format!("EXISTS {key}"), int(r))
                .map_err(io)?;
            s.say("the stale release was refused; B keeps its lock, and C is refused:")
                .map_err(io)?;
            let r = cmd(s.conn.set_nx_px(key, "tokC", 30_000).await)?;
            s.show("C", format!("SET {key} tokC NX PX 30000"), ok_nil(r))
                .map_err(io)?;
            let r = cmd(s.conn.canonical_cad(key, "tokB").await)?;
            s.show("B", eval("tokB"), int(r)).map_err(io)?;
            let r = cmd(s.conn.exists(key).await)?;
            s.show("observer", format!("EXISTS {key}"), int(r))
                .map_err(io)?;
            s.say("But A and B both worked between B's SET and A's release: compare-and-delete")
                .map_err(io)?;
            s.say("prevents deleting someone else's lock, not two holders at once. Only a fencing")
                .map_err(io)?;
            s.say("token checked by the protected resource refuses the stale holder.")
                .map_err(io)?;
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

/// A two-element integer array as redis-cli prints it.
fn pair(a: u64, b: u64) -> String {
    format!("1) (integer) {a}\n2) (integer) {b}")
}
fn read_reply(r: ReadOutcome) -> String {
    match r {
        ReadOutcome::Value(v) => pair(1, v),
        ReadOutcome::Fenced { highest } => pair(0, highest),
    }
}
fn write_reply(w: WriteOutcome) -> String {
    match w {
        WriteOutcome::Accepted {
            holder,
            other_holder,
        } => pair(
            1,
            if holder {
                1
            } else if other_holder {
                2
            } else {
                0
            },
        ),
        WriteOutcome::Written => pair(1, 3),
        WriteOutcome::Fenced { highest } => pair(0, highest),
    }
}
fn sha(lua: &str) -> String {
    redis::Script::new(lua).get_hash().to_string()
}

/// Waits until the server reports `key` gone: sleeps the TTL, then polls `EXISTS` (not shown).
async fn await_expiry<C: LockConn>(conn: &mut C, key: &str, ttl_ms: u64) -> anyhow::Result<()> {
    tokio::time::sleep(Duration::from_millis(ttl_ms)).await;
    let deadline = tokio::time::Instant::now() + Duration::from_millis(2 * ttl_ms + 5_000);
    while cmd(conn.exists(key).await)? == 1 {
        if tokio::time::Instant::now() > deadline {
            anyhow::bail!("{key} did not expire within twice its TTL plus 5 s");
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    Ok(())
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
    let mut s = Script::new(conn, out, "fenced");
    let io = io_err;
    let (acquire, read, write) = (
        sha(FENCED_ACQUIRE_LUA),
        sha(RESOURCE_READ_LUA),
        sha(RESOURCE_WRITE_LUA),
    );
    let FencingKeys { lock, fence, .. } = keys;

    writeln!(
        s.out,
        "\nlockbench's scripts, sent by EVALSHA (the SHA1 of their text):"
    )
    .map_err(io)?;
    for (name, lua, hash) in [
        (
            "fenced acquire: SET NX PX, then INCR of the fence counter",
            FENCED_ACQUIRE_LUA,
            &acquire,
        ),
        (
            "resource read: reply {1, value}, or {0, highest fence} if refused",
            RESOURCE_READ_LUA,
            &read,
        ),
        (
            "resource write: reply {1, writer holds the lock 1/0}, or {0, highest fence}",
            RESOURCE_WRITE_LUA,
            &write,
        ),
    ] {
        writeln!(s.out, "\n{name}\n{hash}:").map_err(io)?;
        for line in lua.lines() {
            writeln!(s.out, "    {line}").map_err(io)?;
        }
    }
    writeln!(s.out, "\nA fence argument of `-` means: no fence.").map_err(io)?;

    for act in ["fenced", "unfenced"] {
        s.act = act;
        let fenced = act == "fenced";
        let res = if fenced { &keys.fenced } else { &keys.unfenced };
        writeln!(
            s.out,
            "\n== {} ==",
            if fenced {
                "with a fencing token: registered at the read, checked at the write"
            } else {
                "without fencing"
            }
        )
        .map_err(io)?;

        // A acquires and reads.
        let fa = if fenced {
            let f = cmd(s
                .conn
                .set_nx_px_fenced(lock, fence, None, "tokA", ttl)
                .await)?;
            let reply = f.map_or_else(|| "(nil)".to_string(), |f| int(f as i64));
            s.show(
                "A",
                format!("EVALSHA {acquire} 2 {lock} {fence} tokA {ttl}"),
                reply,
            )
            .map_err(io)?;
            Some(f.context("A could not acquire a fresh lock")?)
        } else {
            let r = cmd(s.conn.set_nx_px(lock, "tokA", ttl).await)?;
            s.show("A", format!("SET {lock} tokA NX PX {ttl}"), ok_nil(r))
                .map_err(io)?;
            None
        };
        let r = cmd(s.conn.resource_read(res, fa).await)?;
        s.show(
            "A",
            format!("EVALSHA {read} 1 {res} {}", fence_arg(fa)),
            read_reply(r),
        )
        .map_err(io)?;
        let ReadOutcome::Value(va) = r else {
            anyhow::bail!("A's first read was refused");
        };
        s.say(&format!(
            "A read {va} and works longer than its TTL of {}...",
            units::fmt_us(ttl * 1000, crate::model::units::Style::Compact)
        ))
        .map_err(io)?;
        await_expiry(s.conn, lock, ttl).await?;
        let r = cmd(s.conn.exists(lock).await)?;
        s.show("observer", format!("EXISTS {lock}"), int(r))
            .map_err(io)?;

        // B acquires, reads and writes.
        let fb = if fenced {
            let f = cmd(s
                .conn
                .set_nx_px_fenced(lock, fence, None, "tokB", 30_000)
                .await)?;
            let reply = f.map_or_else(|| "(nil)".to_string(), |f| int(f as i64));
            s.show(
                "B",
                format!("EVALSHA {acquire} 2 {lock} {fence} tokB 30000"),
                reply,
            )
            .map_err(io)?;
            Some(f.context("B could not acquire the expired lock")?)
        } else {
            let r = cmd(s.conn.set_nx_px(lock, "tokB", 30_000).await)?;
            s.show("B", format!("SET {lock} tokB NX PX 30000"), ok_nil(r))
                .map_err(io)?;
            None
        };
        let r = cmd(s.conn.resource_read(res, fb).await)?;
        s.show(
            "B",
            format!("EVALSHA {read} 1 {res} {}", fence_arg(fb)),
            read_reply(r),
        )
        .map_err(io)?;
        let ReadOutcome::Value(vb) = r else {
            anyhow::bail!("B's read was refused");
        };
        let w = cmd(s.conn.resource_write(res, lock, "tokB", fb, vb + 1).await)?;
        s.show(
            "B",
            format!(
                "EVALSHA {write} 2 {res} {lock} tokB {} {}",
                fence_arg(fb),
                vb + 1
            ),
            write_reply(w),
        )
        .map_err(io)?;
        s.say(&format!(
            "B wrote {vb}+1 while holding the lock. Now A wakes up and writes its {va}+1{}:",
            fa.map_or_else(String::new, |f| format!(" with fence {f}"))
        ))
        .map_err(io)?;

        // A writes late.
        let w = cmd(s.conn.resource_write(res, lock, "tokA", fa, va + 1).await)?;
        s.show(
            "A",
            format!(
                "EVALSHA {write} 2 {res} {lock} tokA {} {}",
                fence_arg(fa),
                va + 1
            ),
            write_reply(w),
        )
        .map_err(io)?;
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
        }
        .map_err(io)?;
        let v = cmd(s.conn.resource_value(res).await)?;
        s.show(
            "observer",
            format!("HGET {res} value"),
            bulk(Some(v.to_string())),
        )
        .map_err(io)?;
        if fenced {
            s.say(&format!(
                "one accepted write, value {v}: nothing lost, although A and B overlapped."
            ))
            .map_err(io)?;
        } else {
            s.say(&format!(
                "two accepted writes, value {v}: B's update is lost, and compare-and-delete \
                 cannot see it."
            ))
            .map_err(io)?;
        }
        let eval = format!("EVAL \"{CANONICAL_CAD_LUA}\" 1 {lock} tokB");
        let r = cmd(s.conn.canonical_cad(lock, "tokB").await)?;
        s.show("B", eval, int(r)).map_err(io)?;
    }
    s.act = "cleanup";
    let all = keys.all();
    let r = cmd(s.conn.del_many(&all).await)?;
    s.show("cleanup", format!("DEL {}", all.join(" ")), int(r))
        .map_err(io)?;
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
    let mut s = Script::new(conn, out, "setnx");
    let cad = |tok: &str| format!("EVAL \"{CANONICAL_CAD_LUA}\" 1 {key} {tok}");
    s.title("setnx", "SETNX, then PEXPIRE: two commands")
        .map_err(io_err)?;
    let r = cmd(s.conn.setnx(key, "tokA").await)?;
    s.show("A", format!("SETNX {key} tokA"), int(i64::from(r)))
        .map_err(io_err)?;
    let r = cmd(s.conn.pexpire(key, t).await)?;
    s.show("A", format!("PEXPIRE {key} {t}"), int(i64::from(r)))
        .map_err(io_err)?;
    let r = cmd(s.conn.pttl(key).await)?;
    s.show("observer", format!("PTTL {key}"), int(r))
        .map_err(io_err)?;
    s.say("when A lives to send both, the lock has its TTL. A releases:")
        .map_err(io_err)?;
    let r = cmd(s.conn.canonical_cad(key, "tokA").await)?;
    s.show("A", cad("tokA"), int(r)).map_err(io_err)?;

    s.say("now A crashes between the two commands:")
        .map_err(io_err)?;
    let r = cmd(s.conn.setnx(key, "tokA").await)?;
    s.show("A", format!("SETNX {key} tokA"), int(i64::from(r)))
        .map_err(io_err)?;
    s.say(&format!("A crashes before its PEXPIRE {key} {t} is sent."))
        .map_err(io_err)?;
    let r = cmd(s.conn.pttl(key).await)?;
    s.show("observer", format!("PTTL {key}"), int(r))
        .map_err(io_err)?;
    s.say("-1: the key exists and has no expiry.")
        .map_err(io_err)?;
    b_tries(&mut s, key).await?;
    // Wait longer than the TTL A meant to set, watching the key's TTL (not a blind sleep).
    let wait = ttl + ttl / 5;
    s.say(&format!(
        "waiting {} (longer than the TTL A meant to set), polling PTTL every {}...",
        compact(ms(wait)),
        units::fmt_us(poll_every(wait).as_micros() as u64, units::Style::Compact)
    ))
    .map_err(io_err)?;
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
    s.show("observer", format!("PTTL {key}"), int(last))
        .map_err(io_err)?;
    s.say(&format!(
        "{} after {polls} polls over {}",
        if last == -1 { "still -1" } else { "changed" },
        compact(ms(start.elapsed()))
    ))
    .map_err(io_err)?;
    b_tries(&mut s, key).await?;
    s.say("the lock is stuck: nobody holds it and it never expires. Only a DEL frees it:")
        .map_err(io_err)?;
    let r = cmd(s.conn.del(key).await)?;
    s.show("operator", format!("DEL {key}"), int(r))
        .map_err(io_err)?;
    if b_tries(&mut s, key).await? {
        let r = cmd(s.conn.canonical_cad(key, "tokB").await)?;
        s.show("B", cad("tokB"), int(r)).map_err(io_err)?;
    }

    s.title("set-nx-px", "SET NX PX: one command")
        .map_err(io_err)?;
    let r = cmd(s.conn.set_nx_px(key, "tokA", t).await)?;
    s.show("A", format!("SET {key} tokA NX PX {t}"), ok_nil(r))
        .map_err(io_err)?;
    s.say("A crashes at the same point: the TTL went with the key.")
        .map_err(io_err)?;
    let r = cmd(s.conn.pttl(key).await)?;
    s.show("observer", format!("PTTL {key}"), int(r))
        .map_err(io_err)?;
    b_tries(&mut s, key).await?;
    let limit = 2 * wait + Duration::from_secs(5);
    s.show_until_gone(key, poll_every(ttl), limit, "waiting for the TTL")
        .await?;
    if b_tries(&mut s, key).await? {
        s.say("the server freed the crashed holder's lock: B is in.")
            .map_err(io_err)?;
        let r = cmd(s.conn.canonical_cad(key, "tokB").await)?;
        s.show("B", cad("tokB"), int(r)).map_err(io_err)?;
    }
    Ok(s.steps)
}

/// B's attempt in the setnx-expire story: `SET key tokB NX PX 30000`, shown; `true` = acquired.
async fn b_tries<C: LockConn, W: Write>(
    s: &mut Script<'_, C, W>,
    key: &str,
) -> anyhow::Result<bool> {
    let r = cmd(s.conn.set_nx_px(key, "tokB", 30_000).await)?;
    s.show("B", format!("SET {key} tokB NX PX 30000"), ok_nil(r))
        .map_err(io_err)?;
    Ok(r)
}

/// How long a fail-open client waits for a reply before it gives up.
pub const FAIL_OPEN_TIMEOUT: Duration = Duration::from_millis(100);
/// How long the fail-open demo pauses the server.
pub const FAIL_OPEN_PAUSE: Duration = Duration::from_millis(1000);

/// Sends `CLIENT PAUSE ms ALL` on a connection of its own, which is then closed.
async fn client_pause(url: &str, pause: Duration) -> anyhow::Result<String> {
    let info = crate::target::check_url(url)?;
    let client = redis::Client::open(info).context("cannot use the Redis URL")?;
    let mut c = client
        .get_multiplexed_async_connection()
        .await
        .context("cannot connect to pause the server")?;
    let r: String = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(ms(pause))
        .arg("ALL")
        .query_async(&mut c)
        .await
        .context("the server refused CLIENT PAUSE")?;
    Ok(r)
}

/// The reply a client that gave up shows: none.
fn gave_up(r: &CmdResult<bool>, timeout: Duration) -> String {
    match r {
        Ok(v) => ok_nil(*v),
        Err(e) if e.kind == crate::model::error::ErrorKind::Timeout => format!(
            "(no reply within {}: the client gave up)",
            compact(ms(timeout))
        ),
        Err(e) => format!("(error) {e}"),
    }
}

/// The article's fail-open service ("Lock acquire failed (Redis down?) - degrading to
/// lock-free") against a paused server, on `key` of the server at `url`. The demo pauses every
/// client with `CLIENT PAUSE <pause> ALL`; A and B, each on its own connection with a response
/// timeout of `timeout`, send `SET NX PX`, time out, and proceed without a lock. First with
/// clients that close a connection whose reply timed out (their `SET` never runs: after the
/// pause both see the key absent), then with one that keeps it (its `SET` waits at the server
/// and runs when the pause ends: a lock its owner thinks it does not hold). Returns the
/// transcript; the key is deleted.
pub async fn fail_open<W: Write>(
    url: &str,
    allow_remote: bool,
    key: &str,
    pause: Duration,
    timeout: Duration,
    out: W,
) -> anyhow::Result<Vec<Step>> {
    use crate::store::Timeouts;
    use crate::store::redis::RedisConnector;
    let short = RedisConnector::new(
        url,
        Timeouts {
            connect: Duration::from_secs(5),
            response: timeout,
        },
        allow_remote,
    )?;
    let patient = RedisConnector::new(url, Timeouts::default(), allow_remote)?;
    let mut observer = patient.connect().await?;
    let mut s = Script {
        conn: &mut observer,
        out,
        steps: Vec::new(),
        act: "close",
    };
    let p = ms(pause);
    let set = |tok: &str| format!("SET {key} {tok} NX PX 30000");

    for act in ["close", "keep"] {
        let close = act == "close";
        s.title(
            act,
            if close {
                "clients that close the connection when a reply times out"
            } else {
                "a client that keeps its connection (a pooled or multiplexed client)"
            },
        )
        .map_err(io_err)?;
        // Connections opened before the pause (opening one sends commands too).
        let mut a = short.connect().await?;
        let mut b = if close {
            Some(short.connect().await?)
        } else {
            None
        };
        let r = client_pause(url, pause).await?;
        s.show("admin", format!("CLIENT PAUSE {p} ALL"), r)
            .map_err(io_err)?;
        s.say(&format!(
            "the server holds every client's commands for {}; {} after {}:",
            compact(p),
            if close {
                "A and B give up"
            } else {
                "A gives up"
            },
            compact(ms(timeout))
        ))
        .map_err(io_err)?;
        let ra = a.set_nx_px(key, "tokA", 30_000).await;
        s.show("A", set("tokA"), gave_up(&ra, timeout))
            .map_err(io_err)?;
        if ra.is_err() {
            s.say("A: \"Lock acquire failed (Redis down?) - degrading to lock-free\": A enters its critical section without a lock.")
                .map_err(io_err)?;
        }
        if let Some(mut b) = b.take() {
            drop(a);
            let rb = b.set_nx_px(key, "tokB", 30_000).await;
            s.show("B", set("tokB"), gave_up(&rb, timeout))
                .map_err(io_err)?;
            drop(b);
            if rb.is_err() {
                s.say("B does the same: A and B are both inside, and no lock exists to keep them apart.")
                    .map_err(io_err)?;
            }
            s.say("both closed their connections; once the server answers again, each looks:")
                .map_err(io_err)?;
            // New connections: their commands wait at the server until the pause ends.
            for who in ["A", "B"] {
                let mut c = patient.connect().await?;
                let r = cmd(c.exists(key).await)?;
                s.show(who, format!("EXISTS {key}"), int(r))
                    .map_err(io_err)?;
            }
            s.say("neither SET ever ran: the server dropped them with their connections. The lock was never taken; mutual exclusion was simply off while the server did not answer.")
                .map_err(io_err)?;
        } else {
            s.say("A's client keeps the connection; A's SET is still waiting at the server. The observer's GET waits behind it:")
                .map_err(io_err)?;
            let r = cmd(s.conn.get(key).await)?;
            let held = r.is_some();
            s.show("observer", format!("GET {key}"), bulk(r))
                .map_err(io_err)?;
            let r = cmd(s.conn.pttl(key).await)?;
            s.show("observer", format!("PTTL {key}"), int(r))
                .map_err(io_err)?;
            if held {
                s.say("A's timed-out SET ran when the pause ended: a timed-out command is not a failed one. The lock is held for 30 s by a token whose owner believes it holds nothing; B is refused:")
                    .map_err(io_err)?;
            }
            let r = cmd(s.conn.set_nx_px(key, "tokB", 30_000).await)?;
            s.show("B", set("tokB"), ok_nil(r)).map_err(io_err)?;
            s.say("the article's service still calls releaseLock with A's handle, and its token frees the key:")
                .map_err(io_err)?;
            let r = cmd(s.conn.canonical_cad(key, "tokA").await)?;
            s.show(
                "A",
                format!("EVAL \"{CANONICAL_CAD_LUA}\" 1 {key} tokA"),
                int(r),
            )
            .map_err(io_err)?;
            drop(a);
        }
    }
    Ok(s.steps)
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
    let mut s = Script::new(conn, out, "dedup");
    s.title(
        "dedup",
        "a deduplication window: SET NX with a fixed value, never released",
    )
    .map_err(io_err)?;
    let set = format!("SET {key} 1 NX PX {w}");
    let r = cmd(s.conn.set_nx_px(key, "1", w).await)?;
    s.show("first", set.clone(), ok_nil(r)).map_err(io_err)?;
    s.say(&format!(
        "the first heartbeat passes (the article sends SET hb:dedup:42 1 NX EX 2: the same with a window of {})",
        compact(w)
    ))
    .map_err(io_err)?;
    let r = cmd(s.conn.set_nx_px(key, "1", w).await)?;
    s.show("dup", set.clone(), ok_nil(r)).map_err(io_err)?;
    s.say("a duplicate within the window is suppressed")
        .map_err(io_err)?;
    let limit = 2 * window + Duration::from_secs(5);
    s.show_until_gone(
        key,
        poll_every(window),
        limit,
        "waiting for the window to close",
    )
    .await?;
    let r = cmd(s.conn.set_nx_px(key, "1", w).await)?;
    s.show("later", set, ok_nil(r)).map_err(io_err)?;
    s.say("the window reopened. A fixed value is right here: nobody releases the key, so nobody has to prove they set it; it only expires.")
        .map_err(io_err)?;
    let r = cmd(s.conn.del(key).await)?;
    s.show("cleanup", format!("DEL {key}"), int(r))
        .map_err(io_err)?;
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
    let mut s = Script::new(conn, out, "token");
    s.title(
        "token",
        "a one-time token: GETDEL reads and deletes in one command",
    )
    .map_err(io_err)?;
    let r = cmd(s.conn.set_nx_px(key, "tok", 60_000).await)?;
    s.show("issuer", format!("SET {key} tok NX PX 60000"), ok_nil(r))
        .map_err(io_err)?;
    s.say("the token is issued (the article: SET bk:tok:abc 1 EX 60); two callers redeem it:")
        .map_err(io_err)?;
    for who in ["first", "second"] {
        let r = cmd(s.conn.getdel(key).await)?;
        s.show(who, format!("GETDEL {key}"), bulk(r))
            .map_err(io_err)?;
    }
    let r = cmd(s.conn.exists(key).await)?;
    s.show("observer", format!("EXISTS {key}"), int(r))
        .map_err(io_err)?;
    s.say("exactly one caller got the token: no window between the read and the delete, and no holder that must prove anything at a release.")
        .map_err(io_err)?;
    Ok(s.steps)
}

/// The stories `lockbench demo` knows, in help order.
pub const STORIES: [&str; 6] = [
    "stale-release",
    "fencing",
    "setnx-expire",
    "fail-open",
    "dedup-window",
    "one-time-token",
];

/// `demo`.
#[derive(Debug, Args, Clone)]
pub struct DemoArgs {
    /// The story: stale-release (DEL vs compare-and-delete), fencing (a fencing token at the
    /// resource refuses the late write that compare-and-delete lets through), setnx-expire
    /// (a crash between SETNX and EXPIRE leaves a lock forever; SET NX PX does not),
    /// fail-open (a paused server: two clients time out and proceed without a lock; needs a
    /// real server), dedup-window (SET NX with a fixed value and a TTL: duplicates dropped
    /// until it expires) or one-time-token (GETDEL: the first caller gets it, the next nil).
    #[arg(value_parser = STORIES)]
    pub story: String,
    /// A's TTL in stale-release, fencing and setnx-expire, which wait past it [default 300ms];
    /// the window of dedup-window [default 2s]. Not used by fail-open and one-time-token.
    #[arg(long)]
    pub ttl: Option<String>,
    /// Redis URL instead of a private server.
    #[arg(long)]
    pub redis: Option<String>,
    /// auto, spawn, url or memory [default auto].
    #[arg(long)]
    pub backend: Option<String>,
    /// Allow a non-loopback Redis host.
    #[arg(long)]
    pub allow_remote: bool,
    /// The server binary a private server is started from, e.g. .servers/…/valkey-server
    /// [default redis-server on PATH]. Repeatable: the story runs on each server in turn, and
    /// the replies that differ between them are printed at the end.
    #[arg(long = "redis-server", conflicts_with = "redis")]
    pub redis_server: Vec<String>,
}

/// `lockbench demo`. With `--redis-server` given once or more, the story runs on a private
/// server of each binary in turn, each transcript under a header naming the server; with two
/// or more, what differs between the transcripts is printed at the end.
pub async fn run(a: DemoArgs) -> anyhow::Result<i32> {
    let default_ttl = if a.story == "dedup-window" {
        "2s"
    } else {
        "300ms"
    };
    let ttl = crate::model::units::parse_duration(a.ttl.as_deref().unwrap_or(default_ttl))
        .map_err(|e| anyhow::anyhow!("--ttl: {e}"))?;
    if ttl < std::time::Duration::from_millis(1) || ttl > std::time::Duration::from_secs(60) {
        anyhow::bail!("--ttl: use 1ms to 60s");
    }
    let profile = Profile {
        redis: a.redis.clone(),
        backend: a.backend.clone(),
        redis_server: (!a.redis_server.is_empty()).then(|| a.redis_server.clone()),
        ..Profile::default()
    };
    let mut plan = profile
        .plan("command line", "", None)
        .and_then(|mut plan| {
            crate::backend::check_plan_io(&mut plan, &profile, "command line", "", None)?;
            Ok(plan)
        })
        .map_err(|mut e| {
            // Every field of this profile came from a flag: name the flag.
            if let Some(f) = &e.field {
                e.message = e.message.replacen(
                    &format!("field `{f}`"),
                    &format!("--{}", f.replace('_', "-")),
                    1,
                );
            }
            e
        })?;
    plan.backend.allow_remote = a.allow_remote;
    if plan.backend.kind == BackendChoice::Url && plan.backend.redis.is_none() {
        anyhow::bail!("--backend url needs --redis URL");
    }
    if plan.backend.redis_servers.is_empty() {
        play(&a, &plan, ttl, None).await?;
        return Ok(0);
    }
    let of = plan.backend.redis_servers.len();
    let mut transcripts = Vec::with_capacity(of);
    for (i, exe) in plan.backend.redis_servers.iter().enumerate() {
        let heading = Heading {
            number: i + 1,
            of,
            exe,
        };
        transcripts.push(play(&a, &plan, ttl, Some(heading)).await?);
    }
    if of >= 2 {
        let d = side_by_side::differences(&transcripts);
        side_by_side::print(&transcripts, &d, std::io::stdout()).map_err(io_err)?;
    }
    Ok(0)
}

/// Which of the `--redis-server` binaries a transcript runs on.
#[derive(Debug, Clone, Copy)]
struct Heading<'a> {
    number: usize,
    of: usize,
    exe: &'a std::path::Path,
}

impl Heading<'_> {
    /// The header line above the server's transcript.
    fn print(&self, version: &str) {
        println!(
            "\n=== server {} of {}: {version} ({}) ===",
            self.number,
            self.of,
            self.exe.display()
        );
    }
}

/// Plays `a.story` once on the backend of `plan` (the binary of `heading` when given) and
/// returns its transcript. The server is stopped whatever happens.
async fn play(
    a: &DemoArgs,
    plan: &crate::profile::Plan,
    ttl: Duration,
    heading: Option<Heading<'_>>,
) -> anyhow::Result<Transcript> {
    let on = |e: anyhow::Error| match heading {
        Some(h) => e.context(format!(
            "on server {} of {} ({})",
            h.number,
            h.of,
            h.exe.display()
        )),
        None => e,
    };
    if plan.backend.kind == crate::profile::BackendChoice::SpawnCluster {
        return Err(crate::exit::BadInput(
            "a demo tells its story on one server: use --backend spawn, url or memory, not \
             spawn-cluster"
                .into(),
        )
        .into());
    }
    if plan.backend.kind == crate::profile::BackendChoice::Sim {
        return Err(crate::exit::BadInput(
            "a demo is a story told in real time, step by step: use --backend spawn, url or memory, \
             not sim"
                .into(),
        )
        .into());
    }
    let backend = match Backend::open_server(plan, false, heading.map(|h| h.exe)).await {
        Ok(b) => b,
        // The binary the user named did not start as a server: bad input, not a failed run.
        Err(e) if let Some(h) = heading => {
            let why = format!("{e:#}");
            return Err(anyhow::Error::new(crate::exit::BadInput(format!(
                "--redis-server (server {} of {}): {} (give the path of a redis-server or \
                 valkey-server binary)",
                h.number,
                h.of,
                why.lines().next().unwrap_or("").trim_end_matches(':')
            ))));
        }
        Err(e) => return Err(e),
    };
    if let Store::Cluster(_) = &backend.store {
        backend.close().await;
        return Err(crate::exit::BadInput(
            "a demo tells its story on one server, and --redis names a Redis Cluster node: give \
             a standalone server, or --cluster no"
                .into(),
        )
        .into());
    }
    let run_id = crate::results::run_id(std::time::SystemTime::now());
    let prefix = format!("lockbench:{run_id}:demo");
    let result = if a.story == "fail-open" {
        // The story needs a server to pause; the model has no clients to hold.
        let url = match &backend.store {
            Store::Spawned(server, _) => Some(server.lock().await.url()),
            Store::Url(_) => plan.backend.redis.clone(),
            Store::Memory(_) | Store::Sim(_) | Store::Cluster(_) | Store::Redlock(..) => None,
        };
        match url {
            Some(url) => run_fail_open(&url, a.allow_remote, &prefix, heading).await,
            None => Err(anyhow::Error::new(crate::exit::BadInput(
                "demo fail-open needs a real server to pause (CLIENT PAUSE): use --backend \
                 spawn (redis-server installed) or --redis URL, not the memory model"
                    .into(),
            ))),
        }
    } else {
        crate::with_connector!(&backend, c => run_demo(c, &a.story, &prefix, ttl, heading).await)
    };
    backend.close().await;
    let (version, steps) = result.map_err(on)?;
    Ok(Transcript {
        // Only the transcripts of `--redis-server` binaries are compared, and labelled.
        server: heading.map_or_else(String::new, |h| h.exe.display().to_string()),
        version,
        run_id,
        steps,
    })
}

async fn run_fail_open(
    url: &str,
    allow_remote: bool,
    prefix: &str,
    heading: Option<Heading<'_>>,
) -> anyhow::Result<(String, Vec<Step>)> {
    use crate::store::Timeouts;
    use crate::store::redis::RedisConnector;
    let key = format!("{prefix}:fail-open:lock");
    let c = RedisConnector::new(url, Timeouts::default(), allow_remote)?;
    let mut conn = c.connect().await?;
    let version = conn
        .server_version()
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(h) = heading {
        h.print(&version);
    }
    println!(
        "fail-open demo against {} ({version}); key {key}. It pauses every client of that \
         server for {}, twice.",
        c.describe(),
        compact(ms(FAIL_OPEN_PAUSE))
    );
    let r = fail_open(
        url,
        allow_remote,
        &key,
        FAIL_OPEN_PAUSE,
        FAIL_OPEN_TIMEOUT,
        std::io::stdout(),
    )
    .await;
    // Whatever happened, leave nothing behind (this waits for any pause to end).
    let _ = conn.del(&key).await;
    r.map(|steps| (version, steps)).context("demo failed")
}

async fn run_demo<K: Connector>(
    c: &K,
    story: &str,
    prefix: &str,
    ttl: std::time::Duration,
    heading: Option<Heading<'_>>,
) -> anyhow::Result<(String, Vec<Step>)> {
    let mut conn = c.connect().await?;
    let version = conn
        .server_version()
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(h) = heading {
        h.print(&version);
    }
    let out = std::io::stdout();
    let banner = |keys: &[String]| {
        println!(
            "{story} demo against {} ({version}); key{} {}",
            c.describe(),
            if keys.len() == 1 { "" } else { "s" },
            keys.join(" ")
        );
    };
    let (r, keys) = match story {
        "fencing" => {
            // One hash tag: the scripts touch the lock and the resource together.
            let keys = FencingKeys::new(&format!("{prefix}:{{fencing}}"));
            banner(&keys.all());
            (fencing(&mut conn, &keys, ttl, out).await, keys.all())
        }
        "setnx-expire" => {
            let key = format!("{prefix}:setnx-expire:lock");
            banner(std::slice::from_ref(&key));
            (setnx_expire(&mut conn, &key, ttl, out).await, vec![key])
        }
        "dedup-window" => {
            let key = format!("{prefix}:dedup:hb:42");
            banner(std::slice::from_ref(&key));
            (dedup_window(&mut conn, &key, ttl, out).await, vec![key])
        }
        "one-time-token" => {
            let key = format!("{prefix}:one-time-token:tok:abc");
            banner(std::slice::from_ref(&key));
            (one_time_token(&mut conn, &key, out).await, vec![key])
        }
        _ => {
            let key = format!("{prefix}:lock");
            banner(std::slice::from_ref(&key));
            (stale_release(&mut conn, &key, ttl, out).await, vec![key])
        }
    };
    // Whatever happened, leave nothing behind.
    let _ = conn.del_many(&keys).await;
    r.map(|steps| (version, steps)).context("demo failed")
}
