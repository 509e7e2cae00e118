//! An in-process model of exactly the commands lockbench uses, with the same semantics as Redis
//! (millisecond `PX`, lazy expiry, atomic compare-and-delete) and a configurable simulated round
//! trip. Time comes from tokio's clock, so paused-time tests run it deterministically.

use super::{CmdResult, Connector, LockConn};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

#[derive(Debug)]
struct Entry {
    value: String,
    expires_at: Option<Instant>,
}

/// The model's keyspace, shared by every connection to it.
#[derive(Debug, Default)]
struct Keyspace {
    map: HashMap<String, Entry>,
}

impl Keyspace {
    /// Lazy expiry as in Redis: an expired key is absent for every command.
    fn live(&mut self, key: &str, now: Instant) -> Option<&mut Entry> {
        let expired =
            matches!(self.map.get(key), Some(e) if e.expires_at.is_some_and(|t| t <= now));
        if expired {
            self.map.remove(key);
        }
        self.map.get_mut(key)
    }
}

/// The model store: a connector and, by cloning, a connection.
#[derive(Debug, Clone)]
pub struct MemoryStore {
    keys: Arc<Mutex<Keyspace>>,
    rtt: Duration,
    delex: bool,
}

impl MemoryStore {
    /// A fresh empty model whose every command takes `rtt` (the request reaches the model at
    /// half of it). `delex` says whether the model offers `DELEX` (as Redis ≥ 8.4 does).
    pub fn new(rtt: Duration, delex: bool) -> Self {
        Self {
            keys: Arc::default(),
            rtt,
            delex,
        }
    }

    /// Number of live keys (for tests).
    pub fn len(&self) -> usize {
        let now = Instant::now();
        let mut ks = self.lock();
        let keys: Vec<String> = ks.map.keys().cloned().collect();
        keys.iter().filter(|k| ks.live(k, now).is_some()).count()
    }

    /// Whether the model holds no live key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Keyspace> {
        // A poisoned mutex only means a panic elsewhere; the map itself is still consistent.
        self.keys.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on the keyspace at the simulated server time, then completes the round trip.
    async fn call<T>(&self, f: impl FnOnce(&mut Keyspace, Instant) -> T) -> T {
        let sent = Instant::now();
        if self.rtt.is_zero() {
            tokio::task::yield_now().await;
        } else {
            tokio::time::sleep_until(sent + self.rtt / 2).await;
        }
        let out = {
            let mut ks = self.lock();
            f(&mut ks, Instant::now())
        };
        if !self.rtt.is_zero() {
            tokio::time::sleep_until(sent + self.rtt).await;
        }
        out
    }
}

impl Connector for MemoryStore {
    type Conn = MemoryStore;
    async fn connect(&self) -> anyhow::Result<MemoryStore> {
        Ok(self.clone())
    }
    fn describe(&self) -> String {
        format!("memory model (simulated round trip {:?})", self.rtt)
    }
}

impl LockConn for MemoryStore {
    async fn set_nx_px(&mut self, key: &str, value: &str, ttl_ms: u64) -> CmdResult<bool> {
        self.call(|ks, now| {
            if ks.live(key, now).is_some() {
                return false;
            }
            ks.map.insert(
                key.to_string(),
                Entry {
                    value: value.to_string(),
                    expires_at: Some(now + Duration::from_millis(ttl_ms)),
                },
            );
            true
        })
        .await
        .pipe(Ok)
    }

    async fn getdel(&mut self, key: &str) -> CmdResult<Option<String>> {
        self.call(|ks, now| {
            ks.live(key, now)?;
            ks.map.remove(key).map(|e| e.value)
        })
        .await
        .pipe(Ok)
    }

    async fn del(&mut self, key: &str) -> CmdResult<i64> {
        self.call(|ks, now| {
            if ks.live(key, now).is_some() {
                ks.map.remove(key);
                1
            } else {
                0
            }
        })
        .await
        .pipe(Ok)
    }

