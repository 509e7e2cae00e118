//! Profiles: TOML files describing a workload, validated into a [`Plan`] before any I/O.
//! (Over 800 lines: about 1,270 of code — the profile's and the plan's types and every field's
//! validation with its message, in one `Profile::plan` — and 240 of tests. Its split by concern,
//! with the plan in sub-structs, comes with one declaration per setting.
//!
//! ```toml
//! workers = 50                 # concurrent clients
//! keys = 2                     # lock keys they contend for
//! ttl = "100ms"                # PX of every acquisition
//! duration = "5s"              # run length by time ... (or sections = 10000)
//! dist = "lognormal(median=20ms,p99=120ms)"   # critical-section durations
//! think = "constant(0ms)"      # pause between a release and the next attempt
//! busy = "fail-fast"           # or "retry" (exponential backoff, full jitter)
//! release = "token"            # del | token | delex
//! connection = "per-worker"    # or "shared"
//! seed = 42
//! ```
//!
//! Every error names the file, the line and the field, and says what would be valid.

mod redlock;

use crate::analysis::threshold::Threshold;
use crate::dist::Dist;
use crate::model::fault::{Fault, FaultProfile};
use crate::model::release::ExtendCommand;
use crate::model::release::ReleaseMethod;
use crate::model::units;
use crate::model::variant::{Fencing, Variant};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

/// Smallest accepted `time_scale` (a million times faster than real).
pub const MIN_TIME_SCALE: f64 = 1e-6;
/// Largest accepted `time_scale` (a million times slower than real).
pub const MAX_TIME_SCALE: f64 = 1e6;

/// Declares [`Profile`] once: each field with its doc (the TOML key's and the flag's help, and
/// the book's reference pages), its serde and clap attributes — and from the same list the
/// code that must visit every field (`is_set`, `overlay`), so none can be missed.
macro_rules! declare_profile {
    (
        $(#[$meta:meta])*
        pub struct Profile { $( $(#[$field_meta:meta])* pub $field:ident : $ty:ty, )* }
    ) => {
        $(#[$meta])*
        pub struct Profile { $( $(#[$field_meta])* pub $field: $ty, )* }

        impl Profile {
            fn field_is_set(&self, field: &str) -> bool {
                match field {
                    $( stringify!($field) => self.$field.is_some(), )*
                    _ => false,
                }
            }

            fn take_fields_set_in(&mut self, over: Profile) {
                $( if over.$field.is_some() { self.$field = over.$field; } )*
            }
        }
    };
}

declare_profile! {
/// A profile as written (every field optional; flags fill or override them).
#[derive(Debug, Clone, Default, Deserialize, Serialize, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Free-text name shown in reports.
    #[arg(skip)]
    pub name: Option<String>,
    /// What the profile models and how it is scaled.
    #[arg(skip)]
    pub description: Option<String>,
    /// Concurrent workers (clients) [default 10].
    #[arg(long)]
    pub workers: Option<usize>,
    /// Lock keys the workers contend for [default 1].
    #[arg(long)]
    pub keys: Option<usize>,
    /// Fraction (0–1) of attempts aimed at key 0, the hot key; the rest pick uniformly
    /// [default: none, uniform].
    #[arg(long, allow_negative_numbers = true)]
    pub hot_key: Option<f64>,
    /// Lock TTL sent as PX, whole milliseconds, with unit, e.g. 100ms, 30s
    /// [default 100ms].
    #[arg(long)]
    pub ttl: Option<String>,
    /// Run length by time, with unit, e.g. 10s [default 5s].
    #[arg(long, conflicts_with = "sections")]
    pub duration: Option<String>,
    /// Run length by number of sections begun.
    #[arg(long)]
    pub sections: Option<u64>,
    /// Critical-section duration distribution, e.g. 'constant(2ms)', 'uniform(70ms,110ms)',
    /// 'exponential(mean=30ms)', 'lognormal(median=20ms,p99=120ms)',
    /// 'mixture(0.99*constant(5ms),0.01*uniform(1s,3s))', 'empirical(file=d.csv,column=durationMs)'
    /// [default constant(10ms)].
    #[arg(long)]
    pub dist: Option<String>,
    /// Think time between a release and the next attempt, a distribution
    /// [default constant(0ms)].
    #[arg(long)]
    pub think: Option<String>,
    /// Start the workers one by one over this time, e.g. 1s: worker i of N makes its first
    /// attempt at i/N of it (a closed loop; counts in the duration) [default
    /// all at once].
    #[arg(long)]
    pub ramp_up: Option<String>,
    /// What a worker does when the lock is busy: fail-fast (count a rejection) or retry
    /// (exponential backoff with full jitter, see the profile's [retry] table)
    /// [default fail-fast].
    #[arg(long)]
    pub busy: Option<String>,
    /// Retry settings when `busy = "retry"`.
    #[arg(skip)]
    pub retry: Option<RetryProfile>,
    /// CI gates (`[thresholds]`).
    #[arg(skip)]
    pub thresholds: Option<ThresholdsProfile>,
    /// Release method for `run`.
    #[arg(skip)]
    pub release: Option<String>,
    /// Release methods for `compare`.
    #[arg(skip)]
    pub releases: Option<Vec<String>>,
    /// Connection mode: per-worker (independent clients, a socket each) or shared (one
    /// multiplexed socket, like one service process) [default per-worker].
    #[arg(long)]
    pub connection: Option<String>,
    /// Seed of every random choice; the same seed gives the same intended durations
    /// [default 1].
    #[arg(long)]
    pub seed: Option<u64>,
    /// auto (spawn if redis-server is installed, else memory), spawn, url, memory, sim (the
    /// memory model on a virtual clock: a discrete-event simulation), or spawn-cluster (a
    /// private Redis Cluster) [default auto].
    #[arg(long)]
    pub backend: Option<String>,
    /// Redis URL (redis://, rediss://, unix://; user/password allowed, never printed). Implies
    /// --backend url.
    #[serde(serialize_with = "ser_redacted")]
    #[arg(long)]
    pub redis: Option<String>,
    /// Simulated round trip of the memory backend, with unit [default 0ms].
    #[arg(long)]
    pub memory_rtt: Option<String>,
    /// Round trip of each command in a simulated run (--backend sim), a distribution, e.g.
    /// `constant(0.2ms)` or `empirical(file=results/RUN/events.csv,column=release_latency_us,unit=us)`
    /// [default lognormal(median=0.1ms,p99=0.4ms)].
    #[arg(long)]
    pub sim_rtt: Option<String>,
    /// The simulated server's time per command, with unit; commands queue behind each other
    /// [default 0.005ms].
    #[arg(long)]
    pub sim_service: Option<String>,
    /// How late each timer fires in a simulated run, a distribution: a real runtime's timer
    /// is late by about its tick (tokio: ~1 ms) [default constant(0ms)].
    #[arg(long)]
    pub sim_timer: Option<String>,
    /// A real run's directory: simulate with the round trips and timer lateness it measured
    /// (from its events.csv; --sim-rtt or --sim-timer, when given, win), to check the
    /// simulation against it or extend it.
    #[arg(long)]
    pub sim_from: Option<String>,
    /// Cut a simulated run into N consecutive parts of equal length and simulate them at once,
    /// one thread each (each starts from an empty server, as the run does)
    /// [default 1].
    #[arg(long, value_name = "N")]
    pub sim_parallel: Option<usize>,
    /// Time allowed for one Redis reply before it counts as a timeout error, with unit
    /// [default 10s].
    #[arg(long)]
    pub command_timeout: Option<String>,
    /// Time allowed to open a connection.
    #[arg(skip)]
    pub connect_timeout: Option<String>,
    /// End the run when commands have been failing, with none succeeding, for this long (the
    /// server is down, out of memory, or refusing the user); the run then exits with 1
    /// [default 10s].
    #[arg(long)]
    pub give_up_after: Option<String>,
    /// Sections read-modify-write a protected resource (one per lock key, in the same store),
    /// counting accepted, fenced and unsafe writes and lost updates
    /// [default off; on when a variant fences].
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub resource: Option<bool>,
    /// Fencing of variants that do not name one: off, write or read-write
    /// [default off].
    #[arg(long)]
    pub fencing: Option<String>,
    /// Lease extension of every variant: off, an interval (10ms) or ttl/N; `METHOD+extend`
    /// variants extend every ttl/3 when this is off [default off].
    #[arg(long)]
    pub extend: Option<String>,
    /// The extension command: script (compare-and-PEXPIRE) or set-ifeq (SET … IFEQ, Valkey
    /// ≥ 8.1 / Redis ≥ 8.4) [default script].
    #[arg(long)]
    pub extend_with: Option<String>,
    /// When an extension finds the lock gone: continue (write anyway) or abort (skip the
    /// write) [default continue].
    #[arg(long)]
    pub on_lost: Option<String>,
    /// When Redis does not answer (connection or timeout error): fail-closed (refuse the
    /// request) or fail-open (run the section without a lock)
    /// [default fail-closed].
    #[arg(long)]
    pub on_unavailable: Option<String>,
    /// Stop-the-world pauses of holders, a distribution, e.g.
    /// 'mixture(0.999*constant(0ms),0.001*uniform(1s,3s))' [default none].
    #[arg(long)]
    pub pause: Option<String>,
    /// Where a pause strikes: random or before-write [default random].
    #[arg(long)]
    pub pause_at: Option<String>,
    /// Multiply every duration of the workload (TTL, distribution, think time, backoff; not the
    /// run length) by this factor, e.g. 0.01 to measure a 30s-TTL world in seconds; reports show
    /// scaled and original units [default 1].
    #[arg(long, allow_negative_numbers = true)]
    pub time_scale: Option<f64>,
    /// The fault schedule (`[[fault]]` entries).
    #[arg(skip)]
    pub fault: Option<Vec<FaultProfile>>,
    /// How a lock is taken: set-nx-px (one command) or setnx-expire (SETNX then PEXPIRE, the
    /// anti-pattern) [default set-nx-px].
    #[arg(long)]
    pub acquire: Option<String>,
    /// Probability that a holder dies right after acquiring (between SETNX and PEXPIRE with
    /// setnx-expire), leaving its lock unreleased [default 0].
    #[arg(long, allow_negative_numbers = true)]
    pub crash_between: Option<f64>,
    /// The server binary a private server is started from, e.g. .servers/…/valkey-server
    /// [default redis-server on PATH]. compare takes it more than once:
    /// every variant runs on every server, side by side.
    #[serde(default, deserialize_with = "one_or_many")]
    #[arg(long = "redis-server")]
    pub redis_server: Option<Vec<String>>,
    /// The open arrival model: requests arrive at a rate whether or not earlier ones are done,
    /// each taking the lock once (fail-fast) or by the busy policy: constant(1000/s),
    /// poisson(1000/s) or ramp(100/s, 1000/s) over the run's duration. Latency is measured
    /// from each request's intended arrival [default: a closed loop of
    /// workers].
    #[arg(long)]
    pub arrivals: Option<String>,
    /// With --arrivals: requests in flight at most (each its own client)
    /// [default: --workers].
    #[arg(long)]
    pub max_in_flight: Option<usize>,
    /// How a section waits for its end: tokio (its millisecond timer: ~1 ms late, cheap) or
    /// precise (the timer to 2.5 ms before the end, then yielding until it: tens of µs late,
    /// at the cost of a busy core) [default tokio].
    #[arg(long)]
    pub timer: Option<String>,
    /// all (a row per section in events.csv) or none (no events.csv and no charts: for a long
    /// simulated run; every figure is still in summary.json and the .hgrm/.hlog files)
    /// [default all].
    #[arg(long)]
    pub events: Option<String>,
    /// Whether --redis names a Redis Cluster node: auto (asked with INFO cluster), yes or no
    /// [default auto].
    #[arg(long)]
    pub cluster: Option<String>,
    /// Masters of a spawned cluster (--backend spawn-cluster)
    /// [default 3].
    #[arg(long)]
    pub cluster_masters: Option<usize>,
    /// Replicas per master of a spawned cluster [default 1].
    #[arg(long)]
    pub cluster_replicas: Option<usize>,
    /// The lock kind: single (one server) or redlock (a majority of --instances independent
    /// servers, redsync's algorithm) [default single].
    #[arg(long)]
    pub lock: Option<String>,
    /// Redlock: private servers to spawn [default 5].
    #[arg(long)]
    pub instances: Option<usize>,
    /// Redlock: an existing server, one per instance (repeat the flag; loopback only unless
    /// --allow-remote).
    #[serde(serialize_with = "ser_redacted_list")]
    #[arg(long = "redlock-url")]
    pub redlock_urls: Option<Vec<String>>,
    /// Redlock: per-instance timeout of an acquisition, with unit
    /// [default 0.05 × TTL, as redsync].
    #[arg(long)]
    pub redlock_timeout: Option<String>,
}
}

/// The name of the single-table header (`[name]`, not `[[name]]`) on the line of `at`.
fn single_table_at(text: &str, at: usize) -> Option<String> {
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next()?.trim();
    let name = line.strip_prefix('[')?.split(']').next()?.trim();
    (!name.starts_with('[') && !name.is_empty()).then(|| name.to_string())
}

/// `redis_server` written as one path or a list of them.
fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    Ok(Option::<OneOrMany>::deserialize(d)?.map(|o| o.to_vec()))
}

/// How a section waits for its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Timer {
    /// tokio's timer: millisecond resolution, ~1 ms late, no CPU while waiting.
    Tokio,
    /// Tens of µs late: while section ends are rare, woken ahead by a timer thread of its own
    /// and spun out (see [`crate::engine::precise`]); when they are frequent, tokio's timer to
    /// [`PRECISE_LEAD`] before the end, then yielding until it (a busy core meanwhile).
    Precise,
}

impl Timer {
    /// As written in a profile.
    pub fn name(self) -> &'static str {
        match self {
            Self::Tokio => "tokio",
            Self::Precise => "precise",
        }
    }
}

/// How long before a precise section's end the yield loop takes over from the timer (the
/// timer's own lateness, ~1–2 ms, must fit inside it).
pub const PRECISE_LEAD: Duration = Duration::from_micros(2_500);

/// A field written as one value or a list of them.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum OneOrMany {
    /// `field = "x"`.
    One(String),
    /// `field = ["x", "y"]`.
    Many(Vec<String>),
}

impl OneOrMany {
    /// The values, in order.
    pub fn to_vec(&self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s.clone()],
            OneOrMany::Many(v) => v.clone(),
        }
    }
}

/// How a lock is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Acquire {
    /// `SET key token NX PX ttl`: one atomic command.
    SetNxPx,
    /// `SETNX key token`, then `PEXPIRE key ttl`: a holder that dies between the two leaves a
    /// key that never expires.
    SetnxExpire,
}

