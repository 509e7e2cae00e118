//! A private Redis Cluster: `masters × (1 + replicas)` servers on free loopback ports, no
//! persistence, joined with `redis-cli --cluster create`, all stopped at the end (each node
//! is a [`SpawnedRedis`], with its watcher). Each node's cluster configuration file lives in
//! the cluster's own directory, so a node killed by a fault comes back as the same node and
//! rejoins the cluster (as a replica of whoever took its slots), empty. That directory has a
//! watcher of its own, as each server's has: a SIGKILL of lockbench leaves no `nodes-*.conf`
//! behind in the temporary folder.

use super::spawn::{INSTALL_HINT, SpawnedRedis, find_on_path, remove_stale_dirs};
use anyhow::{Context, bail};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::time::Instant;

/// A running private cluster.
pub struct SpawnedCluster {
    nodes: Vec<SpawnedRedis>,
    dir: PathBuf,
    /// The stdin of the shell that removes `dir` once lockbench is gone, however it went.
    _dir_lifeline: Option<tokio::process::ChildStdin>,
    masters: usize,
    replicas: usize,
}

/// How long a node may go unanswered before the others flag it. The `failover` fault does not
/// wait for it (it promotes with `TAKEOVER`), so it is long: a loaded 2-core machine must not
/// make the cluster flag a node, or fail one over, by itself, nor flag a replica stopped for a
/// fault's lag.
const NODE_TIMEOUT_MS: u32 = 5000;