    async fn del_many(&mut self, keys: &[String]) -> CmdResult<i64> {
        self.call(|ks, now| {
            let mut n = 0;
            for key in keys {
                if ks.live(key, now).is_some() {
                    ks.map.remove(key);
                    n += 1;
                }
            }
            n
        })
        .await
        .pipe(Ok)
    }

    async fn release_script(&mut self, key: &str, token: &str) -> CmdResult<i64> {
        self.call(|ks, now| match ks.live(key, now) {
            None => 0,
            Some(e) if e.value == token => {
                ks.map.remove(key);
                1
            }
            Some(_) => -1,
        })
        .await
        .pipe(Ok)
    }

    async fn canonical_cad(&mut self, key: &str, token: &str) -> CmdResult<i64> {
        self.release_script(key, token).await.map(|r| r.max(0))
    }

    async fn delex(&mut self, key: &str, token: &str) -> CmdResult<i64> {
        if !self.delex {
            return Err(super::CmdError {
                kind: super::ErrorKind::Server,
                detail: "ERR unknown command 'delex' (model configured without DELEX)".into(),
            });
        }
        self.canonical_cad(key, token).await
    }

    async fn get(&mut self, key: &str) -> CmdResult<Option<String>> {
        self.call(|ks, now| ks.live(key, now).map(|e| e.value.clone()))
            .await
            .pipe(Ok)
    }

    async fn exists(&mut self, key: &str) -> CmdResult<i64> {
        self.call(|ks, now| i64::from(ks.live(key, now).is_some()))
            .await
            .pipe(Ok)
    }

    async fn pttl(&mut self, key: &str) -> CmdResult<i64> {
        self.call(|ks, now| match ks.live(key, now) {
            None => -2,
            Some(Entry {
                expires_at: None, ..
            }) => -1,
            Some(Entry {
                expires_at: Some(t),
                ..
            }) => t.saturating_duration_since(now).as_millis() as i64,
        })
        .await
        .pipe(Ok)
    }

    async fn supports_command(&mut self, name: &str) -> CmdResult<bool> {
        Ok(match name.to_ascii_uppercase().as_str() {
            "DELEX" => self.delex,
            "SET" | "GETDEL" | "DEL" | "GET" | "EXISTS" | "PTTL" | "EVALSHA" | "EVAL" => true,
            _ => false,
        })
    }

    async fn server_version(&mut self) -> CmdResult<String> {
        Ok(format!(
            "lockbench-memory-model {}",
            env!("CARGO_PKG_VERSION")
        ))
    }
}

/// `value.pipe(f)` = `f(value)`; keeps the command bodies above readable.
trait Pipe: Sized {
    fn pipe<T>(self, f: impl FnOnce(Self) -> T) -> T {
        f(self)
    }
}
impl<T> Pipe for T {}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model follows Redis semantics for the lock commands, including expiry by PX.
    #[tokio::test(start_paused = true)]
    async fn lock_commands_follow_redis_semantics() {
        let mut m = MemoryStore::new(Duration::from_micros(200), true);
        assert!(m.set_nx_px("k", "a", 1000).await.unwrap());
        assert!(!m.set_nx_px("k", "b", 1000).await.unwrap());
        assert_eq!(m.release_script("k", "b").await.unwrap(), -1);
        tokio::time::advance(Duration::from_millis(1001)).await;
        assert_eq!(m.exists("k").await.unwrap(), 0);
        assert_eq!(m.release_script("k", "a").await.unwrap(), 0);
        assert!(m.set_nx_px("k", "b", 30_000).await.unwrap());
        assert_eq!(m.getdel("k").await.unwrap().as_deref(), Some("b"));
        assert_eq!(m.pttl("k").await.unwrap(), -2);
        assert!(m.set_nx_px("k", "c", 30_000).await.unwrap());
        assert_eq!(m.delex("k", "x").await.unwrap(), 0);
        assert_eq!(m.delex("k", "c").await.unwrap(), 1);
        assert!(m.is_empty());
    }
}
