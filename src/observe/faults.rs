//! Faults on the real program: `--fault holder-pause@AT+LENGTH` stops a copy that holds a lock
//! (SIGSTOP to its process group, SIGCONT after LENGTH: a GC pause, a stalled VM);
//! `--fault holder-crash@AT` kills one (SIGKILL; started again with `--restart`). From AT on
//! the fault waits for a copy to hold a lock — the proxy knows who holds — and strikes the one
//! holding longest; the ledger ends a killed copy's holds as crashes when it sees the exit.

use super::ledger::Ledger;
use crate::model::units::DurationText;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// What a holder fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum HolderFaultKind {
    /// SIGSTOP, then SIGCONT.
    HolderPause,
    /// SIGKILL.
    HolderCrash,
}

/// `holder-pause@AT+LENGTH` or `holder-crash@AT`, read at the door.
#[derive(Debug, Clone)]
pub struct HolderFault {
    kind: HolderFaultKind,
    at: DurationText,
    length: Option<DurationText>,
}

impl std::str::FromStr for HolderFault {
    type Err = String;

    fn from_str(text: &str) -> Result<HolderFault, String> {
        let usage = "write holder-pause@AT+LENGTH (e.g. holder-pause@2s+500ms) or holder-crash@AT (e.g. holder-crash@2s)";
        let (kind, rest) = text
            .split_once('@')
            .ok_or_else(|| format!("`{text}`: {usage}"))?;
        let kind = match kind {
            "holder-pause" => HolderFaultKind::HolderPause,
            "holder-crash" => HolderFaultKind::HolderCrash,
            k => {
                return Err(format!(
                    "`{k}`: observe's faults are holder-pause and holder-crash; {usage}"
                ));
            }
        };
        let (at, length) = match rest.split_once('+') {
            Some((a, l)) => (a, Some(l)),
            None => (rest, None),
        };
        let at: DurationText = at.parse().map_err(|e| format!("`{text}`: AT: {e}"))?;
        let length = length
            .map(|l| l.parse::<DurationText>())
            .transpose()
            .map_err(|e| format!("`{text}`: LENGTH: {e}"))?;
        match (kind, &length) {
            (HolderFaultKind::HolderPause, None) => {
                Err(format!("`{text}`: a pause needs its LENGTH; {usage}"))
            }
            (HolderFaultKind::HolderCrash, Some(_)) => Err(format!(
                "`{text}`: a crash has no LENGTH (--restart starts the copy again); {usage}"
            )),
            _ => Ok(HolderFault { kind, at, length }),
        }
    }
}

/// One `--fault` of `observe`: on a copy while it holds a lock, or the run schedule's own —
/// on the server, `server-pause@AT+LENGTH` (SIGSTOP of the private server, SIGCONT after
/// LENGTH) and `server-restart@AT+LENGTH` (killed, started again empty); on the network
/// through the doors ([`super::network`]), `latency@AT+LENGTH,delay=…[,jitter=…]` and
/// `partition@AT+LENGTH` — driven by [`crate::faults::drive`] as in a run.
#[derive(Debug, Clone)]
pub enum ObserveFault {
    Holder(HolderFault),
    Server(crate::model::fault::Fault),
}

impl std::str::FromStr for ObserveFault {
    type Err = String;

    fn from_str(text: &str) -> Result<ObserveFault, String> {
        use crate::model::fault::{Fault, FaultKind};
        if text.starts_with("holder-") {
            return text.parse().map(ObserveFault::Holder);
        }
        let f: Fault = text.parse().map_err(|e| format!("`{text}`: {e}"))?;
        match f.kind {
            FaultKind::ServerPause
            | FaultKind::ServerRestart
            | FaultKind::Latency
            | FaultKind::Partition => Ok(ObserveFault::Server(f)),
            k => Err(format!(
                "`{text}`: observe's faults are holder-pause, holder-crash, server-pause, server-restart, latency and partition (`{k}` is not carried out by observe)"
            )),
        }
    }
}

