//! A lock library's holders for one variant: each driver's recipe (command line, servers,
//! timeouts), its greeting, the watch that attributes its deletes at the server, and the
//! holders started in parallel, sharing processes where the fault schedule allows.

use super::env::VariantEnv;
use crate::profile::Plan;
use crate::store::{Connector, LockConn};
use anyhow::Context;
use std::sync::Arc;
use std::time::Duration;

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
        tap: None,
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
pub(super) struct Watching {
    pub(super) getdel: bool,
    pub(super) getdel_refused: Option<String>,
    pub(super) prefix: String,
}

/// Why the watch may not send a library's `DEL` as `GETDEL` for the run's user (`None`: it
/// may). The watch never changes what a library can do: where the ACL denies the user
/// `GETDEL`, every rewritten release would fail (a release the library itself may send), so
/// the library's `DEL`s pass as they are and its wrongful deletes come from the timeline. `ACL
/// DRYRUN` (Redis ≥ 7.0) answers without running anything; where it cannot answer (an older
/// server, a user who may not run `ACL`), the permission is not known, and not assumed.
pub(super) async fn getdel_refused<C: LockConn>(probe: &C, key: &str) -> Option<String> {
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
/// (`scripts/bench.sh`); wrongful deletes then come from the timeline. `per-holder` keeps them
/// on without shared lines ([`WATCH_PER_HOLDER`]).
pub(crate) const WATCH_ENV: &str = "LOCKBENCH_WATCH";

/// `LOCKBENCH_WATCH=per-holder`: each watched connection on a server connection of its own, as
/// before the holders' watches shared lines (a control for tests and benchmarks: the figures
/// are the same, the server sees a connection per holder connection).
pub(crate) const WATCH_PER_HOLDER: &str = "per-holder";

/// The environment variable that puts the watches on loopback ports (`tcp`) rather than Unix
/// sockets: a control for `scripts/scale-bench.sh`, which measures what the sockets save.
pub(crate) const WATCH_SOCKET_ENV: &str = "LOCKBENCH_WATCH_SOCKET";

/// Whether a driver process's holders reach their watches through Unix sockets: unless
/// `LOCKBENCH_WATCH_SOCKET=tcp` (rslock, in lockbench's own process, takes a loopback port).
fn watch_on_unix(client: crate::model::client::Client) -> bool {
    !client.in_process() && !std::env::var(WATCH_SOCKET_ENV).is_ok_and(|v| v == "tcp")
}

/// Whether the holders' watches share lines to the server ([`crate::faults::mux`]): unless
/// `LOCKBENCH_WATCH=per-holder`.
fn watch_shares() -> bool {
    !std::env::var(WATCH_ENV).is_ok_and(|v| v == WATCH_PER_HOLDER)
}

/// `LOCKBENCH_WATCH=wire`: a driver process's holders are watched on the wire (a forwarder
/// per holder connection, [`crate::faults::watch`]) rather than by their driver's tap — what
/// every library's holders had before the tap, kept as the control the tap is checked against.
pub(crate) const WATCH_WIRE: &str = "wire";

/// Whether `client`'s holders are watched by their driver's tap, inside the driver process: a
/// driver process's are, unless `LOCKBENCH_WATCH` asks for the wire (`wire`, `per-holder`).
/// The same `GETDEL` reaches the server either way, and the same removals the ledger; the tap
/// spares every command a hop through lockbench — at a thousand redis-semaphore holders the
/// watch on the wire was ~60 % of lockbench's CPU a cycle (`scripts/scale-bench.sh`). rslock runs
/// in lockbench's own process, on the wire.
fn watched_by_tap(client: crate::model::client::Client) -> bool {
    !client.in_process()
        && !std::env::var(WATCH_ENV).is_ok_and(|v| v == WATCH_WIRE || v == WATCH_PER_HOLDER)
}

/// The source of a library variant's wrongful deletes when its holders are watched.
pub(crate) const FROM_SERVER: &str = "server (GETDEL through lockbench's watch)";

/// The source of a library variant's wrongful deletes when its drivers' taps watch.
pub(crate) const FROM_TAP: &str = "server (GETDEL through the driver's tap)";

/// Why the holders cannot be watched (`None`: they can); `tap`: by their driver's tap, which
/// needs no address to forward to (a Unix socket server, TLS).
fn unwatched<'a>(
    urls: &[String],
    cluster: bool,
    watch: &'a Watching,
    tap: bool,
) -> Option<&'a str> {
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
    } else if tap {
        None
    } else if urls.iter().any(|u| u.starts_with("unix:")) {
        Some("timeline (a Unix socket server: the watch forwards to TCP addresses)")
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
pub(super) async fn start_drivers<K: Connector>(
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
    use crate::faults::attribution::Ledger;
    use crate::faults::mux::Mux;
    use crate::faults::watch::{Listen, Watch, upstream_of};
    let name = client.name();
    let mut recipe = driver_recipe(connector, plan, client)?;
    let tap = watched_by_tap(client);
    let mut source = unwatched(&recipe.servers, recipe.cluster, &watch, tap).map(str::to_string);
    if tap && source.is_none() {
        recipe.tap = Some(crate::client::driver::TapSpec {
            prefix: watch.prefix.clone(),
            getdel: watch.getdel,
        });
    }
    let mut upstreams = Vec::new();
    if source.is_none() && !tap {
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
    // The wire's watches: none where the drivers' taps watch.
    let wire = ledger.clone().filter(|_| !tap);
    // One shared line per server and protocol for every holder of the variant (`None` per
    // server: each holder's connection its own).
    let mut muxes = Vec::with_capacity(upstreams.len());
    for up in &upstreams {
        muxes.push(match watch_shares() {
            true => {
                let mux = Mux::new(up.clone());
                mux.probe().await;
                Some(Arc::new(mux))
            }
            false => None,
        });
    }
    let rules = crate::faults::resp::Rules {
        getdel: watch.getdel,
        prefix: watch.prefix,
    };
    let shared = Arc::new(recipe.clone());
    // The variant's watch sockets, where its holders reach them that way.
    let dir = match (&wire, watch_on_unix(client)) {
        (Some(_), true) => crate::faults::watch::SocketDir::new(),
        _ => None,
    };
    let watch_reached_by = ledger.as_ref().map(|_| match (tap, &dir) {
        (true, _) => crate::faults::watch::BY_DRIVER_TAP,
        (false, Some(_)) => crate::faults::watch::BY_UNIX_SOCKET,
        (false, None) => crate::faults::watch::BY_LOOPBACK_TCP,
    });
    // Each holder's recipe: its own watches' addresses where it is watched.
    let mut recipes = Vec::with_capacity(slots);
    for holder in 0..slots {
        recipes.push(match &wire {
            Some(ledger) => {
                let mut watches = Vec::with_capacity(upstreams.len());
                let mut servers = Vec::with_capacity(upstreams.len());
                for (server, ((url, up), mux)) in recipe
                    .servers
                    .iter()
                    .zip(&upstreams)
                    .zip(&muxes)
                    .enumerate()
                {
                    let (rules, ledger) = (rules.clone(), ledger.clone());
                    let on = match &dir {
                        Some(d) => Listen::Unix(d.clone(), format!("h{holder}-s{server}.sock")),
                        None => Listen::Tcp,
                    };
                    let w = Watch::start(on, up.clone(), holder, rules, ledger, mux.clone())
                        .await
                        .context("starting a holder's watch")?;
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
            l.close(None).await;
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
            wrongful_source: source.unwrap_or_else(|| match tap {
                true => FROM_TAP.to_string(),
                false => FROM_SERVER.to_string(),
            }),
            watch_reached_by,
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
