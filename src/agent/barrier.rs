//! The agents of a run meet at the target itself: a few keys under
//! `lockbench:<run-id>:barrier:`, so no other coordinator is needed (a Kubernetes Indexed Job
//! of N pods and one Redis is enough).
//!
//! 1. **Join**: `SET …:agent:<i> NX` (an index joins once), the agent count and the workload
//!    registered by the first agent and compared by every other (`SET NX` then `GET`), then
//!    `INCR …:arrived`; each waits until `arrived` reaches N.
//! 2. **Start**, once its connections are open: `INCR …:ready`, a clock reading (`TIME`, the
//!    fastest of a few round trips); the agent whose `INCR` made N ready writes the start,
//!    `SET …:start <its server time + margin> NX`; every agent reads it and sleeps until that
//!    instant of the server's clock, converted with its own reading.
//! 3. **End**: a second clock reading, `INCR …:done`, and a wait until every agent's workers
//!    are done, so no agent removes keys a peer still uses.
//! 4. **Leave**: `DECR …:arrived`; the agent that brings it to 0 deletes every barrier key.
//!
//! Waits poll every [`POLL`] and give up after the barrier timeout with a message naming how
//! many agents arrived. Every barrier key also carries a [`KEY_TTL`] expiry, so the keys of an
//! agent killed mid-run (it never leaves) disappear on their own. lockbench touches no key
//! outside its run prefix.

use super::AgentSpec;
use super::clock::{Probe, fastest, wall_now_us};
use crate::exit::{BadInput, Interrupted};
use crate::model::error::CmdResult;
use crate::results::agents::AgentRecord;
use crate::signals::{Request, request_of};
use crate::store::Connector;
use crate::store::redis::{RedisConn, RedisConnector};
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// How often a waiting agent asks the server.
pub(crate) const POLL: Duration = Duration::from_millis(20);
/// How far after the last agent is ready the start lies: time for every agent to see it (a
/// poll, a round trip) before it comes.
pub(crate) const START_MARGIN: Duration = Duration::from_millis(250);
/// How long before the start an agent stops sleeping on tokio's timer and yields until it: the
/// timer's own lateness, ~1–2 ms, must fit inside (the same lead as a precise section's end,
/// `engine::precise::PRECISE_LEAD`, which this layer does not reach).
const START_LEAD: Duration = Duration::from_micros(2_500);
/// The expiry of every barrier key: a safety net for agents that never leave.
pub(crate) const KEY_TTL: Duration = Duration::from_secs(24 * 3600);
/// `TIME` round trips per clock reading (the fastest is kept).
pub(crate) const PROBES: usize = 5;

/// One process's part in a multi-agent run: its spec, a connection to the target for the
/// barrier, and what it measured of its clock.
pub struct Agent {
    spec: AgentSpec,
    conn: RedisConn,
    worker_first: usize,
    worker_end: usize,
    sections_share: Option<u64>,
    state: Mutex<State>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "agent {}/{} of run {}",
            self.spec.index, self.spec.count, self.spec.run_id
        )
    }
}

#[derive(Debug, Default)]
struct State {
    /// Its `agent:<i>` key is set.
    joined: bool,
    /// It is counted in `arrived`.
    arrived: bool,
    /// It has counted itself in `done`.
    done: bool,
    start_server_us: Option<u64>,
    start_probe: Option<Probe>,
    end_probe: Option<Probe>,
    zero: Option<Instant>,
    log_offset_us: u64,
    peers_finished: bool,
}

/// What a wait for the server saw.
enum Wait {
    /// The condition held; the value read.
    Got(String),
    /// The timeout passed; the last value read (or the last error).
    TimedOut(String),
}

