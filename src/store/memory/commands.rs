//! The commands lockbench sends, as the model answers them: the [`LockConn`] implementation
//! of [`MemoryStore`], each command one closure run on the keyspace at the server's time.

use super::MemoryStore;
use super::keyspace::{Entry, Keyspace, Text, Value, after_ms, wrong_type};
use super::net::Net;
use crate::model::error::{CmdError, CmdResult, ErrorKind};
use crate::model::release::ExtendCommand;
use crate::store::{
    KeySweep, LockCommands, ReadOutcome, ResourceCommands, ServerProbes, UserScripts, WriteOutcome,
};

impl<N: Net> MemoryStore<N> {
    /// The resource's `(value, fence)`, `(0, 0)` when absent; an error if the key is a string.
    fn resource(ks: &mut Keyspace, key: &str, now: u64) -> CmdResult<(u64, u64)> {
        match ks.live(key, now).map(|e| &e.value) {
            None => Ok((0, 0)),
            Some(Value::Resource { value, fence }) => Ok((*value, *fence)),
            Some(Value::Str(_)) => Err(wrong_type()),
        }
    }

    /// The resource write's fence check, then the write: `Some(highest)` when the fence is
    /// below the highest the resource has seen (nothing written), `None` when written.
    fn write_fenced(
        ks: &mut Keyspace,
        res_key: &str,
        fence: Option<u64>,
        value: u64,
        now: u64,
    ) -> CmdResult<Option<u64>> {
        let (_, mut highest) = Self::resource(ks, res_key, now)?;
        if let Some(f) = fence {
            if f < highest {
                return Ok(Some(highest));
            }
            highest = f;
        }
        Self::set_resource(ks, res_key, value, highest);
        Ok(None)
    }

    /// Stores the resource's `(value, fence)`; the key has no TTL, like the `HSET` it models.
    fn set_resource(ks: &mut Keyspace, key: &str, value: u64, fence: u64) {
        ks.insert(
            key,
            Entry {
                value: Value::Resource { value, fence },
                expires_at: None,
            },
        );
    }
}

impl<N: Net> LockCommands for MemoryStore<N> {
    async fn set_nx_px(&mut self, key: &str, value: &str, ttl_ms: u64) -> CmdResult<bool> {
        self.call(|ks, now| ks.set_nx(key, value, Some(after_ms(now, ttl_ms)), now))
            .await
            .pipe(Ok)
    }

    async fn setnx(&mut self, key: &str, value: &str) -> CmdResult<bool> {
        // No expiry: the key stays until a DEL (or a PEXPIRE).
        self.call(|ks, now| ks.set_nx(key, value, None, now))
            .await
            .pipe(Ok)
    }

    async fn pexpire(&mut self, key: &str, ms: u64) -> CmdResult<bool> {
        self.call(|ks, now| {
            let Some(e) = ks.live(key, now) else {
                return false;
            };
            // Any type of value can expire; `PEXPIRE key 0` deletes the key.
            if ms == 0 {
                ks.remove(key);
            } else {
                e.expires_at = Some(after_ms(now, ms));
            }
            true
        })
        .await
        .pipe(Ok)
    }

    async fn getdel(&mut self, key: &str) -> CmdResult<Option<String>> {
        self.call(|ks, now| {
            let Some(e) = ks.live(key, now) else {
                return Ok(None);
            };
            let v = e.str()?.to_owned_string();
            ks.remove(key);
            Ok(Some(v))
        })
        .await
    }

    async fn release_script(&mut self, key: &str, token: &str) -> CmdResult<i64> {
        self.call(|ks, now| match ks.live_entry(key, now) {
            None => Ok(0),
            Some(e) if e.get().str()?.is(token) => {
                e.remove();
                Ok(1)
            }
            Some(_) => Ok(-1),
        })
        .await
    }

    async fn canonical_cad(&mut self, key: &str, token: &str) -> CmdResult<i64> {
        self.release_script(key, token).await.map(|r| r.max(0))
    }

