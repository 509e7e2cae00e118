//! One driver process: started, greeted (`hello`), asked for sections (`section`, `leave`) and
//! told goodbye (`bye`). Whatever goes wrong with the process — it dies, stops answering, or
//! writes what is not the protocol — is a [`DriverError`] naming the client, the holder, what
//! happened and the last lines the process wrote on stderr.

use super::clock;
use super::inbox::{Inbox, Incoming};
use super::line::{Field, Msg, Tapped, parse_msg, take_text, text};
use super::outgoing::Outgoing;
use crate::lines::{BoundedLines, LineError};
use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::BufReader;
use tokio::process::{Child, ChildStdout};

/// The protocol version lockbench speaks: 2, where every line names its holder, so that one
/// process hosts many (protocol 1 is 2 without `holder`: one holder a process).
pub(crate) const PROTOCOL: u64 = 2;

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
        /// When the library's acquire returned, by the driver's stamp (`t_ns`) on lockbench's
        /// clock: the section's start. `None`: the driver gave none (an older one, or
        /// [`crate::client::clock::DRIVER_TIMES_ENV`] is `off`): the section starts as the
        /// `held` line arrives.
        held_at: Option<std::time::Instant>,
        /// What the holder's tap saw up to the acquisition: the lock's `SET`.
        seen: Vec<Tapped>,
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
    /// When the driver read the `leave`, right before the library's release was called (its
    /// `leave_ns`), on lockbench's clock: the section's end from the holder's side. `None`:
    /// the driver gave none, or the stamps are not read.
    pub(crate) leave_at: Option<std::time::Instant>,
    /// What the holder's tap saw since the section was held: its release's removal.
    pub(crate) seen: Vec<Tapped>,
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
    /// The driver's tap, where its holders' deletes are attributed inside the process
    /// (`None`: through a watch on the wire, or not at all).
    pub(crate) tap: Option<TapSpec>,
}

/// What a driver's tap is told at `hello` (`options.tap`): on the holder's own connections, a
/// single-key `DEL`/`UNLINK` of a key containing `prefix` goes out as `GETDEL` (where `getdel`:
/// the server has it and the user may run it), the library given `DEL`'s reply; a `SET … NX`
/// of such a key answered `OK` is noted. What it saw comes back on the holder's lines
/// ([`Tapped`]).
#[derive(Debug, Clone)]
pub(crate) struct TapSpec {
    pub(crate) prefix: String,
    pub(crate) getdel: bool,
}

/// The last lines a driver process wrote on stderr: each holder's own (the lines its driver
/// prefixed `[holder N] `, written while serving it) apart from the process's other lines (a
/// library's thread or timer of no holder, the runtime's own messages).
#[derive(Default)]
struct LastWords {
    process: VecDeque<String>,
    holders: HashMap<u64, VecDeque<String>>,
}

/// How many stderr lines are kept for each holder and for the process.
const LAST_WORDS: usize = 5;

impl LastWords {
    fn keep(&mut self, line: String) {
        let (to, line) = match line
            .strip_prefix("[holder ")
            .and_then(|r| r.split_once("] "))
            .and_then(|(h, rest)| Some((h.parse::<u64>().ok()?, rest)))
        {
            Some((h, rest)) => (self.holders.entry(h).or_default(), rest.to_string()),
            None => (&mut self.process, line),
        };
        if to.len() == LAST_WORDS {
            to.pop_front();
        }
        to.push_back(line);
    }

    /// Holder `holder`'s last lines, then the process's own.
    fn of(&self, holder: u64) -> Vec<String> {
        let own = self.holders.get(&holder).into_iter().flatten();
        own.chain(&self.process).cloned().collect()
    }
}

/// Where a process's stdout lines go: each holder's inbox, by the `holder` its lines carry.
/// `None` once stdout ended: a holder joining then finds the process gone.
type Routes = Arc<Mutex<Option<HashMap<u64, Arc<Inbox>>>>>;

/// A running driver process and the holders it hosts (protocol 2: every line names its
/// holder). One task reads its stdout and hands each line to its holder's inbox; another
/// writes its stdin, the lines its holders queued in one turn of the runtime in one write.
pub(crate) struct Process {
    pid: Option<u32>,
    child: tokio::sync::Mutex<Child>,
    /// What the holders ask of the process, on its way to its stdin.
    out: Arc<Outgoing>,
    /// The task that writes `out` to its stdin; done once its input is closed.
    writer: Mutex<Option<tokio::task::JoinHandle<()>>>,
    routes: Routes,
    stderr: Arc<Mutex<LastWords>>,
    /// The task that keeps the last stderr lines: done once the process closed stderr.
    stderr_task: Mutex<Option<tokio::task::JoinHandle<()>>>,
    reader: tokio::task::JoinHandle<()>,
    /// Holders it may host: more than one, and a signal to it reaches them all.
    capacity: usize,
    /// Holders that joined and have not said goodbye.
    live: std::sync::atomic::AtomicUsize,
}

