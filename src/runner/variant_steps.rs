//! One variant of a run, in four steps: [`prepare`] (connections, recorder, interval logs,
//! the workers' context, the other parts of a simulated run in parts), execute (in real time,
//! [`super::real`], or virtual, [`super::simulated`]), [`read_back`] (the keys it touched, its
//! histograms, the resource's final values and stuck locks, read at the server) and
//! [`summarise`].

use super::env::{Executed, Prepared, VariantEnv};
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

/// How `client`'s driver processes start for this run: its command line, the servers'
/// URLs (the fault proxy's, when the schedule has one), the TTL and the timeouts.
pub(super) fn driver_recipe<K: Connector>(
    connector: &K,
    plan: &Plan,
    client: crate::model::client::Client,
) -> anyhow::Result<crate::client::driver::Recipe> {
    // `run_on` refused, before anything ran, a store no driver can reach (`check_clients`).
    let urls = connector.driver_urls().map_err(|why| {
        anyhow::anyhow!("a lock library's variant on a store no driver can reach: {why}")
    })?;
    // rslock runs in lockbench's process: no command line.
    let argv = if client.in_process() {
        Vec::new()
    } else {
        crate::client::command(client)?
    };
    // A reply may take the command timeout a few times over (a library retries), and more
    // on a loaded machine; a driver that stays silent longer is stuck.
    let patience =
        Duration::from_micros(plan.timeouts.command_timeout_us * 4).max(Duration::from_secs(10));
    Ok(crate::client::driver::Recipe {
        argv,
        client: client.name(),
        servers: urls,
        // A store whose keys need hash tags is a Redis Cluster.
        cluster: connector.hash_tags(),
        ttl_ms: plan.workload.ttl_ms,
        command_timeout: Duration::from_micros(plan.timeouts.command_timeout_us),
        patience,
    })
}

/// Starts holder `holder`'s driver and greets it. A library that refuses the run's settings
/// (a TTL it cannot take, N servers for a library of one) is bad input, as lockbench's own
/// refusals are. A signal (Ctrl-C) gives the greeting up at once: the run has not begun, and
/// a driver slow to answer (a runtime that starts for seconds, one that never answers) must
/// not hold the user for the greeting's patience; the process is killed as its handle drops.
pub(super) async fn greet(
    recipe: &crate::client::driver::Recipe,
    holder: usize,
    signals: &tokio::sync::watch::Receiver<u32>,
) -> anyhow::Result<crate::client::holder::Holder> {
    let mut signals = signals.clone();
    let started = tokio::select! {
        r = crate::client::holder::Holder::start(recipe, holder) => r,
        _ = signals.wait_for(|n| *n > 0) => {
            return Err(anyhow::Error::new(crate::exit::Interrupted).context(format!(
                "client {}: its drivers' greeting given up",
                recipe.client
            )));
        }
    };
    // A library that refused the run's settings is bad input: `DriverError` declares it.
    Ok(started?)
}

/// What the holders' watches need to know: whether the server has `GETDEL`, whether the run's
/// user may not run it (and why), and the run's key prefix (only its keys are rewritten or
/// noted).
struct Watching {
    getdel: bool,
    getdel_refused: Option<String>,
    prefix: String,
}

/// Why the watch may not send a library's `DEL` as `GETDEL` for the run's user (`None`: it
/// may). The watch never changes what a library can do: where the ACL denies the user
/// `GETDEL`, every rewritten release would fail (a release the library itself may send), so
/// the library's `DEL`s pass as they are and its wrongful deletes come from the timeline. `ACL
/// DRYRUN` (Redis ≥ 7.0) answers without running anything; where it cannot answer (an older
/// server, a user who may not run `ACL`), the permission is not known, and not assumed.
async fn getdel_refused<C: LockConn>(probe: &C, key: &str) -> Option<String> {
    let mut conn = probe.clone();
    match conn.dry_run(&["GETDEL", key]).await {
        Ok(Ok(())) => None,
        Ok(Err(why)) => Some(format!(
            "timeline (the user may not run GETDEL, which the watch sends for a DEL: {why})"
        )),
        Err(e) => Some(format!(
            "timeline (ACL DRYRUN, Redis >= 7.0, could not confirm that the user may run GETDEL, \
             which the watch sends for a DEL: {})",
            e.detail
        )),
    }
}

