//! `run` and `compare`: one workload under one or several release methods (same seed, paired),
//! then the summary table, the report, and the exit code from the run's verdict. A `run` may
//! be one agent of a multi-agent run (`--agent I/N`, see [`crate::agent`]).

use crate::agent::AgentSpec;
use crate::agent::barrier::Agent;
use crate::backend::{Backend, ResourceStore, Store};
use crate::commands::args::{CiArgs, CompareArgs, RunArgs};
use crate::exit::BadInput;
use crate::model::variant::Variant;
use crate::profile::{BackendChoice, Plan, Profile, Stop};
use crate::runner::{RunOptions, RunOutcome, RunWith, Target, run_on};
use crate::store::Timeouts;
use crate::store::apart::Apart;
use crate::store::redis::RedisConnector;
use std::sync::Arc;
use std::time::Duration;

/// Timer error (p99, ms) past which a run warns that the harness fell behind: tokio's
/// millisecond timer alone is 1–2.5 ms late at p99 on an idle machine.
const LATE_SECTIONS_MS: f64 = 5.0;

/// `lockbench run`, alone or as one agent of a multi-agent run.
pub(crate) async fn run(a: RunArgs) -> anyhow::Result<i32> {
    a.ci.check(&outs(&a.workload), a.workload.profile.as_deref())?;
    // Refused or failed, the CI files still say why.
    let result = run_checked(&a).await;
    ci_after_error(result, &a.ci)
}

async fn run_checked(a: &RunArgs) -> anyhow::Result<i32> {
    let spec = AgentSpec::resolve(&a.agent_flags(), |k| std::env::var(k).ok())?;
    let extra = Profile {
        release: a.release.clone(),
        ..Profile::default()
    };
    let mut plan = a.workload.plan(extra)?;
    let mut opts = a.workload.options("run");
    if let Some(spec) = spec {
        opts.agent = Some(Arc::new(agent(spec, &mut plan, &mut opts).await?));
    }
    execute(&plan, &[plan.protection.release], &opts, &a.ci).await
}

/// Makes this process an agent of `spec`: refuses what a multi-agent run cannot do (exit 2),
/// takes its share of `--sections`, its default directory, and its barrier connection.
async fn agent(spec: AgentSpec, plan: &mut Plan, opts: &mut RunOptions) -> anyhow::Result<Agent> {
    let refuse = |m: &str| -> anyhow::Error { BadInput(format!("--agent: {m}")).into() };
    if plan.backend.redlock.is_some() {
        return Err(refuse(
            "a redlock run (lock = \"redlock\") is not shared among agents: the agents meet at a \
             barrier on one server, and a redlock has N; run it as one process",
        ));
    }
    let Some(url) = plan
        .backend
        .redis
        .clone()
        .filter(|_| plan.backend.kind == BackendChoice::Url)
    else {
        return Err(refuse(
            "the agents of a run need one server they all reach: give --redis URL (a spawned \
             private server, like the memory model, belongs to one process)",
        ));
    };
    if plan.workload.arrivals.is_some() {
        return Err(refuse(
            "the open arrival model (--arrivals) is not shared among agents yet: run a closed loop \
             of --workers",
        ));
    }
    if plan.protection.resource
        || plan.protection.release.fencing != crate::model::variant::Fencing::Off
    {
        return Err(refuse(
            "a protected resource (--resource, fencing) is not merged across agents yet: its \
             final value is read back once per run, not per agent",
        ));
    }
    let share = match plan.workload.stop {
        Stop::Sections { sections } => {
            let share = spec.sections_share(sections)?;
            plan.workload.stop = Stop::Sections { sections: share };
            Some(share)
        }
        Stop::Time { .. } => None,
    };
    if opts.out_dir.is_none() {
        opts.out_dir = Some(spec.default_dir(&opts.results_root));
    }
    // Its own connection, straight to the server: the clock readings must not go through a
    // fault proxy's added latency.
    let timeouts = Timeouts {
        connect: Duration::from_micros(plan.timeouts.connect_timeout_us),
        response: Duration::from_micros(plan.timeouts.command_timeout_us),
    };
    let connector = RedisConnector::new(&url, timeouts, plan.backend.allow_remote)?;
    Agent::connect(spec, &connector, plan.workload.workers, share).await
}

