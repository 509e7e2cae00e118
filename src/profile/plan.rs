//! The validated plan: its parts, one per concern, flattened into one object in
//! `manifest.json`; a run's part of a simulation, and a sweep cell's TTL.

use super::workload::scaled_ttl;
use super::{BackendPlan, FaultPlan, ProfileError, SimPlan, Stop, Workload};
use crate::analysis::threshold::Threshold;
use crate::model::plan::{Protection, Timeouts};
use crate::model::units;
use serde::Serialize;
use std::time::Duration;

/// A validated workload: everything a run needs, with defaults filled in. Its parts are
/// flattened into one object in `manifest.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    /// Name shown in reports.
    pub name: String,
    /// Seed.
    pub seed: u64,
    /// What the workers do and for how long.
    #[serde(flatten)]
    pub workload: Workload,
    /// How the lock protects a section.
    #[serde(flatten)]
    pub protection: Protection,
    /// Where the lock store is and how it is reached.
    #[serde(flatten)]
    pub backend: BackendPlan,
    /// How long lockbench waits on a server.
    #[serde(flatten)]
    pub timeouts: Timeouts,
    /// What goes wrong on purpose.
    #[serde(flatten)]
    pub faults: FaultPlan,
    /// A simulated run's clock and network.
    #[serde(flatten)]
    pub sim: SimPlan,
    /// Every section gets an `events.csv` row (`false`: no `events.csv`, no report; the
    /// figures are in `summary.json` and the histograms).
    pub events: bool,
    /// Where live metrics are served (`metrics`; `None`: not served).
    pub metrics: Option<std::net::SocketAddr>,
    /// CI gates: conditions on summary figures that fail the run with exit 99.
    pub fail_if: Vec<Threshold>,
    /// Things the user should know about the plan (e.g. scaled values near the clock's
    /// resolution).
    pub warnings: Vec<String>,
    /// How many of the first `warnings` are about the TTL ([`Plan::with_ttl`] replaces them).
    #[serde(skip)]
    pub ttl_warnings: usize,
}

/// Lock-library holders a driver process hosts by default where no holder fault needs one
/// each. Measured by `scripts/scale-bench.sh` (1,000 holders, debug build, this 2-core
/// machine): 100 a process started redis-py's in 4.3 s and redis-semaphore's in 5.4 s, peaks
/// of 611 MB and 1,036 MB, 1,622 and 1,472 lock cycles/s; 50 a process took 7.2 s and 11.9 s,
/// 963 MB and 1,530 MB, for 1,414 and 937 cycles/s.
pub(crate) const SHARED_HOLDERS_PER_PROCESS: usize = 100;

impl Plan {
    /// Part `k` of `parts` of a simulated run cut into parts (`sim_parallel`): the same plan
    /// over the part's length, with a seed of its own (part 0 keeps the run's).
    pub fn part(&self, parts: usize, k: usize) -> Plan {
        let mut p = self.clone();
        if let Stop::Time { duration_us } = self.workload.stop {
            p.workload.stop = Stop::Time {
                duration_us: duration_us / parts.max(1) as u64,
            };
        }
        if k > 0 {
            // Mixed (splitmix64's finaliser), not an offset: the workers' streams are the seed
            // XOR a multiple of their number, so an offset seed would give part a's worker b
            // part b's worker a's streams.
            p.seed = crate::math::mix64(
                self.seed
                    .wrapping_add((k as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93)),
            );
        }
        p
    }

    /// Whether holders may crash (holder-crash faults or `crash_between`).
    pub fn has_crashes(&self) -> bool {
        self.faults.crash_between > 0.0
            || self
                .faults
                .schedule
                .iter()
                .any(|f| f.kind == crate::model::fault::FaultKind::HolderCrash)
    }

    /// The holder fault of the run that signals a holder's process, by the name the user wrote
    /// (`None`: none): a pause (SIGSTOP) or a crash (SIGKILL) must reach that holder alone, so a
    /// lock library's holders then each need a driver process of their own.
    pub fn holder_fault(&self) -> Option<&'static str> {
        use crate::model::fault::FaultKind;
        if !self.faults.pause.is_zero() {
            Some("pause (--pause), which SIGSTOPs the holder's process")
        } else if self
            .faults
            .schedule
            .iter()
            .any(|f| f.kind == FaultKind::HolderCrash)
        {
            Some("the holder-crash fault, which SIGKILLs the holder's process")
        } else if self.faults.crash_between > 0.0 {
            Some("crash_between (--crash-between), which SIGKILLs the holder's process")
        } else {
            None
        }
    }

    /// Lock-library holders a driver process hosts: as set, else 1 where a holder fault needs
    /// a process per holder ([`Plan::holder_fault`]), else [`SHARED_HOLDERS_PER_PROCESS`].
    pub fn holders_per_process(&self) -> usize {
        match (self.workload.holders_per_process, self.holder_fault()) {
            (Some(n), _) => n,
            (None, Some(_)) => 1,
            (None, None) => SHARED_HOLDERS_PER_PROCESS,
        }
    }

    /// The protected resource shares the lock's store (`resource_redis = "shared"`).
    pub fn resource_shared(&self) -> bool {
        self.backend.resource_redis.as_deref() == Some("shared")
    }

    /// The server given for the protected resource (`resource_redis = URL`).
    pub fn resource_redis_url(&self) -> Option<&str> {
        self.backend
            .resource_redis
            .as_deref()
            .filter(|r| *r != "shared")
    }

    /// Run length as a duration, if the run is time-limited.
    pub fn run_time(&self) -> Option<Duration> {
        match self.workload.stop {
            Stop::Time { duration_us } => Some(Duration::from_micros(duration_us)),
            Stop::Sections { .. } => None,
        }
    }
}

impl Plan {
    /// The same plan with another TTL (as written, before the time scale): a sweep's cell,
    /// without writing the TTL back into text and re-reading the profile.
    pub fn with_ttl(&self, raw_ttl_us: u64) -> Result<Plan, ProfileError> {
        let mut warnings = Vec::new();
        let ttl_us =
            scaled_ttl(raw_ttl_us, self.workload.time_scale, &mut warnings).map_err(|(f, m)| {
                ProfileError {
                    file: "command line".to_string(),
                    line: None,
                    message: format!(
                        "--ttl {}: {m}",
                        units::fmt_us(raw_ttl_us, crate::model::units::Style::Compact)
                    ),
                    field: Some(f.to_string()),
                }
            })?;
        let ttl_warnings = warnings.len();
        warnings.extend(self.warnings[self.ttl_warnings..].iter().cloned());
        let extend_us = self
            .protection
            .extend_every
            .at(ttl_us, self.protection.extends())
            .map_err(|m| ProfileError {
                file: "command line".to_string(),
                line: None,
                message: format!(
                    "--ttl {}: {m}",
                    units::fmt_us(raw_ttl_us, units::Style::Compact)
                ),
                field: Some("extend".to_string()),
            })?;
        let mut plan = self.clone();
        plan.workload.ttl_ms = ttl_us / 1000;
        plan.workload.unscaled_ttl_ms = raw_ttl_us as f64 / 1000.0;
        plan.protection.extend_us = extend_us;
        plan.warnings = warnings;
        plan.ttl_warnings = ttl_warnings;
        Ok(plan)
    }
}
