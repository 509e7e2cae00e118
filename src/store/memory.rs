//! An in-process model of exactly the commands lockbench uses, with the same semantics as Redis
//! (millisecond `PX`, lazy expiry, atomic compare-and-delete, the fenced acquisition, resource
//! and extension scripts, `SET … IFEQ` as Valkey answers it) and a configurable simulated round
//! trip. Time comes from the store's [`Net`]: tokio's clock ([`RealNet`], so paused-time tests
//! run it deterministically) or the simulator's virtual clock ([`crate::sim::SimNet`]); the
//! keyspace itself counts µs and never reads a clock.

use super::WriteOutcome;
use super::{Connector, LockConn, ReadOutcome};
use crate::model::error::{CmdError, CmdResult, ErrorKind};
use crate::model::release::ExtendCommand;
use hashbrown::HashMap;
use hashbrown::hash_map::{EntryRef, OccupiedEntry};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

#[derive(Debug)]
struct Entry {
    value: Value,
    /// µs on the store's clock.
    expires_at: Option<u64>,
}

/// The two types of value lockbench stores: strings (locks, fence counters) and the resource
/// hash, modelled by its two fields (an absent field reads as 0, as the scripts read it).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Value {
    Str(Text),
    Resource { value: u64, fence: u64 },
}

/// A string value, kept in its entry when short (a token is about 30 bytes): setting one
/// allocates nothing, and comparing one reads no second cache line.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Text {
    Inline { len: u8, bytes: [u8; Text::INLINE] },
    Heap(Box<str>),
}

impl Text {
    const INLINE: usize = 38;

    fn new(s: &str) -> Self {
        if s.len() <= Self::INLINE {
            let mut bytes = [0; Self::INLINE];
            bytes[..s.len()].copy_from_slice(s.as_bytes());
            Self::Inline {
                len: s.len() as u8,
                bytes,
            }
        } else {
            Self::Heap(s.into())
        }
    }

    fn as_bytes(&self) -> &[u8] {
        match self {
            Self::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Self::Heap(s) => s.as_bytes(),
        }
    }

    /// Whether it is `s`.
    fn is(&self, s: &str) -> bool {
        self.as_bytes() == s.as_bytes()
    }

    fn to_owned_string(&self) -> String {
        // Only ever built from a `&str`: always UTF-8.
        String::from_utf8_lossy(self.as_bytes()).into_owned()
    }

    fn parse_u64(&self) -> Option<u64> {
        std::str::from_utf8(self.as_bytes()).ok()?.parse().ok()
    }
}

fn wrong_type() -> CmdError {
    CmdError {
        kind: ErrorKind::Server,
        detail: "WRONGTYPE Operation against a key holding the wrong kind of value".into(),
    }
}

impl Entry {
    fn str(&self) -> CmdResult<&Text> {
        match &self.value {
            Value::Str(s) => Ok(s),
            Value::Resource { .. } => Err(wrong_type()),
        }
    }
}

/// A key as the keyspace stores it. A name made of a *stem* and a decimal number (lockbench's
/// lock keys: `lockbench:<run>:<variant>:<n>`) is stored as the stem's index and the number:
/// hashed and compared as one word, with no string to allocate, read or compare. Any other name
/// is stored as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Key {
    Num(u64),
    Name(Box<str>),
}

/// A [`Key`] to look up, borrowed from the command.
#[derive(Debug, Clone, Copy)]
enum KeyRef<'a> {
    Num(u64),
    Name(&'a str),
}

impl std::hash::Hash for KeyRef<'_> {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        match self {
            Self::Num(n) => h.write_u64(*n),
            Self::Name(s) => {
                h.write(s.as_bytes());
                h.write_u8(0xff);
            }
        }
    }
}

impl std::hash::Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.borrowed().hash(h);
    }
}

impl Key {
    fn borrowed(&self) -> KeyRef<'_> {
        match self {
            Self::Num(n) => KeyRef::Num(*n),
            Self::Name(s) => KeyRef::Name(s),
        }
    }
}

impl hashbrown::Equivalent<Key> for KeyRef<'_> {
    fn equivalent(&self, key: &Key) -> bool {
        match (self, key) {
            (Self::Num(a), Key::Num(b)) => a == b,
            (Self::Name(a), Key::Name(b)) => *a == &**b,
            _ => false,
        }
    }
}

