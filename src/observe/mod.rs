//! `lockbench observe`: the locks of the user's own program, whatever its language, measured
//! through a Redis proxy grown from the watch ([`crate::faults::watch`]) — no driver, no change
//! to the program.
//!
//! - [`stream`]: the RESP streams of one connection: lock commands recognised by their replies,
//!   `DEL` sent as `GETDEL`, scripts wrapped to read their keys before and after.
//! - [`ledger`]: every lock key's holds on one clock, judged by what the server removed;
//!   [`connections`]: each connection's requests read and answered.
//! - [`door`]: the listeners and the forwarding of each connection.
//!   Clients whose requests mean the same on any connection share one server connection
//!   ([`crate::faults::mux`]).
//! - [`copies`]: the copies of the program `-- CMD` starts, each behind a door of its own.
//! - [`faults`]: `holder-pause` and `holder-crash` on a copy while it holds a lock.
//! - [`live`]: `--metrics`, the ledger's figures served live for Prometheus.
//! - [`network`]: the schedule's `latency` and `partition`, carried out by the doors.

pub(crate) mod connections;
pub(crate) mod copies;
pub(crate) mod door;
pub(crate) mod faults;
pub(crate) mod ledger;
pub(crate) mod live;
pub(crate) mod network;
pub(crate) mod stream;
