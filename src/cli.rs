//! The command line. Flags are folded into the profile and validated into a [`Plan`] before
//! any I/O, so a bad flag fails exactly like a bad profile field.

use crate::profile::{BackendChoice, Plan, Profile, ProfileError};
use crate::release::ReleaseMethod;
use crate::runner::{self, Backend, RunOptions};
use crate::store::Connector;
use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use std::path::{Path, PathBuf};

/// Load-tests Redis locks and measures what goes wrong when critical sections outlast their TTL.
#[derive(Debug, Parser)]
#[command(name = "lockbench", version, about, long_about = None, after_help = crate::exit::TABLE)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Sub-commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one workload with one release method.
    Run(RunArgs),
    /// Run one workload under several release methods with the same seed (paired comparison).
    Compare(CompareArgs),
    /// Run one workload over several TTLs × release methods, same seed in every cell.
    Sweep(SweepArgs),
    /// Replay a story step by step against a real server.
    Demo(DemoArgs),
    /// Recommend a TTL from measured section durations (events.csv, CSV, .hgrm, .hlog).
    Recommend(crate::recommend::RecommendArgs),
    /// Redraw the charts and report.html of a finished run, and check its summary.
    ///
    /// Recomputes every figure of summary.json that events.csv determines (counts, exact
    /// overlap, percentiles) and exits with 2 on a mismatch. The report drawn at the end of a
    /// run skips this check: exact overlap keeps every section's interval in memory, which
    /// grows with the run's length, while drawing alone does not.
    Report(crate::report::ReportArgs),
}

/// Workload flags; each overrides the profile's field of the same name.
#[derive(Debug, Args, Default, Clone)]
pub struct WorkloadArgs {
    /// Profile (TOML). Without one, built-in defaults apply.
    pub profile: Option<PathBuf>,
    /// Concurrent workers (clients) [profile: workers; default 10].
    #[arg(long)]
    pub workers: Option<usize>,
    /// Lock keys the workers contend for [profile: keys; default 1].
    #[arg(long)]
    pub keys: Option<usize>,
    /// Fraction (0–1) of attempts aimed at key 0, the hot key; the rest pick uniformly
    /// [profile: hot_key; default: none, uniform].
    #[arg(long, allow_negative_numbers = true)]
    pub hot_key: Option<f64>,
    /// Lock TTL sent as PX, whole milliseconds, with unit, e.g. 100ms, 30s [profile: ttl;
    /// default 100ms].
    #[arg(long)]
    pub ttl: Option<String>,
    /// Run length by time, with unit, e.g. 10s [profile: duration; default 5s].
    #[arg(long, conflicts_with = "sections")]
    pub duration: Option<String>,
    /// Run length by number of sections begun [profile: sections].
    #[arg(long)]
    pub sections: Option<u64>,
    /// Critical-section duration distribution, e.g. 'constant(2ms)', 'uniform(70ms,110ms)',
    /// 'exponential(mean=30ms)', 'lognormal(median=20ms,p99=120ms)',
    /// 'mixture(0.99*constant(5ms),0.01*uniform(1s,3s))', 'empirical(file=d.csv,column=durationMs)'
    /// [profile: dist; default constant(10ms)].
    #[arg(long)]
    pub dist: Option<String>,
    /// Think time between a release and the next attempt, a distribution
    /// [profile: think; default constant(0ms)].
    #[arg(long)]
    pub think: Option<String>,
    /// What a worker does when the lock is busy: fail-fast (count a rejection) or retry
    /// (exponential backoff with full jitter, see the profile's [retry] table) [profile: busy;
    /// default fail-fast].
    #[arg(long)]
    pub busy: Option<String>,
    /// Seed of every random choice; the same seed gives the same intended durations
    /// [profile: seed; default 1].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Connection mode: per-worker (independent clients, a socket each) or shared (one
    /// multiplexed socket, like one service process) [profile: connection; default per-worker].
    #[arg(long)]
    pub connection: Option<String>,
    /// Redis URL (redis://, rediss://, unix://; user/password allowed, never printed). Implies
    /// --backend url [profile: redis].
    #[arg(long)]
    pub redis: Option<String>,
    /// auto (spawn if redis-server is installed, else memory), spawn, url or memory
    /// [profile: backend; default auto].
    #[arg(long)]
    pub backend: Option<String>,
    /// Allow a non-loopback Redis host (never settable from a profile).
    #[arg(long)]
    pub allow_remote: bool,
    /// Simulated round trip of the memory backend, with unit [profile: memory_rtt; default 0ms].
    #[arg(long)]
    pub memory_rtt: Option<String>,
    /// Time allowed for one Redis reply before it counts as a timeout error, with unit
    /// [profile: command_timeout; default 10s].
    #[arg(long)]
    pub command_timeout: Option<String>,
    /// End the run when commands have been failing, with none succeeding, for this long (the
    /// server is down, out of memory, or refusing the user); the run then exits with 1
    /// [profile: give_up_after; default 10s].
    #[arg(long)]
    pub give_up_after: Option<String>,
    /// Multiply every duration of the workload (TTL, distribution, think time, backoff; not the
    /// run length) by this factor, e.g. 0.01 to measure a 30s-TTL world in seconds; reports show
    /// scaled and original units [profile: time_scale; default 1].
    #[arg(long, allow_negative_numbers = true)]
    pub time_scale: Option<f64>,
    /// Output directory [default: results/<run-id>]. A directory holding an earlier run is
    /// refused (exit 2) unless --force is given; one holding other files is always refused.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Delete the earlier run's files in --out (only files lockbench writes) before writing.
    #[arg(long)]
    pub force: bool,
    /// No progress bar, notices or table (files are still written).
    #[arg(long, short)]
    pub quiet: bool,
}

