//! The demos, each replayed against a real server (or the model) and printed redis-cli style;
//! every reply shown is the server's reply to the command shown, a server's error in its own
//! words. With `--redis-server` given more than once a story runs on each server in turn and
//! [`side_by_side`] says which replies differ. `stale-release`: the A/B/C story of the design
//! notes, with the article's `DELEX` attempt; `fencing`: the article's A/B story with a
//! fencing token at the resource; `setnx-expire`: the lock a crash between `SETNX` and
//! `EXPIRE` leaves forever; `fail-open`: a paused server and two clients that proceed without
//! a lock; `dedup-window` and `one-time-token`: the article's two look-alikes that are not
//! locks.
//!
//! Each step is one [`cmd::Cmd`], declared once: the command sent and the redis-cli line shown
//! both come from it. `script` writes the transcript, `acts` holds the stories told on one
//! lock connection, `fail_open` the one that pauses the server; this file is the command.

mod acts;
pub mod cmd;
mod fail_open;
mod playback;
pub mod side_by_side;

use crate::backend::{Backend, Store};
use crate::profile::Profile;
use crate::store::{Connector, KeySweep, ServerProbes};
pub use acts::FencingKeys;
pub use acts::dedup_window;
pub use acts::fencing;
pub use acts::one_time_token;
pub use acts::setnx_expire;
pub use acts::stale_release;
use anyhow::Context;
use clap::Args;
pub use fail_open::FAIL_OPEN_PAUSE;
pub use fail_open::FAIL_OPEN_TIMEOUT;
pub use fail_open::fail_open;
pub use playback::Step;
use playback::{compact, io_err, ms};
pub use side_by_side::Transcript;
use std::time::Duration;

/// The stories `lockbench demo` knows, in help order.
pub const STORIES: [&str; 6] = [
    "stale-release",
    "fencing",
    "setnx-expire",
    "fail-open",
    "dedup-window",
    "one-time-token",
];

/// `demo`.
#[derive(Debug, Args, Clone)]
pub struct DemoArgs {
    /// The story: stale-release (DEL vs compare-and-delete), fencing (a fencing token at the
    /// resource refuses the late write that compare-and-delete lets through), setnx-expire
    /// (a crash between SETNX and EXPIRE leaves a lock forever; SET NX PX does not),
    /// fail-open (a paused server: two clients time out and proceed without a lock; needs a
    /// real server), dedup-window (SET NX with a fixed value and a TTL: duplicates dropped
    /// until it expires) or one-time-token (GETDEL: the first caller gets it, the next nil).
    #[arg(value_parser = STORIES)]
    pub story: String,
    /// A's TTL in stale-release, fencing and setnx-expire, which wait past it [default 300ms];
    /// the window of dedup-window [default 2s]. Not used by fail-open and one-time-token.
    #[arg(long)]
    pub ttl: Option<crate::model::units::DurationText>,
    /// Redis URL instead of a private server.
    #[arg(long)]
    pub redis: Option<String>,
    /// auto, spawn, url or memory [default auto].
    #[arg(long)]
    pub backend: Option<crate::profile::BackendChoice>,
    /// Allow a non-loopback Redis host.
    #[arg(long)]
    pub allow_remote: bool,
    /// The server binary a private server is started from, e.g. .servers/…/valkey-server
    /// [default redis-server on PATH]. Repeatable: the story runs on each server in turn, and
    /// the replies that differ between them are printed at the end.
    #[arg(long = "redis-server", conflicts_with = "redis")]
    pub redis_server: Vec<String>,
}