/// How a fault went.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Struck {
    pub(crate) fault: HolderFaultKind,
    /// The copy struck (1-based), when one was.
    pub(crate) copy: Option<usize>,
    /// When it struck, s from the start.
    pub(crate) at_s: Option<f64>,
    pub(crate) length_s: Option<f64>,
    /// Why it did not strike, or what failed.
    pub(crate) problem: Option<String>,
}

/// A running copy as the faults reach it: its process id (0: not running), and a switch that
/// has its own task kill it at once (a `kill` process would take milliseconds to start, by
/// which time the copy may have released the lock it was struck for).
#[derive(Debug, Default)]
pub(crate) struct Slot {
    pub(crate) pid: AtomicU32,
    pub(crate) kill: tokio::sync::Notify,
}

/// The copies' slots, by copy.
pub(crate) type Pids = Arc<Vec<Slot>>;

/// Signals process group `pid` with `sig` (`-STOP`, `-CONT`, `-KILL`, `-TERM`).
pub(crate) async fn signal_group(pid: u32, sig: &str) -> Result<(), String> {
    // Group 0 is lockbench's own (and 1 not a copy's): never signalled.
    if pid <= 1 {
        return Err(format!(
            "kill {sig} -{pid}: no copy's process group (refused)"
        ));
    }
    let status = tokio::process::Command::new("kill")
        .args([sig, "--", &format!("-{pid}")])
        .stderr(std::process::Stdio::null())
        .status()
        .await
        .map_err(|e| format!("cannot run kill: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("kill {sig} -{pid} failed ({status})"))
    }
}

/// Applies `fault` to a copy holding a lock (copies are clients `0..copies`).
pub(crate) async fn apply(
    fault: HolderFault,
    ledger: Arc<Ledger>,
    pids: Pids,
    copies: usize,
    start: Instant,
) -> Struck {
    let mut struck = Struck {
        fault: fault.kind,
        copy: None,
        at_s: None,
        length_s: None,
        problem: None,
    };
    tokio::time::sleep_until((start + Duration::from_micros(fault.at.us())).into()).await;
    let (copy, pid) = loop {
        let (copy, pid) = holder(&ledger, &pids, copies).await;
        if fault.kind == HolderFaultKind::HolderCrash {
            // Frozen first, then killed only if it still holds once every request it sent
            // before the stop is answered: a `kill` takes milliseconds to start, in which a
            // running copy could release the lock it was struck for, and a release already
            // sent would end the hold after the kill.
            if signal_group(pid, "-STOP").await.is_ok() && holds_when_answered(&ledger, copy).await
            {
                break (copy, pid);
            }
            let _ = signal_group(pid, "-CONT").await;
            continue;
        }
        // A stopped copy sends nothing more: if it still holds once stopped and its hold does
        // not end while it is stopped, the pause struck a holder. A hold that ends meanwhile
        // was released by a request sent before the stop (read by the proxy, its reply not yet
        // back, or still in the socket): the copy is continued at once and another tried.
        let stopped_at = start.elapsed().as_secs_f64();
        if let Err(e) = signal_group(pid, "-STOP").await {
            struck.problem = Some(e);
            return struck;
        }
        let length = Duration::from_micros(fault.length.as_ref().map_or(0, |l| l.us()));
        let until = tokio::time::Instant::now() + length;
        let held_through = loop {
            // Woken at every event the ledger notes (acquisitions and releases alike).
            let woken = ledger.acquired.notified();
            if !ledger.holders().contains(&copy) {
                break false;
            }
            tokio::select! {
                _ = tokio::time::sleep_until(until) => break true,
                _ = woken => {}
            }
        };
        if held_through {
            struck.at_s = Some(stopped_at);
            struck.length_s = Some(length.as_secs_f64());
            break (copy, pid);
        }
        let _ = signal_group(pid, "-CONT").await;
    };
    struck.copy = Some(copy + 1);
    if struck.at_s.is_none() {
        struck.at_s = Some(start.elapsed().as_secs_f64());
    }
    let result = match fault.kind {
        HolderFaultKind::HolderPause => {
            // A copy killed meanwhile (a crash fault) has nothing left to continue.
            let alive = pids[copy].pid.load(Ordering::Relaxed) == pid;
            match signal_group(pid, "-CONT").await {
                Err(_) if !alive => Ok(()),
                r => r,
            }
        }
        HolderFaultKind::HolderCrash => {
            pids[copy].kill.notify_one();
            // What the copy started of its own (a shell's children) goes with it.
            let _ = signal_group(pid, "-KILL").await;
            Ok(())
        }
    };
    struck.problem = result.err();
    struck
}

/// Whether stopped `copy` holds a lock once each request it sent is read and answered (a
/// stopped copy sends no more; a release it sent just before the stop, still in its socket or
/// its reply on its way, may end its hold).
async fn holds_when_answered(ledger: &Ledger, copy: usize) -> bool {
    // A request the server keeps (a blocking pop) is not waited for past this.
    const PATIENCE: Duration = Duration::from_secs(1);
    let answered = async {
        loop {
            // Woken at every event the ledger notes, and when a client has no request left.
            let woken = ledger.acquired.notified();
            if !ledger.holders().contains(&copy) {
                return false;
            }
            if ledger.connections.settled(copy) {
                return true;
            }
            woken.await;
        }
    };
    match tokio::time::timeout(PATIENCE, answered).await {
        Ok(holds) => holds,
        Err(_) => ledger.holders().contains(&copy),
    }
}

/// A copy holding a lock now (the one holding longest), once there is one.
async fn holder(ledger: &Ledger, pids: &Pids, copies: usize) -> (usize, u32) {
    loop {
        let woken = ledger.acquired.notified();
        let holder = ledger
            .holders()
            .into_iter()
            .filter(|&c| c < copies)
            .map(|c| (c, pids[c].pid.load(Ordering::Relaxed)))
            .find(|&(_, pid)| pid != 0);
        if let Some(h) = holder {
            return h;
        }
        woken.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The grammar: a pause has a length, a crash none; anything else is refused with usage.
    #[test]
    fn faults_are_read_at_the_door() {
        let p: HolderFault = "holder-pause@2s+500ms".parse().unwrap();
        assert_eq!(p.kind, HolderFaultKind::HolderPause);
        assert_eq!((p.at.us(), p.length.unwrap().us()), (2_000_000, 500_000));
        let c: HolderFault = "holder-crash@1s".parse().unwrap();
        assert!(c.length.is_none());
        for bad in [
            "holder-pause@2s",
            "holder-crash@1s+1s",
            "server-pause@1s+1s",
            "holder-crash",
            "holder-crash@soon",
        ] {
            let e = bad.parse::<HolderFault>().unwrap_err();
            assert!(e.contains("holder-"), "{bad}: {e}");
        }
    }

    /// `observe --fault` takes a holder's fault or the server's (pause, restart); the
    /// schedule's other kinds are refused, naming the ones it takes.
    #[test]
    fn server_faults_are_the_schedule_s_own() {
        let f: ObserveFault = "server-pause@1s+300ms".parse().unwrap();
        assert!(
            matches!(f, ObserveFault::Server(f) if f.at_us == 1_000_000 && f.length_us == 300_000)
        );
        assert!(matches!(
            "holder-crash@1s".parse::<ObserveFault>(),
            Ok(ObserveFault::Holder(_))
        ));
        assert!("server-restart@1s+1s".parse::<ObserveFault>().is_ok());
        // The network kinds, carried out by the doors.
        for net in ["latency@1s+1s,delay=5ms", "partition@1s+1s"] {
            assert!(
                matches!(net.parse::<ObserveFault>(), Ok(ObserveFault::Server(f)) if f.kind.needs_proxy()),
                "{net}"
            );
        }
        for bad in [
            "latency@1s+1s",
            "server-pause@1s",
            "holder-pause@1s",
            "failover@1s+1s",
        ] {
            let e = bad.parse::<ObserveFault>().unwrap_err();
            assert!(
                e.contains(bad.split(['@', ',']).next().unwrap()),
                "{bad}: {e}"
            );
        }
        let e = "failover@1s+1s".parse::<ObserveFault>().unwrap_err();
        assert!(e.contains("server-restart, latency and partition"), "{e}");
    }
}
