//! A private `redis-server` child: free loopback port, no persistence, its own temporary
//! directory, killed when dropped (so also after an error or Ctrl-C).

use anyhow::{Context, bail};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// A running private server.
pub struct SpawnedRedis {
    child: Child,
    port: u16,
    dir: PathBuf,
    tls: bool,
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

fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// What to do when `redis-server` is missing.
pub const INSTALL_HINT: &str = "redis-server was not found on PATH. Install it (Debian/Ubuntu: \
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

    async fn start_with(tls: Option<TlsFiles>, extra: &[&str]) -> anyhow::Result<Self> {
        let exe = find_on_path("redis-server").context(INSTALL_HINT)?;
        // The port is picked by the OS; another process could grab it before redis binds it,
        // in which case redis exits and we try a fresh one.
        let mut last_err = None;
        for _ in 0..5 {
            match Self::try_start(&exe, tls.as_ref(), extra).await {
                Ok(s) => return Ok(s),
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err.unwrap_or_else(|| anyhow::anyhow!("redis-server did not start")))
    }

    async fn try_start(
        exe: &PathBuf,
        tls: Option<&TlsFiles>,
        extra: &[&str],
    ) -> anyhow::Result<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let dir = std::env::temp_dir().join(format!(
            "lockbench-redis-{}-{port}-{}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let mut cmd = Command::new(exe);
        match tls {
            None => cmd.args(["--port", &port.to_string()]),
            Some(t) => cmd
                .args([
                    "--port",
                    "0",
                    "--tls-port",
                    &port.to_string(),
                    "--tls-auth-clients",
                    "no",
                ])
                .arg("--tls-cert-file")
                .arg(&t.cert)
                .arg("--tls-key-file")
                .arg(&t.key)
                .arg("--tls-ca-cert-file")
                .arg(&t.cert),
        };
        let mut child = cmd
            .args(["--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .args(["--logfile", "", "--daemonize", "no", "--loglevel", "notice"])
            .args(["--maxclients", "10000"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start {}", exe.display()))?;
        let stdout = child.stdout.take().context("no stdout from redis-server")?;
        let mut lines = BufReader::new(stdout).lines();
        let mut seen = Vec::new();
        // Ready when the server says so; the log line is the synchronisation, not a sleep.
        let ready = tokio::time::timeout(Duration::from_secs(10), async {
            while let Ok(Some(line)) = lines.next_line().await {
                let ok = line.contains("Ready to accept connections");
                seen.push(line);
                if ok {
                    return true;
                }
            }
            false
        })
        .await
        .unwrap_or(false);
        let server = Self {
            child,
            port,
            dir,
            tls: tls.is_some(),
        };
        if !ready {
            let tail = seen
                .iter()
                .rev()
                .take(5)
                .rev()
                .cloned()
                .collect::<Vec<_>>()
                .join("\n");
            drop(server);
            bail!("redis-server did not become ready on port {port}:\n{tail}");
        }
        // Keep draining its log so the pipe never fills and blocks the server.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(server)
    }

    /// The loopback port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT` (or `rediss://…/#insecure` for a TLS server, whose
    /// self-signed certificate a client cannot verify).
    pub fn url(&self) -> String {
        if self.tls {
            format!("rediss://127.0.0.1:{}/#insecure", self.port)
        } else {
            format!("redis://127.0.0.1:{}", self.port)
        }
    }

    /// Kills the server and waits for it to exit.
    pub async fn stop(mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }
}

impl Drop for SpawnedRedis {
    fn drop(&mut self) {
        // SIGKILL: nothing to persist, and SIGTERM would wait ~100 ms.
        let _ = self.child.start_kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