/// `lockbench demo`. With `--redis-server` given once or more, the story runs on a private
/// server of each binary in turn, each transcript under a header naming the server; with two
/// or more, what differs between the transcripts is printed at the end.
pub async fn run(a: DemoArgs) -> anyhow::Result<i32> {
    let default_ttl = if a.story == "dedup-window" {
        "2s"
    } else {
        "300ms"
    };
    // The TTL is read as `run` reads it, by the profile's grammar: the same message and exit
    // code for `--ttl x`, and the same refusal of what Redis PX cannot express.
    let profile = Profile {
        ttl: Some(a.ttl.clone().unwrap_or_else(|| {
            default_ttl
                .parse()
                .expect("a story's default TTL is a duration")
        })),
        redis: a.redis.clone(),
        backend: a.backend.clone(),
        redis_server: (!a.redis_server.is_empty()).then(|| a.redis_server.clone()),
        ..Profile::default()
    };
    let mut plan = profile
        .plan("command line", "", None)
        .and_then(|mut plan| {
            crate::backend::check_plan_io(&mut plan, &profile, "command line", "", None)?;
            Ok(plan)
        })
        .map_err(|mut e| {
            // Every field of this profile came from a flag: name the flag.
            if let Some(f) = &e.field {
                e.message = e.message.replacen(
                    &format!("field `{f}`"),
                    &format!("--{}", f.replace('_', "-")),
                    1,
                );
            }
            e
        })?;
    // The stories wait past the TTL: longer than a minute would only look hung.
    let ttl = Duration::from_millis(plan.workload.ttl_ms);
    if ttl > Duration::from_secs(60) {
        return Err(bad_flag("ttl", "use 1ms to 60s").into());
    }
    plan.backend.allow_remote = a.allow_remote;
    if plan.backend.redis_servers.is_empty() {
        play(&a, &plan, ttl, None).await?;
        return Ok(0);
    }
    let of = plan.backend.redis_servers.len();
    let mut transcripts = Vec::with_capacity(of);
    for (i, exe) in plan.backend.redis_servers.iter().enumerate() {
        let heading = Heading {
            number: i + 1,
            of,
            exe,
        };
        transcripts.push(play(&a, &plan, ttl, Some(heading)).await?);
    }
    if of >= 2 {
        let d = side_by_side::differences(&transcripts);
        side_by_side::print(&transcripts, &d, std::io::stdout()).map_err(io_err)?;
    }
    Ok(0)
}

/// A flag of `demo` refused: exit 2, named as `run` names a flag (`command line: --ttl: …`).
fn bad_flag(field: &str, message: &str) -> crate::profile::ProfileError {
    crate::profile::ProfileError {
        file: "command line".to_string(),
        line: None,
        field: Some(field.to_string()),
        message: format!("--{field}: {message}"),
    }
}

/// Which of the `--redis-server` binaries a transcript runs on.
#[derive(Debug, Clone, Copy)]
struct Heading<'a> {
    number: usize,
    of: usize,
    exe: &'a std::path::Path,
}

impl Heading<'_> {
    /// The header line above the server's transcript.
    fn print(&self, version: &str) {
        println!(
            "\n=== server {} of {}: {version} ({}) ===",
            self.number,
            self.of,
            self.exe.display()
        );
    }
}

/// Plays `a.story` once on the backend of `plan` (the binary of `heading` when given) and
/// returns its transcript. The server is stopped whatever happens.
async fn play(
    a: &DemoArgs,
    plan: &crate::profile::Plan,
    ttl: Duration,
    heading: Option<Heading<'_>>,
) -> anyhow::Result<Transcript> {
    let on = |e: anyhow::Error| match heading {
        Some(h) => e.context(format!(
            "on server {} of {} ({})",
            h.number,
            h.of,
            h.exe.display()
        )),
        None => e,
    };
    if plan.backend.kind == crate::profile::BackendChoice::SpawnCluster {
        return Err(crate::exit::BadInput(
            "a demo tells its story on one server: use --backend spawn, url or memory, not \
             spawn-cluster"
                .into(),
        )
        .into());
    }
    if plan.backend.kind == crate::profile::BackendChoice::Sim {
        return Err(crate::exit::BadInput(
            "a demo is a story told in real time, step by step: use --backend spawn, url or memory, \
             not sim"
                .into(),
        )
        .into());
    }
    let backend = match Backend::open_server(plan, false, heading.map(|h| h.exe)).await {
        Ok(b) => b,
        // The binary the user named did not start as a server: bad input, not a failed run.
        Err(e) if let Some(h) = heading => {
            let why = format!("{e:#}");
            return Err(anyhow::Error::new(crate::exit::BadInput(format!(
                "--redis-server (server {} of {}): {} (give the path of a redis-server or \
                 valkey-server binary)",
                h.number,
                h.of,
                why.lines().next().unwrap_or("").trim_end_matches(':')
            ))));
        }
        Err(e) => return Err(e),
    };
    if let Store::Cluster(_) = &backend.store {
        backend.close().await;
        return Err(crate::exit::BadInput(
            "a demo tells its story on one server, and --redis names a Redis Cluster node: give \
             a standalone server, or --cluster no"
                .into(),
        )
        .into());
    }
    let run_id = crate::results::run_id(std::time::SystemTime::now());
    let prefix = format!("lockbench:{run_id}:demo");
    let result = if a.story == "fail-open" {
        // The story needs a server to pause; the model has no clients to hold.
        let url = match &backend.store {
            Store::Spawned(server, _) => Some(server.lock().await.url()),
            Store::Url(_) => plan.backend.redis.clone(),
            Store::Memory(_) | Store::Sim(_) | Store::Cluster(_) | Store::Redlock(..) => None,
        };
        match url {
            Some(url) => run_fail_open(&url, a.allow_remote, &prefix, heading).await,
            None => Err(anyhow::Error::new(crate::exit::BadInput(
                "demo fail-open needs a real server to pause (CLIENT PAUSE): use --backend \
                 spawn (redis-server installed) or --redis URL, not the memory model"
                    .into(),
            ))),
        }
    } else {
        backend
            .with_connector(Demo {
                story: &a.story,
                prefix: &prefix,
                ttl,
                heading,
            })
            .await
    };
    backend.close().await;
    let (version, steps) = result.map_err(on)?;
    Ok(Transcript {
        // Only the transcripts of `--redis-server` binaries are compared, and labelled.
        server: heading.map_or_else(String::new, |h| h.exe.display().to_string()),
        version,
        run_id,
        steps,
    })
}

