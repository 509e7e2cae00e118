//! The fault schedule as data: what breaks (`FaultKind`), when and for how long (`Fault`,
//! `[[fault]]` or `--fault`), the window a fault held during a variant (`FaultWindow`), and
//! where a holder's pause strikes (`PauseAt`: the profile chooses it, the worker acts on it).
//! The driver that applies a schedule is the `faults` module.

use super::units;
use super::units::{DurationText, UnitError};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

/// What breaks. One spelling (kebab-case) for `--fault`, `[[fault]]` and the files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// The server stops answering (SIGSTOP of a spawned server, `CLIENT PAUSE … ALL` of one
    /// given by URL); commands wait, then time out.
    ServerPause,
    /// The server is killed and, after the window, started again empty on the same address
    /// (spawned servers only): every lock and fence counter is lost.
    ServerRestart,
    /// Every reply is delayed by `delay ± jitter` (through the proxy).
    Latency,
    /// Nothing gets through in either direction (through the proxy); what was sent arrives
    /// after the window, as TCP delivers it after a short partition.
    Partition,
    /// With `probability` per section begun in the window, the holder dies mid-section
    /// without releasing; its worker comes back after `restart` as a new client.
    HolderCrash,
    /// A cluster shard's master fails over to its replica (spawned clusters only): during
    /// the window the replica lags (stopped, so it applies nothing the master acknowledges);
    /// at its end the master dies and the replica takes over (`CLUSTER FAILOVER TAKEOVER`);
    /// the old master comes back empty, as its replica, when the variant ends. Locks acknowledged to holders but never
    /// replicated are lost.
    Failover,
}

impl FaultKind {
    /// Needs the loopback proxy.
    pub fn needs_proxy(self) -> bool {
        matches!(self, Self::Latency | Self::Partition)
    }

    /// Acts on the server itself.
    pub fn needs_server(self) -> bool {
        matches!(self, Self::ServerPause | Self::ServerRestart)
    }
}

/// The one spelling (clap's and serde's, [`super::spelling`]): the name written in profiles,
/// flags, files and the metrics board's labels.
impl std::fmt::Display for FaultKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&super::spelling(self))
    }
}

/// A kind as written (`--fault KIND@…`); the error lists every kind.
impl std::str::FromStr for FaultKind {
    type Err = FaultError;

    fn from_str(s: &str) -> Result<FaultKind, FaultError> {
        <Self as clap::ValueEnum>::from_str(s, false)
            .map_err(|_| FaultError::UnknownKind(s.to_string()))
    }
}

/// Every kind, as written, for the error that lists them.
fn kinds() -> String {
    let kinds: Vec<String> = <FaultKind as clap::ValueEnum>::value_variants()
        .iter()
        .map(super::spelling)
        .collect();
    kinds.join(", ")
}

