//! The fault schedule: what breaks, when, for how long — and the driver that makes it happen
//! during each variant, the same schedule for every variant of a `compare` (times are from
//! the variant's start), so variants meet the same faults.
//!
//! Kinds ([`FaultKind`]): the server stops answering (`server-pause`), dies and comes back
//! empty (`server-restart`), replies late (`latency`) or not at all (`partition`), and holders
//! die mid-section without releasing (`holder-crash`, applied by the workers). The network
//! kinds go through a loopback [`proxy::Proxy`] that the backend starts when the schedule
//! needs one.

pub mod failover;
pub mod proxy;

use crate::store::redis::RedisConnector;
use crate::store::spawn::SpawnedRedis;
use crate::units;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Mutex, watch};
use tokio::time::Instant;

/// What breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// The server stops answering (SIGSTOP of a spawned server, `CLIENT PAUSE … ALL` of one
    /// given by URL); commands wait, then time out.
    ServerPause,
    /// The server is killed and, after the window, started again empty on the same address
    /// (spawned servers only): every lock and fence counter is lost.
    ServerRestart,
    /// Every reply is delayed by `delay ± jitter` (through the proxy).
    Latency,
    /// Nothing gets through in either direction (through the proxy); what was sent arrives
    /// after the window, as TCP delivers it after a short partition.
    Partition,
    /// With `probability` per section begun in the window, the holder dies mid-section
    /// without releasing; its worker comes back after `restart` as a new client.
    HolderCrash,
    /// A cluster shard's master fails over to its replica (spawned clusters only): during
    /// the window the replica lags (stopped, so it applies nothing the master acknowledges);
    /// at its end the master dies and the replica takes over (`CLUSTER FAILOVER TAKEOVER`);
    /// the old master comes back empty, as its replica, when the variant ends. Locks acknowledged to holders but never
    /// replicated are lost.
    Failover,
}

impl FaultKind {
    /// Every kind, as written.
    pub const ALL: [FaultKind; 6] = [
        Self::ServerPause,
        Self::ServerRestart,
        Self::Latency,
        Self::Partition,
        Self::HolderCrash,
        Self::Failover,
    ];

    /// The name written in profiles, flags and files.
    pub fn name(self) -> &'static str {
        match self {
            Self::ServerPause => "server-pause",
            Self::ServerRestart => "server-restart",
            Self::Latency => "latency",
            Self::Partition => "partition",
            Self::HolderCrash => "holder-crash",
            Self::Failover => "failover",
        }
    }

    fn parse(s: &str) -> Result<FaultKind, String> {
        Self::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                format!(
                    "`{s}` is not a fault kind: use {}",
                    Self::ALL.map(Self::name).join(", ")
                )
            })
    }

    /// Needs the loopback proxy.
    pub fn needs_proxy(self) -> bool {
        matches!(self, Self::Latency | Self::Partition)
    }

    /// Acts on the server itself.
    pub fn needs_server(self) -> bool {
        matches!(self, Self::ServerPause | Self::ServerRestart)
    }
}

/// A `[[fault]]` entry as written in a profile.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FaultProfile {
    /// `server-pause`, `server-restart`, `latency`, `partition` or `holder-crash`.
    pub kind: Option<String>,
    /// Start, from the variant's start (`2s`) [default: 0].
    pub at: Option<String>,
    /// Length of the window (`500ms`) [default for holder-crash: the whole run].
    pub length: Option<String>,
    /// `latency`: the added delay of every reply.
    pub delay: Option<String>,
    /// `latency`: uniform jitter around the delay [default: 0].
    pub jitter: Option<String>,
    /// `holder-crash`: probability that a section begun in the window dies.
    pub probability: Option<f64>,
    /// `holder-crash`: how long a crashed worker stays away [default: 0].
    pub restart: Option<String>,
    /// `failover`: which shard, by the order of its first slot (0 holds slot 0) [default: 0].
    pub shard: Option<usize>,
    /// `server-pause` / `server-restart` of a redlock run: which instance (from 0).
    pub instance: Option<usize>,
}

