//! `--timer precise` ends sections on time where tokio's millisecond timer is a tick late — on
//! both of its paths: rare section ends (woken ahead by the timer thread) and frequent ones
//! (tokio's timer, then yielding). tokio's timer is the negative control: the same comparison
//! on it must fail, so the check can.

mod common;

use common::{cli, cli_ok, summaries};

/// The median timer error (ms) of a 1 s run on the memory model with `workers` workers, one
/// key each, sections of 5–10 ms and 2 ms of think time.
fn median_timer_error_ms(workers: usize, timer: &str) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let workers = workers.to_string();
    cli_ok(&cli(&[
        "run",
        "--backend",
        "memory",
        "--workers",
        &workers,
        "--keys",
        &workers,
        "--ttl",
        "1s",
        "--dist",
        "uniform(5ms,10ms)",
        "--think",
        "constant(2ms)",
        "--duration",
        "1s",
        "--timer",
        timer,
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]));
    let s = summaries(&out);
    let t = &s[0]["timer_error_ms"];
    assert!(t["count"].as_u64().unwrap() > 100, "too few sections: {t}");
    t["p50"].as_f64().unwrap()
}

/// `workers`: 2 gives ~200 section ends a second (the timer thread's path), 20 ~2,000 (the
/// yield loop's).
fn precise_beats_tokio(workers: usize) {
    // One comparison at a time: the precise runs keep a core busy, and two at once on a
    // 2-core machine would measure each other.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let tokio = median_timer_error_ms(workers, "tokio");
    let precise = median_timer_error_ms(workers, "precise");
    // tokio rounds a deadline up to its next millisecond tick: ~0.5–1 ms late at the median.
    // The precise timer: a few µs. A quarter leaves room for a loaded machine.
    assert!(
        precise < tokio / 4.0,
        "precise p50 {precise} ms is not well below tokio's {tokio} ms ({workers} workers)"
    );
    // The negative control: tokio's timer against itself fails the same check.
    let again = median_timer_error_ms(workers, "tokio");
    assert!(
        again >= tokio / 4.0,
        "tokio's timer passed the precision check ({again} vs {tokio} ms): it cannot tell"
    );
}

#[test]
fn the_precise_timer_ends_rare_sections_on_time() {
    precise_beats_tokio(2);
}

#[test]
fn the_precise_timer_ends_frequent_sections_on_time() {
    precise_beats_tokio(20);
}
