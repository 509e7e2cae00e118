//! Reports rebuilt from a run directory: every chart decodes and is not blank, the numbers
//! they plot are the right ones, the interval logs read back to the summary's figures, the
//! HTML page is self-contained, and `report` catches a summary that disagrees with the events.
//!
//! Real runs use the in-process memory backend with a fixed seed (no Redis needed); the golden
//! checks use a small hand-written run whose every number is known.

use crate::common;

use lockbench::Quantiles;
use lockbench::charts::{durations, timeline};
use lockbench::{EventRow, new_hist};
use lockbench::{
    ReportError, render_after_run, render_and_verify, render_report, run_dir, verify_report,
};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("reports-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs the real binary against the memory backend with a fixed seed.
fn real_run(name: &str, args: &[&str]) -> PathBuf {
    let dir = scratch(name).join("run");
    let out = common::Lockbench::new()
        .args(args)
        .args([
            "--backend",
            "memory",
            "--seed",
            "7",
            "--workers",
            "8",
            "--ttl",
            "20ms",
            "--dist",
            "exponential(mean=15ms)",
            "--think",
            "constant(1ms)",
            "--duration",
            "1s",
            "-q",
            "--out",
        ])
        .arg(&dir)
        .output();
    assert!(
        out.status.success(),
        "lockbench failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

/// A `compare` run (del and token), made once for every test that only reads it.
fn compare_run() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| real_run("compare", &["compare", "--releases", "del,token"]))
}

/// A single-variant run (del, one key), made once.
fn single_run() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| real_run("single", &["run", "--release", "del", "--keys", "1"]))
}

fn copy_run(from: &Path, name: &str) -> PathBuf {
    let to = scratch(name);
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
    }
    to
}

/// Width, height and number of distinct RGBA colours of a PNG.
fn png_stats(path: &Path) -> (u32, u32, usize) {
    let f = std::io::BufReader::new(std::fs::File::open(path).unwrap());
    let mut reader = png::Decoder::new(f).read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let px = info.color_type.samples();
    let mut colours: Vec<&[u8]> = buf[..info.buffer_size()].chunks(px).collect();
    colours.sort_unstable();
    colours.dedup();
    (info.width, info.height, colours.len())
}

/// Every chart of a two-variant run is redrawn from the directory alone, decodes as a PNG of
/// the documented size, and is not blank (a chart with axes, text and bars has many colours).
#[test]
fn charts_decode_with_expected_size_and_are_not_blank() {
    let dir = copy_run(compare_run(), "charts");
    for f in [
        "durations.png",
        "survival.png",
        "timeline.png",
        "acquire-latency.png",
        "compare.png",
        "report.html",
    ] {
        std::fs::remove_file(dir.join(f)).unwrap();
    }
    let r = render_report(&dir).unwrap();
    assert_eq!(r.durations.panels.len(), 2);
    for (name, size) in [
        ("durations.png", durations::durations_size(2)),
        ("survival.png", (1000, 600)),
        ("timeline.png", (1000, 600)),
        ("acquire-latency.png", (1000, 600)),
        ("compare.png", (1000, 600)),
    ] {
        let p = dir.join(name);
        assert!(r.files.contains(&p), "{name} not reported as written");
        let (w, h, colours) = png_stats(&p);
        assert_eq!((w, h), size, "{name}");
        assert!(colours > 20, "{name} looks blank: {colours} colours");
    }
    assert!(dir.join("report.html").is_file());
}

/// A single-variant run gets every chart but the comparison.
#[test]
fn single_variant_has_no_compare_chart() {
    let dir = single_run();
    for f in [
        "durations.png",
        "survival.png",
        "timeline.png",
        "acquire-latency.png",
        "report.html",
    ] {
        assert!(dir.join(f).is_file(), "{f} missing after the run");
    }
    assert!(!dir.join("compare.png").exists());
    assert_eq!(png_stats(&dir.join("durations.png")).0, 1000);
    assert_eq!(png_stats(&dir.join("durations.png")).1, 600);
}

