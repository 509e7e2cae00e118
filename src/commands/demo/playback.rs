//! A story played step by step: each [`Cmd`] sent and shown redis-cli style with
//! the server's reply ([`Playback::send`]), the narration between them, and the polling waits.

use super::cmd::{Cmd, Reply};
use crate::model::error::{CmdError, CmdResult, ErrorKind};
use crate::model::units;
use crate::store::LockConn;
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

/// A failure other than a server's error reply ends the demo.
pub(crate) fn cmd<T>(r: CmdResult<T>) -> anyhow::Result<T> {
    r.map_err(|e| anyhow::anyhow!("the server did not answer: {e}"))
}

/// The polling interval for a wait of `d`: about 20 polls, 5 ms to 100 ms apart.
pub(crate) fn poll_every(d: Duration) -> Duration {
    (d / 20).clamp(Duration::from_millis(5), Duration::from_millis(100))
}
pub(crate) fn ms(d: Duration) -> u64 {
    d.as_millis().max(1) as u64
}
pub(crate) fn compact(ms: u64) -> String {
    units::fmt_us(ms * 1000, units::Style::Compact)
}
pub(crate) fn io_err(e: std::io::Error) -> anyhow::Error {
    anyhow::anyhow!("cannot print the demo: {e}")
}

pub(crate) struct Playback<'a, C, W> {
    pub(crate) conn: &'a mut C,
    pub(crate) out: W,
    pub(crate) steps: Vec<Step>,
    pub(crate) act: &'static str,
}

impl<'a, C: LockConn, W: Write> Playback<'a, C, W> {
    /// A transcript of the story's first act `act`, printed to `out`.
    pub(crate) fn new(conn: &'a mut C, out: W, act: &'static str) -> Self {
        Self {
            conn,
            out,
            steps: Vec::new(),
            act,
        }
    }

    /// Prints and records `command` by `who` with `reply` (redis-cli text).
    pub(crate) fn show(
        &mut self,
        who: &'static str,
        command: &Cmd<'_>,
        reply: String,
    ) -> anyhow::Result<()> {
        let command = command.cli();
        writeln!(self.out, "{who:>8}> {command}").map_err(io_err)?;
        for line in reply.lines() {
            writeln!(self.out, "{:>8}  {line}", "").map_err(io_err)?;
        }
        self.steps.push(Step {
            act: self.act,
            who,
            command,
            reply,
        });
        Ok(())
    }

    /// Sends `command` on the story's connection and shows it with its reply. A failure
    /// (a server's error included) ends the demo.
    pub(crate) async fn send(
        &mut self,
        who: &'static str,
        command: Cmd<'_>,
    ) -> anyhow::Result<Reply> {
        let r = cmd(command.send(self.conn).await)?;
        self.show(who, &command, r.cli())?;
        Ok(r)
    }

    /// [`Playback::send`] on another connection of `who`'s own.
    pub(crate) async fn send_on<D: LockConn>(
        &mut self,
        conn: &mut D,
        who: &'static str,
        command: Cmd<'_>,
    ) -> anyhow::Result<Reply> {
        let r = cmd(command.send(conn).await)?;
        self.show(who, &command, r.cli())?;
        Ok(r)
    }

    /// [`Playback::send`], but a server's error is shown as redis-cli shows it (`(error) ` and
    /// the server's own text, verbatim) and returned; any other failure (timeout, lost
    /// connection) ends the demo.
    pub(crate) async fn send_or_error(
        &mut self,
        who: &'static str,
        command: Cmd<'_>,
    ) -> anyhow::Result<Result<Reply, CmdError>> {
        match command.send(self.conn).await {
            Ok(r) => {
                self.show(who, &command, r.cli())?;
                Ok(Ok(r))
            }
            Err(e) if e.kind == ErrorKind::Server => {
                self.show(who, &command, format!("(error) {}", e.detail))?;
                Ok(Err(e))
            }
            Err(e) => cmd(Err(e)),
        }
    }

    /// A `# text` line of narration.
    pub(crate) fn say(&mut self, text: &str) -> anyhow::Result<()> {
        writeln!(self.out, "          # {text}").map_err(io_err)
    }
    /// A `== title ==` line opening an act.
    pub(crate) fn title(&mut self, act: &'static str, text: &str) -> anyhow::Result<()> {
        self.act = act;
        writeln!(self.out, "\n== {text} ==").map_err(io_err)
    }

    /// Polls `EXISTS key` every `every` until the server answers 0, for at most `limit`, and
    /// shows the last reply with how long it took. The wait is announced before it starts.
    pub(crate) async fn show_until_gone(
        &mut self,
        key: &str,
        every: Duration,
        limit: Duration,
        why: &str,
    ) -> anyhow::Result<i64> {
        let exists = Cmd::Exists(key);
        self.say(&format!(
            "{why}: polling EXISTS every {}...",
            units::fmt_us(every.as_micros() as u64, units::Style::Compact)
        ))?;
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
        self.show("observer", &exists, Reply::Int(last).cli())?;
        let took = compact(ms(start.elapsed()));
        if last == 0 {
            self.say(&format!("gone after {polls} polls over {took}"))?;
        } else {
            self.say(&format!("still there after {polls} polls over {took}"))?;
        }
        Ok(last)
    }
}

/// Waits until the server reports `key` gone: sleeps the TTL, then polls `EXISTS` (not shown).
pub(crate) async fn await_expiry<C: LockConn>(
    conn: &mut C,
    key: &str,
    ttl_ms: u64,
) -> anyhow::Result<()> {
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
