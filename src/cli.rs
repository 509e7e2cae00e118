//! The command line. Flags are folded into the profile and validated into a [`Plan`](crate::profile::Plan) before
//! any I/O, so a bad flag fails exactly like a bad profile field.

use crate::commands;
use crate::commands::args::WorkloadArgs;
use crate::commands::args::{CompareArgs, RunArgs, SweepArgs};
use crate::commands::demo::DemoArgs;
use crate::engine::RuntimeThreads;
use clap::{Parser, Subcommand};

/// Load-tests Redis locks and measures what goes wrong when critical sections outlast their TTL.
#[derive(Debug, Parser)]
#[command(name = "lockbench", version, about, long_about = None, after_help = crate::exit::TABLE)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// Threads of the async runtime [default: one per core, but one core fewer when the
    /// server measured runs on this machine (spawned, or a loopback URL): measured on 2 cores,
    /// a second runtime thread competing with redis-server for its core cost up to a third of
    /// the lock-cycle rate; one with --timer precise, whose holders were measured late on two].
    /// One thread is tokio's current-thread scheduler, which batches a
    /// shared connection's commands into one write. `manifest.json` records the count a run
    /// used.
    #[arg(long, global = true)]
    pub threads: Option<usize>,
}

/// Why a run with the precise timer and no `--threads` has one runtime thread (the manifest's
/// `runtime_threads_why`). With frequent section ends (a thousand holders) the precise timer
/// hands the last 2.5 ms before each end to a yield loop, which keeps a runtime thread busy
/// whatever the count. On two threads both cores are then busy, and the timer thread — in the
/// normal class on that path — waits for a turn to make its last-50-µs wake: the p99 timer
/// error at 1,000 holders on 1,000 connections (memory backend) was 2.2–2.8 ms on two threads
/// against 0.15–0.19 ms on one; the figures of a build are `scripts/timer-bench.sh`'s.
pub const PRECISE_ON_ONE_THREAD: &str = "one, for --timer precise: its holders yield on one \
    runtime thread and the timer thread keeps the other core (two runtime threads busy both \
    cores and its wakes come late: docs/src/measurements/section-precision.md)";

impl Cli {
    /// `--threads`, or one per core — one fewer when the measured server runs on this machine
    /// and there are cores to spare, so redis-server keeps a core of its own — or one with the
    /// precise timer ([`PRECISE_ON_ONE_THREAD`]).
    pub fn runtime_threads(&self) -> RuntimeThreads {
        if let Some(threads) = self.threads {
            return RuntimeThreads {
                threads,
                why: "--threads",
            };
        }
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let workload = match &self.command {
            Command::Run(a) => Some(&a.workload),
            Command::Compare(a) => Some(&a.workload),
            Command::Sweep(a) => Some(&a.workload),
            _ => None,
        };
        if workload.is_some_and(WorkloadArgs::precise_timer) {
            RuntimeThreads {
                threads: 1,
                why: PRECISE_ON_ONE_THREAD,
            }
        } else if cores > 1 && workload.is_some_and(WorkloadArgs::server_on_this_machine) {
            RuntimeThreads {
                threads: cores - 1,
                why: "one per core but one, left to the server on this machine",
            }
        } else {
            RuntimeThreads {
                threads: cores,
                why: "one per core",
            }
        }
    }
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
    Recommend(commands::recommend::RecommendArgs),
    /// Combine the result directories of the agents of one run (`run --agent I/N`) into one:
    /// counters summed, histograms added from the interval logs, overlap across agents on the
    /// server's clock with its error bound, and the report of a single run.
    Merge(crate::commands::merge::MergeArgs),
    /// Redraw the charts and report.html of a finished run, and check its summary.
    ///
    /// Recomputes every figure of summary.json that events.csv determines (counts, exact
    /// overlap, percentiles) and exits with 2 on a mismatch. The report drawn at the end of a
    /// run skips this check: exact overlap keeps every section's interval in memory, which
    /// grows with the run's length, while drawing alone does not.
    Report(crate::commands::report::ReportArgs),
    /// Compare a simulated run with a real one of the same profile and seed: overruns, stale
    /// releases, wrongful deletes and overlap incidents per section, and the overlap-time
    /// fraction, each with the 99 % interval of the difference (exit 1 when one disagrees).
    Crosscheck(commands::crosscheck::CrosscheckArgs),
    /// Measure the locks of your own program, whatever its language: a Redis proxy that
    /// recognises lock traffic (SET NX PX, DEL, scripts) and reports holds, overruns, wrongful
    /// deletes and overlap; `-- CMD ARGS…` starts the program itself (--copies N).
    Observe(commands::observe::ObserveArgs),
}

