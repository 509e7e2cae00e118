//! The fault schedule: what breaks, when, for how long — and the driver that makes it happen
//! during each variant, the same schedule for every variant of a `compare` (times are from
//! the variant's start), so variants meet the same faults.
//!
//! Kinds ([`FaultKind`]): the server stops answering (`server-pause`), dies and comes back
//! empty (`server-restart`), replies late (`latency`) or not at all (`partition`), and holders
//! die mid-section without releasing (`holder-crash`, applied by the workers). The network
//! kinds go through a loopback [`proxy::Proxy`] that the backend starts when the schedule
//! needs one. The holders' watches ([`watch`]) and `lockbench observe` carry many client
//! connections on one server connection where their requests allow ([`mux`]).

pub(crate) mod attribution;
pub(crate) mod failover;
pub(crate) mod mux;
pub(crate) mod proxy;
pub(crate) mod resp;
pub(crate) mod share;
pub(crate) mod watch;

use crate::model::fault::{Fault, FaultKind, FaultWindow};
use crate::model::units;
use crate::store::redis::RedisConnector;
use crate::store::spawn::SpawnedRedis;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;
use tokio::time::Instant;

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
    /// What carries out `latency` and `partition` when it is not [`Self::proxy`]: the doors of
    /// `lockbench observe`, which are a proxy already.
    pub network: Option<Arc<dyn Network>>,
}

/// What carries out the network kinds (`latency`, `partition`): the loopback [`proxy::Proxy`]
/// in front of a run's server, or `observe`'s doors.
pub trait Network: Send + Sync {
    /// From now on replies reach the clients `delay ± jitter` late; zero ends it.
    fn set_latency(&self, delay: Duration, jitter: Duration);
    /// On: nothing gets through in either direction (held, not lost); off: it flows again.
    fn set_partition(&self, on: bool);
}

impl FaultControl {
    /// The network the `latency` and `partition` kinds act on.
    fn net(&self) -> Option<&dyn Network> {
        match (&self.proxy, &self.network) {
            (Some(p), _) => Some(p.as_ref() as &dyn Network),
            (None, Some(n)) => Some(n.as_ref()),
            (None, None) => None,
        }
    }
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

/// A fault schedule this run cannot carry out (a kind its backend lacks, an `instance` out of
/// range, a pause its Redis user may not run): bad input, refused before anything runs.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct FaultRefused(String);

crate::exit::classify!(FaultRefused => BadInput);

impl FaultControl {
    /// Refuses a schedule this backend cannot carry out, before anything runs.
    pub fn check(&self, faults: &[Fault], backend: &str) -> Result<(), FaultRefused> {
        for f in faults {
            let k = f.kind;
            if let Some(e) = self.check_instance(f, backend) {
                return Err(FaultRefused(e));
            }
            if f.instance.is_some() {
                continue;
            }
            let ok = match k {
                FaultKind::ServerPause => self.server.is_some() || self.admin.is_some(),
                FaultKind::ServerRestart => self.server.is_some(),
                FaultKind::Latency | FaultKind::Partition => self.net().is_some(),
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
                return Err(FaultRefused(format!(
                    "fault `{}` needs {need}; this run's backend is {backend}",
                    k
                )));
            }
        }
        Ok(())
    }
}

impl FaultControl {
    /// Refuses a `server-pause` of a server given by URL whose user may not run `CLIENT
    /// PAUSE`, asked with `ACL DRYRUN` before anything runs. Where DRYRUN cannot answer, the
    /// run goes on and a refused pause is a failed window (exit 1).
    pub async fn check_permissions(&self, faults: &[Fault]) -> Result<(), FaultRefused> {
        let pauses = faults
            .iter()
            .any(|f| f.kind == FaultKind::ServerPause && f.instance.is_none());
        let (true, None, Some(admin)) = (pauses, &self.server, &self.admin) else {
            return Ok(());
        };
        let Ok(mut a) = admin.admin().await else {
            return Ok(());
        };
        let Ok(user) = a.query::<String>(&["ACL", "WHOAMI"]).await else {
            return Ok(());
        };
        let args = ["ACL", "DRYRUN", &user, "CLIENT", "PAUSE", "1000", "ALL"];
        match a.query::<redis::Value>(&args).await {
            Ok(redis::Value::BulkString(why)) => Err(FaultRefused(format!(
                "fault `server-pause` of a server given by URL needs CLIENT PAUSE, which Redis user `{user}` may not run: {}. Grant it (ACL SETUSER {user} +client|pause) or drop the fault",
                String::from_utf8_lossy(&why)
            ))),
            _ => Ok(()),
        }
    }

