//! `lockbench observe [flags] [-- CMD ARGS…]`: a Redis proxy in front of the run's server
//! that measures the locks of whatever program talks through it ([`crate::observe`]), and
//! writes a run directory of the same files as `run`'s: `summary.json`/`.csv`, `events.csv`
//! (one row per hold), the `.hgrm` histograms, the verdict table, `--fail-if`.

use crate::analysis::summary::{Meta, Protection, StopReason, WatchFigures, summarize};
use crate::analysis::threshold::Threshold;
use crate::analysis::verdict_table::VerdictTable;
use crate::commands::args::CiArgs;
use crate::model::units::DurationText;
use crate::observe::copies::{CopyRecord, Program, run_copy};
use crate::observe::door::{Door, Shared, Upstream};
use crate::observe::ledger::{ClientTally, Ledger};
use crate::observe::stream::LockKeys;
use crate::record::Metric;
use crate::results::{self, SummaryFile};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

/// `observe`: measure the locks of your own program through a proxy.
#[derive(Debug, Clone, clap::Args)]
pub struct ObserveArgs {
    /// Where the shared door listens (services you point at it by hand); printed at the start.
    /// A non-loopback address only with --allow-remote.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// The Redis server to stand in front of (redis://…, or rediss://… reached over TLS while the
    /// program connects in plain TCP) [default: a private redis-server
    /// lockbench starts on a free loopback port].
    #[arg(long)]
    pub redis: Option<String>,
    /// Allow a non-loopback --listen address and --redis host.
    #[arg(long)]
    pub allow_remote: bool,
    /// How long to watch [default: until every copy has exited, or Ctrl-C].
    #[arg(long)]
    pub duration: Option<DurationText>,
    /// Copies of CMD to start, each with its own door in REDIS_URL, REDIS_HOST, REDIS_PORT
    /// (and LOCKBENCH_COPY, its number).
    #[arg(long, default_value_t = 1)]
    pub copies: usize,
    /// Start a copy again when it exits (the run then ends at --duration or Ctrl-C).
    #[arg(long)]
    pub restart: bool,
    /// Only keys matching this glob are locks (Redis glob syntax; repeatable) [default: every
    /// key a lock command names].
    #[arg(long = "lock-keys", value_name = "GLOB")]
    pub lock_keys: Vec<String>,
    /// A fault on a copy while it holds a lock (repeatable; needs CMD): holder-pause@AT+LENGTH
    /// (SIGSTOP, SIGCONT after LENGTH), holder-crash@AT (SIGKILL; --restart starts it again);
    /// AT is from the start, and the fault waits for a copy to hold a lock. Or on the private
    /// server (not with --redis): server-pause@AT+LENGTH, server-restart@AT+LENGTH.
    #[arg(long = "fault", value_name = "FAULT")]
    pub fault: Vec<crate::observe::faults::ObserveFault>,
    /// Fail the run with exit code 99 when this condition on a summary figure holds, e.g.
    /// 'wrongful_deletes > 0', 'overlap_ms > 0' (repeatable).
    #[arg(long = "fail-if")]
    pub fail_if: Vec<Threshold>,
    /// Output directory [default: results/<run-id>]; it must be empty or absent.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// No table (the files are still written).
    #[arg(long, short)]
    pub quiet: bool,
    /// The CI files.
    #[command(flatten)]
    pub ci: CiArgs,
    /// The program to start, and its arguments (after `--`).
    #[arg(last = true, value_name = "CMD")]
    pub cmd: Vec<String>,
}

/// Bad flags: exit 2, before anything starts.
fn bad(msg: String) -> anyhow::Error {
    crate::exit::BadInput(msg).into()
}

