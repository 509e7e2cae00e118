//! What the workers of one variant share: where results go, the keys, the workload, the
//! release method and how the lock is protected.

use crate::dist::Sampler;
use crate::engine::keys::KeyNames;
use crate::engine::recorder::Recorder;
use crate::model::error::{CmdError, ErrorKind};
use crate::model::fault::Fault;
use crate::model::fault::PauseAt;
use crate::model::release::ExtendCommand;
use crate::model::release::ReleaseMethod;
use crate::model::script::{UserScript, UserScripts};
use crate::model::variant::Fencing;
use crate::profile::Acquire;
use crate::profile::BusyPolicy;
use crate::profile::OnLost;
use crate::profile::OnUnavailable;
use rand::RngExt;
use rand::rngs::SmallRng;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
/// Everything the workers of one variant share: the settings the plan fixes for the run
/// ([`WorkerSettings`], read through `Deref`: `ctx.ttl_ms`) and the run's state, which the
/// workers change as they go (the recorder's counts, the reserved sections, a lock library's
/// stop flag, a script's failure).
pub(crate) struct WorkerCtx {
    /// What the plan fixes for the run; the workers only read it.
    pub settings: WorkerSettings,
    /// Where results go.
    pub recorder: Arc<Recorder>,
    /// Sections begun plus acquisitions in flight (count-limited runs): an attempt reserves a
    /// slot first, so exactly `max_sections` sections happen.
    pub reserved: std::sync::atomic::AtomicU64,
    /// A lock library's variant (its drivers take and release the locks).
    pub client: Option<ClientCtx>,
    /// The first reply of a user's script outside the convention, which stops the variant:
    /// every later reply would be as unreadable.
    pub script_failed: std::sync::Mutex<Option<String>>,
}

impl std::ops::Deref for WorkerCtx {
    type Target = WorkerSettings;

    fn deref(&self) -> &WorkerSettings {
        &self.settings
    }
}

/// A variant's workers' settings: fixed from the plan before the first worker starts.
pub(crate) struct WorkerSettings {
    /// Full key names, index = key number.
    pub key_names: KeyNames,
    /// Fraction of attempts aimed at key 0.
    pub hot_key: Option<f64>,
    /// TTL in ms.
    pub ttl_ms: u64,
    /// Section durations.
    pub dist: Sampler,
    /// Think time.
    pub think: Sampler,
    /// The closed loop's start spread: (µs, workers of the whole run, all agents'): worker i
    /// makes its first attempt at i/N of it.
    pub ramp_up: Option<(u64, usize)>,
    /// Busy policy.
    pub busy: BusyPolicy,
    /// Release method.
    pub method: ReleaseMethod,
    /// The protected resource, when sections read-modify-write one.
    pub resource: Option<Resource>,
    /// Lease extension, when the variant extends.
    pub extend: Option<Extend>,
    /// Stop-the-world pauses of holders, when the profile has them.
    pub pause: Option<Pause>,
    /// What a request does when Redis does not answer.
    pub on_unavailable: OnUnavailable,
    /// How a lock is taken.
    pub acquire: Acquire,
    /// Probability that a holder dies right after acquiring.
    pub crash_between: f64,
    /// The holder-crash windows of the fault schedule.
    pub crashes: Vec<Fault>,
    /// Each worker has a connection of its own (`per-worker`): a crashed holder's socket
    /// closes with it, and it comes back as a new client.
    pub own_connection: bool,
    /// The open arrival model: workers are request slots serving arrivals.
    pub open_model: bool,
    /// Base seed.
    pub seed: u64,
    /// No attempt starts after this instant, µs since time zero (time-limited runs).
    pub deadline_us: Option<u64>,
    /// No attempt starts once this many sections have begun (count-limited runs).
    pub max_sections: Option<u64>,
    /// Variant name written in events.
    pub variant: Arc<str>,
    /// The user's own scripts, for the `script` release method's variants (`None` for the
    /// others).
    pub scripts: Option<Arc<UserScripts>>,
}

/// What the workers of a lock library's variant share.
#[derive(Debug, Default)]
pub(crate) struct ClientCtx {
    /// The library's name (the driver's, and the variant's).
    pub name: &'static str,
    /// Its package and version, as the driver read them (`redis 8.2.0`).
    pub library: String,
    /// The key the library writes for lockbench's key: what comes before and after it
    /// (`lock:` and nothing, for `lock:{key}`).
    pub wrap: (String, String),
    /// The wait budget each acquisition gives the library, ms (the retry policy's `max_wait`
    /// with `busy = "retry"`, else 0).
    pub wait_ms: u64,
    /// The library re-arms held locks itself: a holder's lock does not expire at its TTL.
    pub auto_renewal: bool,
    /// The first driver failure, which stops every worker of the variant.
    pub failed: std::sync::Mutex<Option<String>>,
    /// Set with `failed`.
    pub stop: std::sync::atomic::AtomicBool,
    /// The run was interrupted (Ctrl-C, SIGTERM): an acquisition in flight is not waited for.
    pub interrupted: std::sync::atomic::AtomicBool,
    /// What the holders' watches saw, when they are watched: a release's outcome is then the
    /// server's (what its `GETDEL` removed), not the timeline's.
    pub ledger: Option<std::sync::Arc<crate::faults::attribution::Ledger>>,
    /// Where its wrongful deletes come from (`wrongful_deletes_source` in the summary).
    pub wrongful_source: String,
    /// How its holders reach their watches (`watch.reached_by` in the summary).
    pub watch_reached_by: Option<&'static str>,
}