/// The interval logs lockbench wrote read back, merged by tag, to the run's summary: the same
/// count and, on exact µs, the same p50/p90/p99/p99.9/max (both come from the same recorded
/// values, so HdrHistogram gives identical answers).
#[test]
fn interval_logs_round_trip_to_summary() {
    let dir = compare_run();
    let run = run_dir::RunFiles::open(dir).unwrap();
    let us = |ms: f64| (ms * 1000.0).round() as u64;
    for (stem, pick) in [
        (
            "durations",
            (|s| &s.duration_ms) as fn(&lockbench::Summary) -> &Quantiles,
        ),
        ("acquire-latency", |s| &s.acquire_latency_ms),
        ("set-latency", |s| &s.set_latency_ms),
        ("release-latency", |s| &s.release_latency_ms),
        ("excess", |s| &s.excess_ms),
    ] {
        let logs = run_dir::read_hlog(&dir.join(format!("{stem}.hlog"))).unwrap();
        let tags: Vec<&str> = logs.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(tags, ["del", "token"], "{stem}");
        for (tag, h) in &logs {
            let s = run
                .summary
                .variants
                .iter()
                .find(|s| &s.meta.variant == tag)
                .unwrap();
            let q = pick(s);
            assert_eq!(h.len(), q.count, "{stem} {tag} count");
            if h.is_empty() {
                continue;
            }
            assert_eq!(h.value_at_quantile(0.5), us(q.p50), "{stem} {tag} p50");
            assert_eq!(h.value_at_quantile(0.9), us(q.p90), "{stem} {tag} p90");
            assert_eq!(h.value_at_quantile(0.99), us(q.p99), "{stem} {tag} p99");
            assert_eq!(h.value_at_quantile(0.999), us(q.p999), "{stem} {tag} p99.9");
            assert_eq!(h.max(), us(q.max), "{stem} {tag} max");
        }
        let durations = run
            .summary
            .variants
            .iter()
            .map(|s| s.counts.sections)
            .collect::<Vec<_>>();
        if stem == "durations" {
            assert_eq!(
                logs.iter().map(|(_, h)| h.len()).collect::<Vec<_>>(),
                durations
            );
        }
    }
}

fn attr_values<'a>(html: &'a str, attr: &str) -> Vec<&'a str> {
    let pat = format!("{attr}=\"");
    html.match_indices(&pat)
        .map(|(i, _)| {
            let rest = &html[i + pat.len()..];
            &rest[..rest.find('"').unwrap()]
        })
        .collect()
}

/// Every href and src of report.html names a file of the run directory, every chart and data
/// file is linked, and the page loads nothing from the network.
#[test]
fn html_links_exist_and_nothing_remote() {
    let dir = compare_run();
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let srcs = attr_values(&html, "src");
    let hrefs = attr_values(&html, "href");
    for v in srcs.iter().chain(&hrefs) {
        assert!(
            !v.starts_with("//") && !v.contains(':'),
            "not a relative link: {v}"
        );
        assert!(dir.join(v).is_file(), "{v} is linked but missing");
    }
    for png in [
        "durations.png",
        "survival.png",
        "timeline.png",
        "acquire-latency.png",
        "compare.png",
    ] {
        assert!(srcs.contains(&png), "{png} not shown");
    }
    for f in [
        "events.csv",
        "summary.csv",
        "summary.json",
        "durations.hlog",
        "durations-del.hgrm",
    ] {
        assert!(hrefs.contains(&f), "{f} not linked");
    }
    assert!(!html.contains("http://") && !html.contains("https://"));
    assert!(!html.contains("<script"));
    assert!(!html.contains("url("), "no CSS resource loads");
    let run = run_dir::RunFiles::open(dir).unwrap();
    let server = run.manifest_str("server_version");
    assert!(!server.is_empty());
    for s in [
        "del",
        "token",
        "wrongful deletes",
        "profile.ttl_ms",
        &server,
    ] {
        assert!(html.contains(s), "{s} not on the page");
    }
}

/// `lockbench report` on a finished run redraws it and finds the summary reproduced by the
/// events: every count, the exact overlap time, incidents, peak holders and percentiles.
#[test]
fn report_reproduces_the_summary() {
    let dir = copy_run(compare_run(), "reproduce");
    assert_eq!(verify_report(&dir).unwrap(), vec![]);
    let out = common::Lockbench::new().arg("report").arg(&dir).output();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("agrees"), "{stdout}");
    assert!(stdout.contains("timeline.png"), "{stdout}");
    // The run had the story to tell: del deleted others' locks, token refused.
    let run = run_dir::RunFiles::open(&dir).unwrap();
    let del = &run.summary.variants[0];
    assert!(
        del.counts.wrongful_deletes > 0 && del.overlap_ms > 0.0,
        "{del:?}"
    );
}

