//! rslock, the Rust lock library, driven in process: no child, no pipe. Each holder has a
//! `LockManager` of its own (its own connections, as a process of its own would), takes a lock
//! with `LockManager::lock` — rslock's retries within the wait budget — and lets it go with
//! `LockManager::unlock`. What the other drivers send as protocol replies is built here from
//! rslock's own results, so the worker treats both alike.
//!
//! - rslock is a Redlock: on N servers (`--lock redlock`) it takes a quorum, on one server its
//!   quorum is that server; on a Redis Cluster the cluster counts as one server.
//! - Its `unlock` is best effort and says nothing: a compare-and-delete script, so it can
//!   never delete another holder's lock; the leave says `ok` with the detail
//!   [`UNREPORTED`], and the worker classifies it from the timeline.
//! - Its connections keep redis-rs's defaults (a 500 ms response timeout): `LockManager` takes
//!   a `Client`, which has no timeouts of its own. On a cluster the run's command timeout is
//!   the cluster client's.
//! - A connection error inside `lock` is a refused attempt to rslock (it retries, then gives
//!   up with `Unavailable`): an unreachable server looks to it like a busy lock.

use super::driver::{DriverError, Entered, Left, Recipe};
use rslock::{Lock, LockError, LockManager};
use std::time::Duration;

/// The pinned version (Cargo.toml says `=0.10.0`; a test checks the two agree).
pub(crate) const VERSION: &str = "0.10.0";

/// rslock's own retry delay: each retry waits a random time below it.
const RETRY_DELAY: Duration = Duration::from_millis(200);

/// What the leave of a release rslock does not report says in its detail.
pub(crate) const UNREPORTED: &str = "unreported: rslock's unlock does not say what it deleted";

/// One holder's rslock: its lock manager and the lock it holds.
pub(crate) struct Rslock {
    who: String,
    manager: LockManager,
    held: Option<(u64, Lock)>,
    next_id: u64,
}

impl Rslock {
    /// Holder `holder`'s lock manager on the recipe's servers (a cluster's seed nodes when
    /// `recipe.cluster`). A URL redis-rs cannot open is the caller's error, before the run.
    pub(crate) fn start(recipe: &Recipe, holder: usize) -> Result<Rslock, DriverError> {
        let who = format!("rslock (holder {holder}, in process)");
        let fail = |what: String| DriverError {
            who: who.clone(),
            what,
            stderr: Vec::new(),
            refused: true,
        };
        // rslock refuses a lock whose validity (TTL − 1 % drift − 2 ms − the time taken) is
        // gone: under 3 ms every acquisition would fail with `TtlExceeded`.
        if recipe.ttl_ms < 3 {
            return Err(fail(format!(
                "rslock cannot take a TTL of {} ms: it keeps 1 % + 2 ms of it for clock drift, \
                 so every lock would be refused (TtlExceeded); use a TTL of 3 ms or more",
                recipe.ttl_ms
            )));
        }
        let manager = if recipe.cluster {
            let client = redis::cluster::ClusterClient::builder(recipe.servers.clone())
                .response_timeout(recipe.command_timeout)
                .connection_timeout(recipe.command_timeout)
                .build()
                .map_err(|e| fail(format!("cannot open the cluster's nodes: {e}")))?;
            LockManager::from_cluster_client(client)
        } else {
            let clients = recipe
                .servers
                .iter()
                .enumerate()
                .map(|(i, url)| {
                    redis::Client::open(url.as_str())
                        .map_err(|e| fail(format!("cannot open server {}: {e}", i + 1)))
                })
                .collect::<Result<Vec<_>, _>>()?;
            LockManager::from_clients(clients)
        };
        Ok(Rslock {
            who,
            manager,
            held: None,
            next_id: 0,
        })
    }

    /// What the other drivers' `hello` replies say.
    pub(crate) fn hello() -> serde_json::Value {
        serde_json::json!({
            "package": "rslock",
            "version": VERSION,
            "key_format": "{key}",
            "capabilities": {"extend": true, "auto_renewal": false, "lost_callback": false,
                             "quorum": true},
        })
    }