/// `lockbench compare`.
pub(crate) async fn compare(a: CompareArgs) -> anyhow::Result<i32> {
    a.ci.check(&outs(&a.workload), a.workload.profile.as_deref())?;
    let result = compare_checked(&a).await;
    ci_after_error(result, &a.ci)
}

async fn compare_checked(a: &CompareArgs) -> anyhow::Result<i32> {
    let extra = Profile {
        releases: a.release.clone(),
        ..Profile::default()
    };
    let mut plan = a.workload.plan(extra)?;
    // `--client NAME` adds the library to the variants, after the release methods. A library
    // named twice is refused, not dropped: the run would measure fewer variants than the
    // command line lists, and a warning scrolls past in a CI log while the run goes on; the
    // fix (name it once) costs nothing before anything ran.
    for name in &a.client {
        let lib = crate::model::client::Client::parse(name).ok_or_else(|| {
            BadInput(format!(
                "--client {name}: not a lock library lockbench drives; use one of {}",
                crate::model::client::Client::names()
            ))
        })?;
        let v = Variant {
            client: Some(lib),
            ..Variant::from(crate::model::release::ReleaseMethod::Token)
        };
        if plan
            .protection
            .releases
            .iter()
            .any(|r| r.client == Some(lib))
        {
            return Err(BadInput(format!(
                "--client {name}: {} is already a variant of this run (named twice, by --client \
                 or --release); each variant runs once: name it once",
                lib.name()
            ))
            .into());
        }
        plan.protection.releases.push(v);
    }
    let methods: Vec<Variant> = plan.protection.releases.clone();
    let opts = a.workload.options("compare");
    execute(&plan, &methods, &opts, &a.ci).await
}

/// The run's directory when `--out` names it (a CI file may not go there).
fn outs(w: &super::args::WorkloadArgs) -> Vec<&std::path::Path> {
    w.out.as_deref().into_iter().collect()
}

/// A run that ended in an error before it had an outcome still leaves a JUnit file (one error
/// case) and a Markdown line saying why, so the CI page shows the failure.
fn ci_after_error(result: anyhow::Result<i32>, ci: &CiArgs) -> anyhow::Result<i32> {
    let Err(e) = result else {
        return result;
    };
    let why = format!("{e:#}");
    let mut table = crate::analysis::verdict_table::VerdictTable::new("", &[], false, Some(&why));
    // The code the process exits with (bad input is 2, not the failed run's 1).
    table.verdict.code = super::code_of_error(&e);
    ci.write(&table, None);
    Err(e)
}

/// Opens the plan's backend (one private server per `--redis-server` binary), runs every
/// method on each, closes them, draws the report and prints the outcome; returns the exit
/// code.
async fn execute(
    plan: &Plan,
    methods: &[Variant],
    opts: &RunOptions,
    ci: &CiArgs,
) -> anyhow::Result<i32> {
    // Bound before anything runs: a taken port or a bad address is bad input (exit 2).
    let endpoint = match plan.metrics {
        Some(addr) => {
            let e = crate::metrics::Endpoint::start(addr, plan.backend.allow_remote)?;
            if !opts.quiet {
                eprintln!("metrics: {}", e.url());
            }
            Some(e)
        }
        None => None,
    };
    let opts = &RunOptions {
        metrics: endpoint.as_ref().map(|e| e.board.clone()),
        metrics_url: endpoint.as_ref().map(|e| e.url()),
        ..opts.clone()
    };
    let result = execute_on(plan, methods, opts, ci).await;
    // Up until every file is written, then closed (after a last scrape, when scraped).
    if let Some(e) = endpoint {
        // Not after an interrupt: the user asked to stop.
        let code = match &result {
            Ok(c) => *c,
            Err(err) => super::code_of_error(err),
        };
        e.close(code != crate::exit::INTERRUPTED, !opts.quiet).await;
    }
    result
}

