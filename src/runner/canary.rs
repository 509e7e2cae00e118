//! The canary of a run that executes the user's own code: a key planted outside the run's
//! prefix before the first variant and read after the cleanup. lockbench's own commands and the
//! lock libraries touch only keys the run names; a user's script can reach any key (`FLUSHALL`,
//! `DEL` of a name it builds), and the canary turns that damage, silent until now, into a
//! failed run naming the script.

use super::capabilities::{Probes, ran};
use crate::model::script::UserScripts;
use crate::model::server::{Canary, CanaryState};
use crate::store::LockConn;

/// How long the canary outlives a run killed before its end (`kill -9`) at most: a day beyond
/// the run's planned length, so that no run ends to find it expired.
const MARGIN_MS: u64 = 24 * 3600 * 1000;

/// The canary's name: outside the run's prefix (`lockbench:<run-id>:`), so neither the run's
/// keys nor the end-of-run sweep include it, and inside the `~lockbench:*` an ACL grants
/// lockbench. Each agent of a multi-agent run (which share the run id) plants its own.
pub(crate) fn key(run_id: &str, agent: Option<u32>) -> String {
    match agent {
        Some(i) => format!("lockbench:canary:{run_id}:agent-{i}"),
        None => format!("lockbench:canary:{run_id}"),
    }
}

/// Its time to live: the run's planned length (for a timed run, `planned_ms`) plus a day.
pub(crate) fn ttl_ms(planned_ms: u64) -> u64 {
    planned_ms.saturating_add(MARGIN_MS)
}

/// A planted canary: its record, and the random value only this run knows (`None`: not
/// planted, and nothing is claimed of it).
pub(crate) struct Planted {
    pub(crate) record: Canary,
    value: Option<String>,
}

/// Sets the canary with a random value (`SET key value NX PX ttl`, recorded as a probe). A key
/// of that name already there is left alone, and the run goes on unchecked (saying so), as it
/// does where the server refuses the `SET`.
pub(crate) async fn plant<C: LockConn>(
    conn: &mut C,
    key: String,
    ttl_ms: u64,
    probes: &mut Probes,
) -> Planted {
    let value = format!("{:032x}", rand::random::<u128>());
    ran(probes, "set");
    let unchecked = |why: String| {
        eprintln!(
            "warning: the canary {key} could not be planted ({why}): a script of this run that deletes keys outside it goes unnoticed"
        );
        Planted {
            record: Canary {
                key: key.clone(),
                state: CanaryState::Unchecked,
                note: Some(format!("not planted: {why}")),
            },
            value: None,
        }
    };
    match conn.set_nx_px(&key, &value, ttl_ms).await {
        Ok(true) => Planted {
            record: Canary {
                key,
                state: CanaryState::Planted,
                note: None,
            },
            value: Some(value),
        },
        Ok(false) => unchecked("a key of that name already exists".into()),
        Err(e) => unchecked(format!("SET answered: {e}")),
    }
}

/// Reads the canary after the run (`GET`, recorded as a probe): removed when found as planted
/// (`DEL`, recorded), left as found otherwise. Returns its record.
pub(crate) async fn check<C: LockConn>(
    conn: &mut C,
    planted: Planted,
    probes: &mut Probes,
) -> Canary {
    let Planted { mut record, value } = planted;
    let Some(value) = value else {
        return record;
    };
    ran(probes, "get");
    let (state, note) = match conn.get(&record.key).await {
        Ok(Some(v)) if v == value => {
            ran(probes, "del");
            match conn.del(&record.key).await {
                Ok(_) => (CanaryState::Intact, None),
                Err(e) => (
                    CanaryState::Intact,
                    Some(format!(
                        "not removed (DEL answered: {e}); it expires by itself"
                    )),
                ),
            }
        }
        Ok(Some(v)) => (
            CanaryState::Changed,
            Some(format!(
                "holds {:?} instead",
                crate::model::error::printable(&v)
            )),
        ),
        Ok(None) => (CanaryState::Deleted, None),
        // WRONGTYPE: the key was replaced by a list, a hash…
        Err(e) if e.kind == crate::model::error::ErrorKind::Server => {
            (CanaryState::Changed, Some(format!("GET answered: {e}")))
        }
        Err(e) => (
            CanaryState::Unchecked,
            Some(format!(
                "not read (GET answered: {e}); it expires by itself"
            )),
        ),
    };
    if state == CanaryState::Unchecked {
        eprintln!(
            "warning: the canary {} could not be read after the run: whether a script of this run deleted keys outside it is unknown",
            record.key
        );
    }
    record.state = state;
    record.note = note;
    record
}

/// The run's failure when the canary was touched on `server`: what happened to it, and the
/// user's code that ran (the only code of the run that reaches keys it does not name).
pub(crate) fn damage(
    canary: &Canary,
    scripts: Option<&UserScripts>,
    server: &str,
) -> Option<String> {
    if !canary.touched() {
        return None;
    }
    let what = match canary.state {
        CanaryState::Deleted => "was deleted".to_string(),
        _ => format!(
            "was changed ({})",
            canary.note.as_deref().unwrap_or("another value")
        ),
    };
    let labels: Vec<String> = scripts
        .map(|s| s.all().map(|u| u.label()).collect())
        .unwrap_or_default();
    let who = match &labels[..] {
        [one] => one.clone(),
        [] => "the user's script".to_string(),
        many => format!("one of {}", many.join(", ")),
    };
    Some(format!(
        "{who} touched keys outside the run on {server}: the canary key {}, planted outside the \
         run's prefix before the run, {what} during it (a FLUSHALL, FLUSHDB, or a DEL of a key \
         the script was not given; only another client of this server, or eviction under \
         maxmemory, could do the same). Other keys on this server may be gone: a script may \
         touch only the keys it is given (KEYS[1] and names under it)",
        canary.key
    ))
}
