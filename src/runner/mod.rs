//! Runs a validated plan: probes the servers, drives the workers of each variant, removes
//! exactly the run's keys, and writes the run directory's data files.
//!
//! - [`capabilities`]: what each server can do, asked before anything runs; which variant runs
//!   where.
//! - [`variant`]: one variant in four steps — prepare, execute ([`real`] time or
//!   [`simulated`]), read back, summarise.
//! - [`cleanup`]: the run's keys removed, its locks counted, what may remain listed.
//! - [`canary`]: a key outside the run's prefix, planted before a run of the user's own code
//!   and read after it: a script that deleted keys outside the run fails the run.
//! - [`output`]: the manifest, `summary.json`, `summary.csv`, `faults.csv`.
//! - [`progress`]: the progress bar.

mod canary;
mod capabilities;
mod cleanup;
mod env;
mod library_holders;
mod output;
mod progress;
mod real;
mod simulated;
mod variant_steps;

use crate::analysis::summary::Summary;
use crate::engine::keys::KeyNames;
use crate::exit::BadInput;
use crate::model::variant::Variant;
use crate::profile::Plan;
use crate::results::Manifest;
use crate::results::{self, EventsWriter};
use crate::signals::{Request, request_of};
use crate::store::Connector;
use capabilities::{Probed, probe_targets};
use cleanup::clean_up;
use env::VariantEnv;
use output::{new_manifest, write_results};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use variant_steps::run_variant;

/// How a run reports, besides the plan itself.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Parent of run directories (`results/`), used when `out_dir` is not set.
    pub results_root: PathBuf,
    /// Exact directory to write into (`--out`).
    pub out_dir: Option<PathBuf>,
    /// Show a progress bar (only drawn on a terminal).
    pub progress: bool,
    /// Print notices and the table.
    pub quiet: bool,
    /// Interval of the `.hlog` files.
    pub log_interval: Duration,
    /// The command that produced the run (`run`, `compare`).
    pub command: String,
    /// The profile file, if any.
    pub profile_file: Option<String>,
    /// Delete an earlier run's files in `out_dir` instead of refusing it (`--force`).
    pub force: bool,
    /// What the fault schedule breaks things with (from the backend).
    pub faults: crate::faults::FaultControl,
    /// This process is one agent of a multi-agent run: its run id, global worker ids, the
    /// start and end barriers through the target.
    pub agent: Option<Arc<crate::agent::barrier::Agent>>,
    /// Live metrics are served from this board (`--metrics`).
    pub metrics: Option<Arc<crate::metrics::Board>>,
    /// Where they are served (recorded in `manifest.json`).
    pub metrics_url: Option<String>,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            results_root: PathBuf::from("results"),
            out_dir: None,
            progress: true,
            quiet: false,
            log_interval: Duration::from_secs(1),
            command: "run".into(),
            profile_file: None,
            force: false,
            faults: Default::default(),
            agent: None,
            metrics: None,
            metrics_url: None,
        }
    }
}

/// A finished run.
#[derive(Debug)]
pub struct RunOutcome {
    /// Its directory.
    pub dir: PathBuf,
    /// One summary per variant.
    pub summaries: Vec<Summary>,
    /// The manifest as written.
    pub manifest: Manifest,
}

/// One server a run measures: how to connect, what breaks it, which binary it runs.
pub(crate) struct Target<'a, K> {
    /// Opens connections to it.
    pub connector: &'a K,
    /// What the fault schedule breaks it with.
    pub control: crate::faults::FaultControl,
    /// The binary a spawned server runs (`None`: not spawned by lockbench).
    pub binary: Option<PathBuf>,
}

/// Runs `plan` once per method in `methods` (same seed, separate key namespaces) against
/// any connector.
pub async fn run_with<K: Connector>(
    connector: &K,
    kind: &str,
    plan: &Plan,
    variants: &[impl Into<Variant> + Copy],
    opts: &RunOptions,
) -> anyhow::Result<RunOutcome> {
    let target = Target {
        connector,
        control: opts.faults.clone(),
        binary: None,
    };
    run_on(&[target], kind, plan, variants, opts).await
}