/// [`execute`] once the metrics endpoint, if any, is up.
async fn execute_on(
    plan: &Plan,
    methods: &[Variant],
    opts: &RunOptions,
    ci: &CiArgs,
) -> anyhow::Result<i32> {
    let exes: Vec<Option<&std::path::Path>> = match plan.backend.redis_servers.len() {
        0 => vec![None],
        _ => plan
            .backend
            .redis_servers
            .iter()
            .map(|p| Some(p.as_path()))
            .collect(),
    };
    let backends = super::opening(async {
        let mut backends = Vec::new();
        for exe in exes {
            // An error drops the ones already open, which stops their servers.
            backends.push(Backend::open_server(plan, opts.quiet, exe).await?);
        }
        Ok(backends)
    })
    .await?;
    if opts.agent.is_some() && matches!(backends[0].store, Store::Cluster(_)) {
        return Err(BadInput(
            "--agent: the agents' start barrier and clock readings go to one server, and --redis \
             names a Redis Cluster node: run one process against a cluster (or --cluster no)"
                .into(),
        )
        .into());
    }
    let kind = backends[0].kind();
    let result = if let [backend] = &backends[..]
        && !matches!(backend.store, Store::Spawned(..))
    {
        let opts = &RunOptions {
            faults: backend.control.clone(),
            ..opts.clone()
        };
        backend
            .with_connector(RunWith {
                kind,
                plan,
                variants: methods,
                opts,
            })
            .await
    } else if backends.iter().all(|b| b.resource.is_some()) {
        // Each spawned server with the resource's own store beside it.
        let mut aparts = Vec::new();
        for b in &backends {
            if let (Store::Spawned(server, c), Some(ResourceStore::Redis(r, _))) =
                (&b.store, &b.resource)
            {
                let apart = Apart {
                    lock: c.clone(),
                    resource: (**r).clone(),
                };
                aparts.push((apart, b, server.lock().await.exe().to_path_buf()));
            }
        }
        let targets: Vec<_> = aparts
            .iter()
            .map(|(apart, b, exe)| Target {
                connector: apart,
                control: b.control.clone(),
                binary: Some(exe.clone()),
            })
            .collect();
        run_on(&targets, kind, plan, methods, opts).await
    } else {
        let mut targets = Vec::new();
        for b in &backends {
            if let Store::Spawned(server, c) = &b.store {
                targets.push(Target {
                    connector: c,
                    control: b.control.clone(),
                    binary: Some(server.lock().await.exe().to_path_buf()),
                });
            }
        }
        run_on(&targets, kind, plan, methods, opts).await
    };
    for b in backends {
        b.close().await;
    }
    let outcome = result?;
    // Charts and report.html, from the files just written (as `lockbench report` would).
    if !outcome.manifest.profile.events && !opts.quiet {
        eprintln!(
            "notice: no events.csv (events = \"none\"): the charts are drawn from the interval \
             logs, without the timeline; every figure is in summary.json, summary.csv and the \
             .hgrm/.hlog files"
        );
    }
    let report = crate::report::render_after_run(&outcome.dir).err();
    finish(outcome, report, opts.quiet, ci)
}

/// How the precise timer's section ends were woken (docs/src/measurements/section-precision.md), when it ran.
fn timer_paths(m: &crate::results::Manifest) -> String {
    let (thread, looped) = crate::engine::precise::ends_by_path();
    if m.profile.workload.timer != crate::profile::Timer::Precise || thread + looped == 0 {
        return String::new();
    }
    let priority = match crate::engine::precise::realtime() {
        Some(true) => "; the timer thread at real-time priority",
        Some(false) => "; real-time priority for the timer thread not permitted",
        None => "",
    };
    format!(
        " ({thread} section ends woken by the timer thread, {looped} by the yield loop{priority})"
    )
}

