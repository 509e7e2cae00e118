//! The one place a plan's backend choice becomes something to connect to: a private server
//! we spawn, an existing server, or the in-process model. [`Backend::connector`] is the one
//! choice over them ([`AnyConnector`]), so commands stay generic over
//! [`Connector`](crate::store::Connector).

use crate::faults::FaultControl;
use crate::faults::proxy::Proxy;
use crate::profile::{BackendChoice, ClusterMode, Plan, Profile, ProfileError};
use crate::sim::SimNet;
use crate::store::apart::Apart;
use crate::store::cluster::ClusterConnector;
use crate::store::memory::MemoryStore;
use crate::store::redis::RedisConnector;
use crate::store::spawn::{SpawnedRedis, redis_server_available};
use crate::store::{Timeouts, UseConnector};
use anyhow::Context;
use std::path::Path;
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
    /// Where the protected resource is, when apart from the locks (`None`: on the lock's
    /// store, or no resource).
    pub resource: Option<ResourceStore>,
}

/// The protected resource's own store: a database elsewhere, as in the systems lockbench
/// models, so that a fault of the lock's server is a fault of the lock only. Never behind the
/// fault proxy.
pub enum ResourceStore {
    /// A private server lockbench started for it (stopped with the backend), or the server
    /// given by `resource_redis`.
    Redis(Box<RedisConnector>, Option<Box<SpawnedRedis>>),
    /// A second in-process model, beside the memory backend's.
    Memory(MemoryStore),
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
    Redlock(
        crate::store::redlock::Instances,
        crate::store::redlock::RedlockConnector,
    ),
}

impl Backend {
    /// Resolves the plan's backend choice; `auto` falls back to memory with a notice. A
    /// spawned server runs the plan's first `redis_servers` binary.
    pub async fn open(plan: &Plan, quiet: bool) -> anyhow::Result<Backend> {
        Self::open_server(
            plan,
            quiet,
            plan.backend.redis_servers.first().map(|p| p.as_path()),
        )
        .await
    }

