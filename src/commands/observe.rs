//! `lockbench observe [flags] [-- CMD ARGS…]`: a Redis proxy in front of the run's server
//! that measures the locks of whatever program talks through it ([`crate::observe`]), and
//! writes a run directory of the same files as `run`'s: `summary.json`/`.csv`, `events.csv`
//! (one row per hold), the `.hgrm` histograms, the verdict table, `--fail-if`.

use crate::analysis::summary::{Meta, Protection, StopReason, Summary, WatchFigures, summarize};
use crate::analysis::threshold::Threshold;
use crate::analysis::verdict_table::VerdictTable;
use crate::commands::args::CiArgs;
use crate::model::fault::Fault;
use crate::model::units::DurationText;
use crate::observe::copies::{CopyRecord, Program, run_copy};
use crate::observe::door::{Door, Shared, Upstream};
use crate::observe::faults::HolderFault;
use crate::observe::ledger::{ClientTally, Ledger, Tallied};
use crate::observe::live::LiveMetrics;
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
    /// Allow a non-loopback --listen and --metrics address and --redis host.
    #[arg(long)]
    pub allow_remote: bool,
    /// Serve live metrics for Prometheus at this address while the run goes (`/metrics`, the
    /// names of `run --metrics`): a port (9464), HOST:PORT, or port 0 for a free one. A
    /// non-loopback address only with --allow-remote.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,
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
    /// server (not with --redis): server-pause@AT+LENGTH, server-restart@AT+LENGTH. Or on
    /// the network, through the proxy: latency@AT+LENGTH,delay=D[,jitter=J] (replies reach
    /// the program D late), partition@AT+LENGTH (nothing gets through; held, not lost).
    #[arg(long = "fault", value_name = "FAULT")]
    pub fault: Vec<crate::observe::faults::ObserveFault>,
    /// Fail the run with exit code 99 when this condition on a summary figure holds, e.g.
    /// 'wrongful_deletes > 0', 'overlap_ms > 0' (repeatable).
    #[arg(long = "fail-if")]
    pub fail_if: Vec<Threshold>,
    /// How the program's connections reach the server: `shared`, one pipelined server
    /// connection for every client connection whose requests mean the same on any connection
    /// (a connection that sends MULTI, WATCH, AUTH, HELLO, SELECT of another database, a
    /// blocking or subscribing command… gets its own from then on; not with a rediss:// server
    /// or a latency or partition fault); `per-client`, one each from the start.
    #[arg(long, value_enum, default_value_t = ServerConnections::Shared)]
    pub server_connections: ServerConnections,
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

/// `--server-connections`: how the program's connections reach the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ServerConnections {
    /// One shared server connection while a connection's requests allow it.
    Shared,
    /// A server connection per client connection.
    PerClient,
}

/// Bad flags: exit 2, before anything starts.
fn bad(msg: String) -> anyhow::Error {
    crate::exit::BadInput(msg).into()
}