/// `run`.
#[derive(Debug, Args, Clone)]
pub struct RunArgs {
    #[command(flatten)]
    /// Workload.
    pub workload: WorkloadArgs,
    /// Release method: del (unconditional, the bug), token (Lua compare-and-delete), delex
    /// (DELEX IFEQ, Redis ≥ 8.4) [profile: release; default token].
    #[arg(long)]
    pub release: Option<String>,
}

/// `compare`.
#[derive(Debug, Args, Clone)]
pub struct CompareArgs {
    #[command(flatten)]
    /// Workload.
    pub workload: WorkloadArgs,
    /// Release methods to compare, comma-separated [profile: releases; default del,token].
    #[arg(long, value_delimiter = ',')]
    pub releases: Option<Vec<String>>,
}

/// `sweep`.
#[derive(Debug, Args, Clone)]
pub struct SweepArgs {
    #[command(flatten)]
    /// Workload; its `--ttl` takes a list (`100ms,200ms,1s`) or a log-spaced range
    /// (`100ms..2s:10`).
    pub workload: WorkloadArgs,
    /// Release methods, comma-separated [profile: releases; default del,token].
    #[arg(long, value_delimiter = ',')]
    pub release: Option<Vec<String>>,
}

/// `demo`.
#[derive(Debug, Args, Clone)]
pub struct DemoArgs {
    /// The story: stale-release.
    #[arg(value_parser = ["stale-release"])]
    pub story: String,
    /// A's TTL; the demo waits this long (plus 20 %) for it to expire [default 300ms].
    #[arg(long, default_value = "300ms")]
    pub ttl: String,
    /// Redis URL instead of a private server.
    #[arg(long)]
    pub redis: Option<String>,
    /// auto, spawn, url or memory [default auto].
    #[arg(long)]
    pub backend: Option<String>,
    /// Allow a non-loopback Redis host.
    #[arg(long)]
    pub allow_remote: bool,
}

