//! A bare redis-rs loop doing lockbench's lock cycle, as a reference for `scripts/bench.sh`.
//!
//! Per task: `SET k tok NX PX 10000`, then `EVALSHA <sha of RELEASE_LUA> 1 k tok`, again and
//! again; C tasks, key `lockbench:bench:bare:<i>` for task i, both commands built once. Mode
//! `per-worker` gives every task its own multiplexed connection, `shared` gives all tasks one.
//! The runtime is lockbench's default against a server on this machine: one thread per core
//! but one (at least one), and one thread is tokio's current-thread scheduler
//! (`LOCKBENCH_BARE_THREADS=N` to change). Prints `cycles/s` on stdout.
//!
//! The connection is lockbench's own pipelined link ([`lockbench::PipeLink`]),
//! as lockbench's runs use for TCP and Unix sockets; `LOCKBENCH_BARE_LINK=redis-rs` uses
//! redis-rs's `MultiplexedConnection` instead, and `LOCKBENCH_BARE_LINK=manager` its
//! `ConnectionManager` (what lockbench used before 2026-12-04).
//!
//! Usage: `bare_loop REDIS_URL CONCURRENCY SECONDS per-worker|shared`

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use lockbench::PipeLink;
use lockbench::RELEASE_LUA;
use lockbench::Timeouts;
use redis::aio::MultiplexedConnection;

const USAGE: &str = "usage: bare_loop REDIS_URL CONCURRENCY SECONDS per-worker|shared";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 4 {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    }
    let url = args[0].clone();
    let Ok(conc) = args[1].parse::<usize>() else {
        eprintln!("bare_loop: concurrency must be a positive integer\n{USAGE}");
        return ExitCode::from(2);
    };
    let Ok(secs) = args[2].parse::<u64>() else {
        eprintln!("bare_loop: seconds must be a positive integer\n{USAGE}");
        return ExitCode::from(2);
    };
    let shared = match args[3].as_str() {
        "per-worker" => false,
        "shared" => true,
        other => {
            eprintln!("bare_loop: mode must be per-worker or shared, got '{other}'\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if conc == 0 || secs == 0 {
        eprintln!("bare_loop: concurrency and seconds must be > 0\n{USAGE}");
        return ExitCode::from(2);
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = std::env::var("LOCKBENCH_BARE_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(cores.saturating_sub(1).max(1));
    // As lockbench: one thread is the current-thread scheduler.
    let mut builder = if threads == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(threads);
        b
    };
    let rt = builder.enable_all().build().expect("tokio runtime");
    match rt.block_on(run(&url, conc, Duration::from_secs(secs), shared)) {
        Ok(rate) => {
            println!("{rate:.1}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bare_loop: {e}");
            ExitCode::from(1)
        }
    }
}

async fn run(url: &str, conc: usize, dur: Duration, shared: bool) -> redis::RedisResult<f64> {
    let client = redis::Client::open(url)?;
    let sha = redis::Script::new(RELEASE_LUA).get_hash().to_string();
    // Load the script once so EVALSHA never meets NOSCRIPT.
    let mut first = client.get_multiplexed_async_connection().await?;
    let loaded: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(RELEASE_LUA)
        .query_async(&mut first)
        .await?;
    assert_eq!(loaded, sha, "SCRIPT LOAD returned another sha");
    let link = std::env::var("LOCKBENCH_BARE_LINK").unwrap_or_default();
    match link.as_str() {
        "" | "pipe" => {
            let info = client.get_connection_info();
            let open = async || {
                PipeLink::open(info, Timeouts::default()).await?.ok_or_else(|| {
                    redis::RedisError::from(std::io::Error::other(
                        "lockbench's link takes TCP and Unix URLs with RESP2; use LOCKBENCH_BARE_LINK=redis-rs",
                    ))
                })
            };
            cycle(connections(conc, shared, open).await?, &sha, dur).await
        }
        // The same loop through redis-rs's ConnectionManager, lockbench's connection type before
        // its own link.
        "manager" => {
            let open = async || redis::aio::ConnectionManager::new(client.clone()).await;
            cycle(connections(conc, shared, open).await?, &sha, dur).await
        }
        "redis-rs" => {
            let open = async || client.get_multiplexed_async_connection().await;
            let conns: Vec<MultiplexedConnection> = connections(conc, shared, open).await?;
            cycle(conns, &sha, dur).await
        }
        _ => Err(redis::RedisError::from(std::io::Error::other(format!(
            "LOCKBENCH_BARE_LINK={link}: use pipe (the default), redis-rs or manager"
        )))),
    }
}

/// `conc` connections from `open`: one shared by all (`shared`), or one each.
async fn connections<C: Clone>(
    conc: usize,
    shared: bool,
    open: impl AsyncFn() -> redis::RedisResult<C>,
) -> redis::RedisResult<Vec<C>> {
    let first = open().await?;
    let mut conns = Vec::with_capacity(conc);
    for i in 0..conc {
        if shared || i == 0 {
            conns.push(first.clone());
        } else {
            conns.push(open().await?);
        }
    }
    Ok(conns)
}

async fn cycle<C>(conns: Vec<C>, sha: &str, dur: Duration) -> redis::RedisResult<f64>
where
    C: redis::aio::ConnectionLike + Send + 'static,
{
    let conc = conns.len();
    let stop = Arc::new(AtomicBool::new(false));
    let cycles = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(conc);
    for (i, mut conn) in conns.into_iter().enumerate() {
        let key = format!("lockbench:bench:bare:{i}");
        let mut set = redis::cmd("SET");
        set.arg(&key).arg("tok").arg("NX").arg("PX").arg(10_000);
        let mut release = redis::cmd("EVALSHA");
        release.arg(sha).arg(1).arg(&key).arg("tok");
        let (stop, cycles) = (stop.clone(), cycles.clone());
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let _: redis::Value = set.query_async(&mut conn).await?;
                let _: redis::Value = release.query_async(&mut conn).await?;
                n += 1;
            }
            cycles.fetch_add(n, Ordering::Relaxed);
            Ok::<(), redis::RedisError>(())
        }));
    }
    tokio::time::sleep(dur).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.expect("task panicked")?;
    }
    let elapsed = start.elapsed().as_secs_f64();
    Ok(cycles.load(Ordering::Relaxed) as f64 / elapsed)
}
