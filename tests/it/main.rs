//! lockbench's integration tests, one binary: a module per subject, and the helpers they share
//! in `common` (private servers that are always stopped, the command builder for the real
//! binary, plans and quiet run options).
//!
//! One binary links the crate once instead of thirty times. Its tests are threads of one
//! process: none of them changes the environment, the current directory or signal handling of
//! this process (signals go to child `lockbench` processes), and the few that must not share
//! the CPU take `common::alone()` (the other tests' servers, runs and commands wait for them).
//! `.cargo/config.toml` runs four tests at a time: most of them wait on servers and timers.

// serde_json::json! of a whole summary (reports) nests deeper than the default limit.
#![recursion_limit = "256"]

mod common;

mod acl;
mod agents;
mod analytic;
mod apps;
mod arrivals;
mod ci_summaries;
mod cli;
mod clients;
mod clients_cluster;
mod cluster;
mod compare_servers;
mod credentials;
mod demos;
mod docs;
mod door;
mod faults;
mod figures;
mod files;
mod golden;
mod harness;
mod layers;
mod link;
mod metrics;
mod observe;
mod outputs;
mod own_scripts;
mod precision;
mod protection;
mod recommend;
mod redlock;
mod reliability;
mod reports;
mod resource;
mod scale;
mod servers;
mod sim;
mod sim_crosscheck;
mod sim_parallel;
mod sweep;
mod thresholds;
mod unavailable;
mod watch;
