//! A Redis Cluster as a run saw it.

/// One shard as the cluster described it when the run began: its master and its slots.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Shard {
    /// The master's address, `host:port`.
    pub master: String,
    /// Its replicas' addresses.
    pub replicas: Vec<String>,
    /// Its slot ranges, inclusive.
    pub ranges: Vec<(u16, u16)>,
}

impl Shard {
    /// Whether `slot` belongs to it.
    pub fn owns(&self, slot: u16) -> bool {
        self.ranges.iter().any(|&(a, b)| (a..=b).contains(&slot))
    }

    /// How many slots it serves.
    pub fn slots(&self) -> u32 {
        self.ranges.iter().map(|&(a, b)| u32::from(b - a) + 1).sum()
    }
}
