//! What a worker does after an acquisition did not succeed: the busy policy (fail fast, or
//! retry with capped exponential backoff and full jitter) and the pause after a failed
//! command. Pure functions of the policy, the round and a random draw.

use crate::profile::BusyPolicy;
use rand::RngExt;
use rand::rngs::SmallRng;

/// After a busy reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterBusy {
    /// Fail fast: count a rejection.
    Reject,
    /// The retry policy's max wait is used up: count a give-up.
    GiveUp,
    /// Wait this long (µs) and try again.
    Retry(u64),
}

/// The decision after the `round`-th busy reply (0-based), `waited_us` after the first
/// attempt. Full jitter: the wait is uniform in [0, min(cap, base·2^round)].
pub(crate) fn after_busy(
    policy: BusyPolicy,
    round: u32,
    waited_us: u64,
    rng: &mut SmallRng,
) -> AfterBusy {
    match policy {
        BusyPolicy::FailFast => AfterBusy::Reject,
        BusyPolicy::Retry { max_wait_us, .. } if waited_us >= max_wait_us => AfterBusy::GiveUp,
        BusyPolicy::Retry {
            base_us, cap_us, ..
        } => {
            let ceil = base_us.saturating_mul(1u64 << round.min(30)).min(cap_us);
            AfterBusy::Retry(rng.random_range(0..=ceil))
        }
    }
}

/// The pause after the `failures`-th consecutive failed command (0-based), µs: drawn from the
/// upper half of 10 ms doubling up to 1 s, so a server that is down or refusing is probed,
/// not hammered, and a reconnect is tried often enough to notice its return within a second.
pub(crate) fn after_error(failures: u32, rng: &mut SmallRng) -> u64 {
    let ceil = (10_000u64 << failures.min(7)).min(1_000_000);
    rng.random_range(ceil / 2..=ceil)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    /// Fail-fast rejects; retry waits within the doubling, capped bound and gives up once
    /// the max wait is used.
    #[test]
    fn busy_policy_decisions() {
        let mut rng = SmallRng::seed_from_u64(1);
        assert_eq!(
            after_busy(BusyPolicy::FailFast, 0, 0, &mut rng),
            AfterBusy::Reject
        );
        let retry = BusyPolicy::Retry {
            base_us: 1_000,
            cap_us: 5_000,
            max_wait_us: 100_000,
        };
        for round in 0..40 {
            let AfterBusy::Retry(w) = after_busy(retry, round, 0, &mut rng) else {
                panic!("retry expected");
            };
            assert!(w <= (1_000u64 << round.min(30)).min(5_000), "{round}: {w}");
        }
        assert_eq!(after_busy(retry, 3, 100_000, &mut rng), AfterBusy::GiveUp);
    }

    /// The pause after failures doubles from 10 ms and stays within 1 s.
    #[test]
    fn error_pause_doubles_to_one_second() {
        let mut rng = SmallRng::seed_from_u64(2);
        let w0 = after_error(0, &mut rng);
        assert!((5_000..=10_000).contains(&w0), "{w0}");
        let w2 = after_error(2, &mut rng);
        assert!((20_000..=40_000).contains(&w2), "{w2}");
        for f in [7, 8, 50, u32::MAX] {
            let w = after_error(f, &mut rng);
            assert!((500_000..=1_000_000).contains(&w), "{f}: {w}");
        }
    }
}