impl ClientCtx {
    /// The key the library writes for lockbench's `name`.
    pub(crate) fn lock_key(&self, name: &str) -> String {
        format!("{}{name}{}", self.wrap.0, self.wrap.1)
    }

    /// [`Self::lock_key`] in place: `name` becomes the key the library writes (a worker's
    /// reused string, no allocation a section).
    pub(crate) fn to_lock_key(&self, name: &mut String) {
        name.insert_str(0, &self.wrap.0);
        name.push_str(&self.wrap.1);
    }

    /// Records a driver's failure (the first one is kept) and stops the variant's workers.
    pub(crate) fn fail(&self, why: String) {
        let mut f = self.failed.lock().unwrap_or_else(|p| p.into_inner());
        f.get_or_insert(why);
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

impl WorkerCtx {
    /// The key a lock of `key` is written under on the server: lockbench's name, or the
    /// library's prefix around it.
    pub(crate) fn lock_name(&self, key: usize) -> String {
        let name = self.key_names.name(key);
        match &self.client {
            Some(c) => c.lock_key(&name),
            None => name,
        }
    }
}

/// The protected resource of every lock key: its key, its fence counter's key, and what it
/// checks. The companions are named after the lock (`<lock>:res`, `<lock>:fence`).
pub(crate) struct Resource {
    /// Resource key per lock key.
    pub res_keys: Vec<String>,
    /// Fence counter key per lock key.
    pub fence_keys: Vec<String>,
    /// What the resource checks.
    pub fencing: Fencing,
}

impl Resource {
    /// The companions of `key_names`.
    pub(crate) fn new(key_names: &KeyNames, fencing: Fencing) -> Self {
        Self {
            res_keys: key_names.iter().map(|k| format!("{k}:res")).collect(),
            fence_keys: key_names.iter().map(|k| format!("{k}:fence")).collect(),
            fencing,
        }
    }
}

/// A watchdog that re-arms the holder's lock while its section runs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Extend {
    /// Interval, µs.
    pub every_us: u64,
    /// The command.
    pub with: ExtendCommand,
    /// What the holder does when an extension finds its lock gone.
    pub on_lost: OnLost,
}

/// Stop-the-world pauses: the holder's section and its watchdog both stop.
pub(crate) struct Pause {
    /// Length of each holder's pause (0 = none this section).
    pub length: Sampler,
    /// Where it strikes.
    pub at: PauseAt,
}

impl WorkerCtx {
    /// The user's acquire script, when the variant has one.
    pub(crate) fn acquire_script(&self) -> Option<&UserScript> {
        self.scripts.as_ref()?.acquire.as_ref()
    }

    /// The user's release script, when the variant is `script`.
    pub(crate) fn release_script(&self) -> Option<&UserScript> {
        self.scripts.as_ref().map(|s| &s.release)
    }

    /// The user's extend script, when the variant has one.
    pub(crate) fn extend_script(&self) -> Option<&UserScript> {
        self.scripts.as_ref()?.extend.as_ref()
    }

    /// Whether no attempt may start any more: the deadline passed, or a lock library's driver
    /// or the user's script failed.
    pub(crate) fn should_stop(&self) -> bool {
        self.deadline_us
            .is_some_and(|d| self.recorder.now_us() >= d)
            || self.client.as_ref().is_some_and(|c| c.stop.load(Relaxed))
            || (self.scripts.is_some() && self.script_failure().is_some())
    }

    /// Notes a failed command of a `script` variant: one that is not the server's or the
    /// network's (a reply outside the convention) stops the variant, as a failed lock
    /// library's driver does. The first is kept.
    pub(crate) fn note_script_error(&self, e: &CmdError) {
        if self.scripts.is_some() && e.kind == ErrorKind::Other {
            let mut f = self.script_failed.lock().unwrap_or_else(|p| p.into_inner());
            f.get_or_insert_with(|| e.detail.clone());
        }
    }

    /// Why the user's script stopped the variant, if it did.
    pub(crate) fn script_failure(&self) -> Option<String> {
        let f = self.script_failed.lock().unwrap_or_else(|p| p.into_inner());
        f.clone()
    }

    /// Reserves a section slot for one acquisition (always granted in time-limited runs);
    /// `false` once every slot is taken by a begun section or an acquisition in flight.
    pub(crate) fn reserve(&self) -> bool {
        let Some(n) = self.max_sections else {
            return true;
        };
        self.reserved
            .fetch_update(Relaxed, Relaxed, |r| (r < n).then_some(r + 1))
            .is_ok()
    }

    /// Gives back the slot of an acquisition that did not happen.
    pub(crate) fn unreserve(&self) {
        if self.max_sections.is_some() {
            self.reserved.fetch_sub(1, Relaxed);
        }
    }

    /// The key of the next attempt: key 0 with the hot-key probability, else uniform.
    pub(crate) fn choose_key(&self, rng: &mut SmallRng) -> usize {
        let n = self.key_names.len();
        match self.hot_key {
            Some(p) if rng.random::<f64>() < p => 0,
            _ => rng.random_range(0..n),
        }
    }
}
