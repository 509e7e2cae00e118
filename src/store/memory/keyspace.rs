//! The model's keyspace: entries and their values, the compact key encoding (numbered keys
//! stored as a stem's index and a number), the hasher, and Redis's millisecond expiry rules.
//! It counts µs and never reads a clock: every operation is given the server's time by the
//! network model ([`super::net`]), so the same keyspace serves real and virtual time.

use crate::model::error::{CmdError, CmdResult, ErrorKind};
use hashbrown::HashMap;
use hashbrown::hash_map::{EntryRef, OccupiedEntry};
use std::sync::Mutex;

#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) value: Value,
    /// µs on the store's clock.
    pub(crate) expires_at: Option<u64>,
}

/// The two types of value lockbench stores: strings (locks, fence counters) and the resource
/// hash, modelled by its two fields (an absent field reads as 0, as the scripts read it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value {
    Str(Text),
    Resource { value: u64, fence: u64 },
}

/// A string value, kept in its entry when short (a token is about 30 bytes): setting one
/// allocates nothing, and comparing one reads no second cache line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Text {
    Inline { len: u8, bytes: [u8; Text::INLINE] },
    Heap(Box<str>),
}

impl Text {
    pub(crate) const INLINE: usize = 38;

    pub(crate) fn new(s: &str) -> Self {
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
    pub(crate) fn is(&self, s: &str) -> bool {
        self.as_bytes() == s.as_bytes()
    }

    pub(crate) fn to_owned_string(&self) -> String {
        // Only ever built from a `&str`: always UTF-8.
        String::from_utf8_lossy(self.as_bytes()).into_owned()
    }

    pub(crate) fn parse_u64(&self) -> Option<u64> {
        std::str::from_utf8(self.as_bytes()).ok()?.parse().ok()
    }
}

pub(crate) fn wrong_type() -> CmdError {
    CmdError {
        kind: ErrorKind::Server,
        detail: "WRONGTYPE Operation against a key holding the wrong kind of value".into(),
    }
}

impl Entry {
    pub(crate) fn str(&self) -> CmdResult<&Text> {
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
pub(crate) enum Key {
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
    pub(crate) map: HashMap<Key, Entry, Fx>,
    stems: Stems,
}

/// rustc's FxHash: a multiply-rotate hash, several times faster than the default SipHash on
/// lockbench's 30–60-byte key names. The keys are the run's own, so flooding resistance is not
/// needed.
pub(crate) type Fx = rustc_hash::FxBuildHasher;

/// When a key given `ms` of life at `now` (µs) expires, as Redis keeps it: an absolute time in
/// whole milliseconds (`mstime() + ms`, the clock read in ms, truncated), in µs.
pub(crate) fn after_ms(now: u64, ms: u64) -> u64 {
    (now / 1000).saturating_add(ms).saturating_mul(1000)
}

/// Whether a key expiring at `at` (from [`after_ms`]) is gone at `now`: as Redis checks it,
/// when the millisecond clock has passed the expiry (`mstime() > when`). A lock set with
/// `PX 20` therefore lives between 20 and 21 ms, 20.5 on average — not exactly 20.
pub(crate) fn expired(at: u64, now: u64) -> bool {
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
    pub(crate) fn remove(&mut self, key: &str) {
        let k = self.key(key);
        self.map.remove(&k);
    }

    /// Sets `key` (whether it was there or not).
    pub(crate) fn insert(&mut self, key: &str, e: Entry) {
        let k = self.key(key);
        match self.map.entry_ref(&k) {
            EntryRef::Occupied(mut o) => *o.get_mut() = e,
            EntryRef::Vacant(v) => {
                v.insert_with_key(k.into(), e);
            }
        }
    }

    /// The expiry of `key`, live or not.
    pub(crate) fn expiry(&mut self, key: &str) -> Option<u64> {
        let k = self.key(key);
        self.map.get(&k).and_then(|e| e.expires_at)
    }

    /// `SET key value NX` with an expiry (`None`: none): stores the string unless the key is
    /// live, in one lookup, reusing an expired entry's string.
    pub(crate) fn set_nx(
        &mut self,
        key: &str,
        value: &str,
        expires_at: Option<u64>,
        now: u64,
    ) -> bool {
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
    pub(crate) fn live(&mut self, key: &str, now: u64) -> Option<&mut Entry> {
        self.live_entry(key, now).map(OccupiedEntry::into_mut)
    }

    /// [`Self::live`] as the map's entry (to remove it without a second lookup): one lookup,
    /// where an expired key is removed.
    pub(crate) fn live_entry(
        &mut self,
        key: &str,
        now: u64,
    ) -> Option<OccupiedEntry<'_, Key, Entry, Fx>> {
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

pub(crate) fn lock(keys: &Mutex<Keyspace>) -> std::sync::MutexGuard<'_, Keyspace> {
    // A poisoned mutex only means a panic elsewhere; the map itself is still consistent.
    keys.lock().unwrap_or_else(|p| p.into_inner())
}

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
}
