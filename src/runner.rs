//! Runs a validated plan: picks the backend, opens connections, drives the workers of each
//! variant, removes exactly the run's keys, and writes every output file.

use crate::analysis::counts::NOT_RECORDED;
use crate::analysis::summary::{Meta, Protection, StopReason, Summary, summarize};
use crate::engine::collector::Collector;
use crate::engine::driver::{ArrivalQueue, Halt, RealDriver};
use crate::engine::recorder::Recorder;
use crate::engine::worker::{Extend, KeyNames, Pause, Resource, WorkerCtx, run_worker};
use crate::engine::{ARRIVAL_BACKLOG, end_grace};
use crate::exit::BadInput;
use crate::model::error::ErrorKind;
use crate::model::release::ExtendCommand;
use crate::model::release::ReleaseMethod;
use crate::model::server::{ServerInfo, SkippedCell};
use crate::model::variant::Variant;
use crate::profile::{ConnectionMode, Plan, Stop};
use crate::results::{self, EventsWriter};
pub use crate::results::{Manifest, SummaryFile};
use crate::signals::{Request, request_of};
use crate::sim::part::{SimPart, part_len_us};
use crate::store::{Connector, LockConn};
use crate::target::redact_url;
use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, SystemTime};
use tokio::sync::watch;
use tokio::time::Instant;

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
pub struct Target<'a, K> {
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

/// The label of a server in variant names: `valkey-8.1.8`.
fn server_label(version: &str) -> String {
    version.trim().replace(' ', "-")
}

