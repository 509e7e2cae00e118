//! One variant of a run, in four steps: [`prepare`] (connections, recorder, interval logs,
//! the workers' context, the other parts of a simulated run in parts), execute (in real time,
//! [`super::real`], or virtual, [`super::simulated`]), [`read_back`] (the keys it touched, its
//! histograms, the resource's final values and stuck locks, read at the server) and
//! [`summarise`].

use super::env::{Executed, Prepared, VariantEnv};
use super::library_holders::{WATCH_ENV, Watching, getdel_refused, start_drivers};
use super::real::run_real;
use super::simulated::run_simulated;
use crate::analysis::counts::NOT_RECORDED;
use crate::analysis::summary::Measured;
use crate::analysis::summary::{Meta, Protection, Summary, summarize};
use crate::engine::ARRIVAL_BACKLOG;
use crate::engine::collector::Collector;
use crate::engine::context::{Extend, Pause, Resource, WorkerCtx, WorkerSettings};
use crate::engine::keys::KeyNames;
use crate::engine::recorder::Recorder;
use crate::model::variant::Variant;
use crate::profile::{ConnectionMode, Plan, Stop};
use crate::record::HistSet;
use crate::signals::{Request, request_of};
use crate::sim::part::SimPart;
use crate::store::{Connector, LockConn, again_after_reconnect};
use anyhow::{Context, bail};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, SystemTime};
use tokio::time::Instant;

/// Runs one variant: its summary and its histograms. Every key it may have written is added to
/// `env.written_keys` (and `env.companion_keys`), also when it fails.
pub(crate) async fn run_variant<K: Connector>(
    connector: &K,
    probe: &K::Conn,
    plan: &Plan,
    variant: Variant,
    key_names: KeyNames,
    events: &tokio::sync::mpsc::Sender<crate::record::EventRow>,
    mut env: VariantEnv<'_>,
) -> anyhow::Result<(Summary, HistSet)> {
    // Redlock counters from here on are this variant's (the probes' commands are not).
    connector.take_redlock_figures();
    // A simulated run cut into parts (`sim_parallel`): what follows runs part 0, over the
    // first part's length, and the other parts run beside it ([`SimPart`]).
    let parts = match connector.virtual_clock() {
        Some(_) => plan.sim.sim_parallel.max(1),
        None => 1,
    };
    let whole_plan = plan;
    let part_plan = (parts > 1).then(|| plan.part(parts, 0));
    let plan = part_plan.as_ref().unwrap_or(plan);
    let mut prepared = prepare(
        connector,
        probe,
        (whole_plan, plan, parts),
        variant,
        key_names,
        &env,
    )
    .await?;
    let executed = match prepared.sim_clock {
        Some(_) => run_simulated(plan, whole_plan, &mut prepared, events, &env)?,
        None => run_real(plan, &mut prepared, events, &env).await?,
    };
    let read = read_back(probe, prepared, &executed, &mut env).await?;
    Ok(summarise(
        connector, plan, variant, parts, &env, executed, read,
    ))
}

