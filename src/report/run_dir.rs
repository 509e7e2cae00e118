//! Reading a finished run directory back: `manifest.json`, `summary.json`, `events.csv`
//! (streamed, one row at a time) and the `.hlog` interval logs. Nothing here needs the process
//! that made the run, so an old run can be re-rendered.

use crate::analysis::counts::Counts;
use crate::inputs::FileKind;
use crate::model::release::StaleRule;
use crate::record::{EventRow, new_hist};
use crate::results::SummaryFile;
use anyhow::Context;
use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::charts::timeline::SectionSpan;
use super::charts::timeline::window::WindowPicker;

/// Files every run directory has; without them there is nothing to report.
pub const REQUIRED: [&str; 3] = ["manifest.json", "summary.json", "events.csv"];

/// What an observed run (`lockbench observe`) writes in place of `manifest.json`.
pub const OBSERVED: &str = "observe.json";

/// Why a directory cannot be reported on.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The directory lacks files every run writes: it is not a run directory, or the run
    /// failed before finishing. Point `report` at a `results/<run-id>/` directory.
    #[error(
        "{dir} is not a finished lockbench run: missing {}. Point it at a results/<run-id>/ directory",
        .missing.join(", ")
    )]
    NotARun {
        /// The directory.
        dir: PathBuf,
        /// The required files it lacks.
        missing: Vec<&'static str>,
    },
    /// The run failed before any variant finished: no summary, its rows kept.
    #[error(
        "{dir}: the run failed before any variant finished ({failure}); its rows are in events.csv, with no summary to draw or check"
    )]
    Failed {
        /// The directory.
        dir: PathBuf,
        /// The manifest's `failure`.
        failure: String,
    },
}
crate::exit::classify!(ReportError => BadInput);

/// The JSON files of a run.
#[derive(Debug, Clone)]
pub struct RunFiles {
    /// The run directory.
    pub dir: PathBuf,
    /// `manifest.json`, kept as JSON so runs from other versions still load.
    pub manifest: serde_json::Value,
    /// `summary.json`.
    pub summary: SummaryFile,
}

impl RunFiles {
    /// Loads the JSON files, or says which required files are missing.
    pub fn open(dir: &Path) -> anyhow::Result<Self> {
        // An observed run (`lockbench observe`) records itself in `observe.json` instead.
        let manifest_file =
            match dir.join(OBSERVED).is_file() && !dir.join("manifest.json").exists() {
                true => OBSERVED,
                false => "manifest.json",
            };
        // A run with `events = "none"` (its manifest says so) has no events.csv by design.
        let manifest_text =
            || crate::inputs::read_to_string(&dir.join(manifest_file), FileKind::RunJson).ok();
        let without_rows = manifest_text()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|m| m.pointer("/profile/events").and_then(|e| e.as_bool()))
            == Some(false);
        let missing: Vec<&'static str> = REQUIRED
            .into_iter()
            .filter(|f| !(without_rows && *f == "events.csv"))
            .filter(|f| !(manifest_file == OBSERVED && *f == "manifest.json"))
            .filter(|f| !dir.join(f).is_file())
            .collect();
        // A run that failed before any variant finished says so in its manifest.
        let failure = manifest_text()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|m| m["failure"].as_str().map(str::to_string));
        if missing == ["summary.json"]
            && let Some(failure) = failure
        {
            return Err(ReportError::Failed {
                dir: dir.to_path_buf(),
                failure,
            }
            .into());
        }
        if !missing.is_empty() {
            return Err(ReportError::NotARun {
                dir: dir.to_path_buf(),
                missing,
            }
            .into());
        }
        let read = |name: &str| -> anyhow::Result<String> {
            Ok(crate::inputs::read_to_string(
                &dir.join(name),
                FileKind::RunJson,
            )?)
        };
        let manifest: serde_json::Value = serde_json::from_str(&read(manifest_file)?)
            .with_context(|| format!("{} is not valid JSON", dir.join(manifest_file).display()))?;
        let summary: SummaryFile =
            serde_json::from_str(&read("summary.json")?).with_context(|| {
                format!(
                    "{} is not a lockbench summary",
                    dir.join("summary.json").display()
                )
            })?;
        Ok(Self {
            dir: dir.to_path_buf(),
            manifest,
            summary,
        })
    }

    /// Variant names in run order (the manifest's, else the summary's).
    pub fn variants(&self) -> Vec<String> {
        match self.manifest.get("variants").and_then(|v| v.as_array()) {
            Some(a) if !a.is_empty() => a
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
            _ => self
                .summary
                .variants
                .iter()
                .map(|s| s.meta.variant.clone())
                .collect(),
        }
    }

    /// A string field of the manifest, or `""`.
    pub fn manifest_str(&self, field: &str) -> String {
        self.manifest
            .get(field)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string()
    }

    /// Whether the profile placed pauses right before the write (`pause_at = "before-write"`),
    /// which lets the timeline draw them where they fell.
    pub fn pause_before_write(&self) -> bool {
        self.manifest
            .pointer("/profile/pause_at")
            .and_then(|v| v.as_str())
            == Some("before-write")
    }

    /// TTL of the run, µs (from the summary; the profile when the summary has no variant).
    pub fn ttl_us(&self) -> u64 {
        self.summary
            .variants
            .first()
            .map(|s| s.meta.ttl_ms * 1000)
            .or_else(|| {
                self.manifest
                    .pointer("/profile/ttl_ms")
                    .and_then(|v| v.as_u64())
                    .map(|ms| ms * 1000)
            })
            .unwrap_or(0)
    }
}

