//! The copies of the user's program that `lockbench observe -- CMD ARGS…` starts: each with
//! its own door's address in `REDIS_URL`, `REDIS_HOST` and `REDIS_PORT`, its output kept in
//! the results directory (`copy-N.out`, `copy-N.err`, appended across restarts), started again
//! when it exits if asked, and stopped at the run's end (SIGTERM, then SIGKILL after
//! [`GRACE`]). A copy's exit while it holds a lock ends those holds as crashes.

use super::faults::signal_group;
use super::ledger::Ledger;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// How long a copy has to exit after SIGTERM before it is killed.
const GRACE: Duration = Duration::from_secs(3);

/// How one copy ran.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub(crate) struct CopyRecord {
    /// 1-based, as in its files' names.
    pub(crate) copy: usize,
    /// Times it was started.
    pub(crate) starts: u32,
    /// Each exit before the run's end: its status as the shell shows it, and when (s).
    pub(crate) exits: Vec<(String, f64)>,
    /// A start that failed (the command not found, …).
    pub(crate) failed_to_start: Option<String>,
    /// It was still running at the end and was stopped.
    pub(crate) stopped_at_end: bool,
}

/// What starting a copy needs.
#[derive(Debug, Clone)]
pub(crate) struct Program {
    pub(crate) argv: Vec<String>,
    pub(crate) dir: PathBuf,
    pub(crate) restart: bool,
}

/// Runs copy `copy` (0-based; client `copy` in the ledger) with `url` until it exits (and is
/// not restarted) or `stop` turns true.
pub(crate) async fn run_copy(
    program: Arc<Program>,
    copy: usize,
    url: String,
    (ledger, pids): (Arc<Ledger>, super::faults::Pids),
    start: Instant,
    mut stop: watch::Receiver<bool>,
) -> CopyRecord {
    let mut rec = CopyRecord {
        copy: copy + 1,
        ..CopyRecord::default()
    };
    let (host, port) = host_port(&url);
    loop {
        if *stop.borrow() {
            return rec;
        }
        let mut cmd = tokio::process::Command::new(&program.argv[0]);
        cmd.args(&program.argv[1..])
            .env("REDIS_URL", &url)
            .env("REDIS_HOST", &host)
            .env("REDIS_PORT", &port)
            .env("LOCKBENCH_COPY", (copy + 1).to_string())
            .stdin(Stdio::null())
            // A group of its own: a fault or the end reaches what it starts (a shell's
            // children), and the terminal's Ctrl-C reaches lockbench alone, which stops it.
            .process_group(0)
            .kill_on_drop(true);
        match (
            output(&program.dir, copy, "out"),
            output(&program.dir, copy, "err"),
        ) {
            (Ok(o), Ok(e)) => {
                cmd.stdout(o).stderr(e);
            }
            (Err(e), _) | (_, Err(e)) => {
                rec.failed_to_start = Some(format!("cannot write its output: {e}"));
                return rec;
            }
        }
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                rec.failed_to_start = Some(format!("`{}`: {e}", program.argv[0]));
                return rec;
            }
        };
        rec.starts += 1;
        pids[copy]
            .pid
            .store(child.id().unwrap_or(0), Ordering::Relaxed);
        let exited = async {
            loop {
                tokio::select! {
                    status = child.wait() => return status,
                    () = pids[copy].kill.notified() => {
                        let _ = child.start_kill();
                    }
                }
            }
        };
        tokio::select! {
            status = exited => {
                pids[copy].pid.store(0, Ordering::Relaxed);
                let at = Instant::now();
                ledger.gone(copy, at);
                let shown = status.map_or_else(|e| e.to_string(), |s| s.to_string());
                rec.exits.push((shown, at.saturating_duration_since(start).as_secs_f64()));
                if !program.restart {
                    return rec;
                }
            }
            () = async { let _ = stop.wait_for(|s| *s).await; } => {
                rec.stopped_at_end = true;
                terminate(&mut child).await;
                return rec;
            }
        }
    }
}

/// SIGTERM to its process group, then SIGKILL if it has not exited within [`GRACE`]; a
/// stopped copy (a pause) is continued so it can see the SIGTERM.
async fn terminate(child: &mut tokio::process::Child) {
    if let Some(pid) = child.id() {
        let _ = signal_group(pid, "-TERM").await;
        let _ = signal_group(pid, "-CONT").await;
        if tokio::time::timeout(GRACE, child.wait()).await.is_ok() {
            return;
        }
        let _ = signal_group(pid, "-KILL").await;
    }
    let _ = child.kill().await;
}

/// `copy-N.out` / `copy-N.err` in `dir`, appended to.
fn output(dir: &Path, copy: usize, ext: &str) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("copy-{}.{ext}", copy + 1)))
}

/// The host and port of a `redis://host:port…` URL.
fn host_port(url: &str) -> (String, String) {
    match url::Url::parse(url) {
        Ok(u) => (
            u.host_str().unwrap_or("127.0.0.1").to_string(),
            u.port().unwrap_or(6379).to_string(),
        ),
        Err(_) => ("127.0.0.1".into(), "6379".into()),
    }
}
