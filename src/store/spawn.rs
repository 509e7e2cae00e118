//! A private `redis-server` child: free loopback port, no persistence, its own temporary
//! directory, stopped at the end — also after an error, Ctrl-C, SIGTERM or a SIGKILL of
//! lockbench itself.
//!
//! Why a watcher shell between lockbench and the server: a SIGKILLed process runs no code, so
//! the server must notice by itself that lockbench is gone. The watcher (`sh`, in its own
//! process group so a terminal's Ctrl-C reaches only lockbench) starts the server and then
//! reads its stdin, a pipe whose only writer is lockbench. When lockbench ends, however it
//! ends, the kernel closes the pipe, the read returns, and the watcher kills the server and
//! removes its directory. Setting a parent-death signal in the child would need `unsafe`
//! (`pre_exec`), which this crate forbids.

use crate::lines::{BoundedLines, LineError};
use anyhow::{Context, bail};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::BufReader;
use tokio::process::{Child, ChildStdin, Command};

/// A running private server.
pub struct SpawnedRedis {
    /// The watcher shell.
    child: Child,
    /// The watcher's stdin: dropping it stops the server.
    lifeline: Option<ChildStdin>,
    /// The server's own process id.
    pid: u32,
    port: u16,
    /// What started it, to start it again ([`SpawnedRedis::restart`]).
    exe: PathBuf,
    tls: Option<TlsFiles>,
    extra: Vec<String>,
}

/// A certificate and key (PEM) for a TLS-only server.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// Certificate (also used as the CA file).
    pub cert: PathBuf,
    /// Private key.
    pub key: PathBuf,
}

/// Whether `redis-server` can be found on `PATH`.
pub fn redis_server_available() -> bool {
    find_on_path("redis-server").is_some()
}

pub(crate) fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// What to do when `redis-server` is missing.
pub(crate) const INSTALL_HINT: &str = "redis-server was not found on PATH. Install it (Debian/Ubuntu: \
`apt-get install -y redis-server`), pass --redis URL for an existing server, or use \
--backend memory for the in-process model";

impl SpawnedRedis {
    /// Starts a server and waits until it logs that it accepts connections.
    pub async fn start() -> anyhow::Result<Self> {
        Self::start_with(None, &[]).await
    }

    /// Starts a server that listens only on TLS (for testing `rediss://`).
    pub async fn start_tls(tls: TlsFiles) -> anyhow::Result<Self> {
        Self::start_with(Some(tls), &[]).await
    }

    /// Starts a server with extra configuration arguments (e.g. `--rename-command GETDEL ""`
    /// to stand in for an older server in tests).
    pub async fn start_with_args(args: &[&str]) -> anyhow::Result<Self> {
        Self::start_with(None, args).await
    }

    /// Starts the server binary at `exe` (e.g. Valkey's `valkey-server`, another Redis build)
    /// instead of `redis-server` on PATH. A path that does not exist, cannot run, or is not a
    /// RESP server that becomes ready is a one-line error naming it.
    pub async fn start_exe(exe: &std::path::Path) -> anyhow::Result<Self> {
        check_server_binary(exe)?;
        // The binary the user named is no server: bad input (exit 2).
        Self::start_from(exe.to_path_buf(), None, &[])
            .await
            .map_err(|e| {
                anyhow::Error::new(crate::exit::BadInput(format!(
                    "{} did not start as a Redis server (give the path of a redis-server or \
                     valkey-server binary): {}",
                    exe.display(),
                    // One line, keeping the server's own last words (its reason).
                    format!("{e:#}")
                        .lines()
                        .map(str::trim)
                        .filter(|l| !l.is_empty())
                        .collect::<Vec<_>>()
                        .join(" ")
                )))
            })
    }

    /// Starts `exe` (`None`: `redis-server` on PATH) with extra configuration arguments: a
    /// node of a spawned cluster.
    pub async fn start_node(
        exe: Option<&std::path::Path>,
        extra: &[String],
    ) -> anyhow::Result<Self> {
        let exe = match exe {
            Some(e) => {
                check_server_binary(e)?;
                e.to_path_buf()
            }
            None => find_on_path("redis-server").context(INSTALL_HINT)?,
        };
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        Self::start_from(exe, None, &extra).await
    }

    async fn start_with(tls: Option<TlsFiles>, extra: &[&str]) -> anyhow::Result<Self> {
        let exe = find_on_path("redis-server").context(INSTALL_HINT)?;
        Self::start_from(exe, tls, extra).await
    }