/// What the report keeps of one key: a count and the longest section, the fallback timeline's
/// centre when nothing overlapped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeySections {
    /// Sections of the key.
    pub sections: u64,
    /// The longest `(acquired, released)`; the earliest of equally long ones.
    pub longest: (u64, u64),
}

impl KeySections {
    /// Counts one section.
    pub fn add(&mut self, acquired_us: u64, released_us: u64) {
        let (s, e) = (acquired_us, released_us.max(acquired_us));
        let (ls, le) = self.longest;
        if self.sections == 0 || e - s > le - ls || (e - s == le - ls && s < ls) {
            self.longest = (s, e);
        }
        self.sections += 1;
    }
}

/// What one pass over `events.csv` keeps of one variant: histograms and counts (fixed memory)
/// and a [`KeySections`] per key — never anything per section, so a report's memory does not
/// grow with the run's length.
#[derive(Debug, Clone)]
pub struct VariantEvents {
    /// Variant name.
    pub name: String,
    /// TTL of its rows, µs.
    pub ttl_us: u64,
    /// Measured durations, µs.
    pub durations: Histogram<u64>,
    /// Acquire latencies, µs.
    pub acquire: Histogram<u64>,
    /// Counted figures, recounted from the rows.
    pub counts: Counts,
    /// Sections per key.
    pub keys: BTreeMap<usize, KeySections>,
    /// How its summary decided stale vs deleted by another.
    pub rule: StaleRule,
}

impl VariantEvents {
    /// Empty.
    pub fn new(name: &str, rule: StaleRule) -> Self {
        Self {
            name: name.to_string(),
            ttl_us: 0,
            durations: new_hist(),
            acquire: new_hist(),
            counts: Counts::default(),
            keys: BTreeMap::new(),
            rule,
        }
    }

    /// Adds one row, counting it with the function the worker used live.
    pub fn add(&mut self, r: &EventRow) {
        self.counts.add(&Counts::of_section(r, self.rule));
        self.ttl_us = r.ttl_us;
        record(&mut self.durations, r.duration_us);
        record(&mut self.acquire, r.acquire_latency_us);
        self.keys
            .entry(r.key)
            .or_default()
            .add(r.acquired_us, r.released_us);
    }
}

fn record(h: &mut Histogram<u64>, v: u64) {
    // Auto-resizing: `record` grows instead of clamping.
    if h.record(v).is_err() {
        h.saturating_record(v);
    }
}

