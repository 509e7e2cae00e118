//! `lockbench merge`: the result directories of the agents of one run (`run --agent I/N`)
//! combined into one directory that reads like a single run's — `summary.json`, `events.csv`,
//! the `.hgrm`/`.hlog` files — so `lockbench report` draws and checks it as it would any run.
//!
//! - **Refused** (bad input, exit 2), naming the directories: a directory that is not an
//!   agent's, agents of different runs, an agent given twice, a missing agent (its sections
//!   are not in the figures, so the run is not whole), agents whose workloads differ.
//! - **Counters** are summed.
//! - **Histograms** are added exactly from each agent's `.hlog` interval logs (never from
//!   percentiles), and the intervals are written again, moved onto the merged clock.
//! - **Overlap** is a property of all holders of a key, whichever agent they ran in, so it is
//!   recomputed from every agent's `events.csv` on the server's clock: each agent's timestamps
//!   (µs from its time zero) plus where its time zero lies on the server's clock
//!   ([`crate::agent::clock::placement`]), with [`crate::analysis::overlap::compute`], the
//!   state machine the live run uses. Times between events of one agent keep their exact gaps;
//!   between two agents they may be off by the two largest placement errors added
//!   ([`MergeRecord::clock_error_us`]), so each overlap stretch may be, and the overlap time by
//!   that times the number of stretches: stated beside it. The overlap-stretch histogram comes
//!   from the recomputed stretches.
//! - Figures only one process sees are combined as stated: outages summed (each agent's own
//!   connections), crash-blocked times added from the agents' logs (each agent sees only its
//!   own next acquisition of a crashed key, so across agents they are upper bounds), stuck
//!   locks the largest agent's count (each counts the keys it touched).
//!
//! Past 800 lines only through its tests (about 70 lines of them).

use crate::agent::clock::{Placement, pair_error, placement};
use crate::analysis::counts::{Counts, NOT_RECORDED};
use crate::analysis::overlap::{OverlapStats, compute};
use crate::analysis::summary::{Measured, Meta, StopReason, Summary, summarize};
use crate::exit::BadInput;
use crate::model::error::ErrorKind;
use crate::record::{EventRow, HistSet, Metric, Outages, new_hist};
use crate::report::run_dir::RunFiles;
use crate::results::agents::{AgentRecord, MergeRecord, MergedAgent, MergedOverlap};
use crate::results::{self, SummaryFile};

use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// One agent's directory, loaded.
struct Source {
    dir: PathBuf,
    run: RunFiles,
    agent: AgentRecord,
    placement: Placement,
}

/// A merged run, written.
#[derive(Debug)]
pub(crate) struct Merged {
    /// Its directory.
    pub dir: PathBuf,
    /// One summary per variant.
    pub summaries: Vec<Summary>,
    /// How the agents were placed.
    pub record: MergeRecord,
    /// What went wrong in the agents' runs (their manifests' `failure`), one line each.
    pub failures: Vec<String>,
    /// Agents that were interrupted.
    pub interrupted: Vec<u32>,
}

fn bad(m: String) -> anyhow::Error {
    BadInput(m).into()
}

fn show(p: &Path) -> String {
    p.display().to_string()
}

/// Loads an agent's directory, or says why it is not one.
fn load(dir: &Path) -> anyhow::Result<Source> {
    let run = RunFiles::open(dir).map_err(|e| bad(format!("{e:#}")))?;
    if run.summary.merged.is_some() {
        return Err(bad(format!(
            "{} is already a merged run: give the agents' own directories",
            show(dir)
        )));
    }
    let Some(agent) = run.summary.agent.clone() else {
        return Err(bad(format!(
            "{} is not an agent's directory: its summary.json has no `agent` block (merge \
             combines the directories of `lockbench run --agent I/N`)",
            show(dir)
        )));
    };
    let Some(placement) = agent
        .clock_start
        .as_ref()
        .map(|start| placement(start, agent.clock_end.as_ref()))
    else {
        return Err(bad(format!(
            "{}: agent {} of run {} has no clock reading: it never started",
            show(dir),
            agent.index,
            agent.run_id
        )));
    };
    Ok(Source {
        dir: dir.to_path_buf(),
        run,
        agent,
        placement,
    })
}

