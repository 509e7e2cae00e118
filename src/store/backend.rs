//! The one place a plan's backend choice becomes something to connect to: a private server
//! we spawn, an existing server, or the in-process model. [`with_connector!`] is the one
//! dispatch over them, so commands stay generic over [`Connector`].

use super::cluster::ClusterConnector;
use super::memory::MemoryStore;
use super::redis::{RedisConnector, Timeouts};
use super::spawn::{SpawnedRedis, redis_server_available};
use crate::faults::FaultControl;
use crate::faults::proxy::Proxy;
use crate::profile::{BackendChoice, ClusterMode, Plan};
use crate::sim::SimNet;
use anyhow::Context;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;

/// Resolved backend, kept alive for the run (a spawned server dies with it), with what the
/// fault schedule needs to break it.
pub struct Backend {
    /// Where the lock store is.
    pub store: Store,
    /// The spawned server, an administrative connection, the fault proxy.
    pub control: FaultControl,
}

/// Where the lock store is.
pub enum Store {
    /// A private server we started (shared with the fault driver, which restarts it).
    Spawned(Arc<Mutex<SpawnedRedis>>, RedisConnector),
    /// An existing server.
    Url(RedisConnector),
    /// The in-process model.
    Memory(MemoryStore),
    /// The in-process model on the simulator's virtual clock.
    Sim(MemoryStore<SimNet>),
    /// A Redis Cluster: given by URL, or spawned (then in [`FaultControl::cluster`]).
    Cluster(ClusterConnector),
    /// Redlock over N independent servers (the spawned ones, shared with the fault driver;
    /// empty when given by URL).
    Redlock(super::redlock::Instances, super::redlock::RedlockConnector),
}

impl Backend {
    /// Resolves the plan's backend choice; `auto` falls back to memory with a notice. A
    /// spawned server runs the plan's first `redis_servers` binary.
    pub async fn open(plan: &Plan, quiet: bool) -> anyhow::Result<Backend> {
        Self::open_server(plan, quiet, plan.redis_servers.first().map(|p| p.as_path())).await
    }

