//! The workload part of a profile's validation: workers and keys, the TTL (scaled), the run's
//! length, the durations, the busy policy and the arrival model, checked into a [`Workload`].

use super::check::Check;
use super::{MAX_TIME_SCALE, MIN_TIME_SCALE, Profile, ProfileError, RetryProfile, Setting};
use crate::dist::Dist;
use crate::model::units;
use crate::model::units::DurationText;
use serde::Serialize;

/// What the workers do and for how long: the load, the lock's TTL, the durations and the
/// busy policy. (Here, not in `crate::model::plan`: it holds distributions, `crate::dist`'s.)
#[derive(Debug, Clone, Serialize)]
pub struct Workload {
    /// Concurrent workers.
    pub workers: usize,
    /// Lock keys.
    pub keys: usize,
    /// Fraction of attempts aimed at key 0, if set.
    pub hot_key: Option<f64>,
    /// TTL in ms (Redis `PX` is whole milliseconds).
    pub ttl_ms: u64,
    /// The TTL before scaling, ms (what it stands for in the real system).
    pub unscaled_ttl_ms: f64,
    /// Factor applied to every duration of the workload (1 = unscaled).
    pub time_scale: f64,
    /// When the run ends.
    pub stop: Stop,
    /// Section durations.
    pub dist: Dist,
    /// Think time.
    pub think: Dist,
    /// The closed loop's first attempts spread over this long, µs (0: all at once).
    pub ramp_up_us: u64,
    /// Busy policy.
    pub busy: BusyPolicy,
    /// The open arrival model (`None`: a closed loop of `workers`).
    pub arrivals: Option<crate::model::arrivals::Arrivals>,
    /// With arrivals: request slots (requests in flight at most).
    pub max_in_flight: usize,
    /// Lock-library holders a driver process hosts, as the user set it (`None`: decided by the
    /// faults, [`crate::profile::Plan::holders_per_process`]).
    pub holders_per_process: Option<usize>,
    /// How a section waits for its end.
    pub timer: Timer,
}

/// The most lock-library holders one driver process may host: past it a process's one
/// thread (Node's event loop, Python's interpreter lock) serves more holders than it keeps up
/// with.
pub(crate) const MAX_HOLDERS_PER_PROCESS: usize = 1000;

/// How a section waits for its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Timer {
    /// tokio's timer: millisecond resolution, ~1 ms late, no CPU while waiting.
    Tokio,
    /// Tens of µs late: while section ends are rare, woken ahead by a timer thread of its own
    /// and spun out (see [`crate::engine::precise`]); when they are frequent, tokio's timer to
    /// [`crate::engine::precise::PRECISE_LEAD`] before the end, then yielding until it (a busy core meanwhile).
    Precise,
}

/// The busy policy as a profile names it (`busy`); the plan's [`BusyPolicy`] carries the
/// `[retry]` table's figures with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Busy {
    /// Count a rejection and move on to think time.
    FailFast,
    /// Retry with exponential backoff and full jitter (the `[retry]` table).
    Retry,
}

/// What to do when the lock is busy.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "policy", rename_all = "kebab-case")]
pub enum BusyPolicy {
    /// Count a rejection and move on to think time.
    FailFast,
    /// Retry with exponential backoff and full jitter until `max_wait_us`.
    Retry {
        /// First backoff ceiling, µs.
        base_us: u64,
        /// Largest backoff ceiling, µs.
        cap_us: u64,
        /// Give up after this long, µs.
        max_wait_us: u64,
    },
}

/// When a run ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// After this long (no new attempt starts after it; open sections finish).
    Time {
        /// Run length, µs.
        duration_us: u64,
    },
    /// After this many sections have begun.
    Sections {
        /// Number of sections.
        sections: u64,
    },
}