/// A validated fault. Times are real (never scaled by `time_scale`): they place faults on
/// the run's clock, not in the modelled workload.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Fault {
    /// What breaks.
    pub kind: FaultKind,
    /// Start from the variant's start, µs.
    pub at_us: u64,
    /// Length, µs (`u64::MAX`: until the run ends).
    pub length_us: u64,
    /// `latency`: added delay, µs.
    pub delay_us: u64,
    /// `latency`: jitter, µs.
    pub jitter_us: u64,
    /// `holder-crash`: probability per section.
    pub probability: f64,
    /// `holder-crash`: how long a crashed worker stays away, µs.
    pub restart_us: u64,
    /// `failover`: the shard, by the order of its first slot.
    pub shard: usize,
    /// Redlock runs: the instance a server fault acts on (`None`: a single server's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance: Option<usize>,
}

impl Fault {
    /// End of the window from the variant's start, µs.
    pub fn end_us(&self) -> u64 {
        self.at_us.saturating_add(self.length_us)
    }

    /// Whether `t_us` (from the variant's start) is inside the window.
    pub fn covers(&self, t_us: u64) -> bool {
        (self.at_us..self.end_us()).contains(&t_us)
    }

    /// The `--fault` syntax: `KIND[@AT[+LENGTH]][,key=value…]`, e.g. `server-pause@1s+500ms`,
    /// `latency@0s+2s,delay=20ms,jitter=5ms`, `holder-crash,probability=0.1,restart=100ms`.
    pub fn parse_flag(text: &str) -> Result<FaultProfile, String> {
        let mut parts = text.split(',');
        let head = parts.next().unwrap_or("").trim();
        let (kind, when) = match head.split_once('@') {
            Some((k, w)) => (k, Some(w)),
            None => (head, None),
        };
        let mut p = FaultProfile {
            kind: Some(kind.trim().to_string()),
            ..FaultProfile::default()
        };
        if let Some(w) = when {
            let (at, length) = match w.split_once('+') {
                Some((a, l)) => (a, Some(l)),
                None => (w, None),
            };
            p.at = Some(at.trim().to_string());
            p.length = length.map(|l| l.trim().to_string());
        }
        for kv in parts {
            let (k, v) = kv.split_once('=').ok_or_else(|| {
                format!("`{kv}` in `{text}`: write key=value (delay, jitter, probability, restart, shard, instance)")
            })?;
            let v = v.trim().to_string();
            match k.trim() {
                "delay" => p.delay = Some(v),
                "jitter" => p.jitter = Some(v),
                "restart" => p.restart = Some(v),
                "shard" => {
                    p.shard = Some(v.parse().map_err(|_| {
                        format!("shard `{v}` in `{text}` is not a shard number (0, 1, …)")
                    })?)
                }
                "instance" => {
                    p.instance = Some(v.parse().map_err(|_| {
                        format!("instance `{v}` in `{text}` is not an instance number (0, 1, …)")
                    })?)
                }
                "length" => p.length = Some(v),
                "at" => p.at = Some(v),
                "probability" | "p" => {
                    p.probability = Some(v.parse().map_err(|_| {
                        format!("probability `{v}` in `{text}` is not a number from 0 to 1")
                    })?)
                }
                other => {
                    return Err(format!(
                        "`{other}` in `{text}` is not a fault setting: use delay, jitter, probability, restart, shard, instance, at or length"
                    ));
                }
            }
        }
        Ok(p)
    }
}

