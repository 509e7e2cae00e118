//! The plain data every layer shares: values and their text forms, with no I/O and no import
//! of anything else in the crate (the layering test in `tests/it/layers.rs` holds it to that).
//!
//! - [`units`]: durations and rates written with units (`250ms`, `1.5s`, `1000/s`), and the one
//!   formatter of a duration.
//! - [`release`]: release methods (`del`, `token`, `delex`, `script`) and the classification of replies.
//! - [`script`]: the user's own lock scripts (`release = "script"`) and the convention their
//!   replies are read by.
//! - [`client`]: the lock libraries of other languages, driven through `drivers/`.
//! - [`variant`]: a variant — release method, fencing and lease extension — as `compare` names
//!   it (`token+extend+fence-rw`).
//! - [`plan`]: the parts of a validated plan that are plain data — its protection (variants,
//!   extension, acquisition) and its timeouts; `crate::profile` holds the plan and its other parts.

pub(crate) mod arrivals;
pub(crate) mod client;
pub(crate) mod error;
pub(crate) mod fault;
pub(crate) mod plan;
pub(crate) mod release;
pub(crate) mod script;
pub(crate) mod server;
pub(crate) mod shards;
pub(crate) mod units;
pub(crate) mod variant;

/// The one spelling of a closed choice, clap's and serde's (both kebab-case): `per-worker`.
pub(crate) fn spelling<T: clap::ValueEnum>(v: &T) -> String {
    v.to_possible_value()
        .expect("no variant is skipped")
        .get_name()
        .to_string()
}