impl From<KeyRef<'_>> for Key {
    fn from(k: KeyRef<'_>) -> Self {
        match k {
            KeyRef::Num(n) => Self::Num(n),
            KeyRef::Name(s) => Self::Name(s.into()),
        }
    }
}

/// The stems of numbered keys (see [`Key`]). A name is numbered when it ends in 1 to 9 digits
/// without a leading zero (`k7`, not `k07`, which is another key) and its stem is one of the
/// first [`Stems::MAX`] seen; stems are only ever added (until the keyspace is cleared), so a
/// name is always stored the same way.
#[derive(Debug, Default)]
struct Stems {
    names: Vec<Box<str>>,
    /// The stem found last (almost every command uses the same one).
    last: usize,
}

impl Stems {
    const MAX: usize = 64;

    /// How `key` is stored.
    fn key<'a>(&mut self, key: &'a str) -> KeyRef<'a> {
        let b = key.as_bytes();
        let digits = b.iter().rev().take_while(|c| c.is_ascii_digit()).count();
        let at = b.len() - digits;
        if digits == 0 || digits > 9 || (digits > 1 && b[at] == b'0') {
            return KeyRef::Name(key);
        }
        let stem = &key[..at];
        let i = if self.names.get(self.last).is_some_and(|s| **s == *stem) {
            self.last
        } else if let Some(i) = self.names.iter().position(|s| **s == *stem) {
            i
        } else if self.names.len() < Self::MAX {
            self.names.push(stem.into());
            self.names.len() - 1
        } else {
            return KeyRef::Name(key);
        };
        self.last = i;
        let n = b[at..]
            .iter()
            .fold(0u64, |n, c| n * 10 + u64::from(c - b'0'));
        KeyRef::Num((i as u64) << 32 | n)
    }
}

/// The model's keyspace, shared by every connection to it.
#[derive(Debug, Default)]
pub struct Keyspace {
    map: HashMap<Key, Entry, Fx>,
    stems: Stems,
}

/// rustc's FxHash: a multiply-rotate hash, several times faster than the default SipHash on
/// lockbench's 30–60-byte key names. The keys are the run's own, so flooding resistance is not
/// needed.
type Fx = rustc_hash::FxBuildHasher;

/// When a key given `ms` of life at `now` (µs) expires, as Redis keeps it: an absolute time in
/// whole milliseconds (`mstime() + ms`, the clock read in ms, truncated), in µs.
fn after_ms(now: u64, ms: u64) -> u64 {
    (now / 1000).saturating_add(ms).saturating_mul(1000)
}

/// Whether a key expiring at `at` (from [`after_ms`]) is gone at `now`: as Redis checks it,
/// when the millisecond clock has passed the expiry (`mstime() > when`). A lock set with
/// `PX 20` therefore lives between 20 and 21 ms, 20.5 on average — not exactly 20.
fn expired(at: u64, now: u64) -> bool {
    now / 1000 > at / 1000
}

impl Keyspace {
    /// Forgets every key (a server restarted empty).
    pub fn clear(&mut self) {
        self.map.clear();
        self.stems = Stems::default();
    }