/// Why a fault is refused, the same from `--fault` and from `[[fault]]`: the setting, and what
/// would be valid. (The caller names where it was written: the flag and its text, or the
/// file, line and entry.)
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FaultError {
    /// The kind is not one of [`FaultKind`]'s.
    #[error("`{0}` is not a fault kind: use {kinds}", kinds = kinds())]
    UnknownKind(String),
    /// A `[[fault]]` table without `kind`.
    #[error("every fault needs a `kind` (e.g. kind = \"server-pause\")")]
    NoKind,
    /// A setting that is not one of [`Fault::SETTINGS`].
    #[error("`{0}` is not a fault setting: use {list}", list = settings_list(&Fault::SETTINGS))]
    UnknownSetting(String),
    /// A flag's setting after the kind without `=`.
    #[error("`{0}`: write key=value ({list})", list = Fault::SETTINGS[..Fault::AFTER_WINDOW].join(", "))]
    NotKeyValue(String),
    /// A duration setting that is not a duration.
    #[error("`{setting}`: {error}")]
    Duration {
        /// The setting.
        setting: &'static str,
        /// Why its text is not a duration.
        error: UnitError,
    },
    /// A number setting (`shard`, `instance`, `probability`) that is not one.
    #[error("{setting} `{text}` is not {what}")]
    NotANumber {
        /// The setting.
        setting: &'static str,
        /// Its text.
        text: String,
        /// What it should be.
        what: &'static str,
    },
    /// A window of length 0.
    #[error("`length` must be longer than 0 (e.g. 500ms)")]
    EmptyWindow,
    /// A window kind without its length.
    #[error("a {0} needs a `length` (e.g. {0}@1s+500ms)")]
    NoLength(FaultKind),
    /// A setting of another kind.
    #[error("`{setting}` belongs to a {owner} fault, not a {kind}")]
    NotThisKind {
        /// The setting.
        setting: &'static str,
        /// The kind it belongs to.
        owner: FaultKind,
        /// The kind it was given to.
        kind: FaultKind,
    },
    /// A latency without delay or jitter.
    #[error("a latency fault needs a `delay` (e.g. delay=20ms)")]
    NoDelay,
    /// A holder-crash probability out of (0, 1].
    #[error("`probability` {0} is not valid: use a number above 0, at most 1 (e.g. 0.05)")]
    BadProbability(f64),
    /// A holder-crash without its probability.
    #[error("a holder-crash needs a `probability` per section (e.g. probability=0.05)")]
    NoProbability,
    /// `instance` on a kind that does not act on a server.
    #[error(
        "`instance` picks the redlock instance of a server-pause or server-restart, not of a {0}"
    )]
    InstanceOfNoServer(FaultKind),
    /// Two windows of one kind on one target that overlap or touch (numbered from 1).
    #[error(
        "faults {first} and {second} are both `{kind}` and overlap or touch ({}+{} and {}+{}): the end of one would undo the other; join them into one window or leave a gap between them",
        compact(windows[0].0), compact(windows[0].1), compact(windows[1].0), compact(windows[1].1)
    )]
    Overlap {
        /// The first, from 1.
        first: usize,
        /// The second, from 1.
        second: usize,
        /// Their kind.
        kind: FaultKind,
        /// Each one's start and length, µs.
        windows: [(u64, u64); 2],
    },
    /// A failover of a shard the spawned cluster does not have.
    #[error(
        "fault `failover` names shard {shard}, but the cluster has {masters} shards (cluster_masters): use shard 0 to {}",
        masters.saturating_sub(1)
    )]
    NoShard {
        /// The shard named.
        shard: usize,
        /// The cluster's masters.
        masters: usize,
    },
    /// A failover in a cluster without replicas.
    #[error(
        "fault `failover` promotes a replica, but cluster_replicas = 0: give the cluster at least 1 replica per master"
    )]
    NoReplica,
}

/// A duration as the schedule's errors print it (`1.5s`).
fn compact(us: u64) -> String {
    units::fmt_us(us, units::Style::Compact)
}

crate::exit::classify!(FaultError => BadInput);

/// `a, b or c`.
fn settings_list(names: &[&str]) -> String {
    match names {
        [rest @ .., last] if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.join(", "),
    }
}

/// A fault's settings as written, before they are checked into a [`Fault`]: what a
/// `[[fault]]` table holds (its keys, documented here for the book's profile-key page) and what
/// `--fault` fills in, so both forms meet the same checks ([`Fault::try_from`]).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FaultSettings {
    /// `server-pause`, `server-restart`, `latency`, `partition`, `holder-crash` or `failover`.
    kind: Option<FaultKind>,
    /// Start, from the variant's start (`2s`) [default: 0].
    at: Option<DurationText>,
    /// Length of the window (`500ms`) [default for holder-crash: the whole run].
    length: Option<DurationText>,
    /// `latency`: the added delay of every reply.
    delay: Option<DurationText>,
    /// `latency`: uniform jitter around the delay [default: 0].
    jitter: Option<DurationText>,
    /// `holder-crash`: probability that a section begun in the window dies.
    probability: Option<f64>,
    /// `holder-crash`: how long a crashed worker stays away [default: 0].
    restart: Option<DurationText>,
    /// `failover`: which shard, by the order of its first slot (0 holds slot 0) [default: 0].
    shard: Option<usize>,
    /// `server-pause` / `server-restart` of a redlock run: which instance (from 0).
    instance: Option<usize>,
}