    /// Takes the lock on `key` for `ttl_ms`: one `lock` call, which tries once, or, with a
    /// wait budget, as many times as rslock's random retry delays (below 200 ms, 100 ms on
    /// average) fit in it.
    pub(crate) async fn section(
        &mut self,
        key: &str,
        ttl_ms: u64,
        wait_ms: u64,
    ) -> Result<Entered, DriverError> {
        let tries = 1 + wait_ms / (RETRY_DELAY.as_millis() as u64 / 2);
        self.manager
            .set_retry(u32::try_from(tries).unwrap_or(u32::MAX), RETRY_DELAY);
        let id = self.next_id;
        self.next_id += 1;
        match self
            .manager
            .lock(key.as_bytes(), Duration::from_millis(ttl_ms))
            .await
        {
            Ok(lock) => {
                let token = lock.val.iter().map(|b| format!("{b:02x}")).collect();
                self.held = Some((id, lock));
                Ok(Entered::Held {
                    id,
                    token: Some(token),
                    // In process: its acquire's return is the reply's arrival.
                    held_at: None,
                    // Watched on the wire (its connections are redis-rs's, in this process).
                    seen: Vec::new(),
                })
            }
            Err(LockError::Unavailable) => Ok(Entered::NotAcquired {
                outcome: if wait_ms > 0 { "timeout" } else { "fail" }.to_string(),
                error: None,
                kind: None,
            }),
            Err(e) => Ok(Entered::NotAcquired {
                outcome: "error".to_string(),
                error: Some(e.to_string()),
                kind: matches!(
                    e,
                    LockError::Redis(_)
                        | LockError::RedisConnectionFailed
                        | LockError::RedisFailedToEstablishConnection
                )
                .then(|| "connection".to_string()),
            }),
        }
    }

    /// Leaves section `id`: rslock's `unlock`, which reports nothing.
    pub(crate) async fn leave(&mut self, id: u64) -> Result<Left, DriverError> {
        let Some((open, lock)) = self.held.take() else {
            return Err(self.error(format!("left section {id}, which is not open")));
        };
        if open != id {
            return Err(self.error(format!("left section {id} while {open} is open")));
        }
        self.manager.unlock(&lock).await;
        Ok(Left {
            outcome: "ok".to_string(),
            detail: Some(UNREPORTED.to_string()),
            ..Left::default()
        })
    }

    /// The holder dies: the lock it holds is dropped without a release (rslock sends nothing
    /// when a `Lock` is dropped), as a crashed process leaves it.
    pub(crate) fn crash(&mut self) {
        self.held = None;
    }

    /// Goodbye: the lock still held, if any, is released.
    pub(crate) async fn bye(&mut self) {
        if let Some((_, lock)) = self.held.take() {
            self.manager.unlock(&lock).await;
        }
    }

    fn error(&self, what: String) -> DriverError {
        DriverError {
            who: self.who.clone(),
            what,
            stderr: Vec::new(),
            refused: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TTL rslock cannot take is refused with one readable sentence (issue 40: a missing
    /// line continuation put a run of spaces in the middle of it).
    #[test]
    fn a_too_short_ttl_is_refused_in_one_sentence() {
        let recipe = Recipe {
            argv: Vec::new(),
            client: "rslock",
            servers: vec!["redis://127.0.0.1:1/0".to_string()],
            cluster: false,
            ttl_ms: 1,
            command_timeout: Duration::from_secs(1),
            patience: Duration::from_secs(1),
            tap: None,
        };
        let e = Rslock::start(&recipe, 0)
            .err()
            .expect("a 1 ms TTL is refused");
        assert!(e.refused, "{}", e.what);
        assert!(e.what.contains("TTL of 1 ms"), "{}", e.what);
        assert!(!e.what.contains("  "), "a run of spaces: {:?}", e.what);
    }
}
