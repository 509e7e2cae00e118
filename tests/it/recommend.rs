//! `lockbench recommend`: statistical guarantees on known distributions, every input kind, the
//! error messages, and the real binary.

use crate::common;

use hdrhistogram::Histogram;
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use lockbench::Dist;
use lockbench::EventRow;
use lockbench::Unit;
use lockbench::{
    InputKind, LoadOptions, Params, Samples, expected_blocked_ms, load_durations, recommend,
};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

/// A fresh directory in the temp dir, removed with its content when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "lockbench-recommend-{}-{tag}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
    fn file(&self, name: &str, content: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, content).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn draw(d: &Dist, seed: u64, n: usize) -> Vec<f64> {
    let s = d.sampler();
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..n).map(|_| s.sample_ms(&mut rng)).collect()
}

fn err_text(path: &Path, opts: &LoadOptions) -> String {
    match load_durations(path, opts) {
        Ok(_) => panic!("{} loaded without error", path.display()),
        Err(e) => e.to_string(),
    }
}

/// The distribution-free TTL keeps its promise: over 200 samples each from a log-normal and an
/// exponential, the TRUE overrun probability at the recommended TTL exceeds the target in about
/// 1 − confidence of the repetitions or fewer. The naive empirical quantile, checked the same way,
/// fails far more often (negative control: the check can fail).
#[test]
fn distribution_free_ttl_holds_with_the_stated_confidence() {
    let (n, target, conf, reps) = (5_000usize, 1e-3, 0.95, 200u64);
    let params = Params::new(target, conf, 1.5, None, 0.1).unwrap();
    for spec in ["lognormal(median=20ms,p99=120ms)", "exponential(mean=30ms)"] {
        let d = Dist::parse(spec).unwrap();
        let (mut violations, mut naive_violations) = (0u64, 0u64);
        for seed in 0..reps {
            let values = draw(&d, seed, n);
            let samples = Samples::from_ms(values);
            let r = recommend(&samples, &params);
            let ttl = r
                .distribution_free
                .ttl_ms
                .expect("5000 samples support 1e-3");
            if d.survival(ttl).unwrap() > target {
                violations += 1;
            }
            let Samples::Exact(sorted) = &samples else {
                unreachable!()
            };
            let naive = sorted[((1.0 - target) * n as f64).ceil() as usize - 1];
            if d.survival(naive).unwrap() > target {
                naive_violations += 1;
            }
        }
        let rate = violations as f64 / reps as f64;
        let naive_rate = naive_violations as f64 / reps as f64;
        assert!(
            rate <= (1.0 - conf) + 0.05,
            "{spec}: {violations}/{reps} violations, expected about ≤ {}",
            1.0 - conf
        );
        assert!(
            naive_rate > 0.3,
            "{spec}: naive quantile violated only {naive_rate}"
        );
    }
}

/// On a log-normal sample of 20 000 values the models' TTLs for 1e-4 land near the true
/// 0.9999-quantile: log-normal MLE within 8 %, the GPD over the top 10 % within 35 % (its
/// extrapolation from 1e-1 to 1e-4 is much less certain). The verdicts call the true model
/// consistent: the Anderson–Darling thresholds are ≈ 5 % points, so over 10 samples at most 2
/// false alarms per model are allowed (P(≥ 3) ≈ 1 %).
#[test]
fn models_recover_the_lognormal_tail() {
    let d = Dist::parse("lognormal(median=20ms,p99=120ms)").unwrap();
    let truth = d.quantile(1.0 - 1e-4).unwrap();
    let mut false_alarms = [0u32; 2];
    for seed in 0..10 {
        let r = recommend(
            &Samples::from_ms(draw(&d, 100 + seed, 20_000)),
            &Params::default(),
        );
        let ln_ratio = r.models[0].ttl_ms.unwrap() / truth;
        let gpd_ratio = r.models[1].ttl_ms.unwrap() / truth;
        assert!(
            (ln_ratio - 1.0).abs() < 0.08,
            "seed {seed}: lognormal {ln_ratio}"
        );
        assert!(
            (gpd_ratio - 1.0).abs() < 0.35,
            "seed {seed}: gpd {gpd_ratio}"
        );
        for (alarms, fit) in false_alarms.iter_mut().zip(&r.models) {
            if !fit.verdict.starts_with("consistent") {
                *alarms += 1;
            }
        }
    }
    assert!(false_alarms.iter().all(|a| *a <= 2), "{false_alarms:?}");
}

