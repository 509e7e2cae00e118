//! What recording one section costs lockbench, against a peer in the same invocation.
//!
//! Per section the worker: opens and closes the key's overlap tracker, builds the section's
//! row (its strings included), counts it with `Counts::of_section` into the live atomics,
//! and records its histogram values into a striped HdrHistogram set. The peer is the least
//! any recorder must do for the same section: six `Histogram::record` calls. Printed: ns per
//! section for each, and the ratio. Run with `cargo bench --bench recording`.

use lockbench::Recorder;
use lockbench::StaleRule;
use lockbench::{Counts, LiveCounts};
use lockbench::{EventRow, Metric};
use std::hint::black_box;
use std::time::Instant;

const SECTIONS: usize = 2_000_000;
const ROUNDS: usize = 5;

fn lockbench_section(rec: &Recorder, live: &LiveCounts, i: usize) {
    let key = i % 64;
    // The worker reads the clock once for each (the reply's arrival, the release's send).
    let (acquired_us, holders) = rec.open_section(key, true, rec.now_us());
    let released_us = rec.close_section(0, key, rec.now_us());
    let d = released_us.saturating_sub(acquired_us) + (i as u64 % 50_000);
    let row = EventRow {
        variant: "token".to_string().into(),
        worker: i % 50,
        key,
        seq: i as u64,
        attempt_start_us: acquired_us,
        set_sent_us: acquired_us,
        acquired_us,
        released_us,
        intended_us: d,
        duration_us: d,
        ttl_us: 40_000,
        overrun: d > 40_000,
        excess_us: d.saturating_sub(40_000),
        holders_at_start: holders,
        attempts: 1,
        acquire_latency_us: 120,
        release_latency_us: 90,
        release: "token".to_string().into(),
        outcome: lockbench::SectionOutcome::Release(lockbench::ReleaseOutcome::Released),
        ..EventRow::default()
    };
    live.add(&Counts::of_section(&row, StaleRule::Reply));
    rec.record_all(
        i % 50,
        &[
            (Metric::Duration, d),
            (Metric::Intended, d),
            (Metric::AcquireLatency, 120),
            (Metric::ReleaseLatency, 90),
            (Metric::TimerError, 700),
        ],
    );
    black_box(row);
}

fn peer_section(h: &mut [hdrhistogram::Histogram<u64>], i: usize) {
    let d = i as u64 % 50_000;
    for (j, v) in [d, d, 120, 90, 700, 1].into_iter().enumerate() {
        let _ = h[j].record(v);
    }
}

fn main() {
    let mut lb = Vec::new();
    let mut peer = Vec::new();
    for _ in 0..ROUNDS {
        let rec = Recorder::new(64, 50);
        let live = LiveCounts::default();
        let t = Instant::now();
        for i in 0..SECTIONS {
            lockbench_section(&rec, &live, i);
        }
        lb.push(t.elapsed().as_nanos() as f64 / SECTIONS as f64);
        black_box(live.snapshot());

        let mut h: Vec<_> = (0..6)
            .map(|_| hdrhistogram::Histogram::<u64>::new(3).unwrap())
            .collect();
        let t = Instant::now();
        for i in 0..SECTIONS {
            peer_section(&mut h, i);
        }
        peer.push(t.elapsed().as_nanos() as f64 / SECTIONS as f64);
        black_box(&h);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (l, p) = (median(&mut lb), median(&mut peer));
    println!("recording one section ({SECTIONS} sections, median of {ROUNDS} interleaved rounds):");
    println!("  lockbench (tracker, row, counts, histograms)  {l:8.1} ns");
    println!("  peer (six HdrHistogram records)               {p:8.1} ns");
    println!(
        "  ratio lockbench / peer                        {:8.2}",
        l / p
    );
    println!(
        "  target: below 1 µs per section: {}",
        if l < 1_000.0 { "met" } else { "NOT met" }
    );
}
