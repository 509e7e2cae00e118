//! The end of a run: exactly the keys it could have written are removed, the locks among
//! them counted, and whatever may remain is listed.

use crate::runner::RunOptions;
use crate::signals::{Request, request_of};
use crate::store::{LockConn, again_after_reconnect};
use std::path::Path;
use tokio::sync::watch;

/// Removes exactly the keys this run could have written (those it sent a SET for), nothing
/// else, a few hundred per `DEL`. Returns the keys that may remain: those whose `DEL` failed,
/// and all that were not tried once the user asked to abandon (a second signal).
pub(crate) async fn remove_keys<C: LockConn>(
    conn: &mut C,
    keys: &[String],
    signals: &mut watch::Receiver<u32>,
) -> (Vec<String>, u64) {
    let mut leftover = Vec::new();
    let mut removed = 0u64;
    let mut chunks = keys.chunks(500);
    for chunk in chunks.by_ref() {
        if request_of(*signals.borrow()) == Request::Abandon {
            leftover.extend_from_slice(chunk);
            break;
        }
        let delete = async {
            match again_after_reconnect!(conn.del_many(chunk)) {
                Ok(n) => {
                    removed += n.max(0) as u64;
                    true
                }
                Err(_) => false,
            }
        };
        let deleted = tokio::select! {
            ok = delete => ok,
            Ok(_) = signals.wait_for(|n| request_of(*n) == Request::Abandon) => false,
        };
        if !deleted {
            leftover.extend_from_slice(chunk);
        }
    }
    for chunk in chunks {
        leftover.extend_from_slice(chunk);
    }
    (leftover, removed)
}

/// The final sweep, once every holder and driver has stopped: every key whose name holds the
/// run's prefix (`lockbench:<run-id>:`, unique to the run) is removed, whoever wrote it — a
/// library's companion keys written after its release (python-redis-lock's
/// `lock-signal:lockbench:…`), a user's script's own keys without a TTL. Returns the keys that
/// may remain (the listing or a `DEL` failed).
async fn sweep<C: LockConn>(
    conn: &mut C,
    prefix: &str,
    signals: &mut watch::Receiver<u32>,
) -> Vec<String> {
    let needle = format!("{prefix}:");
    // A pattern, not a key: `redis-cli --scan --pattern '*<needle>*'` lists them.
    let unlisted = || {
        vec![format!(
            "{needle}* (a pattern: the final sweep could not list the keys holding {needle}; \
             redis-cli --scan --pattern '*{needle}*' lists them)"
        )]
    };
    // A second signal abandons a stalled server: the listing is not waited for either.
    if request_of(*signals.borrow()) == Request::Abandon {
        return unlisted();
    }
    let listed = tokio::select! {
        r = async { again_after_reconnect!(conn.keys_containing(&needle)) } => r.ok(),
        Ok(_) = signals.wait_for(|n| request_of(*n) == Request::Abandon) => None,
    };
    match listed {
        Some(mut keys) => {
            // The agents' barrier keys are the last agent's to remove (`Agent::leave`): a peer
            // still waiting on `…:barrier:done` must not see it vanish.
            let barrier = format!("{prefix}:barrier:");
            keys.retain(|k| !k.starts_with(&barrier));
            remove_keys(conn, &keys, signals).await.0
        }
        None => unlisted(),
    }
}

/// Removes each target's keys after a run (locks first, counted): returns how many locks the
/// cleanup ended and, when some keys may remain, how many (listed in `leftover-keys.txt` in
/// `dir`). An agent whose peers may still be running leaves its locks to expire instead.
/// `keys`: per target, every key its variants may have written, and their companions.
pub(crate) async fn clean_up<C: LockConn>(
    probes: &mut [C],
    (written_keys, companion_keys): (&mut [Vec<String>], &[Vec<String>]),
    opts: &RunOptions,
    measured: bool,
    dir: &Path,
    prefix: &str,
    signals: &mut watch::Receiver<u32>,
) -> (u64, Option<usize>) {
    // An agent whose peers may still be running leaves its lock keys to expire: removing them
    // would pull locks from under a peer's holders.
    if let Some(agent) = opts.agent.as_ref().filter(|a| !a.peers_finished()) {
        for keys in written_keys.iter_mut() {
            keys.clear();
        }
        if measured {
            eprintln!(
                "warning: {agent:?}: its lock keys are left to expire (within the TTL) instead of \
                 being removed"
            );
        }
    }
    // Locks first, counted: every lock a SET created ends exactly once, and these are the ones
    // the cleanup ended.
    let mut leftover = Vec::new();
    let mut removed = 0;
    let peers_running = opts.agent.as_ref().is_some_and(|a| !a.peers_finished());
    for (ti, probe) in probes.iter_mut().enumerate() {
        let (left, removed_locks) = remove_keys(probe, &written_keys[ti], signals).await;
        leftover.extend(left);
        leftover.extend(remove_keys(probe, &companion_keys[ti], signals).await.0);
        removed += removed_locks;
        if !peers_running {
            leftover.extend(sweep(probe, prefix, signals).await);
        }
    }
    if !leftover.is_empty() {
        let list = dir.join("leftover-keys.txt");
        let written = std::fs::write(&list, leftover.join("\n") + "\n");
        eprintln!(
            "warning: {} of the run's keys may remain on the server (prefix {prefix}){}",
            leftover.len(),
            match written {
                Ok(()) => format!("; they are listed in {}", list.display()),
                Err(e) => format!("; cannot list them in {}: {e}", list.display()),
            }
        );
        return (removed, Some(leftover.len()));
    }
    (removed, None)
}