/// The `[thresholds]` table.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ThresholdsProfile {
    /// Conditions on summary figures, e.g. `"overlap_ms > 0"`: a variant for which one holds
    /// fails the gate (exit 99).
    pub fail_if: Option<Vec<String>>,
}

/// `[retry]` table.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RetryProfile {
    /// First backoff ceiling.
    pub base: Option<String>,
    /// Largest backoff ceiling.
    pub cap: Option<String>,
    /// Give up after waiting this long for one acquisition.
    pub max_wait: Option<String>,
}

/// How the extension interval is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtendEvery {
    /// The TTL divided by N.
    TtlDiv(u64),
    /// A fixed interval, µs.
    Fixed(u64),
}

impl Default for ExtendEvery {
    fn default() -> Self {
        ExtendEvery::TtlDiv(3)
    }
}

impl ExtendEvery {
    /// The interval for a TTL, µs; checked only when some variant extends (`extends`).
    pub fn at(self, ttl_us: u64, extends: bool) -> Result<u64, String> {
        let us = match self {
            ExtendEvery::TtlDiv(n) => ttl_us / n,
            ExtendEvery::Fixed(us) => us,
        };
        if extends && (us < 1_000 || us >= ttl_us) {
            return Err(format!(
                "an extension every {} cannot keep a {} lock: use an interval from 1ms to below the TTL (e.g. ttl/3)",
                units::fmt_us(us, units::Style::Compact),
                units::fmt_us(ttl_us, units::Style::Compact)
            ));
        }
        Ok(us)
    }
}

/// What a holder does when an extension finds its lock gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnLost {
    /// Work on and write as if nothing happened (what most code does).
    Continue,
    /// Skip the resource write and release (counted as `sections_aborted`).
    Abort,
}

/// What a request does when Redis does not answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnUnavailable {
    /// The request is refused (`refused_unavailable`).
    FailClosed,
    /// The section runs without a lock (`unlocked_sections`), as the article's service does.
    FailOpen,
}

/// Where a holder's pause strikes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PauseAt {
    /// At a uniformly random point of the section's work.
    Random,
    /// After the work, right before the resource write.
    BeforeWrite,
}

/// What to do when the lock is busy.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "policy", rename_all = "kebab-case")]
pub enum BusyPolicy {
    /// Count a rejection and move on to think time.
    FailFast,
    /// Retry with exponential backoff and full jitter until `max_wait_us`.
    Retry {
        /// First backoff ceiling, µs.
        base_us: u64,
        /// Largest backoff ceiling, µs.
        cap_us: u64,
        /// Give up after this long, µs.
        max_wait_us: u64,
    },
}

/// One connection per worker, or one multiplexed connection shared by all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConnectionMode {
    /// Independent clients, each with its own socket.
    PerWorker,
    /// One service process: all workers pipeline over one socket.
    Shared,
}

