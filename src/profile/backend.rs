//! The backend part of a profile's validation: which store, how it is reached (URL, cluster,
//! connection mode) and the binaries of private servers, checked into a [`BackendPlan`].

use super::check::Check;
use super::{Profile, ProfileError, ser_redacted};
use crate::model::units;
use serde::Serialize;

/// Where the lock store is and how it is reached. (Here, not in `crate::model::plan`: its
/// URLs are written redacted by `crate::target`, and a redlock plan is `crate::quorum`'s.)
#[derive(Debug, Clone, Serialize)]
pub struct BackendPlan {
    /// Backend.
    #[serde(rename = "backend")]
    pub kind: BackendChoice,
    /// Connection mode.
    pub connection: ConnectionMode,
    /// Whether a server given by URL is a cluster node.
    pub cluster: ClusterMode,
    /// Masters of a spawned cluster.
    pub cluster_masters: usize,
    /// Replicas per master of a spawned cluster.
    pub cluster_replicas: usize,
    /// Redis URL, only ever stored redacted.
    #[serde(serialize_with = "ser_redacted")]
    pub redis: Option<String>,
    /// Where the protected resource lives, as given: a Redis URL (stored redacted), `shared`
    /// (on the lock's store), or `None` (a store of its own that lockbench starts).
    #[serde(serialize_with = "ser_redacted")]
    pub resource_redis: Option<String>,
    /// Server binaries the spawn backend starts, one per server of a compare (empty:
    /// `redis-server` on PATH).
    pub redis_servers: Vec<std::path::PathBuf>,
    /// Memory model round trip, µs.
    pub memory_rtt_us: u64,
    /// Redlock over N instances (`lock = "redlock"`); `None`: one server.
    pub redlock: Option<crate::quorum::RedlockPlan>,
    /// Non-loopback targets allowed. Only the `--allow-remote` flag sets it, never a profile,
    /// so a shared profile cannot aim lockbench at a production server.
    pub allow_remote: bool,
}

/// One connection per worker, or one multiplexed connection shared by all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConnectionMode {
    /// Independent clients, each with its own socket.
    PerWorker,
    /// One service process: all workers pipeline over one socket.
    Shared,
}

impl ConnectionMode {
    /// Name used in profiles and reports.
    pub fn name(self) -> String {
        super::spelling(&self)
    }
}

/// Where the lock store is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BackendChoice {
    /// `spawn` if `redis-server` is on PATH, else `memory` with a notice.
    Auto,
    /// A private `redis-server` child.
    Spawn,
    /// An existing server.
    Url,
    /// The in-process model.
    Memory,
    /// The in-process model on a virtual clock: a discrete-event simulation.
    Sim,
    /// A private Redis Cluster lockbench starts (`cluster_masters` × (1 + `cluster_replicas`)
    /// servers).
    SpawnCluster,
}

/// Whether a server given by URL is a Redis Cluster node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClusterMode {
    /// Asked of the server (`INFO cluster`).
    Auto,
    /// A cluster node: lockbench connects to the cluster it belongs to.
    Yes,
    /// One server, even if it runs in cluster mode.
    No,
}