    /// As [`Backend::open`], spawning the server binary `exe` (`None`: `redis-server` on PATH).
    pub async fn open_server(
        plan: &Plan,
        quiet: bool,
        exe: Option<&std::path::Path>,
    ) -> anyhow::Result<Backend> {
        let timeouts = Timeouts {
            connect: Duration::from_micros(plan.connect_timeout_us),
            response: Duration::from_micros(plan.command_timeout_us),
        };
        // A redlock is its own backend: N spawned servers (no memory fallback) or N URLs.
        if let Some(r) = &plan.redlock {
            let (conn, servers) = super::redlock::open(r, timeouts, plan.allow_remote).await?;
            let control = FaultControl {
                instances: servers.clone(),
                ..FaultControl::default()
            };
            return Ok(Backend {
                store: Store::Redlock(servers, conn),
                control,
            });
        }
        let choice = match plan.backend {
            BackendChoice::Auto if redis_server_available() => BackendChoice::Spawn,
            BackendChoice::Auto => {
                if !quiet {
                    eprintln!(
                        "notice: redis-server is not installed; using the in-process memory model. \
                         Install it (apt-get install -y redis-server) to measure a real Redis."
                    );
                }
                BackendChoice::Memory
            }
            ref c => c.clone(),
        };
        let mut control = FaultControl::default();
        let mut store = match choice {
            BackendChoice::Spawn => {
                let server = match exe {
                    Some(exe) => SpawnedRedis::start_exe(exe).await?,
                    None => SpawnedRedis::start().await?,
                };
                let conn = RedisConnector::new(&server.url(), timeouts, false)?;
                let server = Arc::new(Mutex::new(server));
                control.server = Some(server.clone());
                Store::Spawned(server, conn)
            }
            BackendChoice::SpawnCluster => {
                let cluster = super::spawn_cluster::SpawnedCluster::start(
                    exe,
                    plan.cluster_masters,
                    plan.cluster_replicas,
                )
                .await?;
                let conn = ClusterConnector::new(&cluster.urls(), timeouts, false)?
                    .described(format!("a private redis cluster ({})", cluster.describe()));
                conn.load_shards().await?;
                control.cluster = Some(Arc::new(Mutex::new(cluster)));
                Store::Cluster(conn)
            }
            BackendChoice::Url => {
                let url = plan
                    .redis
                    .as_deref()
                    .context("the url backend needs --redis URL")?;
                let conn = RedisConnector::new(url, timeouts, plan.allow_remote)?;
                let cluster = match plan.cluster {
                    ClusterMode::Yes => true,
                    ClusterMode::No => false,
                    ClusterMode::Auto => super::cluster::is_cluster(&conn).await?,
                };
                if cluster {
                    let c = ClusterConnector::new(&[url.to_string()], timeouts, plan.allow_remote)?;
                    c.load_shards().await?;
                    Store::Cluster(c)
                } else {
                    control.admin = Some(conn.clone());
                    Store::Url(conn)
                }
            }
            BackendChoice::Sim => Store::Sim(MemoryStore::with_net(
                SimNet::new(
                    plan.sim_rtt.sampler(),
                    &plan.sim_rtt_text,
                    plan.sim_service_us,
                ),
                true,
            )),
            _ => Store::Memory(MemoryStore::new(
                Duration::from_micros(plan.memory_rtt_us),
                true,
            )),
        };
        // Network faults: every connection goes through a loopback proxy the driver controls.
        if plan.faults.iter().any(|f| f.kind.needs_proxy())
            && let Store::Spawned(_, c) | Store::Url(c) = &mut store
        {
            let upstream = c.tcp_addr().await?.context(
                "latency and partition faults need a server on a TCP address, not a unix socket",
            )?;
            let proxy = Proxy::start(upstream, plan.seed)
                .await
                .context("cannot start the fault proxy on 127.0.0.1")?;
            *c = c.via(proxy.addr())?;
            control.proxy = Some(Arc::new(proxy));
        }
        Ok(Backend { store, control })
    }

    /// `spawn`, `url`, `memory`, `sim` or `redlock`.
    pub fn kind(&self) -> &'static str {
        match self.store {
            Store::Spawned(..) => "spawn",
            Store::Url(_) => "url",
            Store::Memory(_) => "memory",
            Store::Sim(_) => "sim",
            Store::Cluster(_) if self.control.cluster.is_some() => "spawn-cluster",
            Store::Cluster(_) => "cluster",
            Store::Redlock(..) => "redlock",
        }
    }

    /// Stops a spawned server (and the proxy).
    pub async fn close(self) {
        let cluster = self.control.cluster.clone();
        drop(self.control);
        if let Store::Spawned(server, _) = self.store {
            server.lock().await.kill().await;
        } else if let Store::Redlock(servers, _) = self.store {
            for s in servers {
                s.lock().await.kill().await;
            }
        }
        if let Some(c) = cluster.and_then(|c| Arc::try_unwrap(c).ok()) {
            c.into_inner().stop().await;
        }
    }
}

/// Runs `$body` with `$c` bound to the backend's connector (`&RedisConnector` or
/// `&MemoryStore`), and `$kind` to its kind name.
#[macro_export]
macro_rules! with_connector {
    ($backend:expr, $c:ident => $body:expr) => {
        match &($backend).store {
            $crate::store::backend::Store::Spawned(_, $c)
            | $crate::store::backend::Store::Url($c) => $body,
            $crate::store::backend::Store::Memory($c) => $body,
            $crate::store::backend::Store::Sim($c) => $body,
            $crate::store::backend::Store::Cluster($c) => $body,
            $crate::store::backend::Store::Redlock(_, $c) => $body,
        }
    };
}
