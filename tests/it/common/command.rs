//! The command builder for the real binary: `lockbench(&["run", …]).out(dir).ok()`.
//!
//! Every command has a time limit (a hung run fails its test, naming the command, instead of
//! hanging the suite), holds a share of the CPU gate while it runs, and a [`Running`] child is
//! killed when dropped — also when an assertion failed while it ran.

use super::gate::{Shared, shared};
use std::ffi::OsStr;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

/// What a command may take by default: far more than any test's run, so only a hang hits it.
const LIMIT: Duration = Duration::from_secs(600);

/// A `lockbench` command line under construction.
pub struct Lockbench {
    cmd: Command,
    limit: Duration,
}

/// `lockbench ARGS…`, to be completed and run.
pub fn lockbench<S: AsRef<OsStr>>(args: &[S]) -> Lockbench {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lockbench"));
    cmd.args(args);
    Lockbench { cmd, limit: LIMIT }
}

impl Lockbench {
    /// `lockbench` without arguments yet.
    pub fn new() -> Self {
        lockbench::<&str>(&[])
    }

    /// One more argument.
    pub fn arg(mut self, a: impl AsRef<OsStr>) -> Self {
        self.cmd.arg(a);
        self
    }

    /// More arguments.
    pub fn args<S: AsRef<OsStr>>(mut self, a: impl IntoIterator<Item = S>) -> Self {
        self.cmd.args(a);
        self
    }

    /// `--out DIR`.
    pub fn out(self, dir: impl AsRef<Path>) -> Self {
        self.arg("--out").arg(dir.as_ref())
    }

    /// An environment variable of the child (never of this process).
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.cmd.env(key, value);
        self
    }

    /// Removes an environment variable from the child's environment (never this process's).
    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> Self {
        self.cmd.env_remove(key);
        self
    }

    /// The child in a process group of its own (as a shell starts a foreground job), so that a
    /// signal to the group is a terminal's Ctrl-C to it and its children, not to the tests.
    pub fn own_group(mut self) -> Self {
        use std::os::unix::process::CommandExt;
        self.cmd.process_group(0);
        self
    }

    /// The child's working directory (never this process's).
    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.cmd.current_dir(dir);
        self
    }

    /// The child's stdout for [`Lockbench::spawn`] (`output` captures both outputs).
    pub fn stdout(mut self, s: Stdio) -> Self {
        self.cmd.stdout(s);
        self
    }

    /// The child's stderr for [`Lockbench::spawn`] (`output` captures both outputs).
    pub fn stderr(mut self, s: Stdio) -> Self {
        self.cmd.stderr(s);
        self
    }

    /// The longest the command may run before it is killed and the test fails (by default
    /// [`LIMIT`], which only a hang reaches).
    #[allow(
        dead_code,
        reason = "for a command that must end sooner; no test needs one yet"
    )]
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.limit = limit;
        self
    }

    /// Runs the command to its end and returns its exit status and outputs; fails the test if
    /// it cannot start or outlives its time limit (killed first).
    pub fn output(mut self) -> Output {
        let cpu = shared();
        let what = format!("{:?}", self.cmd);
        let child = self
            .cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
        let pid = child.id();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        let out = match rx.recv_timeout(self.limit) {
            Ok(out) => out.unwrap_or_else(|e| panic!("{what}: {e}")),
            Err(_) => {
                signal("-KILL", pid);
                panic!("{what} still running after {:?}: killed", self.limit);
            }
        };
        drop(cpu);
        out
    }

    /// As [`Lockbench::output`], after checking that it exited 0 (showing its outputs if not).
    pub fn ok(self) -> Output {
        let o = self.output();
        assert!(
            o.status.success(),
            "exit {:?}\nstdout:\n{}\nstderr:\n{}",
            o.status.code(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        o
    }

    /// Starts the command; the [`Running`] guard kills it if it is still running when dropped.
    pub fn spawn(mut self) -> Running {
        let cpu = shared();
        let child = self.cmd.spawn().expect("start lockbench");
        Running { child, _cpu: cpu }
    }
}

impl Default for Lockbench {
    fn default() -> Self {
        Self::new()
    }
}

/// A `lockbench` child process (derefs to [`Child`]), killed and reaped when dropped if it is
/// still running.
pub struct Running {
    child: Child,
    _cpu: Shared,
}

impl Running {
    /// Waits for the child's exit and collects its piped outputs ([`Child::wait_with_output`]).
    pub fn wait_with_output(mut self) -> Output {
        use std::io::Read;
        // Both pipes are read at once (as `wait_with_output` does), so that neither fills.
        let err = self.child.stderr.take().map(|mut e| {
            std::thread::spawn(move || {
                let mut b = Vec::new();
                let _ = e.read_to_end(&mut b);
                b
            })
        });
        let mut stdout = Vec::new();
        if let Some(mut o) = self.child.stdout.take() {
            o.read_to_end(&mut stdout).expect("read lockbench's stdout");
        }
        let stderr = err.map(|t| t.join().unwrap()).unwrap_or_default();
        let status = self.child.wait().expect("wait for lockbench");
        Output {
            status,
            stdout,
            stderr,
        }
    }

    /// Waits at most `limit` for the child's exit: its exit code, or `None` if it is still
    /// running then (or ended by a signal).
    pub fn exit_code_within(&mut self, limit: Duration) -> Option<i32> {
        let t0 = std::time::Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for lockbench") {
                return status.code();
            }
            if t0.elapsed() > limit {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl std::ops::Deref for Running {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.child
    }
}

impl std::ops::DerefMut for Running {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.child
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Sends signal `sig` (`-INT`, `-STOP`, …) to process `pid` with kill(1); fails if it cannot.
pub fn signal(sig: &str, pid: u32) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("run kill")
        .success();
    assert!(ok, "kill {sig} {pid}");
}
