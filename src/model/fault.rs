//! The fault schedule as data: what breaks (`FaultKind`), when and for how long (`Fault`,
//! `[[fault]]` or `--fault`), the window a fault held during a variant (`FaultWindow`), and
//! where a holder's pause strikes (`PauseAt`: the profile chooses it, the worker acts on it).
//! The driver that applies a schedule is the `faults` module.

use super::units;
use super::units::DurationText;
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
    /// The name written in profiles, flags and files, for labels that outlive the value (the
    /// metrics board's); the test `fault_kind_names_are_the_one_spelling` holds it to clap's
    /// and serde's spelling.
    pub fn name(self) -> &'static str {
        match self {
            Self::ServerPause => "server-pause",
            Self::ServerRestart => "server-restart",
            Self::Latency => "latency",
            Self::Partition => "partition",
            Self::HolderCrash => "holder-crash",
            Self::Failover => "failover",
        }
    }

    /// A kind as written (`--fault KIND@…`); the error lists every kind.
    pub fn parse(s: &str) -> Result<FaultKind, String> {
        <Self as clap::ValueEnum>::from_str(s, false).map_err(|_| {
            let kinds: Vec<String> = <Self as clap::ValueEnum>::value_variants()
                .iter()
                .map(super::spelling)
                .collect();
            format!("`{s}` is not a fault kind: use {}", kinds.join(", "))
        })
    }

    /// Needs the loopback proxy.
    pub fn needs_proxy(self) -> bool {
        matches!(self, Self::Latency | Self::Partition)
    }

    /// Acts on the server itself.
    pub fn needs_server(self) -> bool {
        matches!(self, Self::ServerPause | Self::ServerRestart)
    }
}

/// A `[[fault]]` entry as written in a profile.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FaultProfile {
    /// `server-pause`, `server-restart`, `latency`, `partition` or `holder-crash`.
    pub kind: Option<FaultKind>,
    /// Start, from the variant's start (`2s`) [default: 0].
    pub at: Option<DurationText>,
    /// Length of the window (`500ms`) [default for holder-crash: the whole run].
    pub length: Option<DurationText>,
    /// `latency`: the added delay of every reply.
    pub delay: Option<DurationText>,
    /// `latency`: uniform jitter around the delay [default: 0].
    pub jitter: Option<DurationText>,
    /// `holder-crash`: probability that a section begun in the window dies.
    pub probability: Option<f64>,
    /// `holder-crash`: how long a crashed worker stays away [default: 0].
    pub restart: Option<DurationText>,
    /// `failover`: which shard, by the order of its first slot (0 holds slot 0) [default: 0].
    pub shard: Option<usize>,
    /// `server-pause` / `server-restart` of a redlock run: which instance (from 0).
    pub instance: Option<usize>,
}

/// A validated fault. Times are real (never scaled by `time_scale`): they place faults on
/// the run's clock, not in the modelled workload.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
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
/// same entry a `[[fault]]` table writes, checked by the same [`FaultProfile::validate`].
impl std::str::FromStr for FaultProfile {
    type Err = String;

    fn from_str(text: &str) -> Result<FaultProfile, String> {
        // A setting's duration, read as a `[[fault]]` table's is (`DurationText`).
        let duration = |name: &str, v: &str| -> Result<DurationText, String> {
            v.trim()
                .parse()
                .map_err(|e| format!("`{name}` in `{text}`: {e}"))
        };
        let mut parts = text.split(',');
        let head = parts.next().unwrap_or("").trim();
        let (kind, when) = match head.split_once('@') {
            Some((k, w)) => (k, Some(w)),
            None => (head, None),
        };
        let mut p = FaultProfile {
            kind: Some(FaultKind::parse(kind.trim())?),
            ..FaultProfile::default()
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
            let (k, v) = kv.split_once('=').ok_or_else(|| {
                format!(
                    "`{kv}` in `{text}`: write key=value ({})",
                    FaultProfile::SETTINGS[..FaultProfile::AFTER_WINDOW].join(", ")
                )
            })?;
            let v = v.trim().to_string();
            match k.trim() {
                "delay" => p.delay = Some(duration("delay", &v)?),
                "jitter" => p.jitter = Some(duration("jitter", &v)?),
                "restart" => p.restart = Some(duration("restart", &v)?),
                "shard" => {
                    p.shard = Some(v.parse().map_err(|_| {
                        format!("shard `{v}` in `{text}` is not a shard number (0, 1, …)")
                    })?)
                }
                "instance" => {
                    p.instance = Some(v.parse().map_err(|_| {
                        format!("instance `{v}` in `{text}` is not an instance number (0, 1, …)")
                    })?)
                }
                "length" => p.length = Some(duration("length", &v)?),
                "at" => p.at = Some(duration("at", &v)?),
                "probability" | "p" => {
                    p.probability = Some(v.parse().map_err(|_| {
                        format!("probability `{v}` in `{text}` is not a number from 0 to 1")
                    })?)
                }
                other => {
                    let [rest @ .., last] = FaultProfile::SETTINGS;
                    return Err(format!(
                        "`{other}` in `{text}` is not a fault setting: use {} or {last}",
                        rest.join(", ")
                    ));
                }
            }
        }
        Ok(p)
    }
}

