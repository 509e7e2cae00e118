//! The flags of `run`, `compare`, `sweep` and `demo`, and their fold with a profile into a
//! validated plan (`WorkloadArgs::plan`): a flag overrides the profile's field of the same name.

use crate::profile::{Plan, Profile, ProfileError};
use crate::runner::RunOptions;
use clap::Args;
use std::path::{Path, PathBuf};

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
    /// Start the workers one by one over this time, e.g. 1s: worker i of N makes its first
    /// attempt at i/N of it (a closed loop; counts in the duration) [profile: ramp_up; default
    /// all at once].
    #[arg(long)]
    pub ramp_up: Option<String>,
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
    /// auto (spawn if redis-server is installed, else memory), spawn, url, memory, sim (the
    /// memory model on a virtual clock: a discrete-event simulation), or spawn-cluster (a
    /// private Redis Cluster) [profile: backend; default auto].
    #[arg(long)]
    pub backend: Option<String>,
    /// Whether --redis names a Redis Cluster node: auto (asked with INFO cluster), yes or no
    /// [profile: cluster; default auto].
    #[arg(long)]
    pub cluster: Option<String>,
    /// Masters of a spawned cluster (--backend spawn-cluster) [profile: cluster_masters;
    /// default 3].
    #[arg(long)]
    pub cluster_masters: Option<usize>,
    /// Replicas per master of a spawned cluster [profile: cluster_replicas; default 1].
    #[arg(long)]
    pub cluster_replicas: Option<usize>,
    /// Allow a non-loopback Redis host (never settable from a profile).
    #[arg(long)]
    pub allow_remote: bool,
    /// Simulated round trip of the memory backend, with unit [profile: memory_rtt; default 0ms].
    #[arg(long)]
    pub memory_rtt: Option<String>,
    /// Round trip of each command in a simulated run (--backend sim), a distribution, e.g.
    /// `constant(0.2ms)` or `empirical(file=results/RUN/events.csv,column=release_latency_us,unit=us)`
    /// [profile: sim_rtt; default lognormal(median=0.1ms,p99=0.4ms)].
    #[arg(long)]
    pub sim_rtt: Option<String>,
    /// The simulated server's time per command, with unit; commands queue behind each other
    /// [profile: sim_service; default 0.005ms].
    #[arg(long)]
    pub sim_service: Option<String>,
    /// How late each timer fires in a simulated run, a distribution: a real runtime's timer
    /// is late by about its tick (tokio: ~1 ms) [profile: sim_timer; default constant(0ms)].
    #[arg(long)]
    pub sim_timer: Option<String>,
    /// Cut a simulated run into N consecutive parts of equal length and simulate them at once,
    /// one thread each (each starts from an empty server, as the run does)
    /// [profile: sim_parallel; default 1].
    #[arg(long, value_name = "N")]
    pub sim_parallel: Option<usize>,
    /// A real run's directory: simulate with the round trips and timer lateness it measured
    /// (from its events.csv; --sim-rtt or --sim-timer, when given, win), to check the
    /// simulation against it or extend it [profile: sim_from].
    #[arg(long)]
    pub sim_from: Option<String>,
    /// Time allowed for one Redis reply before it counts as a timeout error, with unit
    /// [profile: command_timeout; default 10s].
    #[arg(long)]
    pub command_timeout: Option<String>,
    /// End the run when commands have been failing, with none succeeding, for this long (the
    /// server is down, out of memory, or refusing the user); the run then exits with 1
    /// [profile: give_up_after; default 10s].
    #[arg(long)]
    pub give_up_after: Option<String>,
    /// Sections read-modify-write a protected resource (one per lock key, in the same store),
    /// counting accepted, fenced and unsafe writes and lost updates [profile: resource;
    /// default off; on when a variant fences].
    #[arg(long)]
    pub resource: bool,
    /// Fencing of variants that do not name one: off, write or read-write [profile: fencing;
    /// default off].
    #[arg(long)]
    pub fencing: Option<String>,
    /// Lease extension of every variant: off, an interval (10ms) or ttl/N; `METHOD+extend`
    /// variants extend every ttl/3 when this is off [profile: extend; default off].
    #[arg(long)]
    pub extend: Option<String>,
    /// The extension command: script (compare-and-PEXPIRE) or set-ifeq (SET … IFEQ, Valkey
    /// ≥ 8.1 / Redis ≥ 8.4) [profile: extend_with; default script].
    #[arg(long)]
    pub extend_with: Option<String>,
    /// When an extension finds the lock gone: continue (write anyway) or abort (skip the
    /// write) [profile: on_lost; default continue].
    #[arg(long)]
    pub on_lost: Option<String>,
    /// When Redis does not answer (connection or timeout error): fail-closed (refuse the
    /// request) or fail-open (run the section without a lock) [profile: on_unavailable;
    /// default fail-closed].
    #[arg(long)]
    pub on_unavailable: Option<String>,
    /// Stop-the-world pauses of holders, a distribution, e.g.
    /// 'mixture(0.999*constant(0ms),0.001*uniform(1s,3s))' [profile: pause; default none].
    #[arg(long)]
    pub pause: Option<String>,
    /// Where a pause strikes: random or before-write [profile: pause_at; default random].
    #[arg(long)]
    pub pause_at: Option<String>,
    /// Multiply every duration of the workload (TTL, distribution, think time, backoff; not the
    /// run length) by this factor, e.g. 0.01 to measure a 30s-TTL world in seconds; reports show
    /// scaled and original units [profile: time_scale; default 1].
    #[arg(long, allow_negative_numbers = true)]
    pub time_scale: Option<f64>,
    /// Fail the run with exit code 99 when this condition on a summary figure holds for a
    /// variant, e.g. 'overlap_ms > 0', 'lost_updates > 0', 'duration_ms.p99 >= 250'
    /// (repeatable; added to the profile's [thresholds] fail_if).
    #[arg(long = "fail-if")]
    pub fail_if: Vec<String>,
    /// The server binary a private server is started from, e.g. .servers/…/valkey-server
    /// [profile: redis_server; default redis-server on PATH]. compare takes it more than once:
    /// every variant runs on every server, side by side.
    #[arg(long = "redis-server")]
    pub redis_server: Vec<String>,
    /// A fault, KIND[@AT[+LENGTH]][,key=value…] (repeatable; replaces the profile's [[fault]]
    /// list): server-pause@1s+500ms, server-restart@1s+200ms (spawned server),
    /// latency@0s+2s,delay=20ms,jitter=5ms, partition@1s+1s,
    /// holder-crash,probability=0.05,restart=100ms. Times are from each variant's start.
    #[arg(long = "fault")]
    pub fault: Vec<String>,
    /// How a lock is taken: set-nx-px (one command) or setnx-expire (SETNX then PEXPIRE, the
    /// anti-pattern) [profile: acquire; default set-nx-px].
    #[arg(long)]
    pub acquire: Option<String>,
    /// Probability that a holder dies right after acquiring (between SETNX and PEXPIRE with
    /// setnx-expire), leaving its lock unreleased [profile: crash_between; default 0].
    #[arg(long, allow_negative_numbers = true)]
    pub crash_between: Option<f64>,
    /// The open arrival model: requests arrive at a rate whether or not earlier ones are done,
    /// each taking the lock once (fail-fast) or by the busy policy: constant(1000/s),
    /// poisson(1000/s) or ramp(100/s, 1000/s) over the run's duration. Latency is measured
    /// from each request's intended arrival [profile: arrivals; default: a closed loop of
    /// workers].
    #[arg(long)]
    pub arrivals: Option<String>,
    /// With --arrivals: requests in flight at most (each its own client) [profile:
    /// max_in_flight; default: --workers].
    #[arg(long)]
    pub max_in_flight: Option<usize>,
    /// How a section waits for its end: tokio (its millisecond timer: ~1 ms late, cheap) or
    /// precise (the timer to 2.5 ms before the end, then yielding until it: tens of µs late,
    /// at the cost of a busy core) [profile: timer; default tokio].
    #[arg(long)]
    pub timer: Option<String>,
    /// all (a row per section in events.csv) or none (no events.csv and no charts: for a long
    /// simulated run; every figure is still in summary.json and the .hgrm/.hlog files)
    /// [profile: events; default all].
    #[arg(long)]
    pub events: Option<String>,
    /// The lock kind: single (one server) or redlock (a majority of --instances independent
    /// servers, redsync's algorithm) [profile: lock; default single].
    #[arg(long)]
    pub lock: Option<String>,
    /// Redlock: private servers to spawn [profile: instances; default 5].
    #[arg(long)]
    pub instances: Option<usize>,
    /// Redlock: an existing server, one per instance (repeat the flag; loopback only unless
    /// --allow-remote) [profile: redlock_urls].
    #[arg(long = "redlock-url")]
    pub redlock_url: Vec<String>,
    /// Redlock: per-instance timeout of an acquisition, with unit [profile: redlock_timeout;
    /// default 0.05 × TTL, as redsync].
    #[arg(long)]
    pub redlock_timeout: Option<String>,
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
    /// Many agents, one run: this process is agent INDEX of COUNT (`0/2`, `1/2`), each started
    /// with the same profile, --run-id and --redis URL; they meet at a start barrier on the
    /// server, agent i runs workers i·W .. (i+1)·W, --sections is shared among them, and each
    /// writes its own directory [default: results/<run-id>/agent-<i>] for `lockbench merge`.
    #[arg(long, value_name = "INDEX/COUNT", conflicts_with_all = ["agent_index", "agents"])]
    pub agent: Option<String>,
    /// This agent's index, from 0 [default: $JOB_COMPLETION_INDEX, the index a Kubernetes
    /// Indexed Job gives each pod].
    #[arg(long, value_name = "INDEX")]
    pub agent_index: Option<String>,
    /// How many agents the run has [default: $LOCKBENCH_AGENTS].
    #[arg(long, value_name = "COUNT")]
    pub agents: Option<String>,
    /// The run's id, the same for every agent (required with two or more): keys are
    /// lockbench:<run-id>:…, so the agents contend for the same locks. Letters, digits, . _ -.
    #[arg(long)]
    pub run_id: Option<String>,
    /// How long an agent waits at a barrier for the others (to arrive, to start, to finish),
    /// with unit [default: 2m].
    #[arg(long)]
    pub barrier_timeout: Option<String>,
}

