//! Combining the agents' parts: their places on the merged clock, the events and the
//! overlap recomputed from them, the added histograms, and the merged summaries.

use super::*;

/// Adds µs to a timestamp, never below 0.
pub(super) fn shifted(t: u64, shift: i64) -> u64 {
    (t as i64).saturating_add(shift).max(0) as u64
}

/// One interval of an agent's log, moved onto the merged clock.
pub(super) struct LogInterval {
    pub(super) start: Duration,
    pub(super) length: Duration,
    pub(super) tag: String,
    pub(super) histogram: Histogram<u64>,
}

/// The merged clock: the agreed start, time zero, and each agent's place on it.
pub(super) struct MergedClock {
    /// The agreed start on the server's clock, µs.
    pub(super) start: u64,
    /// Time zero of the merged run on the server's clock, µs.
    pub(super) zero: i64,
    pub(super) agents: Vec<MergedAgent>,
    /// The error of comparing two agents' times, µs.
    pub(super) error_us: u64,
}

/// Places every agent on the merged clock.
pub(super) fn place_agents(sources: &[Source]) -> MergedClock {
    let start = sources
        .iter()
        .filter_map(|s| s.agent.start_server_us)
        .min()
        .unwrap_or_default();
    // Time zero of the merged run: the agreed start, or an agent's zero placed before it (by
    // no more than its error).
    let zero = sources
        .iter()
        .map(|s| s.placement.zero_server_us)
        .chain([start as i64])
        .min()
        .unwrap_or_default();
    let agents: Vec<MergedAgent> = sources
        .iter()
        .map(|s| MergedAgent {
            index: s.agent.index,
            dir: show(&s.dir),
            zero_server_us: s.placement.zero_server_us,
            shift_us: s.placement.zero_server_us - zero,
            clock_error_us: s.placement.error_us,
            drift_us: s.placement.drift_us,
            late_us: (s.placement.zero_server_us - start as i64).max(0) as u64,
        })
        .collect();
    let errors: Vec<u64> = agents.iter().map(|a| a.clock_error_us).collect();
    MergedClock {
        start,
        zero,
        error_us: pair_error(&errors),
        agents,
    }
}

/// One variant's sections per key: (acquired, released), µs on the merged clock.
pub(super) type KeyIntervals = BTreeMap<usize, Vec<(u64, u64)>>;

/// Writes events.csv: every agent's rows on the merged clock; returns every section's interval
/// per variant and key.
pub(super) fn merge_events(
    sources: &[Source],
    agents: &[MergedAgent],
    variants: &[String],
    out: &Path,
    out_existed: bool,
) -> anyhow::Result<Vec<KeyIntervals>> {
    // events.csv: every agent's rows on the merged clock, and every section's interval.
    let mut intervals: Vec<KeyIntervals> = vec![BTreeMap::new(); variants.len()];
    let path = out.join("events.csv");
    // An agent's events.csv that cannot be read (truncated, edited) is the input's fault: it
    // is named with its line, and the partial output removed.
    let mut unreadable: Option<anyhow::Error> = None;
    let written = results::write_file(&path, |w| {
        let mut csv = csv::Writer::from_writer(w);
        for (s, a) in sources.iter().zip(agents) {
            let mut failed: Option<csv::Error> = None;
            let read = results::for_each_event(&s.dir.join("events.csv"), |r| {
                if failed.is_some() {
                    return;
                }
                let row = EventRow {
                    attempt_start_us: shifted(r.attempt_start_us, a.shift_us),
                    set_sent_us: shifted(r.set_sent_us, a.shift_us),
                    acquired_us: shifted(r.acquired_us, a.shift_us),
                    released_us: shifted(r.released_us, a.shift_us),
                    ..r.clone()
                };
                if let Some(v) = variants.iter().position(|v| **v == *row.variant) {
                    intervals[v]
                        .entry(row.key)
                        .or_default()
                        .push((row.acquired_us, row.released_us));
                }
                if let Err(e) = csv.serialize(&row) {
                    failed = Some(e);
                }
            });
            if let Err(e) = read {
                unreadable = Some(e);
                anyhow::bail!("an agent's events.csv cannot be read");
            }
            if let Some(e) = failed {
                return Err(e.into());
            }
        }
        csv.flush()?;
        Ok(())
    });
    if let Some(e) = unreadable {
        let _ = std::fs::remove_file(&path);
        if !out_existed {
            let _ = std::fs::remove_dir(out);
        }
        return Err(bad(format!(
            "{e:#}: nothing was merged into {} (give that agent's directory as its run wrote it)",
            show(out)
        )));
    }
    written?;
    Ok(intervals)
}

