//! Runs a validated plan: picks the backend, opens connections, drives the workers of each
//! variant, removes exactly the run's keys, and writes every output file.

use crate::output::{self, Collector, EventsWriter};
use crate::profile::{BackendChoice, ConnectionMode, Plan, Stop};
use crate::recorder::Recorder;
use crate::release::ReleaseMethod;
use crate::store::memory::MemoryStore;
use crate::store::redis::{RedisConnector, Timeouts, redact_url};
use crate::store::spawn::{SpawnedRedis, redis_server_available};
use crate::store::{Connector, LockConn};
use crate::summary::{Meta, Summary, summarize};
use crate::worker::{WorkerCtx, run_worker};
use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
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
        }
    }
}

/// What `manifest.json` records.
#[derive(Debug, Clone, Serialize)]
pub struct Manifest {
    /// lockbench version.
    pub lockbench_version: String,
    /// Run id.
    pub run_id: String,
    /// Sub-command.
    pub command: String,
    /// Profile file.
    pub profile_file: Option<String>,
    /// The resolved profile (defaults filled in, flags applied, URL redacted).
    pub profile: Plan,
    /// Seed.
    pub seed: u64,
    /// Backend kind actually used (`spawn`, `url`, `memory`).
    pub backend: String,
    /// Backend description (address, no password).
    pub backend_detail: String,
    /// Connection mode.
    pub connection_mode: String,
    /// Server version from `INFO server`.
    pub server_version: String,
    /// Prefix of every key the run wrote.
    pub key_prefix: String,
    /// Variants, in run order.
    pub variants: Vec<String>,
    /// UTC start.
    pub started_at: String,
    /// UTC end.
    pub ended_at: Option<String>,
    /// Stopped by Ctrl-C.
    pub interrupted: bool,
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
    /// Why the charts or `report.html` could not be written (the data files were).
    pub report_error: Option<anyhow::Error>,
}

/// `summary.json`.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct SummaryFile {
    /// Run id.
    pub run_id: String,
    /// One entry per variant.
    pub variants: Vec<Summary>,
}

/// Resolved backend, kept alive for the run (a spawned server dies with it).
pub enum Backend {
    /// A private server we started.
    Spawned(Box<SpawnedRedis>, RedisConnector),
    /// An existing server.
    Url(RedisConnector),
    /// The in-process model.
    Memory(MemoryStore),
}

impl Backend {
    /// Resolves the plan's backend choice; `auto` falls back to memory with a notice.
    pub async fn open(plan: &Plan, quiet: bool) -> anyhow::Result<Backend> {
        let timeouts = Timeouts {
            connect: Duration::from_micros(plan.connect_timeout_us),
            response: Duration::from_micros(plan.command_timeout_us),
        };
        let choice = match plan.backend {
            BackendChoice::Auto if redis_server_available() => BackendChoice::Spawn,
            BackendChoice::Auto => {
                if !quiet {
                    eprintln!(
                        "notice: redis-server is not installed; using the in-process memory model. \
                         Install it (apt-get install -y redis-server) to measure a real Redis."
                    );
                }
                BackendChoice::Memory
            }
            ref c => c.clone(),
        };
        Ok(match choice {
            BackendChoice::Spawn => {
                let server = SpawnedRedis::start().await?;
                let conn = RedisConnector::new(&server.url(), timeouts, false)?;
                Backend::Spawned(Box::new(server), conn)
            }
            BackendChoice::Url => {
                let url = plan
                    .redis
                    .as_deref()
                    .context("the url backend needs --redis URL")?;
                Backend::Url(RedisConnector::new(url, timeouts, plan.allow_remote)?)
            }
            _ => Backend::Memory(MemoryStore::new(
                Duration::from_micros(plan.memory_rtt_us),
                true,
            )),
        })
    }

