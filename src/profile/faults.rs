//! The faults part of a profile's validation: the `[[fault]]` schedule, holders' pauses and
//! crashes, checked into a [`FaultPlan`].

use super::check::Check;
use super::{Plan, Profile, ProfileError, Setting};
use crate::dist::Dist;
use crate::model::fault::{Fault, PauseAt};
use serde::Serialize;

/// What goes wrong on purpose: the fault schedule, holders' pauses and crashes. (Here, not in
/// `crate::model::plan`: a pause is a distribution, `crate::dist`'s.)
#[derive(Debug, Clone, Serialize)]
pub struct FaultPlan {
    /// The fault schedule.
    #[serde(rename = "faults")]
    pub schedule: Vec<Fault>,
    /// Stop-the-world pauses of holders (constant 0 = none).
    pub pause: Dist,
    /// Where a pause strikes.
    pub pause_at: PauseAt,
    /// Probability that a holder dies right after acquiring.
    pub crash_between: f64,
}

impl Profile {
    /// The faults' fields, checked. The pause is parsed, not loaded: [`load_files`] reads the
    /// file it names.
    pub(super) fn plan_faults(&self, cx: &Check<'_>) -> Result<FaultPlan, ProfileError> {
        let pause = self
            .pause
            .value_or("pause", "\"constant(0ms)\"")
            .into_dist();
        let pause_at = self.pause_at();
        // Each entry was checked as it was read (`Fault`'s `Deserialize` and `FromStr`).
        let faults = self.fault.clone().unwrap_or_default();
        let crash_between = self.crash_between();
        if !(0.0..=1.0).contains(&crash_between) {
            return Err(cx.err(
                "crash_between",
                format!("{crash_between} is not a probability: use a number from 0 to 1"),
            ));
        }
        Ok(FaultPlan {
            schedule: faults,
            pause,
            pause_at,
            crash_between,
        })
    }
}

/// Reads the file the pause's distribution names, and scales it by `scale`.
pub(super) fn load_files(
    f: &mut FaultPlan,
    cx: &Check<'_>,
    scale: f64,
) -> Result<(), ProfileError> {
    f.pause = cx.load("pause", f.pause.clone())?.scaled(scale);
    Ok(())
}

/// The schedule as a whole, each fault alone being valid: no two windows of one kind overlap,
/// and a spawned cluster can carry out its failovers (the shard exists, a replica is there).
pub(super) fn check_schedule(plan: &Plan, cx: &Check<'_>) -> Result<(), ProfileError> {
    crate::model::fault::check_overlaps(&plan.faults.schedule)
        .map_err(|e| cx.err("fault", e.to_string()))?;
    if plan.backend.kind == crate::profile::BackendChoice::SpawnCluster {
        crate::model::fault::check_failovers(
            &plan.faults.schedule,
            plan.backend.cluster_masters,
            plan.backend.cluster_replicas,
        )
        .map_err(|e| cx.err("fault", e.to_string()))?;
    }
    Ok(())
}
