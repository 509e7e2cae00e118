//! Redlock through the same [`LockConn`] trait as one server, so the worker loop is unchanged:
//! a [`RedlockConnector`] holds one [`RedisConnector`] per instance, its [`RedlockConn`] one
//! [`RedisConn`] per instance. The decisions (quorum, validity, how replies combine) are the
//! pure functions of [`crate::quorum`]; this file sends the commands and counts.
//!
//! Why the commands go out concurrently and are awaited together (not spawned): Redlock's
//! elapsed time is the slowest instance's, bounded by the per-instance timeout, and a future
//! dropped with its worker (an abandoned run) must take its instance commands with it.

use super::redis::{RedisConn, RedisConnector};
use super::{Connector, KeySweep, LockCommands, ResourceCommands, ServerProbes, UserScripts};
use super::{ReadOutcome, WriteOutcome};
use crate::model::error::{CmdError, CmdResult, ErrorKind};
use crate::model::release::ExtendCommand;
use crate::quorum::{
    Decision, RedlockFigures, RedlockPlan, combine_extend, combine_release, decide,
    instance_timeout, instance_timeout_us,
};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::task::Poll;
use std::time::Duration;
use tokio::time::Instant;

/// One lock over N independent servers.
#[derive(Clone)]
pub struct RedlockConnector {
    instances: Vec<RedisConnector>,
    shared: Arc<Shared>,
}

/// What every connection of one connector shares: the settings and the counters.
struct Shared {
    quorum: usize,
    timeout_us: Option<u64>,
    stats: Stats,
}

/// Counters since the last [`Connector::take_redlock_figures`].
#[derive(Default)]
struct Stats {
    attempted: AtomicU64,
    acquired: AtomicU64,
    failed_quorums: AtomicU64,
    validity_expired: AtomicU64,
    /// Last TTL seen (the figures report the timeout and drift for it).
    ttl_ms: AtomicU64,
    errors: Vec<AtomicU64>,
    timeouts: Vec<AtomicU64>,
}

impl RedlockConnector {
    /// A connector over `instances` (one per server, in instance order) with the plan's quorum
    /// and per-instance timeout.
    pub fn new(instances: Vec<RedisConnector>, plan: &RedlockPlan) -> Self {
        let n = instances.len();
        let stats = Stats {
            errors: (0..n).map(|_| AtomicU64::new(0)).collect(),
            timeouts: (0..n).map(|_| AtomicU64::new(0)).collect(),
            ..Stats::default()
        };
        Self {
            instances,
            shared: Arc::new(Shared {
                quorum: plan.quorum,
                timeout_us: plan.instance_timeout_us,
                stats,
            }),
        }
    }

    /// The per-instance connectors, in instance order.
    pub fn instances(&self) -> &[RedisConnector] {
        &self.instances
    }
}

impl Connector for RedlockConnector {
    type Conn = RedlockConn;
    async fn connect(&self) -> anyhow::Result<RedlockConn> {
        let mut conns = Vec::with_capacity(self.instances.len());
        for (i, c) in self.instances.iter().enumerate() {
            let conn = c
                .connect()
                .await
                .map_err(|e| anyhow::anyhow!("redlock instance {i}: {e:#}"))?;
            conns.push(conn);
        }
        Ok(RedlockConn {
            conns,
            shared: self.shared.clone(),
        })
    }

    fn describe(&self) -> String {
        format!(
            "redlock over {} instances (quorum {}): {}",
            self.instances.len(),
            self.shared.quorum,
            self.instances
                .iter()
                .map(|c| c.describe())
                .collect::<Vec<_>>()
                .join(", ")
        )
    }

    /// Every instance's URL: a quorum library takes the lock on all of them, as lockbench's
    /// own Redlock does.
    fn driver_urls(&self) -> Result<Vec<String>, crate::store::Unreachable> {
        self.instances
            .iter()
            .map(|c| {
                c.driver_urls().and_then(|v| {
                    v.into_iter()
                        .next()
                        .ok_or_else(|| crate::store::Unreachable(String::new()))
                })
            })
            .collect()
    }

