//! The servers a run measured, as its manifest records them.

/// A server as the manifest records it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct ServerInfo {
    /// `redis 7.0.15`, `valkey 8.1.8` (from `INFO server`).
    pub version: String,
    /// How it is reached (no password).
    pub backend_detail: String,
    /// The binary it was started from, when lockbench started it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary: Option<String>,
    /// Which lock commands it knows, probed before the run (`null`: could not tell).
    pub capabilities: std::collections::BTreeMap<String, Option<bool>>,
    /// Lock commands run on it before the run to check support or permission, by their
    /// `INFO commandstats` name (`evalsha`, `script|load`), with their count: only where `ACL
    /// DRYRUN` could not answer. The server's counters are the run's figures plus these.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub probes: std::collections::BTreeMap<String, u64>,
    /// The canary planted beside the run's keys, where a variant runs the user's own code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary: Option<Canary>,
}

/// A variant × server cell that could not run, and why (the others still ran).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct SkippedCell {
    /// The variant's name (with its server).
    pub variant: String,
    /// `not supported by valkey 8.1.8: …`.
    pub reason: String,
}

/// A key planted outside the run's prefix before a run that executes the user's own code (a
/// release, acquire or extend script, or commands given as text), and read after it: the
/// only code of a run that can reach keys it does not name is the user's, and a script that
/// deleted or flushed keys outside the run fails the run instead of passing with the damage
/// unreported.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct Canary {
    /// `lockbench:canary:<run-id>`: outside the run's prefix (`lockbench:<run-id>:`, which the
    /// end-of-run sweep removes), inside the `~lockbench:*` an ACL grants lockbench.
    pub key: String,
    /// What the end of the run found.
    pub state: CanaryState,
    /// Why it could not be planted or read (`unchecked`), what it held instead (`changed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What became of a run's canary.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CanaryState {
    /// Set before the run; not read yet (the manifest written at the start says this).
    Planted,
    /// Found as planted after the run, then removed.
    Intact,
    /// Gone after the run: deleted, flushed (or expired, or evicted).
    Deleted,
    /// Holding another value or type after the run: left as it was found.
    Changed,
    /// Not planted or not read (the server refused, a second Ctrl-C): nothing is claimed.
    Unchecked,
}

impl Canary {
    /// Something touched it during the run.
    pub fn touched(&self) -> bool {
        matches!(self.state, CanaryState::Deleted | CanaryState::Changed)
    }
}
