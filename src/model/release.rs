//! Release methods and the classification of their replies.
//!
//! | method | command | what a stale release does |
//! |---|---|---|
//! | `del` | `GETDEL key` (same effect as `DEL`) | deletes whatever is there — possibly another holder's lock |
//! | `token` | compare-and-delete script (`EVALSHA`, `EVAL` on `NOSCRIPT`) | refused; tells *expired* from *held-by-other* |
//! | `delex` | `DELEX key IFEQ token` (Redis ≥ 8.4) | refused; cannot tell why |
//! | `script` | the user's own Lua release script (`EVALSHA`) | what the script does: lockbench's timeline judges it |
//!
//! A naive holder writes a unique token too: the value does not change what `DEL` does, and
//! `GETDEL` hands it back so a wrongful delete is attributed exactly.

use std::fmt;
use std::str::FromStr;

/// How a holder releases its lock.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum ReleaseMethod {
    /// Unconditional delete: the bug.
    Del,
    /// Compare-and-delete in one atomic Lua step: the fix.
    Token,
    /// `DELEX key IFEQ token`, Redis ≥ 8.4.
    Delex,
    /// The user's own release script (the profile's `release_script`, see
    /// [`crate::model::script`]), with its acquire and extend scripts where given.
    Script,
}

impl ReleaseMethod {
    /// Every method, in report order.
    pub const ALL: [ReleaseMethod; 4] = [Self::Del, Self::Token, Self::Delex, Self::Script];

    /// The name used in profiles, flags and reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Del => "del",
            Self::Token => "token",
            Self::Delex => "delex",
            Self::Script => "script",
        }
    }
}

impl fmt::Display for ReleaseMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ReleaseMethod {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "del" => Ok(Self::Del),
            "token" => Ok(Self::Token),
            "delex" => Ok(Self::Delex),
            "script" => Ok(Self::Script),
            other => Err(format!(
                "unknown release method `{other}`: use del, token, delex or script (your own release_script)"
            )),
        }
    }
}

/// What a release did, as told by the server's reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReleaseOutcome {
    /// The holder's own lock was deleted.
    Released,
    /// `del` removed **another holder's** lock.
    WrongfulDelete,
    /// `del` found no key (it had expired): nothing deleted.
    NothingDeleted,
    /// A token-checked release refused: the key had expired.
    RefusedExpired,
    /// A token-checked release refused: another holder's token was there.
    RefusedHeldByOther,
    /// A token-checked release refused, the method cannot tell why (`delex`).
    RefusedUnclassified,
}

impl ReleaseOutcome {
    /// Every outcome, in report order.
    pub const ALL: [ReleaseOutcome; 6] = [
        Self::Released,
        Self::WrongfulDelete,
        Self::NothingDeleted,
        Self::RefusedExpired,
        Self::RefusedHeldByOther,
        Self::RefusedUnclassified,
    ];

    /// Stable snake_case name for CSV rows.
    pub fn name(self) -> &'static str {
        match self {
            Self::Released => "released",
            Self::WrongfulDelete => "wrongful_delete",
            Self::NothingDeleted => "nothing_deleted",
            Self::RefusedExpired => "refused_expired",
            Self::RefusedHeldByOther => "refused_held_by_other",
            Self::RefusedUnclassified => "refused_unclassified",
        }
    }

    /// The release found the holder's key gone (expired, or deleted by a naive holder): it was
    /// stale.
    pub fn is_stale(self) -> bool {
        self != Self::Released
    }

    /// A token-checked release that deleted nothing.
    pub fn is_refused(self) -> bool {
        matches!(
            self,
            Self::RefusedExpired | Self::RefusedHeldByOther | Self::RefusedUnclassified
        )
    }
}

/// Why a release found the holder's key no longer holding its token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LostKey {
    /// The TTL had run out since the `SET` was sent: the key may have expired at the server.
    /// This is a *stale release*.
    Expired,
    /// Released before the key could have expired (the server's expiry counts from when it
    /// ran the `SET`, after it was sent), so another holder's naive `DEL` removed it.
    DeletedByOther,
}

/// Which instant of a release decides whether its key could have expired: the rule a run's
/// summary was counted with, so `lockbench report` recounts it the same way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StaleRule {
    /// The release's reply (since lockbench 0.1 with the figures table): the server ran the
    /// release somewhere in its round trip.
    #[default]
    Reply,
    /// The release's send time, as summaries written before then counted.
    Send,
}

/// Classifies a release that found its key gone, from the time its `SET` was sent, the time
/// the release's reply arrived and the TTL (all µs on the same clock).
///
/// Why the reply and not the send: the server ran the release somewhere in its round trip,
/// so a key can expire while the release is on its way. Only a release that was answered
/// before the key could have expired proves that someone else deleted it.
pub(crate) fn lost_key(set_sent_us: u64, reply_us: u64, ttl_us: u64) -> LostKey {
    if reply_us >= set_sent_us.saturating_add(ttl_us) {
        LostKey::Expired
    } else {
        LostKey::DeletedByOther
    }
}

/// What one classified release adds to the figures besides its outcome's own counter. The
/// live run and `lockbench report`'s recount both tally through this, so they cannot drift.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    /// A stale release: the key was gone after its TTL ran out.
    pub stale: bool,
    /// … by a section that did not overrun.
    pub stale_without_overrun: bool,
    /// The key was gone before it could expire: another holder's naive `DEL`.
    pub deleted_by_other: bool,
}