impl WorkloadArgs {
    fn as_profile(&self) -> Profile {
        Profile {
            workers: self.workers,
            keys: self.keys,
            hot_key: self.hot_key,
            ttl: self.ttl.clone(),
            duration: self.duration.clone(),
            sections: self.sections,
            dist: self.dist.clone(),
            think: self.think.clone(),
            busy: self.busy.clone(),
            seed: self.seed,
            connection: self.connection.clone(),
            redis: self.redis.clone(),
            backend: self.backend.clone(),
            memory_rtt: self.memory_rtt.clone(),
            command_timeout: self.command_timeout.clone(),
            give_up_after: self.give_up_after.clone(),
            time_scale: self.time_scale,
            ..Profile::default()
        }
    }

    /// Loads the profile, applies the flags and validates. Errors in a flag name the flag.
    pub fn plan(&self, extra: Profile) -> Result<Plan, ProfileError> {
        let flags = self.as_profile().overlay(extra);
        let (profile, source, file, base) = match &self.profile {
            Some(path) => {
                let (p, src) = Profile::load(path)?;
                (
                    p,
                    src,
                    path.display().to_string(),
                    path.parent().map(Path::to_path_buf),
                )
            }
            None => (
                Profile::default(),
                String::new(),
                "defaults".to_string(),
                None,
            ),
        };
        let merged = profile.overlay(flags.clone());
        let base = base.or_else(|| std::env::current_dir().ok());
        let mut plan = merged.plan(&file, &source, base.as_deref()).map_err(|e| {
            // A field that came from a flag is reported as that flag.
            match &e.field {
                Some(f) if flag_was_set(&flags, f) => ProfileError {
                    file: "command line".to_string(),
                    line: None,
                    message: e.message.replacen(
                        &format!("field `{f}`"),
                        &format!("--{}", f.replace('_', "-")),
                        1,
                    ),
                    field: e.field.clone(),
                },
                _ => e,
            }
        })?;
        plan.allow_remote = self.allow_remote;
        if !self.quiet {
            for w in &plan.warnings {
                eprintln!("warning: {w}");
            }
        }
        Ok(plan)
    }

    fn options(&self, command: &str) -> RunOptions {
        RunOptions {
            out_dir: self.out.clone(),
            quiet: self.quiet,
            progress: !self.quiet,
            command: command.to_string(),
            profile_file: self.profile.as_ref().map(|p| p.display().to_string()),
            force: self.force,
            ..RunOptions::default()
        }
    }
}

fn flag_was_set(flags: &Profile, field: &str) -> bool {
    flags.is_set(field)
}

/// Runs a parsed command line; returns the process exit code.
pub async fn dispatch(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Run(a) => {
            let extra = Profile {
                release: a.release.clone(),
                ..Profile::default()
            };
            let plan = a.workload.plan(extra)?;
            finish(
                runner::execute(&plan, &[plan.release], &a.workload.options("run")).await?,
                a.workload.quiet,
            )
        }
        Command::Compare(a) => {
            let extra = Profile {
                releases: a.releases.clone(),
                ..Profile::default()
            };
            let plan = a.workload.plan(extra)?;
            let methods: Vec<ReleaseMethod> = plan.releases.clone();
            finish(
                runner::execute(&plan, &methods, &a.workload.options("compare")).await?,
                a.workload.quiet,
            )
        }
        Command::Sweep(a) => sweep(a).await,
        Command::Demo(a) => demo(a).await,
        Command::Recommend(a) => crate::recommend::run_recommend(&a),
        Command::Report(a) => crate::report::run_report(&a),
    }
}