impl Profile {
    /// The workload's fields, checked; the TTL's warnings are pushed to `warnings`. Its
    /// distributions are parsed, not loaded: [`load_files`] reads the files they name.
    pub(super) fn plan_workload(
        &self,
        cx: &Check<'_>,
        warnings: &mut Vec<String>,
    ) -> Result<Workload, ProfileError> {
        let workers = self.workers();
        if !(1..=100_000).contains(&workers) {
            return Err(cx.err(
                "workers",
                format!("{workers} is not valid: use 1 to 100000"),
            ));
        }
        let keys = self.keys();
        if !(1..=10_000_000).contains(&keys) {
            return Err(cx.err("keys", format!("{keys} is not valid: use 1 to 10000000")));
        }
        if let Some(h) = self.hot_key
            && !(0.0..=1.0).contains(&h)
        {
            return Err(cx.err(
                "hot_key",
                format!("{h} is not a fraction: use a number from 0 to 1"),
            ));
        }
        let scale = self.time_scale();
        if !(scale.is_finite() && (MIN_TIME_SCALE..=MAX_TIME_SCALE).contains(&scale)) {
            return Err(cx.err(
                "time_scale",
                format!(
                    "{} is not valid: use a factor from {} to {} (e.g. 0.01 to run 100× faster)",
                    units::fmt_num(scale),
                    units::fmt_num(MIN_TIME_SCALE),
                    units::fmt_num(MAX_TIME_SCALE)
                ),
            ));
        }
        let raw_ttl_us = self.ttl().us();
        let ttl_us = scaled_ttl(raw_ttl_us, scale, warnings).map_err(|(f, m)| cx.err(f, m))?;
        let stop = match (&self.duration, self.sections) {
            (Some(_), Some(_)) => {
                return Err(cx.err(
                    "sections",
                    "set either `duration` or `sections`, not both".to_string(),
                ));
            }
            (_, Some(0)) => return Err(cx.err("sections", "must be at least 1".to_string())),
            (_, Some(n)) => Stop::Sections { sections: n },
            (_, None) => {
                let us = self.duration().us();
                if us == 0 {
                    return Err(cx.err("duration", "must be longer than 0 (e.g. `5s`)".to_string()));
                }
                Stop::Time { duration_us: us }
            }
        };
        let busy = self.busy_policy(cx, scale)?;
        let dist = self.dist().into_dist();
        let think = self.think().into_dist();
        let (arrivals, ramp_up_us) = self.arrivals_and_ramp_up(cx, &stop)?;
        let max_in_flight = self.max_in_flight.unwrap_or(workers);
        if !(1..=100_000).contains(&max_in_flight) {
            return Err(cx.err(
                "max_in_flight",
                format!("{max_in_flight} is not valid: use 1 to 100000"),
            ));
        }
        if let Some(n) = self.holders_per_process
            && !(1..=MAX_HOLDERS_PER_PROCESS).contains(&n)
        {
            return Err(cx.err(
                "holders_per_process",
                format!("{n} is not valid: use 1 to {MAX_HOLDERS_PER_PROCESS}"),
            ));
        }
        let timer = self.timer();
        Ok(Workload {
            workers,
            keys,
            hot_key: self.hot_key,
            ttl_ms: ttl_us / 1000,
            unscaled_ttl_ms: raw_ttl_us as f64 / 1000.0,
            time_scale: scale,
            stop,
            dist,
            think,
            ramp_up_us,
            busy,
            arrivals,
            max_in_flight,
            holders_per_process: self.holders_per_process,
            timer,
        })
    }

    /// The busy policy, with the `[retry]` table's durations scaled by `scale`.
    fn busy_policy(&self, cx: &Check<'_>, scale: f64) -> Result<BusyPolicy, ProfileError> {
        // The [retry] table is checked even when the policy is fail-fast, so a typo never hides.
        let r = self.retry.clone().unwrap_or_default();
        let sc = |us: u64| ((us as f64 * scale).round() as u64).max(1);
        let base = r.base.value_or("retry.base", RetryProfile::BASE);
        let base_us = sc(base.us());
        let cap_us = sc(r.cap.value_or("retry.cap", RetryProfile::CAP).us());
        // A ceiling written below the start is a typo, not a wish: refused. The default
        // ceiling follows a larger start.
        if r.cap.is_some() && cap_us < base_us {
            return Err(cx.err(
                "retry.cap",
                format!(
                    "{} is below retry.base ({}): the backoff's ceiling must be at least its start",
                    r.cap.as_ref().map_or("", |c| c.as_str()),
                    base
                ),
            ));
        }
        let cap_us = cap_us.max(base_us);
        let max_wait_us = sc(r
            .max_wait
            .value_or("retry.max_wait", RetryProfile::MAX_WAIT)
            .us());
        Ok(match self.busy() {
            Busy::FailFast => BusyPolicy::FailFast,
            Busy::Retry => BusyPolicy::Retry {
                base_us,
                cap_us,
                max_wait_us,
            },
        })
    }