fn finish(
    outcome: RunOutcome,
    report_error: Option<anyhow::Error>,
    quiet: bool,
    ci: &CiArgs,
) -> anyhow::Result<i32> {
    let table = crate::analysis::verdict_table::VerdictTable::new(
        &outcome.manifest.run_id,
        &outcome.summaries,
        outcome.manifest.interrupted,
        outcome.manifest.failure.as_deref(),
    );
    if !quiet {
        print_run(&outcome, &table)?;
    }
    warn_of_lateness(&outcome);
    let failure = outcome.manifest.failure.as_deref();
    let verdict = crate::analysis::verdict::verdict(
        &outcome.summaries,
        outcome.manifest.interrupted,
        failure,
    );
    // The cause of a failed run is shown even under --quiet; other errors only without it.
    if verdict.code != crate::exit::OK || !quiet {
        print_errors(&outcome.summaries);
    }
    if !quiet {
        print_thresholds(&outcome.summaries);
    }
    if verdict.code == crate::exit::FAILED || verdict.code == crate::exit::THRESHOLD {
        for r in &verdict.reasons {
            eprintln!("error: {r}");
        }
        // A crossed threshold ends a complete run; a failure may have cut it short.
        let what = if verdict.code == crate::exit::THRESHOLD {
            "results"
        } else {
            "results so far"
        };
        eprintln!("{what}: {}", outcome.dir.display());
    }
    // The CI files, after the run's own: also when a threshold was crossed or the run failed.
    let mut unwritten = !ci.write(&table, Some(&outcome.manifest.started_at));
    // Shown even with --quiet: a missing report is a failed output, not a notice.
    if let Some(e) = &report_error {
        eprintln!("error: the run's data files are written, but the report is not: {e:#}");
        unwritten = true;
    }
    if unwritten && (verdict.code == crate::exit::OK || verdict.code == crate::exit::THRESHOLD) {
        return Ok(crate::exit::FAILED);
    }
    Ok(verdict.code)
}

/// The run as the terminal shows it: the verdict, the table, how it ran and where.
fn print_run(
    outcome: &RunOutcome,
    table: &crate::analysis::verdict_table::VerdictTable,
) -> anyhow::Result<()> {
    use std::io::IsTerminal as _;
    let stdout = std::io::stdout();
    // Colour only on a terminal (and not under NO_COLOR): piped output stays plain.
    let colour = stdout.is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let mut w = stdout.lock();
    crate::report::terminal::print_verdict(&mut w, table, colour)?;
    crate::report::terminal::print_table(&mut w, &outcome.summaries)?;
    let m = &outcome.manifest;
    println!(
        "\nconnection: {}, runtime threads: {} ({}), timer: {}{}, seed {}",
        m.connection_mode,
        m.runtime_threads,
        m.runtime_threads_why,
        crate::profile::spelling(&m.profile.workload.timer),
        timer_paths(m),
        m.seed
    );
    print_servers(m);
    for c in &m.skipped {
        println!("not run: {}: {}", c.variant, c.reason);
    }
    print_simulated(&outcome.summaries);
    print_time_scale(outcome);
    let shared = outcome.manifest.resource_store.as_deref();
    if shared.is_some_and(|r| r.starts_with("shared"))
        && outcome
            .summaries
            .iter()
            .any(|s| s.protect.resource && s.faults.iter().any(|f| f.kind == "server-restart"))
    {
        println!(
            "note: the resource lives on the restarted server, so the restart erased it too: \
             lost updates include the writes it erased"
        );
    }
    println!("results: {}", outcome.dir.display());
    Ok(())
}

/// One line per server: its version, where, and the binary that ran.
fn print_servers(m: &crate::results::Manifest) {
    for s in &m.servers {
        // `redis 7.0.15 at 127.0.0.1:6379`, `redis 7.0.15, redlock over 3 instances …`.
        let detail = &s.backend_detail;
        let at = match detail.strip_prefix("redis at ") {
            Some(addr) => format!(" at {addr}"),
            None => format!(", {detail}"),
        };
        println!(
            "server: {}{at}{}",
            s.version,
            s.binary
                .as_ref()
                .map(|b| format!(", binary {b}"))
                .unwrap_or_default()
        );
    }
}

/// One line per simulated variant: how much virtual time it covered, how fast.
fn print_simulated(summaries: &[crate::analysis::summary::Summary]) {
    for v in summaries {
        if let Some(sim) = &v.simulated {
            let parts = if sim.parts > 1 {
                format!(
                    ", in {} parts at once, each from an empty server",
                    sim.parts
                )
            } else {
                String::new()
            };
            println!(
                "simulated: {} {} of virtual time in {:.2} s of wall time ({:.0}× real time, {:.1}M events/s{parts})",
                v.meta.variant,
                crate::model::units::fmt_us(
                    (v.meta.elapsed_s * 1e6) as u64,
                    crate::model::units::Style::Compact
                ),
                sim.wall_s,
                sim.simulated_s_per_wall_s,
                sim.events_per_wall_s / 1e6
            );
        }
    }
}