/// A log-normal fitted to exponential data is flagged as a poor tail fit and its TTL called
/// conservative, while the GPD fits (negative control for the verdict).
#[test]
fn lognormal_on_exponential_data_is_flagged() {
    let d = Dist::parse("exponential(mean=30ms)").unwrap();
    let r = recommend(&Samples::from_ms(draw(&d, 7, 20_000)), &Params::default());
    assert!(
        r.models[0].verdict.starts_with("poor fit"),
        "{}",
        r.models[0].verdict
    );
    assert!(
        r.models[0].verdict.contains("overestimates"),
        "{}",
        r.models[0].verdict
    );
    assert!(
        r.models[1].verdict.starts_with("consistent"),
        "{}",
        r.models[1].verdict
    );
}

/// 50 values cannot support 1e-4 at 95 %: no TTL, and the needed sample size 29 956 is given.
#[test]
fn tiny_sample_reports_samples_needed() {
    let d = Dist::parse("lognormal(median=20ms,p99=120ms)").unwrap();
    let r = recommend(&Samples::from_ms(draw(&d, 1, 50)), &Params::default());
    assert!(!r.distribution_free.supported);
    assert_eq!(r.distribution_free.ttl_ms, None);
    assert_eq!(r.recommended_ttl_ms, None);
    assert_eq!(r.distribution_free.samples_needed, 29_956);
    assert!(
        r.distribution_free
            .explanation
            .contains("cannot be supported")
    );
    assert!(r.distribution_free.explanation.contains("29956"));
}

fn event(variant: &str, seq: u64, duration_us: u64, interrupted: bool) -> EventRow {
    EventRow {
        variant: variant.to_string().into(),
        worker: 0,
        key: 0,
        seq,
        attempt_start_us: seq * 1000,
        set_sent_us: seq * 1000 + 5,
        acquired_us: seq * 1000 + 10,
        released_us: seq * 1000 + 10 + duration_us,
        intended_us: duration_us,
        duration_us,
        ttl_us: 100_000,
        overrun: duration_us > 100_000,
        excess_us: duration_us.saturating_sub(100_000),
        holders_at_start: 0,
        attempts: 1,
        acquire_latency_us: 10,
        release_latency_us: 20,
        release: variant.to_string().into(),
        outcome: lockbench::SectionOutcome::Release(lockbench::ReleaseOutcome::Released),
        interrupted,
        ..EventRow::default()
    }
}

/// An events.csv (the real header, written by serialising EventRow) is detected; duration_us
/// is read in µs, interrupted sections are skipped, and --tag selects one variant.
#[test]
fn reads_events_csv() {
    let dir = TempDir::new("events");
    let path = dir.0.join("events.csv");
    let mut w = csv::Writer::from_path(&path).unwrap();
    for i in 1..=10u64 {
        w.serialize(event("token", i, i * 1000, false)).unwrap();
        w.serialize(event("del", i, i * 2000, false)).unwrap();
    }
    w.serialize(event("token", 11, 1, true)).unwrap();
    w.flush().unwrap();
    drop(w);
    let all = load_durations(&path, &LoadOptions::default()).unwrap();
    assert_eq!(all.input.kind, InputKind::EventsCsv);
    assert_eq!(all.samples.len(), 20);
    assert_eq!(all.input.tags, vec!["del".to_string(), "token".to_string()]);
    let token = load_durations(
        &path,
        &LoadOptions {
            tag: Some("token".into()),
            ..LoadOptions::default()
        },
    )
    .unwrap();
    let Samples::Exact(v) = &token.samples else {
        panic!("exact samples expected")
    };
    assert_eq!(v.len(), 10);
    assert_eq!(v[0], 1.0);
    assert_eq!(v[9], 10.0);
}

/// A plain CSV is read from the column named with --column, in the unit given with --unit.
#[test]
fn reads_plain_csv_with_column_and_unit() {
    let dir = TempDir::new("plain");
    let path = dir.file("d.csv", "id,latency\n1,1500\n2,2500\n3,500\n");
    let loaded = load_durations(
        &path,
        &LoadOptions {
            column: Some("latency".into()),
            unit: Some(Unit::Us),
            tag: None,
        },
    )
    .unwrap();
    assert_eq!(loaded.input.kind, InputKind::Csv);
    let Samples::Exact(v) = loaded.samples else {
        panic!("exact samples expected")
    };
    assert_eq!(v, vec![0.5, 1.5, 2.5]);
}