impl Agent {
    /// An agent of `spec` that runs `workers` workers (and, with `--sections`, its share
    /// `sections_share`), talking to the barrier through a connection of its own.
    pub async fn connect(
        spec: AgentSpec,
        connector: &RedisConnector,
        workers: usize,
        sections_share: Option<u64>,
    ) -> anyhow::Result<Agent> {
        let conn = connector.connect().await?;
        let worker_first = spec.worker_base(workers);
        Ok(Agent {
            worker_first,
            worker_end: worker_first + workers,
            sections_share,
            spec,
            conn,
            state: Mutex::new(State::default()),
        })
    }

    /// Who this agent is.
    pub fn spec(&self) -> &AgentSpec {
        &self.spec
    }

    /// The global id of its first worker.
    pub fn worker_first(&self) -> usize {
        self.worker_first
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn key(&self, name: &str) -> String {
        format!("{}:barrier:{name}", self.spec.prefix())
    }

    fn who(&self) -> String {
        format!(
            "agent {} of {} (run {})",
            self.spec.index, self.spec.count, self.spec.run_id
        )
    }

    async fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> CmdResult<T> {
        self.conn.clone().query(cmd).await
    }

    /// `SET key value NX PX <KEY_TTL>`: whether it was set.
    async fn set_nx(&self, key: &str, value: &str) -> CmdResult<bool> {
        let r: Option<String> = self
            .query(
                redis::cmd("SET")
                    .arg(key)
                    .arg(value)
                    .arg("NX")
                    .arg("PX")
                    .arg(KEY_TTL.as_millis() as u64),
            )
            .await?;
        Ok(r.is_some())
    }

    async fn get(&self, key: &str) -> CmdResult<Option<String>> {
        self.query(redis::cmd("GET").arg(key)).await
    }

    /// `INCR key` (and its safety expiry): the new value.
    async fn incr(&self, key: &str, by: i64) -> CmdResult<i64> {
        let n: i64 = self.query(redis::cmd("INCRBY").arg(key).arg(by)).await?;
        let _: CmdResult<i64> = self
            .query(
                redis::cmd("PEXPIRE")
                    .arg(key)
                    .arg(KEY_TTL.as_millis() as u64),
            )
            .await;
        Ok(n)
    }

    /// A clock reading: [`PROBES`] `TIME` round trips, the fastest kept.
    async fn probe(&self) -> anyhow::Result<Probe> {
        let mut probes = Vec::with_capacity(PROBES);
        let mut last_error = None;
        for _ in 0..PROBES {
            let sent = Instant::now();
            let r: CmdResult<(u64, u64)> = self.query(&redis::cmd("TIME")).await;
            let received = Instant::now();
            let wall_received_us = wall_now_us();
            match r {
                Ok((s, us)) => probes.push(Probe {
                    sent,
                    received,
                    server_us: s * 1_000_000 + us,
                    wall_received_us,
                }),
                Err(e) => last_error = Some(e),
            }
        }
        fastest(&probes).ok_or_else(|| {
            anyhow::anyhow!(
                "{}: cannot read the server's clock (TIME): {}",
                self.who(),
                last_error.map_or_else(|| "no reply".to_string(), |e| e.to_string())
            )
        })
    }

    /// Polls `GET key` until `done` accepts its value or `timeout` passes. Ctrl-C ends the wait
    /// as an interruption; errors are retried (the last is reported on timeout).
    async fn wait(
        &self,
        key: &str,
        timeout: Duration,
        signals: &mut watch::Receiver<u32>,
        done: impl Fn(Option<&str>) -> bool,
    ) -> anyhow::Result<Wait> {
        let until = Instant::now() + timeout;
        loop {
            let last = match self.get(key).await {
                Ok(v) if done(v.as_deref()) => return Ok(Wait::Got(v.unwrap_or_default())),
                Ok(v) => v.unwrap_or_else(|| "0".to_string()),
                Err(e) => format!("an error: {e}"),
            };
            if Instant::now() >= until {
                return Ok(Wait::TimedOut(last));
            }
            if request_of(*signals.borrow()) != Request::Continue {
                return Err(Interrupted.into());
            }
            tokio::select! {
                _ = tokio::time::sleep(POLL.min(until.saturating_duration_since(Instant::now()))) => {}
                Ok(()) = signals.changed() => {}
            }
        }
    }

    fn at_least(n: u32) -> impl Fn(Option<&str>) -> bool {
        move |v| v.and_then(|v| v.parse::<i64>().ok()).unwrap_or(0) >= i64::from(n)
    }

    /// Joins the run and waits until every agent has: refused (exit 2) when this index already
    /// joined, when the run already started, or when this agent's count or workload differs
    /// from the one the first agent registered; a run failure when the others do not come
    /// within the barrier timeout. `workload` is [`super::workload_fingerprint`] of the plan.
    pub async fn join(
        &self,
        workload: &serde_json::Value,
        signals: &mut watch::Receiver<u32>,
    ) -> anyhow::Result<()> {
        let r = self.try_join(workload, signals).await;
        if r.is_err() {
            self.leave().await;
        }
        r
    }

    async fn try_join(
        &self,
        workload: &serde_json::Value,
        signals: &mut watch::Receiver<u32>,
    ) -> anyhow::Result<()> {
        let (run, i, n) = (&self.spec.run_id, self.spec.index, self.spec.count);
        let failed = |what: &str, e: crate::model::error::CmdError| {
            anyhow::anyhow!("{}: {what} failed: {e}", self.who())
        };
        let start_key = self.key("start");
        if self
            .get(&start_key)
            .await
            .map_err(|e| failed("reading the start", e))?
            .is_some()
        {
            return Err(BadInput(format!(
                "run {run} has already started without agent {i} (the key {start_key} exists): \
                 agents join before the start. Start a new run with a new --run-id"
            ))
            .into());
        }
        let me = format!(
            "pid {} since {}",
            std::process::id(),
            crate::results::utc_stamp(std::time::SystemTime::now(), false)
        );
        let agent_key = self.key(&format!("agent:{i}"));
        if !self
            .set_nx(&agent_key, &me)
            .await
            .map_err(|e| failed("joining", e))?
        {
            let holder = self
                .get(&agent_key)
                .await
                .ok()
                .flatten()
                .unwrap_or_default();
            return Err(BadInput(format!(
                "agent {i} of run {run} has already joined (key {agent_key}: {holder}): every agent \
                 needs its own index, 0 to {}, and a run id serves one run. Choose a new --run-id \
                 (the keys of an abandoned run expire after {} h)",
                n - 1,
                KEY_TTL.as_secs() / 3600
            ))
            .into());
        }
        self.state().joined = true;

        let count_key = self.key("count");
        self.set_nx(&count_key, &n.to_string())
            .await
            .map_err(|e| failed("registering the agent count", e))?;
        let registered = self
            .get(&count_key)
            .await
            .map_err(|e| failed("reading the agent count", e))?;
        if registered.as_deref() != Some(n.to_string().as_str()) {
            return Err(BadInput(format!(
                "this agent was started as agent {i} of {n}, but run {run} has {} agents (as its \
                 first agent registered): give every agent the same count",
                registered.unwrap_or_else(|| "an unknown number of".into())
            ))
            .into());
        }
        let workload_key = self.key("workload");
        let text = workload.to_string();
        self.set_nx(&workload_key, &text)
            .await
            .map_err(|e| failed("registering the workload", e))?;
        let theirs = self
            .get(&workload_key)
            .await
            .map_err(|e| failed("reading the workload", e))?
            .unwrap_or_default();
        if theirs != text {
            let theirs: serde_json::Value = serde_json::from_str(&theirs).unwrap_or_default();
            return Err(BadInput(format!(
                "agent {i}'s workload differs from the one run {run}'s first agent registered, in: \
                 {} (this agent's value vs the registered one). Every agent must run the same \
                 profile and flags",
                super::differences(workload, &theirs).join(", ")
            ))
            .into());
        }

        let arrived_key = self.key("arrived");
        self.incr(&arrived_key, 1)
            .await
            .map_err(|e| failed("arriving", e))?;
        self.state().arrived = true;
        match self
            .wait(
                &arrived_key,
                self.spec.barrier_timeout,
                signals,
                Self::at_least(n),
            )
            .await?
        {
            Wait::Got(_) => Ok(()),
            Wait::TimedOut(k) => Err(anyhow::anyhow!(
                "start barrier of run {run}: {k} of {n} agents arrived within {} (this is agent \
                 {i}); start the others with --agent I/{n} --run-id {run} against the same server, \
                 or raise --barrier-timeout",
                fmt_duration(self.spec.barrier_timeout)
            )),
        }
    }

    /// Once this agent's connections are open: counts it ready, takes the start clock reading,
    /// and sleeps until the start every agent agreed on. Returns when the run starts.
    pub async fn wait_for_start(&self, signals: &mut watch::Receiver<u32>) -> anyhow::Result<()> {
        let (run, n) = (&self.spec.run_id, self.spec.count);
        let ready = self
            .incr(&self.key("ready"), 1)
            .await
            .map_err(|e| anyhow::anyhow!("{}: counting itself ready failed: {e}", self.who()))?;
        let probe = self.probe().await?;
        self.state().start_probe = Some(probe);
        let start_key = self.key("start");
        if ready == i64::from(n) {
            let start = probe.server_us + START_MARGIN.as_micros() as u64;
            self.set_nx(&start_key, &start.to_string())
                .await
                .map_err(|e| anyhow::anyhow!("{}: writing the start failed: {e}", self.who()))?;
        }
        let start = match self
            .wait(&start_key, self.spec.barrier_timeout, signals, |v| {
                v.is_some_and(|v| v.parse::<u64>().is_ok())
            })
            .await?
        {
            Wait::Got(v) => v.parse::<u64>().unwrap_or_default(),
            Wait::TimedOut(_) => {
                let ready = self
                    .get(&self.key("ready"))
                    .await
                    .ok()
                    .flatten()
                    .unwrap_or_else(|| "?".into());
                return Err(anyhow::anyhow!(
                    "start barrier of run {run}: {ready} of {n} agents had opened their connections \
                     within {} (this is agent {}); the others stalled or failed after arriving",
                    fmt_duration(self.spec.barrier_timeout),
                    self.spec.index
                ));
            }
        };
        self.state().start_server_us = Some(start);
        // The start on this agent's clock, by its reading (already past: start now).
        let ahead = start.saturating_sub(probe.server_us);
        let at = probe.mid() + Duration::from_micros(ahead);
        if request_of(*signals.borrow()) != Request::Continue {
            return Err(Interrupted.into());
        }
        // Tokio's timer wakes about a millisecond late: sleep to just before the start, then
        // yield until it, so the agents start within tens of µs of each other.
        let coarse = at.checked_sub(START_LEAD).unwrap_or(at);
        tokio::select! {
            _ = tokio::time::sleep_until(coarse) => {}
            Ok(_) = signals.wait_for(|n| request_of(*n) != Request::Continue) => return Err(Interrupted.into()),
        }
        while Instant::now() < at {
            tokio::task::yield_now().await;
        }
        Ok(())
    }

    /// The run's time zero on this agent (its recorder's start) and how long after the
    /// `.hlog` base time it lies.
    pub fn started(&self, zero: Instant, log_offset: Duration) {
        let mut s = self.state();
        s.zero = Some(zero);
        s.log_offset_us = log_offset.as_micros() as u64;
    }

    /// Once this agent's workers are done: the end clock reading, then a wait (up to the
    /// barrier timeout plus `grace`, the time peers' open sections may still take) until every
    /// agent's are. Returns whether they all finished: only then may this agent remove the
    /// run's keys without pulling a lock from under a peer.
    pub async fn finish(&self, grace: Duration, signals: &mut watch::Receiver<u32>) -> bool {
        match self.probe().await {
            Ok(p) => self.state().end_probe = Some(p),
            Err(e) => eprintln!(
                "warning: {e:#}; the merge will place this agent by its start reading alone"
            ),
        }
        let done_key = self.key("done");
        if let Err(e) = self.incr(&done_key, 1).await {
            eprintln!("warning: {}: counting itself done failed: {e}", self.who());
        }
        self.state().done = true;
        let timeout = self.spec.barrier_timeout + grace;
        let n = self.spec.count;
        let finished = match self
            .wait(&done_key, timeout, signals, Self::at_least(n))
            .await
        {
            Ok(Wait::Got(_)) => true,
            Ok(Wait::TimedOut(k)) => {
                eprintln!(
                    "warning: {}: {k} of {n} agents had finished after {}; this agent leaves its \
                     lock keys to expire instead of removing them under a running peer",
                    self.who(),
                    fmt_duration(timeout)
                );
                false
            }
            Err(_) => false,
        };
        self.state().peers_finished = finished;
        finished
    }

    /// Whether every agent's workers had finished before this one's cleanup.
    pub fn peers_finished(&self) -> bool {
        self.state().peers_finished
    }

    /// Leaves the run: counts itself done if it had not (a failed agent must not keep its
    /// peers waiting), removes its own key, and, as the last agent out, every barrier key.
    /// Errors are warnings: the keys expire on their own.
    pub async fn leave(&self) {
        let (joined, arrived, done) = {
            let s = self.state();
            (s.joined, s.arrived, s.done)
        };
        if !joined {
            return;
        }
        if arrived && !done {
            let _ = self.incr(&self.key("done"), 1).await;
            self.state().done = true;
        }
        let own = self.key(&format!("agent:{}", self.spec.index));
        let _: CmdResult<i64> = self.query(redis::cmd("DEL").arg(&own)).await;
        let left = if arrived {
            self.incr(&self.key("arrived"), -1).await
        } else {
            self.get(&self.key("arrived"))
                .await
                .map(|v| v.and_then(|v| v.parse().ok()).unwrap_or(0))
        };
        {
            let mut s = self.state();
            s.joined = false;
            s.arrived = false;
        }
        match left {
            Ok(n) if n <= 0 => {
                let mut keys: Vec<String> =
                    ["arrived", "count", "workload", "ready", "start", "done"]
                        .iter()
                        .map(|k| self.key(k))
                        .collect();
                keys.extend((0..self.spec.count).map(|i| self.key(&format!("agent:{i}"))));
                if let Err(e) = self.query::<i64>(redis::cmd("DEL").arg(&keys)).await {
                    eprintln!(
                        "warning: {}: cannot remove the barrier keys ({}:barrier:*): {e}; they \
                         expire within {} h",
                        self.who(),
                        self.spec.prefix(),
                        KEY_TTL.as_secs() / 3600
                    );
                }
            }
            Ok(_) => {}
            Err(e) => eprintln!(
                "warning: {}: cannot leave the barrier: {e}; its keys expire within {} h",
                self.who(),
                KEY_TTL.as_secs() / 3600
            ),
        }
    }

    /// What this agent records of itself in `manifest.json` and `summary.json`.
    pub fn record(&self) -> AgentRecord {
        let s = self.state();
        let reading = |p: &Option<Probe>| match (p, s.zero) {
            (Some(p), Some(zero)) => Some(p.reading(zero)),
            _ => None,
        };
        AgentRecord {
            run_id: self.spec.run_id.clone(),
            index: self.spec.index,
            count: self.spec.count,
            worker_first: self.worker_first,
            worker_end: self.worker_end,
            sections_share: self.sections_share,
            start_server_us: s.start_server_us,
            clock_start: reading(&s.start_probe),
            clock_end: reading(&s.end_probe),
            log_offset_us: s.log_offset_us,
            peers_finished: s.peers_finished,
        }
    }
}

fn fmt_duration(d: Duration) -> String {
    crate::model::units::fmt_us(d.as_micros() as u64, crate::model::units::Style::Compact)
}