/// Opens the connections, starts the recorder and interval logs, builds the workers' context
/// and the other parts of a run in parts; agents meet at the start barrier here.
/// `plans`: the whole run's plan, this part's (the same when the run is not cut into parts)
/// and the number of parts.
async fn prepare<K: Connector>(
    connector: &K,
    probe: &K::Conn,
    (whole_plan, plan, parts): (&Plan, &Plan, usize),
    variant: Variant,
    key_names: KeyNames,
    env: &VariantEnv<'_>,
) -> anyhow::Result<Prepared<K::Conn>> {
    // Connections first, so connecting is not part of the measured time.
    // In the open arrival model every request slot is a worker with its connection.
    let slots = if plan.workload.arrivals.is_some() {
        plan.workload.max_in_flight
    } else {
        plan.workload.workers
    };
    let mut conns = Vec::with_capacity(slots);
    for i in 0..slots {
        conns.push(match plan.backend.connection {
            ConnectionMode::Shared => probe.clone(),
            ConnectionMode::PerWorker => connector.connect().await.with_context(|| {
                format!(
                    "opening connection {} of {} (per-worker mode)",
                    i + 1,
                    slots
                )
            })?,
        });
    }
    // A lock library: one driver process per worker, started and greeted before time zero.
    let (mut libs, mut client) = (Vec::new(), None);
    if let Some(c) = variant.client {
        let getdel = env.server.capabilities.get("GETDEL") == Some(&Some(true));
        let prefix = key_names.prefix().to_string();
        let watched = !std::env::var(WATCH_ENV).is_ok_and(|v| v == "off");
        let getdel_refused = match getdel && watched {
            true => getdel_refused(probe, &format!("{prefix}:probe")).await,
            false => None,
        };
        let watch = Watching {
            getdel,
            getdel_refused,
            prefix,
        };
        let (l, ctx) = start_drivers(connector, plan, c, slots, watch, env).await?;
        (libs, client) = (l, Some(ctx));
    }
    // A simulated store runs its variants on the simulator's virtual clock.
    let sim_clock = connector.virtual_clock();
    let mut recorder = match &sim_clock {
        Some(clock) => Recorder::new_virtual(plan.workload.keys, clock.clone()),
        None => Recorder::new(plan.workload.keys, slots),
    };
    // A lock library's sections start at its drivers' stamps, which come out of order: the
    // summary's overlap is computed from the sections' intervals.
    if client.is_some() {
        recorder.keep_intervals();
    }
    // Agents start together: time zero is the instant every agent agreed on.
    if let Some(agent) = &env.opts.agent {
        let mut signals = env.signals.clone();
        agent.wait_for_start(&mut signals).await?;
        recorder.start = Instant::now();
    }
    let recorder = Arc::new(recorder);
    let offset = SystemTime::now()
        .duration_since(env.base)
        .unwrap_or_default();
    if let Some(agent) = &env.opts.agent {
        agent.started(recorder.start, offset);
    }
    let collector = match sim_clock {
        Some(_) => Collector::start_virtual(recorder.clone(), env.dir, env.name, env.base, offset)?,
        None => Collector::start_observed(
            recorder.clone(),
            env.dir,
            env.name,
            env.base,
            offset,
            env.opts.log_interval,
            env.metrics.clone().map(|(board, i)| {
                Box::new(move |h: &HistSet| board.histograms(i, h))
                    as crate::engine::collector::Observer
            }),
        )?,
    };
    // The backlog is deep (8 bytes an arrival): an arrival that waits behind a stalled
    // server must be served late, its wait in its latency, not dropped out of the figures.
    let (arrival_tx, arrival_rx) = tokio::sync::mpsc::channel::<u64>(ARRIVAL_BACKLOG);
    let arrival_tx = plan.workload.arrivals.map(|_| arrival_tx);
    let open_model = arrival_tx.is_some();
    let new_ctx = |recorder: Arc<Recorder>, seed: u64| {
        worker_ctx(plan, &key_names, variant, env, open_model, recorder, seed)
    };
    let mut ctx = new_ctx(recorder.clone(), plan.seed);
    if let Some(ctx) = Arc::get_mut(&mut ctx) {
        ctx.client = client;
    }
    let mut others = Vec::with_capacity(parts.saturating_sub(1));
    for k in 1..parts {
        others.push(
            SimPart::new(
                connector,
                whole_plan,
                (parts, k),
                slots,
                (env.dir, env.name, env.base),
                offset,
                &new_ctx,
            )
            .await?,
        );
    }
    Ok(Prepared {
        conns,
        libs,
        recorder,
        collector,
        ctx,
        others,
        parts,
        sim_clock,
        arrival_tx,
        arrival_rx: Some(arrival_rx),
    })
}

