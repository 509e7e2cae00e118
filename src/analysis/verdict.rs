//! The verdict on a finished run: the exit code its summaries call for, and why.

use crate::analysis::summary::{StopReason, Summary};
use crate::exit::{FAILED, INTERRUPTED, OK, THRESHOLD};

/// How a finished run ends.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// Its exit code.
    pub code: i32,
    /// Why it is not 0, one line each.
    pub reasons: Vec<String>,
}

/// Errors dominate when more than half of the commands the workers sent failed.
pub(crate) fn errors_dominate(s: &Summary) -> bool {
    s.errors > 0 && s.errors * 2 > commands(s)
}

/// Releases sent and, of them, those that failed (no reply, or an error reply); `None` for a
/// summary written before these were counted.
fn releases(s: &Summary) -> Option<(u64, u64)> {
    let c = &s.counts;
    let answered = [
        c.released,
        c.wrongful_deletes,
        c.nothing_deleted,
        c.refused_expired,
        c.refused_held_by_other,
        c.refused_unclassified,
    ];
    let all = answered.iter().chain([&c.release_errors]);
    if all
        .clone()
        .any(|&n| n == crate::analysis::counts::NOT_RECORDED)
    {
        return None;
    }
    Some((all.sum(), c.release_errors))
}

/// Release errors dominate when more than half of the releases sent failed: the lock was not
/// let go as the variant says (a release script that errors on every call), whatever the
/// acquisitions did. Judged apart from [`errors_dominate`], whose commands include every
/// busy reply of a contended run, so a run in which no release worked could still pass it.
pub(crate) fn release_errors_dominate(s: &Summary) -> bool {
    releases(s).is_some_and(|(sent, failed)| failed > 0 && failed * 2 > sent)
}

/// Commands the workers sent: counted one by one; summaries written before that counter
/// existed had one per attempt and one release per section.
fn commands(s: &Summary) -> u64 {
    match s.counts.commands {
        0 | crate::analysis::counts::NOT_RECORDED => s.counts.attempts + s.counts.sections,
        n => n,
    }
}

/// The verdict on a run: interrupted beats everything; then a failure, a variant that gave
/// up, completed no section, whose errors dominated, or whose fault could not be applied make
/// it a failed run.
pub fn verdict(summaries: &[Summary], interrupted: bool, failure: Option<&str>) -> Verdict {
    let mut reasons = Vec::new();
    if let Some(f) = failure {
        reasons.push(f.to_string());
    }
    for s in summaries {
        reasons.extend(variant_failures(s));
    }
    let crossed: Vec<String> = summaries
        .iter()
        .flat_map(|s| {
            s.thresholds.iter().filter(|t| t.crossed).map(move |t| {
                format!(
                    "variant `{}`: {} (it is {})",
                    s.meta.variant, t.expr, t.value
                )
            })
        })
        .collect();
    let code = if interrupted {
        INTERRUPTED
    } else if !reasons.is_empty() {
        FAILED
    } else if !crossed.is_empty() {
        reasons.extend(
            crossed
                .into_iter()
                .map(|c| format!("threshold crossed: {c}")),
        );
        THRESHOLD
    } else {
        OK
    };
    Verdict { code, reasons }
}

/// Why one variant failed the run, one line each (empty when it did not): it gave up,
/// completed no section, its resource could not be read back, a fault could not be applied,
/// its errors dominated, or most of its releases failed.
pub(crate) fn variant_failures(s: &Summary) -> Vec<String> {
    let mut reasons = Vec::new();
    let v = &s.meta.variant;
    if s.stop_reason == StopReason::GaveUp {
        reasons.push(format!(
            "variant `{v}` gave up: its commands kept failing with none succeeding (give_up_after)"
        ));
    } else if s.counts.sections == 0 && s.stop_reason != StopReason::Interrupted {
        reasons.push(format!("variant `{v}` completed no section"));
    }
    // A resource that could not be read back: its lost updates are not known.
    if s.protect.resource && s.lost_updates == crate::analysis::counts::NOT_RECORDED {
        reasons.push(format!(
            "variant `{v}`: the protected resource could not be read back at the end: its lost updates are not known"
        ));
    }
    // Expiries that could not be read: its stuck locks are not known.
    if s.stuck_locks == crate::analysis::counts::NOT_RECORDED {
        reasons.push(format!(
            "variant `{v}`: the locks' expiries could not be read at the end: its stuck locks are not known"
        ));
    }
    // A fault that could not be applied: the run did not test what it said it would.
    for f in s.faults.iter().filter(|f| !f.error.is_empty()) {
        reasons.push(format!(
            "variant `{v}`: fault `{}` at {:.0} ms could not be applied: {}",
            f.kind, f.start_ms, f.error
        ));
    }
    if errors_dominate(s) {
        reasons.push(format!(
            "variant `{v}`: {} of its {} commands failed",
            s.errors,
            commands(s)
        ));
    }
    if release_errors_dominate(s)
        && let Some((sent, failed)) = releases(s)
    {
        reasons.push(format!(
            "variant `{v}`: {failed} of its {sent} releases failed: its locks were not let go as it says"
        ));
    }
    reasons
}