    /// How `key` is stored.
    fn key<'a>(&mut self, key: &'a str) -> KeyRef<'a> {
        self.stems.key(key)
    }

    /// Removes `key` (whether live or not).
    fn remove(&mut self, key: &str) {
        let k = self.key(key);
        self.map.remove(&k);
    }

    /// Sets `key` (whether it was there or not).
    fn insert(&mut self, key: &str, e: Entry) {
        let k = self.key(key);
        match self.map.entry_ref(&k) {
            EntryRef::Occupied(mut o) => *o.get_mut() = e,
            EntryRef::Vacant(v) => {
                v.insert_with_key(k.into(), e);
            }
        }
    }

    /// The expiry of `key`, live or not.
    fn expiry(&mut self, key: &str) -> Option<u64> {
        let k = self.key(key);
        self.map.get(&k).and_then(|e| e.expires_at)
    }

    /// `SET key value NX` with an expiry (`None`: none): stores the string unless the key is
    /// live, in one lookup, reusing an expired entry's string.
    fn set_nx(&mut self, key: &str, value: &str, expires_at: Option<u64>, now: u64) -> bool {
        let k = self.key(key);
        let new = || Entry {
            value: Value::Str(Text::new(value)),
            expires_at,
        };
        match self.map.entry_ref(&k) {
            EntryRef::Occupied(mut e) => {
                let e = e.get_mut();
                if !e.expires_at.is_some_and(|t| expired(t, now)) {
                    return false;
                }
                *e = new();
            }
            EntryRef::Vacant(v) => {
                v.insert_with_key(k.into(), new());
            }
        }
        true
    }

    /// Lazy expiry as in Redis: an expired key is absent for every command.
    fn live(&mut self, key: &str, now: u64) -> Option<&mut Entry> {
        self.live_entry(key, now).map(OccupiedEntry::into_mut)
    }

    /// [`Self::live`] as the map's entry (to remove it without a second lookup): one lookup,
    /// where an expired key is removed.
    fn live_entry(&mut self, key: &str, now: u64) -> Option<OccupiedEntry<'_, Key, Entry, Fx>> {
        let k = self.key(key);
        match self.map.entry_ref(&k) {
            EntryRef::Vacant(_) => None,
            EntryRef::Occupied(e) if e.get().expires_at.is_some_and(|t| expired(t, now)) => {
                e.remove();
                None
            }
            EntryRef::Occupied(e) => Some(e),
        }
    }
}

/// How a command reaches the keyspace and its reply comes back: the network and the server's
/// time.
pub trait Net: Clone + Send + Sync + 'static {
    /// Now on the store's clock, µs.
    fn now_us(&self) -> u64;
    /// Runs `f` on the keyspace at the instant the server executes the command (given to `f`),
    /// and completes the round trip.
    fn call<T: Send>(
        &self,
        keys: &Mutex<Keyspace>,
        f: impl FnOnce(&mut Keyspace, u64) -> T + Send,
    ) -> impl Future<Output = T> + Send;
    /// The round trip in words, for the backend's description.
    fn describe(&self) -> String;
    /// The simulator's virtual clock, when this network is simulated.
    fn virtual_clock(&self) -> Option<Arc<std::sync::atomic::AtomicU64>> {
        None
    }
    /// The same network for another simulated part (a clock of its own).
    fn fork(&self) -> Self {
        self.clone()
    }
}

/// tokio's clock and a fixed round trip: the request reaches the model at half of it.
#[derive(Debug, Clone)]
pub struct RealNet {
    rtt: Duration,
    base: Instant,
}

impl Net for RealNet {
    fn now_us(&self) -> u64 {
        self.base.elapsed().as_micros() as u64
    }

    async fn call<T: Send>(
        &self,
        keys: &Mutex<Keyspace>,
        f: impl FnOnce(&mut Keyspace, u64) -> T + Send,
    ) -> T {
        let sent = Instant::now();
        if self.rtt.is_zero() {
            tokio::task::yield_now().await;
        } else {
            tokio::time::sleep_until(sent + self.rtt / 2).await;
        }
        let out = {
            let mut ks = lock(keys);
            f(&mut ks, self.now_us())
        };
        if !self.rtt.is_zero() {
            tokio::time::sleep_until(sent + self.rtt).await;
        }
        out
    }

    fn describe(&self) -> String {
        format!("simulated round trip {:?}", self.rtt)
    }
}

pub(crate) fn lock(keys: &Mutex<Keyspace>) -> std::sync::MutexGuard<'_, Keyspace> {
    // A poisoned mutex only means a panic elsewhere; the map itself is still consistent.
    keys.lock().unwrap_or_else(|p| p.into_inner())
}

/// The model store: a connector and, by cloning, a connection.
#[derive(Debug, Clone)]
pub struct MemoryStore<N = RealNet> {
    keys: Arc<Mutex<Keyspace>>,
    net: N,
    delex: bool,
}

impl MemoryStore<RealNet> {
    /// A fresh empty model whose every command takes `rtt` (the request reaches the model at
    /// half of it). `delex` says whether the model offers `DELEX` (as Redis ≥ 8.4 does).
    pub fn new(rtt: Duration, delex: bool) -> Self {
        Self::with_net(
            RealNet {
                rtt,
                base: Instant::now(),
            },
            delex,
        )
    }
}