impl Profile {
    /// The backend's fields, checked (the redlock part is [`Profile::plan_redlock`]'s).
    pub(super) fn plan_backend(&self, cx: &Check<'_>) -> Result<BackendPlan, ProfileError> {
        let connection = self.connection();
        // Unset, the backend follows what is given: a server binary is spawned, a URL reached.
        let backend = match &self.backend {
            None if self.redis_server.is_some() => BackendChoice::Spawn,
            None if self.redis.is_some() => BackendChoice::Url,
            _ => self.backend(),
        };
        // A URL names the server to measure; any other backend measures one lockbench starts
        // (or none), and would leave the URL unused without a word.
        if self.redis.is_some() && backend != BackendChoice::Url {
            return Err(match &self.backend {
                Some(b) => cx.err(
                    "backend",
                    format!(
                        "`{}` does not measure the server the `redis` URL names (it would be ignored): give one of them (a URL alone implies backend = \"url\")",
                        super::spelling(b)
                    ),
                ),
                None => cx.err(
                    "redis_server",
                    "starts a private server, so the `redis` URL would be ignored: give one of them".to_string(),
                ),
            });
        }
        let cluster = self.cluster();
        if cluster == ClusterMode::Yes && backend != BackendChoice::Url {
            return Err(cx.err(
                "cluster",
                "says the `redis` URL is a cluster node: it needs backend = \"url\" (a private cluster is backend = \"spawn-cluster\")".to_string(),
            ));
        }
        let cluster_masters = self.cluster_masters();
        let cluster_replicas = self.cluster_replicas();
        if !(3..=16).contains(&cluster_masters) {
            return Err(cx.err(
                "cluster_masters",
                format!("{cluster_masters} is not valid: a cluster needs 3 to 16 masters here"),
            ));
        }
        if cluster_replicas > 4 {
            return Err(cx.err(
                "cluster_replicas",
                format!("{cluster_replicas} is not valid: use 0 to 4 replicas per master"),
            ));
        }
        if (self.cluster_masters.is_some() || self.cluster_replicas.is_some())
            && backend != BackendChoice::SpawnCluster
        {
            let f = if self.cluster_masters.is_some() {
                "cluster_masters"
            } else {
                "cluster_replicas"
            };
            return Err(cx.err(
                f,
                "sizes a cluster lockbench starts: it needs backend = \"spawn-cluster\""
                    .to_string(),
            ));
        }
        if backend == BackendChoice::Url && self.redis.is_none() {
            return Err(cx.err(
                "redis",
                "the url backend needs a Redis URL (e.g. redis://127.0.0.1:6379)".to_string(),
            ));
        }
        if let Some(url) = &self.redis {
            crate::target::check_url(url).map_err(|e| cx.err("redis", format!("{e:#}")))?;
        }
        let memory_rtt_us = self.memory_rtt().us();
        if memory_rtt_us > 10_000_000 {
            return Err(cx.err(
                "memory_rtt",
                format!(
                    "{} is not a round trip: use 0 to 10s",
                    units::fmt_us(memory_rtt_us, units::Style::Compact)
                ),
            ));
        }
        let mut redis_servers = Vec::new();
        for path in self.redis_server.iter().flat_map(|r| r.to_vec()) {
            if !matches!(backend, BackendChoice::Spawn | BackendChoice::SpawnCluster) {
                return Err(cx.err(
                    "redis_server",
                    "names the binary of a private server: it needs backend = \"spawn\" (not url or memory)".to_string(),
                ));
            }
            // The binary itself is checked by the command (`backend::check_plan_io`).
            let path = std::path::PathBuf::from(path);
            if !redis_servers.contains(&path) {
                redis_servers.push(path);
            }
        }
        if backend == BackendChoice::SpawnCluster && redis_servers.len() > 1 {
            return Err(cx.err(
                "redis_server",
                "a spawned cluster runs one server binary on every node: give one".to_string(),
            ));
        }
        let resource_redis = match self.resource_redis.as_deref().map(str::trim) {
            None => None,
            Some("shared") => Some("shared".to_string()),
            Some(url)
                if ["redis://", "rediss://", "unix://"]
                    .iter()
                    .any(|s| url.starts_with(s)) =>
            {
                Some(url.to_string())
            }
            Some(_) => {
                return Err(cx.err(
                    "resource_redis",
                    "where the resource lives: a Redis URL (redis://, rediss://, unix://) or \"shared\" (on the lock's store)".to_string(),
                ));
            }
        };
        Ok(BackendPlan {
            resource_redis,
            kind: backend,
            connection,
            cluster,
            cluster_masters,
            cluster_replicas,
            redis: self.redis.clone(),
            redis_servers,
            memory_rtt_us,
            redlock: None,
            allow_remote: false,
        })
    }
}
