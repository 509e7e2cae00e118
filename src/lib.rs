//! # lockbench
//!
//! Load-tests Redis locks (`SET key token NX PX ttl`) and measures what goes wrong when
//! critical sections outlast their TTL: overruns, stale releases, wrongful deletes by a naive
//! `DEL`, and the time two holders work at once. Every figure follows the definitions in the
//! project's design notes (see the README).
//!
//! ## Layout
//!
//! - [`units`]: durations written with units (`250ms`, `1.5s`), and the one formatter of a
//!   duration.
//! - [`math`]: special functions (erfc, normal quantile, `ln Γ`, Wilson interval), hand-written
//!   and tested.
//! - [`inputs`]: the one reader of duration columns in CSV files (`empirical(…)`, `recommend`).
//! - [`dist`]: latency distributions for simulated sections: the type and its analytic tails;
//!   `parse` (the grammar), `sample` (the sampler). Files are read by [`dist::Dist::load`],
//!   after parsing.
//! - [`profile`]: the TOML profile and its validation into a [`profile::Plan`].
//! - [`store`]: the [`store::LockStore`] trait — the handful of commands lockbench sends.
//!   - [`store::redis`]: a real Redis through redis-rs (per-worker or shared connection).
//!   - [`store::memory`]: an in-process model of the same commands.
//!   - [`store::spawn`]: a private `redis-server` child on a free loopback port.
//! - [`release`]: release methods (`del`, `token`, `delex`) and classification of their replies.
//! - [`analytic`]: theoretical overrun probability vs the measured fraction (self-check).
//! - [`overlap`]: exact overlap accounting (time with ≥ 2 holders, incidents, peak holders).
//! - [`recorder`]: counters, striped HdrHistograms and the streamed `events.csv`.
//! - [`worker`]: the one worker loop (attempt → section → release → think).
//! - [`runner`]: runs a plan against a backend and collects a [`summary::Summary`].
//! - [`sweep`]: one workload over several TTLs × release methods, same seed in every cell.
//! - [`summary`]: aggregation of the recorded data into the reported figures.
//! - [`output`]: files of a run (`manifest.json`, `summary.json/csv`, `.hgrm`, `.hlog`) and the
//!   terminal table.
//! - [`recommend`]: `lockbench recommend` — a TTL from measured durations (observed worst case,
//!   distribution-free order-statistic bound, log-normal and Pareto-tail models); `load`,
//!   `stats`, `models`, `print`.
//! - [`report`]: charts and `report.html` rebuilt from a run directory, and the check of
//!   `summary.json` against `events.csv`.
//! - [`demo`]: the A/B/C stale-release story replayed against a real server.
//! - [`cli`]: the command line, normalised into validated plans before any I/O.
#![forbid(unsafe_code)]

pub mod analytic;
pub mod cli;
pub mod demo;
pub mod dist;
pub mod exit;
pub mod inputs;
pub mod math;
pub mod output;
pub mod overlap;
pub mod profile;
pub mod recommend;
pub mod recorder;
pub mod release;
pub mod report;
pub mod runner;
pub mod signals;
pub mod store;
pub mod summary;
pub mod sweep;
pub mod units;
pub mod worker;