impl Drop for Process {
    fn drop(&mut self) {
        self.reader.abort();
        if let Some(w) = self.writer.lock().unwrap_or_else(|p| p.into_inner()).take() {
            w.abort();
        }
    }
}

impl Process {
    /// Starts `recipe`'s driver process, to host up to `capacity` holders.
    pub(crate) fn spawn(recipe: &Recipe, capacity: usize) -> Result<Arc<Process>, DriverError> {
        let argv = &recipe.argv;
        let fail = |what: String| DriverError {
            who: format!("{} (a driver process)", recipe.client),
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
            .map_err(|e| fail(format!("cannot start {}: {e}", argv.join(" "))))?;
        let stdin = child.stdin.take().ok_or_else(|| fail("no stdin".into()))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| fail("no stdout".into()))?;
        let stderr = Arc::new(Mutex::new(LastWords::default()));
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
                    keep.lock().unwrap_or_else(|p| p.into_inner()).keep(l);
                }
            }));
        }
        let routes: Routes = Arc::new(Mutex::new(Some(HashMap::new())));
        let reader = tokio::spawn(route(
            BoundedLines::new(BufReader::new(stdout)),
            routes.clone(),
        ));
        let out = Arc::new(Outgoing::default());
        let tell_holders = routes.clone();
        let failed = move |why: &str| tell(&tell_holders, || Incoming::Unwritable(why.into()));
        let writer = tokio::spawn(out.clone().write(stdin, failed));
        Ok(Arc::new(Process {
            pid: child.id(),
            child: tokio::sync::Mutex::new(child),
            out,
            writer: Mutex::new(Some(writer)),
            routes,
            stderr,
            stderr_task: Mutex::new(stderr_task),
            reader,
            capacity,
            live: std::sync::atomic::AtomicUsize::new(0),
        }))
    }

    /// Closes its stdin: the driver leaves what its holders hold and exits; after a second it
    /// is killed.
    async fn end(&self) {
        self.out.close();
        let writer = self.writer.lock().unwrap_or_else(|p| p.into_inner()).take();
        let abort = writer.as_ref().map(|w| w.abort_handle());
        let wait = async {
            if let Some(w) = writer {
                let _ = w.await;
            }
            self.child.lock().await.wait().await
        };
        let _ = tokio::time::timeout(Duration::from_secs(1), wait).await;
        let _ = self.child.lock().await.kill().await;
        // A writer still blocked on a full pipe (a process that stopped reading) ends here.
        if let Some(a) = abort {
            a.abort();
        }
    }
}

/// Reads a process's stdout and hands each line to the inbox of the holder it names. A line
/// that is not the protocol reaches every holder (it cannot be told whose it was); the end of
/// stdout closes every inbox.
async fn route(mut out: BoundedLines<BufReader<ChildStdout>>, routes: Routes) {
    let broadcast = |what: String| tell(&routes, || Incoming::Broken(what.clone()));
    // The string the next line is read into: a line routed is swapped for its inbox's spare.
    let mut line = String::new();
    loop {
        match out.next_line_into(&mut line).await {
            Ok(true) => {}
            Ok(false) | Err(LineError::Io(_)) => break,
            Err(e @ LineError::TooLong(_)) => {
                broadcast(format!("{e}: not the protocol"));
                continue;
            }
        };
        let m = match parse_msg(&line) {
            Some(m) => m,
            None => {
                broadcast(format!(
                    "wrote what is not the protocol (one JSON object a line): {}",
                    shorten(&line)
                ));
                continue;
            }
        };
        let Some(h) = m.holder.as_ref().and_then(Field::as_u64) else {
            if m.event.is_none() {
                broadcast(format!(
                    "answered without naming a holder: {}",
                    shorten(&line)
                ));
            }
            continue;
        };
        // A holder that left (or was given up) no longer reads its inbox.
        let routes = routes.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(inbox) = routes.as_ref().and_then(|r| r.get(&h)) {
            inbox.send_line(m, &mut line);
        }
    }
    let ended = routes.lock().unwrap_or_else(|p| p.into_inner()).take();
    for inbox in ended.iter().flat_map(HashMap::values) {
        inbox.close();
    }
}