    async fn start_from(
        exe: PathBuf,
        tls: Option<TlsFiles>,
        extra: &[&str],
    ) -> anyhow::Result<Self> {
        remove_stale_dirs();
        // The port is picked by the OS; another process could grab it before redis binds it,
        // in which case redis exits and we try a fresh one.
        // A server that stays silent is no port race: it is not tried again (five tries of a
        // wrapper that never becomes ready waited 50 s).
        let mut last_err = None;
        let extra: Vec<String> = extra.iter().map(|a| a.to_string()).collect();
        let t0 = std::time::Instant::now();
        let mut tries = 0;
        while tries < 5 {
            tries += 1;
            match Self::try_start(&exe, tls.as_ref(), &extra, None).await {
                Ok(s) => return Ok(s),
                Err(e) => {
                    let silent = e.is::<Silent>();
                    last_err = Some(e);
                    if silent {
                        break;
                    }
                }
            }
        }
        let e = last_err.unwrap_or_else(|| anyhow::anyhow!("redis-server did not start"));
        Err(match tries {
            1 => e,
            n => e.context(format!(
                "{n} tries on fresh ports, {:.1} s in all",
                t0.elapsed().as_secs_f64()
            )),
        })
    }

    async fn try_start(
        exe: &PathBuf,
        tls: Option<&TlsFiles>,
        extra: &[String],
        port: Option<u16>,
    ) -> anyhow::Result<Self> {
        let port = match port {
            Some(p) => p,
            None => std::net::TcpListener::bind("127.0.0.1:0")?
                .local_addr()?
                .port(),
        };
        let dir = std::env::temp_dir().join(format!(
            "lockbench-redis-{}-{port}-{}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let mut args: Vec<std::ffi::OsString> = Vec::new();
        let mut arg = |a: &dyn AsRef<std::ffi::OsStr>| args.push(a.as_ref().to_owned());
        match tls {
            None => ["--port", &port.to_string()].iter().for_each(|a| arg(a)),
            Some(t) => {
                for a in ["--port", "0", "--tls-port", &port.to_string()] {
                    arg(&a);
                }
                for a in ["--tls-auth-clients", "no"] {
                    arg(&a);
                }
                arg(&"--tls-cert-file");
                arg(&t.cert);
                arg(&"--tls-key-file");
                arg(&t.key);
                arg(&"--tls-ca-cert-file");
                arg(&t.cert);
            }
        }
        for a in [
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
        ] {
            arg(&a);
        }
        arg(&dir);
        for a in [
            "--logfile",
            "",
            "--daemonize",
            "no",
            "--loglevel",
            "notice",
            "--maxclients",
            "10000",
        ] {
            arg(&a);
        }
        for a in extra {
            arg(a);
        }
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(WATCHER)
            .arg("lockbench-redis-watcher")
            .arg(&dir)
            .arg(exe)
            .args(&args)
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("cannot start {} (through sh)", exe.display()))?;
        let lifeline = child.stdin.take();
        let stdout = child.stdout.take().context("no stdout from redis-server")?;
        // Bounded lines: a `--redis-server` wrapper printing one endless line is a line too long,
        // not a buffer growing until the machine runs out of memory.
        let mut lines = BoundedLines::new(BufReader::new(stdout));
        let mut seen = Vec::new();
        let mut pid = 0;
        // Ready when the server says so; the log line is the synchronisation, not a sleep.
        // `Ok(false)`: its output ended (it exited) before it was ready; `Err`: still silent
        // after 10 s.
        // The watcher's pid line and the server's own lines share one pipe, and on a loaded
        // machine the server's "Ready" can come first: ready means both, or a server pause
        // would signal pid 0 — lockbench's own process group.
        let ready = tokio::time::timeout(READY_WITHIN, async {
            let mut accepting = false;
            loop {
                let line = match lines.next_line().await {
                    Ok(Some(line)) => line,
                    Ok(None) | Err(LineError::Io(_)) => break,
                    Err(e @ LineError::TooLong(_)) => format!("({e})"),
                };
                if let Some(p) = line.strip_prefix(PID_LINE) {
                    pid = p.trim().parse().unwrap_or(0);
                } else {
                    accepting |= line.contains("Ready to accept connections");
                    seen.push(line);
                }
                if accepting && pid != 0 {
                    return true;
                }
            }
            false
        })
        .await;
        let server = Self {
            child,
            lifeline,
            pid,
            port,
            exe: exe.clone(),
            tls: tls.cloned(),
            extra: extra.to_vec(),
        };
        if ready != Ok(true) {
            let tail = seen
                .iter()
                .rev()
                .take(5)
                .rev()
                .cloned()
                .collect::<Vec<_>>()
                .join("\n");
            drop(server);
            let tail = if tail.trim().is_empty() {
                "(it printed nothing)".to_string()
            } else {
                tail
            };
            let name = exe.file_name().unwrap_or(exe.as_os_str()).to_string_lossy();
            if ready.is_err() {
                return Err(Silent(format!(
                    "{name} did not accept connections within {} s on port {port} (stopped \
                     with every process it started):\n{tail}",
                    READY_WITHIN.as_secs()
                ))
                .into());
            }
            bail!("{name} exited before it accepted connections on port {port}:\n{tail}");
        }
        // Keep draining its log so the pipe never fills and blocks the server.
        tokio::spawn(async move {
            while let Ok(Some(_)) | Err(LineError::TooLong(_)) = lines.next_line().await {}
        });
        Ok(server)
    }

    /// Kills the server and starts a new, empty one on the same port: a restart without
    /// persistence, as the fault schedule and the reconnect tests need.
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        self.kill().await;
        self.start_again().await
    }