/// Runs a parsed command line; returns the process exit code.
pub async fn dispatch(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Run(a) => commands::run::run(a).await,
        Command::Compare(a) => commands::run::compare(a).await,
        Command::Sweep(a) => commands::sweep::run(a).await,
        Command::Demo(a) => commands::demo::run(a).await,
        Command::Recommend(a) => commands::recommend::run(&a),
        Command::Merge(a) => commands::merge::run(&a),
        Command::Report(a) => commands::report::run(&a),
        Command::Crosscheck(a) => commands::crosscheck::run(&a),
        Command::Observe(a) => commands::observe::run(a).await,
    }
}

pub use crate::commands::code_of_error;

#[cfg(test)]
mod tests {
    use super::*;

    fn threads(args: &[&str]) -> RuntimeThreads {
        let mut argv = vec!["lockbench"];
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv).expect("parses").runtime_threads()
    }

    /// The default leaves a core to a server on this machine, and only then.
    #[test]
    fn runtime_threads_leave_a_core_to_a_local_server() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let local = if cores > 1 { cores - 1 } else { cores };
        for args in [
            &["run", "--backend", "spawn"][..],
            &["compare", "--redis", "redis://127.0.0.1:6379"],
            &["run", "--redis", "redis://localhost:1"],
            &["run", "--redis", "unix:///tmp/r.sock"],
            &["run", "--backend", "spawn-cluster"],
            &["sweep", "--backend", "spawn", "--ttl", "1s,2s"],
        ] {
            assert_eq!(threads(args).threads, local, "{args:?}");
        }
        for args in [
            &["run", "--backend", "memory"][..],
            &["run", "--backend", "sim"],
            &["run", "--redis", "redis://10.1.2.3:6379", "--allow-remote"],
            &["recommend", "--durations", "x.csv"],
        ] {
            assert_eq!(threads(args).threads, cores, "{args:?}");
        }
        let given = threads(&["run", "--backend", "spawn", "--threads", "3"]);
        assert_eq!((given.threads, given.why), (3, "--threads"));
    }

    /// The precise timer runs on one thread unless `--threads` says otherwise; tokio's timer
    /// keeps the per-core default (the control).
    #[test]
    fn the_precise_timer_runs_on_one_thread_unless_told() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        for args in [
            &["run", "--backend", "memory", "--timer", "precise"][..],
            &["compare", "--backend", "spawn", "--timer", "precise"],
            &[
                "sweep",
                "--backend",
                "memory",
                "--ttl",
                "1s",
                "--timer",
                "precise",
            ],
        ] {
            let t = threads(args);
            assert_eq!((t.threads, t.why), (1, PRECISE_ON_ONE_THREAD), "{args:?}");
        }
        // The profile's `timer` counts as the flag does.
        let dir = tempfile::tempdir().expect("tempdir");
        let profile = dir.path().join("p.toml");
        std::fs::write(&profile, "timer = \"precise\"\n").expect("profile");
        let from_file = threads(&[
            "run",
            "--backend",
            "memory",
            profile.to_str().expect("utf-8"),
        ]);
        assert_eq!(from_file.threads, 1);
        let tokio = threads(&["run", "--backend", "memory", "--timer", "tokio"]);
        assert_eq!((tokio.threads, tokio.why), (cores, "one per core"));
        let given = threads(&[
            "run",
            "--backend",
            "memory",
            "--timer",
            "precise",
            "--threads",
            "2",
        ]);
        assert_eq!((given.threads, given.why), (2, "--threads"));
    }

    /// Bad input is told apart from failure by the error's type, anywhere in its chain.
    #[test]
    fn bad_input_is_exit_2() {
        use crate::exit::{BAD_INPUT, BadInput, FAILED};
        let e = anyhow::Error::new(BadInput("--out D is not empty".into())).context("run");
        assert_eq!(code_of_error(&e), BAD_INPUT);
        assert_eq!(
            code_of_error(&anyhow::anyhow!("connection refused")),
            FAILED
        );
    }
}