/// An .hgrm written by lockbench's own writer reads back with the same count, max, and the
/// same p50 and p90 (percentiles the file lists); p99 is rounded up to the next listed row.
#[test]
fn reads_hgrm_written_by_lockbench() {
    let d = Dist::parse("lognormal(median=20ms,p99=120ms)").unwrap();
    let mut h = lockbench::new_hist();
    for ms in draw(&d, 3, 50_000) {
        h.record((ms * 1000.0) as u64).unwrap();
    }
    let dir = TempDir::new("hgrm");
    let path = dir.0.join("durations.hgrm");
    let mut text = Vec::new();
    lockbench::write_hgrm(&mut text, &h).unwrap();
    std::fs::write(&path, &text).unwrap();
    let loaded = load_durations(&path, &LoadOptions::default()).unwrap();
    assert_eq!(loaded.input.kind, InputKind::Hgrm);
    assert_eq!(loaded.samples.len(), h.len());
    let r = recommend(&loaded.samples, &Params::default());
    let obs = r.observed.unwrap();
    let want = |p: f64| h.highest_equivalent(h.value_at_quantile(p)) as f64 / 1000.0;
    let got = |label: &str| {
        obs.quantiles
            .iter()
            .find(|q| q.label == label)
            .unwrap()
            .value_ms
            .unwrap()
    };
    assert!(
        (got("p50") - want(0.5)).abs() < 1e-9,
        "{} {}",
        got("p50"),
        want(0.5)
    );
    assert!(
        (got("p90") - want(0.9)).abs() < 1e-9,
        "{} {}",
        got("p90"),
        want(0.9)
    );
    assert!(
        got("p99") >= want(0.99) && got("p99") <= want(0.995),
        "{}",
        got("p99")
    );
    assert!((obs.max_ms - h.max() as f64 / 1000.0).abs() < 1e-9);
}

/// An .hlog with two tagged intervals (V2 deflate, µs) merges to the total count of both, and
/// --tag keeps one; an unknown tag is refused with the tags present.
#[test]
fn reads_hlog_with_two_intervals() {
    let mut a = Histogram::<u64>::new(3).unwrap();
    let mut b = Histogram::<u64>::new(3).unwrap();
    for v in 1..=300u64 {
        a.record(v * 100).unwrap();
    }
    for v in 1..=200u64 {
        b.record(v * 250).unwrap();
    }
    let mut buf = Vec::new();
    let mut ser = V2DeflateSerializer::new();
    {
        let mut log = IntervalLogWriterBuilder::new()
            .with_base_time(SystemTime::UNIX_EPOCH)
            .begin_log_with(&mut buf, &mut ser)
            .unwrap();
        log.write_histogram(
            &a,
            Duration::from_secs(0),
            Duration::from_secs(1),
            Tag::new("del"),
        )
        .unwrap();
        log.write_histogram(
            &b,
            Duration::from_secs(1),
            Duration::from_secs(1),
            Tag::new("token"),
        )
        .unwrap();
    }
    let dir = TempDir::new("hlog");
    let path = dir.0.join("durations.hlog");
    std::fs::write(&path, &buf).unwrap();
    let all = load_durations(&path, &LoadOptions::default()).unwrap();
    assert_eq!(all.input.kind, InputKind::Hlog);
    assert_eq!(all.samples.len(), 500);
    let token = load_durations(
        &path,
        &LoadOptions {
            tag: Some("token".into()),
            ..LoadOptions::default()
        },
    )
    .unwrap();
    assert_eq!(token.samples.len(), 200);
    let r = recommend(&token.samples, &Params::default());
    assert!((r.observed.unwrap().max_ms - 50.0).abs() < 0.05);
    let e = err_text(
        &path,
        &LoadOptions {
            tag: Some("nope".into()),
            ..LoadOptions::default()
        },
    );
    assert!(e.contains("del, token"), "{e}");
}