impl ConnectionMode {
    /// Name used in profiles and reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::PerWorker => "per-worker",
            Self::Shared => "shared",
        }
    }
}

/// A simulated run's round trip per command unless the profile says: a loopback connection's.
pub const DEFAULT_SIM_RTT: &str = "lognormal(median=0.1ms,p99=0.4ms)";
/// A simulated server's time per command unless the profile says: a `SET` on Redis.
pub const DEFAULT_SIM_SERVICE: &str = "0.005ms";

/// Where the lock store is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BackendChoice {
    /// `spawn` if `redis-server` is on PATH, else `memory` with a notice.
    Auto,
    /// A private `redis-server` child.
    Spawn,
    /// An existing server.
    Url,
    /// The in-process model.
    Memory,
    /// The in-process model on a virtual clock: a discrete-event simulation.
    Sim,
    /// A private Redis Cluster lockbench starts (`cluster_masters` × (1 + `cluster_replicas`)
    /// servers).
    SpawnCluster,
}

/// Whether a server given by URL is a Redis Cluster node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClusterMode {
    /// Asked of the server (`INFO cluster`).
    Auto,
    /// A cluster node: lockbench connects to the cluster it belongs to.
    Yes,
    /// One server, even if it runs in cluster mode.
    No,
}

/// When a run ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// After this long (no new attempt starts after it; open sections finish).
    Time {
        /// Run length, µs.
        duration_us: u64,
    },
    /// After this many sections have begun.
    Sections {
        /// Number of sections.
        sections: u64,
    },
}

/// A validated workload: everything a run needs, with defaults filled in.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    /// Name shown in reports.
    pub name: String,
    /// Concurrent workers.
    pub workers: usize,
    /// Lock keys.
    pub keys: usize,
    /// Fraction of attempts aimed at key 0, if set.
    pub hot_key: Option<f64>,
    /// TTL in ms (Redis `PX` is whole milliseconds).
    pub ttl_ms: u64,
    /// When the run ends.
    pub stop: Stop,
    /// Section durations.
    pub dist: Dist,
    /// Think time.
    pub think: Dist,
    /// The closed loop's first attempts spread over this long, µs (0: all at once).
    pub ramp_up_us: u64,
    /// Busy policy.
    pub busy: BusyPolicy,
    /// Variant of a `run`.
    pub release: Variant,
    /// Variants of a `compare`.
    pub releases: Vec<Variant>,
    /// Sections read-modify-write a protected resource.
    pub resource: bool,
    /// Interval of lease extension for variants that extend, µs.
    pub extend_us: u64,
    /// How that interval was given (kept so a sweep cell's TTL recomputes it).
    #[serde(skip)]
    pub extend_every: ExtendEvery,
    /// The extension command.
    pub extend_with: ExtendCommand,
    /// What a holder does when an extension finds its lock gone.
    pub on_lost: OnLost,
    /// What a request does when Redis does not answer.
    pub on_unavailable: OnUnavailable,
    /// Stop-the-world pauses of holders (constant 0 = none).
    pub pause: Dist,
    /// CI gates: conditions on summary figures that fail the run with exit 99.
    pub fail_if: Vec<Threshold>,
    /// Where a pause strikes.
    pub pause_at: PauseAt,
    /// The fault schedule.
    pub faults: Vec<Fault>,
    /// How a lock is taken.
    pub acquire: Acquire,
    /// Probability that a holder dies right after acquiring.
    pub crash_between: f64,
    /// Server binaries the spawn backend starts, one per server of a compare (empty:
    /// `redis-server` on PATH).
    pub redis_servers: Vec<std::path::PathBuf>,
    /// The open arrival model (`None`: a closed loop of `workers`).
    pub arrivals: Option<crate::model::arrivals::Arrivals>,
    /// With arrivals: request slots (requests in flight at most).
    pub max_in_flight: usize,
    /// How a section waits for its end.
    pub timer: Timer,
    /// Every section gets an `events.csv` row (`false`: no `events.csv`, no report; the
    /// figures are in `summary.json` and the histograms).
    pub events: bool,
    /// Connection mode.
    pub connection: ConnectionMode,
    /// Seed.
    pub seed: u64,
    /// Backend.
    pub backend: BackendChoice,
    /// Whether a server given by URL is a cluster node.
    pub cluster: ClusterMode,
    /// Masters of a spawned cluster.
    pub cluster_masters: usize,
    /// Replicas per master of a spawned cluster.
    pub cluster_replicas: usize,
    /// Redis URL, only ever stored redacted.
    #[serde(serialize_with = "ser_redacted")]
    pub redis: Option<String>,
    /// Memory model round trip, µs.
    pub memory_rtt_us: u64,
    /// A simulated run's round trip per command (ms), as given and as a distribution.
    pub sim_rtt_text: String,
    /// See `sim_rtt_text`.
    #[serde(skip)]
    pub sim_rtt: Dist,
    /// The simulated server's time per command, µs.
    pub sim_service_us: u64,
    /// How late a simulated timer fires (ms; `None`: on time).
    #[serde(skip)]
    pub sim_timer: Option<crate::dist::Sampler>,
    /// `sim_timer` as given.
    pub sim_timer_text: String,
    /// Parts a simulated run is cut into and simulated at once (1: one piece).
    pub sim_parallel: usize,
    /// Reply timeout, µs.
    pub command_timeout_us: u64,
    /// Connect timeout, µs.
    pub connect_timeout_us: u64,
    /// Give up when commands have failed, with no success, for this long, µs.
    pub give_up_after_us: u64,
    /// Factor applied to every duration of the workload (1 = unscaled).
    pub time_scale: f64,
    /// The TTL before scaling, ms (what it stands for in the real system).
    pub unscaled_ttl_ms: f64,
    /// Things the user should know about the plan (e.g. scaled values near the clock's
    /// resolution).
    pub warnings: Vec<String>,
    /// How many of the first `warnings` are about the TTL ([`Plan::with_ttl`] replaces them).
    #[serde(skip)]
    pub ttl_warnings: usize,
    /// Redlock over N instances (`lock = "redlock"`); `None`: one server.
    pub redlock: Option<crate::redlock::RedlockPlan>,
    /// Non-loopback targets allowed. Only the `--allow-remote` flag sets it, never a profile,
    /// so a shared profile cannot aim lockbench at a production server.
    pub allow_remote: bool,
}

fn ser_redacted_list<S: serde::Serializer>(
    v: &Option<Vec<String>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    v.as_ref()
        .map(|l| {
            l.iter()
                .map(|u| crate::target::redact_url(u))
                .collect::<Vec<_>>()
        })
        .serialize(s)
}

fn ser_redacted<S: serde::Serializer>(v: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    v.as_ref()
        .map(|u| crate::target::redact_url(u))
        .serialize(s)
}

/// A profile problem: where it is and what would be valid.
#[derive(Debug, thiserror::Error)]
#[error("{file}{}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct ProfileError {
    /// The profile file (or `command line`).
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// The field at fault, when known.
    pub field: Option<String>,
    /// The field and what is wrong with it.
    pub message: String,
}

impl ProfileError {
    /// `field` of the profile `file` (whose text is `source`) is wrong: `message` says what would
    /// be valid. A key inside a table is written with its table: `retry.base`.
    pub fn at_field(file: &str, source: &str, field: &str, message: String) -> ProfileError {
        let path: Vec<&str> = field.split('.').collect();
        ProfileError {
            file: file.to_string(),
            line: locate(source, &path),
            field: Some(field.to_string()),
            message: format!("field `{field}`: {message}"),
        }
    }
}