impl RunArgs {
    /// The agent flags as given.
    pub fn agent_flags(&self) -> crate::agent::AgentFlags {
        crate::agent::AgentFlags {
            agent: self.agent.clone(),
            agent_index: self.agent_index.clone(),
            agents: self.agents.clone(),
            run_id: self.run_id.clone(),
            barrier_timeout: self.barrier_timeout.clone(),
        }
    }
}

/// `compare`.
#[derive(Debug, Args, Clone)]
pub struct CompareArgs {
    #[command(flatten)]
    /// Workload.
    pub workload: WorkloadArgs,
    /// Release methods to compare, comma-separated, e.g. del,token (`--releases` is an alias)
    /// [profile: releases; default del,token].
    #[arg(long = "release", visible_alias = "releases", value_delimiter = ',')]
    pub release: Option<Vec<String>>,
}

/// `sweep`.
#[derive(Debug, Args, Clone)]
pub struct SweepArgs {
    #[command(flatten)]
    /// Workload; its `--ttl` takes a list (`100ms,200ms,1s`) or a log-spaced range
    /// (`100ms..2s:10`).
    pub workload: WorkloadArgs,
    /// Release methods, comma-separated, e.g. del,token (`--releases` is an alias)
    /// [profile: releases; default del,token].
    #[arg(long = "release", visible_alias = "releases", value_delimiter = ',')]
    pub release: Option<Vec<String>>,
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
            ramp_up: self.ramp_up.clone(),
            busy: self.busy.clone(),
            seed: self.seed,
            connection: self.connection.clone(),
            redis: self.redis.clone(),
            backend: self.backend.clone(),
            cluster: self.cluster.clone(),
            cluster_masters: self.cluster_masters,
            cluster_replicas: self.cluster_replicas,
            memory_rtt: self.memory_rtt.clone(),
            sim_rtt: self.sim_rtt.clone(),
            sim_service: self.sim_service.clone(),
            sim_timer: self.sim_timer.clone(),
            sim_from: self.sim_from.clone(),
            sim_parallel: self.sim_parallel,
            command_timeout: self.command_timeout.clone(),
            give_up_after: self.give_up_after.clone(),
            resource: self.resource.then_some(true),
            fencing: self.fencing.clone(),
            extend: self.extend.clone(),
            extend_with: self.extend_with.clone(),
            on_lost: self.on_lost.clone(),
            on_unavailable: self.on_unavailable.clone(),
            pause: self.pause.clone(),
            pause_at: self.pause_at.clone(),
            time_scale: self.time_scale,
            acquire: self.acquire.clone(),
            crash_between: self.crash_between,
            arrivals: self.arrivals.clone(),
            max_in_flight: self.max_in_flight,
            timer: self.timer.clone(),
            events: self.events.clone(),
            lock: self.lock.clone(),
            instances: self.instances,
            redlock_urls: (!self.redlock_url.is_empty()).then(|| self.redlock_url.clone()),
            redlock_timeout: self.redlock_timeout.clone(),
            redis_server: match self.redis_server.len() {
                0 => None,
                1 => Some(crate::profile::OneOrMany::One(self.redis_server[0].clone())),
                _ => Some(crate::profile::OneOrMany::Many(self.redis_server.clone())),
            },
            ..Profile::default()
        }
    }

    /// Whether the run measures a Redis server on this machine: spawned (`spawn`,
    /// `spawn-cluster`, `auto` with redis-server on PATH, spawned Redlock instances) or given by
    /// a loopback or Unix-socket URL. Read before the profile is validated (a bad profile is
    /// reported by the command itself): anything unreadable counts as not local.
    pub(crate) fn server_on_this_machine(&self) -> bool {
        let file = match &self.profile {
            Some(path) => match Profile::load(path) {
                Ok((p, _)) => p,
                Err(_) => return false,
            },
            None => Profile::default(),
        };
        let p = file.overlay(self.as_profile());
        let local_url = |u: &String| {
            crate::target::check_url(u).is_ok_and(|info| match info.addr() {
                redis::ConnectionAddr::Tcp(host, _)
                | redis::ConnectionAddr::TcpTls { host, .. } => {
                    crate::target::is_loopback_host(host)
                }
                redis::ConnectionAddr::Unix(_) => true,
                _ => false,
            })
        };
        let urls: Vec<&String> = p
            .redis
            .iter()
            .chain(p.redlock_urls.iter().flatten())
            .collect();
        match p.backend.as_deref() {
            Some("memory" | "sim") => false,
            Some("spawn" | "spawn-cluster") => true,
            _ if p.redis_server.is_some() => true,
            _ if !urls.is_empty() => urls.into_iter().all(local_url),
            Some("url") => false,
            _ => crate::store::spawn::redis_server_available(),
        }
    }

    /// Loads the profile, applies the flags and validates. Errors in a flag name the flag.
    pub fn plan(&self, extra: Profile) -> Result<Plan, ProfileError> {
        let mut flags = self.as_profile().overlay(extra);
        if !self.fault.is_empty() {
            let mut list = Vec::new();
            for f in &self.fault {
                list.push(
                    crate::model::fault::Fault::parse_flag(f).map_err(|m| ProfileError {
                        file: "command line".to_string(),
                        line: None,
                        message: format!("--fault {m}"),
                        field: Some("fault".to_string()),
                    })?,
                );
            }
            flags.fault = Some(list);
        }
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
        let mut plan = merged
            .plan(&file, &source, base.as_deref())
            .and_then(|mut plan| {
                crate::backend::check_plan_io(&mut plan, &merged, &file, &source, base.as_deref())?;
                Ok(plan)
            })
            .map_err(|e| {
                // A field that came from a flag is reported as that flag.
                match &e.field {
                    Some(f) if flag_was_set(&flags, f) => ProfileError {
                        file: "command line".to_string(),
                        line: None,
                        message: if f == "fault" {
                            format!("--{}", e.message)
                        } else {
                            e.message.replacen(
                                &format!("field `{f}`"),
                                &format!("--{}", f.replace('_', "-")),
                                1,
                            )
                        },
                        field: e.field.clone(),
                    },
                    _ => e,
                }
            })?;
        plan.allow_remote = self.allow_remote;
        for expr in &self.fail_if {
            let t =
                crate::analysis::threshold::Threshold::parse(expr).map_err(|m| ProfileError {
                    file: "command line".to_string(),
                    line: None,
                    message: format!("--fail-if {m}"),
                    field: Some("thresholds".to_string()),
                })?;
            plan.fail_if.push(t);
        }
        if !self.quiet {
            for w in &plan.warnings {
                eprintln!("warning: {w}");
            }
        }
        Ok(plan)
    }

    /// How a run of this command reports (output directory, quiet, progress).
    pub fn options(&self, command: &str) -> RunOptions {
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