    async fn delex(&mut self, key: &str, token: &str) -> CmdResult<i64> {
        if !self.delex {
            return Err(crate::model::error::CmdError {
                kind: crate::model::error::ErrorKind::Server,
                detail: "ERR unknown command 'delex' (model configured without DELEX)".into(),
            });
        }
        self.canonical_cad(key, token).await
    }

    async fn get(&mut self, key: &str) -> CmdResult<Option<String>> {
        self.call(|ks, now| {
            ks.live(key, now)
                .map(|e| e.str().map(Text::to_owned_string))
                .transpose()
        })
        .await
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
            }) => (*t / 1000).saturating_sub(now / 1000) as i64,
        })
        .await
        .pipe(Ok)
    }

    async fn extend(
        &mut self,
        key: &str,
        token: &str,
        ttl_ms: u64,
        how: ExtendCommand,
    ) -> CmdResult<bool> {
        self.call(|ks, now| {
            if how == ExtendCommand::SetIfeq && ttl_ms == 0 {
                return Err(CmdError {
                    kind: ErrorKind::Server,
                    detail: "ERR invalid expire time in 'set' command".into(),
                });
            }
            let Some(e) = ks.live(key, now) else {
                return Ok(false);
            };
            if !e.str()?.is(token) {
                return Ok(false);
            }
            // `PEXPIRE key 0` deletes the key, `SET … PX n` (n ≥ 1) re-arms it.
            if ttl_ms == 0 {
                ks.remove(key);
            } else {
                e.expires_at = Some(after_ms(now, ttl_ms));
            }
            Ok(true)
        })
        .await
    }
}

impl<N: Net> ResourceCommands for MemoryStore<N> {
    async fn set_nx_px_fenced(
        &mut self,
        key: &str,
        fence_key: &str,
        register_at: Option<&str>,
        token: &str,
        ttl_ms: u64,
    ) -> CmdResult<Option<u64>> {
        self.call(|ks, now| {
            // A counter that is not a number fails the INCR; Redis would have set the lock
            // already (scripts do not roll back). lockbench never stores one, so the model
            // simply checks first.
            let current = match ks.live(fence_key, now) {
                None => 0,
                Some(e) => e.str()?.parse_u64().ok_or_else(|| CmdError {
                    kind: ErrorKind::Server,
                    detail: "ERR value is not an integer or out of range".into(),
                })?,
            };
            if ks.live(key, now).is_some() {
                return Ok(None);
            }
            ks.insert(
                key,
                Entry {
                    value: Value::Str(Text::new(token)),
                    expires_at: Some(after_ms(now, ttl_ms)),
                },
            );
            // INCR keeps the counter's TTL (it has none).
            let fence = current + 1;
            let expires_at = ks.expiry(fence_key);
            ks.insert(
                fence_key,
                Entry {
                    value: Value::Str(Text::new(&fence.to_string())),
                    expires_at,
                },
            );
            if let Some(res) = register_at {
                let (value, highest) = Self::resource(ks, res, now)?;
                if fence > highest {
                    Self::set_resource(ks, res, value, fence);
                }
            }
            Ok(Some(fence))
        })
        .await
    }

    async fn resource_read(
        &mut self,
        res_key: &str,
        register_fence: Option<u64>,
    ) -> CmdResult<ReadOutcome> {
        self.call(|ks, now| {
            let (value, fence) = Self::resource(ks, res_key, now)?;
            if let Some(f) = register_fence {
                if f < fence {
                    return Ok(ReadOutcome::Fenced { highest: fence });
                }
                if f > fence {
                    Self::set_resource(ks, res_key, value, f);
                }
            }
            Ok(ReadOutcome::Value(value))
        })
        .await
    }