impl<N: Net> MemoryStore<N> {
    /// A fresh empty model behind `net`.
    pub fn with_net(net: N, delex: bool) -> Self {
        Self {
            keys: Arc::default(),
            net,
            delex,
        }
    }

    /// Its keyspace (the simulator restarts it).
    pub fn keyspace(&self) -> &Arc<Mutex<Keyspace>> {
        &self.keys
    }

    /// Number of live keys (for tests).
    pub fn len(&self) -> usize {
        let now = self.net.now_us();
        let ks = self.lock();
        ks.map
            .values()
            .filter(|e| !e.expires_at.is_some_and(|t| expired(t, now)))
            .count()
    }

    /// Whether the model holds no live key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Keyspace> {
        lock(&self.keys)
    }

    /// The resource's `(value, fence)`, `(0, 0)` when absent; an error if the key is a string.
    fn resource(ks: &mut Keyspace, key: &str, now: u64) -> CmdResult<(u64, u64)> {
        match ks.live(key, now).map(|e| &e.value) {
            None => Ok((0, 0)),
            Some(Value::Resource { value, fence }) => Ok((*value, *fence)),
            Some(Value::Str(_)) => Err(wrong_type()),
        }
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

    /// Runs `f` on the keyspace at the server's time, then completes the round trip. (The
    /// network's future itself, not an `async fn` around it holding a second copy of `f`.)
    fn call<'a, T: Send + 'a>(
        &'a self,
        f: impl FnOnce(&mut Keyspace, u64) -> T + Send + 'a,
    ) -> impl Future<Output = T> + Send + 'a {
        self.net.call(&self.keys, f)
    }
}

impl<N: Net> Connector for MemoryStore<N> {
    type Conn = MemoryStore<N>;
    async fn connect(&self) -> anyhow::Result<MemoryStore<N>> {
        Ok(self.clone())
    }
    fn describe(&self) -> String {
        format!("memory model ({})", self.net.describe())
    }
    fn virtual_clock(&self) -> Option<Arc<std::sync::atomic::AtomicU64>> {
        self.net.virtual_clock()
    }
    fn fork(&self) -> Option<Self> {
        Some(Self::with_net(self.net.fork(), self.delex))
    }
}

impl<N: Net> LockConn for MemoryStore<N> {
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
            return Err(super::CmdError {
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
            let (_, mut highest) = Self::resource(ks, res_key, now)?;
            if let Some(f) = fence {
                if f < highest {
                    return Ok(WriteOutcome::Fenced { highest });
                }
                highest = f;
            }
            Self::set_resource(ks, res_key, value, highest);
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

    async fn resource_value(&mut self, res_key: &str) -> CmdResult<u64> {
        self.call(|ks, now| Self::resource(ks, res_key, now).map(|(v, _)| v))
            .await
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

    /// A numbered name is stored as its stem and number, anything else by name, and two names
    /// are one key only when they are one string (`k7` is not `k07`).
    #[test]
    fn keys_are_numbered_only_when_that_is_one_to_one() {
        let mut st = Stems::default();
        let num = |k: KeyRef<'_>| match k {
            KeyRef::Num(n) => Some(n),
            KeyRef::Name(_) => None,
        };
        assert_eq!(num(st.key("a:7")), Some(7));
        assert_eq!(num(st.key("a:0")), Some(0));
        assert_eq!(num(st.key("a:123456789")), Some(123_456_789));
        assert_eq!(num(st.key("b:7")), Some(1 << 32 | 7));
        assert_eq!(num(st.key("a:7")), Some(7));
        for named in ["a:07", "a:00", "a:1234567890", "a:7:fence", "a:", "", "7x"] {
            assert_eq!(num(st.key(named)), None, "{named}");
        }
        assert_eq!(
            num(st.key("7")),
            Some(2 << 32 | 7),
            "an empty stem is a stem"
        );
        for i in 3..Stems::MAX {
            assert!(num(st.key(&format!("s{i}:1"))).is_some());
        }
        assert_eq!(
            num(st.key("full:1")),
            None,
            "past the stems' limit, by name"
        );
        assert_eq!(num(st.key("b:8")), Some(1 << 32 | 8));
    }

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
