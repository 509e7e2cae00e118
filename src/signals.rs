//! SIGINT, SIGTERM and SIGHUP, counted process-wide; and [`send`], a signal to another process.
//!
//! The three are one request to stop: Ctrl-C at the terminal, a service manager's stop, and the
//! terminal closing under a run (SIGHUP, whose default action ended lockbench at once with no
//! summary and the run's keys left on the server). The first signal asks a run to stop the way its own end does (sections finish or are cut
//! short, keys are removed, every file is written); the second abandons what is still waiting
//! on the server (in-flight commands, the resource read-back, the key cleanup) and writes the
//! files without it; the third exits on the spot, for a process stuck somewhere no run can see
//! the signal.
//!
//! Why a plain thread and not `tokio::signal`: a tokio signal stream belongs to the runtime
//! that made it, tests run many runtimes in one process, and the count must keep moving while
//! every task waits on a stalled server. A `watch` channel carries the count to async code.

use std::sync::{Once, OnceLock};
use tokio::sync::watch;

fn sender() -> &'static watch::Sender<u32> {
    static TX: OnceLock<watch::Sender<u32>> = OnceLock::new();
    TX.get_or_init(|| watch::channel(0).0)
}

/// Starts counting SIGINT, SIGTERM and SIGHUP (once per process) and returns a receiver of the count.
///
/// Until the first call the signals keep their default action (the process ends), which is
/// what commands that write nothing on the way out want.
pub(crate) fn subscribe() -> watch::Receiver<u32> {
    static START: Once = Once::new();
    START.call_once(|| {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        match signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) {
            Ok(mut signals) => {
                let spawned = std::thread::Builder::new()
                    .name("lockbench-signals".into())
                    .spawn(move || {
                        for _ in signals.forever() {
                            sender().send_modify(|n| *n += 1);
                            if *sender().borrow() >= 3 {
                                eprintln!("third signal: exiting now");
                                std::process::exit(130);
                            }
                        }
                    });
                if let Err(e) = spawned {
                    eprintln!("warning: cannot watch for Ctrl-C ({e}); Ctrl-C will end the process at once");
                }
            }
            Err(e) => {
                eprintln!("warning: cannot watch for Ctrl-C ({e}); Ctrl-C will end the process at once")
            }
        }
    });
    sender().subscribe()
}

/// What the signals received so far ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Request {
    /// Keep going.
    Continue,
    /// Stop as at the run's end.
    Stop,
    /// Stop now: do not wait for the server.
    Abandon,
}

/// The request behind a signal count.
pub(crate) fn request_of(count: u32) -> Request {
    match count {
        0 => Request::Continue,
        1 => Request::Stop,
        _ => Request::Abandon,
    }
}

/// Sends `sig` (`-STOP`, `-CONT`) to process `pid` with `kill`.
pub(crate) async fn send(pid: u32, sig: &str) -> Result<(), SignalError> {
    if pid <= 1 {
        return Err(SignalError::NoProcess {
            sig: sig.to_string(),
            pid,
        });
    }
    let status = tokio::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .await
        .map_err(|why| SignalError::Spawn {
            sig: sig.to_string(),
            pid,
            why,
        })?;
    if status.success() {
        Ok(())
    } else {
        Err(SignalError::Refused {
            sig: sig.to_string(),
            pid,
            status,
        })
    }
}

/// A signal [`send`] could not deliver: a failure (exit 1) of the fault or driver that sent it.
/// The `io::Error` is part of the message, not a source, so `{:#}` says it once.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SignalError {
    /// `kill` itself could not run.
    #[error("cannot run kill {sig} {pid}: {why}")]
    Spawn {
        sig: String,
        pid: u32,
        why: std::io::Error,
    },
    /// No process to signal: pid 0 (or 1) would name lockbench's own process group (or
    /// every process it may signal), never the one meant; refused before `kill` runs.
    #[error(
        "kill {sig} {pid}: no such process of lockbench's (refused: {pid} names a group, not a process)"
    )]
    NoProcess { sig: String, pid: u32 },
    /// `kill` ran and failed (no such process, not permitted).
    #[error("kill {sig} {pid} failed ({status})")]
    Refused {
        sig: String,
        pid: u32,
        status: std::process::ExitStatus,
    },
}

crate::exit::classify!(SignalError => Failed);