/// Malformed CSV input names the file, the line and the column: a non-numeric cell, a missing
/// column (listing the columns present), an empty file, a negative duration.
#[test]
fn malformed_csv_errors_name_line_and_column() {
    let dir = TempDir::new("bad");
    let opts = LoadOptions::default();

    let p = dir.file("text.csv", "id,durationMs\n1,12.5\n2,abc\n");
    let e = err_text(&p, &opts);
    assert!(e.contains("text.csv"), "{e}");
    assert!(
        e.contains("line 3") && e.contains("column 2 (`durationMs`)"),
        "{e}"
    );
    assert!(e.contains("`abc` is not a finite number"), "{e}");

    let p = dir.file("nocol.csv", "id,latency\n1,12.5\n");
    let e = err_text(&p, &opts);
    assert!(e.contains("nocol.csv") && e.contains("line 1"), "{e}");
    assert!(
        e.contains("no column `durationMs`") && e.contains("`id`, `latency`"),
        "{e}"
    );

    let p = dir.file("empty.csv", "");
    let e = err_text(&p, &opts);
    assert!(
        e.contains("empty.csv") && e.contains("line 1") && e.contains("empty"),
        "{e}"
    );

    let p = dir.file("neg.csv", "durationMs\n3\n-4\n");
    let e = err_text(&p, &opts);
    assert!(
        e.contains("line 3") && e.contains("column 1 (`durationMs`)"),
        "{e}"
    );
    assert!(e.contains("negative"), "{e}");

    let p = dir.file("d.txt", "1\n");
    let e = err_text(&p, &opts);
    assert!(
        e.contains(".txt") && e.contains(".hgrm") && e.contains(".hlog"),
        "{e}"
    );
}

/// A garbage line in an .hgrm file is refused with its line and column.
#[test]
fn malformed_hgrm_names_line() {
    let dir = TempDir::new("badhgrm");
    let p = dir.file(
        "x.hgrm",
        "       Value     Percentile TotalCount 1/(1-Percentile)\n\n\
         \x20      1.000 0.000000000000          1           1.00\n\
         \x20      oops  0.5 2 2.0\n",
    );
    let e = err_text(&p, &LoadOptions::default());
    assert!(
        e.contains("x.hgrm") && e.contains("line 4") && e.contains("`Value`"),
        "{e}"
    );
}

/// The real binary: `recommend --durations … --json` exits 0, prints the answer, and writes
/// JSON with the documented fields.
#[test]
fn cli_writes_json() {
    let d = Dist::parse("lognormal(median=20ms,p99=120ms)").unwrap();
    let mut csv = String::from("durationMs\n");
    for v in draw(&d, 11, 40_000) {
        csv.push_str(&format!("{v:.4}\n"));
    }
    let dir = TempDir::new("cli");
    let input = dir.file("durations.csv", &csv);
    let out = dir.0.join("out.json");
    let run = common::Lockbench::new()
        .args(["recommend", "--durations"])
        .arg(&input)
        .args(["--rate", "100/s", "--json"])
        .arg(&out)
        .output();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(stdout.contains("recommended TTL"), "{stdout}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(json["n"], 40_000);
    assert_eq!(json["distribution_free"]["supported"], true);
    assert!(json["recommended_ttl_ms"].as_f64().unwrap() > 100.0);
    assert!(json["worst_case"]["ttl_ms"].as_f64().is_some());
    assert_eq!(json["params"]["rate_per_s"], 100.0);
    assert_eq!(json["models"][0]["name"], "lognormal");
    assert!(json["models"][1]["ttl_ms"].as_f64().is_some());
    assert!(json["in_practice"][0]["per_day_bound"].as_f64().is_some());
    assert_eq!(json["input"]["kind"], "csv");
    assert!(json["observed"]["quantiles"].as_array().unwrap().len() == 5);
}

/// The real binary exits non-zero on a bad file and says which line and column.
#[test]
fn cli_fails_clearly_on_a_bad_file() {
    let dir = TempDir::new("clibad");
    let input = dir.file("bad.csv", "durationMs\n1.5\nfast\n");
    let run = common::Lockbench::new()
        .args(["recommend", "--durations"])
        .arg(&input)
        .output();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_ne!(run.status.code(), Some(0));
    assert!(
        stderr.contains("bad.csv") && stderr.contains("line 3"),
        "{stderr}"
    );
    assert!(stderr.contains("column 1 (`durationMs`)"), "{stderr}");
}

/// Durations above the bound every other source uses (1000h) are refused with their line and
/// the valid range: 1e308 ms in a CSV (it used to give a 300-digit TTL) and in an .hgrm.
#[test]
fn durations_beyond_1000h_are_refused() {
    let dir = TempDir::new("huge");
    let p = dir.file("d.csv", "durationMs\n1.5\n1e308\n");
    let e = err_text(&p, &LoadOptions::default());
    assert!(
        e.contains("d.csv") && e.contains("line 3") && e.contains("at most 1000h"),
        "{e}"
    );
    let p = dir.file("s.csv", "durationMs\n3600001\n");
    let e = err_text(
        &p,
        &LoadOptions {
            unit: Some(Unit::S),
            ..LoadOptions::default()
        },
    );
    assert!(e.contains("line 2") && e.contains("at most 1000h"), "{e}");
    let p = dir.file(
        "x.hgrm",
        "       Value     Percentile TotalCount 1/(1-Percentile)\n\n\
         \x20  1e308 1.000000000000          1\n",
    );
    let e = err_text(&p, &LoadOptions::default());
    assert!(e.contains("line 3") && e.contains("at most 1000h"), "{e}");
    // Exactly 1000h is fine, and the TTL prints in hours and days, not 300 digits.
    let p = dir.file("max.csv", "durationMs\n3600000000\n");
    let loaded = load_durations(&p, &LoadOptions::default()).unwrap();
    let r = recommend(&loaded.samples, &Params::default());
    let mut out = Vec::new();
    lockbench::print_recommendation(&mut out, &r).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("(41d16h)"), "{text}");
    assert!(text.lines().all(|l| !l.contains("0000000000000")), "{text}");
}

