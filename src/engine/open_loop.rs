//! The open arrival model: requests arrive at a rate, whether or not earlier ones are done
//! (k6's constant-arrival-rate executor), each taking the lock once (or retrying by the busy
//! policy), as the reference article's service takes a lock per incoming query.
//!
//! A dispatcher computes every arrival's *intended* time and hands it to a pool of
//! `max_in_flight` request slots. Latency is measured from the intended time, so a stalled
//! server cannot hide its stall behind requests that were never sent (coordinated omission).
//! An arrival that finds every slot busy waits in a backlog (`late_arrivals`); one that finds
//! the backlog full too is dropped (`dropped_arrivals`) — counted and warned about, never
//! silently lost.

use crate::model::arrivals::Arrivals;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use std::time::Duration;

/// The arrival times of a variant: the runtime side of [`Arrivals`] (its type and text
/// form are plain data in the model).
impl Arrivals {
    /// The arrival times (µs from the start) in `[0, length_us)`, seeded.
    pub fn schedule(&self, length_us: u64, seed: u64) -> Schedule {
        Schedule {
            arrivals: *self,
            length_us: length_us as f64,
            t_us: 0.0,
            n: 0,
            rng: SmallRng::seed_from_u64(seed ^ 0xA77_1BA1),
        }
    }
}

/// The arrival times of one variant, in order.
pub struct Schedule {
    arrivals: Arrivals,
    length_us: f64,
    t_us: f64,
    n: u64,
    rng: SmallRng,
}

impl Iterator for Schedule {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let t = match self.arrivals {
            Arrivals::Constant { rate } => self.n as f64 * 1e6 / rate,
            Arrivals::Poisson { rate } => {
                let u: f64 = self.rng.random();
                let t = self.t_us;
                self.t_us += -(1.0 - u).ln() * 1e6 / rate;
                t
            }
            Arrivals::Ramp { from, to } => {
                // The n-th arrival is where the integral of the rate reaches n:
                // from·t + (to − from)·t²/(2L) = n, t in seconds.
                let l = self.length_us / 1e6;
                let (a, b, n) = ((to - from) / (2.0 * l), from, self.n as f64);
                let secs = if a.abs() < 1e-12 {
                    n / b
                } else {
                    let disc = b * b + 4.0 * a * n;
                    if disc < 0.0 {
                        return None;
                    }
                    (-b + disc.sqrt()) / (2.0 * a)
                };
                secs * 1e6
            }
        };
        self.n += 1;
        (t.is_finite() && t < self.length_us).then(|| Duration::from_nanos((t * 1000.0) as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each model yields the number of arrivals its rate gives over the length, in order.
    #[test]
    fn schedules_have_the_rate() {
        let count = |a: &str| Arrivals::parse(a).unwrap().schedule(2_000_000, 1).count() as f64;
        assert_eq!(count("constant(1000/s)"), 2000.0);
        let p = count("poisson(1000/s)");
        assert!((p - 2000.0).abs() < 4.0 * 2000f64.sqrt(), "{p}");
        // A ramp from 0 to 1000/s over 2 s averages 500/s.
        let r = count("ramp(1/s, 1000/s)");
        assert!((r - 1001.0).abs() < 3.0, "{r}");
        let times: Vec<Duration> = Arrivals::parse("poisson(500/s)")
            .unwrap()
            .schedule(1_000_000, 3)
            .collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]));
        // The ramp is denser at its end.
        let ramp: Vec<Duration> = Arrivals::parse("ramp(10/s, 1000/s)")
            .unwrap()
            .schedule(2_000_000, 1)
            .collect();
        let first_half = ramp.iter().filter(|t| t.as_micros() < 1_000_000).count();
        assert!(
            first_half * 2 < ramp.len(),
            "{first_half} of {}",
            ramp.len()
        );
    }

    /// Bad text says what would be valid.
    #[test]
    fn errors_say_what_is_valid() {
        for bad in [
            "constant",
            "poisson(fast)",
            "ramp(1/s)",
            "steady(5/s)",
            "constant(0/s)",
        ] {
            let e = Arrivals::parse(bad).unwrap_err().to_string();
            assert!(e.contains(bad), "{bad}: {e}");
        }
        assert!(
            Arrivals::parse("steady(5/s)")
                .unwrap_err()
                .to_string()
                .contains("poisson(1000/s)")
        );
    }
}
