//! Redlock as lockbench measures it: one lock over N independent Redis servers, held only
//! with a majority of them and time left (redsync's algorithm and defaults). This module is
//! the pure part — the profile fields' validation, the quorum and validity decision, how the
//! per-instance replies of a release or an extension combine, and the summary block; the
//! connector that sends the commands is [`crate::store::redlock`].
//!
//! | step | what | redsync's default |
//! |---|---|---|
//! | acquire | `SET key token NX PX ttl` on every instance at once, each bounded by the per-instance timeout | timeout 0.05 × TTL |
//! | decide | held iff ≥ N/2 + 1 instances said OK **and** validity = TTL − elapsed − drift > 0 | drift 0.01 × TTL + 2 ms |
//! | give up | the token script on every instance (undoes the partial acquisition); the worker sees *busy* | |
//! | release | the token script on every instance, replies combined by [`combine_release`] | |
//! | extend | the extension on every instance, re-armed iff a majority re-armed ([`combine_extend`]) | |

use crate::model::error::{CmdError, CmdResult, ErrorKind};
use serde::{Deserialize, Serialize};

/// redsync's per-instance timeout factor: each instance gets 0.05 × TTL to answer.
pub(crate) const TIMEOUT_FACTOR: f64 = 0.05;
/// redsync's drift factor: 0.01 × TTL (plus [`DRIFT_FIXED_US`]) of clock drift allowance.
pub(crate) const DRIFT_FACTOR: f64 = 0.01;
/// redsync's fixed drift allowance, µs (2 ms).
pub(crate) const DRIFT_FIXED_US: u64 = 2_000;
/// Most instances a run may name (every worker opens one connection to each).
pub(crate) const MAX_INSTANCES: usize = 31;

/// A validated redlock setup (`lock = "redlock"`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RedlockPlan {
    /// Number of instances (spawned, or the URLs).
    pub instances: usize,
    /// Existing servers, one per instance (empty: `instances` private servers are spawned).
    /// Stored redacted.
    #[serde(serialize_with = "ser_urls")]
    pub urls: Vec<String>,
    /// The majority: N/2 + 1.
    pub quorum: usize,
    /// Per-instance timeout, µs (`None`: 0.05 × the TTL of each acquisition).
    pub instance_timeout_us: Option<u64>,
}

fn ser_urls<S: serde::Serializer>(v: &[String], s: S) -> Result<S::Ok, S::Error> {
    v.iter()
        .map(|u| crate::target::redact_url(u))
        .collect::<Vec<_>>()
        .serialize(s)
}

/// The majority of `n` instances.
pub(crate) fn quorum(n: usize) -> usize {
    n / 2 + 1
}

/// The per-instance timeout for a TTL, µs: the profile's, or 0.05 × TTL (at least 1 ms).
pub(crate) fn instance_timeout_us(fixed: Option<u64>, ttl_ms: u64) -> u64 {
    fixed.unwrap_or_else(|| ((ttl_ms as f64 * 1000.0 * TIMEOUT_FACTOR) as u64).max(1_000))
}

/// The clock-drift allowance for a TTL, µs: 0.01 × TTL + 2 ms.
pub(crate) fn drift_us(ttl_ms: u64) -> u64 {
    (ttl_ms as f64 * 1000.0 * DRIFT_FACTOR) as u64 + DRIFT_FIXED_US
}

/// What an acquisition round decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// A majority said OK with time left: held for `validity_us` more.
    Held {
        /// TTL − elapsed − drift, µs.
        validity_us: u64,
    },
    /// Fewer than a majority said OK.
    NoQuorum,
    /// A majority said OK, but the round took so long that no validity is left.
    ValidityExpired,
}

/// Decides a round: `acquired` instances said OK, the round took `elapsed_us`.
pub(crate) fn decide(acquired: usize, quorum: usize, elapsed_us: u64, ttl_ms: u64) -> Decision {
    if acquired < quorum {
        return Decision::NoQuorum;
    }
    let budget = ttl_ms.saturating_mul(1000);
    match budget.checked_sub(elapsed_us + drift_us(ttl_ms)) {
        Some(v) if v > 0 => Decision::Held { validity_us: v },
        _ => Decision::ValidityExpired,
    }
}

/// Combines the token script's per-instance replies (`1` deleted, `0` absent, `-1` another
/// token) into the one reply [`crate::model::release::classify_script`] classifies:
///
/// - `1` (*released*) when the holder's key was deleted on a majority: it still held the lock;
/// - otherwise the lock was already lost as a lock: `-1` (*refused, held by other*) when any
///   instance held another token — another holder may be inside —, else `0` (*refused,
///   expired*);
/// - an error (the first one) when errors leave it undecided: fewer than a majority deleted,
///   but with the failed instances it could have been one.
pub(crate) fn combine_release(replies: &[CmdResult<i64>], quorum: usize) -> CmdResult<i64> {
    let deleted = replies.iter().filter(|r| matches!(r, Ok(1))).count();
    let other = replies.iter().any(|r| matches!(r, Ok(n) if *n < 0));
    let errors = replies.iter().filter(|r| r.is_err()).count();
    if deleted >= quorum {
        return Ok(1);
    }
    if deleted + errors >= quorum
        && let Some(Err(e)) = replies.iter().find(|r| r.is_err())
    {
        return Err(e.clone());
    }
    Ok(if other { -1 } else { 0 })
}

