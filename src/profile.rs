//! Profiles: TOML files describing a workload, validated into a [`Plan`] before any I/O.
//! The plan is in parts, one per concern, each checked by a file of `src/profile/`: workload,
//! protection, backend (and redlock), timeouts, faults, sim.
//!
//! ```toml
//! workers = 50                 # concurrent clients
//! keys = 2                     # lock keys they contend for
//! ttl = "100ms"                # PX of every acquisition
//! duration = "5s"              # run length by time ... (or sections = 10000)
//! dist = "lognormal(median=20ms,p99=120ms)"   # critical-section durations
//! think = "constant(0ms)"      # pause between a release and the next attempt
//! busy = "fail-fast"           # or "retry" (exponential backoff, full jitter)
//! release = "token"            # del | token | delex | script (release_script = "x.lua")
//! connection = "per-worker"    # or "shared"
//! seed = 42
//! ```
//!
//! Every error names the file, the line and the field, and says what would be valid.

mod backend;
mod check;
mod faults;
mod plan;
mod protection;
mod redlock;
mod scripts;
mod sim;
#[cfg(test)]
mod tests;
mod timeouts;
mod workload;

pub(crate) use crate::model::plan::Acquire;
pub(crate) use crate::model::plan::OnLost;
pub(crate) use crate::model::plan::OnUnavailable;
pub(crate) use backend::BackendChoice;
pub(crate) use backend::BackendPlan;
pub(crate) use backend::ClusterMode;
pub(crate) use backend::ConnectionMode;
pub(crate) use faults::FaultPlan;
pub use plan::Plan;
pub(crate) use plan::SHARED_HOLDERS_PER_PROCESS;
pub(crate) use sim::SimPlan;
pub(crate) use workload::Busy;
pub(crate) use workload::BusyPolicy;
pub(crate) use workload::Stop;
pub(crate) use workload::Timer;
pub(crate) use workload::Workload;

use crate::dist::Dist;
use crate::model::fault::PauseAt;
use crate::model::release::ExtendCommand;
use crate::model::units::DurationText;
use crate::model::variant::Fencing;

use crate::analysis::threshold::Threshold;
use crate::model::fault::Fault;
use check::{Check, key_at, locate};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Smallest accepted `time_scale` (a million times faster than real).
pub(crate) const MIN_TIME_SCALE: f64 = 1e-6;
/// Largest accepted `time_scale` (a million times slower than real).
pub(crate) const MAX_TIME_SCALE: f64 = 1e6;