/// The environment variable that turns the watches off (`off`): for measuring what they cost
/// (`scripts/bench.sh`); wrongful deletes then come from the timeline.
pub(crate) const WATCH_ENV: &str = "LOCKBENCH_WATCH";

/// The source of a library variant's wrongful deletes when its holders are watched.
pub(crate) const FROM_SERVER: &str = "server (GETDEL through lockbench's watch)";

/// Why the holders cannot be watched (`None`: they can).
fn unwatched<'a>(urls: &[String], cluster: bool, watch: &'a Watching) -> Option<&'a str> {
    if std::env::var(WATCH_ENV).is_ok_and(|v| v == "off") {
        Some("timeline (the watch turned off by LOCKBENCH_WATCH=off)")
    } else if !watch.getdel {
        Some("timeline (the server has no GETDEL, Redis >= 6.2)")
    } else if let Some(why) = &watch.getdel_refused {
        Some(why)
    } else if cluster {
        // A cluster client follows the nodes' own addresses (`MOVED`, `CLUSTER SLOTS`), past
        // any watch in front of its seeds.
        Some("timeline (a Redis Cluster: its clients reach the nodes past a watch)")
    } else if !urls.iter().all(|u| u.starts_with("redis://")) {
        Some("timeline (TLS: the watch cannot read rediss://)")
    } else {
        None
    }
}

/// Starts `client`'s driver once per worker (or request slot) against the connector's
/// servers — each holder through watches of its own where they can read its traffic
/// ([`crate::faults::watch`]) — and what the workers of its variant share: the key the library
/// writes, its wait budget, whether it renews its locks, the watches' ledger.
async fn start_drivers<K: Connector>(
    connector: &K,
    plan: &Plan,
    client: crate::model::client::Client,
    slots: usize,
    watch: Watching,
    env: &VariantEnv<'_>,
) -> anyhow::Result<(
    Vec<crate::engine::worker::Library>,
    crate::engine::context::ClientCtx,
)> {
    use crate::faults::watch::{Ledger, Watch, upstream_of};
    let name = client.name();
    let recipe = driver_recipe(connector, plan, client)?;
    let mut source = unwatched(&recipe.servers, recipe.cluster, &watch).map(str::to_string);
    let mut upstreams = Vec::new();
    if source.is_none() {
        for url in &recipe.servers {
            match upstream_of(url).await {
                Some(a) => upstreams.push(a),
                None => {
                    source = Some("timeline (a server's address did not resolve)".into());
                    break;
                }
            }
        }
    }
    let ledger = source.is_none().then(|| Arc::new(Ledger::default()));
    let rules = crate::faults::resp::Rules {
        getdel: watch.getdel,
        prefix: watch.prefix,
    };
    let shared = Arc::new(recipe.clone());
    // Each holder's recipe: its own watches' addresses where it is watched.
    let mut recipes = Vec::with_capacity(slots);
    for holder in 0..slots {
        recipes.push(match &ledger {
            Some(ledger) => {
                let mut watches = Vec::with_capacity(upstreams.len());
                let mut servers = Vec::with_capacity(upstreams.len());
                for (url, up) in recipe.servers.iter().zip(&upstreams) {
                    let w = Watch::start(up.clone(), holder, rules.clone(), ledger.clone())
                        .await
                        .context("starting a holder's watch on a loopback port")?;
                    servers.push(w.url(url).context("a server URL the watch cannot carry")?);
                    watches.push(w);
                }
                let r = crate::client::driver::Recipe {
                    servers,
                    ..recipe.clone()
                };
                (Arc::new(r), watches)
            }
            None => (shared.clone(), Vec::new()),
        });
    }
    let per_process = if client.in_process() {
        1
    } else {
        plan.holders_per_process()
    };
    let libs = start_holders(recipes, per_process, env).await?;
    let first = libs.first().map(|l| {
        let d = l.holder();
        (d.key_format(), d.auto_renewal(), d.library())
    });
    let (format, auto_renewal, library) =
        first.unwrap_or_else(|| ("{key}".into(), false, String::new()));
    let wrap = match format.split_once("{key}") {
        Some((a, b)) => (a.to_string(), b.to_string()),
        None => (String::new(), String::new()),
    };
    if connector.hash_tags() && !keeps_hash_tag(&wrap) {
        for l in libs {
            l.close().await;
        }
        return Err(crate::exit::BadInput(format!(
            "client {name}: its key format `{format}` takes the lock's key out of the hash tag lockbench gives it on a cluster (`…:{{17}}`), so the lock and the protected resource's keys would not share a slot"
        ))
        .into());
    }
    let wait_ms = match plan.workload.busy {
        crate::profile::BusyPolicy::Retry { max_wait_us, .. } => max_wait_us / 1000,
        crate::profile::BusyPolicy::FailFast => 0,
    };
    Ok((
        libs,
        crate::engine::context::ClientCtx {
            name,
            wrap,
            wait_ms,
            auto_renewal,
            library,
            ledger,
            wrongful_source: source.unwrap_or_else(|| FROM_SERVER.to_string()),
            ..Default::default()
        },
    ))
}