/// The first error of each kind, one line each, e.g. `connection (1200×): Connection refused`.
pub(crate) fn error_lines(s: &Summary) -> Vec<String> {
    s.errors_by_kind
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(kind, n)| {
            let first = s.first_errors.get(kind).map_or("", String::as_str);
            format!("{kind} ({n}×): {first}")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(attempts: u64, sections: u64, errors: u64, stop: StopReason) -> Summary {
        let q =
            serde_json::to_string(&crate::analysis::summary::Quantiles::default()).expect("json");
        let text = r#"{
            "variant": "token", "release": "token", "connection_mode": "per-worker",
            "backend": "memory", "server_version": "memory", "workers": 1, "keys": 1,
            "ttl_ms": 100, "time_scale": 1.0, "unscaled_ttl_ms": 100.0, "seed": 1,
            "elapsed_s": 1.0, "attempts": 0, "sections": 0, "throughput_per_s": 0.0,
            "overruns": 0, "overrun_fraction": 0.0, "excess_total_ms": 0.0,
            "stale_releases": 0, "stale_without_overrun": 0, "deleted_by_other": 0,
            "refused_releases": 0, "refused_expired": 0, "refused_held_by_other": 0,
            "refused_unclassified": 0, "wrongful_deletes": 0, "nothing_deleted": 0,
            "released": 0, "overlap_ms": 0.0, "overlap_incidents": 0, "peak_holders": 0,
            "rejections": 0, "retries": 0, "acquire_giveups": 0, "interrupted": 0,
            "errors": 0, "errors_by_kind": {}, "first_errors": {},
            "duration_ms": Q, "intended_ms": Q, "timer_error_ms": Q, "excess_ms": Q,
            "acquire_latency_ms": Q, "set_latency_ms": Q, "release_latency_ms": Q,
            "overlap_stretch_ms": Q, "per_key": [], "analytic": null
        }"#
        .replace('Q', &q);
        let mut s: Summary = serde_json::from_str(&text).expect("a summary");
        s.counts.attempts = attempts;
        s.counts.sections = sections;
        s.errors = errors;
        s.stop_reason = stop;
        s
    }

    /// A clean run exits 0; the same run with most commands failing exits 1 and says why.
    #[test]
    fn errors_dominating_fail_the_run() {
        let ok = summary(100, 90, 10, StopReason::Limit);
        assert_eq!(verdict(&[ok], false, None).code, OK);
        let bad = summary(100, 40, 71, StopReason::Limit);
        let v = verdict(&[bad], false, None);
        assert_eq!(v.code, FAILED);
        assert!(
            v.reasons[0].contains("71 of its 140 commands failed"),
            "{v:?}"
        );
        // Exactly half is not "dominate".
        assert!(!errors_dominate(&summary(100, 40, 70, StopReason::Limit)));
    }

    /// A protected resource that could not be read back fails the run (its lost updates are
    /// not known: the run passed, with a sentinel in their place); one read back does not.
    #[test]
    fn an_unread_resource_fails_the_run() {
        let mut s = summary(100, 90, 0, StopReason::Limit);
        s.protect.resource = true;
        s.lost_updates = 0;
        assert_eq!(verdict(std::slice::from_ref(&s), false, None).code, OK);
        s.lost_updates = crate::analysis::counts::NOT_RECORDED;
        let v = verdict(&[s], false, None);
        assert_eq!(v.code, FAILED);
        assert!(v.reasons[0].contains("could not be read back"), "{v:?}");
    }

    /// Stuck locks that could not be read fail the run (a partial count used to read as 0
    /// and pass a `stuck_locks > 0` gate); read ones, even many, are the thresholds' business.
    #[test]
    fn unread_stuck_locks_fail_the_run() {
        let mut s = summary(100, 90, 0, StopReason::Limit);
        s.stuck_locks = 3;
        assert_eq!(verdict(std::slice::from_ref(&s), false, None).code, OK);
        s.stuck_locks = crate::analysis::counts::NOT_RECORDED;
        let v = verdict(&[s], false, None);
        assert_eq!(v.code, FAILED);
        assert!(v.reasons[0].contains("stuck locks are not known"), "{v:?}");
    }

    /// A run in which no release worked has failed, even when its errors are a minority of
    /// the commands sent (issue 40: a release script that errored on every call passed, the
    /// busy replies of a contended run outnumbering the failed releases); a few failed
    /// releases among many good ones do not fail it (the control), nor does an older summary
    /// without the release counts.
    #[test]
    fn failed_releases_fail_the_run() {
        let mut s = summary(1000, 100, 100, StopReason::Limit);
        s.counts.commands = 1100;
        s.counts.released = 0;
        s.counts.release_errors = 100;
        assert!(!errors_dominate(&s), "the old rule let it pass");
        let v = verdict(std::slice::from_ref(&s), false, None);
        assert_eq!(v.code, FAILED, "{v:?}");
        assert!(
            v.reasons
                .iter()
                .any(|r| r.contains("100 of its 100 releases failed")),
            "{v:?}"
        );
        s.counts.released = 90;
        s.counts.release_errors = 10;
        s.errors = 10;
        assert_eq!(verdict(std::slice::from_ref(&s), false, None).code, OK);
        s.counts.release_errors = crate::analysis::counts::NOT_RECORDED;
        assert!(!release_errors_dominate(&s));
    }

    /// Giving up and completing nothing are failures; an interrupt beats them all.
    #[test]
    fn gave_up_and_empty_runs_fail_interrupt_wins() {
        let gave_up = summary(10, 5, 3, StopReason::GaveUp);
        assert_eq!(
            verdict(std::slice::from_ref(&gave_up), false, None).code,
            FAILED
        );
        let empty = summary(0, 0, 0, StopReason::Limit);
        let v = verdict(&[empty], false, None);
        assert_eq!(v.code, FAILED);
        assert!(v.reasons[0].contains("completed no section"));
        assert_eq!(verdict(&[gave_up], true, None).code, INTERRUPTED);
        // An interrupted run with no section is not blamed for it.
        let v = verdict(&[summary(0, 0, 0, StopReason::Interrupted)], true, None);
        assert!(v.reasons.is_empty());
    }

    /// A failure of a later variant fails the run even when the finished ones are clean.
    #[test]
    fn a_failed_variant_fails_the_run() {
        let ok = summary(100, 90, 0, StopReason::Limit);
        let v = verdict(&[ok], false, Some("variant `token` failed: refused"));
        assert_eq!(v.code, FAILED);
        assert_eq!(
            v.reasons,
            vec!["variant `token` failed: refused".to_string()]
        );
    }

    /// A crossed threshold exits 99 when the run is otherwise sound, and 1 when it also failed.
    #[test]
    fn thresholds_exit_99_unless_the_run_failed() {
        let crossed = crate::analysis::summary::Crossing {
            expr: "overlap_ms > 0".into(),
            value: 3.0,
            crossed: true,
        };
        let mut ok = summary(100, 90, 0, StopReason::Limit);
        ok.thresholds = vec![crossed.clone()];
        let v = verdict(std::slice::from_ref(&ok), false, None);
        assert_eq!(v.code, THRESHOLD);
        assert!(v.reasons[0].contains("overlap_ms > 0"), "{v:?}");
        let mut bad = summary(100, 40, 71, StopReason::Limit);
        bad.thresholds = vec![crossed];
        assert_eq!(verdict(&[bad], false, None).code, FAILED);
        ok.thresholds[0].crossed = false;
        assert_eq!(verdict(&[ok], false, None).code, OK);
    }
}
