//! The simulation part of a profile's validation: a simulated run's round trips, server time,
//! timer lateness and parts, checked into a [`SimPlan`].

use super::check::Check;
use super::{BackendChoice, Plan, Profile, ProfileError, Stop};
use crate::dist::Dist;
use crate::model::units;
use serde::Serialize;

/// A simulated run's clock and network (`backend = "sim"`). (Here, not in
/// `crate::model::plan`: its round trips and timer are distributions, `crate::dist`'s.)
#[derive(Debug, Clone, Serialize)]
pub struct SimPlan {
    /// A simulated run's round trip per command (ms), as given and as a distribution.
    pub sim_rtt_text: String,
    /// See `sim_rtt_text`.
    #[serde(skip)]
    pub sim_rtt: Dist,
    /// The simulated server's time per command, µs.
    pub sim_service_us: u64,
    /// How late a simulated timer fires (ms; `None`: on time).
    #[serde(skip)]
    pub sim_timer: Option<crate::dist::Sampler>,
    /// `sim_timer` as given.
    pub sim_timer_text: String,
    /// Parts a simulated run is cut into and simulated at once (1: one piece).
    pub sim_parallel: usize,
}

impl Profile {
    /// The simulation's fields, checked. The round trip is parsed, not loaded, and the timer
    /// not yet a sampler: [`load_files`] reads the files they name. Whether the run may be cut
    /// into parts is [`Profile::check_sim_parallel`]'s, on the whole plan.
    pub(super) fn plan_sim(&self, cx: &Check<'_>) -> Result<SimPlan, ProfileError> {
        let sim_rtt_text = self.sim_rtt().to_string();
        let sim_rtt = self.sim_rtt().into_dist();
        let sim_timer_text = self.sim_timer().to_string();
        let sim_service_us = self.sim_service().us();
        if sim_service_us > 1_000_000 {
            return Err(cx.err(
                "sim_service",
                format!(
                    "{} per command is not a server: use 0 to 1s",
                    units::fmt_us(sim_service_us, units::Style::Compact)
                ),
            ));
        }
        Ok(SimPlan {
            sim_rtt_text,
            sim_rtt,
            sim_service_us,
            sim_timer: None,
            sim_timer_text,
            sim_parallel: self.sim_parallel(),
        })
    }

    /// `sim_parallel` against the rest of the plan: what a part cannot give on its own.
    pub(super) fn check_sim_parallel(
        &self,
        cx: &Check<'_>,
        plan: &Plan,
    ) -> Result<(), ProfileError> {
        let sim_parallel = plan.sim.sim_parallel;
        if self.sim_parallel.is_some() {
            let refuse =
                |why: &str| Err(cx.err("sim_parallel", format!("{sim_parallel} parts {why}")));
            if !(1..=64).contains(&sim_parallel) {
                return refuse("is not valid: use 1 to 64 (one part per core pays)");
            }
            if sim_parallel > 1 {
                // What a part cannot give on its own: each is simulated from an empty server
                // on a clock of its own, and only its figures come back.
                if plan.backend.kind != BackendChoice::Sim {
                    return refuse("need backend = \"sim\" (a real run is one piece of real time)");
                }
                if !matches!(plan.workload.stop, Stop::Time { .. }) {
                    return refuse(
                        "need a run length in time (`duration`), to cut into equal parts",
                    );
                }
                if plan.events {
                    return refuse(
                        "need events = \"none\": each part's rows would come on a clock of its own",
                    );
                }
                if plan.workload.ramp_up_us > 0
                    || matches!(
                        plan.workload.arrivals,
                        Some(crate::model::arrivals::Arrivals::Ramp { .. })
                    )
                {
                    return refuse(
                        "need a steady load: a ramp (`ramp_up`, `arrivals = \"ramp(…)\"`) follows the whole run's clock",
                    );
                }
                if !plan.faults.schedule.is_empty() || plan.faults.crash_between > 0.0 {
                    return refuse(
                        "need no faults or crashes: their schedule and the stuck locks they leave follow the whole run",
                    );
                }
                if plan.protection.resource {
                    return refuse(
                        "need no protected resource (resource = false, and no fenced release such as token+fence): its final value is read back from one server",
                    );
                }
            }
        }
        Ok(())
    }
}

/// Reads the files the round trip and the timer lateness name (not scaled: they are the
/// network's and the runtime's), and makes the timer's sampler.
pub(super) fn load_files(s: &mut SimPlan, p: &Profile, cx: &Check<'_>) -> Result<(), ProfileError> {
    s.sim_rtt = cx.load("sim_rtt", s.sim_rtt.clone())?;
    let sim_timer = cx.load("sim_timer", p.sim_timer().into_dist())?;
    // `sim_from` is read by the command (`backend::check_plan_io`): validation reads no
    // run directory.
    let sim_timer = (!sim_timer.is_zero()).then(|| sim_timer.sampler());
    s.sim_timer = sim_timer;
    Ok(())
}
