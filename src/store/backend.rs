//! The one place a plan's backend choice becomes something to connect to: a private server
//! we spawn, an existing server, or the in-process model. [`with_connector!`] is the one
//! dispatch over them, so commands stay generic over [`Connector`].

use super::memory::MemoryStore;
use super::redis::{RedisConnector, Timeouts};
use super::spawn::{SpawnedRedis, redis_server_available};
use crate::profile::{BackendChoice, Plan};
use anyhow::Context;
use std::time::Duration;

/// Resolved backend, kept alive for the run (a spawned server dies with it).
pub enum Backend {
    /// A private server we started.
    Spawned(Box<SpawnedRedis>, RedisConnector),
    /// An existing server.
    Url(RedisConnector),
    /// The in-process model.
    Memory(MemoryStore),
}

impl Backend {
    /// Resolves the plan's backend choice; `auto` falls back to memory with a notice.
    pub async fn open(plan: &Plan, quiet: bool) -> anyhow::Result<Backend> {
        let timeouts = Timeouts {
            connect: Duration::from_micros(plan.connect_timeout_us),
            response: Duration::from_micros(plan.command_timeout_us),
        };
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
        Ok(match choice {
            BackendChoice::Spawn => {
                let server = SpawnedRedis::start().await?;
                let conn = RedisConnector::new(&server.url(), timeouts, false)?;
                Backend::Spawned(Box::new(server), conn)
            }
            BackendChoice::Url => {
                let url = plan
                    .redis
                    .as_deref()
                    .context("the url backend needs --redis URL")?;
                Backend::Url(RedisConnector::new(url, timeouts, plan.allow_remote)?)
            }
            _ => Backend::Memory(MemoryStore::new(
                Duration::from_micros(plan.memory_rtt_us),
                true,
            )),
        })
    }

    /// `spawn`, `url` or `memory`.
    pub fn kind(&self) -> &'static str {
        match self {
            Backend::Spawned(..) => "spawn",
            Backend::Url(_) => "url",
            Backend::Memory(_) => "memory",
        }
    }

    /// Stops a spawned server.
    pub async fn close(self) {
        if let Backend::Spawned(server, _) = self {
            server.stop().await;
        }
    }
}

/// Runs `$body` with `$c` bound to the backend's connector (`&RedisConnector` or
/// `&MemoryStore`), and `$kind` to its kind name.
#[macro_export]
macro_rules! with_connector {
    ($backend:expr, $c:ident => $body:expr) => {
        match $backend {
            $crate::store::backend::Backend::Spawned(_, $c)
            | $crate::store::backend::Backend::Url($c) => $body,
            $crate::store::backend::Backend::Memory($c) => $body,
        }
    };
}