impl SpawnedCluster {
    /// Starts the nodes, creates the cluster and waits until every node serves all 16384 slots
    /// and every replica is in sync with its master.
    pub async fn start(
        exe: Option<&Path>,
        masters: usize,
        replicas: usize,
    ) -> anyhow::Result<Self> {
        if masters < 3 {
            bail!("a Redis Cluster needs at least 3 masters (cluster_masters = {masters})");
        }
        let cli = cli_for(exe)?;
        remove_stale_dirs();
        let dir = std::env::temp_dir().join(format!(
            "lockbench-redis-{}-cluster-{}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let dir_lifeline = watch_dir(&dir)?;
        let mut cluster = Self {
            nodes: Vec::new(),
            dir,
            _dir_lifeline: dir_lifeline,
            masters,
            replicas,
        };
        for i in 0..masters * (1 + replicas) {
            let conf = cluster.dir.join(format!("nodes-{i}.conf"));
            let args = vec![
                "--cluster-enabled".to_string(),
                "yes".to_string(),
                "--cluster-config-file".to_string(),
                conf.display().to_string(),
                "--cluster-node-timeout".to_string(),
                NODE_TIMEOUT_MS.to_string(),
                // A replica's first sync starts at once, not after the default 5 s wait for
                // more replicas to share a diskless transfer.
                "--repl-diskless-sync-delay".to_string(),
                "0".to_string(),
            ];
            cluster
                .nodes
                .push(SpawnedRedis::start_node(exe, &args).await?);
        }
        let mut create = tokio::process::Command::new(&cli);
        create.arg("--cluster").arg("create");
        for n in &cluster.nodes {
            create.arg(format!("127.0.0.1:{}", n.port()));
        }
        create
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdin(Stdio::null())
            .kill_on_drop(true);
        let out = tokio::time::timeout(Duration::from_secs(60), create.output())
            .await
            .context("redis-cli --cluster create did not finish within 60 s")?
            .with_context(|| format!("cannot run {}", cli.display()))?;
        if !out.status.success() {
            let text = String::from_utf8_lossy(&out.stdout);
            let tail: Vec<&str> = text.lines().rev().take(5).collect();
            bail!(
                "{} --cluster create failed ({}): {}",
                cli.display(),
                out.status,
                tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
            );
        }
        cluster.settle().await?;
        Ok(cluster)
    }

    /// Waits until every node says `cluster_state:ok` with all slots served and knows every
    /// other node, and every replica's link to its master is up.
    pub async fn settle(&self) -> anyhow::Result<()> {
        let deadline = Instant::now() + super::cluster::SETTLE;
        let n = self.nodes.len();
        loop {
            let mut why = None;
            for node in self.nodes.iter().filter(|n| n.is_running()) {
                let url = node.url();
                match settled(&url, n).await {
                    Ok(None) => {}
                    Ok(Some(w)) => {
                        why = Some(format!("127.0.0.1:{}: {w}", node.port()));
                        break;
                    }
                    Err(e) => {
                        why = Some(format!("127.0.0.1:{}: {e:#}", node.port()));
                        break;
                    }
                }
            }
            let Some(why) = why else { return Ok(()) };
            if Instant::now() > deadline {
                bail!(
                    "the spawned cluster did not settle within {} s: {why}",
                    super::cluster::SETTLE.as_secs()
                );
            }
            // Polling the cluster's own state: gossip has no event to wait on.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Seed URLs: every node.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(SpawnedRedis::url).collect()
    }

    /// `3 masters × 1 replica`.
    pub fn describe(&self) -> String {
        format!(
            "{} master{} × {} replica{}",
            self.masters,
            if self.masters == 1 { "" } else { "s" },
            self.replicas,
            if self.replicas == 1 { "" } else { "s" }
        )
    }

    /// The node listening on `port`.
    pub fn node_mut(&mut self, port: u16) -> Option<&mut SpawnedRedis> {
        self.nodes.iter_mut().find(|n| n.port() == port)
    }

    /// The binary its nodes run.
    pub fn exe(&self) -> Option<&Path> {
        self.nodes.first().map(SpawnedRedis::exe)
    }

    /// Stops every node and removes the cluster's directory.
    pub async fn stop(mut self) {
        for n in std::mem::take(&mut self.nodes) {
            n.stop().await;
        }
        // Drop removes the directory.
    }
}

impl Drop for SpawnedCluster {
    fn drop(&mut self) {
        // The nodes first: their watchers kill them as their handles drop (asynchronously; a
        // directory a dying node still wrote into is removed by the next start's stale-directory
        // sweep, its owner being gone by then).
        self.nodes.clear();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The cluster directory's watcher (`sh`, in its own process group so that a terminal's Ctrl-C
/// reaches only lockbench): it reads its stdin, a pipe whose only writer is lockbench, and
/// removes the directory when the pipe closes — at the cluster's drop, or when lockbench ends
/// however it ends (a SIGKILL runs no code of lockbench's). Its nodes are being killed by their
/// own watchers meanwhile; a node killed with SIGKILL writes no configuration on its way out.
/// Returns the pipe to keep.
fn watch_dir(dir: &Path) -> anyhow::Result<Option<tokio::process::ChildStdin>> {
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(r#"trap '' PIPE HUP INT; read -r _; rm -rf "$1""#)
        .arg("lockbench-cluster-dir-watcher")
        .arg(dir)
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("cannot start the watcher of {} (sh)", dir.display()))?;
    let lifeline = child.stdin.take();
    // Not awaited: it ends by itself once the pipe closes (tokio reaps it).
    drop(child);
    Ok(lifeline)
}

/// `redis-cli` (or `valkey-cli`) beside the server binary, else `redis-cli` on PATH.
fn cli_for(exe: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(dir) = exe.and_then(Path::parent) {
        for name in ["redis-cli", "valkey-cli"] {
            let p = dir.join(name);
            if p.is_file() {
                return Ok(p);
            }
        }
    }
    find_on_path("redis-cli").with_context(|| {
        format!(
            "redis-cli was not found on PATH; a spawned cluster is created with it \
             (Debian/Ubuntu: apt-get install -y redis-tools). {INSTALL_HINT}"
        )
    })
}

/// `None` when the node at `url` has settled, else what it still lacks.
async fn settled(url: &str, nodes: usize) -> anyhow::Result<Option<String>> {
    let client = redis::Client::open(url)?;
    let mut c = client.get_multiplexed_async_connection().await?;
    let info: String = redis::cmd("CLUSTER")
        .arg("INFO")
        .query_async(&mut c)
        .await?;
    let field = super::redis::info_field;
    if field(&info, "cluster_state:") != Some("ok") {
        return Ok(Some("cluster_state is not ok".into()));
    }
    if field(&info, "cluster_slots_ok:") != Some("16384") {
        return Ok(Some("not every slot is served".into()));
    }
    if field(&info, "cluster_known_nodes:") != Some(nodes.to_string().as_str()) {
        return Ok(Some(format!("does not know all {nodes} nodes yet")));
    }
    let repl: String = redis::cmd("INFO")
        .arg("replication")
        .query_async(&mut c)
        .await?;
    if field(&repl, "role:") == Some("slave") && field(&repl, "master_link_status:") != Some("up") {
        return Ok(Some("its replication link is not up".into()));
    }
    Ok(None)
}
