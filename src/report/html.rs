//! `report.html`: one self-contained static page — inline CSS, no scripts, no fonts, no
//! network requests; charts and data files are linked by relative name, so the run directory
//! can be copied, zipped or opened from disk anywhere.

use super::palette::method_hex;
use super::verify::Mismatch;
use crate::analysis::figures::{cell, figures};
use crate::analysis::summary::{Quantiles, Summary};
use std::fmt::Write as _;

/// A chart on the page.
#[derive(Debug, Clone)]
pub(crate) struct Chart {
    /// File name in the run directory.
    pub file: String,
    /// Heading.
    pub title: String,
    /// How to read it.
    pub note: String,
}

/// Everything the page shows.
#[derive(Debug, Clone)]
pub(crate) struct Page<'a> {
    /// Run id.
    pub run_id: &'a str,
    /// One per variant, in run order.
    pub summaries: &'a [Summary],
    /// `manifest.json`.
    pub manifest: &'a serde_json::Value,
    /// Charts, in page order.
    pub charts: Vec<Chart>,
    /// Data files present in the directory (names).
    pub files: Vec<String>,
    /// What the check of summary.json against events.csv found.
    pub mismatches: Option<&'a [Mismatch]>,
    /// An observed run's `clients.csv` (`lockbench observe`): what each client did.
    pub clients: Option<String>,
}

pub(crate) use super::escape::esc;

const CSS: &str = "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1060px;\
color:#222;padding:0 1em}h1{font-size:1.5em}h2{margin-top:1.6em;border-bottom:1px solid #ddd}\
table{border-collapse:collapse;margin:.5em 0}td,th{padding:.25em .8em;border-bottom:1px solid #eee;\
text-align:right}th:first-child,td:first-child{text-align:left}thead th{color:#fff}\
.cfg td{text-align:left;font-family:monospace}figure{margin:1em 0}img{max-width:100%;\
border:1px solid #ddd}figcaption{color:#555;font-size:.92em}.ok{color:#1a7f37}.bad{color:#b00}\
ul.files{columns:3}code{background:#f4f4f4;padding:0 .2em}td.zero{background:#dafbe1}\
td.nonzero{background:#ffd8d3}td.na{color:#888}";

fn q3(q: &Quantiles) -> String {
    format!("{:.2} / {:.2} / {:.2} / {:.2}", q.p50, q.p99, q.p999, q.max)
}