impl FaultProfile {
    /// Validates one entry; the error names the setting and what would be valid.
    pub fn validate(&self) -> Result<Fault, String> {
        let kind = FaultKind::parse(
            self.kind
                .as_deref()
                .ok_or("every fault needs a `kind` (e.g. kind = \"server-pause\")")?,
        )?;
        let dur = |name: &str, v: &Option<String>| -> Result<Option<u64>, String> {
            v.as_deref()
                .map(|t| {
                    units::parse_ms(t)
                        .map(units::ms_to_us)
                        .map_err(|e| format!("`{name}`: {e}"))
                })
                .transpose()
        };
        let at_us = dur("at", &self.at)?.unwrap_or(0);
        let length_us = match dur("length", &self.length)? {
            Some(0) => return Err("`length` must be longer than 0 (e.g. 500ms)".into()),
            Some(l) => l,
            None if kind == FaultKind::HolderCrash => u64::MAX,
            None => {
                return Err(format!(
                    "a {} needs a `length` (e.g. {}@1s+500ms)",
                    kind.name(),
                    kind.name()
                ));
            }
        };
        let only = |name: &str, set: bool, for_kind: FaultKind| -> Result<(), String> {
            if set && kind != for_kind {
                return Err(format!(
                    "`{name}` belongs to a {} fault, not a {}",
                    for_kind.name(),
                    kind.name()
                ));
            }
            Ok(())
        };
        only("delay", self.delay.is_some(), FaultKind::Latency)?;
        only("jitter", self.jitter.is_some(), FaultKind::Latency)?;
        only(
            "probability",
            self.probability.is_some(),
            FaultKind::HolderCrash,
        )?;
        only("restart", self.restart.is_some(), FaultKind::HolderCrash)?;
        only("shard", self.shard.is_some(), FaultKind::Failover)?;
        let delay_us = dur("delay", &self.delay)?.unwrap_or(0);
        let jitter_us = dur("jitter", &self.jitter)?.unwrap_or(0);
        if kind == FaultKind::Latency && delay_us == 0 && jitter_us == 0 {
            return Err("a latency fault needs a `delay` (e.g. delay=20ms)".into());
        }
        let probability = self.probability.unwrap_or(0.0);
        if kind == FaultKind::HolderCrash {
            match self.probability {
                Some(p) if p > 0.0 && p <= 1.0 => {}
                Some(p) => {
                    return Err(format!(
                        "`probability` {p} is not valid: use a number above 0, at most 1 (e.g. 0.05)"
                    ));
                }
                None => {
                    return Err(
                        "a holder-crash needs a `probability` per section (e.g. probability=0.05)"
                            .into(),
                    );
                }
            }
        }
        let restart_us = dur("restart", &self.restart)?.unwrap_or(0);
        if self.instance.is_some() && !kind.needs_server() {
            return Err(format!(
                "`instance` picks the redlock instance of a server-pause or server-restart, not of a {}",
                kind.name()
            ));
        }
        Ok(Fault {
            kind,
            at_us,
            length_us,
            delay_us,
            jitter_us,
            probability,
            restart_us,
            shard: self.shard.unwrap_or(0),
            instance: self.instance,
        })
    }
}

/// A fault window as it happened: what the summary, `faults.csv` and the timeline show.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultWindow {
    /// The kind's name.
    pub kind: String,
    /// When it began, ms from the variant's start.
    pub start_ms: f64,
    /// When it ended (clipped to the variant's end), ms from the variant's start.
    pub end_ms: f64,
    /// Its settings in words (`delay 20ms ± 5ms`, `p 0.1, restart 100ms`), empty if none.
    #[serde(default)]
    pub detail: String,
    /// Empty when applied; otherwise why it could not be (e.g. the server did not restart).
    #[serde(default)]
    pub error: String,
    /// `failover`: what it did to the locks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover: Option<failover::Lost>,
}

/// What the driver needs to break things: the spawned server, an administrative connection
/// for a server given by URL, the proxy. Cheap to clone.
#[derive(Clone, Default)]
pub struct FaultControl {
    /// A private server we spawned.
    pub server: Option<Arc<Mutex<SpawnedRedis>>>,
    /// A direct (never proxied) way to a server given by URL, for `CLIENT PAUSE`.
    pub admin: Option<RedisConnector>,
    /// The loopback proxy, when the schedule has network faults.
    pub proxy: Option<Arc<proxy::Proxy>>,
    /// A private cluster we spawned (`failover` kills and promotes its nodes).
    pub cluster: Option<Arc<Mutex<crate::store::spawn_cluster::SpawnedCluster>>>,
    /// The variant's key prefix: the `failover` fault reads the locks under it.
    pub key_prefix: String,
    /// A spawned redlock's servers, in instance order (a fault's `instance` picks one).
    pub instances: Vec<Arc<Mutex<SpawnedRedis>>>,
}

impl std::fmt::Debug for FaultControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultControl")
            .field("server", &self.server.is_some())
            .field("admin", &self.admin.is_some())
            .field("proxy", &self.proxy.as_ref().map(|p| p.addr()))
            .field("instances", &self.instances.len())
            .finish()
    }
}