/// Tells every holder of a process what went wrong with it.
fn tell(routes: &Routes, what: impl Fn() -> Incoming) {
    if let Some(r) = routes.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
        for inbox in r.values() {
            inbox.send(what());
        }
    }
}

/// One holder of a lock library in a driver process (its own, or one it shares with other
/// holders): greeted (`hello`), asked for sections (`section`, `leave`) and told goodbye
/// (`bye`), every line naming the holder.
pub(crate) struct Driver {
    who: String,
    /// The holder's number, in the run and on the wire.
    holder: u64,
    process: Arc<Process>,
    /// The lines of the process's stdout that name this holder.
    inbox: Arc<Inbox>,
    /// The last line read from the inbox (for messages, and `hello`'s reply read in full).
    line: String,
    next_id: u64,
    /// How long a reply may take beyond the request's own wait.
    patience: Duration,
    /// The `hello` reply: library, version, capabilities, key format.
    pub(crate) hello: Value,
    /// Events of the open section so far.
    lost: u32,
    extended: u32,
    /// What the holder's tap saw, not yet handed on.
    seen: Vec<Tapped>,
}

impl Driver {
    /// Starts holder `holder`'s driver, a process of its own, as `recipe` says and greets it.
    pub(crate) async fn start(recipe: &Recipe, holder: usize) -> Result<Driver, DriverError> {
        let process = Process::spawn(recipe, 1).map_err(|e| DriverError {
            who: format!("{} (holder {holder})", recipe.client),
            ..e
        })?;
        Driver::join(process, recipe, holder).await
    }

    /// Holder `holder` joins `process` and greets it with the lock servers' URLs (and whether
    /// they are a cluster's: a library without cluster support refuses), the run's TTL (a
    /// library that cannot take it refuses here, before the run) and the run's command timeout,
    /// which the library's connections take as theirs. The driver gives the holder connections
    /// and lock objects of its own.
    pub(crate) async fn join(
        process: Arc<Process>,
        recipe: &Recipe,
        holder: usize,
    ) -> Result<Driver, DriverError> {
        let Recipe {
            client,
            servers,
            cluster,
            ttl_ms,
            command_timeout,
            patience,
            ..
        } = recipe;
        let (client, cluster, ttl_ms, patience) = (*client, *cluster, *ttl_ms, *patience);
        let who = match process.pid {
            Some(pid) => format!("{client} (holder {holder}, pid {pid})"),
            None => format!("{client} (holder {holder})"),
        };
        let inbox = Arc::new(Inbox::default());
        let joined = process
            .routes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()
            .map(|r| r.insert(holder as u64, inbox.clone()))
            .is_some();
        process
            .live
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut d = Driver {
            who,
            holder: holder as u64,
            process,
            inbox,
            line: String::new(),
            next_id: 0,
            patience,
            hello: Value::Null,
            lost: 0,
            extended: 0,
            seen: Vec::new(),
        };
        if !joined {
            return Err(d.died("closed its stdout").await);
        }
        let mut options = json!({"ttl_ms": ttl_ms, "cluster": cluster,
                                 "command_timeout_ms": command_timeout.as_millis() as u64});
        if let Some(t) = &recipe.tap {
            options["tap"] = json!({"prefix": t.prefix, "getdel": t.getdel});
        }
        let id = d
            .send(
                json!({"op": "hello", "protocol": PROTOCOL, "servers": servers,
                         "options": options}),
            )
            .await?;
        let reply = d.reply(id, Duration::from_secs(30)).await?;
        if text(&reply.outcome) != Some("ok") {
            return Err(DriverError {
                refused: true,
                ..d.error(format!(
                    "refused the run's settings at hello: {}",
                    text(&reply.error).unwrap_or("no reason given")
                ))
            });
        }
        // The greeting is read in full (library, version, capabilities, key format).
        d.hello = serde_json::from_str(&d.line).unwrap_or_default();
        // A driver that left its tap out would leave every delete unattributed, unseen.
        if recipe.tap.is_some() && d.hello.get("tap") != Some(&Value::Bool(true)) {
            return Err(d.error(
                "did not install the tap it was asked for at hello (`\"tap\": true` in its reply)"
                    .into(),
            ));
        }
        Ok(d)
    }