/// Runs `lockbench observe`; returns the exit code.
pub(crate) async fn run(args: ObserveArgs) -> anyhow::Result<i32> {
    let (holder_faults, server_faults, metrics_at) = check(&args)?;
    let run_id = results::run_id(SystemTime::now());
    let dir = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("results").join(&run_id));
    args.ci.check(&[&dir], None)?;
    results::prepare_dir(&dir, false)?;
    let mut signals = crate::signals::subscribe();
    // Bound before anything starts: a taken port is bad input (exit 2).
    let mut live = match metrics_at {
        Some(at) => Some(LiveMetrics::bind(
            at,
            args.allow_remote,
            &run_id,
            &server_faults,
        )?),
        None => None,
    };

    // The server: given, or a private one.
    let Server {
        upstream,
        url: server_url,
        client_url,
        spawned,
        backend,
    } = server(&args).await?;

    let start = Instant::now();
    let started_at = SystemTime::now();
    let events = std::fs::File::create(dir.join("events.csv"))?;
    let ledger = Arc::new(Ledger::new(start, Some(events)));
    let copies = if args.cmd.is_empty() { 0 } else { args.copies };
    let (shared, door, copy_doors) =
        open_doors(&args, upstream, &ledger, copies, &server_faults).await?;
    let network = shared.network.clone();
    if let Some(m) = &mut live {
        m.follow(shared.clone(), start);
        if !args.quiet {
            eprintln!("metrics: {}", m.url());
        }
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
            network: network.map(|n| n as Arc<dyn crate::faults::Network>),
            ..Default::default()
        },
        tokio::time::Instant::from_std(start),
        (args.duration.as_ref()).map(|d| {
            tokio::time::Instant::from_std(start + std::time::Duration::from_micros(d.us()))
        }),
        stop_rx.clone(),
    ));
    let mut tasks = start_copies(
        &program,
        &copy_doors,
        &client_url,
        (&ledger, &pids),
        start,
        &stop_rx,
    );

    // The end: --duration, every copy exited, or a signal.
    let (stop_reason, end, mut records) =
        wait_for_end(&args, copies, &mut tasks, &mut signals, &stop_tx).await;
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
    let commands = ledger.connections.commands();
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
    let summary = summary_of(
        &args,
        backend,
        &tally,
        &clients,
        outages,
        &windows,
        stop_reason,
        elapsed_s,
    );
    if let Some(m) = &mut live {
        m.publish(&summary, &tally.hists);
    }
    let summaries = vec![summary];

    // What went wrong with the copies: named, never counted as safe.
    let problems = problems_of(&records, &commands, &windows, holder_faults.len(), &struck);
    let broken = shared.broken.lock().map(|b| b.clone()).unwrap_or_default();

    // The files.
    let failure = (!problems.is_empty()).then(|| problems.join("; "));
    let times = (started_at, elapsed_s);
    write_figures(&dir, &run_id, &summaries, &tally.hists, times, &clients)?;
    let record = serde_json::json!({
        "run_id": run_id,
        "command": std::env::args().collect::<Vec<_>>(),
        "listen": listen.to_string(),
        "server": shown_server,
        "lock_keys": args.lock_keys,
        "program": args.cmd,
        "copies": records,
        "problems": problems,
        "failure": failure,
        "server_connections": server_connections(&shared),
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
    // Charts and report.html, from the files just written (as after a `run`).
    let report = crate::report::render_after_run(&dir).err();

    // The terminal.
    let interrupted = stop_reason == StopReason::Interrupted;
    let table = VerdictTable::new(&run_id, &summaries, interrupted, failure.as_deref());
    let code = tell(&args, &table, &summaries, &clients, &problems, report, &dir)?;
    // Up until every file is written, then closed (after a last scrape, when scraped; not
    // after an interrupt: the user asked to stop).
    if let Some(m) = live {
        m.close(!interrupted, !args.quiet).await;
    }
    Ok(code)
}

/// How the program's connections reached the server, for `observe.json`: the mode, and with
/// the shared line, how many lines were opened and how many client connections left it for
/// one of their own.
fn server_connections(shared: &Shared) -> serde_json::Value {
    use std::sync::atomic::Ordering::Relaxed;
    match &shared.mux {
        Some(m) => serde_json::json!({
            "mode": "shared",
            "lines_opened": m.lines.load(Relaxed),
            "clients_given_their_own": m.own_connections.load(Relaxed),
            "waits_after_shared_writes": m.waits_after_line.load(Relaxed),
        }),
        None => serde_json::json!({ "mode": "per-client" }),
    }
}

/// The doors: the shared one at `--listen` and one per copy, sharing the server, the
/// ledger, the lock keys and the schedule's network faults (when it has one).
async fn open_doors(
    args: &ObserveArgs,
    upstream: Upstream,
    ledger: &Arc<Ledger>,
    copies: usize,
    schedule: &[Fault],
) -> anyhow::Result<(Arc<Shared>, Door, Vec<Door>)> {
    let mut shared = Shared::new(
        upstream,
        LockKeys::new(&args.lock_keys),
        ledger.clone(),
        copies,
    );
    shared.network = (schedule.iter().any(|f| f.kind.needs_proxy()))
        .then(|| Arc::new(crate::observe::network::Network::new()));
    let shares = args.server_connections == ServerConnections::Shared && shared.network.is_none();
    if let Some(addrs) = shared.upstream.plain_addrs().filter(|_| shares) {
        shared.mux = Some(crate::faults::mux::Mux::new(addrs));
    }
    if let Some(m) = &shared.mux {
        m.probe().await;
    }
    let shared = Arc::new(shared);
    let door = Door::start(args.listen, None, shared.clone())
        .await
        .map_err(|e| bad(format!("--listen {}: {e}", args.listen)))?;
    let mut copy_doors = Vec::new();
    for c in 0..copies {
        ledger.name_client(c, format!("copy {}", c + 1));
        let any = SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, 0));
        copy_doors.push(Door::start(any, Some(c), shared.clone()).await?);
    }
    Ok((shared, door, copy_doors))
}