/// Runs `lockbench observe`; returns the exit code.
pub(crate) async fn run(args: ObserveArgs) -> anyhow::Result<i32> {
    if args.copies == 0 {
        return Err(bad("--copies must be 1 or more".into()));
    }
    use crate::observe::faults::ObserveFault;
    let holder_faults: Vec<_> = (args.fault.iter())
        .filter_map(|f| match f {
            ObserveFault::Holder(h) => Some(h.clone()),
            ObserveFault::Server(_) => None,
        })
        .collect();
    let server_faults: Vec<_> = (args.fault.iter())
        .filter_map(|f| match f {
            ObserveFault::Server(s) => Some(*s),
            ObserveFault::Holder(_) => None,
        })
        .collect();
    if !server_faults.is_empty() && args.redis.is_some() {
        return Err(bad(
            "--fault server-pause/server-restart acts on the private server observe starts: drop --redis, or the fault".into(),
        ));
    }
    if args.cmd.is_empty() && (args.restart || args.copies != 1 || !holder_faults.is_empty()) {
        return Err(bad(
            "--copies, --restart and --fault act on a program lockbench starts: give it after `--`, e.g. `lockbench observe --copies 3 -- python3 app.py`".into(),
        ));
    }
    crate::target::check_loopback(&args.listen.ip().to_string(), args.allow_remote)
        .map_err(|e| e.context("--listen"))?;
    let run_id = results::run_id(SystemTime::now());
    let dir = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("results").join(&run_id));
    args.ci.check(&[&dir], None)?;
    results::prepare_dir(&dir, false)?;
    let mut signals = crate::signals::subscribe();

    // The server: given, or a private one.
    // `client_url`: the server's URL as the program's side sees it, plain TCP (a `rediss://`
    // server is reached over TLS by the proxy alone).
    let (upstream, server_url, client_url, spawned, backend) = match &args.redis {
        Some(url) => {
            let parsed =
                url::Url::parse(url).map_err(|e| bad(format!("--redis {url}: not a URL ({e})")))?;
            let host = parsed.host_str().unwrap_or_default().to_string();
            crate::target::check_loopback(host.trim_matches(['[', ']']), args.allow_remote)
                .map_err(|e| e.context("--redis"))?;
            let tls = matches!(parsed.scheme(), "rediss" | "valkeys");
            let mut plain = parsed.clone();
            if tls {
                // Both schemes are "non-special" to the url crate: the change cannot fail.
                let _ = plain.set_scheme("redis");
                plain.set_fragment(None);
            }
            let client_url = String::from(plain);
            let shown = crate::target::redact_url(url);
            let addrs = crate::faults::watch::upstream_of(&client_url)
                .await
                .ok_or_else(|| {
                    bad(format!(
                        "--redis {shown}: observe forwards redis:// and rediss:// host:port servers (not a socket), and this one does not resolve to one"
                    ))
                })?;
            let up = if tls {
                let insecure = parsed.fragment() == Some("insecure");
                let name = host.trim_matches(['[', ']']);
                Upstream::tls(addrs, name, insecure)
                    .map_err(|e| anyhow::anyhow!("--redis {shown}: cannot set up TLS: {e}"))?
            } else {
                Upstream::plain(addrs)
            };
            // A certificate that does not verify ends the run before it starts, as a client of
            // lockbench's own that cannot connect does (exit 1).
            up.check().await.map_err(|e| {
                anyhow::anyhow!(
                    "--redis {shown}: {e} (the server's certificate must be signed by a CA this machine trusts, or the one SSL_CERT_FILE names, and carry the host name {host}; rediss://…/#insecure skips the checks)"
                )
            })?;
            (up, url.clone(), client_url, None, "url")
        }
        None => {
            let r = super::opening(crate::store::spawn::SpawnedRedis::start()).await?;
            let up: Arc<[SocketAddr]> = Arc::from(vec![SocketAddr::from((
                std::net::Ipv4Addr::LOCALHOST,
                r.port(),
            ))]);
            let url = r.url();
            let up = Upstream::plain(up);
            (
                up,
                url.clone(),
                url,
                Some(Arc::new(tokio::sync::Mutex::new(r))),
                "spawn",
            )
        }
    };

    let start = Instant::now();
    let started_at = SystemTime::now();
    let events = std::fs::File::create(dir.join("events.csv"))?;
    let ledger = Arc::new(Ledger::new(start, Some(events)));
    let copies = if args.cmd.is_empty() { 0 } else { args.copies };
    let shared = Arc::new(Shared::new(
        upstream,
        LockKeys::new(&args.lock_keys),
        ledger.clone(),
        copies,
    ));
    let door = Door::start(args.listen, None, shared.clone())
        .await
        .map_err(|e| bad(format!("--listen {}: {e}", args.listen)))?;
    let mut copy_doors = Vec::new();
    for c in 0..copies {
        ledger.name_client(c, format!("copy {}", c + 1));
        let any = SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, 0));
        copy_doors.push(Door::start(any, Some(c), shared.clone()).await?);
    }
    let shown_server = crate::target::redact_url(&server_url);
    let door_url = crate::faults::watch::url_at(&client_url, door.addr())
        .unwrap_or_else(|| format!("redis://{}", door.addr()));
    if !args.quiet {
        println!(
            "observing the locks of what connects to {} (REDIS_URL={}), in front of {shown_server}",
            door.addr(),
            crate::target::redact_url(&door_url)
        );
        if copies > 0 {
            println!("starting {copies} copies of `{}`", args.cmd.join(" "));
        }
    }

    // The copies.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let program = Arc::new(Program {
        argv: args.cmd.clone(),
        dir: dir.clone(),
        restart: args.restart,
    });
    let pids: crate::observe::faults::Pids = Arc::new(
        (0..copies)
            .map(|_| crate::observe::faults::Slot::default())
            .collect(),
    );
    let mut faults = tokio::task::JoinSet::new();
    for f in &holder_faults {
        faults.spawn(crate::observe::faults::apply(
            f.clone(),
            ledger.clone(),
            pids.clone(),
            copies,
            start,
        ));
    }
    let server_faults = tokio::spawn(crate::faults::drive(
        server_faults,
        crate::faults::FaultControl {
            server: spawned.clone(),
            ..Default::default()
        },
        tokio::time::Instant::from_std(start),
        (args.duration.as_ref()).map(|d| {
            tokio::time::Instant::from_std(start + std::time::Duration::from_micros(d.us()))
        }),
        stop_rx.clone(),
    ));
    let mut tasks = tokio::task::JoinSet::new();
    for (c, d) in copy_doors.iter().enumerate() {
        let url = crate::faults::watch::url_at(&client_url, d.addr())
            .unwrap_or_else(|| format!("redis://{}", d.addr()));
        tasks.spawn(run_copy(
            program.clone(),
            c,
            url,
            (ledger.clone(), pids.clone()),
            start,
            stop_rx.clone(),
        ));
    }

    // The end: --duration, every copy exited, or a signal.
    let limit = args
        .duration
        .as_ref()
        .map(|d| std::time::Duration::from_micros(d.us()));
    let sleep = async {
        match limit {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    let mut records: Vec<CopyRecord> = Vec::new();
    let all_exited = async {
        if copies == 0 {
            return std::future::pending().await;
        }
        while let Some(r) = tasks.join_next().await {
            if let Ok(r) = r {
                records.push(r);
            }
        }
    };
    let stop_reason = tokio::select! {
        () = sleep => StopReason::Limit,
        () = all_exited => StopReason::Limit,
        _ = signals.wait_for(|n| *n > 0) => StopReason::Interrupted,
    };
    let end = Instant::now();
    let _ = stop_tx.send(true);
    while let Some(r) = tasks.join_next().await {
        if let Ok(r) = r {
            records.push(r);
        }
    }
    records.sort_by_key(|r| r.copy);
    // Faults that never found a holder are cut off and said so.
    faults.abort_all();
    let mut struck = Vec::new();
    while let Some(r) = faults.join_next().await {
        if let Ok(s) = r {
            struck.push(s);
        }
    }
    let unstruck = holder_faults.len() - struck.len();
    // The server's faults, undone by now (the stop above ended them).
    let windows = server_faults.await.unwrap_or_default();
    let listen = door.addr();
    drop(copy_doors);
    drop(door);
    let tally = ledger.finish(end);
    ledger.flush()?;
    let commands = shared.commands();
    let outages = shared.outages(end);
    if let Some(r) = spawned.and_then(|r| Arc::try_unwrap(r).ok()) {
        r.into_inner().stop().await;
    }

    // The figures.
    let elapsed_s = end.saturating_duration_since(start).as_secs_f64();
    let mut clients = tally.clients.clone();
    for (c, n) in &commands {
        if let Some(t) = clients.get_mut(*c) {
            t.commands = *n;
        }
    }
    let meta = Meta {
        variant: "observed".into(),
        release: "observed".into(),
        connection_mode: "the program's own".into(),
        backend: backend.into(),
        server_version: String::new(),
        workers: clients.iter().filter(|c| c.connections > 0).count(),
        keys: 0,
        ttl_ms: tally.ttl_max_us / 1000,
        time_scale: 1.0,
        unscaled_ttl_ms: tally.ttl_max_us as f64 / 1000.0,
        seed: 0,
        elapsed_s,
    };
    let measured = crate::analysis::summary::Measured {
        counts: tally.counts,
        errors: Vec::new(),
        per_key: tally.per_key.clone(),
        outages,
    };
    let mut summary = summarize(
        meta,
        stop_reason,
        Protection::default(),
        &measured,
        &tally.hists,
    );
    summary.crash_blocked_censored = tally.crash_blocked_censored;
    summary.stuck_locks = tally.stuck_locks;
    summary.faults = windows.clone();
    summary.library = Some(format!("observed: {}", program_name(&args.cmd)));
    summary.wrongful_deletes_source =
        Some("the proxy: the value each release removed at the server".into());
    summary.watch = Some(WatchFigures {
        getdels: 0,
        removals_outside_releases: tally.stray_releases,
        attributed: tally.attributed.clone(),
    });
    summary.thresholds = args.fail_if.iter().map(|t| t.check(&summary)).collect();
    let summaries = vec![summary];

    // What went wrong with the copies: named, never counted as safe.
    let mut problems = Vec::new();
    for r in &records {
        let seen = commands.get(&(r.copy - 1)).copied().unwrap_or(0);
        if let Some(e) = &r.failed_to_start {
            problems.push(format!("copy {}: did not start: {e}", r.copy));
        } else if seen == 0 {
            problems.push(format!(
                "copy {}: 0 commands seen (it never connected to its REDIS_URL{})",
                r.copy,
                match r.exits.first() {
                    Some((s, at)) => format!("; it exited with {s} after {at:.2} s"),
                    None => String::new(),
                }
            ));
        }
    }
    for w in windows.iter().filter(|w| !w.error.is_empty()) {
        problems.push(format!("--fault {}: {}", w.kind, w.error));
    }
    let broken = shared.broken.lock().map(|b| b.clone()).unwrap_or_default();

    if unstruck > 0 {
        problems.push(format!(
            "{unstruck} of {} --fault never struck: no copy held a lock after its time",
            holder_faults.len()
        ));
    }
    for s in &struck {
        if let Some(p) = &s.problem {
            problems.push(format!("--fault on copy {}: {p}", s.copy.unwrap_or(0)));
        }
    }

    // The files.
    let summary_file = SummaryFile {
        run_id: run_id.clone(),
        variants: summaries.clone(),
        agent: None,
        merged: None,
    };
    results::write_json(&dir.join("summary.json"), &summary_file)?;
    results::write_summary_csv_file(&dir, &summaries)?;
    crate::results::hgrm::write_hgrms(&dir, &tally.hists, None)?;
    write_hlog(&dir, &tally.hists, started_at, elapsed_s, &run_id)?;
    write_clients(&dir, &clients)?;
    let record = serde_json::json!({
        "run_id": run_id,
        "command": std::env::args().collect::<Vec<_>>(),
        "listen": listen.to_string(),
        "server": shown_server,
        "lock_keys": args.lock_keys,
        "program": args.cmd,
        "copies": records,
        "problems": problems,
        "connections_closed_for_bad_frames": broken.0,
        "bad_frames": broken.1,
        "stray_releases": tally.stray_releases,
        "fleeting_acquisitions": tally.fleeting,
        "wrongful_deletes_without_a_hold": tally.stray_wrongful,
        "keys": tally.keys.iter().take(1000).collect::<Vec<_>>(),
        "interrupted": stop_reason == StopReason::Interrupted,
        "faults": struck,
        "faults_not_applied": unstruck,
    });
    results::write_json(&dir.join("observe.json"), &record)?;

    // The terminal.
    let failure = (!problems.is_empty()).then(|| problems.join("; "));
    let interrupted = stop_reason == StopReason::Interrupted;
    let table = VerdictTable::new(&run_id, &summaries, interrupted, failure.as_deref());
    if !args.quiet {
        let stdout = std::io::stdout();
        let mut w = stdout.lock();
        crate::report::terminal::print_verdict(&mut w, &table, false)?;
        crate::report::terminal::print_table(&mut w, &summaries)?;
        print_clients(&clients);
    }
    for p in &problems {
        eprintln!("{p}");
    }
    let unwritten = !args.ci.write(&table, None);
    if !args.quiet {
        println!("results: {}", dir.display());
    }
    let code = table.verdict.code;
    if unwritten && code == crate::exit::OK {
        return Ok(crate::exit::FAILED);
    }
    Ok(code)
}

/// The program's name for the summary (its first word).
fn program_name(cmd: &[String]) -> String {
    match cmd.first() {
        Some(_) => cmd.join(" ").chars().take(120).collect(),
        None => "whatever connected".into(),
    }
}

/// `hold-durations.hlog`: the holds' durations as one interval of the run.
fn write_hlog(
    dir: &std::path::Path,
    hists: &crate::record::HistSet,
    base: SystemTime,
    elapsed_s: f64,
    run_id: &str,
) -> anyhow::Result<()> {
    use hdrhistogram::serialization::V2DeflateSerializer;
    use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
    let m = Metric::Duration;
    results::write_file(&dir.join(format!("{}.hlog", m.file_stem())), |w| {
        let mut ser = V2DeflateSerializer::new();
        let mut b = IntervalLogWriterBuilder::new();
        b.add_comment(&format!(
            "lockbench {} {} of observed run {run_id} (values in microseconds)",
            env!("CARGO_PKG_VERSION"),
            m.file_stem()
        ));
        b.with_start_time(base).with_base_time(base);
        let mut log = b.begin_log_with(w, &mut ser)?;
        log.write_histogram(
            hists.get(m),
            std::time::Duration::ZERO,
            std::time::Duration::from_secs_f64(elapsed_s),
            Tag::new("observed"),
        )
        .map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(())
    })
}

/// `clients.csv`: what each client did.
fn write_clients(dir: &std::path::Path, clients: &[ClientTally]) -> anyhow::Result<()> {
    results::write_file(&dir.join("clients.csv"), |w| {
        let mut c = csv::Writer::from_writer(w);
        for t in clients.iter().filter(|t| !t.name.is_empty()) {
            c.serialize(t)?;
        }
        c.flush()?;
        Ok(())
    })
}

/// The clients' table on the terminal.
fn print_clients(clients: &[ClientTally]) {
    let shown: Vec<&ClientTally> = clients.iter().filter(|t| !t.name.is_empty()).collect();
    if shown.is_empty() {
        return;
    }
    println!(
        "\n{:<16} {:>8} {:>10} {:>7} {:>9} {:>9} {:>9} {:>8} {:>8}",
        "client",
        "conns",
        "commands",
        "holds",
        "released",
        "wrongful",
        "victim of",
        "refused",
        "crashed"
    );
    for t in shown.iter().take(50) {
        println!(
            "{:<16} {:>8} {:>10} {:>7} {:>9} {:>9} {:>9} {:>8} {:>8}",
            t.name,
            t.connections,
            t.commands,
            t.holds,
            t.released,
            t.wrongful_deletes,
            t.victim_of,
            t.refused,
            t.crashed_holding
        );
    }
    if shown.len() > 50 {
        println!("… {} more in clients.csv", shown.len() - 50);
    }
}