    /// Kills the driver's process now (SIGKILL: no `finally`, no release, no goodbye — a
    /// holder's process that crashes); [`Driver::kill`] reaps it. A holder that shares its
    /// process is given up instead (its replies no longer read, its process left to the other
    /// holders): a crash fault runs with a process per holder, so this is a run that stops
    /// while the holder waits on its library.
    pub(crate) async fn kill_now(&mut self) {
        if self.process.capacity > 1 {
            self.leave_process();
            return;
        }
        if let Some(pid) = self.process.pid {
            let _ = crate::signals::send(pid, "-KILL").await;
        }
    }

    /// Kills the driver's process (SIGKILL) and waits until it is gone; a shared process is
    /// left to its other holders.
    pub(crate) async fn kill(mut self) {
        self.leave_process();
        if self.process.capacity == 1 {
            let _ = self.process.child.lock().await.kill().await;
        }
    }

    /// Stops (`true`: SIGSTOP) or resumes (SIGCONT) the driver's process: a holder's
    /// stop-the-world pause reaches the library's own threads and timers — and every holder
    /// of a shared process, which is why a pause runs with a process per holder.
    pub(crate) async fn freeze(&self, on: bool) {
        let Some(pid) = self.process.pid else {
            return;
        };
        // A driver already gone has nothing to stop: its end is the next reply's error.
        let _ = crate::signals::send(pid, if on { "-STOP" } else { "-CONT" }).await;
    }

    /// The holder no longer reads the process's lines for it.
    fn leave_process(&mut self) {
        if let Some(r) = self
            .process
            .routes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()
        {
            r.remove(&self.holder);
        }
        self.inbox.close();
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
        let id = self.next_id;
        self.next_id += 1;
        let holder = self.holder;
        // Read before the line goes out: the driver may read it before the write returns.
        let asked = std::time::Instant::now();
        // The line written directly into the process's queue (the fields in the order a
        // `Value` writes them): a request a cycle is worth no map, and no string of its own.
        self.write_with(|b| {
            use std::io::Write;
            // Writes to a `Vec` do not fail.
            let _ = write!(b, "{{\"holder\":{holder},\"id\":{id},\"key\":");
            let _ = serde_json::to_writer(&mut *b, key);
            let _ = writeln!(
                b,
                ",\"op\":\"section\",\"ttl_ms\":{ttl_ms},\"wait_ms\":{wait_ms}}}"
            );
        })
        .await?;
        let limit = Duration::from_millis(wait_ms) + self.patience;
        let mut m = self.reply_or_event(id, limit, "held").await?;
        if text(&m.event) == Some("held") {
            // A stamp outside the request and its reply is another clock's, or none at all: a
            // section timed by it would be wrong by an unknown amount, so the driver fails.
            let t_ns = m.t_ns.as_ref().map(|f| f.value(&self.line, "t_ns"));
            let held_at =
                clock::stamp_between(t_ns.as_ref(), "t_ns", asked, std::time::Instant::now())
                    .map_err(|why| {
                        self.error(format!("its `held` event for request {id} {why}"))
                    })?;
            return Ok(Entered::Held {
                id,
                token: take_text(&mut m.token),
                held_at,
                seen: std::mem::take(&mut self.seen),
            });
        }
        Ok(Entered::NotAcquired {
            outcome: text(&m.outcome).unwrap_or("error").to_string(),
            error: take_text(&mut m.error),
            kind: take_text(&mut m.kind),
        })
    }

    /// Leaves section `id`: the library releases.
    pub(crate) async fn leave(&mut self, id: u64) -> Result<Left, DriverError> {
        let holder = self.holder;
        let asked = std::time::Instant::now();
        self.write_with(|b| {
            use std::io::Write;
            let _ = writeln!(b, "{{\"holder\":{holder},\"id\":{id},\"op\":\"leave\"}}");
        })
        .await?;
        let mut m = self.reply(id, self.patience).await?;
        let leave_ns = m.leave_ns.as_ref().map(|f| f.value(&self.line, "leave_ns"));
        let leave_at = clock::stamp_between(
            leave_ns.as_ref(),
            "leave_ns",
            asked,
            std::time::Instant::now(),
        )
        .map_err(|why| self.error(format!("its reply to `leave` {id} {why}")))?;
        Ok(Left {
            leave_at,
            outcome: text(&m.outcome).unwrap_or("error").to_string(),
            error: take_text(&mut m.error),
            kind: take_text(&mut m.kind),
            detail: take_text(&mut m.detail),
            lost: self.lost,
            extended: self.extended,
            seen: std::mem::take(&mut self.seen),
        })
    }