/// Refuses a set of agents that is not one whole run, naming the directories: different
/// runs, different agent counts, an agent (or a directory) given twice, a missing agent.
pub(crate) fn check_set(agents: &[(String, AgentRecord)]) -> Result<(), BadInput> {
    let Some((d0, a0)) = agents.first() else {
        return Err(BadInput("no directory to merge".into()));
    };
    for (d, a) in agents {
        if a.run_id != a0.run_id {
            return Err(BadInput(format!(
                "{d0} and {d} are agents of different runs ({} vs {}): merge the agents of one run",
                a0.run_id, a.run_id
            )));
        }
        if a.count != a0.count {
            return Err(BadInput(format!(
                "{d0} is an agent of {} and {d} of {} agents: they cannot be one run",
                a0.count, a.count
            )));
        }
    }
    // One `--run-id` used for two executions: the same run id, but each execution's agents
    // agreed on their own start. Their clocks cannot be placed on one run's.
    for (d, a) in agents {
        if a.start_server_us != a0.start_server_us {
            let at = |s: Option<u64>| s.map_or("never".to_string(), |us| format!("{us} µs"));
            return Err(BadInput(format!(
                "{d0} and {d} are agents of two executions of run {} (they agreed on different \
                 starts, `start_server_us` {} vs {} in their summary.json): the run id was \
                 reused. Merge the agents of one execution",
                a0.run_id,
                at(a0.start_server_us),
                at(a.start_server_us)
            )));
        }
    }
    for (i, (d, a)) in agents.iter().enumerate() {
        if let Some((e, _)) = agents[..i].iter().find(|(_, b)| b.index == a.index) {
            let what = if e == d {
                format!("{d} is given twice")
            } else {
                format!("{e} and {d} are both agent {}", a.index)
            };
            return Err(BadInput(format!(
                "{what} of run {}: give each agent's directory once",
                a.run_id
            )));
        }
    }
    let missing: Vec<String> = (0..a0.count)
        .filter(|i| !agents.iter().any(|(_, a)| a.index == *i))
        .map(|i| i.to_string())
        .collect();
    if !missing.is_empty() {
        return Err(BadInput(format!(
            "run {} has {} agents, but agent {} {} missing (given: {}): without its sections the \
             run is not whole. Give every agent's directory",
            a0.run_id,
            a0.count,
            missing.join(", "),
            if missing.len() == 1 { "is" } else { "are" },
            agents
                .iter()
                .map(|(d, _)| d.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(())
}

/// Refuses agents whose workloads differ (their manifests' profiles, as the barrier compares
/// them) or whose variants differ.
fn check_workloads(sources: &[Source]) -> anyhow::Result<()> {
    let first = &sources[0];
    let fp = |s: &Source| {
        crate::agent::workload_fingerprint(s.run.manifest.get("profile").unwrap_or_default())
    };
    let f0 = fp(first);
    for s in &sources[1..] {
        let diff = crate::agent::differences(&fp(s), &f0);
        if !diff.is_empty() {
            return Err(bad(format!(
                "{} and {} ran different workloads, in: {}",
                show(&s.dir),
                show(&first.dir),
                diff.join(", ")
            )));
        }
        if s.run.variants() != first.run.variants() {
            return Err(bad(format!(
                "{} ran the variants {:?} but {} ran {:?}",
                show(&s.dir),
                s.run.variants(),
                show(&first.dir),
                first.run.variants()
            )));
        }
    }
    Ok(())
}

/// Refuses counts no agent of this lockbench writes (a summary edited by hand), so the sums
/// cannot overflow.
fn check_counts(s: &Source) -> anyhow::Result<()> {
    for v in &s.run.summary.variants {
        for (name, _, _) in Counts::FIELDS {
            let n = v.counts.get(name).unwrap_or(0);
            if n == NOT_RECORDED || n > u64::MAX / 4096 {
                return Err(bad(format!(
                    "{}: summary.json's `{name}` of variant `{}` is {n}, which no agent writes \
                     (edited by hand?)",
                    show(&s.dir),
                    v.meta.variant
                )));
            }
        }
    }
    Ok(())
}

/// Adds µs to a timestamp, never below 0.
fn shifted(t: u64, shift: i64) -> u64 {
    (t as i64).saturating_add(shift).max(0) as u64
}

/// One interval of an agent's log, moved onto the merged clock.
struct LogInterval {
    start: Duration,
    length: Duration,
    tag: String,
    histogram: Histogram<u64>,
}

/// Merges the agents' directories `dirs` into `out` (created, or emptied of an earlier run's
/// files with `force`), then draws the report there.
pub(crate) fn merge(dirs: &[PathBuf], out: &Path, force: bool) -> anyhow::Result<Merged> {
    let sources = load_sources(dirs)?;
    let clock = place_agents(&sources);
    let out_existed = out.exists();
    results::prepare_dir(out, force)?;
    let variants = sources[0].run.variants();
    let keys = sources[0]
        .run
        .summary
        .variants
        .first()
        .map_or(0, |s| s.meta.keys);
    let intervals = merge_events(&sources, &clock.agents, &variants, out, out_existed)?;
    let (per_key, stretch_hists) = overlap_per_key(&intervals, keys);
    let (hists, logs) = merge_histograms(&sources, &clock.agents, &variants, &stretch_hists)?;
    let (summaries, overlap) = merged_summaries(&sources, &clock, &variants, &per_key, &hists);
    let record = MergeRecord {
        run_id: sources[0].agent.run_id.clone(),
        agents: clock.agents,
        start_server_us: clock.start,
        zero_server_us: clock.zero,
        clock_error_us: clock.error_us,
        overlap,
    };
    write_merged(out, &record, &summaries, &variants, &hists, logs)?;
    let (manifest, failures, interrupted) = merged_manifest(&sources, &record, &summaries);
    results::write_json(&out.join("manifest.json"), &manifest)?;
    Ok(Merged {
        dir: out.to_path_buf(),
        summaries,
        record,
        failures,
        interrupted,
    })
}

/// Reads the agents' directories and checks they are one run's full set, in agent order.
fn load_sources(dirs: &[PathBuf]) -> anyhow::Result<Vec<Source>> {
    let mut sources = Vec::new();
    for d in dirs {
        sources.push(load(d)?);
    }
    let listed: Vec<(String, AgentRecord)> = sources
        .iter()
        .map(|s| (show(&s.dir), s.agent.clone()))
        .collect();
    check_set(&listed)?;
    check_workloads(&sources)?;
    for s in &sources {
        check_counts(s)?;
    }
    sources.sort_by_key(|s| s.agent.index);
    Ok(sources)
}

/// The merged clock: the agreed start, time zero, and each agent's place on it.
struct MergedClock {
    /// The agreed start on the server's clock, µs.
    start: u64,
    /// Time zero of the merged run on the server's clock, µs.
    zero: i64,
    agents: Vec<MergedAgent>,
    /// The error of comparing two agents' times, µs.
    error_us: u64,
}

/// Places every agent on the merged clock.
fn place_agents(sources: &[Source]) -> MergedClock {
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
type KeyIntervals = BTreeMap<usize, Vec<(u64, u64)>>;

/// Writes events.csv: every agent's rows on the merged clock; returns every section's interval
/// per variant and key.
fn merge_events(
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
fn overlap_per_key(
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
fn merge_histograms(
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
fn merged_summaries(
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

/// The data files: summary.json and .csv, faults.csv, the histograms and the merged logs.
fn write_merged(
    out: &Path,
    record: &MergeRecord,
    summaries: &[Summary],
    variants: &[String],
    hists: &[HistSet],
    mut logs: Vec<Vec<LogInterval>>,
) -> anyhow::Result<()> {
    // The data files.
    let summary_file = SummaryFile {
        run_id: record.run_id.clone(),
        variants: summaries.to_vec(),
        agent: None,
        merged: Some(record.clone()),
    };
    results::write_json(&out.join("summary.json"), &summary_file)?;
    results::write_summary_csv_file(out, summaries)?;
    let faults: Vec<(String, crate::model::fault::FaultWindow)> = summaries
        .iter()
        .flat_map(|s| s.faults.iter().map(|f| (s.meta.variant.clone(), f.clone())))
        .collect();
    if !faults.is_empty() {
        crate::faults::write_csv(&out.join("faults.csv"), &faults)?;
    }
    for (v, h) in hists.iter().enumerate() {
        let suffix = (variants.len() > 1).then_some(variants[v].as_str());
        results::write_hgrms(out, h, suffix)?;
    }
    let base = UNIX_EPOCH + Duration::from_micros(record.zero_server_us.max(0) as u64);
    for (mi, m) in Metric::ALL.iter().enumerate() {
        write_log(
            &out.join(format!("{}.hlog", m.file_stem())),
            *m,
            base,
            &record.run_id,
            &mut logs[mi],
        )?;
    }
    Ok(())
}

/// The merged run's length, s: from its time zero to the last agent's end.
fn merged_elapsed(sources: &[Source], agents: &[MergedAgent]) -> f64 {
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
fn merge_variant(
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

/// Writes one metric's merged interval log: every interval in time order, under a `BaseTime`
/// at the merged run's time zero.
fn write_log(
    path: &Path,
    m: Metric,
    base: SystemTime,
    run_id: &str,
    intervals: &mut [LogInterval],
) -> anyhow::Result<()> {
    use hdrhistogram::serialization::V2DeflateSerializer;
    use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
    intervals.sort_by_key(|iv| iv.start);
    results::write_file(path, |w| {
        let mut ser = V2DeflateSerializer::new();
        let mut b = IntervalLogWriterBuilder::new();
        b.add_comment(&format!(
            "lockbench {} {} of run {run_id}, merged from its agents (values in microseconds)",
            env!("CARGO_PKG_VERSION"),
            m.file_stem()
        ));
        b.with_start_time(base).with_base_time(base);
        let mut log = b.begin_log_with(w, &mut ser)?;
        for iv in intervals.iter() {
            log.write_histogram(&iv.histogram, iv.start, iv.length, Tag::new(&iv.tag))
                .map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        Ok(())
    })
}

/// The merged run's `manifest.json`: the first agent's, with what changes for the whole run
/// (the command, every worker, the whole run length, the span of times, what every agent's
/// cleanup did) and the `merged` block. Also returns the agents' failures and interruptions.
fn merged_manifest(
    sources: &[Source],
    record: &MergeRecord,
    summaries: &[Summary],
) -> (serde_json::Value, Vec<String>, Vec<u32>) {
    let mut m = sources[0].run.manifest.clone();
    let field = |s: &Source, f: &str| s.run.manifest.get(f).cloned();
    let mut failures = Vec::new();
    let mut interrupted = Vec::new();
    let (mut removed, mut leftover) = (0u64, 0u64);
    for s in sources {
        if let Some(f) = field(s, "failure").and_then(|f| f.as_str().map(str::to_string)) {
            failures.push(format!("agent {} ({}): {f}", s.agent.index, show(&s.dir)));
        }
        if field(s, "interrupted").and_then(|v| v.as_bool()) == Some(true) {
            interrupted.push(s.agent.index);
        }
        removed += field(s, "cleanup_removed_locks")
            .and_then(|v| v.as_u64())
            .unwrap_or(0);
        leftover += field(s, "leftover_keys")
            .and_then(|v| v.as_u64())
            .unwrap_or(0);
    }
    let text = |f: &str| -> Vec<String> {
        sources
            .iter()
            .filter_map(|s| field(s, f).and_then(|v| v.as_str().map(str::to_string)))
            .collect()
    };
    let workers: usize = summaries.first().map_or(0, |s| s.meta.workers);
    if let Some(o) = m.as_object_mut() {
        o.insert("command".into(), "merge".into());
        o.remove("agent");
        if let Some(first) = text("started_at").into_iter().min() {
            o.insert("started_at".into(), first.into());
        }
        if let Some(last) = text("ended_at").into_iter().max() {
            o.insert("ended_at".into(), last.into());
        }
        o.insert("interrupted".into(), (!interrupted.is_empty()).into());
        if failures.is_empty() {
            o.remove("failure");
        } else {
            o.insert("failure".into(), failures.join("; ").into());
        }
        if leftover > 0 {
            o.insert("leftover_keys".into(), leftover.into());
        }
        o.insert("cleanup_removed_locks".into(), removed.into());
        o.insert(
            "merged".into(),
            serde_json::to_value(record).unwrap_or_default(),
        );
        if let Some(p) = o.get_mut("profile").and_then(|p| p.as_object_mut()) {
            p.insert("workers".into(), workers.into());
            // With --sections, the agents' shares add up to the run's count.
            let shares: Option<u64> = sources.iter().map(|s| s.agent.sections_share).sum();
            if let Some(total) = shares {
                p.insert(
                    "stop".into(),
                    serde_json::json!({"sections": {"sections": total}}),
                );
            }
        }
    }
    (m, failures, interrupted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(run: &str, index: u32, count: u32) -> AgentRecord {
        AgentRecord {
            run_id: run.into(),
            index,
            count,
            worker_first: 0,
            worker_end: 1,
            sections_share: None,
            start_server_us: Some(1),
            clock_start: None,
            clock_end: None,
            log_offset_us: 0,
            peers_finished: true,
        }
    }

    fn set(list: &[(&str, AgentRecord)]) -> Result<(), String> {
        let v: Vec<(String, AgentRecord)> = list
            .iter()
            .map(|(d, a)| (d.to_string(), a.clone()))
            .collect();
        check_set(&v).map_err(|e| e.0)
    }

    /// A whole run merges; every other set is refused with the directories named.
    #[test]
    fn only_whole_runs_merge() {
        assert!(set(&[("a0", agent("r", 0, 2)), ("a1", agent("r", 1, 2))]).is_ok());
        let e = set(&[("a0", agent("r", 0, 2)), ("b1", agent("s", 1, 2))]).unwrap_err();
        assert!(
            e.contains("a0 and b1 are agents of different runs (r vs s)"),
            "{e}"
        );
        let e = set(&[("a0", agent("r", 0, 2)), ("a0", agent("r", 0, 2))]).unwrap_err();
        assert!(e.contains("a0 is given twice"), "{e}");
        let e = set(&[("a0", agent("r", 0, 2)), ("c0", agent("r", 0, 2))]).unwrap_err();
        assert!(e.contains("a0 and c0 are both agent 0 of run r"), "{e}");
        let e = set(&[("a0", agent("r", 0, 3)), ("a1", agent("r", 1, 3))]).unwrap_err();
        assert!(
            e.contains("agent 2 is missing") && e.contains("a0, a1"),
            "{e}"
        );
        let e = set(&[("a0", agent("r", 0, 2)), ("x", agent("r", 1, 3))]).unwrap_err();
        assert!(e.contains("of 2 and x of 3"), "{e}");
        // One run id, two executions: each pair agreed on its own start.
        let mut other = agent("r", 1, 2);
        other.start_server_us = Some(2);
        let e = set(&[("a0", agent("r", 0, 2)), ("b1", other)]).unwrap_err();
        assert!(
            e.contains("a0 and b1 are agents of two executions of run r")
                && e.contains("start_server_us"),
            "{e}"
        );
    }

    /// Shifts move timestamps both ways and never below 0.
    #[test]
    fn shifts_clamp_at_zero() {
        assert_eq!(shifted(100, 25), 125);
        assert_eq!(shifted(100, -25), 75);
        assert_eq!(shifted(10, -25), 0);
    }
}
