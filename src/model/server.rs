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
}

/// A variant × server cell that could not run, and why (the others still ran).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct SkippedCell {
    /// The variant's name (with its server).
    pub variant: String,
    /// `not supported by valkey 8.1.8: …`.
    pub reason: String,
}