/// With a time scale, what the scaled durations stand for.
fn print_time_scale(outcome: &RunOutcome) {
    let scale = outcome.manifest.profile.workload.time_scale;
    if scale != 1.0 {
        let s = &outcome.summaries;
        let elapsed = s.iter().map(|v| v.meta.elapsed_s).sum::<f64>();
        println!(
            "time scale {scale}: every duration above is the real one × {scale}; TTL {} ms stands for {}; {:.1} s of run stand for {}",
            outcome.manifest.profile.workload.ttl_ms,
            crate::model::units::fmt_us(
                crate::model::units::ms_to_us(outcome.manifest.profile.workload.unscaled_ttl_ms),
                crate::model::units::Style::Compact
            ),
            elapsed,
            crate::model::units::fmt_us(
                (elapsed / scale * 1e6) as u64,
                crate::model::units::Style::Compact
            )
        );
    }
}

/// Warnings shown even with --quiet: arrivals that waited or were dropped, sections the
/// harness ended late.
fn warn_of_lateness(outcome: &RunOutcome) {
    // Arrivals the open model could not start on time: the offered load was not what it said.
    for s in &outcome.summaries {
        let (late, dropped) = (s.counts.late_arrivals, s.counts.dropped_arrivals);
        if s.counts.requests > 0 && (late > 0 || dropped > 0) {
            eprintln!(
                "warning: variant `{}`: {late} of {} arrivals found every request slot busy and waited, {dropped} were dropped (backlog full); raise max_in_flight or lower the rate",
                s.meta.variant, s.counts.requests
            );
        }
    }
    // Sections that ended far later than drawn: the harness fell behind (its own CPU, or
    // another process's), so the durations measured are not the distribution asked for.
    for s in &outcome.summaries {
        let late = &s.timer_error_ms;
        if s.simulated.is_none() && late.count > 0 && late.p99 > LATE_SECTIONS_MS {
            eprintln!(
                "warning: variant `{}`: sections ended {:.1} ms later than drawn at p99 (timer \
                 error; tokio's timer alone is ~2 ms): the harness fell behind — too many \
                 workers for {} runtime thread(s), or another process took the CPU — so measured \
                 durations and overlap include that lateness; use fewer workers, --threads, or a \
                 bigger machine",
                s.meta.variant, late.p99, outcome.manifest.runtime_threads
            );
        }
    }
}

/// Each variant's errors, first of each kind.
fn print_errors(summaries: &[crate::analysis::summary::Summary]) {
    for s in summaries {
        let lines = crate::analysis::verdict::error_lines(s);
        if !lines.is_empty() {
            eprintln!(
                "errors of variant `{}`, first of each kind:",
                s.meta.variant
            );
            for l in lines {
                eprintln!("  {}", crate::model::error::printable(&l));
            }
        }
    }
}

/// One line per variant with thresholds: each, its value, crossed or not.
fn print_thresholds(summaries: &[crate::analysis::summary::Summary]) {
    for s in summaries.iter().filter(|s| !s.thresholds.is_empty()) {
        let line: Vec<String> = s
            .thresholds
            .iter()
            .map(|t| {
                let mark = if t.crossed { "CROSSED" } else { "ok" };
                format!(
                    "{} ({}): {mark}",
                    t.expr,
                    crate::analysis::figures::num(t.value)
                )
            })
            .collect();
        println!("thresholds, {}: {}", s.meta.variant, line.join("; "));
    }
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
        let outcome =
            crate::runner::run_with(&m, "memory", &plan, &[plan.protection.release], &opts)
                .await
                .unwrap();
        assert!(crate::report::render_after_run(&outcome.dir).is_ok());
        let report = Some(anyhow::anyhow!("cannot write report.html"));
        assert_eq!(
            finish(outcome, report, true, &CiArgs::default()).unwrap(),
            1
        );

        let bad = anyhow::Error::from(crate::results::OutDirError::NotADirectory("x".into()));
        assert_eq!(
            crate::commands::code_of_error(&bad.context("preparing the run")),
            2
        );
        assert_eq!(
            crate::commands::code_of_error(&anyhow::anyhow!("connection refused")),
            1
        );
    }
}