    fn take_redlock_figures(&self) -> Option<RedlockFigures> {
        let s = &self.shared.stats;
        let take = |a: &AtomicU64| a.swap(0, Relaxed);
        let ttl_ms = s.ttl_ms.load(Relaxed);
        Some(RedlockFigures {
            instances: self.instances.len(),
            quorum: self.shared.quorum,
            instance_timeout_ms: instance_timeout_us(self.shared.timeout_us, ttl_ms) as f64
                / 1000.0,
            drift_ms: crate::quorum::drift_us(ttl_ms) as f64 / 1000.0,
            acquisitions_attempted: take(&s.attempted),
            acquired: take(&s.acquired),
            failed_quorums: take(&s.failed_quorums),
            validity_expired: take(&s.validity_expired),
            instance_errors: s.errors.iter().map(take).collect(),
            instance_timeouts: s.timeouts.iter().map(take).collect(),
        })
    }
}

/// One connection to each instance.
#[derive(Clone)]
pub struct RedlockConn {
    conns: Vec<RedisConn>,
    shared: Arc<Shared>,
}

/// Awaits every future together; outputs in input order.
async fn join_all<F: Future>(futs: Vec<F>) -> Vec<F::Output> {
    let mut futs: Vec<Pin<Box<F>>> = futs.into_iter().map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = futs.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, o) in futs.iter_mut().zip(out.iter_mut()) {
            if o.is_none() {
                match f.as_mut().poll(cx) {
                    Poll::Ready(v) => *o = Some(v),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    out.into_iter().flatten().collect()
}

fn unsupported(what: &str) -> CmdError {
    CmdError {
        kind: ErrorKind::Other,
        detail: format!("{what} is not sent to a redlock (refused when the plan is validated)"),
    }
}

impl RedlockConn {
    /// Sends `f` to every instance at once, each bounded by `timeout_us` (`None`: only the
    /// connection's own command timeout); counts each failure against its instance.
    async fn each<'a, T, Fut>(
        &'a mut self,
        timeout_us: Option<u64>,
        f: impl Fn(&'a mut RedisConn) -> Fut,
    ) -> Vec<CmdResult<T>>
    where
        Fut: Future<Output = CmdResult<T>> + 'a,
    {
        let futs = self
            .conns
            .iter_mut()
            .enumerate()
            .map(|(i, c)| {
                let fut = f(c);
                async move {
                    match timeout_us {
                        Some(t) => tokio::time::timeout(Duration::from_micros(t), fut)
                            .await
                            .unwrap_or_else(|_| Err(instance_timeout(i, t))),
                        None => fut.await,
                    }
                }
            })
            .collect();
        let replies = join_all(futs).await;
        let stats = &self.shared.stats;
        for (i, r) in replies.iter().enumerate() {
            if let Err(e) = r {
                stats.errors[i].fetch_add(1, Relaxed);
                if e.kind == ErrorKind::Timeout {
                    stats.timeouts[i].fetch_add(1, Relaxed);
                }
            }
        }
        replies
    }

    /// The token script on every instance, per-instance replies.
    async fn release_all(
        &mut self,
        key: &str,
        token: &str,
        timeout_us: Option<u64>,
    ) -> Vec<CmdResult<i64>> {
        self.each(timeout_us, |c| c.release_script(key, token))
            .await
    }

    /// The first instance's connection: for the probes that ask about the server software
    /// (every instance of a spawned redlock runs the same binary).
    fn first(&mut self) -> &mut RedisConn {
        &mut self.conns[0]
    }
}

impl LockCommands for RedlockConn {
    /// Renews the socket to every instance (a dead holder's connections all close).
    async fn renew_own_socket(&mut self) -> bool {
        join_all(
            self.conns
                .iter_mut()
                .map(|c| c.renew_own_socket())
                .collect(),
        )
        .await
        .contains(&true)
    }

    /// Redlock's acquisition: `true` only with a majority and validity left; otherwise the
    /// partial acquisition is undone and the worker sees *busy* (`false`). When no instance
    /// answered at all it is an error (the unavailability policy applies).
    async fn set_nx_px(&mut self, key: &str, value: &str, ttl_ms: u64) -> CmdResult<bool> {
        let sh = self.shared.clone();
        let st = &sh.stats;
        st.attempted.fetch_add(1, Relaxed);
        st.ttl_ms.store(ttl_ms, Relaxed);
        let timeout = instance_timeout_us(sh.timeout_us, ttl_ms);
        let start = Instant::now();
        let replies = self
            .each(Some(timeout), |c| c.set_nx_px(key, value, ttl_ms))
            .await;
        let elapsed_us = start.elapsed().as_micros() as u64;
        let acquired = replies.iter().filter(|r| matches!(r, Ok(true))).count();
        match decide(acquired, sh.quorum, elapsed_us, ttl_ms) {
            Decision::Held { .. } => {
                st.acquired.fetch_add(1, Relaxed);
                return Ok(true);
            }
            Decision::NoQuorum => st.failed_quorums.fetch_add(1, Relaxed),
            Decision::ValidityExpired => st.validity_expired.fetch_add(1, Relaxed),
        };
        // Undo on every instance, also those that timed out: their SET may still land.
        if acquired > 0 || replies.iter().any(|r| r.is_err()) {
            self.release_all(key, value, Some(timeout)).await;
        }
        match replies.iter().find(|r| r.is_ok()) {
            Some(_) => Ok(false),
            None => Err(replies
                .into_iter()
                .find_map(|r| r.err())
                .unwrap_or_else(|| unsupported("an acquisition over no instance"))),
        }
    }

    async fn setnx(&mut self, _key: &str, _value: &str) -> CmdResult<bool> {
        Err(unsupported("SETNX"))
    }

    async fn pexpire(&mut self, _key: &str, _ms: u64) -> CmdResult<bool> {
        Err(unsupported("PEXPIRE"))
    }

    async fn getdel(&mut self, _key: &str) -> CmdResult<Option<String>> {
        Err(unsupported("GETDEL"))
    }

    /// The token script on every instance, replies combined by
    /// [`crate::quorum::combine_release`].
    async fn release_script(&mut self, key: &str, token: &str) -> CmdResult<i64> {
        let quorum = self.shared.quorum;
        // Bounded per instance as the acquisition is: a stopped instance costs the release its
        // timeout, not the connection's command timeout (it used to hold the worker for a
        // whole pause, so a pause could go unseen in the per-instance counts).
        // Before any acquisition (the release probe) there is no TTL to take it from.
        let ttl_ms = self.shared.stats.ttl_ms.load(Relaxed);
        let timeout = (ttl_ms > 0).then(|| instance_timeout_us(self.shared.timeout_us, ttl_ms));
        let r = self.release_all(key, token, timeout).await;
        combine_release(&r, quorum)
    }

    async fn canonical_cad(&mut self, _key: &str, _token: &str) -> CmdResult<i64> {
        Err(unsupported("the canonical compare-and-delete"))
    }

    async fn delex(&mut self, _key: &str, _token: &str) -> CmdResult<i64> {
        Err(unsupported("DELEX"))
    }

    /// The value a majority holds, if any.
    async fn get(&mut self, key: &str) -> CmdResult<Option<String>> {
        let quorum = self.shared.quorum;
        let r = self.each(None, |c| c.get(key)).await;
        let values: Vec<String> = r.iter().filter_map(|v| v.clone().ok().flatten()).collect();
        if let Some(v) = values
            .iter()
            .find(|v| values.iter().filter(|w| w == v).count() >= quorum)
        {
            return Ok(Some(v.clone()));
        }
        match r.into_iter().find_map(|v| v.err()) {
            Some(e) if values.is_empty() => Err(e),
            _ => Ok(None),
        }
    }

    /// `1` when a majority has the key.
    async fn exists(&mut self, key: &str) -> CmdResult<i64> {
        let quorum = self.shared.quorum;
        let r = self.each(None, |c| c.exists(key)).await;
        let present = r.iter().filter(|v| matches!(v, Ok(n) if *n > 0)).count();
        Ok(i64::from(present >= quorum))
    }

    /// `-1` when any instance has the key without expiry (a stuck lock there), else the
    /// longest `PTTL`.
    async fn pttl(&mut self, key: &str) -> CmdResult<i64> {
        let r = self.each(None, |c| c.pttl(key)).await;
        if r.iter().any(|v| matches!(v, Ok(-1))) {
            return Ok(-1);
        }
        max_of(r)
    }

    /// Re-arms on every instance; held iff a majority re-armed
    /// ([`crate::quorum::combine_extend`]).
    async fn extend(
        &mut self,
        key: &str,
        token: &str,
        ttl_ms: u64,
        how: ExtendCommand,
    ) -> CmdResult<bool> {
        let quorum = self.shared.quorum;
        let timeout = instance_timeout_us(self.shared.timeout_us, ttl_ms);
        let r = self
            .each(Some(timeout), |c| c.extend(key, token, ttl_ms, how))
            .await;
        combine_extend(&r, quorum)
    }
}

impl ResourceCommands for RedlockConn {
    async fn set_nx_px_fenced(
        &mut self,
        _key: &str,
        _fence_key: &str,
        _register_at: Option<&str>,
        _token: &str,
        _ttl_ms: u64,
    ) -> CmdResult<Option<u64>> {
        Err(unsupported("fenced acquisition"))
    }

    async fn resource_read(
        &mut self,
        _res_key: &str,
        _register_fence: Option<u64>,
    ) -> CmdResult<ReadOutcome> {
        Err(unsupported("the resource read"))
    }

    async fn resource_write(
        &mut self,
        _res_key: &str,
        _lock_key: &str,
        _token: &str,
        _fence: Option<u64>,
        _value: u64,
    ) -> CmdResult<WriteOutcome> {
        Err(unsupported("the resource write"))
    }

    async fn resource_write_apart(
        &mut self,
        _res_key: &str,
        _fence: Option<u64>,
        _value: u64,
    ) -> CmdResult<WriteOutcome> {
        Err(unsupported("the resource write"))
    }

    async fn resource_value(&mut self, _res_key: &str) -> CmdResult<u64> {
        Err(unsupported("the resource read-back"))
    }
}

impl ServerProbes for RedlockConn {
    async fn supports_command(&mut self, name: &str) -> CmdResult<bool> {
        self.first().supports_command(name).await
    }

    async fn knows_set_ifeq(&mut self) -> CmdResult<bool> {
        self.first().knows_set_ifeq().await
    }

    async fn server_version(&mut self) -> CmdResult<String> {
        self.first().server_version().await
    }

    async fn dry_run(&mut self, args: &[&str]) -> CmdResult<Result<(), crate::store::Refusal>> {
        self.first().dry_run(args).await
    }

    async fn load_release_script(&mut self) -> CmdResult<()> {
        self.first().load_release_script().await
    }
}

/// No Lua here: the defaults, which say that only a Redis server runs the user's scripts.
impl UserScripts for RedlockConn {}

impl KeySweep for RedlockConn {
    async fn del(&mut self, key: &str) -> CmdResult<i64> {
        let r = self.each(None, |c| c.del(key)).await;
        max_of(r)
    }

    /// Removes the keys on every instance; the count is the largest instance's (a lock on
    /// several instances is one lock).
    async fn del_many(&mut self, keys: &[String]) -> CmdResult<i64> {
        let r = self.each(None, |c| c.del_many(keys)).await;
        max_of(r)
    }
}

/// The largest successful reply; the first error when none succeeded.
fn max_of(r: Vec<CmdResult<i64>>) -> CmdResult<i64> {
    let best = r.iter().filter_map(|v| v.as_ref().ok()).max().copied();
    match best {
        Some(n) => Ok(n),
        None => Err(r
            .into_iter()
            .find_map(|v| v.err())
            .unwrap_or_else(|| unsupported("a command over no instance"))),
    }
}

/// The private servers of a spawned redlock, in instance order (shared with the fault driver,
/// which pauses and restarts them one by one).
pub type Instances = Vec<Arc<tokio::sync::Mutex<super::spawn::SpawnedRedis>>>;

/// Opens the plan's redlock: `instances` private servers started side by side, or one
/// connector per URL (loopback only unless `allow_remote`).
pub async fn open_redlock(
    plan: &RedlockPlan,
    timeouts: super::Timeouts,
    allow_remote: bool,
) -> anyhow::Result<(RedlockConnector, Instances)> {
    let mut servers = Vec::new();
    let mut connectors = Vec::new();
    if plan.urls.is_empty() {
        for i in 0..plan.instances {
            // An error drops the servers started so far, which stops them.
            let s = super::spawn::SpawnedRedis::start()
                .await
                .map_err(|e| anyhow::anyhow!("redlock instance {i}: {e:#}"))?;
            connectors.push(RedisConnector::new(&s.url(), timeouts, false)?);
            servers.push(Arc::new(tokio::sync::Mutex::new(s)));
        }
    } else {
        for (i, u) in plan.urls.iter().enumerate() {
            connectors.push(
                RedisConnector::new(u, timeouts, allow_remote)
                    .map_err(|e| e.context(format!("redlock instance {i}")))?,
            );
        }
    }
    Ok((RedlockConnector::new(connectors, plan), servers))
}