    /// A fault's `instance` against this backend: `None` when it is fine. A redlock run
    /// (spawned) needs it on every server fault and within range; anything else refuses it.
    fn check_instance(&self, f: &Fault, backend: &str) -> Option<String> {
        let n = self.instances.len();
        let redlock = backend == "redlock";
        match f.instance {
            Some(_) if !redlock => Some(format!(
                "fault `{}` names an `instance`, which picks a server of a redlock run (lock = \"redlock\"); this run's backend is {backend}",
                f.kind
            )),
            Some(_) if n == 0 => Some(format!(
                "fault `{}` on a redlock instance needs instances lockbench spawns (not redlock_urls): it pauses and restarts them itself",
                f.kind
            )),
            Some(i) if i >= n => Some(format!(
                "fault `{}`: instance {i} does not exist; this redlock has instances 0 to {}",
                f.kind,
                n - 1
            )),
            None if redlock && f.kind.needs_server() => Some(format!(
                "fault `{}` in a redlock run needs `instance` (0 to {}): which server to break",
                f.kind,
                n.max(1) - 1
            )),
            None if redlock && f.kind.needs_proxy() => Some(format!(
                "fault `{}` is not supported in a redlock run (no proxy in front of the instances): use server-pause or server-restart with `instance`",
                f.kind
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
/// until `done` becomes true; returns a window for every fault: as it happened, or as
/// scheduled and not reached when the variant ended first (holder crashes are the workers'
/// part: their windows are recorded as scheduled). A fault still on when the variant ends is
/// undone then. `until` is the variant's planned end, where it has one: a pause of a server
/// given by URL cannot be lifted early, so it is cut to that end when it is sent.
pub(crate) async fn drive(
    faults: Vec<Fault>,
    control: FaultControl,
    start: Instant,
    until: Option<Instant>,
    done: tokio::sync::watch::Receiver<bool>,
) -> Vec<FaultWindow> {
    let mut tasks = tokio::task::JoinSet::new();
    for (i, f) in faults.into_iter().enumerate() {
        let control = control.for_fault(&f);
        let mut done = done.clone();
        tasks.spawn(async move {
            // A URL server's pause is one command on a connection opened ahead of the window.
            let by_command = f.kind == FaultKind::ServerPause && control.server.is_none();
            let admin = match by_command {
                true => Some(PauseAdmin::open(&control).await),
                false => None,
            };
            let began = start + Duration::from_micros(f.at_us);
            // A window due at or after the variant's planned end is not reached, even when
            // the last sections are still closing then.
            if until.is_some_and(|u| began >= u) || !wait_until(began, &mut done).await {
                return (i, FaultWindow::not_reached(&f, detail(&f)));
            }
            let ms = |t: Instant| t.saturating_duration_since(start).as_secs_f64() * 1000.0;
            let mut window = FaultWindow::of(f.kind, ms(Instant::now()), 0.0, detail(&f));
            let end = start.checked_add(Duration::from_micros(f.end_us()));
            if f.kind == FaultKind::Failover {
                let (error, failover) = failover::run(&control, &f, end, &mut done).await;
                window.end_ms = ms(failover
                    .as_ref()
                    .map_or_else(Instant::now, |l| l.taken_over));
                window.detail = failover
                    .as_ref()
                    .map(crate::model::fault::Lost::detail)
                    .unwrap_or_default();
                window.error = error;
                window.failover = failover;
                return (i, window);
            }
            if let Some(admin) = admin {
                let (began, ended);
                (window.error, window.applied, began, ended) = pause_once(admin, end, until).await;
                (window.start_ms, window.end_ms) = (ms(began), ms(ended));
                return (i, window);
            }
            let error = apply(&control, &f, true).await.err().unwrap_or_default();
            // In effect from here (a SIGSTOP is a `kill` process away from the window's due time).
            window.start_ms = ms(Instant::now());
            // Undone at the variant's planned end at the latest: a window that outlasted it
            // would hold the run past its duration (a stopped server holds every worker's
            // last command). (A failover and a URL server's pause are cut their own way.)
            let cut = matches!((end, until), (Some(e), Some(u)) if u < e);
            let end = match (end, until) {
                (Some(e), Some(u)) => Some(e.min(u)),
                (e, u) => e.or(u),
            };
            match end {
                Some(e) => {
                    wait_until(e, &mut done).await;
                }
                None => {
                    let _ = done.wait_for(|d| *d).await;
                }
            }
            // A pause ends as its SIGCONT goes out; a restart once the server is back.
            let ending = Instant::now();
            let undo = apply(&control, &f, false).await.err().unwrap_or_default();
            window.error = [error, undo]
                .into_iter()
                .filter(|e| !e.is_empty())
                .collect::<Vec<_>>()
                .join("; ");
            window.applied = applied(&control, &f);
            if cut {
                let sep = if window.applied.is_empty() { "" } else { ", " };
                window.applied = format!("{}{sep}cut to the variant's end", window.applied);
            }
            window.end_ms = match f.kind {
                FaultKind::ServerPause => ms(ending),
                _ => ms(Instant::now()),
            };
            (i, window)
        });
    }
    let mut out: Vec<(usize, FaultWindow)> = tasks.join_all().await;
    out.sort_by(|a, b| a.1.start_ms.total_cmp(&b.1.start_ms).then(a.0.cmp(&b.0)));
    out.into_iter().map(|(_, w)| w).collect()
}

/// How a server fault is applied, for the summary (empty where the kind says it all).
fn applied(control: &FaultControl, f: &Fault) -> String {
    match (f.kind, control.server.is_some()) {
        (FaultKind::ServerPause, true) => "SIGSTOP of the server, SIGCONT at the end".into(),
        (FaultKind::ServerRestart, true) => {
            "SIGKILL of the server, started again empty at the end".into()
        }
        _ => String::new(),
    }
}

/// The administrative connection that pauses a server given by URL, and the server's `hz`
/// (how often its cron runs: it lifts a pause there), when `CONFIG GET` is allowed.
struct PauseAdmin {
    admin: Result<crate::store::redis::Admin, String>,
    hz: Option<u64>,
}

impl PauseAdmin {
    async fn open(control: &FaultControl) -> Self {
        let admin = match &control.admin {
            Some(c) => c.admin().await.map_err(|e| format!("{e:#}")),
            None => Err("no server to pause".to_string()),
        };
        let mut me = Self { admin, hz: None };
        if let Ok(a) = &mut me.admin {
            let hz: Result<std::collections::HashMap<String, String>, _> =
                a.query(&["CONFIG", "GET", "hz"]).await;
            me.hz = hz.ok().and_then(|m| m.get("hz")?.parse().ok());
        }
        me
    }
}

/// Pauses a server given by URL for the whole window with one `CLIENT PAUSE <ms> ALL`, so its
/// clients meet one silence, as with SIGSTOP. A paused server holds every client's commands,
/// an `UNPAUSE` too, so the length is fixed when the pause is sent: the window, cut to the
/// variant's planned end `until` where the run has one. The server lifts the pause in its
/// cron, up to 1000/hz ms late: a `PING` sent at the window's end returns when it did, which
/// is the window's end. Returns the error (empty if none), how it was applied, and when the
/// window began (the pause's reply) and ended.
async fn pause_once(
    admin: PauseAdmin,
    end: Option<Instant>,
    until: Option<Instant>,
) -> (String, String, Instant, Instant) {
    let hz = admin.hz;
    let mut admin = match admin.admin {
        Ok(a) => a,
        Err(e) => return (e, String::new(), Instant::now(), Instant::now()),
    };
    let now = Instant::now();
    let Some(stop) = [end, until].into_iter().flatten().min() else {
        return ("a pause needs a length".into(), String::new(), now, now);
    };
    let length_ms = stop.saturating_duration_since(now).as_millis().max(1) as u64;
    let pause = ["CLIENT", "PAUSE", &length_ms.to_string(), "ALL"];
    if let Err(e) = admin.query::<()>(&pause).await {
        return (format!("{e:#}"), String::new(), now, Instant::now());
    }
    // In effect once its reply is here (the server paused as it answered).
    let began = Instant::now();
    let scheduled = now + Duration::from_millis(length_ms);
    tokio::time::sleep_until(scheduled).await;
    let lifted = admin.query::<()>(&["PING"]).await;
    let ended = if lifted.is_ok() {
        Instant::now()
    } else {
        scheduled
    };
    let cron = match hz {
        Some(hz) if hz > 0 => format!("every {} ms, hz {hz}", 1000 / hz),
        _ => "hz unknown: CONFIG GET refused".to_string(),
    };
    let cut = if until.is_some_and(|u| end.is_none_or(|e| u < e)) {
        ", cut to the variant's end"
    } else {
        ""
    };
    let mut applied =
        format!("one CLIENT PAUSE {length_ms} ALL{cut}, lifted by the server's cron ({cron})");
    if let Err(e) = lifted {
        applied.push_str(&format!(
            "; the PING at its end failed ({e:#}): end as scheduled"
        ));
    }
    (String::new(), applied, began, ended)
}

/// Sleeps until `t`; `false` when `done` came first.
async fn wait_until(t: Instant, done: &mut tokio::sync::watch::Receiver<bool>) -> bool {
    if *done.borrow() {
        return false;
    }
    tokio::select! {
        _ = tokio::time::sleep_until(t) => true,
        _ = done.wait_for(|d| *d) => false,
    }
}

/// The settings of a fault in words.
pub(crate) fn detail(f: &Fault) -> String {
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
            let p = control.net().ok_or("no proxy")?;
            let (d, j) = if on {
                (f.delay_us, f.jitter_us)
            } else {
                (0, 0)
            };
            p.set_latency(Duration::from_micros(d), Duration::from_micros(j));
            Ok(())
        }
        FaultKind::Partition => {
            let p = control.net().ok_or("no proxy")?;
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
                let sig = if on { "-STOP" } else { "-CONT" };
                return crate::signals::send(s.pid(), sig)
                    .await
                    .map_err(|e| e.to_string());
            }
            // A server given by URL is paused in slices by the driver (see `pause_in_slices`).
            Err("no spawned server to pause".into())
        }
    }
}

/// Writes `faults.csv`: one row per window of every variant.
pub(crate) fn write_csv(
    path: &std::path::Path,
    rows: &[(String, FaultWindow)],
) -> anyhow::Result<()> {
    let mut w = csv::Writer::from_path(path)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    w.write_record([
        "variant", "kind", "start_ms", "end_ms", "detail", "error", "reached", "applied",
    ])?;
    for (variant, f) in rows {
        w.write_record([
            variant.as_str(),
            &f.kind,
            &crate::analysis::figures::num(f.start_ms),
            &crate::analysis::figures::num(f.end_ms),
            &f.detail,
            &f.error,
            if f.reached { "true" } else { "false" },
            &f.applied,
        ])?;
    }
    w.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fault::{Fault, FaultError};

    /// The flag syntax covers what the profile table does, and bad settings say what is valid.
    #[test]
    fn flag_syntax_and_errors() {
        let f = "latency@1s+2s,delay=20ms,jitter=5ms"
            .parse::<Fault>()
            .unwrap();
        assert_eq!(f.kind, FaultKind::Latency);
        assert_eq!((f.at_us, f.length_us), (1_000_000, 2_000_000));
        assert_eq!((f.delay_us, f.jitter_us), (20_000, 5_000));
        let c = "holder-crash,probability=0.1,restart=50ms"
            .parse::<Fault>()
            .unwrap();
        assert_eq!((c.at_us, c.length_us), (0, u64::MAX));
        assert!(c.covers(123_456_789));
        let e = |t: &str| t.parse::<Fault>().unwrap_err().to_string();
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
        let f = |t: &str| t.parse::<Fault>().unwrap();
        let none = FaultControl::default();
        assert!(none.check(&[f("holder-crash,p=0.5")], "memory").is_ok());
        let e = none
            .check(&[f("server-restart@1s+1s")], "memory")
            .unwrap_err()
            .to_string();
        assert!(e.contains("backend = \"spawn\""), "{e}");
        assert!(none.check(&[f("partition@1s+1s")], "memory").is_err());
    }

    /// The fault's settings are listed once (`Fault::SETTINGS`): every one is a key of
    /// `[[fault]]` and of `--fault`, every key of `[[fault]]` but `kind` is one of them, and the
    /// flag's two refusals print the list.
    #[test]
    fn one_list_of_settings() {
        for key in Fault::SETTINGS {
            // A duration setting's value has its unit; the others are numbers. Each is read
            // (a setting of another kind is then refused by name, not as unknown).
            let value = if ["shard", "instance", "probability"].contains(&key) {
                "1"
            } else {
                "1ms"
            };
            let flag = format!("latency,{key}={value}");
            let table = format!(
                "[[fault]]\nkind = \"latency\"\n{key} = {}",
                match value {
                    "1" => value.to_string(),
                    _ => format!("\"{value}\""),
                }
            );
            for e in [
                flag.parse::<Fault>().err().map(|e| e.to_string()),
                toml::from_str::<std::collections::BTreeMap<String, Vec<Fault>>>(&table)
                    .err()
                    .map(|e| e.to_string()),
            ]
            .into_iter()
            .flatten()
            {
                assert!(
                    !e.contains("not a fault setting") && !e.contains("unknown field"),
                    "{key}: {e}"
                );
            }
        }
        let unknown = toml::from_str::<std::collections::BTreeMap<String, Vec<Fault>>>(
            "[[fault]]\nkind = \"latency\"\nbogus = 1",
        )
        .unwrap_err()
        .to_string();
        let mut listed = Fault::SETTINGS.to_vec();
        listed.push("kind");
        for key in listed {
            assert!(unknown.contains(&format!("`{key}`")), "{key}: {unknown}");
        }
        let e = |t: &str| t.parse::<Fault>().unwrap_err();
        assert_eq!(
            e("partition@0s+1s,bogus=1"),
            FaultError::UnknownSetting("bogus".into())
        );
        assert_eq!(
            e("partition@0s+1s,bogus=1").to_string(),
            "`bogus` is not a fault setting: use delay, jitter, probability, restart, shard, \
             instance, at or length"
        );
        assert_eq!(
            e("partition@0s+1s,bogus").to_string(),
            "`bogus`: write key=value (delay, jitter, probability, restart, shard, instance)"
        );
    }

    /// The flag and the table are read the same: the same fault, and the same refusal.
    #[test]
    fn flag_and_table_are_one_fault() {
        let table = |t: &str| {
            toml::from_str::<std::collections::BTreeMap<String, Vec<Fault>>>(&format!(
                "[[fault]]\n{t}"
            ))
            .map(|mut m| m.remove("fault").unwrap().remove(0))
        };
        assert_eq!(
            "latency@1s+2s,delay=20ms,jitter=5ms".parse::<Fault>().unwrap(),
            table("kind = \"latency\"\nat = \"1s\"\nlength = \"2s\"\ndelay = \"20ms\"\njitter = \"5ms\"").unwrap()
        );
        let flag = "server-pause@1s".parse::<Fault>().unwrap_err().to_string();
        let toml = table("kind = \"server-pause\"\nat = \"1s\"")
            .unwrap_err()
            .to_string();
        assert!(toml.contains(&flag), "{toml} / {flag}");
    }
}
