//! The parts of a validated plan that are plain data: how a lock protects its section
//! ([`Protection`]) and how long lockbench waits on a server ([`Timeouts`]), with the choices
//! they hold. The plan itself, and its parts that hold distributions, thresholds or URLs to
//! redact, are `crate::profile`'s (those types live in layers above this one).

use super::release::ExtendCommand;
use super::script::UserScripts;
use super::units;
use super::variant::Variant;
use serde::Serialize;

/// How the lock protects a section: the variants run, lease extension, what a holder does
/// when its lock is gone or Redis does not answer, and how a lock is taken.
#[derive(Debug, Clone, Serialize)]
pub struct Protection {
    /// Variant of a `run`.
    pub release: Variant,
    /// Variants of a `compare`.
    pub releases: Vec<Variant>,
    /// What the profile's `fencing`, `extend` and `on_unavailable` made of a variant that
    /// does not say (the variants above already carry it): kept to tell whether a setting
    /// reached any variant run.
    #[serde(skip)]
    pub defaults: Variant,
    /// Sections read-modify-write a protected resource.
    pub resource: bool,
    /// Interval of lease extension for variants that extend, µs.
    pub extend_us: u64,
    /// How that interval was given (kept so a sweep cell's TTL recomputes it).
    #[serde(skip)]
    pub extend_every: ExtendEvery,
    /// The extension command.
    pub extend_with: ExtendCommand,
    /// What a holder does when an extension finds its lock gone.
    pub on_lost: OnLost,
    /// What a request does when Redis does not answer.
    pub on_unavailable: OnUnavailable,
    /// How a lock is taken.
    pub acquire: Acquire,
    /// The user's own scripts, which the `script` variant runs (read before the run; the
    /// manifest records each one's path and SHA1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scripts: Option<std::sync::Arc<UserScripts>>,
}

impl Protection {
    /// Whether any variant of the plan (its `run` variant or a `compare` one) extends its lease.
    pub fn extends(&self) -> bool {
        self.variants().any(|v| v.extend)
    }

    /// The `run` variant, then the `compare` ones.
    pub fn variants(&self) -> impl Iterator<Item = &Variant> {
        std::iter::once(&self.release).chain(&self.releases)
    }
}

/// How long lockbench waits on a server.
#[derive(Debug, Clone, Serialize)]
pub struct Timeouts {
    /// Reply timeout, µs.
    pub command_timeout_us: u64,
    /// Connect timeout, µs.
    pub connect_timeout_us: u64,
    /// Give up when commands have failed, with no success, for this long, µs.
    pub give_up_after_us: u64,
}

/// How a lock is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Acquire {
    /// `SET key token NX PX ttl`: one atomic command.
    SetNxPx,
    /// `SETNX key token`, then `PEXPIRE key ttl`: a holder that dies between the two leaves a
    /// key that never expires.
    SetnxExpire,
}

/// How the extension interval is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtendEvery {
    /// The TTL divided by N.
    TtlDiv(u64),
    /// A fixed interval, µs.
    Fixed(u64),
}

impl Default for ExtendEvery {
    fn default() -> Self {
        ExtendEvery::TtlDiv(3)
    }
}

impl ExtendEvery {
    /// The interval for a TTL, µs; checked only when some variant extends (`extends`).
    pub fn at(self, ttl_us: u64, extends: bool) -> Result<u64, ExtendError> {
        let us = match self {
            ExtendEvery::TtlDiv(n) => ttl_us / n,
            ExtendEvery::Fixed(us) => us,
        };
        if extends && (us < 1_000 || us >= ttl_us) {
            return Err(ExtendError {
                every_us: us,
                ttl_us,
            });
        }
        Ok(us)
    }
}

/// An extension interval that cannot keep the lock: under 1ms, or not below the TTL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "an extension every {} cannot keep a {} lock: use an interval from 1ms to below the TTL (e.g. ttl/3)",
    units::fmt_us(*every_us, units::Style::Compact),
    units::fmt_us(*ttl_us, units::Style::Compact)
)]
pub struct ExtendError {
    /// The interval, µs.
    pub every_us: u64,
    /// The TTL, µs.
    pub ttl_us: u64,
}

crate::exit::classify!(ExtendError => BadInput);

/// What a holder does when an extension finds its lock gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnLost {
    /// Work on and write as if nothing happened (what most code does).
    Continue,
    /// Skip the resource write and release (counted as `sections_aborted`).
    Abort,
}

/// What a request does when Redis does not answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnUnavailable {
    /// The request is refused (`refused_unavailable`).
    FailClosed,
    /// The section runs without a lock (`unlocked_sections`), as the article's service does.
    FailOpen,
}
