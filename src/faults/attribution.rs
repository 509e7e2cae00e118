//! The attribution of a lock library's deletes at the server: the values each holder set, and
//! what each holder's `DEL` (sent as `GETDEL`) removed — its own lock, another holder's (a
//! wrongful delete, attributed), or nothing. One [`Ledger`] per variant, written by its
//! holders' watches on the wire ([`super::watch`]) or by what their drivers' taps told
//! ([`Ledger::tapped`]), read at each release and at the variant's end.

use super::resp::Seen;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Instant;

/// Values remembered per key: the newest set is the one a delete can remove; a few older
/// ones cover a value registered from a `held` event after a newer `SET` was seen.
const VALUES_PER_KEY: usize = 8;
/// Attributed deletes kept for the summary (the count is exact beyond it).
const KEPT: usize = 1000;

/// A value a delete removed, as the watch attributes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Removed {
    /// The deleting holder's own lock.
    Own,
    /// Holder `victim`'s lock.
    Other(usize),
    /// A value no holder of this process set.
    Unknown,
    /// There was no key.
    Nothing,
}

/// A wrongful delete: whose lock, deleted by whom, when.
#[derive(Debug, Clone)]
pub(crate) struct Attributed {
    /// The holder whose delete removed it.
    pub(crate) deleter: usize,
    /// The holder that set the value (`None`: unknown).
    pub(crate) victim: Option<usize>,
    /// The lock's key.
    pub(crate) key: String,
    /// When the watch saw the reply (a tap: when lockbench read the driver's line that told it).
    pub(crate) at: Instant,
}

/// What every holder's watch saw in one variant.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    book: Mutex<Book>,
}

/// A delete's removal: the key, the value removed (`None`: no key), when it was seen.
type Removal = (String, Option<Vec<u8>>, Instant);

/// The ledger's contents, under its lock.
#[derive(Debug, Default)]
struct Book {
    /// Per key, the newest values set and by whom.
    owners: HashMap<String, VecDeque<(Vec<u8>, usize)>>,
    /// Per holder, the removals its deletes made that no release has taken yet.
    pending: HashMap<usize, Vec<Removal>>,
    /// Wrongful deletes, the first [`KEPT`].
    attributed: Vec<Attributed>,
    /// Removals outside any release (taken with a later one of another key).
    outside: u64,
    getdels: u64,
    /// Wrongful deletes of a value no holder was known to have set when the release was
    /// judged, by index in `attributed`, with the value: a driver's tap tells a victim's `SET`
    /// on its own line, which can reach lockbench after the deleter's (two processes, or two
    /// connections of one), so the victim is named when that `SET` is told (or, failing that,
    /// from the key's last values at the tally).
    unnamed: Vec<(usize, Vec<u8>)>,
}

impl Book {
    /// The holder that last set `value` on `key`, among the key's remembered values.
    fn setter(&self, key: &str, value: &[u8]) -> Option<usize> {
        let vals = self.owners.get(key)?;
        vals.iter().rev().find(|(v, _)| v == value).map(|&(_, h)| h)
    }
}

/// What the watches of a variant counted.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tally {
    /// `GETDEL`s sent in place of a `DEL`.
    pub(crate) getdels: u64,
    /// Wrongful deletes attributed (the first [`KEPT`] of them).
    pub(crate) attributed: Vec<Attributed>,
    /// Removals not made by a release lockbench asked for (an acquisition given up and
    /// released later by the library).
    pub(crate) outside: u64,
}

impl Ledger {
    /// Holder `holder` set `value` on `key`.
    pub(crate) fn set(&self, holder: usize, key: &str, value: &[u8]) {
        let mut b = self.book.lock().unwrap_or_else(|p| p.into_inner());
        // The key is copied only the first time it is seen (a set a cycle is worth no
        // allocation beyond its value).
        if !b.owners.contains_key(key) {
            b.owners.insert(key.to_string(), VecDeque::new());
        }
        let Some(vals) = b.owners.get_mut(key) else {
            return;
        };
        if vals.iter().any(|(v, h)| v == value && *h == holder) {
            return;
        }
        if vals.len() == VALUES_PER_KEY {
            vals.pop_front();
        }
        vals.push_back((value.to_vec(), holder));
        // A wrongful delete of this value, judged before its setter's line came: named now,
        // while the key's values still hold it.
        if !b.unnamed.is_empty() {
            let book = &mut *b;
            book.unnamed.retain(|(at, v)| {
                let a = &mut book.attributed[*at];
                let named = v == value && a.key == key && a.deleter != holder;
                if named {
                    a.victim = Some(holder);
                }
                !named
            });
        }
    }

