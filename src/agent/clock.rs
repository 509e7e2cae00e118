//! Where an agent's clock stands against the server's: pure arithmetic over `TIME` round trips.
//!
//! The server answers `TIME` at some instant between the request's send and the reply's
//! arrival, so taking it at the midpoint of the round trip is wrong by at most half the round
//! trip. Of a few round trips the fastest is kept: its error is the smallest. Local instants
//! are the monotonic clock the run's timestamps use (µs from the agent's time zero), never the
//! wall clock, which NTP may step during a run.

use crate::results::agents::ClockReading;
use std::time::SystemTime;
use tokio::time::Instant;

/// One `TIME` round trip as measured.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Probe {
    /// When the request was sent.
    pub sent: Instant,
    /// When the reply arrived.
    pub received: Instant,
    /// The server's `TIME`, µs since the epoch.
    pub server_us: u64,
    /// This machine's wall clock when the reply arrived, µs since the epoch.
    pub wall_received_us: i64,
}

impl Probe {
    /// The round trip, µs.
    pub(crate) fn rtt_us(&self) -> u64 {
        self.received
            .saturating_duration_since(self.sent)
            .as_micros() as u64
    }

    /// The midpoint of the round trip.
    pub(crate) fn mid(&self) -> Instant {
        self.sent + self.received.saturating_duration_since(self.sent) / 2
    }

    /// The reading this probe gives, with local instants counted from `zero`.
    pub(crate) fn reading(&self, zero: Instant) -> ClockReading {
        let rtt = self.rtt_us();
        let wall_mid = self.wall_received_us - (rtt / 2) as i64;
        ClockReading {
            server_us: self.server_us,
            local_us: signed_us(self.mid(), zero),
            rtt_us: rtt,
            error_us: rtt.div_ceil(2) + 1,
            offset_us: self.server_us as i64 - wall_mid,
        }
    }
}

/// µs from `zero` to `t`, negative when `t` is earlier.
pub(crate) fn signed_us(t: Instant, zero: Instant) -> i64 {
    if t >= zero {
        t.duration_since(zero).as_micros() as i64
    } else {
        -(zero.duration_since(t).as_micros() as i64)
    }
}

/// This machine's wall clock, µs since the epoch (only for the `offset_us` people read).
pub(crate) fn wall_now_us() -> i64 {
    match SystemTime::now().duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => d.as_micros() as i64,
        Err(e) => -(e.duration().as_micros() as i64),
    }
}

/// The fastest of `probes` (the first of equally fast ones).
pub(crate) fn fastest(probes: &[Probe]) -> Option<Probe> {
    probes.iter().copied().min_by_key(Probe::rtt_us)
}

/// Where an agent's time zero lies on the server's clock, and how far off that may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Placement {
    /// Its time zero on the server's clock, µs since the epoch.
    pub zero_server_us: i64,
    /// How far off `zero_server_us` may be for any instant of the run, µs.
    pub error_us: u64,
    /// The end reading's zero minus the start reading's, µs (0 without an end reading).
    pub drift_us: i64,
}

/// Places an agent's time zero from its start reading and, when it has one, its end reading:
/// the midpoint of the two estimates, so that one constant shift keeps the agent's own events
/// exactly as they were (same order, same gaps). Each estimate is within its reading's error
/// of the truth at its moment; if the two clocks drift steadily, the true zero moves from the
/// first to the second over the run, so for every instant the midpoint is off by at most the
/// larger error plus half the drift.
pub(crate) fn placement(start: &ClockReading, end: Option<&ClockReading>) -> Placement {
    let zs = start.zero_on_server_us();
    let Some(end) = end else {
        return Placement {
            zero_server_us: zs,
            error_us: start.error_us,
            drift_us: 0,
        };
    };
    let ze = end.zero_on_server_us();
    let drift = ze - zs;
    Placement {
        zero_server_us: zs + drift.div_euclid(2),
        error_us: start.error_us.max(end.error_us) + drift.unsigned_abs().div_ceil(2),
        drift_us: drift,
    }
}

