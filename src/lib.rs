//! # lockbench
//!
//! Load-tests Redis locks (`SET key token NX PX ttl`) and measures what goes wrong when
//! critical sections outlast their TTL: overruns, stale releases, wrongful deletes by a naive
//! `DEL`, and the time two holders work at once. Every figure follows the definitions in the
//! book's concepts pages (`docs/src/`).
//!
//! ## Layers
//!
//! Top to bottom. A module uses only modules on the lines below its own — never one on its own
//! line or above. `tests/it/layers.rs` reads this list and fails on any import against it (and on
//! a module missing from it), so it cannot drift from the code; it also fails on any cycle of
//! imports among the files of one module. `main.rs` is the thin binary
//! above them all: parse, build the runtime, call [`cli::dispatch`], map errors to exit codes.
//!
//! 1. `cli` — the command line: clap's top level, dispatch, the exit code of an error
//! 2. `commands` — one file per command, each one entry function that decides what to print and draw; `args` folds the workload flags and a profile into a plan
//! 3. `merge` — the agents' result directories combined into one run's: counters summed, histograms added, overlap recomputed across agents on the server's clock
//! 4. `report`, `recommend` — charts, `report.html` and the recount of `summary.json` from `events.csv`; a TTL from measured durations
//! 5. `runner`, `backend`, `observe` — a plan run variant by variant (key cleanup, data files); the one place a plan's backend is opened, and the plan's checks that look at files; a user's own program watched through a Redis proxy that recognises its lock traffic
//! 6. `sim` — virtual time: the same workers on a simulated clock and network
//! 7. `engine` — the worker loop (acquire → hold → release → think), the arrival model, busy policy, the recorder, the precise timer
//! 8. `agent` — many agents, one run: identity, barriers through the target, clock offsets
//! 9. `faults` — the fault schedule applied on each variant's clock, the loopback proxy, failover; a lock library's per-holder watch (its `DEL` sent as `GETDEL`, attributed)
//! 10. `store`, `client` — the commands lockbench sends, as five role traits (`LockCommands`, `ResourceCommands`, `ServerProbes`, `UserScripts`, `KeySweep`; `LockConn` is all five) and their implementations: a real Redis, a cluster, Redlock's N servers, the in-process model; private servers that never outlive lockbench; lock libraries of other languages driven as child processes (the driver protocol)
//! 11. `results` — the run directory's format: run ids, manifest, summaries, `events.csv`, `.hgrm`, `.hlog`
//! 12. `profile` — the TOML profile and its validation into a `Plan`, one function per part of the plan
//! 13. `metrics` — live metrics for Prometheus: the address, which metric each figure becomes, the served values (set from the summary at a variant's end) and the HTTP endpoint
//! 14. `analysis` — pure figures: counts, the one table of figures, overlap, summaries, thresholds, the verdict
//! 15. `quorum`, `analytic`, `record` — Redlock's quorum and validity logic; the analytic overrun check; a section's row, metrics and histograms
//! 16. `dist` — latency distributions: grammar, sampler, analytic tails
//! 17. `inputs` — every file lockbench reads, bounded per kind and refused unless a regular file; the one reader of duration columns in CSV files
//! 18. `model`, `math`, `target`, `signals`, `lines`, `threads` — plain data (units, variants, release methods, errors, faults, shards, servers, arrivals, a plan's protection and timeouts); special functions; the Redis URL, loopback-checked and redacted; Ctrl-C counted, a signal sent; a child process's output read a bounded line at a time; the calling thread's kernel id and class
//! 19. `exit` — exit codes, and the kind (`ExitKind`) each error type declares beside its definition
//!
// Denied, not forbidden: one prefetch hint in the simulator's executor needs it
// (`sim::exec::prefetch_line`, where the reason is written). The binary forbids it.
#![deny(unsafe_code)]
// The modules are private: what the binary, the tests and the benches reach is the surface
// below, so a `pub` item nothing outside uses is flagged where it is written.
#![warn(unreachable_pub)]

mod agent;
mod analysis;
pub mod analytic;
mod backend;
pub mod cli;
mod client;
mod commands;
mod dist;
mod engine;
pub mod exit;
mod faults;
mod inputs;
mod lines;
mod math;
mod merge;
mod metrics;
mod model;
mod observe;
mod profile;
mod quorum;
mod recommend;
mod record;

mod report;
mod results;
mod runner;
mod signals;
mod sim;
mod store;
mod target;
mod threads;

// ---------------------------------------------------------------------------------------------
// The public surface: what `main.rs`, the integration tests and the benches use — nothing else
// is reachable from outside the crate. (`cli`, `exit` and `analytic` are public whole: the
// command line, its exit codes, and the analytic check's functions.)
// ---------------------------------------------------------------------------------------------

// A plan and its run.
pub use backend::{Backend, ResourceStore, Store};
pub use engine::RUNTIME_THREADS;
pub use profile::{Plan, Profile};
pub use runner::{RunOptions, RunOutcome, RunWith, run_with};
pub use threads::thread_policy;

// The stores lockbench sends its commands to, and the servers it starts.
pub use faults::FaultControl;
pub use quorum::RedlockPlan;
pub use store::memory::MemoryStore;
pub use store::pipe::PipeLink;
pub use store::redis::{
    RedisConn, RedisConnector, info_field, parse_server_version, version_tuple,
};
pub use store::redlock::{Instances, RedlockConnector, open_redlock};
pub use store::spawn::{SpawnedRedis, TlsFiles, redis_server_available};
pub use store::spawn_cluster::SpawnedCluster;
pub use store::{
    Connector, KeySweep, LockCommands, LockConn, RELEASE_LUA, ReadOutcome, ResourceCommands,
    ServerProbes, Timeouts, UserScripts, WriteOutcome,
};

// Plain data: release methods, variants, clients, distributions, errors.
pub use dist::{Dist, FAMILIES};
pub use inputs::Unit;
pub use model::client::Client;
pub use model::error::{CmdError, ErrorKind, printable};
pub use model::release::{ExtendCommand, ReleaseMethod, ReleaseOutcome, StaleRule};
pub use model::variant::Variant;

// Recording a section and the figures of a run.
pub use analysis::counts::{Counts, LiveCounts};
pub use analysis::summary::{Quantiles, StopReason, Summary};
pub use analysis::verdict::verdict;
pub use analysis::{figures, overlap};
pub use engine::collector::Collector;
pub use engine::precise;
pub use engine::recorder::Recorder;
pub use engine::streams::intended_sequence;
pub use record::{EventRow, HistSet, Metric, SectionOutcome, new_hist};
pub use report::{clients_table, word};

// The run directory: its files, read back, rendered and recounted.
pub use report::{
    ReportError, charts, render_after_run, render_and_verify, render_report, run_dir, verify_report,
};
pub use results::events::BadRow;
pub use results::{
    EventsWriter, SummaryFile, hlog, write_hgrm, write_hgrms, write_json, write_summary_csv_file,
};

// Live metrics.
pub use metrics::{Board, Labels, encode, table};

// `recommend`: a TTL from measured durations.
pub use recommend::{
    InputKind, LoadOptions, Params, Samples, expected_blocked_ms, load_durations,
    print_recommendation, recommend,
};

// The demos' stories.
pub use commands::demo;