/// [`run_with`]'s arguments but the connector: a run given to
/// [`Backend::with_connector`](crate::backend::Backend::with_connector).
pub struct RunWith<'a, V> {
    /// The backend's kind name (`spawn`, `memory`, …).
    pub kind: &'a str,
    /// The plan to run.
    pub plan: &'a Plan,
    /// The variants, one after the other.
    pub variants: &'a [V],
    /// Where and how.
    pub opts: &'a RunOptions,
}

impl<V: Into<Variant> + Copy + Sync> crate::store::UseConnector for RunWith<'_, V> {
    type Output = anyhow::Result<RunOutcome>;

    async fn with<K: Connector>(self, connector: &K) -> Self::Output {
        run_with(connector, self.kind, self.plan, self.variants, self.opts).await
    }
}

/// Refuses, before anything runs, a gate (`fail_if`) on a figure no variant of the run
/// measures: it would read 0 and hold, whatever happened.
fn check_gates(plan: &Plan, variants: &[Variant]) -> anyhow::Result<()> {
    use crate::analysis::figures::{Needs, reads_stuck_locks};
    let own = variants.iter().filter(|v| v.client.is_none());
    let measures = |needs: Needs| match needs {
        Needs::Nothing => true,
        Needs::Resource => plan.protection.resource,
        Needs::Extension => own.clone().any(|v| v.extend),
        Needs::StuckLockRead => reads_stuck_locks(
            plan.has_crashes(),
            variants.iter().any(|v| v.client.is_some()),
            own.clone()
                .any(|v| v.release == crate::model::release::ReleaseMethod::Script),
        ),
        Needs::Crashes => plan.has_crashes(),
        Needs::Redlock => plan.backend.redlock.is_some() && own.clone().next().is_some(),
    };
    crate::analysis::threshold::check_measured(&plan.fail_if, measures)
        .map_err(|m| BadInput(format!("thresholds.fail_if (--fail-if) {m}")).into())
}