impl FaultControl {
    /// Refuses a schedule this backend cannot carry out, before anything runs.
    pub fn check(&self, faults: &[Fault], backend: &str) -> Result<(), String> {
        for f in faults {
            let k = f.kind;
            if let Some(e) = self.check_instance(f, backend) {
                return Err(e);
            }
            if f.instance.is_some() {
                continue;
            }
            let ok = match k {
                FaultKind::ServerPause => self.server.is_some() || self.admin.is_some(),
                FaultKind::ServerRestart => self.server.is_some(),
                FaultKind::Latency | FaultKind::Partition => self.proxy.is_some(),
                FaultKind::HolderCrash => true,
                FaultKind::Failover => self.cluster.is_some(),
            };
            if !ok {
                let need = match k {
                    FaultKind::ServerRestart => {
                        "a server lockbench starts itself (backend = \"spawn\"): it kills it and starts it again"
                    }
                    FaultKind::ServerPause => "a Redis server (spawned, or given by URL)",
                    FaultKind::Failover => {
                        "a Redis Cluster lockbench starts itself (backend = \"spawn-cluster\"): it kills a master and promotes its replica"
                    }
                    _ => {
                        "a Redis server on a TCP address (lockbench puts a loopback proxy in front of it)"
                    }
                };
                return Err(format!(
                    "fault `{}` needs {need}; this run's backend is {backend}",
                    k.name()
                ));
            }
        }
        Ok(())
    }
}

impl FaultControl {
    /// A fault's `instance` against this backend: `None` when it is fine. A redlock run
    /// (spawned) needs it on every server fault and within range; anything else refuses it.
    fn check_instance(&self, f: &Fault, backend: &str) -> Option<String> {
        let n = self.instances.len();
        let redlock = backend == "redlock";
        match f.instance {
            Some(_) if !redlock => Some(format!(
                "fault `{}` names an `instance`, which picks a server of a redlock run (lock = \"redlock\"); this run's backend is {backend}",
                f.kind.name()
            )),
            Some(_) if n == 0 => Some(format!(
                "fault `{}` on a redlock instance needs instances lockbench spawns (not redlock_urls): it pauses and restarts them itself",
                f.kind.name()
            )),
            Some(i) if i >= n => Some(format!(
                "fault `{}`: instance {i} does not exist; this redlock has instances 0 to {}",
                f.kind.name(),
                n - 1
            )),
            None if redlock && f.kind.needs_server() => Some(format!(
                "fault `{}` in a redlock run needs `instance` (0 to {}): which server to break",
                f.kind.name(),
                n.max(1) - 1
            )),
            None if redlock && f.kind.needs_proxy() => Some(format!(
                "fault `{}` is not supported in a redlock run (no proxy in front of the instances): use server-pause or server-restart with `instance`",
                f.kind.name()
            )),
            _ => None,
        }
    }

    /// The control that acts on `f`: for a redlock instance, that instance's server alone.
    fn for_fault(&self, f: &Fault) -> FaultControl {
        match f.instance.and_then(|i| self.instances.get(i)) {
            Some(s) => FaultControl {
                server: Some(s.clone()),
                ..FaultControl::default()
            },
            None => self.clone(),
        }
    }
}