    /// As [`Backend::open`], spawning the server binary `exe` (`None`: `redis-server` on PATH).
    pub async fn open_server(
        plan: &Plan,
        quiet: bool,
        exe: Option<&std::path::Path>,
    ) -> anyhow::Result<Backend> {
        let timeouts = Timeouts {
            connect: Duration::from_micros(plan.timeouts.connect_timeout_us),
            response: Duration::from_micros(plan.timeouts.command_timeout_us),
        };
        // A redlock is its own backend: N spawned servers (no memory fallback) or N URLs.
        if let Some(r) = &plan.backend.redlock {
            let (conn, servers) =
                crate::store::redlock::open_redlock(r, timeouts, plan.backend.allow_remote).await?;
            let control = FaultControl {
                instances: servers.clone(),
                ..FaultControl::default()
            };
            return Ok(Backend {
                store: Store::Redlock(servers, conn),
                control,
                resource: None,
            });
        }
        let choice = match plan.backend.kind {
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
                let cluster = crate::store::spawn_cluster::SpawnedCluster::start(
                    exe,
                    plan.backend.cluster_masters,
                    plan.backend.cluster_replicas,
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
                    .backend
                    .redis
                    .as_deref()
                    .context("the url backend needs --redis URL")?;
                let conn = RedisConnector::new(url, timeouts, plan.backend.allow_remote)?;
                let cluster = match plan.backend.cluster {
                    ClusterMode::Yes => true,
                    ClusterMode::No => false,
                    ClusterMode::Auto => crate::store::cluster::is_cluster(&conn).await?,
                };
                if cluster {
                    let c = ClusterConnector::new(
                        &[url.to_string()],
                        timeouts,
                        plan.backend.allow_remote,
                    )?;
                    c.load_shards().await?;
                    Store::Cluster(c)
                } else {
                    control.admin = Some(conn.clone());
                    Store::Url(conn)
                }
            }
            BackendChoice::Sim => Store::Sim(MemoryStore::with_net(
                SimNet::new(
                    plan.sim.sim_rtt.sampler(),
                    &plan.sim.sim_rtt_text,
                    plan.sim.sim_service_us,
                ),
                true,
            )),
            _ => Store::Memory(MemoryStore::new(
                Duration::from_micros(plan.backend.memory_rtt_us),
                true,
            )),
        };
        // Network faults: every connection goes through a loopback proxy the driver controls.
        if plan.faults.schedule.iter().any(|f| f.kind.needs_proxy())
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
        let resource = resource_store(plan, &store, exe, timeouts, quiet).await?;
        Ok(Backend {
            store,
            control,
            resource,
        })
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

    /// Stops a spawned server (and the proxy, and the resource's private server).
    pub async fn close(self) {
        let cluster = self.control.cluster.clone();
        drop(self.control);
        if let Some(ResourceStore::Redis(_, Some(mut s))) = self.resource {
            s.kill().await;
        }
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

/// The resource's own store for a run with a resource on one server or the memory model:
/// `resource_redis` when given, else a private server (the lock's binary), else — no
/// `redis-server` here — the lock's store, with a notice. A cluster, a Redlock and the
/// simulator keep the resource beside the locks.
async fn resource_store(
    plan: &Plan,
    store: &Store,
    exe: Option<&std::path::Path>,
    timeouts: Timeouts,
    quiet: bool,
) -> anyhow::Result<Option<ResourceStore>> {
    if !plan.protection.resource || plan.resource_shared() {
        return Ok(None);
    }
    let given = plan.resource_redis_url().is_some();
    if given && !matches!(store, Store::Spawned(..) | Store::Url(_)) {
        return Err(crate::exit::BadInput(
            "resource_redis (--resource-redis URL) needs the locks on one Redis server (backend spawn, or --redis URL); on a cluster, a Redlock, the memory model or in virtual time the resource lives beside the locks".to_string(),
        )
        .into());
    }
    Ok(match store {
        Store::Memory(_) => Some(ResourceStore::Memory(MemoryStore::new(
            Duration::from_micros(plan.backend.memory_rtt_us),
            true,
        ))),
        Store::Spawned(..) | Store::Url(_) => match plan.resource_redis_url() {
            Some(url) => Some(ResourceStore::Redis(
                Box::new(
                    RedisConnector::new(url, timeouts, plan.backend.allow_remote).map_err(|e| {
                        crate::exit::BadInput(format!(
                            "--resource-redis (the protected resource's server): {e:#}"
                        ))
                    })?,
                ),
                None,
            )),
            None if exe.is_some() || redis_server_available() => {
                let server = match exe {
                    Some(exe) => SpawnedRedis::start_exe(exe).await?,
                    None => SpawnedRedis::start().await?,
                };
                let conn = RedisConnector::new(&server.url(), timeouts, false)?.described(format!(
                    "a private server for the resource ({})",
                    server.url()
                ));
                Some(ResourceStore::Redis(Box::new(conn), Some(Box::new(server))))
            }
            None => {
                if !quiet {
                    eprintln!(
                        "notice: redis-server is not installed, so the protected resource lives on \
                         the lock's server: a restart of it erases the resource too (give \
                         --resource-redis URL for a store of its own)"
                    );
                }
                None
            }
        },
        _ => None,
    })
}

/// The backend's connector, of whichever type it is: the one choice over the stores, made in
/// [`Backend::connector`]; [`AnyConnector::with`] hands it to a body generic over
/// [`Connector`].
pub enum AnyConnector<'a> {
    /// One Redis server (spawned or given).
    Redis(&'a RedisConnector),
    /// One Redis server for the locks, the protected resource on a server of its own.
    RedisApart(Box<Apart<RedisConnector>>),
    /// The in-process model.
    Memory(&'a MemoryStore),
    /// The in-process model for the locks, a second one for the protected resource.
    MemoryApart(Apart<MemoryStore>),
    /// The in-process model on the simulator's virtual clock.
    Sim(&'a MemoryStore<SimNet>),
    /// A Redis Cluster.
    Cluster(&'a ClusterConnector),
    /// Redlock over N servers.
    Redlock(&'a crate::store::redlock::RedlockConnector),
}

impl AnyConnector<'_> {
    /// Runs `body` with this connector.
    pub async fn with<U: UseConnector>(&self, body: U) -> U::Output {
        match self {
            Self::Redis(c) => body.with(*c).await,
            Self::RedisApart(c) => body.with(&**c).await,
            Self::Memory(c) => body.with(*c).await,
            Self::MemoryApart(c) => body.with(c).await,
            Self::Sim(c) => body.with(*c).await,
            Self::Cluster(c) => body.with(*c).await,
            Self::Redlock(c) => body.with(*c).await,
        }
    }
}

impl Backend {
    /// The connector a run opens its connections with: the lock store's, paired with the
    /// resource's own store when the resource lives apart.
    pub fn connector(&self) -> AnyConnector<'_> {
        match (&self.store, &self.resource) {
            (
                Store::Spawned(_, lock) | Store::Url(lock),
                Some(ResourceStore::Redis(resource, _)),
            ) => AnyConnector::RedisApart(Box::new(Apart {
                lock: lock.clone(),
                resource: (**resource).clone(),
            })),
            (Store::Memory(lock), Some(ResourceStore::Memory(resource))) => {
                AnyConnector::MemoryApart(Apart {
                    lock: lock.clone(),
                    resource: resource.clone(),
                })
            }
            (Store::Spawned(_, c) | Store::Url(c), _) => AnyConnector::Redis(c),
            (Store::Memory(c), _) => AnyConnector::Memory(c),
            (Store::Sim(c), _) => AnyConnector::Sim(c),
            (Store::Cluster(c), _) => AnyConnector::Cluster(c),
            (Store::Redlock(_, c), _) => AnyConnector::Redlock(c),
        }
    }

    /// Runs `body` with the backend's [`connector`](Self::connector).
    pub async fn with_connector<U: UseConnector>(&self, body: U) -> U::Output {
        self.connector().with(body).await
    }
}

/// The checks of a plan that look at files, left by `Profile::plan` (which reads no run
/// directory and runs no binary) to the command about to run it: every `redis_server` binary
/// must be a Redis server, and `sim_from`'s run directory gives the round trips and timer
/// lateness that `sim_rtt`, `sim_timer` and `sim_service` leave unset. `profile` is the merged
/// profile the plan came from, `file` and `source` where it was written, `base` the directory
/// a relative `sim_from` is resolved against when it is not found as given.
pub(crate) fn check_plan_io(
    plan: &mut Plan,
    profile: &Profile,
    file: &str,
    source: &str,
    base: Option<&Path>,
) -> Result<(), ProfileError> {
    let err = |field: &str, message: String| ProfileError::at_field(file, source, field, message);
    for path in &plan.backend.redis_servers {
        crate::store::spawn::check_server_binary(path)
            .map_err(|e| err("redis_server", format!("{e:#}")))?;
    }
    let Some(from) = &profile.sim_from else {
        return Ok(());
    };
    // As given (absolute, or relative to the working directory: a flag), else relative to the
    // profile's directory (a profile field).
    let dir = match base {
        Some(b) if !Path::new(from).is_absolute() && !Path::new(from).exists() => b.join(from),
        _ => std::path::PathBuf::from(from),
    };
    let m = crate::sim::measured(&dir).map_err(|e| err("sim_from", format!("{e:#}")))?;
    if profile.sim_rtt.is_none() {
        plan.sim.sim_rtt_text = format!("measured by {from} ({} release round trips)", m.rtt_n);
        plan.sim.sim_rtt = m.rtt;
    }
    if profile.sim_timer.is_none() {
        plan.sim.sim_timer_text = format!("measured by {from} ({} sections)", m.timer_n);
        plan.sim.sim_timer = (!m.timer.is_zero()).then(|| m.timer.sampler());
    }
    if profile.sim_service.is_none() {
        // The measured round trips already include the server's time.
        plan.sim.sim_service_us = 0;
    }
    Ok(())
}