/// Overlap on the server's clock, per variant and key, and the stretches' lengths.
pub(super) fn overlap_per_key(
    intervals: &[KeyIntervals],
    keys: usize,
) -> (Vec<Vec<OverlapStats>>, Vec<Histogram<u64>>) {
    let mut per_key: Vec<Vec<OverlapStats>> = Vec::new();
    let mut stretch_hists: Vec<Histogram<u64>> = Vec::new();
    for by_key in intervals {
        let mut stats = vec![OverlapStats::default(); keys];
        let mut h = new_hist();
        for (&k, iv) in by_key {
            let (s, stretches) = compute(iv);
            if k >= stats.len() {
                stats.resize(k + 1, OverlapStats::default());
            }
            stats[k] = s;
            for (a, b) in stretches {
                let _ = h.record(b - a);
            }
        }
        per_key.push(stats);
        stretch_hists.push(h);
    }

    (per_key, stretch_hists)
}

/// Histograms: every agent's intervals, added per variant, and kept for the merged logs (one
/// list per metric); the overlap stretches are the recomputed ones.
pub(super) fn merge_histograms(
    sources: &[Source],
    agents: &[MergedAgent],
    variants: &[String],
    stretch_hists: &[Histogram<u64>],
) -> anyhow::Result<(Vec<HistSet>, Vec<Vec<LogInterval>>)> {
    let mut hists: Vec<HistSet> = variants.iter().map(|_| HistSet::default()).collect();
    let mut logs: Vec<Vec<LogInterval>> = Metric::ALL.iter().map(|_| Vec::new()).collect();
    for (s, a) in sources.iter().zip(agents) {
        for (mi, m) in Metric::ALL.iter().enumerate() {
            let p = s.dir.join(format!("{}.hlog", m.file_stem()));
            let bytes = crate::inputs::read(&p, crate::inputs::FileKind::Histogram)
                .map_err(|e| bad(e.to_string()))?;
            let all =
                results::hlog::intervals(&bytes).map_err(|e| bad(format!("{} {e}", show(&p))))?;
            let mut per_variant: Vec<Histogram<u64>> =
                variants.iter().map(|_| new_hist()).collect();
            for iv in all {
                let tag = iv.tag.unwrap_or_default();
                let Some(v) = variants.iter().position(|v| *v == tag) else {
                    return Err(bad(format!(
                        "{} line {}: an interval of variant `{tag}`, which the run does not have",
                        show(&p),
                        iv.line
                    )));
                };
                let _ = per_variant[v].add(&iv.histogram);
                let from_zero = iv.start.as_micros() as i64 - s.agent.log_offset_us as i64;
                logs[mi].push(LogInterval {
                    start: Duration::from_micros(from_zero.saturating_add(a.shift_us).max(0) as u64),
                    length: iv.length,
                    tag,
                    histogram: iv.histogram,
                });
            }
            for (v, h) in per_variant.iter().enumerate() {
                // The logs must hold what the summary says: a truncated log would merge short.
                if *m == Metric::Duration
                    && let Some(sum) = s
                        .run
                        .summary
                        .variants
                        .iter()
                        .find(|x| x.meta.variant == variants[v])
                    && h.len() != sum.duration_ms.count
                {
                    return Err(bad(format!(
                        "{} holds {} section durations of variant `{}`, but its summary.json counts \
                         {}: the log is truncated or edited",
                        show(&p),
                        h.len(),
                        variants[v],
                        sum.duration_ms.count
                    )));
                }
                if *m != Metric::OverlapStretch {
                    hists[v].add_hist(*m, h);
                }
            }
        }
    }
    for (v, h) in stretch_hists.iter().enumerate() {
        hists[v].add_hist(Metric::OverlapStretch, h);
    }
    // The merged overlap-stretch log: one interval per variant holding the recomputed stretches.
    logs[Metric::ALL
        .iter()
        .position(|m| *m == Metric::OverlapStretch)
        .unwrap_or_default()] = variants
        .iter()
        .zip(stretch_hists)
        .map(|(v, h)| LogInterval {
            start: Duration::ZERO,
            length: Duration::from_secs_f64(merged_elapsed(sources, agents).max(0.0)),
            tag: v.clone(),
            histogram: h.clone(),
        })
        .collect();

    Ok((hists, logs))
}

/// The summaries, by the code a single run uses, and each variant's overlap with its error.
pub(super) fn merged_summaries(
    sources: &[Source],
    clock: &MergedClock,
    variants: &[String],
    per_key: &[Vec<OverlapStats>],
    hists: &[HistSet],
) -> (Vec<Summary>, Vec<MergedOverlap>) {
    let manifest_profile = sources[0]
        .run
        .manifest
        .get("profile")
        .cloned()
        .unwrap_or_default();
    let mut summaries = Vec::new();
    let mut overlap = Vec::new();
    for (v, name) in variants.iter().enumerate() {
        let parts: Vec<(&Source, &MergedAgent, &Summary)> = sources
            .iter()
            .zip(&clock.agents)
            .filter_map(|(s, a)| {
                s.run
                    .summary
                    .variants
                    .iter()
                    .find(|x| x.meta.variant == *name)
                    .map(|x| (s, a, x))
            })
            .collect();
        let Some(&(_, _, first)) = parts.first() else {
            continue;
        };
        let summary = merge_variant(&parts, &per_key[v], &hists[v], &manifest_profile, first);
        let stretches: u64 = per_key[v].iter().map(|k| k.stretches).sum();
        overlap.push(MergedOverlap {
            variant: name.clone(),
            overlap_ms: summary.overlap_ms,
            stretches,
            overlap_error_ms: (clock.error_us * stretches) as f64 / 1000.0,
        });
        summaries.push(summary);
    }
    (summaries, overlap)
}

