//! Fault injection.

pub mod proxy;