/// The workers' shared context for `variant` of `plan`, recording into `recorder`.
fn worker_ctx(
    plan: &Plan,
    key_names: &KeyNames,
    variant: Variant,
    env: &VariantEnv<'_>,
    open_model: bool,
    recorder: Arc<Recorder>,
    seed: u64,
) -> Arc<WorkerCtx> {
    Arc::new(WorkerCtx {
        recorder,
        reserved: Default::default(),
        client: None,
        script_failed: Default::default(),
        settings: WorkerSettings {
            resource: plan
                .protection
                .resource
                .then(|| Resource::new(key_names, variant.fencing)),
            key_names: key_names.clone(),
            hot_key: plan.workload.hot_key,
            ttl_ms: plan.workload.ttl_ms,
            dist: plan.workload.dist.sampler(),
            think: plan.workload.think.sampler(),
            ramp_up: (plan.workload.ramp_up_us > 0).then(|| {
                let agents = env
                    .opts
                    .agent
                    .as_ref()
                    .map_or(1, |a| a.spec().count as usize);
                (plan.workload.ramp_up_us, plan.workload.workers * agents)
            }),
            busy: plan.workload.busy,
            method: variant.release,
            extend: variant.extend.then_some(Extend {
                every_us: plan.protection.extend_us,
                with: plan.protection.extend_with,
                on_lost: plan.protection.on_lost,
            }),
            pause: (!plan.faults.pause.is_zero()).then(|| Pause {
                length: plan.faults.pause.sampler(),
                at: plan.faults.pause_at,
            }),
            on_unavailable: if variant.fail_open {
                crate::profile::OnUnavailable::FailOpen
            } else {
                crate::profile::OnUnavailable::FailClosed
            },
            acquire: plan.protection.acquire,
            crash_between: plan.faults.crash_between,
            crashes: plan
                .faults
                .schedule
                .iter()
                .filter(|f| f.kind == crate::model::fault::FaultKind::HolderCrash)
                .copied()
                .collect(),
            own_connection: plan.backend.connection == ConnectionMode::PerWorker,
            open_model,
            seed,
            deadline_us: plan.run_time().map(|d| d.as_micros() as u64),
            max_sections: match plan.workload.stop {
                Stop::Sections { sections } => Some(sections),
                Stop::Time { .. } => None,
            },
            variant: env.name.into(),
            scripts: (variant.release == crate::model::release::ReleaseMethod::Script)
                .then(|| plan.protection.scripts.clone())
                .flatten(),
        },
    })
}

/// What a variant left, read after its workers stopped.
struct ReadBack {
    hists: HistSet,
    measured: Measured,
    /// The keys its workers touched (by index).
    touched: Vec<usize>,
    ctx: Arc<WorkerCtx>,
    /// The sum of the resource's final values (`NOT_RECORDED`: could not be read back).
    resource_final: u64,
    /// Locks a crashed holder left without an expiry.
    stuck_locks: u64,
}