impl Profile {
    /// Reads and parses a profile file.
    pub fn load(path: &Path) -> Result<(Profile, String), ProfileError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ProfileError {
            file: file.clone(),
            line: None,
            field: None,
            message: format!("cannot read the profile: {e}"),
        })?;
        Ok((Self::parse(&text, &file)?, text))
    }

    /// Parses profile text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Profile, ProfileError> {
        toml::from_str(text).map_err(|e| {
            let start = e.span().map(|s| s.start.min(text.len()));
            let line = start.map(|s| 1 + text[..s].matches('\n').count());
            // Name the key whose value the error is about, found in the syntax tree.
            let mut field = start.and_then(|s| key_at(text, s));
            let mut message = e.message().trim().to_string();
            // Serde's words for two mistakes, put in the profile's (issue 32).
            if let Some(name) = start.and_then(|s| single_table_at(text, s))
                && message.contains("expected a sequence")
            {
                message = format!(
                    "`[{name}]` is one table, but `{name}` is a list: write each entry under \
                     `[[{name}]]`"
                );
                field = Some(name);
            } else if message.contains("untagged enum OneOrMany") {
                message = "expected a path or a list of paths, e.g. `\"/usr/bin/redis-server\"` \
                           or `[\"/usr/bin/redis-server\", \"/opt/valkey/bin/valkey-server\"]`"
                    .to_string();
            }
            ProfileError {
                file: file.to_string(),
                line,
                message: match &field {
                    Some(f) if !message.contains(&format!("`{f}`")) => {
                        format!("field `{f}`: {message}")
                    }
                    _ => message,
                },
                field,
            }
        })
    }

    /// Whether `field` (a profile field name) is set.
    pub fn is_set(&self, field: &str) -> bool {
        self.field_is_set(field)
    }

    /// Fields set in `over` replace those in `self`.
    pub fn overlay(mut self, over: Profile) -> Profile {
        // A run length given on top replaces the other kind of run length.
        if over.sections.is_some() {
            self.duration = None;
        }
        if over.duration.is_some() {
            self.sections = None;
        }
        self.take_fields_set_in(over);
        self
    }

    /// Validates into a [`Plan`]. `source` is the profile text (to find line numbers), `file`
    /// its name, `base` the directory relative paths (empirical CSVs) are resolved against.
    ///
    /// Every field is checked before any file is read: the `empirical(…)` files the
    /// distributions name are read last.
    pub fn plan(
        &self,
        file: &str,
        source: &str,
        base: Option<&Path>,
    ) -> Result<Plan, ProfileError> {
        let err =
            |field: &str, message: String| ProfileError::at_field(file, source, field, message);
        let dur_us =
            |field: &str, v: &Option<String>, default: &str| -> Result<u64, ProfileError> {
                let text = v.as_deref().unwrap_or(default);
                units::parse_ms(text)
                    .map(units::ms_to_us)
                    .map_err(|e| err(field, e.to_string()))
            };
        let dist = |field: &str, v: &Option<String>, default: &str| -> Result<Dist, ProfileError> {
            Dist::parse(v.as_deref().unwrap_or(default)).map_err(|e| err(field, e.to_string()))
        };

        let dist_think = |v: &Option<String>| dist("think", v, "constant(0ms)");
        let workers = self.workers.unwrap_or(10);
        if !(1..=100_000).contains(&workers) {
            return Err(err(
                "workers",
                format!("{workers} is not valid: use 1 to 100000"),
            ));
        }
        let keys = self.keys.unwrap_or(1);
        if !(1..=10_000_000).contains(&keys) {
            return Err(err(
                "keys",
                format!("{keys} is not valid: use 1 to 10000000"),
            ));
        }
        if let Some(h) = self.hot_key
            && !(0.0..=1.0).contains(&h)
        {
            return Err(err(
                "hot_key",
                format!("{h} is not a fraction: use a number from 0 to 1"),
            ));
        }
        let scale = self.time_scale.unwrap_or(1.0);
        if !(scale.is_finite() && (MIN_TIME_SCALE..=MAX_TIME_SCALE).contains(&scale)) {
            return Err(err(
                "time_scale",
                format!(
                    "{} is not valid: use a factor from {} to {} (e.g. 0.01 to run 100× faster)",
                    units::fmt_num(scale),
                    units::fmt_num(MIN_TIME_SCALE),
                    units::fmt_num(MAX_TIME_SCALE)
                ),
            ));
        }
        let mut warnings = Vec::new();
        let raw_ttl_us = dur_us("ttl", &self.ttl, "100ms")?;
        let ttl_us = scaled_ttl(raw_ttl_us, scale, &mut warnings).map_err(|(f, m)| err(f, m))?;
        let ttl_warnings = warnings.len();
        let stop = match (&self.duration, self.sections) {
            (Some(_), Some(_)) => {
                return Err(err(
                    "sections",
                    "set either `duration` or `sections`, not both".to_string(),
                ));
            }
            (_, Some(0)) => return Err(err("sections", "must be at least 1".to_string())),
            (_, Some(n)) => Stop::Sections { sections: n },
            (d, None) => {
                let us = dur_us("duration", d, "5s")?;
                if us == 0 {
                    return Err(err(
                        "duration",
                        "must be longer than 0 (e.g. `5s`)".to_string(),
                    ));
                }
                Stop::Time { duration_us: us }
            }
        };
        // The [retry] table is checked even when the policy is fail-fast, so a typo never hides.
        let r = self.retry.clone().unwrap_or_default();
        let sc = |us: u64| ((us as f64 * scale).round() as u64).max(1);
        let base_us = sc(dur_us("retry.base", &r.base, "1ms")?);
        let cap_us = sc(dur_us("retry.cap", &r.cap, "100ms")?);
        // A ceiling written below the start is a typo, not a wish: refused. The default
        // ceiling follows a larger start.
        if r.cap.is_some() && cap_us < base_us {
            return Err(err(
                "retry.cap",
                format!(
                    "{} is below retry.base ({}): the backoff's ceiling must be at least its start",
                    r.cap.as_deref().unwrap_or_default(),
                    r.base.as_deref().unwrap_or("1ms")
                ),
            ));
        }
        let cap_us = cap_us.max(base_us);
        let max_wait_us = sc(dur_us("retry.max_wait", &r.max_wait, "5s")?);
        let busy = match self.busy.as_deref().unwrap_or("fail-fast") {
            "fail-fast" => BusyPolicy::FailFast,
            "retry" => BusyPolicy::Retry {
                base_us,
                cap_us,
                max_wait_us,
            },
            other => {
                return Err(err(
                    "busy",
                    format!("`{other}` is not a policy: use \"fail-fast\" or \"retry\""),
                ));
            }
        };
        let fencing: Fencing = self
            .fencing
            .as_deref()
            .unwrap_or("off")
            .parse()
            .map_err(|m| err("fencing", m))?;
        let extend_all = match self.extend.as_deref().map(str::trim) {
            None | Some("off") => false,
            Some(_) => true,
        };
        let on_unavailable = match self.on_unavailable.as_deref().unwrap_or("fail-closed") {
            "fail-closed" => OnUnavailable::FailClosed,
            "fail-open" => OnUnavailable::FailOpen,
            other => {
                return Err(err(
                    "on_unavailable",
                    format!("`{other}` is not a policy: use \"fail-closed\" or \"fail-open\""),
                ));
            }
        };
        let default_variant = Variant {
            release: ReleaseMethod::Token,
            fencing,
            extend: extend_all,
            fail_open: on_unavailable == OnUnavailable::FailOpen,
        };
        let method = |field: &str, s: &str| {
            Variant::parse_with(s, default_variant).map_err(|m| err(field, m))
        };
        let release = method("release", self.release.as_deref().unwrap_or("token"))?;
        let releases = match &self.releases {
            Some(list) if list.is_empty() => {
                return Err(err(
                    "releases",
                    "list at least one of del, token, delex".to_string(),
                ));
            }
            Some(list) => {
                let mut out = Vec::new();
                for s in list {
                    let m = method("releases", s)?;
                    if !out.contains(&m) {
                        out.push(m);
                    }
                }
                out
            }
            None => vec![
                Variant {
                    release: ReleaseMethod::Del,
                    ..default_variant
                },
                default_variant,
            ],
        };
        let connection = match self.connection.as_deref().unwrap_or("per-worker") {
            "per-worker" => ConnectionMode::PerWorker,
            "shared" => ConnectionMode::Shared,
            other => {
                return Err(err(
                    "connection",
                    format!("`{other}` is not a mode: use \"per-worker\" or \"shared\""),
                ));
            }
        };
        let backend = match self.backend.as_deref() {
            None if self.redis_server.is_some() => BackendChoice::Spawn,
            None if self.redis.is_some() => BackendChoice::Url,
            None | Some("auto") => BackendChoice::Auto,
            Some("spawn") => BackendChoice::Spawn,
            Some("url") => BackendChoice::Url,
            Some("memory") => BackendChoice::Memory,
            Some("sim") => BackendChoice::Sim,
            Some("spawn-cluster") => BackendChoice::SpawnCluster,
            Some(other) => {
                return Err(err(
                    "backend",
                    format!(
                        "`{other}` is not a backend: use auto, spawn, url, memory, sim or spawn-cluster"
                    ),
                ));
            }
        };
        // A URL names the server to measure; any other backend measures one lockbench starts
        // (or none), and would leave the URL unused without a word.
        if self.redis.is_some() && backend != BackendChoice::Url {
            return Err(match self.backend.as_deref() {
                Some(b) => err(
                    "backend",
                    format!(
                        "`{b}` does not measure the server the `redis` URL names (it would be ignored): give one of them (a URL alone implies backend = \"url\")"
                    ),
                ),
                None => err(
                    "redis_server",
                    "starts a private server, so the `redis` URL would be ignored: give one of them".to_string(),
                ),
            });
        }
        let cluster = match self.cluster.as_deref() {
            None | Some("auto") => ClusterMode::Auto,
            Some("yes") => ClusterMode::Yes,
            Some("no") => ClusterMode::No,
            Some(other) => {
                return Err(err(
                    "cluster",
                    format!("`{other}` is not a cluster mode: use auto, yes or no"),
                ));
            }
        };
        if cluster == ClusterMode::Yes && backend != BackendChoice::Url {
            return Err(err(
                "cluster",
                "says the `redis` URL is a cluster node: it needs backend = \"url\" (a private cluster is backend = \"spawn-cluster\")".to_string(),
            ));
        }
        let cluster_masters = self.cluster_masters.unwrap_or(3);
        let cluster_replicas = self.cluster_replicas.unwrap_or(1);
        if !(3..=16).contains(&cluster_masters) {
            return Err(err(
                "cluster_masters",
                format!("{cluster_masters} is not valid: a cluster needs 3 to 16 masters here"),
            ));
        }
        if cluster_replicas > 4 {
            return Err(err(
                "cluster_replicas",
                format!("{cluster_replicas} is not valid: use 0 to 4 replicas per master"),
            ));
        }
        if (self.cluster_masters.is_some() || self.cluster_replicas.is_some())
            && backend != BackendChoice::SpawnCluster
        {
            let f = if self.cluster_masters.is_some() {
                "cluster_masters"
            } else {
                "cluster_replicas"
            };
            return Err(err(
                f,
                "sizes a cluster lockbench starts: it needs backend = \"spawn-cluster\""
                    .to_string(),
            ));
        }
        if backend == BackendChoice::Url && self.redis.is_none() {
            return Err(err(
                "redis",
                "the url backend needs a Redis URL (e.g. redis://127.0.0.1:6379)".to_string(),
            ));
        }
        if let Some(url) = &self.redis {
            crate::target::check_url(url).map_err(|e| err("redis", format!("{e:#}")))?;
        }
        let command_timeout_us = dur_us("command_timeout", &self.command_timeout, "10s")?;
        let connect_timeout_us = dur_us("connect_timeout", &self.connect_timeout, "5s")?;
        if command_timeout_us == 0 || connect_timeout_us == 0 {
            return Err(err(
                "command_timeout",
                "timeouts must be longer than 0".to_string(),
            ));
        }
        let pause = dist("pause", &self.pause, "constant(0ms)")?;
        let sim_rtt = dist("sim_rtt", &self.sim_rtt, DEFAULT_SIM_RTT)?;
        let sim_timer_text = self
            .sim_timer
            .clone()
            .unwrap_or_else(|| "constant(0ms)".to_string());
        let sim_timer = dist("sim_timer", &self.sim_timer, "constant(0ms)")?;
        let dist = dist("dist", &self.dist, "constant(10ms)")?;
        let think = dist_think(&self.think)?;
        let memory_rtt_us = dur_us("memory_rtt", &self.memory_rtt, "0ms")?;
        if memory_rtt_us > 10_000_000 {
            return Err(err(
                "memory_rtt",
                format!(
                    "{} is not a round trip: use 0 to 10s",
                    units::fmt_us(memory_rtt_us, units::Style::Compact)
                ),
            ));
        }
        let sim_rtt_text = self
            .sim_rtt
            .clone()
            .unwrap_or_else(|| DEFAULT_SIM_RTT.to_string());
        let sim_service_us = dur_us("sim_service", &self.sim_service, DEFAULT_SIM_SERVICE)?;
        if sim_service_us > 1_000_000 {
            return Err(err(
                "sim_service",
                format!(
                    "{} per command is not a server: use 0 to 1s",
                    units::fmt_us(sim_service_us, units::Style::Compact)
                ),
            ));
        }
        let give_up_after_us = dur_us("give_up_after", &self.give_up_after, "10s")?;
        if give_up_after_us < 100_000 {
            return Err(err(
                "give_up_after",
                format!(
                    "{} is too short to tell an outage from a hiccup: use at least 100ms",
                    units::fmt_us(give_up_after_us, units::Style::Compact)
                ),
            ));
        }
        let extend_every = match self.extend.as_deref().map(str::trim) {
            None | Some("off") => ExtendEvery::TtlDiv(3),
            Some(t) => match t.strip_prefix("ttl/") {
                Some(n) => match n.parse::<u64>() {
                    Ok(n) if n >= 2 => ExtendEvery::TtlDiv(n),
                    _ => {
                        return Err(err(
                            "extend",
                            format!(
                                "`{t}`: write ttl/N with N ≥ 2 (e.g. ttl/3, Redisson's default)"
                            ),
                        ));
                    }
                },
                None => ExtendEvery::Fixed(dur_us("extend", &self.extend, "0ms")?),
            },
        };
        let extends = std::iter::once(&release).chain(&releases).any(|v| v.extend);
        let extend_us = extend_every
            .at(ttl_us, extends)
            .map_err(|m| err("extend", m))?;
        let extend_with = match self.extend_with.as_deref().unwrap_or("script") {
            "script" => ExtendCommand::Script,
            "set-ifeq" => ExtendCommand::SetIfeq,
            other => {
                return Err(err(
                    "extend_with",
                    format!(
                        "`{other}` is not an extension command: use \"script\" or \"set-ifeq\""
                    ),
                ));
            }
        };
        let on_lost = match self.on_lost.as_deref().unwrap_or("continue") {
            "continue" => OnLost::Continue,
            "abort" => OnLost::Abort,
            other => {
                return Err(err(
                    "on_lost",
                    format!("`{other}` is not a choice: use \"continue\" or \"abort\""),
                ));
            }
        };
        let pause_at = match self.pause_at.as_deref().unwrap_or("random") {
            "random" => PauseAt::Random,
            "before-write" => PauseAt::BeforeWrite,
            other => {
                return Err(err(
                    "pause_at",
                    format!("`{other}` is not a place: use \"random\" or \"before-write\""),
                ));
            }
        };
        let resource = self.resource.unwrap_or(false)
            || std::iter::once(&release)
                .chain(&releases)
                .any(|v| v.fencing != Fencing::Off);
        let mut fail_if = Vec::new();
        for expr in self
            .thresholds
            .as_ref()
            .and_then(|t| t.fail_if.as_ref())
            .into_iter()
            .flatten()
        {
            fail_if.push(Threshold::parse(expr).map_err(|m| err("thresholds.fail_if", m))?);
        }
        let mut faults = Vec::new();
        for (i, f) in self.fault.iter().flatten().enumerate() {
            let fault = f.validate().map_err(|m| ProfileError {
                file: file.to_string(),
                // The i-th `[[fault]]` entry, when it came from the file.
                line: locate(source, &["fault", &i.to_string()]),
                field: Some("fault".to_string()),
                message: format!(
                    "fault {} ({}): {m}",
                    i + 1,
                    f.kind.as_deref().unwrap_or("?")
                ),
            })?;
            faults.push(fault);
        }
        let acquire = match self.acquire.as_deref().unwrap_or("set-nx-px") {
            "set-nx-px" => Acquire::SetNxPx,
            "setnx-expire" => Acquire::SetnxExpire,
            other => {
                return Err(err(
                    "acquire",
                    format!(
                        "`{other}` is not a way to acquire: use \"set-nx-px\" or \"setnx-expire\""
                    ),
                ));
            }
        };
        if acquire == Acquire::SetnxExpire
            && std::iter::once(&release)
                .chain(&releases)
                .any(|v| v.fencing != Fencing::Off)
        {
            return Err(err(
                "acquire",
                "setnx-expire is the two-command anti-pattern; fenced variants acquire with one script (use set-nx-px, or variants without +fence)".to_string(),
            ));
        }
        let mut redis_servers = Vec::new();
        for path in self.redis_server.iter().flat_map(|r| r.to_vec()) {
            if !matches!(backend, BackendChoice::Spawn | BackendChoice::SpawnCluster) {
                return Err(err(
                    "redis_server",
                    "names the binary of a private server: it needs backend = \"spawn\" (not url or memory)".to_string(),
                ));
            }
            // The binary itself is checked by the command (`backend::check_plan_io`).
            let path = std::path::PathBuf::from(path);
            if !redis_servers.contains(&path) {
                redis_servers.push(path);
            }
        }
        if backend == BackendChoice::SpawnCluster && redis_servers.len() > 1 {
            return Err(err(
                "redis_server",
                "a spawned cluster runs one server binary on every node: give one".to_string(),
            ));
        }
        let arrivals = match &self.arrivals {
            None => None,
            Some(a) => {
                if let Stop::Sections { .. } = stop {
                    return Err(err(
                        "arrivals",
                        "an open arrival model runs for a `duration` (requests arrive at a rate), not a number of `sections`".to_string(),
                    ));
                }
                Some(crate::model::arrivals::Arrivals::parse(a).map_err(|m| err("arrivals", m))?)
            }
        };
        let ramp_up_us = dur_us("ramp_up", &self.ramp_up, "0s")?;
        if ramp_up_us > 0 {
            if arrivals.is_some() {
                return Err(err(
                    "ramp_up",
                    "starts a closed loop's workers one by one; the open model ramps its rate instead: `arrivals = \"ramp(FROM, TO)\"`".to_string(),
                ));
            }
            if let Stop::Time { duration_us } = stop
                && ramp_up_us >= duration_us
            {
                return Err(err(
                    "ramp_up",
                    format!(
                        "{} is not shorter than the run's duration ({}): the last workers would never start",
                        units::fmt_us(ramp_up_us, units::Style::Compact),
                        units::fmt_us(duration_us, units::Style::Compact)
                    ),
                ));
            }
        }
        let max_in_flight = self.max_in_flight.unwrap_or(workers);
        if !(1..=100_000).contains(&max_in_flight) {
            return Err(err(
                "max_in_flight",
                format!("{max_in_flight} is not valid: use 1 to 100000"),
            ));
        }
        let timer = match self.timer.as_deref().unwrap_or("tokio") {
            "tokio" => Timer::Tokio,
            "precise" => Timer::Precise,
            other => {
                return Err(err(
                    "timer",
                    format!("`{other}` is not a timer: use \"tokio\" or \"precise\""),
                ));
            }
        };
        let events = match self.events.as_deref().unwrap_or("all") {
            "all" => true,
            "none" => false,
            other => {
                return Err(err(
                    "events",
                    format!("`{other}` is not an events setting: use \"all\" or \"none\""),
                ));
            }
        };
        let crash_between = self.crash_between.unwrap_or(0.0);
        if !(0.0..=1.0).contains(&crash_between) {
            return Err(err(
                "crash_between",
                format!("{crash_between} is not a probability: use a number from 0 to 1"),
            ));
        }
        // Every field is valid: only now read the files the distributions name.
        let load = |field: &str, d: Dist| d.load(base).map_err(|e| err(field, e.to_string()));
        let dist = load("dist", dist)?.scaled(scale);
        let think = load("think", think)?.scaled(scale);
        // Round trips are the network's: not scaled.
        let sim_rtt = load("sim_rtt", sim_rtt)?;
        let sim_timer = load("sim_timer", sim_timer)?;
        // `sim_from` is read by the command (`backend::check_plan_io`): validation reads no
        // run directory.
        let sim_timer = (!sim_timer.is_zero()).then(|| sim_timer.sampler());
        if let Some(median) = dist.quantile(0.5)
            && median > 0.0
            && median < 5.0
        {
            warnings.push(format!(
                "median section {} is within a few timer ticks (~1ms): measured durations will run visibly longer than intended (see timer error)",
                units::fmt_us(units::ms_to_us(median), units::Style::Compact)
            ));
        }
        let sim_parallel = self.sim_parallel.unwrap_or(1);
        if self.sim_parallel.is_some() {
            let refuse =
                |why: &str| Err(err("sim_parallel", format!("{sim_parallel} parts {why}")));
            if !(1..=64).contains(&sim_parallel) {
                return refuse("is not valid: use 1 to 64 (one part per core pays)");
            }
            if sim_parallel > 1 {
                // What a part cannot give on its own: each is simulated from an empty server
                // on a clock of its own, and only its figures come back.
                if backend != BackendChoice::Sim {
                    return refuse("need backend = \"sim\" (a real run is one piece of real time)");
                }
                if !matches!(stop, Stop::Time { .. }) {
                    return refuse(
                        "need a run length in time (`duration`), to cut into equal parts",
                    );
                }
                if events {
                    return refuse(
                        "need events = \"none\": each part's rows would come on a clock of its own",
                    );
                }
                if ramp_up_us > 0
                    || matches!(
                        arrivals,
                        Some(crate::model::arrivals::Arrivals::Ramp { .. })
                    )
                {
                    return refuse(
                        "need a steady load: a ramp (`ramp_up`, `arrivals = \"ramp(…)\"`) follows the whole run's clock",
                    );
                }
                if !faults.is_empty() || crash_between > 0.0 {
                    return refuse(
                        "need no faults or crashes: their schedule and the stuck locks they leave follow the whole run",
                    );
                }
                if resource {
                    return refuse(
                        "need no protected resource (resource = false, and no fenced release such as token+fence): its final value is read back from one server",
                    );
                }
            }
        }
        let mut plan = Plan {
            name: self.name.clone().unwrap_or_else(|| "unnamed".to_string()),
            workers,
            keys,
            hot_key: self.hot_key,
            ttl_ms: ttl_us / 1000,
            stop,
            dist,
            think,
            busy,
            release,
            releases,
            resource,
            extend_us,
            extend_every,
            extend_with,
            on_lost,
            on_unavailable,
            pause: load("pause", pause)?.scaled(scale),
            pause_at,
            fail_if,
            faults,
            acquire,
            crash_between,
            redis_servers,
            arrivals,
            max_in_flight,
            ramp_up_us,
            timer,
            events,
            connection,
            seed: self.seed.unwrap_or(1),
            backend,
            cluster,
            cluster_masters,
            cluster_replicas,
            redis: self.redis.clone(),
            memory_rtt_us,
            sim_rtt_text,
            sim_rtt,
            sim_service_us,
            sim_timer,
            sim_timer_text,
            sim_parallel,
            command_timeout_us,
            connect_timeout_us,
            give_up_after_us,
            time_scale: scale,
            unscaled_ttl_ms: raw_ttl_us as f64 / 1000.0,
            warnings,
            ttl_warnings,
            redlock: None,
            allow_remote: false,
        };
        self.plan_redlock(&mut plan).map_err(|(f, m)| err(f, m))?;
        Ok(plan)
    }

    /// The redlock fields ([`crate::redlock::plan_of`]): a redlock run compares token
    /// variants only, so an unset `releases` defaults to `release` alone.
    fn plan_redlock(&self, plan: &mut Plan) -> Result<(), (&'static str, String)> {
        if self.lock.as_deref() == Some("redlock") && self.releases.is_none() {
            plan.releases = vec![plan.release];
        }
        plan.redlock = redlock::plan_of(self, plan)?;
        if let Some(r) = &plan.redlock {
            plan.warnings.extend(redlock::warnings(r));
        }
        Ok(())
    }
}