/// The error of a time between events of two different agents: each event may be off by its
/// agent's error, so the two largest errors added (one agent alone: 0, its events keep their
/// gaps exactly).
pub(crate) fn pair_error(errors: &[u64]) -> u64 {
    if errors.len() < 2 {
        return 0;
    }
    let mut e = errors.to_vec();
    e.sort_unstable_by(|a, b| b.cmp(a));
    e[0] + e[1]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn reading(server_us: u64, local_us: i64, rtt_us: u64) -> ClockReading {
        ClockReading {
            server_us,
            local_us,
            rtt_us,
            error_us: rtt_us.div_ceil(2) + 1,
            offset_us: 0,
        }
    }

    /// A probe's reading puts the server's instant at the round trip's midpoint, with half the
    /// round trip (plus TIME's 1 µs) as its error; the fastest of several is kept.
    #[test]
    fn reading_is_the_midpoint_of_the_fastest_round_trip() {
        let zero = Instant::now();
        let p = |sent_us: u64, rtt_us: u64, server_us: u64| Probe {
            sent: zero + Duration::from_micros(sent_us),
            received: zero + Duration::from_micros(sent_us + rtt_us),
            server_us,
            wall_received_us: 1_000_000 + (sent_us + rtt_us) as i64,
        };
        let probes = [p(100, 300, 5_000), p(1_000, 41, 6_000), p(2_000, 41, 7_000)];
        let best = fastest(&probes).unwrap();
        assert_eq!(best.server_us, 6_000, "the first of the fastest");
        let r = best.reading(zero);
        assert_eq!((r.local_us, r.rtt_us, r.error_us), (1_020, 41, 22));
        assert_eq!(r.zero_on_server_us(), 6_000 - 1_020);
        // Wall clock at the midpoint: 1_000_000 + 1_041 − 20.
        assert_eq!(r.offset_us, 6_000 - 1_001_021);
        // Before time zero, local instants are negative.
        let early = p(0, 10, 1).reading(zero + Duration::from_millis(1));
        assert_eq!(early.local_us, -995);
        assert!(fastest(&[]).is_none());
    }

    /// Without drift both readings agree and the error is the larger reading error; with drift
    /// the placement is the midpoint and half the drift is added to the error, so the true zero
    /// at either end lies within the error.
    #[test]
    fn placement_splits_the_drift() {
        let start = reading(10_000, -500, 40); // zero at 10_500, error 21
        let same = reading(2_010_000, 1_999_500, 100); // zero at 10_500, error 51
        let p = placement(&start, Some(&same));
        assert_eq!((p.zero_server_us, p.error_us, p.drift_us), (10_500, 51, 0));
        let drifted = reading(2_010_030, 1_999_500, 100); // zero at 10_530
        let p = placement(&start, Some(&drifted));
        assert_eq!((p.zero_server_us, p.error_us, p.drift_us), (10_515, 66, 30));
        for truth in [10_500 - 21, 10_530 + 51] {
            assert!((truth - p.zero_server_us).unsigned_abs() <= p.error_us);
        }
        // Without an end reading (the run failed mid-way): the start reading alone.
        let p = placement(&start, None);
        assert_eq!((p.zero_server_us, p.error_us), (10_500, 21));
        // Negative drift rounds towards the earlier zero.
        let back = reading(2_009_999, 1_999_500, 40);
        assert_eq!(placement(&start, Some(&back)).zero_server_us, 10_499);
    }

    /// The error between two agents' events is the two largest errors added; one agent has none.
    #[test]
    fn pair_error_adds_the_two_largest() {
        assert_eq!(pair_error(&[]), 0);
        assert_eq!(pair_error(&[40]), 0);
        assert_eq!(pair_error(&[40, 7, 60]), 100);
    }
}