/// Records the keys the variant touched for the cleanup, fails a run whose worker panicked,
/// closes the interval logs, adds the other parts' figures, and reads at the server what only
/// it knows: the resource's final values and the locks left without an expiry.
async fn read_back<C: LockConn>(
    probe: &C,
    prepared: Prepared<C>,
    executed: &Executed,
    env: &mut VariantEnv<'_>,
) -> anyhow::Result<ReadBack> {
    let Prepared {
        recorder,
        collector,
        ctx,
        others,
        ..
    } = prepared;
    // Whatever happens next, the caller deletes every key this variant may have written.
    let touched = recorder.touched_keys();
    env.written_keys
        .extend(touched.iter().map(|&k| ctx.lock_name(k)));
    if let Some(r) = &ctx.resource {
        env.companion_keys.extend(
            touched
                .iter()
                .flat_map(|&k| [r.res_keys[k].clone(), r.fence_keys[k].clone()]),
        );
    }
    if let Some(p) = &executed.panicked {
        bail!("a worker panicked: {p}");
    }
    if let Some(c) = &ctx.client
        && let Some(why) = c.failed.lock().unwrap_or_else(|p| p.into_inner()).clone()
    {
        bail!("{why}");
    }
    if let Some(why) = ctx.script_failure() {
        bail!("{why}");
    }
    let mut hists = match executed.simulated {
        Some(_) => collector.finish_at(Duration::from_micros(recorder.now_us()))?,
        None => collector.finish()?,
    };
    let mut measured = recorder.measured();
    for part in others {
        // After part 0's intervals, in order: each part's, on the run's clock.
        let (h, m) = part.finish(env.dir)?;
        hists.add(&h);
        measured.merge(&m);
    }
    let resource_final = resource_final(probe, &ctx, &touched, env).await;
    // A library, or the user's own scripts, may leave locks without an expiry too (a lock
    // taken or re-armed without one).
    let stuck_locks = if crate::analysis::figures::reads_stuck_locks(
        recorder.counters.counts.crashes.load(Relaxed) > 0,
        ctx.client.is_some(),
        ctx.scripts.is_some(),
    ) {
        stuck_locks(probe, &ctx, &touched, env).await
    } else {
        0
    };
    Ok(ReadBack {
        hists,
        measured,
        touched,
        ctx,
        resource_final,
        stuck_locks,
    })
}

/// The resource's final values, read back from the server: what lost updates count from.
/// A server that does not answer (or a user who abandoned the run) leaves them unknown
/// (`NOT_RECORDED`), never the variant unwritten.
async fn resource_final<C: LockConn>(
    probe: &C,
    ctx: &WorkerCtx,
    touched: &[usize],
    env: &VariantEnv<'_>,
) -> u64 {
    let Some(r) = &ctx.resource else {
        return 0;
    };
    let mut total = 0u64;
    let mut conn = probe.clone();
    for &k in touched {
        if request_of(*env.signals.borrow()) == Request::Abandon {
            return NOT_RECORDED;
        }
        match again_after_reconnect!(conn.resource_value(&r.res_keys[k])) {
            Ok(v) => total += v,
            Err(e) => {
                eprintln!(
                    "warning: cannot read back the resource {}: {e}; lost updates are not known",
                    r.res_keys[k]
                );
                return NOT_RECORDED;
            }
        }
    }
    total
}

/// Locks a crashed holder left without an expiry, read at the server before the cleanup;
/// `NOT_RECORDED` when a key's expiry could not be read (a partial count would read as a
/// pass), or the run was abandoned before every key was read.
async fn stuck_locks<C: LockConn>(
    probe: &C,
    ctx: &WorkerCtx,
    touched: &[usize],
    env: &VariantEnv<'_>,
) -> u64 {
    let mut stuck = 0;
    let mut conn = probe.clone();
    for &k in touched {
        if request_of(*env.signals.borrow()) == Request::Abandon {
            return NOT_RECORDED;
        }
        let key = &ctx.lock_name(k);
        match again_after_reconnect!(conn.pttl(key)) {
            Ok(-1) => stuck += 1,
            Ok(_) => {}
            Err(e) => {
                eprintln!(
                    "warning: cannot read the expiry of {key}: {e}; stuck locks are not known"
                );
                return NOT_RECORDED;
            }
        }
    }
    stuck
}

