//! [`Server`]: a private redis-server that is stopped when the guard is dropped — also when an
//! assertion failed first, and also when the test had stopped it (SIGSTOP): it is continued,
//! then killed.

use super::gate::{Shared, shared};
use lockbench::SpawnedRedis;
use std::ops::{Deref, DerefMut};

/// A private redis-server started by a test (derefs to [`SpawnedRedis`]).
pub struct Server {
    inner: Option<SpawnedRedis>,
    _cpu: Shared,
}

impl Server {
    /// Waits for `start` (one of `SpawnedRedis`'s starts); fails with the install hint when
    /// `redis-server` is not on PATH, and with the start's error when it does not start.
    pub async fn start(start: impl Future<Output = anyhow::Result<SpawnedRedis>>) -> Server {
        super::need_redis_server();
        let cpu = shared();
        let server = start
            .await
            .unwrap_or_else(|e| panic!("start a private server: {e:#}"));
        Server {
            inner: Some(server),
            _cpu: cpu,
        }
    }

    /// Stops the server now and waits until it has exited ([`SpawnedRedis::stop`]).
    pub async fn stop(mut self) {
        let server = self.inner.take().expect("a server");
        continue_if_stopped(server.pid());
        server.stop().await;
    }
}

impl Deref for Server {
    type Target = SpawnedRedis;
    fn deref(&self) -> &SpawnedRedis {
        self.inner.as_ref().expect("a server")
    }
}

impl DerefMut for Server {
    fn deref_mut(&mut self) -> &mut SpawnedRedis {
        self.inner.as_mut().expect("a server")
    }
}

/// The state letter of process `pid` (`R`, `S`, `T` stopped, `Z` dead but not reaped …) from
/// `/proc/PID/stat`; `None` when there is no such process.
fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state …`; comm may contain spaces and parentheses: the state follows the last ')'.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next())
}

/// Whether process `pid` is stopped (`T`) or traced (`t`).
fn stopped(pid: u32) -> bool {
    matches!(state(pid), Some('T' | 't'))
}

/// Sends SIGCONT to `pid` if it is stopped, so that it can run to its end.
fn continue_if_stopped(pid: u32) {
    if pid != 0 && stopped(pid) {
        super::signal("-CONT", pid);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let Some(server) = self.inner.take() else {
            return;
        };
        let pid = server.pid();
        // A server the test stopped (and did not continue, as after a failed assertion) is
        // continued first, then killed here rather than left to the watcher: it is gone when
        // the guard is.
        continue_if_stopped(pid);
        if pid != 0 && server.is_running() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .stderr(std::process::Stdio::null())
                .status();
            // SIGKILL is delivered when the process next runs: wait (10 s at most, never a
            // panic while unwinding) until it is dead, reaped or not.
            let t0 = std::time::Instant::now();
            while matches!(state(pid), Some(s) if s != 'Z' && s != 'X')
                && t0.elapsed() < std::time::Duration::from_secs(10)
            {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        // Closes the watcher's pipe: the watcher reaps the server and removes its directory.
        drop(server);
    }
}
