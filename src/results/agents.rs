//! The `agent` block of an agent's `manifest.json` and `summary.json`, and the `merged` block
//! of a directory `lockbench merge` wrote: what one process of a multi-agent run measured of
//! itself (identity, worker range, clock readings against the server), and how the merge placed
//! each agent on the server's clock. The engine writes the first, `merge` reads it and writes
//! the second; both live here, with the rest of the run directory's format.

use serde::{Deserialize, Serialize};

/// One `TIME` round trip to the server, the fastest of a few (its error is the smallest).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockReading {
    /// The server's clock (`TIME`), µs since the Unix epoch.
    pub server_us: u64,
    /// The local instant the reading stands for (the midpoint of the round trip), µs from the
    /// agent's time zero (negative before it: the start reading is taken before the run).
    pub local_us: i64,
    /// The round trip, µs.
    pub rtt_us: u64,
    /// How far the server's instant may lie from the midpoint: half the round trip (rounded
    /// up), plus the 1 µs resolution of `TIME`.
    pub error_us: u64,
    /// Server clock minus this machine's wall clock at the midpoint, µs: for people (the merge
    /// places events with the monotonic `local_us`, not the wall clock).
    pub offset_us: i64,
}

impl ClockReading {
    /// The agent's time zero on the server's clock, µs since the epoch, by this reading.
    pub fn zero_on_server_us(&self) -> i64 {
        self.server_us as i64 - self.local_us
    }
}

/// What one agent of a multi-agent run records of itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentRecord {
    /// The run the agent belongs to (shared by every agent: the key prefix is
    /// `lockbench:<run_id>`).
    pub run_id: String,
    /// This agent's index, 0-based.
    pub index: u32,
    /// Agents in the run.
    pub count: u32,
    /// Global id of its first worker: agent `i` of workers `W` each runs `i·W .. (i+1)·W`, so
    /// its random streams are those of the same workers in one process with `N·W` workers.
    pub worker_first: usize,
    /// One past its last worker's global id.
    pub worker_end: usize,
    /// With `--sections`: this agent's share of the run's total (shares add up to the total).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sections_share: Option<u64>,
    /// The start every agent agreed on through the server, µs since the epoch on the server's
    /// clock (`null` when the run never started).
    pub start_server_us: Option<u64>,
    /// The clock reading taken just before the start (after every agent had connected).
    pub clock_start: Option<ClockReading>,
    /// The clock reading taken when this agent's workers had finished.
    pub clock_end: Option<ClockReading>,
    /// The agent's time zero, µs after the `BaseTime` of its `.hlog` files: the interval
    /// timestamps of the logs minus this are µs from time zero, as `events.csv`'s are.
    pub log_offset_us: u64,
    /// Every agent reported its workers finished before this one removed its keys (`false`:
    /// it stopped waiting after the barrier timeout and left its lock keys to expire).
    pub peers_finished: bool,
}

/// How `lockbench merge` placed one agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergedAgent {
    /// Its index.
    pub index: u32,
    /// The directory it was read from, as given.
    pub dir: String,
    /// Its time zero on the server's clock, µs since the epoch.
    pub zero_server_us: i64,
    /// Its time zero after the merged run's time zero, µs: added to every timestamp of its
    /// rows and intervals.
    pub shift_us: i64,
    /// How far off its placement may be, µs (the larger reading error plus half the drift).
    pub clock_error_us: u64,
    /// Its time zero by the end reading minus by the start reading, µs: the drift of its
    /// clock against the server's over the run.
    pub drift_us: i64,
    /// How long after the agreed start its time zero fell, µs (0 when on time; a late agent
    /// could not see the start in time).
    pub late_us: u64,
}

/// The overlap of one variant across agents, with the error the clock placement allows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergedOverlap {
    /// Variant.
    pub variant: String,
    /// Time with two or more holders of one key, summed over keys, ms (as in the summary).
    pub overlap_ms: f64,
    /// Stretches with two or more holders.
    pub stretches: u64,
    /// How far `overlap_ms` may be off because of the placement: each stretch begins and ends
    /// with an event of some agent, so each may be off by `clock_error_us`, and there are
    /// `stretches` of them.
    pub overlap_error_ms: f64,
}

/// The `merged` block of `summary.json` and `manifest.json` written by `lockbench merge`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergeRecord {
    /// The run merged.
    pub run_id: String,
    /// Every agent, by index.
    pub agents: Vec<MergedAgent>,
    /// The start the agents agreed on, µs since the epoch on the server's clock.
    pub start_server_us: u64,
    /// The merged run's time zero on the server's clock, µs since the epoch: the earliest of
    /// the agreed start and the agents' time zeros. Every time in `events.csv` counts from it.
    pub zero_server_us: i64,
    /// The error of a time between events of two different agents: the sum of the two largest
    /// agents' errors, µs. Times between events of one agent are exact, as in a single run.
    pub clock_error_us: u64,
    /// Overlap per variant with its error bound.
    pub overlap: Vec<MergedOverlap>,
}