/// How many driver processes start at once per core: a start is mostly the runtime's own
/// start-up (Python's imports, Node's modules), CPU-bound, so more at once only queue.
const STARTS_PER_CORE: usize = 4;

/// Holders from which a start-up shows its progress bar and says what it took.
const START_SAID: usize = 10;

/// Starts the holders, `per_process` to a driver process (1: a process each), processes in
/// parallel up to [`STARTS_PER_CORE`] per core, each process's holders greeted at once; a
/// progress bar on the terminal counts the holders greeted. A signal (Ctrl-C) gives the whole
/// start-up up at once (exit 130; every process started is killed as its handle drops), and
/// the first holder that fails fails it (the others are stopped the same way).
async fn start_holders(
    recipes: Vec<(
        Arc<crate::client::driver::Recipe>,
        Vec<crate::faults::watch::Watch>,
    )>,
    per_process: usize,
    env: &VariantEnv<'_>,
) -> anyhow::Result<Vec<crate::engine::worker::Library>> {
    use crate::client::driver::Process;
    use crate::client::holder::Holder;
    let total = recipes.len();
    let client = recipes
        .first()
        .and_then(|(r, _)| crate::model::client::Client::parse(r.client));
    if let Some(c) = client
        && let Some(w) =
            crate::client::cost_warning(c, total, per_process, crate::client::available_mb())
    {
        eprintln!("{w}");
    }
    let began = std::time::Instant::now();
    let bar = start_bar(total, env);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let permits = Arc::new(tokio::sync::Semaphore::new(cores * STARTS_PER_CORE));
    let mut tasks = tokio::task::JoinSet::new();
    let mut recipes = recipes.into_iter().enumerate().peekable();
    while recipes.peek().is_some() {
        let group: Vec<_> = recipes.by_ref().take(per_process).collect();
        let (permits, bar) = (permits.clone(), bar.clone());
        tasks.spawn(async move {
            let _permit = permits.acquire_owned().await;
            let first = &group[0].1.0;
            // A process per holder (rslock: in process) starts as a holder always has; a
            // shared one is spawned, then its holders join it together.
            let process = match (per_process, first.argv.is_empty()) {
                (1, _) | (_, true) => None,
                _ => Some(Process::spawn(first, per_process).map_err(|e| {
                    crate::client::driver::DriverError {
                        who: format!(
                            "{} (holders {}–{})",
                            first.client,
                            group[0].0,
                            group[group.len() - 1].0
                        ),
                        ..e
                    }
                })?),
            };
            let mut joining = tokio::task::JoinSet::new();
            for (holder, (recipe, watches)) in group {
                let process = process.clone();
                joining.spawn(async move {
                    let started = match process {
                        Some(p) => Holder::join(p, &recipe, holder).await,
                        None => Holder::start(&recipe, holder).await,
                    };
                    started.map(|d| (holder, d, recipe, watches))
                });
            }
            let mut out = Vec::new();
            while let Some(r) = joining.join_next().await {
                let r = r.map_err(|e| crate::client::driver::DriverError {
                    who: "a holder's start".into(),
                    what: format!("its task failed: {e}"),
                    stderr: Vec::new(),
                    refused: false,
                })?;
                out.push(r?);
                bar.inc(1);
            }
            Ok::<_, crate::client::driver::DriverError>(out)
        });
    }
    let mut started = Vec::with_capacity(total);
    let mut signals = env.signals.clone();
    loop {
        let next = tokio::select! {
            r = tasks.join_next() => Some(r),
            // (The guard `wait_for` returns is not held across an await.)
            _ = async { signals.wait_for(|n| *n > 0).await.is_ok() } => None,
        };
        let Some(next) = next else {
            bar.finish_and_clear();
            // Ending the tasks drops every process they started: each is killed.
            tasks.shutdown().await;
            return Err(anyhow::Error::new(crate::exit::Interrupted)
                .context("the lock library's drivers: start-up given up"));
        };
        let Some(r) = next else { break };
        let group = match r {
            Ok(Ok(group)) => group,
            Ok(Err(e)) => {
                bar.finish_and_clear();
                tasks.shutdown().await;
                // A library that refused the run's settings is bad input: `DriverError`
                // declares it.
                return Err(e.into());
            }
            Err(e) => {
                bar.finish_and_clear();
                tasks.shutdown().await;
                anyhow::bail!("starting the lock library's drivers: {e}");
            }
        };
        started.extend(group);
    }
    bar.finish_and_clear();
    // What the start-up took, where it is worth saying (the bar is gone).
    if total >= START_SAID && !env.opts.quiet {
        eprintln!(
            "{}: {total} holders started in {:.1} s ({} driver processes, up to {per_process} holders each)",
            env.name,
            began.elapsed().as_secs_f64(),
            total.div_ceil(per_process)
        );
    }
    started.sort_by_key(|(holder, ..)| *holder);
    Ok(started
        .into_iter()
        .map(|(holder, d, recipe, watches)| {
            crate::engine::worker::Library::new(d, recipe, holder, watches)
        })
        .collect())
}