    /// The open arrival model, if any, and the closed loop's ramp-up (µs), each checked
    /// against the other and against the run's end.
    fn arrivals_and_ramp_up(
        &self,
        cx: &Check<'_>,
        stop: &Stop,
    ) -> Result<(Option<crate::model::arrivals::Arrivals>, u64), ProfileError> {
        let arrivals = match &self.arrivals {
            None => None,
            Some(a) => {
                if let Stop::Sections { .. } = stop {
                    return Err(cx.err(
                        "arrivals",
                        "an open arrival model runs for a `duration` (requests arrive at a rate), not a number of `sections`".to_string(),
                    ));
                }
                Some(
                    crate::model::arrivals::Arrivals::parse(a)
                        .map_err(|e| cx.err("arrivals", e.to_string()))?,
                )
            }
        };
        let ramp_up_us = self.ramp_up.as_ref().map_or(0, DurationText::us);
        if ramp_up_us > 0 {
            if arrivals.is_some() {
                return Err(cx.err(
                    "ramp_up",
                    "starts a closed loop's workers one by one; the open model ramps its rate instead: `arrivals = \"ramp(FROM, TO)\"`".to_string(),
                ));
            }
            if let Stop::Time { duration_us } = *stop
                && ramp_up_us >= duration_us
            {
                return Err(cx.err(
                    "ramp_up",
                    format!(
                        "{} is not shorter than the run's duration ({}): the last workers would never start",
                        units::fmt_us(ramp_up_us, units::Style::Compact),
                        units::fmt_us(duration_us, units::Style::Compact)
                    ),
                ));
            }
        }
        Ok((arrivals, ramp_up_us))
    }
}

/// Reads the files the workload's distributions name, and scales them; a median section near
/// the timer's resolution is warned about.
pub(super) fn load_files(
    w: &mut Workload,
    cx: &Check<'_>,
    warnings: &mut Vec<String>,
) -> Result<(), ProfileError> {
    w.dist = cx.load("dist", w.dist.clone())?.scaled(w.time_scale);
    w.think = cx.load("think", w.think.clone())?.scaled(w.time_scale);
    if let Some(median) = w.dist.quantile(0.5)
        && median > 0.0
        && median < 5.0
    {
        warnings.push(format!(
                "median section {} is within a few timer ticks (~1ms): measured durations will run visibly longer than intended (see timer error)",
                units::fmt_us(units::ms_to_us(median), units::Style::Compact)
            ));
    }
    Ok(())
}

/// The TTL sent as PX, µs (whole ms), from the TTL as written and the time scale; warnings
/// about it are pushed to `warnings`. An error names the field to blame and why.
pub(super) fn scaled_ttl(
    raw_ttl_us: u64,
    scale: f64,
    warnings: &mut Vec<String>,
) -> Result<u64, (&'static str, String)> {
    let ttl_us = if scale == 1.0 {
        if raw_ttl_us < 1000 || !raw_ttl_us.is_multiple_of(1000) {
            return Err((
                "ttl",
                format!(
                    "{} cannot be sent as PX: Redis expiry is whole milliseconds ≥ 1ms (e.g. `100ms`)",
                    units::fmt_us(raw_ttl_us, crate::model::units::Style::Compact)
                ),
            ));
        }
        raw_ttl_us
    } else {
        let scaled = raw_ttl_us as f64 * scale;
        if scaled < 1000.0 {
            return Err((
                "time_scale",
                format!(
                    "scaling the TTL {} by {} gives {}, below the 1ms that Redis PX can express: use a time scale ≥ {}",
                    units::fmt_us(raw_ttl_us, crate::model::units::Style::Compact),
                    units::fmt_num(scale),
                    units::fmt_us(scaled.round() as u64, crate::model::units::Style::Compact),
                    units::fmt_num(1000.0 / raw_ttl_us as f64)
                ),
            ));
        }
        let rounded = (scaled / 1000.0).round() * 1000.0;
        if (rounded - scaled).abs() >= 1.0 {
            warnings.push(format!(
                "scaled TTL {} rounded to {} (Redis PX is whole milliseconds)",
                units::fmt_us(scaled.round() as u64, crate::model::units::Style::Compact),
                units::fmt_us(rounded as u64, crate::model::units::Style::Compact)
            ));
        }
        if rounded > units::MAX_US as f64 {
            return Err((
                "time_scale",
                format!(
                    "scaling the TTL {} by {} gives more than {}: use a time scale ≤ {}",
                    units::fmt_us(raw_ttl_us, crate::model::units::Style::Compact),
                    units::fmt_num(scale),
                    units::MAX_TEXT,
                    units::fmt_num(units::MAX_US as f64 / raw_ttl_us as f64)
                ),
            ));
        }
        rounded as u64
    };
    if ttl_us < 20_000 {
        warnings.push(format!(
                "TTL {} is short: the ~1ms timer resolution and Redis's millisecond expiry are ≥ 5 % of it",
                units::fmt_us(ttl_us, crate::model::units::Style::Compact)
            ));
    }
    Ok(ttl_us)
}