    async fn resource_write(
        &mut self,
        res_key: &str,
        lock_key: &str,
        token: &str,
        fence: Option<u64>,
        value: u64,
    ) -> CmdResult<WriteOutcome> {
        self.call(|ks, now| {
            if let Some(highest) = Self::write_fenced(ks, res_key, fence, value, now)? {
                return Ok(WriteOutcome::Fenced { highest });
            }
            let (holder, other_holder) = match ks.live(lock_key, now) {
                None => (false, false),
                Some(e) => {
                    let mine = e.str()?.is(token);
                    (mine, !mine)
                }
            };
            Ok(WriteOutcome::Accepted {
                holder,
                other_holder,
            })
        })
        .await
    }

    async fn resource_write_apart(
        &mut self,
        res_key: &str,
        fence: Option<u64>,
        value: u64,
    ) -> CmdResult<WriteOutcome> {
        self.call(|ks, now| {
            Ok(match Self::write_fenced(ks, res_key, fence, value, now)? {
                Some(highest) => WriteOutcome::Fenced { highest },
                None => WriteOutcome::Written,
            })
        })
        .await
    }

    async fn resource_value(&mut self, res_key: &str) -> CmdResult<u64> {
        self.call(|ks, now| Self::resource(ks, res_key, now).map(|(v, _)| v))
            .await
    }
}

impl<N: Net> ServerProbes for MemoryStore<N> {
    async fn supports_command(&mut self, name: &str) -> CmdResult<bool> {
        Ok(match name.to_ascii_uppercase().as_str() {
            "DELEX" => self.delex,
            "SET" | "GETDEL" | "DEL" | "GET" | "EXISTS" | "PTTL" | "EVALSHA" | "EVAL" | "INCR"
            | "HGET" | "HSET" | "HMGET" | "PEXPIRE" | "SETNX" => true,
            _ => false,
        })
    }

    async fn knows_set_ifeq(&mut self) -> CmdResult<bool> {
        // The model extends with SET … IFEQ as Valkey 8.1 does.
        Ok(true)
    }

    async fn server_version(&mut self) -> CmdResult<String> {
        Ok(format!(
            "lockbench-memory-model {}",
            env!("CARGO_PKG_VERSION")
        ))
    }

    async fn dry_run(&mut self, args: &[&str]) -> CmdResult<Result<(), crate::store::Refusal>> {
        // The model has no users: what it knows, anyone may run.
        let name = args.first().copied().unwrap_or_default();
        Ok(
            match self.supports_command(name).await? || name.eq_ignore_ascii_case("SCRIPT") {
                true => Ok(()),
                false => Err(crate::store::Refusal(format!(
                    "Command '{}' not found",
                    name.to_ascii_lowercase()
                ))),
            },
        )
    }

    async fn load_release_script(&mut self) -> CmdResult<()> {
        Ok(())
    }
}

/// No Lua here: the defaults, which say that only a Redis server runs the user's scripts.
impl<N: Net> UserScripts for MemoryStore<N> {}

impl<N: Net> KeySweep for MemoryStore<N> {
    async fn del(&mut self, key: &str) -> CmdResult<i64> {
        self.call(|ks, now| {
            if let Some(e) = ks.live_entry(key, now) {
                e.remove();
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
                    ks.remove(key);
                    n += 1;
                }
            }
            n
        })
        .await
        .pipe(Ok)
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
    use std::time::Duration;