/// Runs every variant on every target (same seed and workload on each; with several servers a
/// variant's name gets `@<server>`). A method a server lacks is refused before anything runs
/// — with one server, as bad input; with several, as a skipped cell while the others run.
pub async fn run_on<K: Connector>(
    targets: &[Target<'_, K>],
    kind: &str,
    plan: &Plan,
    variants: &[impl Into<Variant> + Copy],
    opts: &RunOptions,
) -> anyhow::Result<RunOutcome> {
    let variants: Vec<Variant> = variants.iter().map(|&v| v.into()).collect();
    for t in targets {
        t.control.check(&plan.faults, kind).map_err(BadInput)?;
    }
    // Counting signals from here on: Ctrl-C and SIGTERM end the run the same way.
    let mut signals = crate::signals::subscribe();
    let started = SystemTime::now();
    // The agents of one run share its id, hence its key prefix: they contend for the same keys.
    let run_id = match &opts.agent {
        Some(a) => a.spec().run_id.clone(),
        None => results::run_id(started),
    };
    // Computed before the support checks, whose probes touch only keys under it.
    let prefix = format!("lockbench:{run_id}");
    let several = targets.len() > 1;
    let mut probes = Vec::new();
    let mut servers = Vec::new();
    // (target index, variant, name) of every cell that will run.
    let mut cells: Vec<(usize, Variant, String)> = Vec::new();
    let mut skipped = Vec::new();
    for (ti, t) in targets.iter().enumerate() {
        let mut probe = t.connector.connect().await?;
        let server_version = probe.server_version().await.map_err(|e| {
            anyhow::anyhow!("{} did not answer INFO server: {e}", t.connector.describe())
        })?;
        let capabilities = probe_capabilities(&mut probe, &prefix).await;
        // Two servers of the same version still get distinct names (`redis-7.0.15#2`).
        let mut label = server_label(&server_version);
        let same = servers
            .iter()
            .filter(|s: &&ServerInfo| server_label(&s.version) == label)
            .count();
        if same > 0 {
            label = format!("{label}#{}", same + 1);
        }
        for v in &variants {
            let name = if several {
                format!("{}@{label}", v.name())
            } else {
                v.name()
            };
            let mut supported =
                check_support(&mut probe, v.release, &server_version, &prefix).await;
            if supported.is_ok() && plan.extend_with == ExtendCommand::SetIfeq && v.extend {
                supported = check_set_ifeq(&mut probe, &server_version, &prefix).await;
            }
            match supported {
                Ok(()) => cells.push((ti, *v, name)),
                Err(e) if several => skipped.push(SkippedCell {
                    variant: name,
                    reason: format!("not supported by {server_version}: {e:#}"),
                }),
                Err(e) => return Err(e),
            }
        }
        servers.push(ServerInfo {
            version: server_version,
            backend_detail: redact_url(&t.connector.describe()),
            binary: t.binary.as_ref().map(|b| b.display().to_string()),
            capabilities,
        });
        probes.push(probe);
    }
    if cells.is_empty() {
        return Err(BadInput(format!(
            "no variant can run on these servers: {}",
            skipped
                .iter()
                .map(|s| format!("{} ({})", s.variant, s.reason))
                .collect::<Vec<_>>()
                .join("; ")
        ))
        .into());
    }

    let dir = opts
        .out_dir
        .clone()
        .unwrap_or_else(|| opts.results_root.join(&run_id));
    // The outermost directory `prepare_dir` creates: an agent refused at the barrier removes
    // what it created (nothing is written into it before the barrier).
    let created: Vec<PathBuf> = dir
        .ancestors()
        .take_while(|a| !a.as_os_str().is_empty() && !a.exists())
        .map(Path::to_path_buf)
        .collect();
    results::prepare_dir(&dir, opts.force)?;
    if let Some(agent) = &opts.agent {
        let workload = crate::agent::workload_fingerprint(&serde_json::to_value(plan)?);
        if let Err(e) = agent.join(&workload, &mut signals).await {
            for d in &created {
                // Only empty ones: a peer may have created its directory beside ours.
                let _ = std::fs::remove_dir(d);
            }
            return Err(e);
        }
    }
    let threads = crate::engine::RUNTIME_THREADS
        .get()
        .copied()
        .unwrap_or_else(|| crate::engine::RuntimeThreads {
            threads: tokio::runtime::Handle::current().metrics().num_workers(),
            why: "the caller's runtime",
        });
    let mut manifest = Manifest {
        lockbench_version: env!("CARGO_PKG_VERSION").to_string(),
        run_id: run_id.clone(),
        command: opts.command.clone(),
        profile_file: opts.profile_file.clone(),
        profile: plan.clone(),
        seed: plan.seed,
        backend: kind.to_string(),
        backend_detail: servers
            .iter()
            .map(|s| s.backend_detail.clone())
            .collect::<Vec<_>>()
            .join("; "),
        connection_mode: plan.connection.name().to_string(),
        runtime_threads: threads.threads,
        runtime_threads_why: threads.why.to_string(),
        server_version: servers
            .iter()
            .map(|s| s.version.clone())
            .collect::<Vec<_>>()
            .join(", "),
        servers: servers.clone(),
        skipped: skipped.clone(),
        key_prefix: prefix.clone(),
        variants: cells.iter().map(|c| c.2.clone()).collect(),
        started_at: results::utc_stamp(started, false),
        ended_at: None,
        interrupted: false,
        failure: None,
        leftover_keys: None,
        cleanup_removed_locks: 0,
        agent: opts.agent.as_ref().map(|a| a.record()),
    };
    results::write_json(&dir.join("manifest.json"), &manifest)?;

    // Without rows (`events = "none"`) the writer goes to a sink: no events.csv at all.
    let events = EventsWriter::start(&dir.join("events.csv"), plan.events)?;
    let mut summaries = Vec::new();
    // Per target: every key its variants may have written, and their companions.
    let mut written_keys: Vec<Vec<String>> = vec![Vec::new(); targets.len()];
    let mut companion_keys: Vec<Vec<String>> = vec![Vec::new(); targets.len()];
    // The first thing that went wrong; what was measured before it is still written.
    let mut failure: Option<anyhow::Error> = None;
    for (ti, variant, name) in &cells {
        let (ti, variant) = (*ti, *variant);
        if request_of(*signals.borrow()) != Request::Continue {
            break;
        }
        let key_names = KeyNames::new(format!("{prefix}:{name}:"), plan.keys)
            .tagged(targets[ti].connector.hash_tags());
        let r = run_variant(
            targets[ti].connector,
            &probes[ti],
            plan,
            variant,
            key_names,
            &events.tx,
            VariantEnv {
                name,
                dir: &dir,
                base: started,
                opts,
                control: &targets[ti].control,
                signals: signals.clone(),
                server: &servers[ti],
                written_keys: &mut written_keys[ti],
                companion_keys: &mut companion_keys[ti],
            },
        )
        .await;
        let r = r.and_then(|(summary, hists)| {
            let suffix = (cells.len() > 1).then_some(name.as_str());
            results::write_hgrms(&dir, &hists, suffix)?;
            Ok(summary)
        });
        match r {
            Ok(summary) => summaries.push(summary),
            Err(e) => {
                failure = Some(e.context(format!("variant `{name}` failed")));
                break;
            }
        }
    }
    let interrupted = request_of(*signals.borrow()) != Request::Continue;
    let rows = events.finish();
    if let Err(e) = rows {
        failure.get_or_insert(e);
    }

    // An agent whose peers may still be running leaves its lock keys to expire: removing them
    // would pull locks from under a peer's holders.
    if let Some(agent) = opts.agent.as_ref().filter(|a| !a.peers_finished()) {
        for keys in &mut written_keys {
            keys.clear();
        }
        if !summaries.is_empty() {
            eprintln!(
                "warning: {agent:?}: its lock keys are left to expire (within the TTL) instead of \
                 being removed"
            );
        }
    }
    // Locks first, counted: every lock a SET created ends exactly once, and these are the ones
    // the cleanup ended.
    let mut leftover = Vec::new();
    for (ti, probe) in probes.iter_mut().enumerate() {
        let (left, removed_locks) = remove_keys(probe, &written_keys[ti], &mut signals).await;
        leftover.extend(left);
        leftover.extend(
            remove_keys(probe, &companion_keys[ti], &mut signals)
                .await
                .0,
        );
        manifest.cleanup_removed_locks += removed_locks;
    }
    if !leftover.is_empty() {
        let list = dir.join("leftover-keys.txt");
        let written = std::fs::write(&list, leftover.join("\n") + "\n");
        eprintln!(
            "warning: {} of the run's keys may remain on the server (prefix {prefix}){}",
            leftover.len(),
            match written {
                Ok(()) => format!("; they are listed in {}", list.display()),
                Err(e) => format!("; cannot list them in {}: {e}", list.display()),
            }
        );
        manifest.leftover_keys = Some(leftover.len());
    }

    if let Some(agent) = &opts.agent {
        agent.leave().await;
        manifest.agent = Some(agent.record());
    }
    if summaries.is_empty() {
        // Nothing was measured: no summary to write.
        return Err(failure.unwrap_or_else(|| crate::exit::Interrupted.into()));
    }
    let summary_file = SummaryFile {
        run_id: run_id.clone(),
        variants: summaries.clone(),
        agent: manifest.agent.clone(),
        merged: None,
    };
    results::write_json(&dir.join("summary.json"), &summary_file)?;
    results::write_summary_csv_file(&dir, &summaries)?;
    if !plan.faults.is_empty() {
        let rows: Vec<(String, crate::model::fault::FaultWindow)> = summaries
            .iter()
            .flat_map(|s| s.faults.iter().map(|f| (s.variant.clone(), f.clone())))
            .collect();
        crate::faults::write_csv(&dir.join("faults.csv"), &rows)?;
    }
    manifest.ended_at = Some(results::utc_stamp(SystemTime::now(), false));
    manifest.interrupted = interrupted;
    manifest.failure = failure.as_ref().map(|e| format!("{e:#}"));
    results::write_json(&dir.join("manifest.json"), &manifest)?;
    // The data files are written; drawing the report is the command's decision.
    Ok(RunOutcome {
        dir,
        summaries,
        manifest,
    })
}

/// Which lock commands a server knows, asked of its command table (`COMMAND INFO`; `SET …
/// IFEQ` from `COMMAND DOCS SET`), not guessed from its version. Where `COMMAND` is not
/// permitted, the command is tried on an absent key under `prefix` (the run's own) where
/// lockbench can send it; otherwise `None`. No `SET` is sent, so the server's SET count stays
/// the run's attempts.
pub async fn probe_capabilities<C: LockConn>(
    probe: &mut C,
    prefix: &str,
) -> std::collections::BTreeMap<String, Option<bool>> {
    let key = format!("{prefix}:probe");
    let mut out = std::collections::BTreeMap::new();
    let verdict = |r: Result<(), crate::model::error::CmdError>| match r {
        Ok(()) => Some(true),
        Err(e) if e.is_unknown_command() => Some(false),
        Err(_) => None,
    };
    for name in ["GETDEL", "DELEX", "DELIFEQ", "EVALSHA", "FUNCTION"] {
        let known = match probe.supports_command(name).await {
            Ok(k) => Some(k),
            Err(_) => match name {
                "GETDEL" => verdict(probe.getdel(&key).await.map(drop)),
                "DELEX" => verdict(probe.delex(&key, "probe").await.map(drop)),
                "EVALSHA" => verdict(probe.release_script(&key, "probe").await.map(drop)),
                _ => None,
            },
        };
        out.insert(name.to_string(), known);
    }
    // From the command table: a probing SET would count among the run's SETs.
    let ifeq = probe.knows_set_ifeq().await.ok();
    out.insert("SET IFEQ".to_string(), ifeq);
    out
}

/// Refuses `extend_with = "set-ifeq"` on a server without `SET … IFEQ`, before the run:
/// extending an absent key under the run's prefix answers `0`/nil where the server knows IFEQ
/// and an error where it does not (it writes nothing either way).
pub async fn check_set_ifeq<C: LockConn>(
    probe: &mut C,
    server_version: &str,
    prefix: &str,
) -> anyhow::Result<()> {
    let key = format!("{prefix}:probe");
    // The command table first: no SET is sent, so the server's SET count stays the run's.
    match probe.knows_set_ifeq().await {
        Ok(true) => return Ok(()),
        Ok(false) => {
            return Err(BadInput(format!(
                "extend_with = \"set-ifeq\" needs SET … IFEQ (Valkey ≥ 8.1, Redis ≥ 8.4); this server is \
                 {server_version} and its command table (COMMAND DOCS SET) has no IFEQ. Use \
                 extend_with = \"script\" (compare-and-PEXPIRE works on every version)."
            ))
            .into());
        }
        // COMMAND DOCS not permitted (or too old): try the option on an absent key.
        Err(_) => {}
    }
    match probe.extend(&key, "probe", 1_000, ExtendCommand::SetIfeq).await {
        Ok(_) => Ok(()),
        Err(e) if e.kind != crate::model::error::ErrorKind::Server => {
            Err(anyhow::anyhow!("cannot check SET … IFEQ on {server_version}: {e}"))
        }
        Err(e) => Err(BadInput(format!(
            "extend_with = \"set-ifeq\" needs SET … IFEQ (Valkey ≥ 8.1, Redis ≥ 8.4); this server is \
             {server_version} and answered `SET {key} probe IFEQ probe PX 1000` with: {}. Use \
             extend_with = \"script\" (compare-and-PEXPIRE works on every version).",
            e.detail
        ))
        .into()),
    }
}

/// Removes exactly the keys this run could have written (those it sent a SET for), nothing
/// else, a few hundred per `DEL`. Returns the keys that may remain: those whose `DEL` failed,
/// and all that were not tried once the user asked to abandon (a second signal).
async fn remove_keys<C: LockConn>(
    conn: &mut C,
    keys: &[String],
    signals: &mut watch::Receiver<u32>,
) -> (Vec<String>, u64) {
    let mut leftover = Vec::new();
    let mut removed = 0u64;
    let mut chunks = keys.chunks(500);
    for chunk in chunks.by_ref() {
        if request_of(*signals.borrow()) == Request::Abandon {
            leftover.extend_from_slice(chunk);
            break;
        }
        // Twice: an idle connection finds out only now that the server restarted, and the
        // second try goes through the reconnection the first one started.
        let delete = async {
            for _ in 0..2 {
                match conn.del_many(chunk).await {
                    Ok(n) => {
                        removed += n.max(0) as u64;
                        return true;
                    }
                    Err(e) if e.kind == ErrorKind::Connection => continue,
                    Err(_) => return false,
                }
            }
            false
        };
        let deleted = tokio::select! {
            ok = delete => ok,
            Ok(_) = signals.wait_for(|n| request_of(*n) == Request::Abandon) => false,
        };
        if !deleted {
            leftover.extend_from_slice(chunk);
        }
    }
    for chunk in chunks {
        leftover.extend_from_slice(chunk);
    }
    (leftover, removed)
}

/// Refuses a release method the server cannot run for this user, before the run: a command
/// the server lacks (naming the version that has it), or one the ACL forbids. When `COMMAND
/// INFO` itself is not permitted, the command is tried on an absent key under `prefix` (the
/// run's own, so nothing outside it is touched) to tell "unknown" from "not permitted".
pub async fn check_support<C: LockConn>(
    probe: &mut C,
    method: ReleaseMethod,
    server_version: &str,
    prefix: &str,
) -> anyhow::Result<()> {
    let (command, since, instead) = match method {
        ReleaseMethod::Del => (
            "GETDEL",
            "6.2",
            "Upgrade the server: `del` releases are attributed with GETDEL, which deletes exactly as DEL does and returns whose lock it removed.",
        ),
        ReleaseMethod::Delex => (
            "DELEX",
            "8.4",
            "Use `token` (the Lua compare-and-delete works on every version).",
        ),
        ReleaseMethod::Token => ("EVALSHA", "2.6", "Use `del` or `delex`."),
    };
    // Bad input (exit 2): the user asked for a method this server cannot run.
    let unknown = || -> anyhow::Error {
        BadInput(format!(
            "release method `{method}` needs {command}, which Redis added in {since}; this server is {server_version} \
             and does not know it (or it was renamed or disabled). {instead}"
        ))
        .into()
    };
    let mut note = "";
    // Scripts exist on every supported version; only their permission needs checking.
    if method != ReleaseMethod::Token {
        match probe.supports_command(command).await {
            Ok(true) => {}
            Ok(false) => return Err(unknown()),
            Err(e) if e.is_no_permission() => {
                note = " (COMMAND INFO, the usual support check, is not permitted for this user either)";
            }
            Err(e) => bail!(
                "cannot check whether the server supports {command}: COMMAND INFO failed: {e}"
            ),
        }
    }
    // Sent on an absent key, each is harmless: nothing to delete, nothing to compare.
    let key = format!("{prefix}:probe");
    let tried = match method {
        ReleaseMethod::Del => probe.getdel(&key).await.map(drop),
        ReleaseMethod::Delex => probe.delex(&key, "probe").await.map(drop),
        ReleaseMethod::Token => probe.release_script(&key, "probe").await.map(drop),
    };
    // redis-rs answers NOSCRIPT with SCRIPT LOAD, then EVALSHA again.
    let (needs, grant) = match method {
        ReleaseMethod::Token => (
            "EVALSHA and SCRIPT LOAD",
            "+evalsha +script|load".to_string(),
        ),
        _ => (command, format!("+{}", command.to_ascii_lowercase())),
    };
    match tried {
        Ok(()) => Ok(()),
        Err(e) if e.is_unknown_command() => Err(unknown()),
        Err(e) if e.is_no_permission() => Err(BadInput(format!(
            "release method `{method}` needs {needs}, which this Redis user is not permitted to run on the run's keys ({prefix}:*){note}: {e}. \
             Grant it (e.g. ACL SETUSER <user> {grant} ~lockbench:*) or use another --release."
        ))
        .into()),
        Err(e) => {
            bail!("cannot check release method `{method}`: {command} on an absent key failed: {e}")
        }
    }
}

struct VariantEnv<'a> {
    /// The variant's name (with its server when several run).
    name: &'a str,
    dir: &'a Path,
    base: SystemTime,
    opts: &'a RunOptions,
    /// What the fault schedule breaks this variant's server with.
    control: &'a crate::faults::FaultControl,
    signals: watch::Receiver<u32>,
    server: &'a ServerInfo,
    /// Every key the variant may have written is added here, also when it fails.
    written_keys: &'a mut Vec<String>,
    /// The resource and fence keys of those, when the run has a resource.
    companion_keys: &'a mut Vec<String>,
}