/// The variant's summary from what it measured and what was read back.
fn summarise<K: Connector>(
    connector: &K,
    plan: &Plan,
    variant: Variant,
    parts: usize,
    env: &VariantEnv<'_>,
    executed: Executed,
    read: ReadBack,
) -> (Summary, HistSet) {
    let Executed {
        elapsed_s,
        stop_reason,
        crash_blocked_censored,
        faults,
        simulated,
        ..
    } = executed;
    let ReadBack {
        hists,
        measured,
        touched,
        ctx,
        resource_final,
        stuck_locks,
    } = read;
    let meta = Meta {
        variant: env.name.to_string(),
        release: variant.name_of_release().to_string(),
        connection_mode: plan.backend.connection.name().to_string(),
        backend: env.server.backend_detail.clone(),
        server_version: env.server.version.clone(),
        workers: plan.workload.workers,
        keys: plan.workload.keys,
        ttl_ms: plan.workload.ttl_ms,
        time_scale: plan.workload.time_scale,
        unscaled_ttl_ms: plan.workload.unscaled_ttl_ms,
        seed: plan.seed,
        elapsed_s,
    };
    let protect = Protection {
        resource: plan.protection.resource,
        fencing: variant.fencing,
        extend_with: variant.extend.then_some(plan.protection.extend_with),
        extend_every_ms: if variant.extend {
            plan.protection.extend_us as f64 / 1000.0
        } else {
            0.0
        },
        // Unknown when the read-back failed: lost updates then read "n/a".
        resource_final,
    };
    let mut summary = summarize(meta, stop_reason, protect, &measured, &hists);
    summary.faults = faults;
    let shards = connector.shards();
    if !shards.is_empty() {
        let mut name = String::new();
        summary.shards = crate::analysis::summary::shard_figures(
            &shards,
            plan.workload.keys,
            |k| {
                ctx.key_names.write(k, &mut name);
                crate::store::cluster::key_slot(name.as_bytes())
            },
            &touched,
            &summary.per_key,
            &summary.faults,
        );
    }
    summary.server_binary = env.server.binary.clone();
    summary.simulated = simulated.map(|s| {
        let wall_s = s.wall_s.max(1e-9);
        crate::analysis::summary::SimFigures {
            wall_s: s.wall_s,
            simulated_s_per_wall_s: elapsed_s / wall_s,
            events: s.ran.events,
            events_per_wall_s: s.ran.events as f64 / wall_s,
            parts,
            round_trip: plan.sim.sim_rtt_text.clone(),
            service_us: plan.sim.sim_service_us,
            timer: plan.sim.sim_timer_text.clone(),
        }
    });
    summary.stuck_locks = stuck_locks;
    // A library takes its quorum itself: lockbench's Redlock counted nothing of it.
    let redlock = connector.take_redlock_figures();
    summary.redlock = redlock.filter(|_| ctx.client.is_none());
    summary.library = ctx.client.as_ref().map(|c| c.library.clone());
    summary.wrongful_deletes_source = ctx.client.as_ref().map(|c| c.wrongful_source.clone());
    let start = ctx.recorder.start.into_std();
    summary.watch = ctx
        .client
        .as_ref()
        .and_then(|c| c.ledger.as_ref())
        .map(|l| {
            let t = l.tally();
            crate::analysis::summary::WatchFigures {
                getdels: t.getdels,
                removals_outside_releases: t.outside,
                reached_by: ctx
                    .client
                    .as_ref()
                    .and_then(|c| c.watch_reached_by)
                    .map(str::to_string),
                attributed: t
                    .attributed
                    .into_iter()
                    .map(|a| crate::analysis::summary::AttributedDelete {
                        deleter: a.deleter,
                        victim: a.victim,
                        key: a.key,
                        at_ms: a.at.saturating_duration_since(start).as_secs_f64() * 1000.0,
                    })
                    .collect(),
            }
        });
    summary.crash_blocked_censored = crash_blocked_censored;
    // The theory knows the distribution and the timer error, not pauses or faults (a crash
    // cuts a section short; a slow server lengthens its resource read).
    let paused = summary.counts.pauses > 0
        || !plan.faults.schedule.is_empty()
        || plan.faults.crash_between > 0.0;
    summary.analytic = crate::analytic::check(
        &plan.workload.dist,
        plan.workload.ttl_ms as f64,
        hists.get(crate::record::Metric::TimerError),
        summary.counts.overruns,
        summary.counts.sections,
    )
    .filter(|_| !paused);
    summary.thresholds = plan.fail_if.iter().map(|t| t.check(&summary)).collect();
    (summary, hists)
}
