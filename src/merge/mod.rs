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
//! In three steps, a file each: [`sources`] reads and checks the agents' directories,
//! [`combine`] combines their parts, [`write`] writes the merged run.

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

mod combine;
mod sources;
mod write;

use combine::*;
use sources::*;
use write::*;

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