/// A fault, checked: one entry of the schedule, read from a `[[fault]]` table (`Deserialize`)
/// or a `--fault` flag (`FromStr`) through the same settings and the same checks. Times are
/// real (never scaled by `time_scale`): they place faults on the run's clock, not in the
/// modelled workload.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "FaultSettings")]
pub struct Fault {
    /// What breaks.
    pub kind: FaultKind,
    /// Start from the variant's start, µs.
    pub at_us: u64,
    /// Length, µs (`u64::MAX`: until the run ends).
    pub length_us: u64,
    /// `latency`: added delay, µs.
    pub delay_us: u64,
    /// `latency`: jitter, µs.
    pub jitter_us: u64,
    /// `holder-crash`: probability per section.
    pub probability: f64,
    /// `holder-crash`: how long a crashed worker stays away, µs.
    pub restart_us: u64,
    /// `failover`: the shard, by the order of its first slot.
    pub shard: usize,
    /// Redlock runs: the instance a server fault acts on (`None`: a single server's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance: Option<usize>,
}

impl Fault {
    /// The settings of a fault after its kind, as `--fault` writes them (`key=value`) and
    /// `[[fault]]` names them: the one list error texts print (`probability` is also `p` in a
    /// flag). The window (`at`, `length`) comes last: a flag writes it as `@AT+LENGTH`.
    pub const SETTINGS: [&'static str; 8] = [
        "delay",
        "jitter",
        "probability",
        "restart",
        "shard",
        "instance",
        "at",
        "length",
    ];

    /// How many of [`Self::SETTINGS`] come after the window.
    const AFTER_WINDOW: usize = 6;

    /// End of the window from the variant's start, µs.
    pub fn end_us(&self) -> u64 {
        self.at_us.saturating_add(self.length_us)
    }

    /// Whether `t_us` (from the variant's start) is inside the window.
    pub fn covers(&self, t_us: u64) -> bool {
        (self.at_us..self.end_us()).contains(&t_us)
    }
}

/// The `--fault` syntax: `KIND[@AT[+LENGTH]][,key=value…]`, e.g. `server-pause@1s+500ms`,
/// `latency@0s+2s,delay=20ms,jitter=5ms`, `holder-crash,probability=0.1,restart=100ms`: the
/// same settings a `[[fault]]` table writes, checked the same way.
impl std::str::FromStr for Fault {
    type Err = FaultError;

    fn from_str(text: &str) -> Result<Fault, FaultError> {
        // A setting's duration, read as a `[[fault]]` table's is (`DurationText`).
        let duration = |setting: &'static str, v: &str| -> Result<DurationText, FaultError> {
            v.trim()
                .parse()
                .map_err(|error| FaultError::Duration { setting, error })
        };
        let number = |setting: &'static str, v: &str, what: &'static str| FaultError::NotANumber {
            setting,
            text: v.to_string(),
            what,
        };
        let mut parts = text.split(',');
        let head = parts.next().unwrap_or("").trim();
        let (kind, when) = match head.split_once('@') {
            Some((k, w)) => (k, Some(w)),
            None => (head, None),
        };
        let mut p = FaultSettings {
            kind: Some(kind.trim().parse()?),
            ..FaultSettings::default()
        };
        if let Some(w) = when {
            let (at, length) = match w.split_once('+') {
                Some((a, l)) => (a, Some(l)),
                None => (w, None),
            };
            p.at = Some(duration("at", at)?);
            p.length = length.map(|l| duration("length", l)).transpose()?;
        }
        for kv in parts {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| FaultError::NotKeyValue(kv.to_string()))?;
            let v = v.trim();
            match k.trim() {
                "delay" => p.delay = Some(duration("delay", v)?),
                "jitter" => p.jitter = Some(duration("jitter", v)?),
                "restart" => p.restart = Some(duration("restart", v)?),
                "shard" => {
                    p.shard = Some(
                        v.parse()
                            .map_err(|_| number("shard", v, "a shard number (0, 1, …)"))?,
                    )
                }
                "instance" => {
                    p.instance = Some(
                        v.parse()
                            .map_err(|_| number("instance", v, "an instance number (0, 1, …)"))?,
                    )
                }
                "length" => p.length = Some(duration("length", v)?),
                "at" => p.at = Some(duration("at", v)?),
                "probability" | "p" => {
                    p.probability = Some(
                        v.parse()
                            .map_err(|_| number("probability", v, "a number from 0 to 1"))?,
                    )
                }
                other => return Err(FaultError::UnknownSetting(other.to_string())),
            }
        }
        Fault::try_from(p)
    }
}