    /// Kills the server (SIGKILL, through the watcher) and waits until it is gone: clients
    /// see connections refused until [`SpawnedRedis::start_again`].
    pub async fn kill(&mut self) {
        self.lifeline.take();
        let _ = self.child.wait().await;
    }

    /// Starts a new, empty server on the same port as the killed one (every key is lost, as
    /// after a restart without persistence). Nothing happens when it is still running.
    pub async fn start_again(&mut self) -> anyhow::Result<()> {
        if self.lifeline.is_some() {
            return Ok(());
        }
        let fresh = Self::try_start(&self.exe, self.tls.as_ref(), &self.extra, Some(self.port))
            .await
            .with_context(|| format!("restarting redis-server on port {}", self.port))?;
        *self = fresh;
        Ok(())
    }

    /// The loopback port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT` (or `rediss://…/#insecure` for a TLS server, whose
    /// self-signed certificate a client cannot verify).
    pub fn url(&self) -> String {
        if self.tls.is_some() {
            format!("rediss://127.0.0.1:{}/#insecure", self.port)
        } else {
            format!("redis://127.0.0.1:{}", self.port)
        }
    }

    /// Whether it runs (not between [`SpawnedRedis::kill`] and a start).
    pub fn is_running(&self) -> bool {
        self.lifeline.is_some()
    }

    /// The binary it runs.
    pub fn exe(&self) -> &std::path::Path {
        &self.exe
    }

    /// The server's process id (not the watcher's).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Stops the server and waits until the watcher has killed it and removed its directory.
    pub async fn stop(mut self) {
        self.lifeline.take();
        let _ = self.child.wait().await;
    }
}

impl Drop for SpawnedRedis {
    fn drop(&mut self) {
        // Closing the pipe is enough: the watcher kills the server (SIGKILL: nothing to
        // persist, and SIGTERM would wait ~100 ms) and removes the directory.
        self.lifeline.take();
    }
}

/// How long a starting server may take to say it accepts connections.
const READY_WITHIN: Duration = Duration::from_secs(10);

/// A server that neither became ready nor exited within [`READY_WITHIN`]: not a port taken
/// under it, so not tried again.
#[derive(Debug)]
struct Silent(String);

impl std::fmt::Display for Silent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Silent {}

/// Refuses a server binary that does not exist or is not an executable file, naming it.
pub(crate) fn check_server_binary(exe: &std::path::Path) -> anyhow::Result<()> {
    let meta = std::fs::metadata(exe)
        .map_err(|e| anyhow::anyhow!("server binary {}: {e}", exe.display()))?;
    use std::os::unix::fs::PermissionsExt;
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        anyhow::bail!(
            "server binary {}: not an executable file (give the path of redis-server or valkey-server)",
            exe.display()
        );
    }
    Ok(())
}

/// The first line the watcher prints: the server's process id.
const PID_LINE: &str = "lockbench-redis-pid ";

/// The watcher: `$1` is the server's directory, the rest is the server's command line. The
/// server runs in a session and process group of its own (`setsid`, where installed), and
/// every kill goes to the group: a wrapper script given as `--redis-server` takes its children
/// with it. A background reader waits on the pipe from lockbench (fd 3; a background job's own stdin is
/// /dev/null) and kills the server when it closes; the watcher waits for the server, then
/// kills what is left of its group, removes the reader and the directory. Its own stderr goes nowhere: lockbench may be gone,
/// and the shell's "Killed" notice would end it with SIGPIPE before the cleanup. SIGPIPE is
/// ignored from the first line: lockbench may give a start-up up (Ctrl-C) and close the
/// watcher's stdout before its first `echo`, which would otherwise end the watcher there and
/// leave the server's directory behind. A server that exits by itself (a port taken) ends
/// the watcher too, so its output closes and the start-up loop sees it. A kill of the group
/// that finds none goes to the server's process: a pipe closed right after the fork (a
/// start-up given up) is read before `setsid` has made the group, and a kill of the group
/// alone then missed it — the server started anyway and the watcher waited on it for ever
/// (found as an orphaned server after a test run). Only then: once the group was killed, the
/// watcher may reap the server and its pid be another's.
const WATCHER: &str = r#"dir=$1; shift
trap '' PIPE
exec 3<&0
if command -v setsid >/dev/null 2>&1; then
  group=-; setsid "$@" </dev/null 2>&1 3<&- &