/// The key whose value holds byte `offset` of `source`, as a dotted path (`ttl`,
/// `retry.base`, `fault[2].kind`); `None` where the source does not parse or the offset is in
/// no value.
fn key_at(source: &str, offset: usize) -> Option<String> {
    use toml::de::{DeTable, DeValue};
    type Item<'a> = toml::Spanned<DeValue<'a>>;
    // Tables' own spans need not cover their bodies (a `[retry]` header's does not): descend
    // into every table and array, and match the offset against the leaves' spans.
    fn find(v: &Item<'_>, offset: usize, path: String) -> Option<String> {
        match v.get_ref() {
            DeValue::Table(t) => in_table(t, offset, &path),
            DeValue::Array(items) => items
                .iter()
                .enumerate()
                .find_map(|(i, item)| find(item, offset, format!("{path}[{i}]"))),
            _ => v.span().contains(&offset).then_some(path),
        }
    }
    fn in_table(t: &DeTable<'_>, offset: usize, path: &str) -> Option<String> {
        t.iter().find_map(|(k, v)| {
            let key = match path {
                "" => k.get_ref().to_string(),
                _ => format!("{path}.{}", k.get_ref()),
            };
            find(v, offset, key)
        })
    }
    in_table(DeTable::parse(source).ok()?.get_ref(), offset, "")
}