    /// What holder `holder`'s tap saw, in its driver process ([`crate::client::line::Tapped`]),
    /// as its watch would have seen it on the wire.
    pub(crate) fn tapped(&self, holder: usize, seen: &[crate::client::line::Tapped]) {
        use crate::client::line::{TapKind, Tapped};
        for Tapped(what, key, value) in seen {
            match what {
                TapKind::Set => self.set(holder, key, value.as_deref().unwrap_or("").as_bytes()),
                TapKind::Del => self.seen(
                    holder,
                    Seen::Removed {
                        key: key.clone(),
                        value: value.as_ref().map(|v| v.as_bytes().to_vec()),
                    },
                ),
                TapKind::Other => {}
            }
        }
    }

    /// What a watched connection's reply told ([`super::resp::Replies::feed`]).
    pub(super) fn seen(&self, holder: usize, s: Seen) {
        match s {
            Seen::Set { key, value } => self.set(holder, &key, &value),
            Seen::Removed { key, value } => {
                let mut b = self.book.lock().unwrap_or_else(|p| p.into_inner());
                b.getdels += 1;
                b.pending
                    .entry(holder)
                    .or_default()
                    .push((key, value, Instant::now()));
            }
        }
    }

    /// What holder `holder`'s release of `key` removed (`None`: it sent no `DEL`): its removals
    /// since its last release are taken; the last on `key` is this release's. A wrongful one
    /// is attributed.
    pub(crate) fn release(&self, holder: usize, key: &str) -> Option<Removed> {
        let mut b = self.book.lock().unwrap_or_else(|p| p.into_inner());
        let taken = b.pending.remove(&holder).unwrap_or_default();
        let mut found = None;
        for (k, value, at) in taken {
            if k != key {
                b.outside += 1;
                continue;
            }
            if found.is_some() {
                b.outside += 1;
            }
            found = Some((value, at));
        }
        let (value, at) = found?;
        let Some(value) = value else {
            return Some(Removed::Nothing);
        };
        let removed = match b.setter(key, &value) {
            Some(h) if h == holder => return Some(Removed::Own),
            Some(h) => Removed::Other(h),
            None => Removed::Unknown,
        };
        if b.attributed.len() < KEPT {
            if matches!(removed, Removed::Unknown) {
                let at = b.attributed.len();
                b.unnamed.push((at, value));
            }
            b.attributed.push(Attributed {
                deleter: holder,
                victim: match removed {
                    Removed::Other(h) => Some(h),
                    _ => None,
                },
                key: key.to_string(),
                at,
            });
        }
        Some(removed)
    }

    /// What the watches counted; removals no release took count as outside.
    pub(crate) fn tally(&self) -> Tally {
        let mut b = self.book.lock().unwrap_or_else(|p| p.into_inner());
        let book = &mut *b;
        for (at, value) in std::mem::take(&mut book.unnamed) {
            let victim = book.setter(&book.attributed[at].key, &value);
            let a = &mut book.attributed[at];
            a.victim = victim.filter(|&h| h != a.deleter);
        }
        Tally {
            getdels: b.getdels,
            attributed: b.attributed.clone(),
            outside: b.outside + b.pending.values().map(|v| v.len() as u64).sum::<u64>(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A driver's tap tells what its holder set and removed on the holder's own lines, which
    /// can reach lockbench in another order than the server ran them: holder 1's delete of
    /// holder 0's value, told before holder 0's `SET` was, is a wrongful delete at once (the
    /// value is not holder 1's), its victim named when holder 0's `SET` is told — however many
    /// values the key took since; a holder's removal of its own value is its release, and a
    /// delete that found nothing deleted nothing.
    #[test]
    fn a_tap_s_removals_are_judged_whatever_order_the_lines_come_in() {
        use crate::client::line::{TapKind, Tapped};
        let t = |what: &str, value: Option<&str>| {
            let what = if what == "set" {
                TapKind::Set
            } else {
                TapKind::Del
            };
            Tapped(what, "lb:k".into(), value.map(str::to_string))
        };
        let ledger = Ledger::default();
        ledger.tapped(1, &[t("set", Some("v1")), t("del", Some("v0"))]);
        assert!(matches!(ledger.release(1, "lb:k"), Some(Removed::Unknown)));
        ledger.tapped(0, &[t("set", Some("v0"))]);
        // A busy key: more values set since than the key remembers (the victim is named as
        // its value is told, not looked for at the tally).
        for i in 0..=VALUES_PER_KEY {
            ledger.tapped(5, &[t("set", Some(&format!("w{i}")))]);
        }
        ledger.tapped(0, &[t("del", None)]);
        assert!(matches!(ledger.release(0, "lb:k"), Some(Removed::Nothing)));
        ledger.tapped(2, &[t("set", Some("v2")), t("del", Some("v2"))]);
        assert!(matches!(ledger.release(2, "lb:k"), Some(Removed::Own)));
        // A holder that sent no DEL (a compare-and-delete script): nothing to judge.
        assert!(ledger.release(3, "lb:k").is_none());
        let tally = ledger.tally();
        assert_eq!(tally.getdels, 3);
        assert_eq!(tally.attributed.len(), 1);
        let a = &tally.attributed[0];
        assert_eq!((a.deleter, a.victim), (1, Some(0)));
    }
}