/// Negative control: a summary.json edited by one wrongful delete is caught, by figure.
#[test]
fn tampered_summary_is_caught() {
    let dir = copy_run(compare_run(), "tampered");
    let p = dir.join("summary.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    let wd = v["variants"][0]["wrongful_deletes"].as_u64().unwrap();
    v["variants"][0]["wrongful_deletes"] = (wd + 1).into();
    v["variants"][1]["overlap_ms"] =
        (v["variants"][1]["overlap_ms"].as_f64().unwrap() + 0.001).into();
    std::fs::write(&p, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    let m = verify_report(&dir).unwrap();
    let figures: Vec<(&str, &str)> = m
        .iter()
        .map(|x| (x.variant.as_str(), x.figure.as_str()))
        .collect();
    assert_eq!(
        figures,
        [("del", "wrongful_deletes"), ("token", "overlap_ms")]
    );
    assert_eq!(m[0].in_summary, (wd + 1).to_string());
    assert_eq!(m[0].from_events, wd.to_string());
    let out = common::Lockbench::new().arg("report").arg(&dir).output();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("wrongful_deletes"));
}

/// A directory that is not a run gets an error naming every missing file.
#[test]
fn not_a_run_directory_names_what_is_missing() {
    let dir = scratch("not-a-run");
    std::fs::write(dir.join("manifest.json"), "{}").unwrap();
    let e = render_report(&dir).unwrap_err();
    let msg = format!("{e:#}");
    assert!(
        msg.contains("summary.json") && msg.contains("events.csv"),
        "{msg}"
    );
    assert!(!msg.contains("manifest.json"), "{msg}");
    assert!(matches!(
        e.downcast_ref::<ReportError>(),
        Some(ReportError::NotARun { .. })
    ));
    let out = common::Lockbench::new()
        .arg("report")
        .arg(dir.join("nope"))
        .output();
    // Bad input (the directory named is not a run), as for a bad profile: exit 2.
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("missing manifest.json, summary.json, events.csv")
    );
}

/// An events.csv cut mid-row (a killed run) is reported with the line of the broken row.
#[test]
fn truncated_events_names_the_line() {
    let dir = copy_run(single_run(), "truncated");
    let p = dir.join("events.csv");
    let text = std::fs::read_to_string(&p).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() > 10);
    let keep = 8; // header + 7 rows, then half of row 8
    let mut cut = lines[..keep].join("\n");
    cut.push('\n');
    cut.push_str(&lines[keep][..lines[keep].len() / 2]);
    std::fs::write(&p, cut).unwrap();
    let e = render_report(&dir).unwrap_err();
    match e.downcast_ref::<lockbench::BadRow>() {
        Some(bad) => assert_eq!(bad.line, keep as u64 + 1),
        None => panic!("expected BadRow, got {e:#}"),
    }
    assert!(format!("{e:#}").contains(&format!("line {}", keep + 1)));
}

// ----- a hand-written run whose every number is known -----

const TTL_US: u64 = 100_000;

fn row(worker: usize, seq: u64, a: u64, r: u64, outcome: &str) -> EventRow {
    let d = r - a;
    EventRow {
        variant: "del".into(),
        worker,
        key: 0,
        seq,
        attempt_start_us: a.saturating_sub(500),
        set_sent_us: a.saturating_sub(200),
        acquired_us: a,
        released_us: r,
        intended_us: d,
        duration_us: d,
        ttl_us: TTL_US,
        overrun: d > TTL_US,
        excess_us: d.saturating_sub(TTL_US),
        holders_at_start: 0,
        attempts: 1,
        acquire_latency_us: a.min(500),
        release_latency_us: 100,
        release: "del".into(),
        outcome: lockbench::SectionOutcome::from_name(outcome).unwrap(),
        interrupted: false,
        ..EventRow::default()
    }
}

/// The A/B/C story with a naive DEL: A (148 ms) outlives its 100 ms TTL, B moves in at 110 ms,
/// A's DEL removes B's lock at 148 ms, C moves in at 160 ms while B still works.
fn story() -> Vec<EventRow> {
    vec![
        row(0, 0, 0, 148_000, "wrongful_delete"),
        row(1, 0, 110_000, 186_000, "nothing_deleted"),
        row(2, 0, 160_000, 204_000, "released"),
        row(0, 1, 250_000, 262_000, "released"),
        row(1, 1, 270_000, 282_000, "released"),
    ]
}

fn quantiles(values: impl Iterator<Item = u64>) -> Quantiles {
    let mut h = new_hist();
    for v in values {
        h.record(v).unwrap();
    }
    Quantiles::of(&h)
}