impl FaultProfile {
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

    /// Validates one entry; the error names the setting and what would be valid.
    pub fn validate(&self) -> Result<Fault, String> {
        let kind = self
            .kind
            .ok_or("every fault needs a `kind` (e.g. kind = \"server-pause\")")?;
        // Each duration was read as the entry was (`DurationText`): no text is parsed here.
        let dur = |v: &Option<DurationText>| v.as_ref().map(DurationText::us);
        let at_us = dur(&self.at).unwrap_or(0);
        let length_us = match dur(&self.length) {
            Some(0) => return Err("`length` must be longer than 0 (e.g. 500ms)".into()),
            Some(l) => l,
            None if kind == FaultKind::HolderCrash => u64::MAX,
            None => {
                return Err(format!(
                    "a {} needs a `length` (e.g. {}@1s+500ms)",
                    kind.name(),
                    kind.name()
                ));
            }
        };
        let only = |name: &str, set: bool, for_kind: FaultKind| -> Result<(), String> {
            if set && kind != for_kind {
                return Err(format!(
                    "`{name}` belongs to a {} fault, not a {}",
                    for_kind.name(),
                    kind.name()
                ));
            }
            Ok(())
        };
        only("delay", self.delay.is_some(), FaultKind::Latency)?;
        only("jitter", self.jitter.is_some(), FaultKind::Latency)?;
        only(
            "probability",
            self.probability.is_some(),
            FaultKind::HolderCrash,
        )?;
        only("restart", self.restart.is_some(), FaultKind::HolderCrash)?;
        only("shard", self.shard.is_some(), FaultKind::Failover)?;
        let delay_us = dur(&self.delay).unwrap_or(0);
        let jitter_us = dur(&self.jitter).unwrap_or(0);
        if kind == FaultKind::Latency && delay_us == 0 && jitter_us == 0 {
            return Err("a latency fault needs a `delay` (e.g. delay=20ms)".into());
        }
        let probability = self.probability.unwrap_or(0.0);
        if kind == FaultKind::HolderCrash {
            match self.probability {
                Some(p) if p > 0.0 && p <= 1.0 => {}
                Some(p) => {
                    return Err(format!(
                        "`probability` {p} is not valid: use a number above 0, at most 1 (e.g. 0.05)"
                    ));
                }
                None => {
                    return Err(
                        "a holder-crash needs a `probability` per section (e.g. probability=0.05)"
                            .into(),
                    );
                }
            }
        }
        let restart_us = dur(&self.restart).unwrap_or(0);
        if self.instance.is_some() && !kind.needs_server() {
            return Err(format!(
                "`instance` picks the redlock instance of a server-pause or server-restart, not of a {}",
                kind.name()
            ));
        }
        Ok(Fault {
            kind,
            at_us,
            length_us,
            delay_us,
            jitter_us,
            probability,
            restart_us,
            shard: self.shard.unwrap_or(0),
            instance: self.instance,
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
pub(crate) fn check_overlaps(faults: &[Fault]) -> Result<(), String> {
    for (i, a) in faults.iter().enumerate() {
        for (j, b) in faults.iter().enumerate().skip(i + 1) {
            let same = a.kind == b.kind && a.instance == b.instance && a.shard == b.shard;
            // Back to back counts too: the first's end would undo the second as it begins.
            if same
                && a.kind != FaultKind::HolderCrash
                && a.at_us <= b.end_us()
                && b.at_us <= a.end_us()
            {
                let c = |us: u64| units::fmt_us(us, units::Style::Compact);
                return Err(format!(
                    "faults {} and {} are both `{}` and overlap or touch ({}+{} and {}+{}): the end of one would undo the other; join them into one window or leave a gap between them",
                    i + 1,
                    j + 1,
                    a.kind.name(),
                    c(a.at_us),
                    c(a.length_us),
                    c(b.at_us),
                    c(b.length_us)
                ));
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
) -> Result<(), String> {
    for f in faults.iter().filter(|f| f.kind == FaultKind::Failover) {
        if f.shard >= masters {
            return Err(format!(
                "fault `failover` names shard {}, but the cluster has {masters} shards (cluster_masters): use shard 0 to {}",
                f.shard,
                masters.saturating_sub(1)
            ));
        }
        if replicas == 0 {
            return Err(
                "fault `failover` promotes a replica, but cluster_replicas = 0: give the cluster at least 1 replica per master".to_string(),
            );
        }
    }
    Ok(())
}

impl FaultWindow {
    /// A window of `kind` applied from `start_ms` to `end_ms`, without error so far.
    pub fn of(kind: FaultKind, start_ms: f64, end_ms: f64, detail: String) -> Self {
        Self {
            kind: kind.name().to_string(),
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

#[cfg(test)]
mod spelling_tests {
    use super::FaultKind;

    #[test]
    fn fault_kind_names_are_the_one_spelling() {
        for k in <FaultKind as clap::ValueEnum>::value_variants() {
            assert_eq!(k.name(), crate::model::spelling(k));
        }
    }
}