/// Runs the server and network faults of `faults` on the variant's clock (from `start`)
/// until `done` becomes true; returns every window that began (holder crashes are the
/// workers' part: their windows are recorded as scheduled). A fault still on when the
/// variant ends is undone then.
pub async fn drive(
    faults: Vec<Fault>,
    control: FaultControl,
    start: Instant,
    done: watch::Receiver<bool>,
) -> Vec<FaultWindow> {
    let mut tasks = tokio::task::JoinSet::new();
    for (i, f) in faults.into_iter().enumerate() {
        let control = control.for_fault(&f);
        let mut done = done.clone();
        tasks.spawn(async move {
            let began = start + Duration::from_micros(f.at_us);
            if !wait_until(began, &mut done).await {
                return None;
            }
            let ms = |t: Instant| t.saturating_duration_since(start).as_secs_f64() * 1000.0;
            let start_ms = ms(Instant::now());
            let end = start.checked_add(Duration::from_micros(f.end_us()));
            if f.kind == FaultKind::Failover {
                let (error, failover) = failover::run(&control, &f, end, &mut done).await;
                return Some((
                    i,
                    FaultWindow {
                        kind: f.kind.name().to_string(),
                        start_ms,
                        end_ms: ms(failover
                            .as_ref()
                            .map_or_else(Instant::now, |l| l.taken_over)),
                        detail: failover
                            .as_ref()
                            .map(failover::Lost::detail)
                            .unwrap_or_default(),
                        error,
                        failover,
                    },
                ));
            }
            if f.kind == FaultKind::ServerPause && control.server.is_none() {
                // A paused server holds every client's commands, an UNPAUSE too: pause in
                // short slices, so the pause ends within one slice of the variant's end.
                let error = pause_in_slices(&control, end, &mut done).await;
                return Some((
                    i,
                    FaultWindow {
                        kind: f.kind.name().to_string(),
                        start_ms,
                        end_ms: ms(Instant::now()),
                        detail: detail(&f),
                        error,
                        failover: None,
                    },
                ));
            }
            let error = apply(&control, &f, true).await.err().unwrap_or_default();
            match end {
                Some(e) => {
                    wait_until(e, &mut done).await;
                }
                None => {
                    let _ = done.wait_for(|d| *d).await;
                }
            }
            let undo = apply(&control, &f, false).await.err().unwrap_or_default();
            let error = [error, undo]
                .into_iter()
                .filter(|e| !e.is_empty())
                .collect::<Vec<_>>()
                .join("; ");
            Some((
                i,
                FaultWindow {
                    kind: f.kind.name().to_string(),
                    start_ms,
                    end_ms: ms(Instant::now()),
                    detail: detail(&f),
                    error,
                    failover: None,
                },
            ))
        });
    }
    let mut out: Vec<(usize, FaultWindow)> = tasks.join_all().await.into_iter().flatten().collect();
    out.sort_by(|a, b| a.1.start_ms.total_cmp(&b.1.start_ms).then(a.0.cmp(&b.0)));
    out.into_iter().map(|(_, w)| w).collect()
}

/// Pauses a server given by URL with `CLIENT PAUSE <slice> ALL` again and again until `end`
/// (or the variant's end); returns the first error, empty if none.
async fn pause_in_slices(
    control: &FaultControl,
    end: Option<Instant>,
    done: &mut watch::Receiver<bool>,
) -> String {
    const SLICE: Duration = Duration::from_millis(100);
    let Some(admin) = &control.admin else {
        return "no server to pause".into();
    };
    loop {
        let now = Instant::now();
        let until = end.map_or(now + SLICE, |e| e.min(now + SLICE));
        if until <= now {
            return String::new();
        }
        let ms = until.duration_since(now).as_millis().max(1).to_string();
        if let Err(e) = admin.admin_command(&["CLIENT", "PAUSE", &ms, "ALL"]).await {
            return format!("{e:#}");
        }
        if !wait_until(until, done).await {
            return String::new();
        }
    }
}

/// Sleeps until `t`; `false` when `done` came first.
async fn wait_until(t: Instant, done: &mut watch::Receiver<bool>) -> bool {
    if *done.borrow() {
        return false;
    }
    tokio::select! {
        _ = tokio::time::sleep_until(t) => true,
        _ = done.wait_for(|d| *d) => false,
    }
}

/// The settings of a fault in words.
pub fn detail(f: &Fault) -> String {
    let c = |us: u64| units::fmt_us(us, units::Style::Compact);
    match f.kind {
        FaultKind::Latency if f.jitter_us > 0 => {
            format!("delay {} ± {}", c(f.delay_us), c(f.jitter_us))
        }
        FaultKind::Latency => format!("delay {}", c(f.delay_us)),
        FaultKind::HolderCrash => format!("p {}, restart {}", f.probability, c(f.restart_us)),
        _ => f
            .instance
            .map(|i| format!("instance {i}"))
            .unwrap_or_default(),
    }
}

