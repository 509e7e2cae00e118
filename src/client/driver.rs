//! One driver process: started, greeted (`hello`), asked for sections (`section`, `leave`) and
//! told goodbye (`bye`). Whatever goes wrong with the process — it dies, stops answering, or
//! writes what is not the protocol — is a [`DriverError`] naming the client, the holder, what
//! happened and the last lines the process wrote on stderr.

use crate::lines::{BoundedLines, LineError};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};

/// The protocol version lockbench speaks.
pub(crate) const PROTOCOL: u64 = 1;

/// A driver that failed: which one, what happened, what it last wrote on stderr.
#[derive(Debug, thiserror::Error)]
#[error("client {who}: {what}{}", stderr_tail(.stderr))]
pub(crate) struct DriverError {
    /// `redis-py (holder 3, pid 4242)`.
    pub(crate) who: String,
    /// `died (exit status 1) while a section was open`.
    pub(crate) what: String,
    /// Its last stderr lines.
    pub(crate) stderr: Vec<String>,
    /// The library refused the run's settings at `hello` (bad input, not a broken driver).
    pub(crate) refused: bool,
}
crate::exit::classify!(DriverError => |e| if e.refused { BadInput } else { Failed });

fn stderr_tail(lines: &[String]) -> String {
    match lines {
        [] => String::new(),
        _ => format!("; its last words on stderr: {}", lines.join(" | ")),
    }
}

/// How a library's error counts: a timeout or a broken connection is the server's
/// unavailability (it opens an outage, as lockbench's own commands' do), anything else is
/// the library's.
pub(crate) fn error_kind(kind: Option<&str>) -> crate::model::error::ErrorKind {
    use crate::model::error::ErrorKind;
    match kind {
        Some("timeout") => ErrorKind::Timeout,
        Some("connection") => ErrorKind::Connection,
        _ => ErrorKind::Other,
    }
}

/// What a `section` request gave.
#[derive(Debug)]
pub(crate) enum Entered {
    /// Inside the library's idiom: the lock is held (the library says).
    Held {
        /// The request's id, for its `leave`.
        id: u64,
        /// The lock's value, where the library exposes it.
        token: Option<String>,
    },
    /// Not acquired: `timeout` (the wait budget ran out), `fail` (busy, no wait) or `error`.
    NotAcquired {
        outcome: String,
        error: Option<String>,
        /// `timeout` or `connection` when the library's error was one (the driver says).
        kind: Option<String>,
    },
}

/// What leaving a section gave.
#[derive(Debug, Default)]
pub(crate) struct Left {
    /// `ok`, `not_owned`, `lost` or `error`.
    pub(crate) outcome: String,
    /// The library's exception text, if any.
    pub(crate) error: Option<String>,
    /// `timeout` or `connection` when the library's error was one (the driver says).
    pub(crate) kind: Option<String>,
    /// redis-lock: what its release did (`DEL returned 1`…).
    pub(crate) detail: Option<String>,
    /// `lost` events while held: the library said the lock was lost.
    pub(crate) lost: u32,
    /// `extended` events while held: the library re-armed the lock.
    pub(crate) extended: u32,
}

/// How to start a driver process: the same for every holder of a variant, and for a holder
/// started again after its crash.
#[derive(Debug, Clone)]
pub(crate) struct Recipe {
    /// The command line (`scripts/drivers.sh --command NAME`).
    pub(crate) argv: Vec<String>,
    /// The client's name.
    pub(crate) client: &'static str,
    /// The lock servers' URLs (through the fault proxy when the schedule has one); a Redis
    /// Cluster's seed nodes when `cluster`.
    pub(crate) servers: Vec<String>,
    /// The servers are one Redis Cluster: the library connects with its cluster client, or
    /// refuses at `hello`.
    pub(crate) cluster: bool,
    /// The run's TTL, ms.
    pub(crate) ttl_ms: u64,
    /// The run's command timeout: the library's connections take it as theirs.
    pub(crate) command_timeout: Duration,
    /// How long a reply may take beyond the request's own wait.
    pub(crate) patience: Duration,
}

/// A running driver process.
pub(crate) struct Driver {
    who: String,
    child: Child,
    stdin: ChildStdin,
    /// Its stdout, a bounded line at a time: a line that never ends is an error naming the
    /// driver, not a buffer that grows until the machine runs out of memory.
    out: BoundedLines<BufReader<ChildStdout>>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    /// The task that keeps the last stderr lines: done once the process closed stderr.
    stderr_task: Option<tokio::task::JoinHandle<()>>,
    next_id: u64,
    /// How long a reply may take beyond the request's own wait.
    patience: Duration,
    /// The `hello` reply: library, version, capabilities, key format.
    pub(crate) hello: Value,
    /// Events of the open section so far.
    lost: u32,
    extended: u32,
}