/// Declares [`Profile`] once: each field with its doc (the TOML key's and the flag's help, and
/// the book's reference pages), its serde and clap attributes, and its default — written after
/// the field as a profile would write it (`= "100ms"`, `= 10`), or described in words
/// (`=> "a closed loop of workers"`) where no value stands for it. From the same list come the
/// code that must visit every field (`is_set`, `overlay`), so none can be missed, the table of
/// defaults ([`Profile::DEFAULTS`], which the help and the book print) and, for each field with
/// a default value, an accessor of the same name that applies it (`profile.ttl()`).
macro_rules! declare_profile {
    (
        $(#[$meta:meta])*
        pub struct Profile { $(
            $(#[$field_meta:meta])*
            pub $field:ident : $ty:ty $(= $default:literal)? $(=> $described:literal)?,
        )* }
    ) => {
        $(#[$meta])*
        pub struct Profile { $( $(#[$field_meta])* pub $field: $ty, )* }

        impl Profile {
            /// Each field's default as the help and the book print it (field, text, whether
            /// the text is a value a profile could write or a description in words).
            pub const DEFAULTS: &[FieldDefault] = &[ $(
                $( FieldDefault { field: stringify!($field), written: stringify!($default), value: true }, )?
                $( FieldDefault { field: stringify!($field), written: $described, value: false }, )?
            )* ];

            $( $(
                #[doc = concat!("`", stringify!($field), "`, or its default (`", stringify!($default), "`).")]
                pub fn $field(&self) -> <$ty as Setting>::Value {
                    self.$field.value_or(stringify!($field), stringify!($default))
                }
            )? )*

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

/// A field's default, from [`Profile::DEFAULTS`].
#[derive(Debug, Clone, Copy)]
pub struct FieldDefault {
    /// The profile key.
    pub field: &'static str,
    /// The default as written at the field: a TOML value (`"100ms"`, `10`), or words (`a
    /// closed loop of workers`).
    written: &'static str,
    /// Whether `written` is a value (`[default 100ms]`) rather than words (`[default: …]`).
    pub value: bool,
}

impl FieldDefault {
    /// The default without a TOML string's quotes: `100ms`, `10`, `a closed loop of workers`.
    pub fn text(&self) -> &'static str {
        self.written.trim_matches('"')
    }

    /// As the help and the book print it: `[default 100ms]`, `[default: a closed loop of workers]`.
    pub fn bracketed(&self) -> String {
        match self.value {
            true => format!("[default {}]", self.text()),
            false => format!("[default: {}]", self.text()),
        }
    }
}

impl Profile {
    /// The default value of `field` as a profile writes it (`100ms`); a field without one is a
    /// bug of the caller.
    pub fn default_value(field: &str) -> &'static str {
        match Self::default_of(field) {
            Some(d) if d.value => d.text(),
            _ => panic!("profile field `{field}` has no default value"),
        }
    }

    /// The default of `field`, as the help and the book print it.
    pub fn default_of(field: &str) -> Option<&'static FieldDefault> {
        Self::DEFAULTS.iter().find(|d| d.field == field)
    }

    /// Appends each argument's default from [`Profile::DEFAULTS`] to its help: the defaults are
    /// written once, at the fields (`#[command(mut_args(...))]` of the profile's flags).
    pub fn help_with_default(arg: clap::Arg) -> clap::Arg {
        let Some(d) = Self::default_of(arg.get_id().as_str()) else {
            return arg;
        };
        let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
        arg.help(format!("{help} {}", d.bracketed()))
    }
}

/// A profile field with a default: its value, or the default applied.
pub trait Setting {
    /// The field's type once its default is applied.
    type Value;
    /// The value set, or `default` (written as in a profile: `"100ms"`, `10`) read as the
    /// profile reads it.
    fn value_or(&self, field: &str, default: &str) -> Self::Value;
}

impl<T: serde::de::DeserializeOwned + Clone> Setting for Option<T> {
    type Value = T;
    fn value_or(&self, field: &str, default: &str) -> T {
        #[derive(Deserialize)]
        struct One<T> {
            v: T,
        }
        match self {
            Some(v) => v.clone(),
            None => {
                toml::from_str::<One<T>>(&format!("v = {default}"))
                    .unwrap_or_else(|e| panic!("the default of `{field}` does not parse: {e}"))
                    .v
            }
        }
    }
}

declare_profile! {
/// A profile as written (every field optional; flags fill or override them).
#[derive(Debug, Clone, Default, Deserialize, Serialize, clap::Args)]
#[serde(deny_unknown_fields)]
#[command(mut_args(Profile::help_with_default))]
pub struct Profile {
    /// Free-text name shown in reports.
    #[arg(skip)]
    pub name: Option<String>,
    /// What the profile models and how it is scaled.
    #[arg(skip)]
    pub description: Option<String>,
    /// Concurrent workers (clients).
    #[arg(long)]
    pub workers: Option<usize> = 10,
    /// Lock keys the workers contend for.
    #[arg(long)]
    pub keys: Option<usize> = 1,
    /// Fraction (0–1) of attempts aimed at key 0, the hot key; the rest pick uniformly.
    #[arg(long, allow_negative_numbers = true)]
    pub hot_key: Option<f64> => "none, uniform",
    /// Lock TTL sent as PX, whole milliseconds, with unit, e.g. 100ms, 30s.
    #[arg(long)]
    pub ttl: Option<DurationText> = "100ms",
    /// Run length by time, with unit, e.g. 10s.
    #[arg(long, conflicts_with = "sections")]
    pub duration: Option<DurationText> = "5s",
    /// Run length by number of sections begun.
    #[arg(long)]
    pub sections: Option<u64>,
    /// Critical-section duration distribution, e.g. 'constant(2ms)', 'uniform(70ms,110ms)',
    /// 'exponential(mean=30ms)', 'lognormal(median=20ms,p99=120ms)',
    /// 'mixture(0.99*constant(5ms),0.01*uniform(1s,3s))',
    /// 'empirical(file=d.csv,column=durationMs)'.
    #[arg(long)]
    pub dist: Option<DistText> = "constant(10ms)",
    /// Think time between a release and the next attempt, a distribution.
    #[arg(long)]
    pub think: Option<DistText> = "constant(0ms)",
    /// Start the workers one by one over this time, e.g. 1s: worker i of N makes its first attempt
    /// at i/N of it (a closed loop; counts in the duration).
    #[arg(long)]
    pub ramp_up: Option<DurationText> => "all at once",
    /// What a worker does when the lock is busy: fail-fast (count a rejection) or retry
    /// (exponential backoff with full jitter, see the profile's [retry] table).
    #[arg(long)]
    pub busy: Option<Busy> = "fail-fast",
    /// Retry settings when `busy = "retry"`.
    #[arg(skip)]
    pub retry: Option<RetryProfile>,
    /// CI gates (`[thresholds]`).
    #[arg(skip)]
    pub thresholds: Option<ThresholdsProfile>,
    /// Release method for `run`: del, token, delex or script (your release_script), with +extend,
    /// +fence….
    #[arg(skip)]
    pub release: Option<String> = "token",
    /// Release methods for `compare`.
    #[arg(skip)]
    pub releases: Option<Vec<String>>,
    /// Connection mode: per-worker (independent clients, a socket each) or shared (one multiplexed
    /// socket, like one service process).
    #[arg(long)]
    pub connection: Option<ConnectionMode> = "per-worker",
    /// Seed of every random choice; the same seed gives the same intended durations.
    #[arg(long)]
    pub seed: Option<u64> = 1,
    /// auto (spawn if redis-server is installed, else memory), spawn, url, memory, sim (the memory
    /// model on a virtual clock: a discrete-event simulation), or spawn-cluster (a private Redis
    /// Cluster).
    #[arg(long)]
    pub backend: Option<BackendChoice> = "auto",
    /// Redis URL (redis://, rediss://, unix://; user/password allowed, never printed). Implies
    /// --backend url.
    #[serde(serialize_with = "ser_redacted")]
    #[arg(long)]
    pub redis: Option<String>,
    /// Simulated round trip of the memory backend, with unit.
    #[arg(long)]
    pub memory_rtt: Option<DurationText> = "0ms",
    /// Round trip of each command in a simulated run (--backend sim), a distribution, e.g.
    /// `constant(0.2ms)` or
    /// `empirical(file=results/RUN/events.csv,column=release_latency_us,unit=us)`.
    #[arg(long)]
    pub sim_rtt: Option<DistText> = "lognormal(median=0.1ms,p99=0.4ms)",
    /// The simulated server's time per command, with unit; commands queue behind each other.
    #[arg(long)]
    pub sim_service: Option<DurationText> = "0.005ms",
    /// How late each timer fires in a simulated run, a distribution: a real runtime's timer is late
    /// by about its tick (tokio: ~1 ms).
    #[arg(long)]
    pub sim_timer: Option<DistText> = "constant(0ms)",
    /// A real run's directory: simulate with the round trips and timer lateness it measured (from
    /// its events.csv; --sim-rtt or --sim-timer, when given, win), to check the simulation against
    /// it or extend it.
    #[arg(long)]
    pub sim_from: Option<String>,
    /// Cut a simulated run into N consecutive parts of equal length and simulate them at once, one
    /// thread each (each starts from an empty server, as the run does).
    #[arg(long, value_name = "N")]
    pub sim_parallel: Option<usize> = 1,
    /// Time allowed for one Redis reply before it counts as a timeout error, with unit.
    #[arg(long)]
    pub command_timeout: Option<DurationText> = "10s",
    /// Time allowed to open a connection.
    #[arg(skip)]
    pub connect_timeout: Option<DurationText> = "5s",
    /// End the run when commands have been failing, with none succeeding, for this long (the server
    /// is down, out of memory, or refusing the user); the run then exits with 1.
    #[arg(long)]
    pub give_up_after: Option<DurationText> = "10s",
    /// Sections read-modify-write a protected resource (one per lock key, on a store of its own),
    /// counting accepted, fenced and unsafe writes and lost updates.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub resource: Option<bool> => "off; on when a variant fences",
    /// Where the protected resource lives: a Redis URL of its own, or "shared" (on the lock's
    /// store, where a restart of the lock's server erases it too).
    #[serde(serialize_with = "ser_redacted")]
    #[arg(long)]
    pub resource_redis: Option<String> => "a private server lockbench starts beside a spawned or URL lock server",
    /// Fencing of variants that do not name one: off, write or read-write.
    #[arg(long)]
    pub fencing: Option<Fencing> = "off",
    /// Lease extension of every variant: off, an interval (10ms) or ttl/N; `METHOD+extend` variants
    /// extend every ttl/3 when this is off.
    #[arg(long)]
    pub extend: Option<String> = "off",
    /// The extension command: script (compare-and-PEXPIRE) or set-ifeq (SET … IFEQ, Valkey ≥ 8.1 /
    /// Redis ≥ 8.4).
    #[arg(long)]
    pub extend_with: Option<ExtendCommand> = "script",
    /// When an extension finds the lock gone: continue (write anyway) or abort (skip the write).
    #[arg(long)]
    pub on_lost: Option<OnLost> = "continue",
    /// Your own Lua release script, run by the `script` release method (EVALSHA with KEYS[1] = lock
    /// key, ARGV[1] = token, ARGV[2] = TTL ms; reply 1 deleted, 0 nothing deleted, -1 held by
    /// another). A relative path in a profile starts at its directory.
    #[arg(long)]
    pub release_script: Option<String>,
    /// Your own Lua acquire script for the `script` release method (reply 1 or OK acquired, 0 or
    /// nil busy).
    #[arg(long)]
    pub acquire_script: Option<String> => "SET key token NX PX ttl",
    /// Your own Lua extend script for `script+extend` (reply 1 re-armed, 0 lost).
    #[arg(long)]
    pub extend_script: Option<String> => "lockbench's compare-and-PEXPIRE",
    /// Your own release as commands for the `script` method, each a round trip of its own, `;`
    /// between them: 'GET {key} == {token}; DEL {key}' (placeholders {key}, {token}, {ttl_ms},
    /// {ttl_s}; `== VALUE` goes on only if the reply is VALUE, else reads 0). The last reply is
    /// read as a release script's. Arguments are split as redis-cli splits them (quotes, escapes);
    /// no command that runs a script (EVAL, FCALL, SCRIPT, FUNCTION…): give a script with
    /// --release-script instead.
    #[arg(long)]
    pub release_commands: Option<Vec<String>>,
    /// Your own acquisition as commands (as --release-commands; e.g. 'SET {key} {token} NX EX
    /// {ttl_s}').
    #[arg(long)]
    pub acquire_commands: Option<Vec<String>> => "SET key token NX PX ttl",
    /// Your own extension as commands for `script+extend` (as --release-commands; e.g. 'GET {key}
    /// == {token}; PEXPIRE {key} {ttl_ms}').
    #[arg(long)]
    pub extend_commands: Option<Vec<String>>,
    /// When Redis does not answer (connection or timeout error): fail-closed (refuse the request)
    /// or fail-open (run the section without a lock).
    #[arg(long)]
    pub on_unavailable: Option<OnUnavailable> = "fail-closed",
    /// Stop-the-world pauses of holders, a distribution, e.g.
    /// 'mixture(0.999*constant(0ms),0.001*uniform(1s,3s))'.
    #[arg(long)]
    pub pause: Option<DistText> => "none",
    /// Where a pause strikes: random or before-write.
    #[arg(long)]
    pub pause_at: Option<PauseAt> = "random",
    /// Multiply every duration of the workload (TTL, distribution, think time, backoff; not the run
    /// length) by this factor, e.g. 0.01 to measure a 30s-TTL world in seconds; reports show scaled
    /// and original units.
    #[arg(long, allow_negative_numbers = true)]
    pub time_scale: Option<f64> = 1,
    /// The fault schedule (`[[fault]]` entries).
    #[arg(skip)]
    pub fault: Option<Vec<Fault>>,
    /// How a lock is taken: set-nx-px (one command) or setnx-expire (SETNX then PEXPIRE, the
    /// anti-pattern).
    #[arg(long)]
    pub acquire: Option<Acquire> = "set-nx-px",
    /// Probability that a holder dies right after acquiring (between SETNX and PEXPIRE with
    /// setnx-expire), leaving its lock unreleased.
    #[arg(long, allow_negative_numbers = true)]
    pub crash_between: Option<f64> = 0,
    /// The server binary a private server is started from, e.g. .servers/…/valkey-server. compare
    /// takes it more than once: every variant runs on every server, side by side.
    #[serde(default, deserialize_with = "one_or_many")]
    #[arg(long = "redis-server")]
    pub redis_server: Option<Vec<String>> => "redis-server on PATH",
    /// The open arrival model: requests arrive at a rate whether or not earlier ones are done, each
    /// taking the lock once (fail-fast) or by the busy policy: constant(1000/s), poisson(1000/s) or
    /// ramp(100/s, 1000/s) over the run's duration. Latency is measured from each request's
    /// intended arrival.
    #[arg(long)]
    pub arrivals: Option<String> => "a closed loop of workers",
    /// With --arrivals: requests in flight at most (each its own client).
    #[arg(long)]
    pub max_in_flight: Option<usize> => "--workers",
    /// Holders of a lock library of another language (--release redis-py, redis-semaphore…) that
    /// share one driver process, each with its own connection and lock objects (a thread in
    /// Python, an async task in Node). 1 is a process per holder, which a holder's pause or crash
    /// needs: its SIGSTOP or SIGKILL must reach that holder alone.
    #[arg(long, value_name = "N")]
    pub holders_per_process: Option<usize> => "1 where a holder pauses or crashes, else 100",
    /// How a section waits for its end: tokio (its millisecond timer: ~1 ms late, cheap) or precise
    /// (the timer to 2.5 ms before the end, then yielding until it: tens of µs late, at the cost of
    /// a busy core).
    #[arg(long)]
    pub timer: Option<Timer> = "tokio",
    /// all (a row per section in events.csv) or none (no events.csv and no charts: for a long
    /// simulated run; every figure is still in summary.json and the .hgrm/.hlog files).
    #[arg(long)]
    pub events: Option<Events> = "all",
    /// Whether --redis names a Redis Cluster node: auto (asked with INFO cluster), yes or no.
    #[arg(long)]
    pub cluster: Option<ClusterMode> = "auto",
    /// Masters of a spawned cluster (--backend spawn-cluster).
    #[arg(long)]
    pub cluster_masters: Option<usize> = 3,
    /// Replicas per master of a spawned cluster.
    #[arg(long)]
    pub cluster_replicas: Option<usize> = 1,
    /// The lock kind: single (one server) or redlock (a majority of --instances independent
    /// servers, redsync's algorithm).
    #[arg(long)]
    pub lock: Option<LockKind> = "single",
    /// Redlock: private servers to spawn.
    #[arg(long)]
    pub instances: Option<usize> = 5,
    /// Redlock: an existing server, one per instance (repeat the flag; loopback only unless
    /// --allow-remote).
    #[serde(serialize_with = "ser_redacted_list")]
    #[arg(long = "redlock-url")]
    pub redlock_urls: Option<Vec<String>>,
    /// Redlock: per-instance timeout of an acquisition, with unit.
    #[arg(long)]
    pub redlock_timeout: Option<DurationText> => "0.05 × TTL, as redsync",
    /// Serve live metrics for Prometheus at this address while `run` or `compare` goes (`/metrics`;
    /// OpenMetrics when asked): a port alone (9464, :9464) binds 127.0.0.1, port 0 any free port
    /// (printed on stderr and recorded in manifest.json); a non-loopback address needs
    /// --allow-remote. The endpoint closes once the run's files are written.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String> => "off",
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

/// A field written as one value or a list of them.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub(crate) enum OneOrMany {
    /// `field = "x"`.
    One(String),
    /// `field = ["x", "y"]`.
    Many(Vec<String>),
}

impl OneOrMany {
    /// The values, in order.
    pub(crate) fn to_vec(&self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s.clone()],
            OneOrMany::Many(v) => v.clone(),
        }
    }
}

/// A distribution as a profile or a flag writes it (`lognormal(median=20ms,p99=120ms)`):
/// parsed once at the door (the files it names not yet read: [`Profile::plan`] reads them
/// last), and its text, kept so that what lockbench writes back is what the user wrote. Read
/// by clap through `FromStr`, by a profile through `Deserialize` (the same `FromStr`); it
/// serializes as its text.
#[derive(Debug, Clone, PartialEq)]
pub struct DistText {
    dist: Dist,
    text: String,
}

impl DistText {
    /// The distribution, its files not yet read.
    pub fn into_dist(self) -> Dist {
        self.dist
    }
}

impl std::str::FromStr for DistText {
    /// Where in the text, and what would be valid.
    type Err = crate::dist::DistError;
    fn from_str(text: &str) -> Result<Self, crate::dist::DistError> {
        Ok(DistText {
            dist: Dist::parse(text)?,
            text: text.to_string(),
        })
    }
}

impl std::fmt::Display for DistText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for DistText {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for DistText {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// The `[thresholds]` table.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ThresholdsProfile {
    /// Conditions on summary figures, e.g. `"overlap_ms > 0"`: a variant for which one holds
    /// fails the gate (exit 99).
    pub fail_if: Option<Vec<Threshold>>,
}

/// `[retry]` table.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RetryProfile {
    /// First backoff ceiling.
    pub base: Option<DurationText>,
    /// Largest backoff ceiling.
    pub cap: Option<DurationText>,
    /// Give up after waiting this long for one acquisition.
    pub max_wait: Option<DurationText>,
}

impl RetryProfile {
    /// `base`'s default, as a profile writes it.
    const BASE: &str = "\"1ms\"";
    /// `cap`'s default: below a larger `base`, it follows it.
    const CAP: &str = "\"100ms\"";
    /// `max_wait`'s default.
    const MAX_WAIT: &str = "\"5s\"";
}

/// Whether every section gets a row of `events.csv` (`events`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Events {
    /// A row per section, and the charts drawn from them.
    All,
    /// No `events.csv` and no charts: every figure is still in `summary.json`.
    None,
}

/// The lock kind (`lock`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum LockKind {
    /// One server.
    Single,
    /// A majority of independent servers, redsync's algorithm.
    Redlock,
}

pub(crate) use crate::model::spelling;

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
crate::exit::classify!(ProfileError => BadInput);

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
        let text =
            crate::inputs::read_to_string(path, crate::inputs::FileKind::Profile).map_err(|e| {
                ProfileError {
                    file: file.clone(),
                    line: None,
                    field: None,
                    message: e.to_string(),
                }
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
    /// distributions name are read last. Each part of the plan is checked by a function of its
    /// own (`plan_workload`, `plan_protection`, …, in `src/profile/`).
    pub fn plan(
        &self,
        file: &str,
        source: &str,
        base: Option<&Path>,
    ) -> Result<Plan, ProfileError> {
        let cx = Check { file, source, base };
        let mut warnings = Vec::new();
        let workload = self.plan_workload(&cx, &mut warnings)?;
        let ttl_warnings = warnings.len();
        let protection = self.plan_protection(&cx, workload.ttl_ms * 1000)?;
        let backend = self.plan_backend(&cx)?;
        if backend.resource_redis.is_some() && !protection.resource {
            return Err(cx.err(
                "resource_redis",
                "says where the protected resource lives, but this run has none: add resource = true (--resource), or drop it".to_string(),
            ));
        }
        let timeouts = self.plan_timeouts(&cx)?;
        let faults = self.plan_faults(&cx)?;
        let sim = self.plan_sim(&cx)?;
        // Each condition was parsed as the profile was read (`Threshold`'s `Deserialize`).
        let fail_if = self
            .thresholds
            .as_ref()
            .and_then(|t| t.fail_if.clone())
            .unwrap_or_default();
        let events = self.events() == Events::All;
        let metrics = match &self.metrics {
            Some(a) => Some(crate::metrics::addr::parse_addr(a).map_err(|m| cx.err("metrics", m))?),
            None => None,
        };
        let mut plan = Plan {
            name: self.name.clone().unwrap_or_else(|| "unnamed".to_string()),
            metrics,
            seed: self.seed(),
            workload,
            protection,
            backend,
            timeouts,
            faults,
            sim,
            events,
            fail_if,
            warnings,
            ttl_warnings,
        };
        self.check_sim_parallel(&cx, &plan)?;
        faults::check_schedule(&plan, &cx)?;
        let script_files = self.plan_scripts(&cx, &plan)?;
        // Every field is valid: only now read the files the distributions name.
        let scale = plan.workload.time_scale;
        workload::load_files(&mut plan.workload, &cx, &mut plan.warnings)?;
        sim::load_files(&mut plan.sim, self, &cx)?;
        faults::load_files(&mut plan.faults, &cx, scale)?;
        if let Some(files) = script_files {
            plan.protection.scripts = Some(scripts::load(&cx, files)?);
        }
        self.plan_redlock(&mut plan)
            .map_err(|(f, m)| cx.err(f, m))?;
        Ok(plan)
    }

    /// The redlock fields ([`crate::quorum::plan_of`]): a redlock run compares token
    /// variants only, so an unset `releases` defaults to `release` alone.
    fn plan_redlock(&self, plan: &mut Plan) -> Result<(), (&'static str, String)> {
        if self.lock() == LockKind::Redlock && self.releases.is_none() {
            plan.protection.releases = vec![plan.protection.release];
        }
        plan.backend.redlock = redlock::plan_of(self, plan)?;
        if let Some(r) = &plan.backend.redlock {
            plan.warnings.extend(redlock::warnings(r));
        }
        Ok(())
    }
}