type Row = (&'static str, fn(&Summary) -> String);

/// Rows before the figures: what the variant was.
const BEFORE: &[Row] = &[
    ("release method", |s| s.meta.release.clone()),
    ("connection", |s| s.meta.connection_mode.clone()),
    ("workers / keys", |s| {
        format!("{} / {}", s.meta.workers, s.meta.keys)
    }),
    ("TTL", |s| {
        if s.meta.time_scale == 1.0 {
            format!("{} ms", s.meta.ttl_ms)
        } else {
            format!(
                "{} ms (time scale {}: stands for {} ms)",
                s.meta.ttl_ms, s.meta.time_scale, s.meta.unscaled_ttl_ms
            )
        }
    }),
    ("elapsed", |s| format!("{:.2} s", s.meta.elapsed_s)),
];

/// Rows after the figures: the CI gates, the theory check and percentiles.
const AFTER: &[Row] = &[
    ("thresholds (fail_if)", |s| {
        if s.thresholds.is_empty() {
            return "none".to_string();
        }
        s.thresholds
            .iter()
            .map(|t| format!("{}: {}", t.expr, if t.crossed { "CROSSED" } else { "ok" }))
            .collect::<Vec<_>>()
            .join("; ")
    }),
    (
        "P(d > TTL) theory, 99 % interval of the measured fraction",
        |s| match &s.analytic {
            Some(a) => format!(
                "{} in [{}, {}]{}",
                super::charts::fmt_pct(a.p_expected),
                super::charts::fmt_pct(a.ci99_low),
                super::charts::fmt_pct(a.ci99_high),
                if a.agrees { "" } else { " MISMATCH" }
            ),
            None => "n/a".to_string(),
        },
    ),
    ("duration p50/p99/p99.9/max (ms)", |s| q3(&s.duration_ms)),
    ("excess over TTL p50/p99/p99.9/max (ms)", |s| {
        q3(&s.excess_ms)
    }),
    ("acquire latency p50/p99/p99.9/max (ms)", |s| {
        q3(&s.acquire_latency_ms)
    }),
    (
        "SET NX PX p50/p99/p99.9/max (ms)",
        |s| q3(&s.set_latency_ms),
    ),
    ("release p50/p99/p99.9/max (ms)", |s| {
        q3(&s.release_latency_ms)
    }),
    (
        "request latency from intended arrival p50/p99/p99.9/max (ms)",
        |s| q3(&s.request_latency_ms),
    ),
    ("key blocked after a crash p50/p99/p99.9/max (ms)", |s| {
        q3(&s.crash_blocked_ms)
    }),
    ("redlock", |s| match &s.redlock {
        None => "single instance".to_string(),
        Some(r) => format!(
            "quorum {} of {}, per-instance timeout {} ms, drift {} ms; {} rounds: {} held, {} \
             failed quorums, {} validity expired; errors per instance {:?} (timeouts {:?})",
            r.quorum,
            r.instances,
            r.instance_timeout_ms,
            r.drift_ms,
            r.acquisitions_attempted,
            r.acquired,
            r.failed_quorums,
            r.validity_expired,
            r.instance_errors,
            r.instance_timeouts
        ),
    }),
    ("fault windows (ms from the variant's start)", |s| {
        if s.faults.is_empty() {
            return "none".to_string();
        }
        s.faults
            .iter()
            .map(|f| {
                let d = if f.detail.is_empty() {
                    String::new()
                } else {
                    format!(", {}", f.detail)
                };
                let e = if !f.error.is_empty() {
                    format!(" (FAILED: {})", f.error)
                } else if !f.reached {
                    " (not reached: the variant ended first)".to_string()
                } else {
                    String::new()
                };
                format!("{} {:.0}–{:.0}{d}{e}", f.kind, f.start_ms, f.end_ms)
            })
            .collect::<Vec<_>>()
            .join("; ")
    }),
];

/// Flattens JSON into `(dotted.path, value)` rows.
fn flatten(prefix: &str, v: &serde_json::Value, out: &mut Vec<(String, String)>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&p, v, out);
            }
        }
        serde_json::Value::String(s) => out.push((prefix.to_string(), s.clone())),
        serde_json::Value::Null => out.push((prefix.to_string(), "—".to_string())),
        other => out.push((prefix.to_string(), other.to_string())),
    }
}

/// What the page says of a multi-agent run: an agent's place in it, or how a merge placed
/// its agents on the server's clock and the error that leaves on the overlap.
fn agents_note(manifest: &serde_json::Value) -> String {
    let num = |v: &serde_json::Value, f: &str| v.get(f).and_then(|x| x.as_i64()).unwrap_or(0);
    let text = |v: &serde_json::Value, f: &str| {
        v.get(f)
            .and_then(|x| x.as_str())
            .unwrap_or_default()
            .to_string()
    };
    if let Some(a) = manifest.get("agent") {
        return format!(
            "<p>Agent {} of {} of run <b>{}</b>, workers {}–{}: one part of a multi-agent run. \
             <code>lockbench merge</code> of every agent's directory gives the whole run, its \
             overlap across agents on the server's clock.</p>\n",
            num(a, "index"),
            num(a, "count"),
            esc(&text(a, "run_id")),
            num(a, "worker_first"),
            num(a, "worker_end") - 1
        );
    }
    let Some(m) = manifest.get("merged") else {
        return String::new();
    };
    let empty = Vec::new();
    let list = |f: &str| m.get(f).and_then(|x| x.as_array()).unwrap_or(&empty);
    let mut h = format!(
        "<p>Merged from {} agents of run <b>{}</b>. Overlap is recomputed across agents on the \
         server's clock; a time between events of two agents may be off by {} µs (the two \
         largest agents' clock errors added), so each overlap stretch may be too:</p>\n<ul>\n",
        list("agents").len(),
        esc(&text(m, "run_id")),
        num(m, "clock_error_us")
    );
    for o in list("overlap") {
        let f = |k: &str| o.get(k).and_then(|x| x.as_f64()).unwrap_or(0.0);
        h.push_str(&format!(
            "<li>{}: overlap {:.3} ms ± {:.3} ms ({} stretch{})</li>\n",
            esc(&text(o, "variant")),
            f("overlap_ms"),
            f("overlap_error_ms"),
            num(o, "stretches"),
            if num(o, "stretches") == 1 { "" } else { "es" }
        ));
    }
    for a in list("agents") {
        h.push_str(&format!(
            "<li>agent {} ({}): time zero +{} µs, clock error ±{} µs, drift {} µs</li>\n",
            num(a, "index"),
            esc(&text(a, "dir")),
            num(a, "shift_us"),
            num(a, "clock_error_us"),
            num(a, "drift_us")
        ));
    }
    h.push_str("</ul>\n");
    h
}