fn write_fixture(dir: &Path, rows: &[EventRow]) {
    let mut w = csv::Writer::from_path(dir.join("events.csv")).unwrap();
    for r in rows {
        w.serialize(r).unwrap();
    }
    w.flush().unwrap();
    let manifest = serde_json::json!({
        "run_id": "golden", "command": "run", "seed": 1, "backend": "memory",
        "backend_detail": "memory model", "server_version": "lockbench memory model",
        "variants": ["del"], "started_at": "2026-01-01T00:00:00Z",
        "ended_at": "2026-01-01T00:00:01Z", "interrupted": false,
        "profile": {"ttl_ms": 100, "workers": 3, "keys": 1},
    });
    std::fs::write(dir.join("manifest.json"), manifest.to_string()).unwrap();
    let zero = Quantiles::default();
    let summary = serde_json::json!({"run_id": "golden", "variants": [{
        "variant": "del", "release": "del", "connection_mode": "per-worker",
        "backend": "memory model", "server_version": "lockbench memory model",
        "workers": 3, "keys": 1, "ttl_ms": 100, "time_scale": 1.0, "unscaled_ttl_ms": 100.0, "seed": 1, "elapsed_s": 0.5,
        "attempts": 5, "sections": 5, "throughput_per_s": 10.0,
        "overruns": 1, "overrun_fraction": 0.2,
        "excess_total_ms": rows.iter().map(|r| r.excess_us).sum::<u64>() as f64 / 1000.0,
        "stale_releases": 1, "stale_without_overrun": 0, "deleted_by_other": 1,
        "refused_releases": 0, "refused_expired": 0, "refused_held_by_other": 0,
        "refused_unclassified": 0, "wrongful_deletes": 1, "nothing_deleted": 1,
        "released": 3, "overlap_ms": 64.0, "overlap_incidents": 2, "peak_holders": 2,
        "rejections": 0, "retries": 0, "acquire_giveups": 0, "interrupted": 0,
        "errors": 0, "errors_by_kind": {}, "first_errors": {},
        "duration_ms": quantiles(rows.iter().map(|r| r.duration_us)),
        "intended_ms": zero, "timer_error_ms": zero, "excess_ms": zero,
        "acquire_latency_ms": quantiles(rows.iter().map(|r| r.acquire_latency_us)),
        "set_latency_ms": zero, "release_latency_ms": zero, "overlap_stretch_ms": zero,
        "per_key": [{"key": 0, "overlap_ms": 64.0, "overlap_incidents": 2, "peak_holders": 2}],
    }]});
    std::fs::write(dir.join("summary.json"), summary.to_string()).unwrap();
}