/// Refuses, before anything runs, a lock library's variant the run cannot carry out: a store
/// no library can reach (the model, virtual time), and what a driver does not do yet (a holder
/// that dies mid-section, the two-command acquisition, which is lockbench's own).
fn check_clients<K: Connector>(
    targets: &[Target<'_, K>],
    plan: &Plan,
    variants: &[Variant],
) -> anyhow::Result<()> {
    let Some(c) = variants.iter().find_map(|v| v.client) else {
        return Ok(());
    };
    let name = c.name();
    let refuse = |why: String| Err(BadInput(format!("client {name}: {why}")).into());
    for t in targets {
        if let Err(why) = t.connector.driver_urls() {
            return refuse(why.to_string());
        }
    }
    // Settings of lockbench's own lock that no variant of the run takes: a library releases,
    // extends, fences (it does not) and reacts to an unavailable Redis its own way, and each
    // holder is a driver process with connections of its own.
    let all_clients = variants.iter().all(|v| v.client.is_some());
    let p = &plan.protection;
    let unused = [
        (
            p.defaults.fencing != crate::model::variant::Fencing::Off,
            "fencing (--fencing)",
            "a library hands the resource no fencing token",
        ),
        (
            p.defaults.extend,
            "extend (--extend)",
            "a library extends its locks its own way, or not at all",
        ),
        (
            p.extend_with != crate::model::release::ExtendCommand::Script,
            "extend_with (--extend-with)",
            "a library extends its locks with its own command",
        ),
        (
            p.on_lost != crate::model::plan::OnLost::Continue,
            "on_lost (--on-lost)",
            "a library decides what a holder does when its lock is lost",
        ),
        (
            p.on_unavailable != crate::model::plan::OnUnavailable::FailClosed,
            "on_unavailable (--on-unavailable)",
            "a library decides what happens when Redis does not answer",
        ),
    ];
    if all_clients && let Some((_, what, why)) = unused.iter().find(|(set, ..)| *set) {
        return refuse(format!(
            "{what} is a setting of lockbench's own lock and no variant of this run takes it ({why}): drop it, or compare the library with a built-in variant that does"
        ));
    }
    if plan.backend.connection == crate::profile::ConnectionMode::Shared {
        return refuse(
            "connection = \"shared\" (--connection shared): each holder of a lock library is a driver process with connections of its own; drop it, or run the built-in variants apart".into(),
        );
    }
    // A holder's pause or crash signals its driver process, which must then be its alone.
    let n = plan.workload.holders_per_process.unwrap_or(1);
    if n > 1
        && let Some(fault) = plan.holder_fault()
        && variants
            .iter()
            .any(|v| v.client.is_some_and(|c| !c.in_process()))
    {
        return refuse(format!(
            "holders_per_process = {n} (--holders-per-process {n}) with {fault}: a signal to a shared driver process reaches every holder in it, so this fault needs one process per holder; drop --holders-per-process (the default is then 1) or set it to 1"
        ));
    }
    if plan.protection.acquire == crate::profile::Acquire::SetnxExpire {
        return refuse(
            "acquire = \"setnx-expire\" is lockbench's own two-command acquisition; a lock library acquires its own way".into(),
        );
    }
    Ok(())
}

/// Plants a canary on each target where a variant runs the user's own code (the `script`
/// release method): the only code of a run that can reach a key it does not name. Its `SET` is
/// recorded among the target's probes. `None` where nothing of the user's runs: the other
/// runs send the server no command beyond their own keys.
async fn plant_canaries<C: crate::store::LockConn>(
    probes: &mut [C],
    servers: &mut [crate::model::server::ServerInfo],
    cells: &[(usize, Variant, String)],
    plan: &Plan,
    run_id: &str,
    opts: &RunOptions,
) -> Vec<Option<canary::Planted>> {
    let mut planted = Vec::new();
    for (ti, (probe, server)) in probes.iter_mut().zip(servers.iter_mut()).enumerate() {
        let users = cells
            .iter()
            .filter(|(t, v, _)| {
                *t == ti && v.release == crate::model::release::ReleaseMethod::Script
            })
            .count() as u64;
        if users == 0 {
            planted.push(None);
            continue;
        }
        let planned_ms = match plan.workload.stop {
            crate::profile::Stop::Time { duration_us } => {
                duration_us / 1000 * cells.iter().filter(|c| c.0 == ti).count() as u64
            }
            crate::profile::Stop::Sections { .. } => 0,
        };
        let key = canary::key(run_id, opts.agent.as_ref().map(|a| a.spec().index));
        let p = canary::plant(probe, key, canary::ttl_ms(planned_ms), &mut server.probes).await;
        server.canary = Some(p.record.clone());
        planted.push(Some(p));
    }
    planted
}

/// The checks before anything runs: the clients and gates the variants need, and the faults
/// each target's control can inject.
async fn check_targets<K: Connector>(
    targets: &[Target<'_, K>],
    kind: &str,
    plan: &Plan,
    variants: &[Variant],
) -> anyhow::Result<()> {
    check_clients(targets, plan, variants)?;
    check_gates(plan, variants)?;
    for t in targets {
        t.control.check(&plan.faults.schedule, kind)?;
        t.control.check_permissions(&plan.faults.schedule).await?;
    }
    Ok(())
}

/// A library that runs after another variant is greeted first with the run's settings, so
/// one it refuses (a TTL it cannot take) is refused before anything runs, not after the
/// variants before it.
async fn greet_later_drivers<K: Connector>(
    targets: &[Target<'_, K>],
    plan: &Plan,
    cells: &[(usize, Variant, String)],
    signals: &tokio::sync::watch::Receiver<u32>,
) -> anyhow::Result<()> {
    let mut greeted = Vec::new();
    for (ti, v, _) in cells.iter().skip(1) {
        if let Some(c) = v.client
            && !greeted.contains(&(*ti, c))
        {
            greeted.push((*ti, c));
            let recipe = library_holders::driver_recipe(targets[*ti].connector, plan, c)?;
            library_holders::greet(&recipe, 0, signals)
                .await?
                .bye()
                .await;
        }
    }
    Ok(())
}

/// Creates the run's directory (and, for an agent, passes the barrier); returns it and the
/// directories it created, outermost first.
async fn prepare_run_dir(
    run_id: &str,
    plan: &Plan,
    opts: &RunOptions,
    signals: &mut tokio::sync::watch::Receiver<u32>,
) -> anyhow::Result<(PathBuf, Vec<PathBuf>)> {
    let dir = opts
        .out_dir
        .clone()
        .unwrap_or_else(|| opts.results_root.join(run_id));
    let dir = dir.as_path();
    // The outermost directory `prepare_dir` creates: an agent refused at the barrier removes
    // what it created (nothing is written into it before the barrier).
    let created: Vec<PathBuf> = dir
        .ancestors()
        .take_while(|a| !a.as_os_str().is_empty() && !a.exists())
        .map(Path::to_path_buf)
        .collect();
    results::prepare_dir(dir, opts.force)?;
    if let Some(agent) = &opts.agent {
        let workload = crate::agent::workload_fingerprint(&serde_json::to_value(plan)?);
        if let Err(e) = agent.join(&workload, signals).await {
            for d in &created {
                // Only empty ones: a peer may have created its directory beside ours.
                let _ = std::fs::remove_dir(d);
            }
            return Err(e);
        }
    }
    Ok((dir.to_path_buf(), created))
}

/// The live metrics of one cell (with `--metrics`): the board and the cell's place on it.
fn begin_metrics(
    opts: &RunOptions,
    plan: &Plan,
    name: &str,
    server: &crate::model::server::ServerInfo,
    run_id: &str,
) -> Option<(Arc<crate::metrics::Board>, usize)> {
    opts.metrics.as_ref().map(|board| {
        let labels = crate::metrics::Labels {
            variant: name.to_string(),
            server: server.version.clone(),
            run_id: run_id.to_string(),
            agent: opts.agent.as_ref().map(|a| a.spec().index as usize),
        };
        let kinds: Vec<String> = plan
            .faults
            .schedule
            .iter()
            .map(|f| f.kind.to_string())
            .collect();
        (
            board.clone(),
            board.begin(&labels, plan.workload.ttl_ms, &kinds),
        )
    })
}

/// Reads back each target's canary into the manifest (or marks it unread when the run was
/// abandoned); damage it shows becomes the run's failure, first.
async fn read_canaries<C: crate::store::LockConn>(
    canaries: &mut [Option<canary::Planted>],
    probes: &mut [C],
    manifest: &mut Manifest,
    plan: &Plan,
    abandoned: bool,
    failure: &mut Option<anyhow::Error>,
) {
    for (ti, planted) in canaries.iter_mut().enumerate() {
        let Some(planted) = planted.take() else {
            continue;
        };
        let server = &mut manifest.servers[ti];
        let record = if abandoned {
            let mut r = planted.record;
            r.state = crate::model::server::CanaryState::Unchecked;
            r.note = Some("not read: the run was abandoned; it expires by itself".into());
            r
        } else {
            canary::check(&mut probes[ti], planted, &mut server.probes).await
        };
        if let Some(damage) =
            canary::damage(&record, plan.protection.scripts.as_deref(), &server.version)
        {
            // The damage comes first: it reaches beyond the run, whatever else failed.
            *failure = Some(match failure.take() {
                None => anyhow::anyhow!(damage),
                Some(f) => anyhow::anyhow!("{damage}; and {f:#}"),
            });
        }
        server.canary = Some(record);
    }
}

/// The end of a run that measured nothing: its error, after removing what it wrote (when no
/// row was recorded either) or recording in the manifest why it ended.
fn end_unmeasured(
    dir: &Path,
    created: &[PathBuf],
    rows: u64,
    manifest: &mut Manifest,
    interrupted: bool,
    failure: Option<anyhow::Error>,
) -> anyhow::Error {
    if rows == 0 {
        // Nothing ran: a driver that could not start or be greeted, a Ctrl-C while it was
        // being greeted. What the run wrote (a manifest, an empty events.csv) would only make
        // the next run refuse this --out as holding a run; the error says what happened.
        results::remove_run_files(dir);
        for d in created {
            // Only empty ones (the innermost first): nothing is removed that was not ours.
            let _ = std::fs::remove_dir(d);
        }
        return failure.unwrap_or_else(|| crate::exit::Interrupted.into());
    }
    // Nothing was measured: no summary to write. The manifest still says why the run
    // ended (the rows recorded before the failure are in events.csv).
    if let Some(f) = &failure {
        manifest.ended_at = Some(results::utc_stamp(SystemTime::now(), false));
        manifest.interrupted = interrupted;
        manifest.failure = Some(format!("{f:#}"));
        let _ = results::write_json(&dir.join("manifest.json"), manifest);
    }
    failure.unwrap_or_else(|| crate::exit::Interrupted.into())
}

/// The run's id: the agents of one run share it, hence its key prefix (they contend for the
/// same keys); else one from the start time.
fn run_id_of(opts: &RunOptions, started: SystemTime) -> String {
    match &opts.agent {
        Some(a) => a.spec().run_id.clone(),
        None => results::run_id(started),
    }
}

/// The manifest's record of where the live metrics are served and where the resource lives.
fn where_served<K: Connector>(
    manifest: &mut Manifest,
    targets: &[Target<'_, K>],
    plan: &Plan,
    opts: &RunOptions,
) {
    manifest.metrics_url = opts.metrics_url.clone();
    manifest.resource_store = plan.protection.resource.then(|| {
        targets[0]
            .connector
            .resource_store()
            .map(|r| crate::target::redact_url(&r))
            .unwrap_or_else(|| "shared: on the lock's store".to_string())
    });
}

/// Runs one cell (a variant on a target) and writes its histograms (suffixed by the cell's
/// name when there are `several`); its summary. `on`: the target and its probe connection.
async fn run_cell<K: Connector>(
    (target, probe): (&Target<'_, K>, &K::Conn),
    plan: &Plan,
    variant: Variant,
    prefix: &str,
    events: &tokio::sync::mpsc::Sender<crate::record::EventRow>,
    env: VariantEnv<'_>,
    several: bool,
) -> anyhow::Result<Summary> {
    let key_names = KeyNames::new(format!("{prefix}:{}:", env.name), plan.workload.keys)
        .tagged(target.connector.hash_tags());
    let (name, dir, metrics) = (env.name, env.dir, env.metrics.clone());
    let (summary, hists) = run_variant(
        target.connector,
        probe,
        plan,
        variant,
        key_names,
        events,
        env,
    )
    .await?;
    // The served values become the summary's before any file is written.
    if let Some((board, i)) = &metrics {
        board.publish(*i, &summary, &hists);
    }
    let suffix = several.then_some(name);
    results::write_hgrms(dir, &hists, suffix)?;
    Ok(summary)
}

/// An agent leaves the run (its peers stop waiting for it) and records itself in the manifest.
async fn leave(opts: &RunOptions, manifest: &mut Manifest) {
    if let Some(agent) = &opts.agent {
        agent.leave().await;
        manifest.agent = Some(agent.record());
    }
}

/// Runs every variant on every target (same seed and workload on each; with several servers a
/// variant's name gets `@<server>`). A method a server lacks is refused before anything runs
/// — with one server, as bad input; with several, as a skipped cell while the others run.
pub(crate) async fn run_on<K: Connector>(
    targets: &[Target<'_, K>],
    kind: &str,
    plan: &Plan,
    variants: &[impl Into<Variant> + Copy],
    opts: &RunOptions,
) -> anyhow::Result<RunOutcome> {
    let variants: Vec<Variant> = variants.iter().map(|&v| v.into()).collect();
    check_targets(targets, kind, plan, &variants).await?;
    // Counting signals from here on: Ctrl-C, SIGTERM and SIGHUP end the run the same way.
    let mut signals = crate::signals::subscribe();
    let started = SystemTime::now();
    let run_id = run_id_of(opts, started);
    // Computed before the support checks, whose probes touch only keys under it.
    let prefix = format!("lockbench:{run_id}");
    let Probed {
        mut probes,
        servers,
        cells,
        skipped,
    } = probe_targets(targets, &variants, plan, &prefix).await?;
    greet_later_drivers(targets, plan, &cells, &signals).await?;

    let (dir, created) = prepare_run_dir(&run_id, plan, opts, &mut signals).await?;
    let mut manifest = new_manifest(
        (&run_id, &prefix, started),
        opts,
        plan,
        kind,
        &servers,
        &skipped,
        cells.iter().map(|c| c.2.clone()).collect(),
    );
    where_served(&mut manifest, targets, plan, opts);
    results::write_json(&dir.join("manifest.json"), &manifest)?;

    // Without rows (`events = "none"`) the writer goes to a sink: no events.csv at all.
    let events = EventsWriter::start(&dir.join("events.csv"), plan.events)?;
    let mut summaries = Vec::new();
    // Per target: every key its variants may have written, and their companions.
    let mut written_keys: Vec<Vec<String>> = vec![Vec::new(); targets.len()];
    let mut companion_keys: Vec<Vec<String>> = vec![Vec::new(); targets.len()];
    // The first thing that went wrong; what was measured before it is still written.
    let mut failure: Option<anyhow::Error> = None;
    // Planted last before the variants, so that nothing returns early between it and its read;
    // the manifest says it is there from now on.
    let mut canaries = plant_canaries(
        &mut probes,
        &mut manifest.servers,
        &cells,
        plan,
        &run_id,
        opts,
    )
    .await;
    if canaries.iter().any(Option::is_some)
        && let Err(e) = results::write_json(&dir.join("manifest.json"), &manifest)
    {
        failure = Some(e);
    }
    for (ti, variant, name) in &cells {
        let (ti, variant) = (*ti, *variant);
        if request_of(*signals.borrow()) != Request::Continue {
            break;
        }
        let metrics = begin_metrics(opts, plan, name, &servers[ti], &run_id);
        let env = VariantEnv {
            name,
            dir: &dir,
            base: started,
            opts,
            control: &targets[ti].control,
            signals: signals.clone(),
            server: &servers[ti],
            written_keys: &mut written_keys[ti],
            companion_keys: &mut companion_keys[ti],
            metrics,
        };
        let on = (&targets[ti], &probes[ti]);
        let several = cells.len() > 1;
        let r = run_cell(on, plan, variant, &prefix, &events.tx, env, several).await;
        match r {
            Ok(summary) => summaries.push(summary),
            Err(e) => {
                failure = Some(e.context(format!("variant `{name}` failed")));
                manifest.failed_variant = Some(name.clone());
                break;
            }
        }
    }
    let interrupted = request_of(*signals.borrow()) != Request::Continue;
    let rows = events.finish().unwrap_or_else(|e| {
        failure.get_or_insert(e);
        0
    });

    let (removed_locks, leftover) = clean_up(
        &mut probes,
        (&mut written_keys, &companion_keys),
        opts,
        !summaries.is_empty(),
        &dir,
        &prefix,
        &mut signals,
    )
    .await;
    manifest.cleanup_removed_locks += removed_locks;
    manifest.leftover_keys = leftover;
    // Read after the sweep, once nothing of the run can write any more; a second Ctrl-C leaves
    // the canaries to expire unread.
    let abandoned = request_of(*signals.borrow()) == Request::Abandon;
    read_canaries(
        &mut canaries,
        &mut probes,
        &mut manifest,
        plan,
        abandoned,
        &mut failure,
    )
    .await;

    leave(opts, &mut manifest).await;
    if summaries.is_empty() {
        return Err(end_unmeasured(
            &dir,
            &created,
            rows,
            &mut manifest,
            interrupted,
            failure,
        ));
    }
    write_results(
        &dir,
        &run_id,
        &summaries,
        &mut manifest,
        plan,
        interrupted,
        failure,
    )?;
    // The data files are written; drawing the report is the command's decision.
    Ok(RunOutcome {
        dir,
        summaries,
        manifest,
    })
}
