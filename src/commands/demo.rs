//! `demo stale-release`: the A/B/C story of the design notes, replayed against a real server
//! and printed redis-cli style. Every reply shown is the server's reply to the command shown.

use crate::cli::DemoArgs;
use crate::profile::{BackendChoice, Profile};
use crate::store::backend::Backend;
use crate::store::{CANONICAL_CAD_LUA, CmdResult, Connector, LockConn};
use crate::units;
use anyhow::Context;
use std::io::Write;
use std::time::Duration;

/// One command of the transcript and the server's reply, formatted as redis-cli prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// Which act of the story (`del` or `token`).
    pub act: &'static str,
    /// Who sends it (A, B, C, or "observer").
    pub who: &'static str,
    /// The command, redis-cli style.
    pub command: String,
    /// The reply, redis-cli style: `OK`, `(nil)`, `(integer) 1`, `"tokB"`.
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
        writeln!(self.out, "{:>8}  {reply}", "")?;
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
    let key = format!(
        "lockbench:{}:demo:lock",
        crate::results::run_id(std::time::SystemTime::now())
    );
    let result = crate::with_connector!(&backend, c => run_demo(c, &key, ttl).await);
    backend.close().await;
    result.map(|_| 0)
}

async fn run_demo<K: Connector>(c: &K, key: &str, ttl: std::time::Duration) -> anyhow::Result<()> {
    use crate::store::LockConn;
    let mut conn = c.connect().await?;
    let version = conn
        .server_version()
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    println!(
        "stale-release demo against {} ({version}); key {key}",
        c.describe()
    );
    let r = stale_release(&mut conn, key, ttl, std::io::stdout()).await;
    // Whatever happened, leave nothing behind.
    let _ = conn.del(key).await;
    r.map(|_| ()).context("demo failed")
}