fn finish(outcome: runner::RunOutcome, quiet: bool) -> anyhow::Result<i32> {
    if !quiet {
        let stdout = std::io::stdout();
        let mut w = stdout.lock();
        crate::output::print_table(&mut w, &outcome.summaries)?;
        println!(
            "\nbackend: {} ({}), connection: {}, seed {}",
            outcome.manifest.backend_detail,
            outcome.manifest.server_version,
            outcome.manifest.connection_mode,
            outcome.manifest.seed
        );
        let scale = outcome.manifest.profile.time_scale;
        if scale != 1.0 {
            let s = &outcome.summaries;
            let elapsed = s.iter().map(|v| v.elapsed_s).sum::<f64>();
            println!(
                "time scale {scale}: every duration above is the real one × {scale}; TTL {} ms stands for {}; {:.1} s of run stand for {}",
                outcome.manifest.profile.ttl_ms,
                crate::units::fmt_us(
                    crate::units::ms_to_us(outcome.manifest.profile.unscaled_ttl_ms),
                    crate::units::Style::Compact
                ),
                elapsed,
                crate::units::fmt_us((elapsed / scale * 1e6) as u64, crate::units::Style::Compact)
            );
        }
        println!("results: {}", outcome.dir.display());
    }
    let failure = outcome.manifest.failure.as_deref();
    let verdict = crate::exit::verdict(&outcome.summaries, outcome.manifest.interrupted, failure);
    // The cause of a failed run is shown even under --quiet; other errors only without it.
    if verdict.code != crate::exit::OK || !quiet {
        for s in &outcome.summaries {
            let lines = crate::exit::error_lines(s);
            if !lines.is_empty() {
                eprintln!("errors of variant `{}`, first of each kind:", s.variant);
                for l in lines {
                    eprintln!("  {l}");
                }
            }
        }
    }
    if verdict.code == crate::exit::FAILED {
        for r in &verdict.reasons {
            eprintln!("error: {r}");
        }
        eprintln!("results so far: {}", outcome.dir.display());
    }
    // Shown even with --quiet: a missing report is a failed output, not a notice.
    if let Some(e) = &outcome.report_error {
        eprintln!("error: the run's data files are written, but the report is not: {e:#}");
        if verdict.code == crate::exit::OK {
            return Ok(crate::exit::FAILED);
        }
    }
    Ok(verdict.code)
}

async fn sweep(a: SweepArgs) -> anyhow::Result<i32> {
    use crate::sweep;
    let extra = Profile {
        releases: a.release.clone(),
        ..Profile::default()
    };
    // The TTL list comes from --ttl, or from the profile's ttl field.
    let ttl_text = match &a.workload.ttl {
        Some(t) => t.clone(),
        None => {
            let p = match &a.workload.profile {
                Some(path) => Profile::load(path)?.0,
                None => Profile::default(),
            };
            p.ttl
                .context("sweep needs TTLs: --ttl 100ms,200ms,1s or --ttl 100ms..2s:10")?
        }
    };
    let ttls = sweep::parse_ttls(&ttl_text).map_err(|e| anyhow::anyhow!(e))?;
    let cell = |ttl_us: u64, quiet: bool| {
        let mut w = a.workload.clone();
        w.ttl = Some(format!("{ttl_us}us"));
        w.quiet = quiet;
        w.plan(extra.clone())
    };
    // Validate every cell before any I/O; print warnings once.
    let first = cell(ttls[0], a.workload.quiet)?;
    for &t in &ttls[1..] {
        cell(t, true)?;
    }
    let methods = first.releases.clone();
    sweep::validate(&ttls, &methods)?;
    let backend = Backend::open(&first, a.workload.quiet).await?;
    let dir = a.workload.out.clone().unwrap_or_else(|| {
        PathBuf::from("results").join(format!(
            "{}-sweep",
            crate::output::run_id(std::time::SystemTime::now())
        ))
    });
    let opts = RunOptions {
        quiet: a.workload.quiet,
        progress: !a.workload.quiet,
        profile_file: a.workload.profile.as_ref().map(|p| p.display().to_string()),
        force: a.workload.force,
        ..RunOptions::default()
    };
    if !a.workload.quiet {
        sweep::print_header(std::io::stderr())?;
    }
    let rows = sweep::sweep(
        &backend,
        &ttls,
        &methods,
        |t| Ok(cell(t, true)?),
        &dir,
        &opts,
    )
    .await;
    backend.close().await;
    let rows = rows?;
    crate::output::write_file(&dir.join("sweep.csv"), |w| sweep::write_csv(w, &rows))?;
    crate::report::charts::sweep(
        &dir.join("sweep.png"),
        &sweep::chart_series(&rows),
        "real units",
    )?;
    if !a.workload.quiet {
        println!();
        sweep::print_header(std::io::stdout())?;
        for r in &rows {
            sweep::print_row(std::io::stdout(), r)?;
        }
        println!("\nresults: {}", dir.display());
    }
    let failed = rows.iter().filter(|r| r.error.is_some()).count();
    // A cell that measured but could not write its report fails the sweep, even with --quiet.
    let mut unreported = 0;
    for r in rows.iter().filter(|r| r.summary.is_some()) {
        if let Some(e) = &r.error {
            eprintln!("error: {}: {e}", r.dir.display());
            unreported += 1;
        }
    }
    Ok(if failed == rows.len() || unreported > 0 {
        1
    } else {
        0
    })
}