/// All-zero data gives a clear answer: the shortest TTL Redis can set (1 ms), with a note
/// saying why, instead of a 0 ms TTL.
#[test]
fn all_zero_durations_recommend_one_millisecond() {
    let r = recommend(&Samples::from_ms(vec![0.0; 50_000]), &Params::default());
    assert_eq!(r.recommended_ttl_ms, Some(1.0));
    assert!(r.in_practice.iter().all(|row| row.ttl_ms >= 1.0), "{r:?}");
    let mut out = Vec::new();
    lockbench::print_recommendation(&mut out, &r).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("recommended TTL  1 ms"), "{text}");
    assert!(text.contains("raised to 1 ms"), "{text}");
    assert!(!text.contains(" 0 ms"), "{text}");
}

/// Monte-Carlo estimate of the blocked time per crash: a section drawn uniformly from `values`,
/// the crash uniform within it, blocked until the TTL expires. Returns (mean, standard error).
fn simulated_blocked(values: &[f64], ttl: f64, seed: u64, draws: u32) -> (f64, f64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let (mut sum, mut sum2) = (0.0, 0.0);
    for _ in 0..draws {
        let d = values[rng.random_range(0..values.len())];
        let crash_at = rng.random::<f64>() * d;
        let blocked = (ttl - crash_at).max(0.0);
        sum += blocked;
        sum2 += blocked * blocked;
    }
    let n = f64::from(draws);
    let mean = sum / n;
    (mean, ((sum2 / n - mean * mean) / n).sqrt())
}

/// The closed form for the blocked time per crash agrees with a seeded simulation of the model
/// (within 5 standard errors) on constant 100 ms sections at T = 300 (250 ms), constant 600 ms
/// (75 ms: crashes after the key expired block nothing), a mix of both, and a log-normal sample
/// whose tail crosses T. Negative control: `T − mean/2`, which forgets that a crash after expiry
/// blocks nothing, is rejected by the same check.
#[test]
fn crash_blocked_time_matches_monte_carlo() {
    let ttl = 300.0;
    let lognormal = draw(
        &Dist::parse("lognormal(median=150ms,p99=900ms)").unwrap(),
        5,
        5_000,
    );
    let cases: [(&str, Vec<f64>, Option<f64>); 4] = [
        ("constant 100 ms", vec![100.0; 10], Some(250.0)),
        ("constant 600 ms", vec![600.0; 10], Some(75.0)),
        ("100 and 600 ms", vec![100.0, 600.0, 100.0, 600.0], None),
        ("lognormal", lognormal, None),
    ];
    for (seed, (name, values, exact)) in cases.into_iter().enumerate() {
        let formula = expected_blocked_ms(&Samples::from_ms(values.clone()), ttl).unwrap();
        if let Some(e) = exact {
            assert!((formula - e).abs() < 1e-9, "{name}: {formula} vs {e}");
        }
        let (mc, se) = simulated_blocked(&values, ttl, seed as u64, 400_000);
        assert!(
            (formula - mc).abs() < 5.0 * se,
            "{name}: formula {formula} vs simulated {mc} ± {se}"
        );
        if values.iter().any(|d| *d > ttl) {
            let naive = ttl - values.iter().sum::<f64>() / values.len() as f64 / 2.0;
            assert!(
                (naive - mc).abs() > 5.0 * se,
                "{name}: the naive {naive} passes the check against {mc} ± {se}"
            );
        }
    }
}