impl Driver {
    /// Starts holder `holder`'s driver as `recipe` says and greets it with the lock servers'
    /// URLs (and whether they are a cluster's: a library without cluster support refuses),
    /// the run's TTL (a library that cannot take it refuses here, before the run) and the
    /// run's command timeout, which the library's connections take as theirs.
    pub(crate) async fn start(recipe: &Recipe, holder: usize) -> Result<Driver, DriverError> {
        let Recipe {
            argv,
            client,
            servers,
            cluster,
            ttl_ms,
            command_timeout,
            patience,
            ..
        } = recipe;
        let (client, cluster, ttl_ms, patience) = (*client, *cluster, *ttl_ms, *patience);
        let mut who = format!("{client} (holder {holder})");
        let fail = |who: &str, what: String| DriverError {
            who: who.to_string(),
            what,
            stderr: Vec::new(),
            refused: false,
        };
        let mut child = tokio::process::Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            // A group of its own: a Ctrl-C at the terminal reaches lockbench, which ends the
            // run and says goodbye to its drivers, not the drivers behind its back.
            .process_group(0)
            .spawn()
            .map_err(|e| fail(&who, format!("cannot start {}: {e}", argv.join(" "))))?;
        if let Some(pid) = child.id() {
            who = format!("{client} (holder {holder}, pid {pid})");
        }
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| fail(&who, "no stdin".into()))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| fail(&who, "no stdout".into()))?;
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        let mut stderr_task = None;
        if let Some(err) = child.stderr.take() {
            let keep = stderr.clone();
            stderr_task = Some(tokio::spawn(async move {
                let mut lines = BoundedLines::new(BufReader::new(err));
                loop {
                    // Read to its end, so that the pipe never fills and blocks the driver.
                    let l = match lines.next_line().await {
                        Ok(Some(l)) => cut(&l, STDERR_LINE_CHARS),
                        Ok(None) | Err(LineError::Io(_)) => break,
                        Err(e @ LineError::TooLong(_)) => format!("({e})"),
                    };
                    let mut k = keep.lock().unwrap_or_else(|p| p.into_inner());
                    if k.len() == 5 {
                        k.pop_front();
                    }
                    k.push_back(l);
                }
            }));
        }
        let mut d = Driver {
            who,
            child,
            stdin,
            out: BoundedLines::new(BufReader::new(stdout)),
            stderr,
            stderr_task,
            next_id: 0,
            patience,
            hello: Value::Null,
            lost: 0,
            extended: 0,
        };
        let id = d
            .send(
                json!({"op": "hello", "protocol": PROTOCOL, "servers": servers,
                          "options": {"ttl_ms": ttl_ms, "cluster": cluster,
                                      "command_timeout_ms": command_timeout.as_millis() as u64}}),
            )
            .await?;
        let reply = d.reply(id, Duration::from_secs(30)).await?;
        if reply["outcome"] != "ok" {
            return Err(DriverError {
                refused: true,
                ..d.error(format!(
                    "refused the run's settings at hello: {}",
                    reply["error"].as_str().unwrap_or("no reason given")
                ))
            });
        }
        d.hello = reply;
        Ok(d)
    }

    /// Kills the driver's process now (SIGKILL: no `finally`, no release, no goodbye — a
    /// holder's process that crashes); [`Driver::kill`] reaps it.
    pub(crate) async fn kill_now(&self) {
        if let Some(pid) = self.child.id() {
            let _ = crate::signals::send(pid, "-KILL").await;
        }
    }

    /// Kills the driver's process (SIGKILL) and waits until it is gone.
    pub(crate) async fn kill(mut self) {
        let _ = self.child.kill().await;
    }

    /// Stops (`true`: SIGSTOP) or resumes (SIGCONT) the driver's process: a holder's
    /// stop-the-world pause reaches the library's own threads and timers.
    pub(crate) async fn freeze(&self, on: bool) {
        let Some(pid) = self.child.id() else {
            return;
        };
        // A driver already gone has nothing to stop: its end is the next reply's error.
        let _ = crate::signals::send(pid, if on { "-STOP" } else { "-CONT" }).await;
    }

    /// Opens a section on `key` through the library's idiom, waiting at most `wait_ms` for
    /// the lock.
    pub(crate) async fn section(
        &mut self,
        key: &str,
        ttl_ms: u64,
        wait_ms: u64,
    ) -> Result<Entered, DriverError> {
        self.lost = 0;
        self.extended = 0;
        let id = self
            .send(json!({"op": "section", "key": key, "ttl_ms": ttl_ms, "wait_ms": wait_ms}))
            .await?;
        let limit = Duration::from_millis(wait_ms) + self.patience;
        let m = self.reply_or_event(id, limit, "held").await?;
        if m["event"] == "held" {
            return Ok(Entered::Held {
                id,
                token: m["token"].as_str().map(str::to_string),
            });
        }
        Ok(Entered::NotAcquired {
            outcome: m["outcome"].as_str().unwrap_or("error").to_string(),
            error: m["error"].as_str().map(str::to_string),
            kind: m["kind"].as_str().map(str::to_string),
        })
    }

    /// Leaves section `id`: the library releases.
    pub(crate) async fn leave(&mut self, id: u64) -> Result<Left, DriverError> {
        self.write(&json!({"id": id, "op": "leave"})).await?;
        let m = self.reply(id, self.patience).await?;
        Ok(Left {
            outcome: m["outcome"].as_str().unwrap_or("error").to_string(),
            error: m["error"].as_str().map(str::to_string),
            kind: m["kind"].as_str().map(str::to_string),
            detail: m["detail"].as_str().map(str::to_string),
            lost: self.lost,
            extended: self.extended,
        })
    }

    /// Says goodbye (the driver releases what it holds and exits), then makes sure it is gone.
    pub(crate) async fn bye(mut self) {
        // A driver answers `bye` in milliseconds; one that does not (hung, or the one that
        // failed the variant) is killed after a second, not waited for.
        if let Ok(id) = self.send(json!({"op": "bye"})).await {
            let _ = self.reply(id, Duration::from_secs(1)).await;
        }
        let _ = tokio::time::timeout(Duration::from_secs(1), self.child.wait()).await;
        let _ = self.child.kill().await;
    }

    async fn send(&mut self, mut request: Value) -> Result<u64, DriverError> {
        let id = self.next_id;
        self.next_id += 1;
        request["id"] = json!(id);
        self.write(&request).await?;
        Ok(id)
    }

    async fn write(&mut self, v: &Value) -> Result<(), DriverError> {
        let mut line = v.to_string();
        line.push('\n');
        let sent = async {
            self.stdin.write_all(line.as_bytes()).await?;
            self.stdin.flush().await
        };
        match sent.await {
            Ok(()) => Ok(()),
            Err(e) => Err(self.died(&format!("cannot be written to ({e})")).await),
        }
    }

    /// The reply to `id`, counting the events that come before it.
    async fn reply(&mut self, id: u64, limit: Duration) -> Result<Value, DriverError> {
        self.reply_or_event(id, limit, "").await
    }

    /// The reply to `id`, or its event named `event`; other events of `id` are counted.
    async fn reply_or_event(
        &mut self,
        id: u64,
        limit: Duration,
        event: &str,
    ) -> Result<Value, DriverError> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let line = match tokio::time::timeout_at(deadline, self.out.next_line()).await {
                Err(_) => {
                    return Err(self.error(format!(
                        "stopped answering: no reply to request {id} within {} ms",
                        limit.as_millis()
                    )));
                }
                Ok(Err(e @ LineError::TooLong(_))) => {
                    return Err(self.error(format!("{e}: not the protocol")));
                }
                Ok(Err(LineError::Io(e))) => {
                    return Err(self.died(&format!("cannot be read ({e})")).await);
                }
                Ok(Ok(None)) => return Err(self.died("closed its stdout").await),
                Ok(Ok(Some(l))) => l,
            };
            let m: Value = match serde_json::from_str(&line) {
                Ok(m @ Value::Object(_)) => m,
                _ => {
                    return Err(self.error(format!(
                        "wrote what is not the protocol (one JSON object a line): {}",
                        shorten(&line)
                    )));
                }
            };
            if m["id"].as_u64() != Some(id) {
                // An event of a section already left, from a library timer: not this request's.
                if m.get("event").is_some() {
                    continue;
                }
                return Err(self.error(format!(
                    "answered request {} while request {id} was awaited: {}",
                    m["id"],
                    shorten(&line)
                )));
            }
            match m["event"].as_str() {
                Some(e) if e == event => return Ok(m),
                Some("lost") => self.lost += 1,
                Some("extended") => self.extended += 1,
                Some(_) => {}
                None if m.get("outcome").is_some() => return Ok(m),
                None => {
                    return Err(
                        self.error(format!("replied without an outcome: {}", shorten(&line)))
                    );
                }
            }
        }
    }

    /// The error of a process that went away: with its exit status when it has one.
    async fn died(&mut self, how: &str) -> DriverError {
        let status = tokio::time::timeout(Duration::from_secs(2), self.child.wait()).await;
        let what = match status {
            Ok(Ok(s)) => format!("died ({s}): it {how}"),
            _ => format!("it {how}"),
        };
        // Its last stderr lines, read to the end the process left.
        if let Some(t) = self.stderr_task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(1), t).await;
        }
        self.error(what)
    }

    fn error(&self, what: String) -> DriverError {
        let stderr = self
            .stderr
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .cloned()
            .collect();
        DriverError {
            who: self.who.clone(),
            what,
            stderr,
            refused: false,
        }
    }
}

/// A line cut to a readable length for a message.
fn shorten(line: &str) -> String {
    format!("`{}`", cut(line, 120))
}

/// How much of each of a driver's last stderr lines an error message shows.
const STDERR_LINE_CHARS: usize = 500;

/// `line`'s first `chars` characters, with `…` when that is not all of it.
fn cut(line: &str, chars: usize) -> String {
    let mut s: String = line.chars().take(chars).collect();
    if s.len() < line.len() {
        s.push('…');
    }
    s
}