/// Every variant's rows, in order of first appearance.
#[derive(Debug, Clone, Default)]
pub struct EventScan {
    /// One entry per variant.
    pub variants: Vec<VariantEvents>,
    /// The stale rule each variant's summary was counted with (default: the current one).
    pub rules: Vec<(String, StaleRule)>,
}

impl EventScan {
    /// The variant named `name`.
    pub fn get(&self, name: &str) -> Option<&VariantEvents> {
        self.variants.iter().find(|v| v.name == name)
    }

    /// Adds one row.
    pub fn add(&mut self, r: &EventRow) {
        let i = match self.variants.iter().position(|v| *v.name == *r.variant) {
            Some(i) => i,
            None => {
                let rule = self
                    .rules
                    .iter()
                    .find(|(v, _)| **v == *r.variant)
                    .map_or(StaleRule::Reply, |(_, rule)| *rule);
                self.variants.push(VariantEvents::new(&r.variant, rule));
                self.variants.len() - 1
            }
        };
        self.variants[i].add(r);
    }
}

/// Without `events.csv`: each variant's durations and acquire latencies from the interval
/// logs (`durations.hlog`, `acquire-latency.hlog`, merged by tag), its counts and TTL from
/// `summary.json`; no per-key sections.
pub fn scan_histograms(dir: &Path, run: &RunFiles) -> anyhow::Result<EventScan> {
    let durations = read_hlog(&dir.join("durations.hlog"))?;
    let acquire = read_hlog(&dir.join("acquire-latency.hlog")).unwrap_or_default();
    let mut scan = EventScan::default();
    for s in &run.summary.variants {
        let mut v = VariantEvents::new(&s.meta.variant, s.stale_rule);
        v.ttl_us = s.meta.ttl_ms * 1000;
        v.counts = s.counts;
        let tagged = |logs: &[(String, Histogram<u64>)]| {
            logs.iter()
                .find(|(t, _)| *t == s.meta.variant)
                .map(|(_, h)| h.clone())
        };
        if let Some(h) = tagged(&durations) {
            v.durations = h;
        }
        if let Some(h) = tagged(&acquire) {
            v.acquire = h;
        }
        scan.variants.push(v);
    }
    Ok(scan)
}

/// First pass: histograms, counts and per-key counts of every variant.
pub fn scan_events(path: &Path) -> anyhow::Result<EventScan> {
    let mut scan = EventScan::default();
    crate::results::for_each_event(path, |r| scan.add(r))?;
    Ok(scan)
}

/// Second pass: offers every section of `variant`/`key` to `picker` and returns the
/// timeline rows it kept.
pub fn window_sections(
    path: &Path,
    variant: &str,
    key: usize,
    mut picker: WindowPicker,
) -> anyhow::Result<Vec<SectionSpan>> {
    crate::results::for_each_event(path, |r| {
        if *r.variant == *variant && r.key == key {
            picker.offer(SectionSpan {
                worker: r.worker,
                seq: r.seq,
                acquired_us: r.acquired_us,
                released_us: r.released_us,
                outcome: r.outcome,
                write: r.write.to_string(),
                pause_us: r.pause_us,
            });
        }
    })?;
    Ok(picker.finish())
}

/// The `(acquired, released)` intervals of one key: what a `summary.json` without
/// `first_overlap_ms` (older runs) leaves to recompute. 16 bytes a section of that key only.
pub fn key_intervals(path: &Path, variant: &str, key: usize) -> anyhow::Result<Vec<(u64, u64)>> {
    let mut out = Vec::new();
    crate::results::for_each_event(path, |r| {
        if *r.variant == *variant && r.key == key {
            out.push((r.acquired_us, r.released_us));
        }
    })?;
    Ok(out)
}

/// The intervals of an `.hlog` merged per tag (the shared reader).
pub fn read_hlog(path: &Path) -> anyhow::Result<Vec<(String, Histogram<u64>)>> {
    crate::results::hlog::read_by_tag(path)
}