/// On a Redis Cluster: one row per shard and variant (keys used, overlap, locks lost in
/// failovers); nothing for one server.
fn shards_table(summaries: &[Summary]) -> String {
    let mut h = String::new();
    if summaries.iter().all(|s| s.shards.is_empty()) {
        return h;
    }
    h.push_str(
        "<h2>Cluster shards</h2>\n<table>\n<thead><tr><th>variant</th><th>shard</th>\
         <th>master at start</th><th>slots</th><th>keys (used)</th><th>overlap incidents</th>\
         <th>overlap</th><th>locks lost in failovers</th></tr></thead>\n<tbody>\n",
    );
    for s in summaries {
        for f in &s.shards {
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} ({})</td><td>{}</td>\
                 <td>{:.3} ms</td><td>{}</td></tr>",
                esc(&s.meta.variant),
                f.shard,
                esc(&f.master),
                f.slots,
                f.keys,
                f.keys_used,
                f.overlap_incidents,
                f.overlap_ms,
                f.locks_lost
            );
        }
    }
    h.push_str("</tbody>\n</table>\n");
    h
}

/// The verdict table: one row per variant, its key figures green where zero and red where
/// not, each threshold held (green) or crossed (red). The page's first table.
fn verdict_table(p: &Page<'_>) -> String {
    use crate::analysis::verdict_table::{State, VerdictTable};
    let failure = p.manifest.get("failure").and_then(|v| v.as_str());
    let interrupted = p.manifest.get("interrupted") == Some(&serde_json::Value::Bool(true));
    let t = VerdictTable::new(p.run_id, p.summaries, interrupted, failure);
    let mut h = String::new();
    let _ = writeln!(
        h,
        "<h2>Verdict: {}</h2>\n<table class=\"verdict\">",
        esc(&t.outcome())
    );
    // A compare with libraries leads each row with its word, as the book's table of libraries
    // does (`super::word`).
    let words = p.summaries.iter().any(|s| s.library.is_some());
    h.push_str("<thead><tr>");
    for (i, c) in t.header().iter().enumerate() {
        let _ = write!(h, "<th style=\"background:#444\">{}</th>", esc(c));
        if words && i == 0 {
            h.push_str("<th style=\"background:#444\">reads</th>");
        }
    }
    h.push_str("</tr></thead>\n<tbody>\n");
    for (i, r) in t.rows.iter().enumerate() {
        let _ = write!(h, "<tr><td>{}</td>", esc(&r.variant));
        if words {
            let word = p
                .summaries
                .get(i)
                .map(|s| super::word::word(&super::word::Outcome::of(s)));
            match word {
                Some(w) => {
                    let _ = write!(h, "<td style=\"text-align:left\">{}</td>", w.html());
                }
                None => h.push_str("<td class=\"na\">-</td>"),
            }
        }
        for f in &r.figures {
            let class = match f.state {
                State::Zero => "zero",
                State::NonZero => "nonzero",
                State::NotMeasured => "na",
            };
            let _ = write!(h, "<td class=\"{class}\">{}</td>", esc(&f.text));
        }
        for m in &r.thresholds {
            match m {
                Some(m) => {
                    let class = if m.crossed { "nonzero" } else { "zero" };
                    let _ = write!(
                        h,
                        "<td class=\"{class}\" title=\"{}\">{}</td>",
                        esc(&m.message),
                        esc(&m.text())
                    );
                }
                None => h.push_str("<td class=\"na\">-</td>"),
            }
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody>\n</table>\n");
    if words {
        h.push_str("<p>How the word of each row is decided:</p>\n");
        h.push_str(&super::word::legend_html());
    }
    if !t.verdict.reasons.is_empty() {
        h.push_str("<ul class=\"bad\">\n");
        for r in &t.verdict.reasons {
            let _ = writeln!(h, "<li>{}</li>", esc(r));
        }
        h.push_str("</ul>\n");
    }
    h
}

/// The page.
pub(crate) fn page(p: &Page<'_>) -> String {
    let mut h = String::new();
    header(&mut h, p);
    h.push_str(&agents_note(p.manifest));
    h.push_str(&verdict_table(p));
    summary_table(&mut h, p);
    h.push_str(&shards_table(p.summaries));
    not_run(&mut h, p.manifest);
    observed(&mut h, p);
    check_note(&mut h, p);

    h.push_str("<h2>Charts</h2>\n");
    for c in &p.charts {
        let _ = writeln!(
            h,
            "<figure><h3>{}</h3><img src=\"{}\" alt=\"{}\" width=\"1000\">\
             <figcaption>{}</figcaption></figure>",
            esc(&c.title),
            esc(&c.file),
            esc(&c.title),
            esc(&c.note)
        );
    }

    configuration(&mut h, p.manifest);

    h.push_str("<h2>Files</h2>\n<ul class=\"files\">\n");
    for f in &p.files {
        let _ = writeln!(h, "<li><a href=\"{0}\">{0}</a></li>", esc(f));
    }
    h.push_str(
        "</ul>\n<p><code>.hgrm</code>: percentile distributions (values in ms); \
         <code>.hlog</code>: HdrHistogram interval logs (values in µs, intervals tagged by \
         release method); <code>events.csv</code>: one row per section.</p>\n",
    );
    h.push_str("</body>\n</html>\n");
    h
}

/// The head of the document, the title and the line of what ran where and when.
fn header(h: &mut String, p: &Page<'_>) {
    let m = |f: &str| {
        p.manifest
            .get(f)
            .map(|v| match v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .unwrap_or_default()
    };
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>lockbench {}</title>\n<style>{CSS}</style>\n</head>\n<body>\n",
        esc(p.run_id)
    );
    let _ = writeln!(h, "<h1>lockbench run {}</h1>", esc(p.run_id));
    let _ = writeln!(
        h,
        "<p>Server: <b>{}</b> · backend {} ({}) · seed {} · {} → {}{}</p>",
        esc(&m("server_version")),
        esc(&m("backend")),
        esc(&m("backend_detail")),
        esc(&m("seed")),
        esc(&m("started_at")),
        esc(&m("ended_at")),
        if m("interrupted") == "true" {
            " · <b>interrupted (Ctrl-C)</b>"
        } else {
            ""
        }
    );
}

/// The summary table: one column per variant, one row per figure present in any of them.
fn summary_table(h: &mut String, p: &Page<'_>) {
    h.push_str("<h2>Summary</h2>\n<table>\n<thead><tr><th style=\"background:#444\">figure</th>");
    for s in p.summaries {
        let _ = write!(
            h,
            "<th style=\"background:{}\">{}</th>",
            method_hex(&s.meta.variant),
            esc(&s.meta.variant)
        );
    }
    h.push_str("</tr></thead>\n<tbody>\n");
    // What the variant was, every figure of the one table, then theory and percentiles.
    type Cell = Box<dyn Fn(&Summary) -> String>;
    let mut rows: Vec<(String, Cell)> = Vec::new();
    for (label, f) in BEFORE {
        rows.push((label.to_string(), Box::new(f)));
    }
    for fig in figures()
        .into_iter()
        .filter(|f| p.summaries.iter().any(|s| f.group.present(s)))
    {
        rows.push((fig.label.clone(), Box::new(move |s| cell(&fig, s))));
    }
    for (label, f) in AFTER {
        rows.push((label.to_string(), Box::new(f)));
    }
    for (label, f) in &rows {
        let _ = write!(h, "<tr><td>{}</td>", esc(label));
        for s in p.summaries {
            let _ = write!(h, "<td>{}</td>", esc(&f(s)));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody>\n</table>\n");
}

/// An observed run's program, what went wrong with its copies, and what each client did
/// (`observe.json` stands for the manifest; `clients.csv`, one row a client).
fn observed(h: &mut String, p: &Page<'_>) {
    let Some(program) = p.manifest.get("program").and_then(|v| v.as_array()) else {
        return;
    };
    let words: Vec<&str> = program.iter().filter_map(|w| w.as_str()).collect();
    let text = |f: &str| {
        p.manifest
            .get(f)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
    };
    h.push_str("<h2>Observed</h2>\n");
    let _ = writeln!(
        h,
        "<p>The locks of <code>{}</code>, measured through the proxy at {} in front of {}.</p>",
        esc(&match words.is_empty() {
            true => "whatever connected".to_string(),
            false => words.join(" "),
        }),
        esc(text("listen")),
        esc(&crate::target::redact_url(text("server")))
    );
    if let Some(problems) = p.manifest.get("problems").and_then(|v| v.as_array())
        && !problems.is_empty()
    {
        h.push_str("<ul class=\"bad\">\n");
        for m in problems.iter().filter_map(|m| m.as_str()) {
            let _ = writeln!(h, "<li>{}</li>", esc(m));
        }
        h.push_str("</ul>\n");
    }
    let Some(clients) = &p.clients else { return };
    let mut rows = csv::Reader::from_reader(clients.as_bytes());
    let Ok(header) = rows.headers().cloned() else {
        return;
    };
    h.push_str("<h3>Clients</h3>\n<table class=\"clients\">\n<thead><tr>");
    for c in &header {
        let _ = write!(
            h,
            "<th style=\"background:#444\">{}</th>",
            esc(&c.replace('_', " "))
        );
    }
    h.push_str("</tr></thead>\n<tbody>\n");
    for r in rows.records().flatten() {
        h.push_str("<tr>");
        for c in &r {
            let _ = write!(h, "<td>{}</td>", esc(c));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody>\n</table>\n");
}

/// Cells of a compare across servers that could not run there.
fn not_run(h: &mut String, manifest: &serde_json::Value) {
    if let Some(serde_json::Value::Array(skipped)) = manifest.get("skipped")
        && !skipped.is_empty()
    {
        h.push_str("<p>Not run:</p>\n<ul>\n");
        for c in skipped {
            let field = |k: &str| c.get(k).and_then(|v| v.as_str()).unwrap_or("");
            let _ = writeln!(
                h,
                "<li><b>{}</b>: {}</li>",
                esc(field("variant")),
                esc(field("reason"))
            );
        }
        h.push_str("</ul>\n");
    }
}

/// Whether the summary was checked against events.csv, and what did not match.
fn check_note(h: &mut String, p: &Page<'_>) {
    let without_rows =
        p.manifest.pointer("/profile/events") == Some(&serde_json::Value::Bool(false));
    match p.mismatches {
        None if without_rows => h.push_str(
            "<p>This run wrote no <code>events.csv</code> (<code>events = \"none\"</code>): the \
             charts come from the interval logs, there is no timeline, and the summary cannot \
             be recounted from the sections.</p>\n",
        ),
        None => h.push_str(
            "<p>Not yet checked against <code>events.csv</code>: \
             <code>lockbench report DIR</code> recomputes every figure it can (counts, exact \
             overlap, percentiles) and redraws this page with the result.</p>\n",
        ),
        Some([]) => h.push_str(
            "<p class=\"ok\">Every figure recomputable from <code>events.csv</code> \
             (counts, overlap, duration and acquire-latency percentiles) matches \
             <code>summary.json</code>.</p>\n",
        ),
        Some(mismatches) => {
            h.push_str(
                "<p class=\"bad\">These figures of <code>summary.json</code> are not what \
                 <code>events.csv</code> gives:</p>\n<ul class=\"bad\">\n",
            );
            for x in mismatches {
                let _ = writeln!(h, "<li>{}</li>", esc(&x.to_string()));
            }
            h.push_str("</ul>\n");
        }
    }
}

/// The configuration table: the manifest's settings and the profile, flattened.
fn configuration(h: &mut String, manifest: &serde_json::Value) {
    h.push_str("<h2>Configuration</h2>\n<table class=\"cfg\">\n");
    let mut rows = Vec::new();
    for f in [
        "lockbench_version",
        "command",
        "profile_file",
        "connection_mode",
        "key_prefix",
        "servers",
    ] {
        if let Some(v) = manifest.get(f) {
            flatten(f, v, &mut rows);
        }
    }
    if let Some(profile) = manifest.get("profile") {
        flatten("profile", profile, &mut rows);
    }
    for (k, mut v) in rows {
        // Again here: the manifest may come from an older lockbench or be edited by hand.
        if k == "profile.redis" {
            v = crate::target::redact_url(&v);
        }
        let _ = writeln!(h, "<tr><td>{}</td><td>{}</td></tr>", esc(&k), esc(&v));
    }
    h.push_str("</table>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Text is escaped wherever it lands, so a hostile variant name cannot inject markup.
    #[test]
    fn escapes() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }

    /// Nested configuration flattens into dotted keys.
    #[test]
    fn flattens_profile() {
        let v = serde_json::json!({"stop": {"time": {"duration_us": 5}}, "redis": null});
        let mut rows = Vec::new();
        flatten("profile", &v, &mut rows);
        assert!(rows.contains(&("profile.stop.time.duration_us".into(), "5".into())));
        assert!(rows.contains(&("profile.redis".into(), "—".into())));
    }

    /// A compare with libraries leads each verdict row with its word and explains the words;
    /// a run without a library (the control) shows neither.
    #[test]
    fn a_compare_with_libraries_reads_at_a_glance() {
        let mut del = Summary::empty();
        del.meta.variant = "del".into();
        del.meta.ttl_ms = 1000;
        del.counts.wrongful_deletes = 3;
        let mut lib = Summary::empty();
        lib.meta.variant = "redis-py".into();
        lib.meta.ttl_ms = 1000;
        lib.counts.wrongful_deletes = 0;
        lib.library = Some("redis 8.2.0".into());
        let manifest = serde_json::json!({});
        let page_of = |summaries: &[Summary]| {
            verdict_table(&Page {
                run_id: "r1",
                summaries,
                manifest: &manifest,
                charts: vec![],
                files: vec![],
                mismatches: None,
                clients: None,
            })
        };
        let html = page_of(&[del.clone(), lib]);
        let rows: Vec<&str> = html.lines().filter(|l| l.starts_with("<tr><td>")).collect();
        assert!(rows[0].contains(">wrongful delete</span>"), "{}", rows[0]);
        assert!(rows[1].contains(">safe</span>"), "{}", rows[1]);
        assert!(html.contains("<th style=\"background:#444\">reads</th>"));
        assert!(html.contains(&crate::report::word::legend_html()));
        let control = page_of(&[del]);
        assert!(
            !control.contains("</span>") && !control.contains(">reads<"),
            "{control}"
        );
    }

    /// The page links what it is given, shows every variant, and loads nothing remote.
    #[test]
    fn page_is_self_contained() {
        let manifest =
            serde_json::json!({"server_version": "redis 7.2", "profile": {"ttl_ms": 20}});
        let html = page(&Page {
            run_id: "r1",
            summaries: &[],
            manifest: &manifest,
            charts: vec![Chart {
                file: "durations.png".into(),
                title: "Durations".into(),
                note: "n".into(),
            }],
            files: vec!["events.csv".into()],
            mismatches: Some(&[]),
            clients: None,
        });
        assert!(html.contains("<img src=\"durations.png\""));
        assert!(html.contains("<a href=\"events.csv\">"));
        assert!(html.contains("redis 7.2"));
        assert!(!html.contains("http"));
        assert!(!html.contains("<script"));
    }

    /// A merged run states each variant's overlap with its clock error and how each agent was
    /// placed; an agent's own page says which part of which run it is. Names are escaped.
    #[test]
    fn multi_agent_runs_are_explained() {
        let merged = serde_json::json!({"merged": {
            "run_id": "r<1>",
            "clock_error_us": 240,
            "agents": [{"index": 0, "dir": "a/agent-0", "shift_us": 1015, "clock_error_us": 123, "drift_us": 10}],
            "overlap": [{"variant": "token", "overlap_ms": 322.5944, "overlap_error_ms": 0.24, "stretches": 1}]
        }});
        let note = agents_note(&merged);
        assert!(note.contains("run <b>r&lt;1&gt;</b>"), "{note}");
        assert!(note.contains("off by 240 µs"), "{note}");
        assert!(
            note.contains("token: overlap 322.594 ms ± 0.240 ms (1 stretch)"),
            "{note}"
        );
        assert!(note.contains("agent 0 (a/agent-0): time zero +1015 µs, clock error ±123 µs"));
        let agent = serde_json::json!({"agent": {"run_id": "r", "index": 1, "count": 2, "worker_first": 2, "worker_end": 4}});
        assert!(agents_note(&agent).contains("Agent 1 of 2 of run <b>r</b>, workers 2–3"));
        assert_eq!(agents_note(&serde_json::json!({})), "");
    }

    /// A manifest holding a password (older lockbench, edited by hand) is shown redacted.
    #[test]
    fn page_redacts_the_url_again() {
        let manifest = serde_json::json!({"profile": {"redis": "redis://:pw/x@127.0.0.1:1/#frag"}});
        let html = page(&Page {
            run_id: "r1",
            summaries: &[],
            manifest: &manifest,
            charts: vec![],
            files: vec![],
            mismatches: Some(&[]),
            clients: None,
        });
        assert!(html.contains("redis://***@127.0.0.1:1"), "{html}");
        assert!(!html.contains("pw") && !html.contains("frag"));
        assert!(!html.contains("<script"));
    }
}