/// Tallies a release: `overrun` is d > TTL; the times (µs, one clock: the `SET` sent, the
/// release's reply received) place a missing key.
pub(crate) fn tally(
    o: ReleaseOutcome,
    overrun: bool,
    set_sent_us: u64,
    reply_us: u64,
    ttl_us: u64,
) -> Tally {
    if !o.is_stale() {
        return Tally::default();
    }
    match lost_key(set_sent_us, reply_us, ttl_us) {
        LostKey::Expired => Tally {
            stale: true,
            stale_without_overrun: !overrun,
            deleted_by_other: false,
        },
        LostKey::DeletedByOther => Tally {
            deleted_by_other: true,
            ..Tally::default()
        },
    }
}

/// Classifies the value `GETDEL` returned for a holder with token `own`.
pub(crate) fn classify_getdel(removed: Option<&str>, own: &str) -> ReleaseOutcome {
    match removed {
        None => ReleaseOutcome::NothingDeleted,
        Some(v) if v == own => ReleaseOutcome::Released,
        Some(_) => ReleaseOutcome::WrongfulDelete,
    }
}

/// Classifies the release script's reply (`1` deleted, `0` absent, `-1` held by another).
pub(crate) fn classify_script(reply: i64) -> ReleaseOutcome {
    match reply {
        1 => ReleaseOutcome::Released,
        0 => ReleaseOutcome::RefusedExpired,
        _ => ReleaseOutcome::RefusedHeldByOther,
    }
}

/// Classifies a `DELEX key IFEQ token` reply (`1` deleted, `0` refused).
pub(crate) fn classify_delex(reply: i64) -> ReleaseOutcome {
    if reply == 1 {
        ReleaseOutcome::Released
    } else {
        ReleaseOutcome::RefusedUnclassified
    }
}

/// The command that re-arms a held lock (`LockCommands::extend` in the store).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum ExtendCommand {
    /// Compare-and-`PEXPIRE` in a script (the store's `EXTEND_LUA`): every Redis with scripting.
    Script,
    /// `SET key token IFEQ token PX ttl`: one command, no script, on Valkey ≥ 8.1 and
    /// Redis ≥ 8.4. `PX` is always sent: without it `SET` would drop the TTL.
    SetIfeq,
}

impl ExtendCommand {
    /// Stable kebab-case name (`script`, `set-ifeq`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Script => "script",
            Self::SetIfeq => "set-ifeq",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replies map to outcomes; only a foreign value removed by `del` is a wrongful delete.
    #[test]
    fn classifies_replies() {
        assert_eq!(classify_getdel(Some("a"), "a"), ReleaseOutcome::Released);
        assert_eq!(
            classify_getdel(Some("b"), "a"),
            ReleaseOutcome::WrongfulDelete
        );
        assert_eq!(classify_getdel(None, "a"), ReleaseOutcome::NothingDeleted);
        assert_eq!(classify_script(1), ReleaseOutcome::Released);
        assert_eq!(classify_script(0), ReleaseOutcome::RefusedExpired);
        assert_eq!(classify_script(-1), ReleaseOutcome::RefusedHeldByOther);
        assert_eq!(classify_delex(0), ReleaseOutcome::RefusedUnclassified);
        assert!(ReleaseOutcome::WrongfulDelete.is_stale());
        assert!(!ReleaseOutcome::WrongfulDelete.is_refused());
        assert!(ReleaseOutcome::RefusedExpired.is_refused());
    }

    /// A key gone before its TTL could have run out was deleted by another holder; after, it
    /// may have expired (a stale release).
    #[test]
    fn lost_keys_are_classified_by_time() {
        assert_eq!(lost_key(1_000, 21_000, 20_000), LostKey::Expired);
        assert_eq!(lost_key(1_000, 20_999, 20_000), LostKey::DeletedByOther);
        assert_eq!(lost_key(u64::MAX, 5, 20_000), LostKey::DeletedByOther);
    }

    /// A release is stale only when its key was gone after the TTL ran out; gone earlier means
    /// another holder deleted it; a released lock adds nothing.
    #[test]
    fn tallies_releases() {
        let t = |o, overrun, released| tally(o, overrun, 1_000, released, 20_000);
        assert_eq!(t(ReleaseOutcome::Released, true, 30_000), Tally::default());
        let stale = t(ReleaseOutcome::RefusedExpired, true, 30_000);
        assert!(stale.stale && !stale.stale_without_overrun && !stale.deleted_by_other);
        assert!(t(ReleaseOutcome::RefusedHeldByOther, false, 21_000).stale_without_overrun);
        let early = t(ReleaseOutcome::NothingDeleted, false, 10_000);
        assert!(early.deleted_by_other && !early.stale);
    }

    /// Method names parse and print the same; unknown ones say what is valid.
    #[test]
    fn method_names() {
        for m in ReleaseMethod::ALL {
            assert_eq!(m.name().parse::<ReleaseMethod>().unwrap(), m);
        }
        assert!(
            "lua"
                .parse::<ReleaseMethod>()
                .unwrap_err()
                .contains("del, token, delex or script")
        );
    }
}