/// Combines per-instance extensions: re-armed iff a majority re-armed; an error when errors
/// leave it undecided (as [`combine_release`]).
pub(crate) fn combine_extend(replies: &[CmdResult<bool>], quorum: usize) -> CmdResult<bool> {
    let ok = replies.iter().filter(|r| matches!(r, Ok(true))).count();
    let errors = replies.iter().filter(|r| r.is_err()).count();
    if ok >= quorum {
        return Ok(true);
    }
    if ok + errors >= quorum
        && let Some(Err(e)) = replies.iter().find(|r| r.is_err())
    {
        return Err(e.clone());
    }
    Ok(false)
}

/// The error of an instance that did not answer within the per-instance timeout.
pub(crate) fn instance_timeout(instance: usize, timeout_us: u64) -> CmdError {
    CmdError {
        kind: ErrorKind::Timeout,
        detail: format!(
            "redlock instance {instance} did not answer within its {} timeout",
            crate::model::units::fmt_us(timeout_us, crate::model::units::Style::Compact)
        ),
    }
}

/// The summary's `redlock` block: what the quorum did during one variant.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RedlockFigures {
    /// Number of instances.
    pub instances: usize,
    /// Majority needed to hold: N/2 + 1.
    pub quorum: usize,
    /// Per-instance timeout of an acquisition, ms.
    pub instance_timeout_ms: f64,
    /// Clock-drift allowance subtracted from the validity, ms.
    pub drift_ms: f64,
    /// Acquisition rounds (a `SET NX PX` to every instance).
    pub acquisitions_attempted: u64,
    /// Rounds that held the lock (majority and validity left).
    pub acquired: u64,
    /// Rounds with fewer than a majority of OKs (the worker treats them as busy).
    pub failed_quorums: u64,
    /// Rounds with a majority but no validity left (treated as busy too).
    pub validity_expired: u64,
    /// Failed commands per instance (index = instance), every kind, timeouts included.
    pub instance_errors: Vec<u64>,
    /// Of those, replies missing the per-instance timeout (or the command timeout).
    pub instance_timeouts: Vec<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err() -> CmdError {
        CmdError {
            kind: ErrorKind::Timeout,
            detail: "t".into(),
        }
    }

    /// Held needs a majority and validity left; redsync's numbers (TTL 1 s: drift 12 ms).
    #[test]
    fn quorum_and_validity() {
        assert_eq!([1, 2, 3, 4, 5, 6].map(quorum), [1, 2, 2, 3, 3, 4]);
        assert_eq!(drift_us(1_000), 12_000);
        assert_eq!(instance_timeout_us(None, 1_000), 50_000);
        assert_eq!(instance_timeout_us(Some(7_000), 1_000), 7_000);
        assert_eq!(
            decide(3, 3, 100_000, 1_000),
            Decision::Held {
                validity_us: 888_000
            }
        );
        assert_eq!(decide(2, 3, 0, 1_000), Decision::NoQuorum);
        assert_eq!(decide(5, 3, 988_000, 1_000), Decision::ValidityExpired);
        assert_eq!(
            decide(5, 3, 987_999, 1_000),
            Decision::Held { validity_us: 1 }
        );
    }

    /// A release is `released` only with the key deleted on a majority; another token
    /// anywhere makes a lost lock *held by other*; errors that could have made the majority
    /// leave it an error. The naive control: counting any deletion as released would call a
    /// lock deleted on 2 of 5 instances released, which this refuses.
    #[test]
    fn release_replies_combine() {
        let r = |v: &[i64]| v.iter().map(|&n| Ok(n)).collect::<Vec<CmdResult<i64>>>();
        assert_eq!(combine_release(&r(&[1, 1, 1, 0, 0]), 3).unwrap(), 1);
        assert_eq!(combine_release(&r(&[1, 1, 0, -1, -1]), 3).unwrap(), -1);
        assert_eq!(combine_release(&r(&[1, 1, 0, 0, 0]), 3).unwrap(), 0);
        assert_eq!(combine_release(&r(&[0, 0, 0, 0, 0]), 3).unwrap(), 0);
        let mut mixed = r(&[1, 1, 0, 0]);
        mixed.push(Err(err()));
        assert!(combine_release(&mixed, 3).is_err());
        let mut decided = r(&[1, 1, 1, 0]);
        decided.push(Err(err()));
        assert_eq!(combine_release(&decided, 3).unwrap(), 1);
        let mut lost = r(&[0, 0, -1, 0]);
        lost.push(Err(err()));
        assert_eq!(combine_release(&lost, 3).unwrap(), -1);
    }

    /// An extension holds only with a majority re-armed.
    #[test]
    fn extension_replies_combine() {
        let r = |v: &[bool]| v.iter().map(|&b| Ok(b)).collect::<Vec<CmdResult<bool>>>();
        assert!(combine_extend(&r(&[true, true, true, false, false]), 3).unwrap());
        assert!(!combine_extend(&r(&[true, true, false, false, false]), 3).unwrap());
        let mut e = r(&[true, true, false, false]);
        e.push(Err(err()));
        assert!(combine_extend(&e, 3).is_err());
    }
}
