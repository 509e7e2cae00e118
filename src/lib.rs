//! # lockbench
//!
//! Load-tests Redis locks (`SET key token NX PX ttl`) and measures what goes wrong when
//! critical sections outlast their TTL: overruns, stale releases, wrongful deletes by a naive
//! `DEL`, and the time two holders work at once. Every figure follows the definitions in the
//! project's design notes (see the README).
//!
//! ## Layout
//!
//! Each layer uses only the ones below it: `cli` → `commands` → `merge` → `engine` /
//! `report` → `agent` → `results`, `analysis`, `store` → `profile`, `dist`, `units`.
//!
//! - [`main`](../lockbench/index.html) is thin: parse, build the runtime, call [`cli::dispatch`],
//!   map errors to [`exit`] codes.
//! - [`cli`]: clap types and dispatch only; flags are folded into a validated
//!   [`profile::Plan`] before any I/O.
//! - [`commands`]: one file per command (`run` + `compare`, `sweep`, `demo`, `merge`, `report`), each
//!   one entry function that decides what to print and draw.
//! - [`engine`]: runs a plan — [`engine::runner`] (variants, key cleanup, data files),
//!   [`engine::worker`] (acquire → hold → release and finish → think), [`engine::arrivals`]
//!   (the open arrival model), [`engine::busy`]
//!   (busy policy and error backoff), [`engine::recorder`] (live counters, striped
//!   histograms, per-key overlap trackers).
//! - [`faults`]: the fault schedule (`[[fault]]`, `--fault`) — server pause and restart,
//!   latency and partition through a loopback [`faults::proxy`], crashed holders — and the
//!   driver that applies it on each variant's clock.
//! - [`analysis`]: pure functions over plain values — [`analysis::counts`] (the counted
//!   figures, defined once, and a section's counts from its row), [`analysis::figures`] (the
//!   one table every output follows), [`analysis::overlap`], [`analysis::summary`],
//!   [`analysis::threshold`] (CI gates).
//! - [`agent`]: many agents, one run — an agent's identity (`--agent I/N`, or a Kubernetes
//!   Indexed Job's environment), [`agent::barrier`] (start and end barriers through the target
//!   itself), [`agent::clock`] (where an agent's clock stands against the server's `TIME`).
//! - [`merge`]: the agents' result directories combined into one run's (`lockbench merge`):
//!   counters summed, histograms added from the interval logs, overlap recomputed across
//!   agents on the server's clock with its error bound.
//! - [`analytic`]: theoretical overrun probability vs the measured fraction (self-check).
//! - [`report`]: charts and `report.html` from a run directory, and the recount of
//!   `summary.json` from `events.csv`.
//! - [`recommend`]: a TTL from measured durations — `load` (inputs), `stats` (order
//!   statistics), `models` (log-normal and GPD tails, KS/AD fits), `crash` (blocked time after
//!   holder crashes), `print`.
//! - [`results`]: the run directory's format in one place — run ids, manifest and summary
//!   files, `summary.csv`, `events.csv` (written and read), `.hgrm`, `.hlog` (read), the
//!   `agent` and `merged` blocks of a multi-agent run.
//! - [`store`]: the [`store::LockConn`] trait — the handful of commands lockbench sends — and
//!   [`store::backend`], the one place a plan's backend is opened: [`store::redis`] (a real
//!   Redis, reconnecting), [`store::memory`] (an in-process model), [`store::spawn`] (a private
//!   `redis-server` that never outlives lockbench), [`store::redlock`] (N of them as one lock).
//! - [`record`]: the plain data a run produces — a section's row, metrics and their
//!   histograms, outages — below everything that makes, analyses or reads it.
//! - [`target`]: the Redis URL a user names — checked, loopback only, and redacted the one
//!   way every printed or stored target is.
//! - [`variant`]: a variant — release method, fencing and lease extension — as `compare`
//!   names it (`token+extend+fence-rw`).
//! - [`redlock`]: one lock over N independent servers — validation of `lock = "redlock"`,
//!   the quorum and validity decision, how per-instance replies combine, its summary block;
//!   [`store::redlock`] sends the commands.
//! - [`release`]: release methods (`del`, `token`, `delex`) and classification of replies.
//! - [`profile`]: the TOML profile and its validation into a [`profile::Plan`].
//! - [`dist`]: latency distributions: the type and its analytic tails; `parse` (the grammar),
//!   `sample` (the sampler). Files are read by [`dist::Dist::load`], after parsing.
//! - [`inputs`]: the one reader of duration columns in CSV files (`empirical(…)`, `recommend`).
//! - [`math`]: special functions (erfc, normal quantile, `ln Γ`, Wilson interval).
//! - [`units`]: durations written with units (`250ms`, `1.5s`), and the one formatter of a
//!   duration.
//! - [`signals`]: Ctrl-C and SIGTERM counted process-wide; [`exit`]: exit codes and a run's
//!   verdict.
// Denied, not forbidden: one prefetch hint in the simulator's executor needs it
// (`sim::exec::prefetch_line`, where the reason is written). The binary forbids it.
#![deny(unsafe_code)]

pub mod agent;
pub mod analysis;
pub mod analytic;
pub mod cli;
pub mod commands;
pub mod dist;
pub mod engine;
pub mod exit;
pub mod faults;
pub mod inputs;
pub mod math;
pub mod merge;
pub mod profile;
pub mod recommend;
pub mod record;
pub mod redlock;
pub mod release;
pub mod report;
pub mod results;
pub mod signals;
pub mod sim;
pub mod store;
pub mod target;
pub mod units;
pub mod variant;