/// Runs the real binary on `args` and returns (exit code, stdout, stderr).
fn lockbench(args: &[&str]) -> (Option<i32>, String, String) {
    let out = common::Lockbench::new().args(args).output();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The real binary prints and writes the crash figures only with --crash-rate: 1000 sections
/// of 100 ms at target 1e-2 give a recommended TTL of 100 ms, so 50 ms blocked per crash on
/// average, 100 ms at worst, and 150 ms per day at 3 crashes/day; without the flag no crash
/// line is printed and the JSON's `crash` is null.
#[test]
fn cli_crash_figures_only_with_the_flag() {
    let dir = TempDir::new("flag");
    let input = dir.file("d.csv", &format!("durationMs\n{}", "100\n".repeat(1000)));
    let json = dir.0.join("out.json");
    let (input, json_arg) = (input.to_str().unwrap(), json.to_str().unwrap());
    let base = [
        "recommend",
        "--durations",
        input,
        "--target",
        "0.01",
        "--json",
        json_arg,
    ];
    let read = || -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
    };

    let (code, stdout, stderr) = lockbench(&base);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(
        !stdout.contains("crash") && !stdout.contains("blocked"),
        "{stdout}"
    );
    let j = read();
    assert!(j["crash"].is_null(), "{}", j["crash"]);
    assert!(j["params"]["crash_rate_per_s"].is_null());
    assert!(j["in_practice"][0]["crash"].is_null());

    let mut args = base.to_vec();
    args.extend(["--crash-rate", "3/day"]);
    let (code, stdout, stderr) = lockbench(&args);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    for needle in [
        "3.0 holder crashes/day",
        "blocked/crash",
        "blocks its key 50.00 ms per crash on average, 100 ms at worst",
        "150.0 ms blocked per day",
        "crash falls uniformly within a measured section",
    ] {
        assert!(stdout.contains(needle), "missing {needle:?} in\n{stdout}");
    }
    let c = &read()["crash"];
    assert_eq!(c["ttl_ms"], 100.0);
    assert_eq!(c["rate_per_day"], 3.0);
    assert_eq!(c["blocked_per_crash_ms"]["mean"], 50.0);
    assert_eq!(c["blocked_per_crash_ms"]["max"], 100.0);
    assert!(
        (c["blocked_per_day_ms"].as_f64().unwrap() - 150.0).abs() < 1e-9,
        "{c}"
    );
}

/// A bad --crash-rate (not a number, zero, negative, unknown unit) exits 2 with the flag named
/// and a valid example; so does a bad --rate, through the same path.
#[test]
fn cli_bad_crash_rate_is_bad_input() {
    let dir = TempDir::new("badcrash");
    let input = dir.file("d.csv", "durationMs\n1\n2\n");
    for (flag, value, hint) in [
        ("--crash-rate", "often", "3/day"),
        ("--crash-rate", "0/day", "3/day"),
        ("--crash-rate", "-2/h", "3/day"),
        ("--crash-rate", "3/week", "/day"),
        ("--rate", "fast", "100/s"),
    ] {
        // `--flag=value`: clap would take a separate `-2/h` for a short flag.
        let arg = format!("{flag}={value}");
        let (code, stdout, stderr) =
            lockbench(&["recommend", "--durations", input.to_str().unwrap(), &arg]);
        assert_eq!(code, Some(2), "{flag} {value}: {stdout}\n{stderr}");
        assert!(
            stderr.contains(&format!("{flag}: ")) && stderr.contains(hint),
            "{flag} {value}: {stderr}"
        );
        assert!(stdout.is_empty(), "{flag} {value}: {stdout}");
    }
}