/// The 1-based line where the key at `path` is written (`["ttl"]`, `["retry", "base"]`,
/// `["fault", "2"]` for the third `[[fault]]`), found in the TOML's own syntax tree with its
/// spans: a `base` of another table, or a comment that mentions the key, is never taken for
/// it. A path that goes deeper than the file does names the deepest part written.
fn locate(source: &str, path: &[&str]) -> Option<usize> {
    use toml::de::{DeTable, DeValue};
    let doc = DeTable::parse(source).ok()?;
    let mut table = doc.get_ref();
    let mut at = None;
    let mut rest = path;
    while let [key, tail @ ..] = rest {
        let Some((k, v)) = table.iter().find(|(k, _)| k.get_ref() == key) else {
            break;
        };
        at = Some(k.span().start);
        rest = tail;
        let mut value = v;
        // An array of tables (`[[fault]]`): the next part of the path is the entry's index.
        if let (DeValue::Array(items), [index, tail @ ..]) = (v.get_ref(), rest) {
            let Some(item) = index.parse::<usize>().ok().and_then(|i| items.get(i)) else {
                break;
            };
            at = Some(item.span().start);
            rest = tail;
            value = item;
        }
        match value.get_ref() {
            DeValue::Table(t) => table = t,
            _ => break,
        }
    }
    at.map(|start| 1 + source[..start.min(source.len())].matches('\n').count())
}