/// The checks both forms meet: each setting belongs to the kind, and the kind has what it needs.
impl TryFrom<FaultSettings> for Fault {
    type Error = FaultError;

    fn try_from(s: FaultSettings) -> Result<Fault, FaultError> {
        let kind = s.kind.ok_or(FaultError::NoKind)?;
        // Each duration was read as the entry was (`DurationText`): no text is parsed here.
        let dur = |v: &Option<DurationText>| v.as_ref().map(DurationText::us);
        let at_us = dur(&s.at).unwrap_or(0);
        let length_us = match dur(&s.length) {
            Some(0) => return Err(FaultError::EmptyWindow),
            Some(l) => l,
            None if kind == FaultKind::HolderCrash => u64::MAX,
            None => return Err(FaultError::NoLength(kind)),
        };
        let only = |setting: &'static str, set: bool, owner: FaultKind| {
            if set && kind != owner {
                return Err(FaultError::NotThisKind {
                    setting,
                    owner,
                    kind,
                });
            }
            Ok(())
        };
        only("delay", s.delay.is_some(), FaultKind::Latency)?;
        only("jitter", s.jitter.is_some(), FaultKind::Latency)?;
        only(
            "probability",
            s.probability.is_some(),
            FaultKind::HolderCrash,
        )?;
        only("restart", s.restart.is_some(), FaultKind::HolderCrash)?;
        only("shard", s.shard.is_some(), FaultKind::Failover)?;
        let delay_us = dur(&s.delay).unwrap_or(0);
        let jitter_us = dur(&s.jitter).unwrap_or(0);
        if kind == FaultKind::Latency && delay_us == 0 && jitter_us == 0 {
            return Err(FaultError::NoDelay);
        }
        if kind == FaultKind::HolderCrash {
            match s.probability {
                Some(p) if p > 0.0 && p <= 1.0 => {}
                Some(p) => return Err(FaultError::BadProbability(p)),
                None => return Err(FaultError::NoProbability),
            }
        }
        if s.instance.is_some() && !kind.needs_server() {
            return Err(FaultError::InstanceOfNoServer(kind));
        }
        Ok(Fault {
            kind,
            at_us,
            length_us,
            delay_us,
            jitter_us,
            probability: s.probability.unwrap_or(0.0),
            restart_us: dur(&s.restart).unwrap_or(0),
            shard: s.shard.unwrap_or(0),
            instance: s.instance,
        })
    }
}

/// A fault window as it happened: what the summary, `faults.csv` and the timeline show.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultWindow {
    /// The kind's name.
    pub kind: String,
    /// When it began, ms from the variant's start.
    pub start_ms: f64,
    /// When it ended (clipped to the variant's end), ms from the variant's start.
    pub end_ms: f64,
    /// Its settings in words (`delay 20ms ± 5ms`, `p 0.1, restart 100ms`), empty if none.
    #[serde(default)]
    pub detail: String,
    /// Empty when applied; otherwise why it could not be (e.g. the server did not restart).
    #[serde(default)]
    pub error: String,
    /// How it was applied (`SIGSTOP, SIGCONT at its end`, `one CLIENT PAUSE 1500 ALL …`),
    /// empty where the kind says it all.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub applied: String,
    /// `false` when the variant ended before the window began: scheduled, never applied (its
    /// times are the scheduled ones).
    #[serde(default = "yes", skip_serializing_if = "is_yes")]
    pub reached: bool,
    /// `failover`: what it did to the locks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover: Option<Lost>,
}