    /// `spawn`, `url` or `memory`.
    pub fn kind(&self) -> &'static str {
        match self {
            Backend::Spawned(..) => "spawn",
            Backend::Url(_) => "url",
            Backend::Memory(_) => "memory",
        }
    }

    /// Stops a spawned server.
    pub async fn close(self) {
        if let Backend::Spawned(server, _) = self {
            server.stop().await;
        }
    }
}

/// Runs `plan` once per method in `methods` (same seed, separate key namespaces).
pub async fn execute(
    plan: &Plan,
    methods: &[ReleaseMethod],
    opts: &RunOptions,
) -> anyhow::Result<RunOutcome> {
    let backend = Backend::open(plan, opts.quiet).await?;
    let kind = backend.kind();
    let result = match &backend {
        Backend::Spawned(_, c) | Backend::Url(c) => run_with(c, kind, plan, methods, opts).await,
        Backend::Memory(m) => run_with(m, kind, plan, methods, opts).await,
    };
    backend.close().await;
    result
}

/// Runs against any connector; the backend-independent part of [`execute`].
pub async fn run_with<K: Connector>(
    connector: &K,
    kind: &str,
    plan: &Plan,
    methods: &[ReleaseMethod],
    opts: &RunOptions,
) -> anyhow::Result<RunOutcome> {
    let mut probe = connector.connect().await?;
    let server_version = probe
        .server_version()
        .await
        .map_err(|e| anyhow::anyhow!("{} did not answer INFO server: {e}", connector.describe()))?;
    for &method in methods {
        check_support(&mut probe, method, &server_version).await?;
    }

    let started = SystemTime::now();
    let run_id = output::run_id(started);
    let dir = opts
        .out_dir
        .clone()
        .unwrap_or_else(|| opts.results_root.join(&run_id));
    output::prepare_dir(&dir, opts.force)?;
    let prefix = format!("lockbench:{run_id}");
    let mut manifest = Manifest {
        lockbench_version: env!("CARGO_PKG_VERSION").to_string(),
        run_id: run_id.clone(),
        command: opts.command.clone(),
        profile_file: opts.profile_file.clone(),
        profile: plan.clone(),
        seed: plan.seed,
        backend: kind.to_string(),
        backend_detail: redact_url(&connector.describe()),
        connection_mode: plan.connection.name().to_string(),
        server_version: server_version.clone(),
        key_prefix: prefix.clone(),
        variants: methods.iter().map(|m| m.name().to_string()).collect(),
        started_at: output::utc_stamp(started, false),
        ended_at: None,
        interrupted: false,
    };
    output::write_json(&dir.join("manifest.json"), &manifest)?;

    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let shutdown_tx = Arc::new(shutdown_tx);
    let ctrl_c = {
        let tx = shutdown_tx.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                let _ = tx.send(true);
            }
        })
    };

    let events = EventsWriter::start(&dir.join("events.csv"))?;
    let mut summaries = Vec::new();
    let mut written_keys: Vec<String> = Vec::new();
    let mut result = Ok(());
    for &method in methods {
        if *shutdown_rx.borrow() {
            break;
        }
        let key_names: Vec<String> = (0..plan.keys)
            .map(|k| format!("{prefix}:{method}:{k}"))
            .collect();
        let r = run_variant(
            connector,
            &probe,
            plan,
            method,
            key_names,
            &events.tx,
            VariantEnv {
                dir: &dir,
                base: started,
                opts,
                shutdown: shutdown_rx.clone(),
                server_version: &server_version,
                written_keys: &mut written_keys,
            },
        )
        .await;
        match r {
            Ok((summary, hists)) => {
                let suffix = (methods.len() > 1).then_some(method.name());
                if let Err(e) = output::write_hgrms(&dir, &hists, suffix) {
                    result = Err(e);
                    break;
                }
                summaries.push(summary);
            }
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    ctrl_c.abort();
    let interrupted = *shutdown_rx.borrow();
    let rows = events.finish();

    // Remove exactly the keys this run could have written (those it sent a SET for), nothing
    // else, a few hundred per DEL.
    let mut cleanup_errors = 0;
    for chunk in written_keys.chunks(500) {
        if probe.del_many(chunk).await.is_err() {
            cleanup_errors += chunk.len();
        }
    }
    result?;
    rows?;
    if cleanup_errors > 0 && !opts.quiet {
        eprintln!(
            "warning: {cleanup_errors} of the run's keys could not be removed (prefix {prefix})"
        );
    }

    let summary_file = SummaryFile {
        run_id: run_id.clone(),
        variants: summaries.clone(),
    };
    output::write_json(&dir.join("summary.json"), &summary_file)?;
    output::write_summary_csv_file(&dir, &summaries)?;
    manifest.ended_at = Some(output::utc_stamp(SystemTime::now(), false));
    manifest.interrupted = interrupted;
    output::write_json(&dir.join("manifest.json"), &manifest)?;
    // Charts and report.html, from the files just written (as `lockbench report` would). A
    // failure keeps every file written so far and is the caller's to report (exit 1).
    let report_error = crate::report::render_after_run(&dir).err();
    Ok(RunOutcome {
        dir,
        summaries,
        manifest,
        report_error,
    })
}

/// Refuses a release method whose command the server lacks, naming the version that has it.
pub async fn check_support<C: LockConn>(
    probe: &mut C,
    method: ReleaseMethod,
    server_version: &str,
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
        ReleaseMethod::Token => return Ok(()),
    };
    if probe.supports_command(command).await.unwrap_or(false) {
        Ok(())
    } else {
        bail!(
            "release method `{method}` needs {command}, which Redis added in {since}; this server is {server_version} \
             and does not know it. {instead}"
        )
    }
}

