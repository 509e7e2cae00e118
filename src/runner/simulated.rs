//! A variant's workers in virtual time: part 0 on this thread, the other parts of a run in
//! parts (`sim_parallel`) on threads of their own beside it.

use super::env::{Executed, Prepared, VariantEnv};
use super::progress::{progress_bar, update_bar};
use crate::analysis::summary::StopReason;
use crate::engine::pacer::Halt;
use crate::profile::Plan;
use crate::signals::{Request, request_of};
use crate::sim::part::part_len_us;
use crate::store::LockConn;
use anyhow::Context;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

/// Runs `prepared` (part 0's plan `plan`, of the run `whole_plan`) on the simulator's clock.
pub(crate) fn run_simulated<C: LockConn>(
    plan: &Plan,
    whole_plan: &Plan,
    prepared: &mut Prepared<C>,
    events: &tokio::sync::mpsc::Sender<crate::record::EventRow>,
    env: &VariantEnv<'_>,
) -> anyhow::Result<Executed> {
    let clock = prepared
        .sim_clock
        .clone()
        .context("a simulated run without its clock")?;
    let clock = &clock;
    let parts = prepared.parts;
    let (ctx, recorder, collector) = (&prepared.ctx, &prepared.recorder, &prepared.collector);
    let conns = std::mem::take(&mut prepared.conns);
    let others = &mut prepared.others;
    let bar = progress_bar(plan, env.opts, env.name);
    let (signals, mut shown) = (env.signals.clone(), std::time::Instant::now());
    // Intervals as long as the run in one piece would cut (a part cuts fewer).
    let interval_us = sim_log_interval_us(whole_plan, env.opts);
    let t0 = std::time::Instant::now();
    // A part that fails stops the others at their next interval.
    let failed = std::sync::atomic::AtomicBool::new(false);
    let failed = &failed;
    // The other parts (if any) on threads of their own, part 0 here.
    let (sim, rest) = std::thread::scope(|s| {
        let handles: Vec<_> = others
            .iter_mut()
            .map(|part| {
                let signals = env.signals.clone();
                s.spawn(move || {
                    let ran = part.run(interval_us, signals, failed);
                    if ran.is_err() {
                        failed.store(true, Relaxed);
                    }
                    ran
                })
            })
            .collect();
        let sim = crate::sim::run_workers(
            conns,
            ctx,
            plan,
            clock,
            plan.events.then(|| events.clone()),
            (collector, interval_us),
            |_| {
                // Wall time for the eyes; the bar's position is virtual time.
                if shown.elapsed() >= Duration::from_millis(200) {
                    shown = std::time::Instant::now();
                    update_bar(&bar, plan, recorder);
                }
                (request_of(*signals.borrow()) != Request::Continue || failed.load(Relaxed))
                    .then_some(Halt::Stop)
            },
        );
        if sim.is_err() {
            failed.store(true, Relaxed);
        }
        let rest: Vec<anyhow::Result<crate::sim::Simulated>> = handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("the simulation's thread panicked")))
            })
            .collect();
        (sim, rest)
    });
    let name = |k: usize| format!("part {} of {parts} of the simulation", k + 1);
    let mut sim = if parts > 1 {
        sim.with_context(|| name(0))?
    } else {
        sim?
    };
    bar.finish_and_clear();
    let interrupted = request_of(*env.signals.borrow()) != Request::Continue;
    // The virtual time simulated: every part but the last its length (up to where it
    // stopped, if interrupted), the last up to its last event.
    let ends: Vec<u64> = std::iter::once(clock.load(Relaxed))
        .chain(others.iter().map(|p| p.now_us()))
        .collect();
    let end_us = ends
        .iter()
        .rev()
        .skip(1)
        .map(|&e| {
            if interrupted {
                e.min(part_len_us(plan))
            } else {
                part_len_us(plan)
            }
        })
        .sum::<u64>()
        + ends.last().copied().unwrap_or(0);
    let mut censored = recorder.censor_crashes();
    for (k, (part, ran)) in others.iter().zip(rest).enumerate() {
        let ran = ran.with_context(|| name(k + 1))?;
        sim.ran.events += ran.ran.events;
        sim.ran.inlined += ran.ran.inlined;
        censored += part.censor_crashes();
    }
    sim.wall_s = t0.elapsed().as_secs_f64();
    sim.ran.end_us = end_us;
    Ok(Executed {
        elapsed_s: end_us as f64 / 1e6,
        stop_reason: if interrupted {
            StopReason::Interrupted
        } else {
            StopReason::Limit
        },
        panicked: None,
        crash_blocked_censored: censored,
        faults: crate::sim::fault_windows(&plan.faults.schedule, end_us),
        simulated: Some(sim),
    })
}

/// A simulated variant's interval-log interval, µs: the run's, and no more than about 2,000
/// intervals in a time-limited run (a simulated day has 86,400 seconds).
fn sim_log_interval_us(plan: &Plan, opts: &super::RunOptions) -> u64 {
    let every = opts.log_interval.as_micros() as u64;
    let length = plan.run_time().map_or(0, |d| d.as_micros() as u64);
    every.max(length / 2_000).max(1)
}