async fn run_fail_open(
    url: &str,
    allow_remote: bool,
    prefix: &str,
    heading: Option<Heading<'_>>,
) -> anyhow::Result<(String, Vec<Step>)> {
    use crate::store::Timeouts;
    use crate::store::redis::RedisConnector;
    let key = format!("{prefix}:fail-open:lock");
    let c = RedisConnector::new(url, Timeouts::default(), allow_remote)?;
    let mut conn = c.connect().await?;
    let version = conn
        .server_version()
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(h) = heading {
        h.print(&version);
    }
    println!(
        "fail-open demo against {} ({version}); key {key}. It pauses every client of that \
         server for {}, twice.",
        c.describe(),
        compact(ms(FAIL_OPEN_PAUSE))
    );
    let r = fail_open(
        url,
        allow_remote,
        &key,
        FAIL_OPEN_PAUSE,
        FAIL_OPEN_TIMEOUT,
        std::io::stdout(),
    )
    .await;
    // Whatever happened, leave nothing behind (this waits for any pause to end).
    let _ = conn.del(&key).await;
    r.map(|steps| (version, steps)).context("demo failed")
}

/// [`run_demo`]'s arguments but the connector, for [`Backend::with_connector`].
struct Demo<'a> {
    story: &'a str,
    prefix: &'a str,
    ttl: std::time::Duration,
    heading: Option<Heading<'a>>,
}

impl crate::store::UseConnector for Demo<'_> {
    type Output = anyhow::Result<(String, Vec<Step>)>;

    async fn with<K: Connector>(self, c: &K) -> Self::Output {
        run_demo(c, self.story, self.prefix, self.ttl, self.heading).await
    }
}

async fn run_demo<K: Connector>(
    c: &K,
    story: &str,
    prefix: &str,
    ttl: std::time::Duration,
    heading: Option<Heading<'_>>,
) -> anyhow::Result<(String, Vec<Step>)> {
    let mut conn = c.connect().await?;
    let version = conn
        .server_version()
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(h) = heading {
        h.print(&version);
    }
    let out = std::io::stdout();
    let banner = |keys: &[String]| {
        println!(
            "{story} demo against {} ({version}); key{} {}",
            c.describe(),
            if keys.len() == 1 { "" } else { "s" },
            keys.join(" ")
        );
    };
    let (r, keys) = match story {
        "fencing" => {
            // One hash tag: the scripts touch the lock and the resource together.
            let keys = FencingKeys::new(&format!("{prefix}:{{fencing}}"));
            banner(&keys.all());
            (fencing(&mut conn, &keys, ttl, out).await, keys.all())
        }
        "setnx-expire" => {
            let key = format!("{prefix}:setnx-expire:lock");
            banner(std::slice::from_ref(&key));
            (setnx_expire(&mut conn, &key, ttl, out).await, vec![key])
        }
        "dedup-window" => {
            let key = format!("{prefix}:dedup:hb:42");
            banner(std::slice::from_ref(&key));
            (dedup_window(&mut conn, &key, ttl, out).await, vec![key])
        }
        "one-time-token" => {
            let key = format!("{prefix}:one-time-token:tok:abc");
            banner(std::slice::from_ref(&key));
            (one_time_token(&mut conn, &key, out).await, vec![key])
        }
        _ => {
            let key = format!("{prefix}:lock");
            banner(std::slice::from_ref(&key));
            (stale_release(&mut conn, &key, ttl, out).await, vec![key])
        }
    };
    // Whatever happened, leave nothing behind.
    let _ = conn.del_many(&keys).await;
    r.map(|steps| (version, steps)).context("demo failed")
}