/// Sets `first_overlap_ms` of key 0 in the fixture's summary.
fn set_first_overlap(dir: &Path, ms: f64) {
    let p = dir.join("summary.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    v["variants"][0]["per_key"][0]["first_overlap_ms"] = ms.into();
    std::fs::write(&p, v.to_string()).unwrap();
}

/// Golden numbers of every chart for the hand-written story: histogram bins, p50/max, the
/// survival curve's crossing of the TTL, the timeline's rows, red stretches and marks — and
/// the summary written for it is exactly what the events reproduce. The timeline is the same
/// whether the summary records the first overlap (110 ms) or, like older runs, leaves it to be
/// recomputed from the key's sections.
#[test]
fn golden_numbers_of_a_hand_written_run() {
    for first_overlap in [None, Some(110.0)] {
        let dir = scratch(&format!("golden-{}", first_overlap.is_some()));
        write_fixture(&dir, &story());
        if let Some(ms) = first_overlap {
            set_first_overlap(&dir, ms);
        }
        golden_numbers(&dir);
    }
}

fn golden_numbers(dir: &Path) {
    let r = render_and_verify(dir).unwrap();
    assert_eq!(r.mismatches, Some(vec![]));

    // Durations 148, 76, 44, 12, 12 ms: max/p50 = 3.4, linear bins of ceil((max+1)/60) µs.
    let d = &r.durations;
    assert!(!d.log_x);
    assert_eq!(d.ttl_us, TTL_US);
    let p = &d.panels[0];
    assert_eq!(p.marks.count, 5);
    assert_eq!(p.overruns, 1);
    assert!(
        (p.marks.p50_us as f64 - 44_000.0).abs() <= 44.0,
        "{:?}",
        p.marks
    );
    assert!(
        (p.marks.max_us as f64 - 148_000.0).abs() <= 148.0,
        "{:?}",
        p.marks
    );
    let width = (p.marks.max_us + 1).div_ceil(durations::DURATION_BINS as u64) as f64;
    assert_eq!(p.bins[1].lo_us, width);
    let count_at = |us: f64| {
        p.bins
            .iter()
            .find(|b| b.lo_us <= us && us < b.hi_us)
            .unwrap()
            .count
    };
    assert_eq!(count_at(12_000.0), 2);
    assert_eq!(count_at(44_000.0), 1);
    assert_eq!(count_at(76_000.0), 1);
    assert_eq!(count_at(148_000.0), 1);
    assert_eq!(p.bins.iter().map(|b| b.count).sum::<u64>(), 5);

    // Survival: 1 of 5 outlives the TTL.
    let s = &r.survival[0];
    assert_eq!(s.at_ttl, 0.2);
    // A 1-in-10 level needs at least 10 sections: 5 support none.
    assert!(s.levels.is_empty());
    let below_ttl = s.points.iter().rfind(|(t, _)| *t < TTL_US).unwrap();
    assert_eq!(below_ttl.1, 0.2);

    // Timeline: around the first overlap at 110 ms, red where two holders were open.
    let t = &r.timeline;
    assert_eq!(t.focus, timeline::Focus::FirstOverlap(110_000));
    assert_eq!((t.variant.as_str(), t.key), ("del", 0));
    let rows: Vec<(usize, u64, u64, u64)> = t
        .rows
        .iter()
        .map(|r| (r.worker, r.acquired_us, r.released_us, r.expiry_us))
        .collect();
    assert_eq!(
        rows,
        [
            (0, 0, 148_000, 100_000),
            (1, 110_000, 186_000, 210_000),
            (2, 160_000, 204_000, 260_000),
            (0, 250_000, 262_000, 350_000),
            (1, 270_000, 282_000, 370_000),
        ]
    );
    let red: Vec<&Vec<(u64, u64)>> = t.rows.iter().map(|r| &r.red).collect();
    assert_eq!(red[0], &vec![(110_000, 148_000)]);
    assert_eq!(red[1], &vec![(110_000, 148_000), (160_000, 186_000)]);
    assert_eq!(red[2], &vec![(160_000, 186_000)]);
    assert!(red[3].is_empty() && red[4].is_empty());
    assert_eq!(t.rows[0].mark, Some(timeline::ReleaseMark::WrongfulDelete));
    assert_eq!(t.rows[1].mark, None);

    // No interval log here: acquire latency comes from the events.
    assert_eq!(r.acquire_source, "events.csv");
    assert_eq!(r.acquire_latency[0].count, 5);
    assert!(r.compare.is_none());
}

/// The same story with no overlap (B starts after A ends) says so and still shows a window.
#[test]
fn timeline_without_overlap_shows_the_longest_section() {
    let dir = scratch("no-overlap");
    let rows = vec![
        row(0, 0, 0, 90_000, "released"),
        row(1, 0, 95_000, 105_000, "released"),
        row(2, 0, 110_000, 120_000, "released"),
    ];
    write_fixture(&dir, &rows);
    let r = render_and_verify(&dir).unwrap();
    assert_eq!(r.timeline.focus, timeline::Focus::Longest(0));
    assert_eq!(r.timeline.rows.len(), 3);
    assert!(r.timeline.rows.iter().all(|r| r.red.is_empty()));
    // The fixture's summary claims overlap that these events do not have.
    let mismatches = r.mismatches.unwrap();
    let figures: Vec<&str> = mismatches.iter().map(|m| m.figure.as_str()).collect();
    assert!(
        figures.contains(&"overlap_ms") && figures.contains(&"sections"),
        "{figures:?}"
    );
}

/// A run that recorded no section at all (header-only or empty events.csv) still renders every
/// chart without panicking, saying there is nothing to show.
#[test]
fn empty_run_renders() {
    let dir = scratch("empty");
    write_fixture(&dir, &[]);
    let r = render_and_verify(&dir).unwrap();
    assert_eq!(r.timeline.focus, timeline::Focus::Empty);
    assert_eq!(r.durations.panels.len(), 0);
    for f in [
        "durations.png",
        "survival.png",
        "timeline.png",
        "acquire-latency.png",
    ] {
        assert_eq!(png_stats(&dir.join(f)).0, 1000, "{f}");
    }
    // The summary claims 5 sections; the empty events disagree.
    assert!(r.mismatches.unwrap().iter().any(|m| m.figure == "sections"));
}

/// The timeline centres on the instant `summary.json` records for the busiest key rather than
/// recomputing it: moved to 160 ms, the window is every holder open then (B and C), the one
/// section that closed before (A) and those after. Negative control for the check: `report`
/// catches the moved instant by figure and exits 2.
#[test]
fn timeline_centres_on_the_summary_first_overlap() {
    let dir = scratch("first-overlap");
    write_fixture(&dir, &story());
    set_first_overlap(&dir, 160.0);
    let r = render_report(&dir).unwrap();
    assert_eq!(r.timeline.focus, timeline::Focus::FirstOverlap(160_000));
    let starts: Vec<u64> = r.timeline.rows.iter().map(|r| r.acquired_us).collect();
    assert_eq!(starts, [0, 110_000, 160_000, 250_000, 270_000]);
    let m = verify_report(&dir).unwrap();
    let figures: Vec<&str> = m.iter().map(|x| x.figure.as_str()).collect();
    assert_eq!(figures, ["per_key.first_overlap_ms"]);
    assert_eq!(m[0].in_summary, "key 0: 160000 µs");
    assert_eq!(m[0].from_events, "key 0: 110000 µs");
    let out = common::Lockbench::new().arg("report").arg(&dir).output();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("first_overlap_ms"));
}