/// The start-up's progress bar: holders greeted of all; hidden when the run is quiet, has no
/// progress shown, or starts a handful.
fn start_bar(total: usize, env: &VariantEnv<'_>) -> indicatif::ProgressBar {
    if !env.opts.progress || env.opts.quiet || total < START_SAID {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(total as u64);
    let style = indicatif::ProgressStyle::with_template(
        "{prefix:>6} [{bar:30}] {pos}/{len} holders started  {elapsed}",
    )
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
    .progress_chars("=> ");
    bar.set_style(style);
    bar.set_prefix(env.name.to_string());
    bar
}

/// Whether a library's key, lockbench's tagged name inside `wrap` (what its key format puts
/// before and after it), hashes to the name's own slot: the same for two different tags, so a
/// tag of the library's own in the prefix cannot pass by chance.
fn keeps_hash_tag(wrap: &(String, String)) -> bool {
    use crate::store::cluster::key_slot;
    ["lockbench:{0}", "lockbench:{1}"].iter().all(|name| {
        let key = format!("{}{name}{}", wrap.0, wrap.1);
        key_slot(key.as_bytes()) == key_slot(name.as_bytes())
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

#[cfg(test)]
mod tests {
    use super::keeps_hash_tag;

    /// A library's prefix keeps lockbench's hash tag, unless it brings a tag of its own (or
    /// breaks the name's).
    #[test]
    fn a_key_format_keeps_the_hash_tag_or_not() {
        let w = |a: &str, b: &str| (a.to_string(), b.to_string());
        assert!(keeps_hash_tag(&w("", "")));
        assert!(keeps_hash_tag(&w("mutex:", "")));
        assert!(keeps_hash_tag(&w("lock:", ":x")));
        assert!(!keeps_hash_tag(&w("{locks}:", "")));
        assert!(!keeps_hash_tag(&w("lock{", "")));
    }
}