    /// Numbered keys, named keys and long values behave alike.
    #[tokio::test(start_paused = true)]
    async fn numbered_and_named_keys_and_long_values() {
        let mut m = MemoryStore::new(Duration::ZERO, true);
        let long = "t".repeat(Text::INLINE + 1);
        for key in ["k7", "k07", "k:x", "k70"] {
            assert!(m.set_nx_px(key, key, 1000).await.unwrap());
        }
        assert!(m.set_nx_px("k8", &long, 1000).await.unwrap());
        assert_eq!(m.len(), 5);
        for key in ["k7", "k07", "k:x", "k70"] {
            assert_eq!(m.get(key).await.unwrap().as_deref(), Some(key));
        }
        assert_eq!(m.release_script("k8", &long[1..]).await.unwrap(), -1);
        assert_eq!(m.release_script("k8", &long).await.unwrap(), 1);
        assert_eq!(m.release_script("k7", "k07").await.unwrap(), -1);
        assert_eq!(m.release_script("k07", "k07").await.unwrap(), 1);
        assert_eq!(m.get("k7").await.unwrap().as_deref(), Some("k7"));
        assert_eq!(m.del_many(&["k7".into(), "k:x".into()]).await.unwrap(), 2);
        assert_eq!(m.len(), 1);
        m.keyspace().lock().unwrap().clear();
        assert!(m.is_empty());
        assert!(m.set_nx_px("k70", "again", 1000).await.unwrap());
    }

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

    /// Fences from the fenced acquisition strictly increase per fence key, only successful
    /// acquisitions take one, and two keys count independently.
    #[tokio::test(start_paused = true)]
    async fn fences_strictly_increase_per_key() {
        let mut m = MemoryStore::new(Duration::ZERO, true);
        assert_eq!(
            m.set_nx_px_fenced("a", "a:f", None, "t1", 100)
                .await
                .unwrap(),
            Some(1)
        );
        assert_eq!(
            m.set_nx_px_fenced("a", "a:f", None, "t2", 100)
                .await
                .unwrap(),
            None
        );
        assert_eq!(
            m.set_nx_px_fenced("b", "b:f", None, "t1", 100)
                .await
                .unwrap(),
            Some(1)
        );
        tokio::time::advance(Duration::from_millis(101)).await;
        assert_eq!(
            m.set_nx_px_fenced("a", "a:f", None, "t3", 100)
                .await
                .unwrap(),
            Some(2)
        );
        assert_eq!(m.get("a").await.unwrap().as_deref(), Some("t3"));
        // The counter outlives the lock: no TTL.
        assert_eq!(m.pttl("a:f").await.unwrap(), -1);
    }

    /// The lost update of a read-modify-write under each fencing, on hand-built interleavings:
    /// A reads, B reads, A writes, B writes. Without fencing and with write-only fencing both
    /// writes are accepted and the value ends at 1 (one update lost); with read-write fencing
    /// B's read registered fence 2, so A's write (fence 1) is refused and nothing is lost.
    #[tokio::test(start_paused = true)]
    async fn read_modify_write_interleaving_under_each_fencing() {
        // (fence at read, fence at write) per mode.
        for (mode, at_read, at_write) in [
            ("off", false, false),
            ("write", false, true),
            ("read-write", true, true),
        ] {
            let mut m = MemoryStore::new(Duration::ZERO, true);
            let fa = m
                .set_nx_px_fenced("l", "f", None, "A", 10)
                .await
                .unwrap()
                .unwrap();
            tokio::time::advance(Duration::from_millis(11)).await;
            let fb = m
                .set_nx_px_fenced("l", "f", None, "B", 10_000)
                .await
                .unwrap()
                .unwrap();
            assert!(fb > fa);
            let reg = |on: bool, f: u64| on.then_some(f);
            let ReadOutcome::Value(va) = m.resource_read("r", reg(at_read, fa)).await.unwrap()
            else {
                panic!("{mode}: A's read refused before B registered");
            };
            let ReadOutcome::Value(vb) = m.resource_read("r", reg(at_read, fb)).await.unwrap()
            else {
                panic!("{mode}: B's read refused");
            };
            let wa = m
                .resource_write("r", "l", "A", reg(at_write, fa), va + 1)
                .await
                .unwrap();
            let wb = m
                .resource_write("r", "l", "B", reg(at_write, fb), vb + 1)
                .await
                .unwrap();
            assert_eq!(
                wb,
                WriteOutcome::Accepted {
                    holder: true,
                    other_holder: false
                },
                "{mode}"
            );
            let value = m.resource_value("r").await.unwrap();
            assert_eq!(value, 1, "{mode}");
            if at_read {
                assert_eq!(wa, WriteOutcome::Fenced { highest: fb }, "{mode}");
            } else {
                // Accepted from a writer that had lost the lock: unsafe, and lost by B.
                assert_eq!(
                    wa,
                    WriteOutcome::Accepted {
                        holder: false,
                        other_holder: true
                    },
                    "{mode}"
                );
            }
        }
    }