else
  group=; "$@" </dev/null 2>&1 3<&- &
fi
pid=$!
echo "lockbench-redis-pid $pid"
exec 2>/dev/null
{ read -r _ <&3; kill -9 "$group$pid" || kill -9 "$pid"; } >/dev/null 2>&1 &
reader=$!
exec 3<&-
trap 'kill -9 "$group$pid" 2>/dev/null || kill -9 "$pid" 2>/dev/null' HUP INT TERM
wait "$pid"; wait "$pid" 2>/dev/null
kill -9 "$group$pid" 2>/dev/null
kill "$reader" 2>/dev/null
rm -rf "$dir""#;

/// Removes the directories of servers whose lockbench is gone without its watcher having
/// cleaned up (a watcher killed with it, or a lockbench older than the watcher), and of a
/// library's watch sockets (`lockbench-watch-<pid>-…`) whose lockbench was killed.
pub(crate) fn remove_stale_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| {
            n.strip_prefix("lockbench-redis-")
                .or_else(|| n.strip_prefix("lockbench-watch-"))
        }) else {
            continue;
        };
        let owner = rest.split('-').next().and_then(|p| p.parse::<u32>().ok());
        if let Some(pid) = owner
            && !std::path::Path::new(&format!("/proc/{pid}")).exists()
        {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead;
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;

    /// The lifeline closed between the watcher's fork and the server's own session (`setsid`
    /// made slow here, by a `setsid` first on PATH that waits before it runs the real one):
    /// the server must not start, and the watcher must end. Before the fix the reader's kill of
    /// a group that did not exist yet missed, the server started and the watcher waited on it.
    #[test]
    fn a_lifeline_closed_before_the_server_has_its_own_group_still_kills_it() {
        let real = ["/usr/bin/setsid", "/bin/setsid"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
            .expect("setsid (util-linux) installed");
        let tmp = tempfile::tempdir().unwrap();
        let bin = tmp.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let script = |path: &std::path::Path, text: &str| {
            std::fs::write(path, text).unwrap();
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
        };
        script(
            &bin.join("setsid"),
            &format!("#!/bin/sh\nsleep 3\nexec {real} \"$@\"\n"),
        );
        let started = tmp.path().join("started");
        let server = tmp.path().join("server.sh");
        script(&server, "#!/bin/sh\necho $$ > \"$1\"\nexec sleep 60\n");
        let dir = tmp.path().join("server-dir");
        std::fs::create_dir(&dir).unwrap();
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut watcher = std::process::Command::new("sh")
            .arg("-c")
            .arg(WATCHER)
            .arg("lockbench-redis-watcher")
            .arg(&dir)
            .arg(&server)
            .arg(&started)
            .env("PATH", path)
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut out = std::io::BufReader::new(watcher.stdout.take().unwrap());
        let mut first = String::new();
        out.read_line(&mut first).unwrap();
        assert!(first.starts_with(PID_LINE), "{first:?}");
        // The start-up given up at once: the lifeline closes while setsid still waits.
        drop(watcher.stdin.take());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let ended = loop {
            if let Some(status) = watcher.try_wait().unwrap() {
                break Some(status);
            }
            if std::time::Instant::now() > deadline {
                break None;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        // A server that started at all (a machine too slow to act on the lifeline within the
        // slow setsid's 3 s) must be gone too.
        let server_pid = std::fs::read_to_string(&started).ok();
        let running = server_pid
            .as_ref()
            .is_some_and(|p| std::path::Path::new(&format!("/proc/{}", p.trim())).exists());
        if ended.is_none() {
            let _ = watcher.kill();
        }
        if let Some(p) = &server_pid {
            let _ = std::process::Command::new("kill")
                .args(["-9", p.trim()])
                .status();
        }
        assert!(ended.is_some(), "the watcher still waits on its server");
        assert!(!running, "the server runs after its lifeline closed");
        assert!(!dir.exists(), "the server's directory is left");
    }
}