/// Starts (`on`) or ends one fault.
async fn apply(control: &FaultControl, f: &Fault, on: bool) -> Result<(), String> {
    match f.kind {
        FaultKind::HolderCrash | FaultKind::Failover => Ok(()),
        FaultKind::Latency => {
            let p = control.proxy.as_ref().ok_or("no proxy")?;
            let (d, j) = if on {
                (f.delay_us, f.jitter_us)
            } else {
                (0, 0)
            };
            p.set_latency(Duration::from_micros(d), Duration::from_micros(j));
            Ok(())
        }
        FaultKind::Partition => {
            let p = control.proxy.as_ref().ok_or("no proxy")?;
            p.set_partition(on);
            Ok(())
        }
        FaultKind::ServerRestart => {
            let s = control.server.as_ref().ok_or("no spawned server")?;
            let mut s = s.lock().await;
            if on {
                s.kill().await;
                Ok(())
            } else {
                s.start_again().await.map_err(|e| format!("{e:#}"))
            }
        }
        FaultKind::ServerPause => {
            if let Some(s) = &control.server {
                let s = s.lock().await;
                if !s.is_running() {
                    // Down for a restart: its old pid may belong to another process by now.
                    return Err("the server is down (restarting): nothing to pause".into());
                }
                return signal(s.pid(), if on { "-STOP" } else { "-CONT" }).await;
            }
            // A server given by URL is paused in slices by the driver (see `pause_in_slices`).
            Err("no spawned server to pause".into())
        }
    }
}

/// Sends `sig` (`-STOP`, `-CONT`) to process `pid` with `kill`.
async fn signal(pid: u32, sig: &str) -> Result<(), String> {
    let status = tokio::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .await
        .map_err(|e| format!("cannot run kill {sig} {pid}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("kill {sig} {pid} failed ({status})"))
    }
}

/// Writes `faults.csv`: one row per window of every variant.
pub fn write_csv(path: &std::path::Path, rows: &[(String, FaultWindow)]) -> anyhow::Result<()> {
    let mut w = csv::Writer::from_path(path)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    w.write_record(["variant", "kind", "start_ms", "end_ms", "detail", "error"])?;
    for (variant, f) in rows {
        w.write_record([
            variant.as_str(),
            &f.kind,
            &crate::analysis::figures::num(f.start_ms),
            &crate::analysis::figures::num(f.end_ms),
            &f.detail,
            &f.error,
        ])?;
    }
    w.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flag syntax covers what the profile table does, and bad settings say what is valid.
    #[test]
    fn flag_syntax_and_errors() {
        let f = Fault::parse_flag("latency@1s+2s,delay=20ms,jitter=5ms")
            .unwrap()
            .validate()
            .unwrap();
        assert_eq!(f.kind, FaultKind::Latency);
        assert_eq!((f.at_us, f.length_us), (1_000_000, 2_000_000));
        assert_eq!((f.delay_us, f.jitter_us), (20_000, 5_000));
        let c = Fault::parse_flag("holder-crash,probability=0.1,restart=50ms")
            .unwrap()
            .validate()
            .unwrap();
        assert_eq!((c.at_us, c.length_us), (0, u64::MAX));
        assert!(c.covers(123_456_789));
        let e = |t: &str| Fault::parse_flag(t).and_then(|p| p.validate()).unwrap_err();
        assert!(e("server-pause@1s").contains("needs a `length`"));
        assert!(e("server-nap@1s+1s").contains("server-pause, server-restart"));
        assert!(e("holder-crash").contains("probability"));
        assert!(e("holder-crash,probability=2").contains("at most 1"));
        assert!(e("server-pause@1s+1s,delay=5ms").contains("belongs to a latency"));
        assert!(e("latency@0s+1s").contains("needs a `delay`"));
        assert!(e("partition@0s+1s,bogus=1").contains("not a fault setting"));
        assert!(e("partition@0s+0s").contains("longer than 0"));
    }

    /// A backend that cannot carry out a kind is refused with what it would need.
    #[test]
    fn check_names_what_is_missing() {
        let f = |t: &str| Fault::parse_flag(t).unwrap().validate().unwrap();
        let none = FaultControl::default();
        assert!(none.check(&[f("holder-crash,p=0.5")], "memory").is_ok());
        let e = none
            .check(&[f("server-restart@1s+1s")], "memory")
            .unwrap_err();
        assert!(e.contains("backend = \"spawn\""), "{e}");
        assert!(none.check(&[f("partition@1s+1s")], "memory").is_err());
    }
}