struct VariantEnv<'a> {
    dir: &'a Path,
    base: SystemTime,
    opts: &'a RunOptions,
    shutdown: watch::Receiver<bool>,
    server_version: &'a str,
    /// Every key the variant may have written is added here, also when it fails.
    written_keys: &'a mut Vec<String>,
}

async fn run_variant<K: Connector>(
    connector: &K,
    probe: &K::Conn,
    plan: &Plan,
    method: ReleaseMethod,
    key_names: Vec<String>,
    events: &tokio::sync::mpsc::Sender<crate::recorder::EventRow>,
    env: VariantEnv<'_>,
) -> anyhow::Result<(Summary, crate::recorder::HistSet)> {
    // Connections first, so connecting is not part of the measured time.
    let mut conns = Vec::with_capacity(plan.workers);
    for i in 0..plan.workers {
        conns.push(match plan.connection {
            ConnectionMode::Shared => probe.clone(),
            ConnectionMode::PerWorker => connector.connect().await.with_context(|| {
                format!(
                    "opening connection {} of {} (per-worker mode): the server's maxclients or this \
                     process's open-file limit (ulimit -n) may be too low; --connection shared uses one",
                    i + 1,
                    plan.workers
                )
            })?,
        });
    }
    let recorder = Arc::new(Recorder::new(plan.keys, plan.workers));
    let offset = SystemTime::now()
        .duration_since(env.base)
        .unwrap_or_default();
    let collector = Collector::start(
        recorder.clone(),
        env.dir,
        method.name(),
        env.base,
        offset,
        env.opts.log_interval,
    )?;
    let deadline = plan.run_time().map(|d| recorder.start + d);
    let ctx = Arc::new(WorkerCtx {
        recorder: recorder.clone(),
        key_names,
        hot_key: plan.hot_key,
        ttl_ms: plan.ttl_ms,
        dist: plan.dist.sampler(),
        think: plan.think.sampler(),
        busy: plan.busy,
        method,
        seed: plan.seed,
        deadline,
        max_sections: match plan.stop {
            Stop::Sections { sections } => Some(sections),
            Stop::Time { .. } => None,
        },
        variant: method.name().to_string(),
        events: Some(events.clone()),
        reserved: Default::default(),
    });

    // Sections still open at the deadline may finish; past this grace they are cut short.
    let (local_tx, local_rx) = watch::channel(false);
    let mut set = tokio::task::JoinSet::new();
    for (id, conn) in conns.into_iter().enumerate() {
        set.spawn(run_worker(id, conn, ctx.clone(), local_rx.clone()));
    }
    let bar = progress_bar(plan, env.opts, method);
    let grace = end_grace(plan.ttl_ms);
    let mut outer = env.shutdown.clone();
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let mut cut_at: Option<Instant> = None;
    let mut panicked: Option<String> = None;
    loop {
        tokio::select! {
            r = set.join_next() => {
                match r {
                    None => break,
                    Some(Err(e)) if e.is_panic() => {
                        // Stop the others normally so their locks are released and counted.
                        panicked.get_or_insert_with(|| e.to_string());
                        let _ = local_tx.send(true);
                    }
                    Some(_) => {}
                }
            }
            _ = outer.changed() => {
                let _ = local_tx.send(true);
            }
            _ = tick.tick() => {
                update_bar(&bar, plan, &recorder);
                if let Some(d) = deadline {
                    let cut = *cut_at.get_or_insert(d + grace);
                    if Instant::now() >= cut {
                        let _ = local_tx.send(true);
                    }
                }
            }
        }
    }
    bar.finish_and_clear();
    let elapsed_s = recorder.start.elapsed().as_secs_f64();
    // Whatever happens next, the caller deletes every key this variant may have written.
    env.written_keys.extend(
        recorder
            .touched_keys()
            .into_iter()
            .map(|k| ctx.key_names[k].clone()),
    );
    if let Some(p) = panicked {
        bail!("a worker panicked: {p}");
    }
    let hists = collector.finish()?;
    let meta = Meta {
        variant: method.name().to_string(),
        release: method.name().to_string(),
        connection_mode: plan.connection.name().to_string(),
        backend: redact_url(&connector.describe()),
        server_version: env.server_version.to_string(),
        workers: plan.workers,
        ttl_ms: plan.ttl_ms,
        time_scale: plan.time_scale,
        unscaled_ttl_ms: plan.unscaled_ttl_ms,
        seed: plan.seed,
        elapsed_s,
    };
    let mut summary = summarize(meta, &recorder, &hists);
    summary.analytic = crate::analytic::check(
        &plan.dist,
        plan.ttl_ms as f64,
        hists.get(crate::recorder::Metric::TimerError),
        summary.overruns,
        summary.sections,
    );
    Ok((summary, hists))
}

/// How long sections still open at the end of a time-limited run may go on before they are
/// cut short (and counted as interrupted): three TTLs, at least 5 s, at most 60 s.
pub fn end_grace(ttl_ms: u64) -> Duration {
    Duration::from_millis(ttl_ms.saturating_mul(3).clamp(5_000, 60_000))
}

fn progress_bar(plan: &Plan, opts: &RunOptions, method: ReleaseMethod) -> ProgressBar {
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
    bar.set_prefix(method.name());
    bar
}

fn update_bar(bar: &ProgressBar, plan: &Plan, rec: &Recorder) {
    let c = &rec.counters;
    let sections = c.sections.load(Relaxed);
    match plan.stop {
        Stop::Time { duration_us } => {
            bar.set_position((rec.now_us() / 1000).min(duration_us / 1000))
        }
        Stop::Sections { sections: n } => bar.set_position(sections.min(n)),
    }
    bar.set_message(format!(
        "sections {sections}  overruns {}  overlaps {}  wrongful deletes {}  errors {}",
        c.overruns.load(Relaxed),
        c.overlap_incidents.load(Relaxed),
        c.wrongful_deletes.load(Relaxed),
        c.total_errors()
    ));
}
