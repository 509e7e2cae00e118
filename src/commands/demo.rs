//! `demo stale-release`: the A/B/C story of the design notes, and `demo fencing`: the article's
//! A/B story with a fencing token at the resource; both replayed against a real server and
//! printed redis-cli style. Every reply shown is the server's reply to the command shown.

use crate::cli::DemoArgs;
use crate::profile::{BackendChoice, Profile};
use crate::store::backend::Backend;
use crate::store::{
    CANONICAL_CAD_LUA, CmdResult, Connector, FENCED_ACQUIRE_LUA, LockConn, RESOURCE_READ_LUA,
    RESOURCE_WRITE_LUA, ReadOutcome, WriteOutcome, fence_arg,
};
use crate::units;
use anyhow::Context;
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

impl<C: LockConn, W: Write> Script<'_, C, W> {
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
    let mut s = Script {
        conn,
        out,
        steps: Vec::new(),
        act: "del",
    };
    let io = |e: std::io::Error| anyhow::anyhow!("cannot print the demo: {e}");

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
    let mut s = Script {
        conn,
        out,
        steps: Vec::new(),
        act: "fenced",
    };
    let io = |e: std::io::Error| anyhow::anyhow!("cannot print the demo: {e}");
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
            units::fmt_us(ttl * 1000, crate::units::Style::Compact)
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

/// `lockbench demo`.
pub async fn run(a: DemoArgs) -> anyhow::Result<i32> {
    let ttl = crate::units::parse_duration(&a.ttl).map_err(|e| anyhow::anyhow!("--ttl: {e}"))?;
    if ttl < std::time::Duration::from_millis(1) || ttl > std::time::Duration::from_secs(60) {
        anyhow::bail!("--ttl: use 1ms to 60s");
    }
    let profile = Profile {
        redis: a.redis.clone(),
        backend: a.backend.clone(),
        ..Profile::default()
    };
    let mut plan = profile.plan("command line", "", None)?;
    plan.allow_remote = a.allow_remote;
    if plan.backend == BackendChoice::Url && plan.redis.is_none() {
        anyhow::bail!("--backend url needs --redis URL");
    }
    let backend = Backend::open(&plan, false).await?;
    let prefix = format!(
        "lockbench:{}:demo",
        crate::results::run_id(std::time::SystemTime::now())
    );
    let result = crate::with_connector!(&backend, c => run_demo(c, &a.story, &prefix, ttl).await);
    backend.close().await;
    result.map(|_| 0)
}

async fn run_demo<K: Connector>(
    c: &K,
    story: &str,
    prefix: &str,
    ttl: std::time::Duration,
) -> anyhow::Result<()> {
    let mut conn = c.connect().await?;
    let version = conn
        .server_version()
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let (r, keys) = if story == "fencing" {
        // One hash tag: the scripts touch the lock and the resource together.
        let keys = FencingKeys::new(&format!("{prefix}:{{fencing}}"));
        println!(
            "fencing demo against {} ({version}); keys {}",
            c.describe(),
            keys.all().join(" ")
        );
        let r = fencing(&mut conn, &keys, ttl, std::io::stdout()).await;
        (r, keys.all())
    } else {
        let key = format!("{prefix}:lock");
        println!(
            "stale-release demo against {} ({version}); key {key}",
            c.describe()
        );
        let r = stale_release(&mut conn, &key, ttl, std::io::stdout()).await;
        (r, vec![key])
    };
    // Whatever happened, leave nothing behind.
    let _ = conn.del_many(&keys).await;
    r.map(|_| ()).context("demo failed")
}
