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
//! 5. `runner`, `backend` — a plan run variant by variant (key cleanup, data files); the one place a plan's backend is opened, and the plan's checks that look at files
//! 6. `sim` — virtual time: the same workers on a simulated clock and network
//! 7. `engine` — the worker loop (acquire → hold → release → think), the arrival model, busy policy, the recorder, the precise timer
//! 8. `agent` — many agents, one run: identity, barriers through the target, clock offsets
//! 9. `faults` — the fault schedule applied on each variant's clock, the loopback proxy, failover; a lock library's per-holder watch (its `DEL` sent as `GETDEL`, attributed)
//! 10. `store`, `client` — the `LockConn` trait (the commands lockbench sends) and its implementations: a real Redis, a cluster, Redlock's N servers, the in-process model; private servers that never outlive lockbench; lock libraries of other languages driven as child processes (the driver protocol)
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
// Items of crate-private modules are `pub(crate)`: what the binary and the tests may reach is
// what the public modules export.
#![warn(unreachable_pub)]

pub(crate) mod agent;
pub mod analysis;
pub mod analytic;
pub mod backend;
pub mod cli;
pub(crate) mod client;
pub mod commands;
pub mod dist;
pub mod engine;
pub mod exit;
pub mod faults;
pub mod inputs;
pub(crate) mod lines;
pub(crate) mod math;
pub(crate) mod merge;
pub mod metrics;
pub mod model;
pub mod profile;
pub mod quorum;
pub mod recommend;
pub mod record;

pub mod report;
pub mod results;
pub mod runner;
pub(crate) mod signals;
pub(crate) mod sim;
pub mod store;
pub(crate) mod target;
pub mod threads;