/// The merged run's length, s: from its time zero to the last agent's end.
pub(super) fn merged_elapsed(sources: &[Source], agents: &[MergedAgent]) -> f64 {
    sources
        .iter()
        .zip(agents)
        .map(|(s, a)| {
            let elapsed = s
                .run
                .summary
                .variants
                .iter()
                .map(|v| v.meta.elapsed_s)
                .fold(0.0, f64::max);
            a.shift_us as f64 / 1e6 + elapsed
        })
        .fold(0.0, f64::max)
}

/// One variant's summary from its agents' parts, the recomputed overlap and the added
/// histograms, through [`summarize`], as a single run builds its own.
pub(super) fn merge_variant(
    parts: &[(&Source, &MergedAgent, &Summary)],
    per_key: &[OverlapStats],
    hists: &HistSet,
    profile: &serde_json::Value,
    first: &Summary,
) -> Summary {
    let mut counts = Counts::default();
    let mut outages = Outages::default();
    let mut errors: Vec<(ErrorKind, u64, Option<String>)> =
        ErrorKind::ALL.iter().map(|k| (*k, 0, None)).collect();
    let mut elapsed: f64 = 0.0;
    let mut stop_reason = StopReason::Limit;
    for (_, a, s) in parts {
        counts.add(&s.counts);
        outages.ended += s.outages;
        outages.total_us += (s.outage_ms * 1000.0).round() as u64;
        for (kind, n, first_msg) in &mut errors {
            *n += s.errors_by_kind.get(kind.name()).copied().unwrap_or(0);
            if first_msg.is_none() {
                *first_msg = s.first_errors.get(kind.name()).cloned();
            }
        }
        elapsed = elapsed.max(a.shift_us as f64 / 1e6 + s.meta.elapsed_s);
        stop_reason = match (stop_reason, s.stop_reason) {
            (StopReason::Interrupted, _) | (_, StopReason::Interrupted) => StopReason::Interrupted,
            (StopReason::GaveUp, _) | (_, StopReason::GaveUp) => StopReason::GaveUp,
            _ => StopReason::Limit,
        };
    }
    let meta = Meta {
        variant: first.meta.variant.clone(),
        release: first.meta.release.clone(),
        connection_mode: first.meta.connection_mode.clone(),
        backend: first.meta.backend.clone(),
        server_version: first.meta.server_version.clone(),
        workers: parts.iter().map(|(_, _, s)| s.meta.workers).sum(),
        keys: first.meta.keys,
        ttl_ms: first.meta.ttl_ms,
        time_scale: first.meta.time_scale,
        unscaled_ttl_ms: first.meta.unscaled_ttl_ms,
        seed: first.meta.seed,
        elapsed_s: elapsed,
    };
    let measured = Measured {
        counts,
        errors,
        per_key: per_key.to_vec(),
        outages,
    };
    let mut summary = summarize(meta, stop_reason, first.protect, &measured, hists);
    summary.stale_rule = first.stale_rule;
    summary.faults = parts
        .iter()
        .flat_map(|(_, a, s)| {
            let shift_ms = a.shift_us as f64 / 1000.0;
            s.faults
                .iter()
                .map(move |f| crate::model::fault::FaultWindow {
                    start_ms: f.start_ms + shift_ms,
                    end_ms: f.end_ms + shift_ms,
                    detail: if f.detail.is_empty() {
                        format!("agent {}", a.index)
                    } else {
                        format!("{}, agent {}", f.detail, a.index)
                    },
                    ..f.clone()
                })
        })
        .collect();
    summary.server_binary = first.server_binary.clone();
    // Each agent's watches saw its own holders only: the source holds, the attribution is
    // each agent's (in its own summary).
    summary.wrongful_deletes_source = first.wrongful_deletes_source.clone();
    summary.stuck_locks = parts
        .iter()
        .map(|(_, _, s)| s.stuck_locks)
        .max()
        .unwrap_or(0);
    summary.crash_blocked_censored = parts.iter().map(|(_, _, s)| s.crash_blocked_censored).sum();
    // The theory check where every agent had one (none when pauses or faults were in play).
    let dist = profile
        .get("dist")
        .and_then(|d| d.as_str())
        .and_then(|d| crate::dist::Dist::parse(d).ok());
    summary.analytic = match dist {
        Some(d) if parts.iter().all(|(_, _, s)| s.analytic.is_some()) => crate::analytic::check(
            &d,
            summary.meta.ttl_ms as f64,
            hists.get(Metric::TimerError),
            summary.counts.overruns,
            summary.counts.sections,
        ),
        _ => None,
    };
    let fail_if: Vec<crate::analysis::threshold::Threshold> = profile
        .get("fail_if")
        .cloned()
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default();
    summary.thresholds = fail_if.iter().map(|t| t.check(&summary)).collect();
    summary
}