async fn demo(a: DemoArgs) -> anyhow::Result<i32> {
    let ttl = crate::units::parse_duration(&a.ttl).map_err(|e| anyhow::anyhow!("--ttl: {e}"))?;
    if ttl < std::time::Duration::from_millis(1) || ttl > std::time::Duration::from_secs(60) {
        anyhow::bail!("--ttl: use 1ms to 60s");
    }
    let profile = Profile {
        redis: a.redis.clone(),
        backend: a.backend.clone(),
        ..Profile::default()
    };
    let mut plan = profile.plan("command line", "", None)?;
    plan.allow_remote = a.allow_remote;
    if plan.backend == BackendChoice::Url && plan.redis.is_none() {
        anyhow::bail!("--backend url needs --redis URL");
    }
    let backend = Backend::open(&plan, false).await?;
    let key = format!(
        "lockbench:{}:demo:lock",
        crate::output::run_id(std::time::SystemTime::now())
    );
    let result = match &backend {
        Backend::Spawned(_, c) | Backend::Url(c) => run_demo(c, &key, ttl).await,
        Backend::Memory(m) => run_demo(m, &key, ttl).await,
    };
    backend.close().await;
    result.map(|_| 0)
}

async fn run_demo<K: Connector>(c: &K, key: &str, ttl: std::time::Duration) -> anyhow::Result<()> {
    use crate::store::LockConn;
    let mut conn = c.connect().await?;
    let version = conn
        .server_version()
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    println!(
        "stale-release demo against {} ({version}); key {key}",
        c.describe()
    );
    let r = crate::demo::stale_release(&mut conn, key, ttl, std::io::stdout()).await;
    // Whatever happened, leave nothing behind.
    let _ = conn.del(key).await;
    r.map(|_| ()).context("demo failed")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run whose report could not be written ends with exit 1, also under `--quiet` (it used
    /// to be a warning that `-q` hid, exit 0); bad input maps to 2, other errors to 1.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn missing_report_fails_the_run_even_when_quiet() {
        let tmp = tempfile::tempdir().unwrap();
        let plan = Profile::parse("sections = 10\ndist = \"constant(1ms)\"\n", "t.toml")
            .and_then(|p| p.plan("t.toml", "", None))
            .unwrap();
        let m = crate::store::memory::MemoryStore::new(std::time::Duration::ZERO, true);
        let opts = RunOptions {
            out_dir: Some(tmp.path().to_path_buf()),
            quiet: true,
            progress: false,
            ..RunOptions::default()
        };
        let mut outcome = runner::run_with(&m, "memory", &plan, &[plan.release], &opts)
            .await
            .unwrap();
        assert!(outcome.report_error.is_none());
        outcome.report_error = Some(anyhow::anyhow!("cannot write report.html"));
        assert_eq!(finish(outcome, true).unwrap(), 1);

        let bad = anyhow::Error::from(crate::output::OutDirError::NotADirectory("x".into()));
        assert_eq!(
            crate::exit::code_of_error(&bad.context("preparing the run")),
            2
        );
        assert_eq!(
            crate::exit::code_of_error(&anyhow::anyhow!("connection refused")),
            1
        );
    }
}