async fn run_variant<K: Connector>(
    connector: &K,
    probe: &K::Conn,
    plan: &Plan,
    variant: Variant,
    key_names: KeyNames,
    events: &tokio::sync::mpsc::Sender<crate::engine::recorder::EventRow>,
    env: VariantEnv<'_>,
) -> anyhow::Result<(Summary, crate::engine::recorder::HistSet)> {
    // Redlock counters from here on are this variant's (the probes' commands are not).
    connector.take_redlock_figures();
    // A simulated run cut into parts (`sim_parallel`): what follows runs part 0, over the
    // first part's length, and the other parts run beside it ([`SimPart`]).
    let parts = match connector.virtual_clock() {
        Some(_) => plan.sim_parallel.max(1),
        None => 1,
    };
    let whole_plan = plan;
    let part_plan = (parts > 1).then(|| plan.part(parts, 0));
    let plan = part_plan.as_ref().unwrap_or(plan);
    // Connections first, so connecting is not part of the measured time.
    // In the open arrival model every request slot is a worker with its connection.
    let slots = if plan.arrivals.is_some() {
        plan.max_in_flight
    } else {
        plan.workers
    };
    let mut conns = Vec::with_capacity(slots);
    for i in 0..slots {
        conns.push(match plan.connection {
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
    // A simulated store runs its variants on the simulator's virtual clock.
    let sim_clock = connector.virtual_clock();
    let mut recorder = match &sim_clock {
        Some(clock) => Recorder::new_virtual(plan.keys, clock.clone()),
        None => Recorder::new(plan.keys, slots),
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
        None => Collector::start(
            recorder.clone(),
            env.dir,
            env.name,
            env.base,
            offset,
            env.opts.log_interval,
        )?,
    };
    // The backlog is deep (8 bytes an arrival): an arrival that waits behind a stalled
    // server must be served late, its wait in its latency, not dropped out of the figures.
    let (arrival_tx, arrival_rx) = tokio::sync::mpsc::channel::<u64>(ARRIVAL_BACKLOG);
    let arrival_tx = plan.arrivals.map(|_| arrival_tx);
    let open_model = arrival_tx.is_some();
    let new_ctx = |recorder: Arc<Recorder>, seed: u64| {
        Arc::new(WorkerCtx {
            recorder,
            resource: plan
                .resource
                .then(|| Resource::new(&key_names, variant.fencing)),
            key_names: key_names.clone(),
            hot_key: plan.hot_key,
            ttl_ms: plan.ttl_ms,
            dist: plan.dist.sampler(),
            think: plan.think.sampler(),
            ramp_up: (plan.ramp_up_us > 0).then(|| {
                let agents = env
                    .opts
                    .agent
                    .as_ref()
                    .map_or(1, |a| a.spec().count as usize);
                (plan.ramp_up_us, plan.workers * agents)
            }),
            busy: plan.busy,
            method: variant.release,
            extend: variant.extend.then_some(Extend {
                every_us: plan.extend_us,
                with: plan.extend_with,
                on_lost: plan.on_lost,
            }),
            pause: (!plan.pause.is_zero()).then(|| Pause {
                length: plan.pause.sampler(),
                at: plan.pause_at,
            }),
            on_unavailable: if variant.fail_open {
                crate::profile::OnUnavailable::FailOpen
            } else {
                crate::profile::OnUnavailable::FailClosed
            },
            acquire: plan.acquire,
            timer: plan.timer,
            crash_between: plan.crash_between,
            crashes: plan
                .faults
                .iter()
                .filter(|f| f.kind == crate::model::fault::FaultKind::HolderCrash)
                .copied()
                .collect(),
            open_model,
            seed,
            deadline_us: plan.run_time().map(|d| d.as_micros() as u64),
            max_sections: match plan.stop {
                Stop::Sections { sections } => Some(sections),
                Stop::Time { .. } => None,
            },
            variant: env.name.into(),
            reserved: Default::default(),
        })
    };
    let ctx = new_ctx(recorder.clone(), plan.seed);
    let mut others = Vec::with_capacity(parts.saturating_sub(1));
    for k in 1..parts {
        others.push(
            SimPart::new(
                connector,
                whole_plan,
                parts,
                k,
                slots,
                (env.dir, env.name, env.base),
                offset,
                &new_ctx,
            )
            .await?,
        );
    }

    let executed = match &sim_clock {
        Some(clock) => {
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
                    &ctx,
                    plan,
                    clock,
                    plan.events.then(|| events.clone()),
                    &collector,
                    interval_us,
                    |_| {
                        // Wall time for the eyes; the bar's position is virtual time.
                        if shown.elapsed() >= Duration::from_millis(200) {
                            shown = std::time::Instant::now();
                            update_bar(&bar, plan, &recorder);
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
                        h.join().unwrap_or_else(|_| {
                            Err(anyhow::anyhow!("the simulation's thread panicked"))
                        })
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
            Executed {
                elapsed_s: end_us as f64 / 1e6,
                stop_reason: if interrupted {
                    StopReason::Interrupted
                } else {
                    StopReason::Limit
                },
                panicked: None,
                crash_blocked_censored: censored,
                faults: crate::sim::fault_windows(&plan.faults, end_us),
                simulated: Some(sim),
            }
        }
        None => {
            run_real(
                plan, &ctx, &recorder, conns, events, &env, arrival_tx, arrival_rx,
            )
            .await
        }
    };
    let Executed {
        elapsed_s,
        stop_reason,
        panicked,
        crash_blocked_censored,
        faults,
        simulated,
    } = executed;
    // Whatever happens next, the caller deletes every key this variant may have written.
    let touched = recorder.touched_keys();
    env.written_keys
        .extend(touched.iter().map(|&k| ctx.key_names.name(k)));
    if let Some(r) = &ctx.resource {
        env.companion_keys.extend(
            touched
                .iter()
                .flat_map(|&k| [r.res_keys[k].clone(), r.fence_keys[k].clone()]),
        );
    }
    if let Some(p) = panicked {
        bail!("a worker panicked: {p}");
    }
    let mut hists = match simulated {
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
    // The resource's final values, read back from the server: what lost updates count from.
    // A server that does not answer (or a user who abandoned the run) leaves them unknown,
    // never the variant unwritten.
    let mut resource_final = Some(0u64);
    if let Some(r) = &ctx.resource {
        let mut conn = probe.clone();
        for &k in &touched {
            if request_of(*env.signals.borrow()) == Request::Abandon {
                resource_final = None;
                break;
            }
            // Twice, as in the cleanup: an idle connection learns of a restart only now.
            let mut read = conn.resource_value(&r.res_keys[k]).await;
            if read
                .as_ref()
                .is_err_and(|e| e.kind == ErrorKind::Connection)
            {
                read = conn.resource_value(&r.res_keys[k]).await;
            }
            match read {
                Ok(v) => resource_final = resource_final.map(|t| t + v),
                Err(e) => {
                    eprintln!(
                        "warning: cannot read back the resource {}: {e}; lost updates are not known",
                        r.res_keys[k]
                    );
                    resource_final = None;
                    break;
                }
            }
        }
    }
    let meta = Meta {
        variant: env.name.to_string(),
        release: variant.release.name().to_string(),
        connection_mode: plan.connection.name().to_string(),
        backend: env.server.backend_detail.clone(),
        server_version: env.server.version.clone(),
        workers: plan.workers,
        ttl_ms: plan.ttl_ms,
        time_scale: plan.time_scale,
        unscaled_ttl_ms: plan.unscaled_ttl_ms,
        seed: plan.seed,
        elapsed_s,
        stop_reason,
        protect: Protection {
            resource: plan.resource,
            fencing: variant.fencing,
            extend_with: variant.extend.then_some(plan.extend_with),
            extend_every_ms: if variant.extend {
                plan.extend_us as f64 / 1000.0
            } else {
                0.0
            },
            // Unknown when the read-back failed: lost updates then read "n/a".
            resource_final: resource_final.unwrap_or(NOT_RECORDED),
        },
    };
    // Locks a crashed holder left without an expiry, read at the server before the cleanup.
    let mut stuck_locks = 0;
    if recorder.counters.counts.crashes.load(Relaxed) > 0 {
        let mut conn = probe.clone();
        for &k in &touched {
            if request_of(*env.signals.borrow()) == Request::Abandon {
                break;
            }
            let key = &ctx.key_names.name(k);
            let mut ttl = conn.pttl(key).await;
            if ttl.as_ref().is_err_and(|e| e.kind == ErrorKind::Connection) {
                ttl = conn.pttl(key).await;
            }
            match ttl {
                Ok(-1) => stuck_locks += 1,
                Ok(_) => {}
                Err(e) => {
                    eprintln!(
                        "warning: cannot read the expiry of {key}: {e}; stuck_locks counts only the keys read before it"
                    );
                    break;
                }
            }
        }
    }
    let mut summary = summarize(meta, &measured, &hists);
    summary.faults = faults;
    let shards = connector.shards();
    if !shards.is_empty() {
        let mut name = String::new();
        summary.shards = crate::analysis::summary::shard_figures(
            &shards,
            plan.keys,
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
            round_trip: plan.sim_rtt_text.clone(),
            service_us: plan.sim_service_us,
            timer: plan.sim_timer_text.clone(),
        }
    });
    summary.stuck_locks = stuck_locks;
    summary.redlock = connector.take_redlock_figures();
    summary.crash_blocked_censored = crash_blocked_censored;
    // The theory knows the distribution and the timer error, not pauses or faults (a crash
    // cuts a section short; a slow server lengthens its resource read).
    let paused = summary.counts.pauses > 0 || !plan.faults.is_empty() || plan.crash_between > 0.0;
    summary.analytic = crate::analytic::check(
        &plan.dist,
        plan.ttl_ms as f64,
        hists.get(crate::engine::recorder::Metric::TimerError),
        summary.counts.overruns,
        summary.counts.sections,
    )
    .filter(|_| !paused);
    summary.thresholds = plan.fail_if.iter().map(|t| t.check(&summary)).collect();
    Ok((summary, hists))
}

/// What running a variant's workers gave, in real or virtual time.
struct Executed {
    elapsed_s: f64,
    stop_reason: StopReason,
    panicked: Option<String>,
    crash_blocked_censored: u64,
    faults: Vec<crate::model::fault::FaultWindow>,
    /// A simulated run's executor figures.
    simulated: Option<crate::sim::Simulated>,
}

/// Runs a variant's workers in real time: tokio tasks, the arrivals' dispatcher, the fault
/// schedule, the progress bar, Ctrl-C, the end-of-run grace and the give-up rule.
#[allow(clippy::too_many_arguments)]
async fn run_real<C: LockConn>(
    plan: &Plan,
    ctx: &Arc<WorkerCtx>,
    recorder: &Arc<Recorder>,
    conns: Vec<C>,
    events: &tokio::sync::mpsc::Sender<crate::engine::recorder::EventRow>,
    env: &VariantEnv<'_>,
    arrival_tx: Option<tokio::sync::mpsc::Sender<u64>>,
    arrival_rx: tokio::sync::mpsc::Receiver<u64>,
) -> Executed {
    let deadline = plan.run_time().map(|d| recorder.start + d);
    // Sections still open at the deadline may finish; past this grace they are cut short.
    let (local_tx, local_rx) = watch::channel(Halt::Run);
    let abandon = Arc::new(crate::engine::driver::AbandonSignal::default());
    let halt = |h: Halt| {
        local_tx.send_if_modified(|cur| {
            let raise = h > *cur;
            if raise {
                *cur = h;
            }
            raise
        });
        // After the watch: a worker whose command is abandoned sees the halt too.
        if h == Halt::Abandon {
            abandon.abandon();
        }
    };
    let arrivals = arrival_tx.is_some().then(|| {
        Arc::new(ArrivalQueue {
            rx: tokio::sync::Mutex::new(arrival_rx),
        })
    });
    let mut set = tokio::task::JoinSet::new();
    // Worker ids are global across agents: agent i runs workers i·W .. (i+1)·W, with the random
    // streams of the same workers in one process of N·W.
    let first = env.opts.agent.as_ref().map_or(0, |a| a.worker_first());
    for (id, conn) in conns.into_iter().enumerate() {
        let drv = RealDriver {
            start: recorder.start,
            halt: local_rx.clone(),
            abandon: abandon.clone(),
            registered: None,
            precise: plan.timer == crate::profile::Timer::Precise,
            arrivals: arrivals.clone(),
            events: plan.events.then(|| events.clone()),
        };
        set.spawn(run_worker(first + id, conn, ctx.clone(), drv));
    }
    // Arrivals at their intended times, until the run's length (or a stop).
    let dispatcher = arrival_tx.map(|tx| {
        let (arrivals, ctx, mut halt) = (plan.arrivals, ctx.clone(), local_rx.clone());
        let length_us = plan.run_time().unwrap_or_default().as_micros() as u64;
        tokio::spawn(async move {
            let Some(arrivals) = arrivals else { return };
            let rec = &ctx.recorder;
            let counts = &rec.counters.counts;
            for at in arrivals.schedule(length_us, ctx.seed) {
                let due = rec.start + at;
                if due > Instant::now() {
                    tokio::select! {
                        _ = tokio::time::sleep_until(due) => {}
                        _ = halt.wait_for(|h| *h != Halt::Run) => return,
                    }
                }
                counts.requests.fetch_add(1, Relaxed);
                // Lateness is the slots' to count: an arrival is late when it was due before
                // the slot that takes it began waiting.
                if tx.try_send(at.as_micros() as u64).is_err() {
                    counts.dropped_arrivals.fetch_add(1, Relaxed);
                }
            }
        })
    });
    // The fault schedule runs on the variant's clock until its workers are done.
    let (faults_done, faults_done_rx) = watch::channel(false);
    let control = crate::faults::FaultControl {
        key_prefix: ctx.key_names.prefix().to_string(),
        ..env.control.clone()
    };
    let driver = tokio::spawn(crate::faults::drive(
        plan.faults.clone(),
        control,
        recorder.start,
        faults_done_rx,
    ));
    let bar = progress_bar(plan, env.opts, env.name);
    let grace = end_grace(plan.ttl_ms);
    let mut signals = env.signals.clone();
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let mut cut_at: Option<Instant> = None;
    let mut panicked: Option<String> = None;
    let mut stop_reason = StopReason::Limit;
    let on_signal = |count: u32, stop_reason: &mut StopReason| match request_of(count) {
        Request::Continue => {}
        Request::Stop => {
            *stop_reason = StopReason::Interrupted;
            if !env.opts.quiet {
                eprintln!(
                    "stopping: open sections end now and are released; Ctrl-C again to stop \
                     waiting for the server and skip the key cleanup"
                );
            }
            halt(Halt::Stop);
        }
        Request::Abandon => {
            *stop_reason = StopReason::Interrupted;
            halt(Halt::Abandon);
        }
    };
    // A signal that came before the workers started.
    on_signal(*signals.borrow_and_update(), &mut stop_reason);
    loop {
        tokio::select! {
            r = set.join_next() => {
                match r {
                    None => break,
                    Some(Err(e)) if e.is_panic() => {
                        // Stop the others normally so their locks are released and counted.
                        panicked.get_or_insert_with(|| e.to_string());
                        halt(Halt::Stop);
                    }
                    Some(_) => {}
                }
            }
            Ok(()) = signals.changed() => {
                on_signal(*signals.borrow_and_update(), &mut stop_reason);
            }
            _ = tick.tick() => {
                update_bar(&bar, plan, recorder);
                if let Some(d) = deadline {
                    let cut = *cut_at.get_or_insert(d + grace);
                    if Instant::now() >= cut {
                        halt(Halt::Stop);
                    }
                }
                // The give-up rule: commands have failed, with none succeeding, for too long.
                if stop_reason == StopReason::Limit
                    && recorder
                        .failing_for_us()
                        .is_some_and(|f| f >= plan.give_up_after_us)
                {
                    stop_reason = StopReason::GaveUp;
                    halt(Halt::Stop);
                }
            }
        }
    }
    bar.finish_and_clear();
    let elapsed_s = recorder.start.elapsed().as_secs_f64();
    if let Some(d) = dispatcher {
        d.abort();
    }
    // Blocked times still open end with the variant, not after a fault's undo.
    let crash_blocked_censored = recorder.censor_crashes();
    // Ends a fault still on (a paused or killed server comes back before the cleanup).
    let _ = faults_done.send(true);
    let faults = driver.await.unwrap_or_default();
    // The end barrier: the stuck-lock reads and the cleanup wait until every agent is done.
    if let Some(agent) = &env.opts.agent {
        agent.finish(grace, &mut signals).await;
    }
    Executed {
        elapsed_s,
        stop_reason,
        panicked,
        crash_blocked_censored,
        faults,
        simulated: None,
    }
}

/// A simulated variant's interval-log interval, µs: the run's, and no more than about 2,000
/// intervals in a time-limited run (a simulated day has 86,400 seconds).
fn sim_log_interval_us(plan: &Plan, opts: &RunOptions) -> u64 {
    let every = opts.log_interval.as_micros() as u64;
    let length = plan.run_time().map_or(0, |d| d.as_micros() as u64);
    every.max(length / 2_000).max(1)
}

fn progress_bar(plan: &Plan, opts: &RunOptions, name: &str) -> ProgressBar {
    if !opts.progress || opts.quiet {
        return ProgressBar::hidden();
    }
    let (len, unit) = match plan.stop {
        Stop::Time { duration_us } => (duration_us / 1000, "ms"),
        Stop::Sections { sections } => (sections, "sections"),
    };
    let bar = ProgressBar::new(len);
    let style = ProgressStyle::with_template(&format!(
        "{{prefix:>6}} [{{bar:30}}] {{pos}}/{{len}} {unit}  {{msg}}"
    ))
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .progress_chars("=> ");
    bar.set_style(style);
    bar.set_prefix(name.to_string());
    bar
}

fn update_bar(bar: &ProgressBar, plan: &Plan, rec: &Recorder) {
    let c = &rec.counters;
    let sections = c.counts.sections.load(Relaxed);
    match plan.stop {
        Stop::Time { duration_us } => {
            bar.set_position((rec.now_us() / 1000).min(duration_us / 1000))
        }
        Stop::Sections { sections: n } => bar.set_position(sections.min(n)),
    }
    bar.set_message(format!(
        "sections {sections}  overruns {}  overlaps {}  wrongful deletes {}  errors {}",
        c.counts.overruns.load(Relaxed),
        c.overlap_incidents.load(Relaxed),
        c.counts.wrongful_deletes.load(Relaxed),
        c.total_errors()
    ));
}