/// Starts each copy of the program behind its own door (its URL in `REDIS_URL`), each a task
/// that returns the copy's record.
fn start_copies(
    program: &Arc<Program>,
    copy_doors: &[Door],
    client_url: &str,
    (ledger, pids): (&Arc<Ledger>, &crate::observe::faults::Pids),
    start: Instant,
    stop_rx: &tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinSet<CopyRecord> {
    let mut tasks = tokio::task::JoinSet::new();
    for (c, d) in copy_doors.iter().enumerate() {
        let url = crate::faults::watch::url_at(client_url, d.addr())
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
    tasks
}

/// The checks at the door, before anything starts (bad input, exit 2): the faults split into
/// those on a copy and the schedule's own, and the `--metrics` address.
fn check(args: &ObserveArgs) -> anyhow::Result<(Vec<HolderFault>, Vec<Fault>, Option<SocketAddr>)> {
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
    if server_faults.iter().any(|f| f.kind.needs_server()) && args.redis.is_some() {
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
    let metrics_at = (args.metrics.as_deref())
        .map(|a| crate::metrics::addr::parse_addr(a).map_err(|m| bad(format!("--metrics: {m}"))))
        .transpose()?;
    Ok((holder_faults, server_faults, metrics_at))
}

/// The server behind the doors.
struct Server {
    /// How the doors reach it: plain TCP, or TLS for a `rediss://` server.
    upstream: Upstream,
    /// Its URL as given.
    url: String,
    /// Its URL as the program's side sees it, plain TCP (a `rediss://` server is reached over
    /// TLS by the proxy alone).
    client_url: String,
    /// The private server observe started, if it did.
    spawned: Option<Arc<tokio::sync::Mutex<crate::store::spawn::SpawnedRedis>>>,
    /// The backend's name in the summary.
    backend: &'static str,
}

/// The server: the one `--redis` names (loopback unless --allow-remote; `rediss://` checked
/// by one handshake before anything starts), or a private one.
async fn server(args: &ObserveArgs) -> anyhow::Result<Server> {
    Ok(match &args.redis {
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
            Server {
                upstream: up,
                url: url.clone(),
                client_url,
                spawned: None,
                backend: "url",
            }
        }
        None => {
            let r = super::opening(crate::store::spawn::SpawnedRedis::start()).await?;
            let up: Arc<[SocketAddr]> = Arc::from(vec![SocketAddr::from((
                std::net::Ipv4Addr::LOCALHOST,
                r.port(),
            ))]);
            let url = r.url();
            Server {
                upstream: Upstream::plain(up),
                url: url.clone(),
                client_url: url,
                spawned: Some(Arc::new(tokio::sync::Mutex::new(r))),
                backend: "spawn",
            }
        }
    })
}

/// Waits for the end — `--duration`, every copy exited, or a signal — then stops the copies
/// and collects their records: why it ended, when, and the records.
async fn wait_for_end(
    args: &ObserveArgs,
    copies: usize,
    tasks: &mut tokio::task::JoinSet<CopyRecord>,
    signals: &mut tokio::sync::watch::Receiver<u32>,
    stop_tx: &tokio::sync::watch::Sender<bool>,
) -> (StopReason, Instant, Vec<CopyRecord>) {
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
    (stop_reason, end, records)
}

/// The run's summary: the ledger's figures as lockbench's own workers' (one variant,
/// `observed`), with what only the proxy knows.
#[allow(clippy::too_many_arguments)]
fn summary_of(
    args: &ObserveArgs,
    backend: &str,
    tally: &Tallied,
    clients: &[ClientTally],
    outages: crate::record::Outages,
    windows: &[crate::model::fault::FaultWindow],
    stop_reason: StopReason,
    elapsed_s: f64,
) -> Summary {
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
    summary.faults = windows.to_vec();
    summary.library = Some(format!("observed: {}", program_name(&args.cmd)));
    summary.wrongful_deletes_source =
        Some("the proxy: the value each release removed at the server".into());
    summary.watch = Some(WatchFigures {
        getdels: 0,
        removals_outside_releases: tally.stray_releases,
        reached_by: None,
        attributed: tally.attributed.clone(),
    });
    summary.thresholds = args.fail_if.iter().map(|t| t.check(&summary)).collect();
    summary
}

/// What went wrong with the copies and the faults: named, never counted as safe.
fn problems_of(
    records: &[CopyRecord],
    commands: &std::collections::BTreeMap<usize, u64>,
    windows: &[crate::model::fault::FaultWindow],
    holder_faults: usize,
    struck: &[crate::observe::faults::Struck],
) -> Vec<String> {
    let unstruck = holder_faults - struck.len();
    let mut problems = Vec::new();
    for r in records {
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
    if unstruck > 0 {
        problems.push(format!(
            "{unstruck} of {} --fault never struck: no copy held a lock after its time",
            holder_faults
        ));
    }
    for s in struck {
        if let Some(p) = &s.problem {
            problems.push(format!("--fault on copy {}: {p}", s.copy.unwrap_or(0)));
        }
    }
    problems
}

/// The figures' files, as a run's: `summary.json`/`.csv`, the `.hgrm` histograms,
/// `durations.hlog` (the run from `started_at`, `elapsed_s` long), and `clients.csv`.
fn write_figures(
    dir: &std::path::Path,
    run_id: &str,
    summaries: &[Summary],
    hists: &crate::record::HistSet,
    (started_at, elapsed_s): (SystemTime, f64),
    clients: &[ClientTally],
) -> anyhow::Result<()> {
    let summary_file = SummaryFile {
        run_id: run_id.to_string(),
        variants: summaries.to_vec(),
        agent: None,
        merged: None,
    };
    results::write_json(&dir.join("summary.json"), &summary_file)?;
    results::write_summary_csv_file(dir, summaries)?;
    crate::results::hgrm::write_hgrms(dir, hists, None)?;
    write_hlog(dir, hists, started_at, elapsed_s, run_id)?;
    write_clients(dir, clients)
}

/// The verdict, the table and the clients on the terminal, the problems on stderr, the CI
/// files; returns the exit code (a CI file or report not written fails the run).
fn tell(
    args: &ObserveArgs,
    table: &VerdictTable,
    summaries: &[Summary],
    clients: &[ClientTally],
    problems: &[String],
    report: Option<anyhow::Error>,
    dir: &std::path::Path,
) -> anyhow::Result<i32> {
    if !args.quiet {
        let stdout = std::io::stdout();
        let mut w = stdout.lock();
        crate::report::terminal::print_verdict(&mut w, table, false)?;
        crate::report::terminal::print_table(&mut w, summaries)?;
        print_clients(clients);
    }
    for p in problems {
        eprintln!("{p}");
    }
    let mut unwritten = !args.ci.write(table, None);
    // Shown even with --quiet: a missing report is a failed output, not a notice.
    if let Some(e) = report {
        eprintln!("error: the run's data files are written, but the report is not: {e:#}");
        unwritten = true;
    }
    if !args.quiet {
        println!("results: {}", dir.display());
    }
    let mut code = table.verdict.code;
    if unwritten && code == crate::exit::OK {
        code = crate::exit::FAILED;
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