impl Plan {
    /// Part `k` of `parts` of a simulated run cut into parts (`sim_parallel`): the same plan
    /// over the part's length, with a seed of its own (part 0 keeps the run's).
    pub fn part(&self, parts: usize, k: usize) -> Plan {
        let mut p = self.clone();
        if let Stop::Time { duration_us } = self.stop {
            p.stop = Stop::Time {
                duration_us: duration_us / parts.max(1) as u64,
            };
        }
        if k > 0 {
            // Mixed (splitmix64's finaliser), not an offset: the workers' streams are the seed
            // XOR a multiple of their number, so an offset seed would give part a's worker b
            // part b's worker a's streams.
            p.seed = crate::math::mix64(
                self.seed
                    .wrapping_add((k as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93)),
            );
        }
        p
    }

    /// Whether holders may crash (holder-crash faults or `crash_between`).
    pub fn has_crashes(&self) -> bool {
        self.crash_between > 0.0
            || self
                .faults
                .iter()
                .any(|f| f.kind == crate::model::fault::FaultKind::HolderCrash)
    }

    /// The protected resource shares the lock's store (`resource_redis = "shared"`).
    pub fn resource_shared(&self) -> bool {
        false
    }

    /// The server given for the protected resource (`resource_redis = URL`).
    pub fn resource_redis_url(&self) -> Option<&str> {
        None
    }

    /// Run length as a duration, if the run is time-limited.
    pub fn run_time(&self) -> Option<Duration> {
        match self.stop {
            Stop::Time { duration_us } => Some(Duration::from_micros(duration_us)),
            Stop::Sections { .. } => None,
        }
    }
}

/// The TTL sent as PX, µs (whole ms), from the TTL as written and the time scale; warnings
/// about it are pushed to `warnings`. An error names the field to blame and why.
fn scaled_ttl(
    raw_ttl_us: u64,
    scale: f64,
    warnings: &mut Vec<String>,
) -> Result<u64, (&'static str, String)> {
    let ttl_us = if scale == 1.0 {
        if raw_ttl_us < 1000 || !raw_ttl_us.is_multiple_of(1000) {
            return Err((
                "ttl",
                format!(
                    "{} cannot be sent as PX: Redis expiry is whole milliseconds ≥ 1ms (e.g. `100ms`)",
                    units::fmt_us(raw_ttl_us, crate::model::units::Style::Compact)
                ),
            ));
        }
        raw_ttl_us
    } else {
        let scaled = raw_ttl_us as f64 * scale;
        if scaled < 1000.0 {
            return Err((
                "time_scale",
                format!(
                    "scaling the TTL {} by {} gives {}, below the 1ms that Redis PX can express: use a time scale ≥ {}",
                    units::fmt_us(raw_ttl_us, crate::model::units::Style::Compact),
                    units::fmt_num(scale),
                    units::fmt_us(scaled.round() as u64, crate::model::units::Style::Compact),
                    units::fmt_num(1000.0 / raw_ttl_us as f64)
                ),
            ));
        }
        let rounded = (scaled / 1000.0).round() * 1000.0;
        if (rounded - scaled).abs() >= 1.0 {
            warnings.push(format!(
                "scaled TTL {} rounded to {} (Redis PX is whole milliseconds)",
                units::fmt_us(scaled.round() as u64, crate::model::units::Style::Compact),
                units::fmt_us(rounded as u64, crate::model::units::Style::Compact)
            ));
        }
        if rounded > units::MAX_US as f64 {
            return Err((
                "time_scale",
                format!(
                    "scaling the TTL {} by {} gives more than {}: use a time scale ≤ {}",
                    units::fmt_us(raw_ttl_us, crate::model::units::Style::Compact),
                    units::fmt_num(scale),
                    units::MAX_TEXT,
                    units::fmt_num(units::MAX_US as f64 / raw_ttl_us as f64)
                ),
            ));
        }
        rounded as u64
    };
    if ttl_us < 20_000 {
        warnings.push(format!(
                "TTL {} is short: the ~1ms timer resolution and Redis's millisecond expiry are ≥ 5 % of it",
                units::fmt_us(ttl_us, crate::model::units::Style::Compact)
            ));
    }
    Ok(ttl_us)
}