/// The report drawn after a run does not run the check (its memory grows with the run): a
/// summary that disagrees with the events is drawn without complaint, and the page says it
/// was not checked — until `lockbench report` checks it.
#[test]
fn render_after_run_skips_the_check() {
    let dir = scratch("unchecked");
    write_fixture(&dir, &story()[..3]);
    let r = render_after_run(&dir).unwrap();
    assert_eq!(r.mismatches, None);
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("Not yet checked"), "{html}");
    let out = common::Lockbench::new().arg("report").arg(&dir).output();
    assert_eq!(out.status.code(), Some(2));
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(!html.contains("Not yet checked"));
    assert!(html.contains("are not what"), "{html}");
}

/// On a real run the streamed window is the one sorting every section of the key gave: from 3
/// before the earliest holder open at the first overlap, 40 consecutive sections by start; and
/// the red drawn on them is overlap the key really had.
#[test]
fn real_run_window_matches_sorting_every_section() {
    let dir = copy_run(single_run(), "window");
    let r = render_report(&dir).unwrap();
    let iv = run_dir::key_intervals(&dir.join("events.csv"), "del", 0).unwrap();
    let (stats, stretches) = lockbench::overlap::compute(&iv);
    let t = stats
        .first_overlap_us
        .expect("a del run on one key overlaps");
    assert_eq!(r.timeline.focus, timeline::Focus::FirstOverlap(t));
    let mut sorted = iv.clone();
    sorted.sort_unstable();
    let open = sorted.iter().position(|&(s, e)| s <= t && t < e).unwrap();
    let first = open.saturating_sub(3);
    let last = (first + timeline::TIMELINE_ROWS).min(sorted.len());
    let expected: Vec<(u64, u64)> = sorted[first..last].to_vec();
    let shown: Vec<(u64, u64)> = r
        .timeline
        .rows
        .iter()
        .map(|r| (r.acquired_us, r.released_us))
        .collect();
    assert_eq!(shown, expected);
    for row in &r.timeline.rows {
        for &(a, b) in &row.red {
            assert!(
                stretches.iter().any(|&(x, y)| x <= a && b <= y),
                "red {a}..{b} is not overlap"
            );
        }
    }
    assert!(r.timeline.rows.iter().any(|r| !r.red.is_empty()));
}

/// `report` replaces a chart that is a link instead of writing through it: a run directory
/// copied with a link in it (or tampered with) cannot make lockbench overwrite the file the
/// link points to. Before, `timeline.png → ../precious.txt` turned that file into a PNG.
#[test]
fn report_replaces_links_instead_of_writing_through_them() {
    let dir = copy_run(single_run(), "links");
    let precious = dir.parent().unwrap().join("links-precious.txt");
    std::fs::write(&precious, "precious\n").unwrap();
    let timeline = dir.join("timeline.png");
    std::fs::remove_file(&timeline).unwrap();
    std::os::unix::fs::symlink(&precious, &timeline).unwrap();
    let out = common::Lockbench::new().arg("report").arg(&dir).output();
    assert_eq!(out.status.code(), Some(0), "{}", common::text_of(&out));
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "precious\n");
    let meta = timeline.symlink_metadata().unwrap();
    assert!(
        meta.file_type().is_file(),
        "the chart is a file of its own now"
    );
    assert!(png_stats(&timeline).0 > 0);
}