    /// Under read-write fencing a stale holder is refused at its read once a newer holder has
    /// registered, and a refused read or write changes nothing; an equal fence is accepted.
    #[tokio::test(start_paused = true)]
    async fn refused_reads_and_writes_change_nothing() {
        let mut m = MemoryStore::new(Duration::ZERO, true);
        assert_eq!(
            m.resource_read("r", None).await.unwrap(),
            ReadOutcome::Value(0)
        );
        assert_eq!(
            m.resource_read("r", Some(5)).await.unwrap(),
            ReadOutcome::Value(0)
        );
        assert_eq!(
            m.resource_read("r", Some(4)).await.unwrap(),
            ReadOutcome::Fenced { highest: 5 }
        );
        assert_eq!(
            m.resource_write("r", "l", "t", Some(5), 7).await.unwrap(),
            WriteOutcome::Accepted {
                holder: false,
                other_holder: false
            }
        );
        assert_eq!(
            m.resource_write("r", "l", "t", Some(4), 9).await.unwrap(),
            WriteOutcome::Fenced { highest: 5 }
        );
        // Unfenced writes are never refused and leave the fence alone.
        assert_eq!(
            m.resource_write("r", "l", "t", None, 8).await.unwrap(),
            WriteOutcome::Accepted {
                holder: false,
                other_holder: false
            }
        );
        assert_eq!(m.resource_value("r").await.unwrap(), 8);
        assert_eq!(
            m.resource_read("r", Some(4)).await.unwrap(),
            ReadOutcome::Fenced { highest: 5 }
        );
        assert_eq!(
            m.resource_read("r", Some(6)).await.unwrap(),
            ReadOutcome::Value(8)
        );
        // The resource is a hash: string commands refuse it, as Redis does.
        assert!(m.get("r").await.is_err());
        assert_eq!(m.del("r").await.unwrap(), 1);
        assert_eq!(m.resource_value("r").await.unwrap(), 0);
    }

    /// Both extension commands re-arm only the holder's lock, fail after expiry or for another
    /// token, and `SET … IFEQ … PX 0` is an error as on Valkey.
    #[tokio::test(start_paused = true)]
    async fn extension_by_script_and_set_ifeq() {
        for how in [ExtendCommand::Script, ExtendCommand::SetIfeq] {
            let mut m = MemoryStore::new(Duration::ZERO, true);
            assert!(m.set_nx_px("k", "a", 100).await.unwrap());
            tokio::time::advance(Duration::from_millis(60)).await;
            assert!(m.extend("k", "a", 1000, how).await.unwrap(), "{how:?}");
            assert_eq!(m.pttl("k").await.unwrap(), 1000, "{how:?}");
            assert!(!m.extend("k", "b", 1000, how).await.unwrap(), "{how:?}");
            assert_eq!(m.get("k").await.unwrap().as_deref(), Some("a"));
            tokio::time::advance(Duration::from_millis(1001)).await;
            assert!(!m.extend("k", "a", 1000, how).await.unwrap(), "{how:?}");
            assert_eq!(
                m.exists("k").await.unwrap(),
                0,
                "an extension never creates"
            );
        }
        let mut m = MemoryStore::new(Duration::ZERO, true);
        let e = m
            .extend("k", "a", 0, ExtendCommand::SetIfeq)
            .await
            .unwrap_err();
        assert_eq!(e.server_code(), Some("ERR"));
    }
}