/// Refuses a schedule whose windows of one kind on one target overlap or touch: the inner (or
/// first) window's end would undo the outer (or next) one (a pause resumed, a restarted server started again while the
/// outer window still says it is down). Holder crashes may overlap: each window only adds a
/// probability. Faults are numbered from 1 in the order given.
pub(crate) fn check_overlaps(faults: &[Fault]) -> Result<(), FaultError> {
    for (i, a) in faults.iter().enumerate() {
        for (j, b) in faults.iter().enumerate().skip(i + 1) {
            let same = a.kind == b.kind && a.instance == b.instance && a.shard == b.shard;
            // Back to back counts too: the first's end would undo the second as it begins.
            if same
                && a.kind != FaultKind::HolderCrash
                && a.at_us <= b.end_us()
                && b.at_us <= a.end_us()
            {
                return Err(FaultError::Overlap {
                    first: i + 1,
                    second: j + 1,
                    windows: [a, b].map(|f| (f.at_us, f.length_us)),
                    kind: a.kind,
                });
            }
        }
    }
    Ok(())
}

/// Refuses a `failover` a spawned cluster of `masters` masters with `replicas` replicas each
/// cannot carry out: a shard that does not exist, or no replica to promote.
pub(crate) fn check_failovers(
    faults: &[Fault],
    masters: usize,
    replicas: usize,
) -> Result<(), FaultError> {
    for f in faults.iter().filter(|f| f.kind == FaultKind::Failover) {
        if f.shard >= masters {
            return Err(FaultError::NoShard {
                shard: f.shard,
                masters,
            });
        }
        if replicas == 0 {
            return Err(FaultError::NoReplica);
        }
    }
    Ok(())
}

impl FaultWindow {
    /// A window of `kind` applied from `start_ms` to `end_ms`, without error so far.
    pub fn of(kind: FaultKind, start_ms: f64, end_ms: f64, detail: String) -> Self {
        Self {
            kind: kind.to_string(),
            start_ms,
            end_ms,
            detail,
            error: String::new(),
            applied: String::new(),
            reached: true,
            failover: None,
        }
    }

    /// The window of `f` when the variant ended before it began: its scheduled times.
    pub fn not_reached(f: &Fault, detail: String) -> Self {
        let ms = |us: u64| us as f64 / 1000.0;
        Self {
            applied: "not reached: the variant ended before the window began".to_string(),
            reached: false,
            ..Self::of(f.kind, ms(f.at_us), ms(f.end_us()), detail)
        }
    }
}

fn yes() -> bool {
    true
}

fn is_yes(b: &bool) -> bool {
    *b
}

/// What a failover did to the locks of its shard.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lost {
    /// The shard, by the order of its first slot.
    pub shard: usize,
    /// Its master before (`host:port`).
    pub old_master: String,
    /// Its master after: the promoted replica.
    pub new_master: String,
    /// Locks of the variant the old master held when it died.
    pub locks_held: u64,
    /// Of those, locks the promoted replica did not have (and that had not expired yet).
    pub locks_lost: u64,
    /// When the replica had taken over (the window's end; the old master's return and the
    /// cluster settling come after it).
    #[serde(skip, default = "Instant::now")]
    pub taken_over: Instant,
}

impl Lost {
    /// In words, for the timeline and `faults.csv`.
    pub fn detail(&self) -> String {
        format!(
            "shard {}: {} → {}, {} of {} locks lost",
            self.shard, self.old_master, self.new_master, self.locks_lost, self.locks_held
        )
    }
}

/// Where a holder's pause strikes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PauseAt {
    /// At a uniformly random point of the section's work.
    Random,
    /// After the work, right before the resource write.
    BeforeWrite,
}