impl Plan {
    /// The same plan with another TTL (as written, before the time scale): a sweep's cell,
    /// without writing the TTL back into text and re-reading the profile.
    pub fn with_ttl(&self, raw_ttl_us: u64) -> Result<Plan, ProfileError> {
        let mut warnings = Vec::new();
        let ttl_us = scaled_ttl(raw_ttl_us, self.time_scale, &mut warnings).map_err(|(f, m)| {
            ProfileError {
                file: "command line".to_string(),
                line: None,
                message: format!(
                    "--ttl {}: {m}",
                    units::fmt_us(raw_ttl_us, crate::model::units::Style::Compact)
                ),
                field: Some(f.to_string()),
            }
        })?;
        let ttl_warnings = warnings.len();
        warnings.extend(self.warnings[self.ttl_warnings..].iter().cloned());
        let extends = std::iter::once(&self.release)
            .chain(&self.releases)
            .any(|v| v.extend);
        let extend_us = self
            .extend_every
            .at(ttl_us, extends)
            .map_err(|m| ProfileError {
                file: "command line".to_string(),
                line: None,
                message: format!(
                    "--ttl {}: {m}",
                    units::fmt_us(raw_ttl_us, units::Style::Compact)
                ),
                field: Some("extend".to_string()),
            })?;
        Ok(Plan {
            ttl_ms: ttl_us / 1000,
            extend_us,
            unscaled_ttl_ms: raw_ttl_us as f64 / 1000.0,
            warnings,
            ttl_warnings,
            ..self.clone()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(src: &str) -> Result<Plan, ProfileError> {
        Profile::parse(src, "p.toml")?.plan("p.toml", src, None)
    }

    /// --time-scale multiplies the TTL, the distributions and the backoff, not the run length;
    /// values near the clock's resolution are warned about, impossible ones refused.
    #[test]
    fn time_scale_scales_every_duration_but_the_run_length() {
        let p = plan("ttl = \"30s\"\ndist = \"uniform(1s,3s)\"\nthink = \"constant(2s)\"\nduration = \"5s\"\ntime_scale = 0.01\n").unwrap();
        assert_eq!(p.ttl_ms, 300);
        assert_eq!(p.unscaled_ttl_ms, 30_000.0);
        assert_eq!(p.dist.mean_ms(), Some(20.0));
        assert_eq!(p.think.mean_ms(), Some(20.0));
        assert_eq!(p.run_time(), Some(Duration::from_secs(5)));
        assert!(p.warnings.is_empty(), "{:?}", p.warnings);
        // Near the clock's resolution: warned; below what PX can express: refused.
        let p = plan("ttl = \"1s\"\ndist = \"constant(100ms)\"\ntime_scale = 0.0125\n").unwrap();
        assert_eq!(p.ttl_ms, 13);
        assert!(
            p.warnings.iter().any(|w| w.contains("rounded")),
            "{:?}",
            p.warnings
        );
        assert!(
            p.warnings.iter().any(|w| w.contains("short")),
            "{:?}",
            p.warnings
        );
        assert!(
            p.warnings.iter().any(|w| w.contains("timer")),
            "{:?}",
            p.warnings
        );
        let e = plan("ttl = \"50ms\"\ntime_scale = 0.01\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("time_scale") && e.contains("1ms"), "{e}");
        let e = plan("time_scale = -1\n").unwrap_err().to_string();
        assert!(e.contains("from 1e-6 to 1000000"), "{e}");
    }

    /// An absurd time scale is refused with the valid range, and no message prints a number
    /// hundreds of digits long (1e300 used to be written out in full).
    #[test]
    fn time_scale_is_bounded_and_printed_sanely() {
        for bad in ["1e300", "1e7", "1e-7", "0", "-1", "inf", "nan"] {
            let e = plan(&format!("time_scale = {bad}\n"))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("time_scale") && e.contains("from 1e-6 to 1000000"),
                "{bad}: {e}"
            );
            assert!(e.len() < 200, "{bad}: {e}");
        }
        let e = plan("ttl = \"1000h\"\ntime_scale = 1000000\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("41d16h") && e.contains("at most") || e.contains("≤"),
            "{e}"
        );
        assert!(e.len() < 200, "{e}");
        let e = plan("ttl = \"3ms\"\ntime_scale = 0.1\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("≥ 0.333333"), "{e}");
        assert!(plan("time_scale = 1e6\nttl = \"1ms\"\n").is_ok());
        assert!(plan("time_scale = 1e-6\nttl = \"1000h\"\n").is_ok());
    }

    /// `ramp_up` is a closed loop's, and shorter than a time-limited run.
    #[test]
    fn a_ramp_up_fits_in_the_run_and_has_workers_to_start() {
        assert_eq!(plan("ramp_up = \"1s\"\n").unwrap().ramp_up_us, 1_000_000);
        assert_eq!(plan("").unwrap().ramp_up_us, 0);
        assert!(plan("ramp_up = \"10s\"\nsections = 5\n").is_ok());
        let e = plan("ramp_up = \"5s\"\nduration = \"5s\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("ramp_up") && e.contains("not shorter"), "{e}");
        let e = plan("ramp_up = \"1s\"\narrivals = \"poisson(10/s)\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("ramp_up") && e.contains("ramp(FROM, TO)"), "{e}");
        let e = plan("ramp_up = \"soon\"\n").unwrap_err().to_string();
        assert!(e.contains("ramp_up"), "{e}");
    }

    /// Overlay carries every field across, and `is_set` sees every field set.
    #[test]
    fn overlay_and_is_set_cover_every_field() {
        let full = Profile::parse(
            "name = \"n\"\ndescription = \"d\"\nworkers = 2\nkeys = 3\nhot_key = 0.5\nttl = \"9ms\"\n\
             duration = \"1s\"\ndist = \"constant(1ms)\"\nthink = \"constant(1ms)\"\nramp_up = \"1ms\"\nbusy = \"retry\"\n\
             release = \"del\"\nreleases = [\"del\"]\nconnection = \"shared\"\nseed = 5\nbackend = \"memory\"\n\
             redis = \"redis://127.0.0.1:1\"\nmemory_rtt = \"1ms\"\ncommand_timeout = \"2s\"\n\
             connect_timeout = \"3s\"\ngive_up_after = \"2s\"\nresource = true\nfencing = \"write\"\nextend = \"ttl/3\"\nextend_with = \"script\"\non_lost = \"abort\"\non_unavailable = \"fail-open\"\npause = \"constant(0ms)\"\npause_at = \"random\"\ntime_scale = 0.5\nacquire = \"set-nx-px\"\ncrash_between = 0.1\nredis_server = \"/bin/sh\"\narrivals = \"poisson(10/s)\"\nmax_in_flight = 4\ntimer = \"precise\"\nevents = \"none\"\nsim_rtt = \"constant(1ms)\"\nsim_service = \"1us\"\nsim_timer = \"constant(1ms)\"\nsim_from = \"results/x\"\nsim_parallel = 2\ncluster = \"auto\"\ncluster_masters = 3\ncluster_replicas = 1\nlock = \"redlock\"\ninstances = 5\nredlock_urls = [\"redis://127.0.0.1:1\"]\nredlock_timeout = \"5ms\"\n[retry]\nbase = \"1ms\"\n[thresholds]\nfail_if = [\"errors > 0\"]\n[[fault]]\nkind = \"holder-crash\"\nprobability = 0.1\n",
            "p.toml",
        )
        .unwrap();
        let json = |p: &Profile| serde_json::to_value(p).unwrap();
        assert_eq!(json(&Profile::default().overlay(full.clone())), json(&full));
        let fields = json(&full);
        for (name, value) in fields.as_object().unwrap() {
            if name == "sections" {
                continue; // set either it or duration
            }
            assert!(!value.is_null(), "test profile leaves `{name}` unset");
            assert!(full.is_set(name), "is_set misses `{name}`");
        }
    }

    /// Every field is validated before an `empirical(…)` file is read: with a bad field and a
    /// missing file, the bad field is reported; with only the missing file, the file is, under
    /// its field and line.
    #[test]
    fn fields_are_validated_before_files_are_read() {
        let missing = "dist = \"empirical(/nonexistent/lockbench/d.csv)\"\n";
        let e = plan(&format!("{missing}give_up_after = \"1ms\"\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("field `give_up_after`"), "{e}");
        let e = plan(missing).unwrap_err().to_string();
        assert!(
            e.starts_with("p.toml:1: field `dist`") && e.contains("/nonexistent/lockbench/d.csv"),
            "{e}"
        );
    }

    /// The parts of a run in parts (`sim_parallel`) draw streams of their own: a worker's start
    /// from the seed XOR a multiple of its number (`engine::worker::Streams`), so no two
    /// (part, worker) pairs may share one — as they did when a part's seed was the run's XOR a
    /// multiple of its number.
    #[test]
    fn parts_have_seeds_of_their_own() {
        let p = plan("duration = \"1h\"\n").unwrap();
        let mut seen = std::collections::HashSet::new();
        for k in 0..16 {
            let part = p.part(16, k);
            assert_eq!(part.run_time(), Some(std::time::Duration::from_secs(225)));
            for w in 0..64u64 {
                let stream = part.seed ^ w.wrapping_mul(0x9E37_79B9_7F4A_7C15);
                assert!(seen.insert(stream), "part {k}, worker {w}");
            }
        }
        assert_eq!(p.part(16, 0).seed, p.seed);
    }

    /// Defaults fill a minimal profile.
    #[test]
    fn minimal_profile_gets_defaults() {
        let p = plan("workers = 3\n").unwrap();
        assert_eq!(p.workers, 3);
        assert_eq!(p.ttl_ms, 100);
        assert_eq!(p.release, ReleaseMethod::Token.into());
        assert_eq!(p.connection, ConnectionMode::PerWorker);
    }

    /// A typo in a field name is reported with its line and the valid names.
    #[test]
    fn unknown_field_names_line_and_valid_fields() {
        let e = plan("workers = 3\nworkres = 4\n").unwrap_err();
        let s = e.to_string();
        assert!(s.starts_with("p.toml:2:"), "{s}");
        assert!(s.contains("workres") && s.contains("workers"), "{s}");
    }

    /// A bad value names the file, line and field, and what would be valid.
    #[test]
    fn bad_values_name_line_field_and_fix() {
        let e = plan("workers = 3\nttl = \"100\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("p.toml:2: field `ttl`"), "{e}");
        assert!(e.contains("100ms"), "{e}");
        let e = plan("\n\ndist = \"uniform(5ms)\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("p.toml:3: field `dist`"), "{e}");
        let e = plan("busy = \"wait\"\n").unwrap_err().to_string();
        assert!(e.contains("fail-fast") && e.contains("retry"), "{e}");
        let e = plan("workers = \"ten\"\n").unwrap_err().to_string();
        assert!(e.starts_with("p.toml:1: field `workers`"), "{e}");
        let e = plan("keys = 2\nworkers = -3\n").unwrap_err().to_string();
        assert!(e.starts_with("p.toml:2: field `workers`"), "{e}");
        let e = plan("busy = \"fail-fast\"\n[retry]\nbase = \"1\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("p.toml:3: field `retry.base`") && e.contains("1ms"),
            "{e}"
        );
        let e = plan("ttl = \"1500us\"\n").unwrap_err().to_string();
        assert!(e.contains("whole milliseconds"), "{e}");
        let e = plan("duration = \"1s\"\nsections = 5\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not both"), "{e}");
    }

    /// Errors inside `[retry]` and `[[fault]]` point at the key's own line, found in the TOML's
    /// syntax tree: a string that happens to hold `base = …` or `[[fault]]` on a line of its
    /// own (where a text search would stop) is not taken for the key.
    #[test]
    fn errors_inside_tables_name_the_exact_line() {
        let text = "name = \"\"\"\nbase = 1\n[[fault]]\n\"\"\"\nbusy = \"retry\"\n\
                    [retry]\nbase = \"fast\"\n";
        let e = Profile::parse(text, "p.toml")
            .unwrap()
            .plan("p.toml", text, None)
            .unwrap_err();
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(7), Some("retry.base")),
            "{e}"
        );
        let text = "name = \"\"\"\n[[fault]]\n\"\"\"\n[[fault]]\nkind = \"holder-crash\"\n\
                    probability = 0.1\n\n[[fault]]\nkind = \"no-such-fault\"\n";
        let e = Profile::parse(text, "p.toml")
            .and_then(|p| p.plan("p.toml", text, None))
            .unwrap_err();
        assert_eq!(e.line, Some(8), "{e}");
        // A value of the wrong type inside a table names the key with its table.
        let text = "ttl = \"50ms\"\n[retry]\ncap = 5\n";
        let e = Profile::parse(text, "p.toml").unwrap_err();
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(3), Some("retry.cap")),
            "{e}"
        );
    }

    /// A `[retry]` ceiling below its start is refused, naming both (it used to be raised to the
    /// start without a word); a larger start lifts the default ceiling as before.
    #[test]
    fn a_retry_cap_below_its_base_is_refused() {
        let text = "busy = \"retry\"\n[retry]\nbase = \"50ms\"\ncap = \"10ms\"\n";
        let e = Profile::parse(text, "p.toml")
            .unwrap()
            .plan("p.toml", text, None)
            .unwrap_err();
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(4), Some("retry.cap")),
            "{e}"
        );
        assert!(
            e.message.contains("10ms") && e.message.contains("50ms"),
            "{e}"
        );
        let text = "busy = \"retry\"\n[retry]\nbase = \"200ms\"\n";
        let plan = Profile::parse(text, "p.toml")
            .unwrap()
            .plan("p.toml", text, None)
            .unwrap();
        assert!(matches!(
            plan.busy,
            BusyPolicy::Retry {
                base_us: 200_000,
                cap_us: 200_000,
                ..
            }
        ));
    }
}