    /// Says goodbye (the driver releases what the holder holds and closes its connections);
    /// the last holder of a process to leave ends it (its stdin closed, then killed after a
    /// second). What the holder's tap saw last (those releases') is returned.
    pub(crate) async fn bye(mut self) -> Vec<Tapped> {
        // A driver answers `bye` in milliseconds; one that does not (hung, or the one that
        // failed the variant) is not waited for past a second. A holder given up is not asked.
        if !self.inbox.is_closed()
            && let Ok(id) = self.send(json!({"op": "bye"})).await
        {
            let _ = self.reply(id, Duration::from_secs(1)).await;
        }
        self.leave_process();
        let last = self
            .process
            .live
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed)
            == 1;
        if last {
            self.process.end().await;
        }
        std::mem::take(&mut self.seen)
    }

    async fn send(&mut self, mut request: Value) -> Result<u64, DriverError> {
        let id = self.next_id;
        self.next_id += 1;
        request["id"] = json!(id);
        self.write(request).await?;
        Ok(id)
    }

    async fn write(&mut self, mut v: Value) -> Result<(), DriverError> {
        v["holder"] = json!(self.holder);
        let mut line = v.to_string();
        line.push('\n');
        self.write_line(line).await
    }

    /// Queues one request line (ending in `\n`) for the process's writer.
    async fn write_line(&mut self, line: String) -> Result<(), DriverError> {
        self.write_with(|b| b.extend_from_slice(line.as_bytes()))
            .await
    }

    /// Queues the request line `write` appends (ending in `\n`) for the process's writer.
    async fn write_with(&mut self, write: impl FnOnce(&mut Vec<u8>)) -> Result<(), DriverError> {
        match self.process.out.queue_with(write) {
            Ok(()) => Ok(()),
            Err(why) => Err(self.died(&why).await),
        }
    }

    /// The reply to `id`, counting the events that come before it.
    async fn reply(&mut self, id: u64, limit: Duration) -> Result<Msg, DriverError> {
        self.reply_or_event(id, limit, "").await
    }

    /// The reply to `id`, or its event named `event`; other events of `id` are counted.
    async fn reply_or_event(
        &mut self,
        id: u64,
        limit: Duration,
        event: &str,
    ) -> Result<Msg, DriverError> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let m = match tokio::time::timeout_at(deadline, self.inbox.recv()).await {
                Err(_) => {
                    return Err(self.error(format!(
                        "stopped answering: no reply to request {id} within {} ms",
                        limit.as_millis()
                    )));
                }
                Ok(Some(Incoming::Broken(what))) => return Err(self.error(what)),
                Ok(Some(Incoming::Unwritable(how))) => return Err(self.died(&how).await),
                Ok(None) => return Err(self.died("closed its stdout").await),
                Ok(Some(Incoming::Line(m, line))) => {
                    let read = std::mem::replace(&mut self.line, line);
                    self.inbox.recycle(read);
                    m
                }
            };
            let mut m = m;
            // What the tap saw is the holder's, whichever request or event the line is.
            if let Some(seen) = m.seen.take() {
                self.seen.extend(seen);
            }
            let line = &self.line;
            if m.id.as_ref().and_then(Field::as_u64) != Some(id) {
                // An event of a section already left, from a library timer: not this request's.
                if m.event.is_some() {
                    continue;
                }
                return Err(self.error(format!(
                    "answered request {} while request {id} was awaited: {}",
                    m.id.as_ref().map_or(Value::Null, |f| f.value(line, "id")),
                    shorten(line)
                )));
            }
            match text(&m.event) {
                Some(e) if e == event => return Ok(m),
                Some("lost") => self.lost += 1,
                Some("extended") => self.extended += 1,
                Some(_) => {}
                None if m.outcome.is_some() => return Ok(m),
                None => {
                    return Err(
                        self.error(format!("replied without an outcome: {}", shorten(line)))
                    );
                }
            }
        }
    }

    /// The error of a process that went away: with its exit status when it has one.
    async fn died(&mut self, how: &str) -> DriverError {
        let status = {
            let mut child = self.process.child.lock().await;
            tokio::time::timeout(Duration::from_secs(2), child.wait()).await
        };
        let what = match status {
            Ok(Ok(s)) => format!("died ({s}): it {how}"),
            _ => format!("it {how}"),
        };
        // Its last stderr lines, read to the end the process left.
        let task = self
            .process
            .stderr_task
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(t) = task {
            let _ = tokio::time::timeout(Duration::from_secs(1), t).await;
        }
        self.error(what)
    }

    fn error(&self, what: String) -> DriverError {
        let stderr = self
            .process
            .stderr
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .of(self.holder);
        DriverError {
            who: self.who.clone(),
            what,
            stderr,
            refused: false,
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        self.leave_process();
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
