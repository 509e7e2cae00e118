//! Writing the merged run: its data files, interval logs and manifest.

use super::*;

/// The data files: summary.json and .csv, faults.csv, the histograms and the merged logs.
pub(super) fn write_merged(
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

/// Writes one metric's merged interval log: every interval in time order, under a `BaseTime`
/// at the merged run's time zero.
pub(super) fn write_log(
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
pub(super) fn merged_manifest(
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
