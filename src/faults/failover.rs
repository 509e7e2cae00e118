//! The `failover` fault of a spawned Redis Cluster, and the count of the locks it loses.
//!
//! Redis replicates asynchronously: a master acknowledges a `SET` before its replica has it.
//! If the master dies then and the replica is promoted, that lock is simply gone, and another
//! client acquires it while its holder still works. To make the loss happen on loopback,
//! where replication is otherwise immediate, the replica *lags* for the fault's window (it is
//! stopped, as a replica behind a slow link or a long fork would be). At the window's end:
//!
//! 1. the master's writes are paused (`CLIENT PAUSE … WRITE`), so what it holds is final;
//! 2. every lock under the variant's prefix is read from the master (`GET`, `PTTL`): the
//!    locks acknowledged to holders;
//! 3. the master is killed, the replica resumed; once it has seen its master's link go down
//!    it has applied every byte it will ever get;
//! 4. each lock is read from the replica (`READONLY`): a lock whose token is not there, or
//!    whose expiry there is earlier (an extension the replica never saw), and that had not
//!    expired by then, is *lost*;
//! 5. the replica takes the slots over (`CLUSTER FAILOVER TAKEOVER`); when the variant ends
//!    the old master comes back, empty, as its replica.
//!
//! The workers' client follows the cluster to the new master; the overlap the lost locks cause
//! is measured by the run's usual overlap accounting.

use super::FaultControl;
use crate::model::fault::{Fault, Lost};
use crate::model::shards::Shard;
use crate::store::cluster::parse_cluster_slots;
use crate::store::redis::info_field;
use redis::aio::MultiplexedConnection;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// Runs one failover window; returns the error (empty if none) and what it did. Whatever
/// step fails, what was done is undone or completed: a stopped replica is resumed, a paused
/// master unpaused, a killed master's replica promoted, and the killed master started again
/// (as a replica) when the variant ends — so later variants and faults find a whole cluster,
/// and a loss already measured is kept even if the cluster then fails to settle.
pub(crate) async fn run(
    control: &FaultControl,
    f: &Fault,
    end: Option<Instant>,
    done: &mut watch::Receiver<bool>,
) -> (String, Option<Lost>) {
    let mut p = Progress::default();
    let measured = measure(control, f, end, done, &mut p).await;
    let mut errors = Vec::new();
    let lost = match measured {
        Ok(lost) => lost,
        Err(e) => {
            errors.push(format!("{e:#}"));
            None
        }
    };
    if let Err(e) = undo(control, &mut p, done).await {
        errors.push(format!("{e:#}"));
    }
    (errors.join("; "), lost)
}

/// What a failover has done so far, for [`undo`].
#[derive(Default)]
struct Progress {
    /// The replica's process id, while it is stopped.
    stopped: Option<u32>,
    /// The master, while its writes are paused (and it still runs).
    paused: Option<String>,
    /// The replica, once its master was killed, until it is promoted.
    unpromoted: Option<String>,
    /// The killed master's port, until it is started again.
    killed: Option<u16>,
}

/// Undoes or completes what `p` says was done; the first error, if any.
async fn undo(
    control: &FaultControl,
    p: &mut Progress,
    done: &mut watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let mut first: Option<anyhow::Error> = None;
    let mut note = |r: anyhow::Result<()>| {
        if let Err(e) = r {
            first.get_or_insert(e);
        }
    };
    if let Some(pid) = p.stopped.take() {
        note(signal(pid, "-CONT").await);
        // Resumed without a failover: it reconnects to its master (its replication cron runs
        // once a second); the next variant starts once it is back in sync.
        if p.killed.is_none()
            && let Some(cluster) = &control.cluster
        {
            note(cluster.lock().await.settle().await);
        }
    }
    if let Some(master) = p.paused.take() {
        note(
            async {
                let mut m = connect(&master).await?;
                let _: () = redis::cmd("CLIENT")
                    .arg("UNPAUSE")
                    .query_async(&mut m)
                    .await?;
                Ok(())
            }
            .await,
        );
    }
    if let Some(replica) = p.unpromoted.take() {
        note(async { promote(&mut connect(&replica).await?).await }.await);
    }
    if let Some(port) = p.killed.take()
        && let Some(cluster) = &control.cluster
    {
        // The old master stays down until the variant ends: back at once, it would briefly
        // serve its old slots (empty) to clients still retrying there, before it learns it was
        // replaced.
        let _ = done.wait_for(|d| *d).await;
        let mut c = cluster.lock().await;
        if let Some(n) = c.node_mut(port) {
            note(n.start_again().await);
        }
        // It rejoins as the new master's replica; the next variant starts on a whole cluster.
        note(c.settle().await);
    }
    first.map_or(Ok(()), Err)
}

async fn measure(
    control: &FaultControl,
    f: &Fault,
    end: Option<Instant>,
    done: &mut watch::Receiver<bool>,
    p: &mut Progress,
) -> anyhow::Result<Option<Lost>> {
    let cluster = control
        .cluster
        .as_ref()
        .ok_or_else(|| anyhow::anyhow!("no spawned cluster"))?;
    let seed = cluster.lock().await.urls();
    let shards = current_shards(&seed).await?;
    let shard = shards.get(f.shard).ok_or_else(|| {
        anyhow::anyhow!(
            "the cluster has {} shards: there is no shard {} (use 0 to {})",
            shards.len(),
            f.shard,
            shards.len().saturating_sub(1)
        )
    })?;
    let master = shard.master.clone();
    let mport = port_of(&master)?;
    if cluster.lock().await.node_mut(mport).is_none() {
        anyhow::bail!("{master} is not a node lockbench started");
    }
    let mut m = connect(&master).await?;
    // The master's own word on its replicas (another node's CLUSTER SLOTS may not have learned
    // of them yet through gossip).
    let Some(replica) = online_replica(&mut m).await? else {
        anyhow::bail!(
            "shard {} ({master}) has no replica in sync to fail over to (cluster_replicas = 0?)",
            f.shard
        );
    };
    // The lag: the replica stops, then the master drops its link to it, so nothing the master
    // acknowledges from here on reaches it. (Stopping it alone would not do: its kernel would
    // still receive the stream into the socket's buffer, and it would apply it on waking; and
    // dropping the link first would let it reconnect before it stops.)
    let mut r = connect(&replica).await?;
    let rpid = process_id(&mut r).await?;
    signal(rpid, "-STOP").await?;
    p.stopped = Some(rpid);
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("replica")
        .query_async(&mut m)
        .await?;
    let ended = match end {
        Some(e) => super::wait_until(e, done).await,
        None => false,
    };
    if !ended {
        // The variant ended first: no failover; `undo` resumes the replica, which catches up.
        return Ok(None);
    }
    p.paused = Some(master.clone());
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(60_000)
        .arg("WRITE")
        .query_async(&mut m)
        .await?;
    let held = locks_on(&mut m, &control.key_prefix).await?;
    let read_at = Instant::now();
    {
        let mut c = cluster.lock().await;
        if let Some(n) = c.node_mut(mport) {
            n.kill().await;
        }
    }
    p.paused = None;
    p.killed = Some(mport);
    p.unpromoted = Some(replica.clone());
    signal(rpid, "-CONT").await?;
    p.stopped = None;
    wait_for(&mut r, "replication", "master_link_status:", "down").await?;
    let _: () = redis::cmd("READONLY").query_async(&mut r).await?;
    let mut lost = 0;
    if !held.is_empty() {
        let mut read = redis::pipe();
        for (key, _, _) in &held {
            read.cmd("GET").arg(key).cmd("PTTL").arg(key);
        }
        let replies: Vec<redis::Value> = read.query_async(&mut r).await?;
        let elapsed_ms = read_at.elapsed().as_millis() as i64;
        for ((_, token, pttl), pair) in held.iter().zip(replies.chunks(2)) {
            let there: Option<Vec<u8>> = redis::from_redis_value_ref(&pair[0])?;
            let there_pttl: i64 = redis::from_redis_value_ref(&pair[1])?;
            // Expired by now on its own: not the failover's doing.
            if *pttl <= elapsed_ms {
                continue;
            }
            // Gone, or another's; or the holder's own but with an extension the replica never
            // saw, so it will expire earlier than the holder was told (10 ms of slack for the
            // millisecond clocks).
            if there.as_deref() != Some(token.as_slice())
                || (there_pttl >= 0 && there_pttl + elapsed_ms + 10 < *pttl)
            {
                lost += 1;
            }
        }
    }
    promote(&mut r).await?;
    p.unpromoted = None;
    Ok(Some(Lost {
        shard: f.shard,
        old_master: master,
        new_master: replica,
        locks_held: held.len() as u64,
        locks_lost: lost,
        taken_over: Instant::now(),
    }))
}

/// The shards as the cluster describes them now (a failover earlier in the run moved one).
async fn current_shards(seed: &[String]) -> anyhow::Result<Vec<Shard>> {
    let mut last = None;
    // A node that is down (a killed master) or errs: the next one.
    for url in seed {
        let asked = async {
            let mut c = connect_url(url).await?;
            let v: redis::Value = redis::cmd("CLUSTER")
                .arg("SLOTS")
                .query_async(&mut c)
                .await?;
            parse_cluster_slots(&v)
        }
        .await;
        match asked {
            Ok(shards) => return Ok(shards),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| anyhow::anyhow!("the cluster has no nodes")))
}

/// The variant's locks on one node: `(key, token, pttl_ms)`. Lock keys end with their hash
/// tag (`…:{17}`); their companions (`…:{17}:fence`) are not locks. A token is bytes: a
/// library's need not be text (rslock's are 20 random bytes).
async fn locks_on(
    c: &mut MultiplexedConnection,
    prefix: &str,
) -> anyhow::Result<Vec<(String, Vec<u8>, i64)>> {
    let pattern = format!("{}*", crate::store::glob_escape(prefix));
    let mut keys = crate::store::redis::scan_keys(c, &pattern).await?;
    keys.retain(|k| k.ends_with('}'));
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let mut p = redis::pipe();
    for k in &keys {
        p.cmd("GET").arg(k).cmd("PTTL").arg(k);
    }
    let replies: Vec<redis::Value> = p.query_async(c).await?;
    let mut out = Vec::new();
    for (k, pair) in keys.into_iter().zip(replies.chunks(2)) {
        let token: Option<Vec<u8>> = redis::from_redis_value_ref(&pair[0])?;
        let pttl: i64 = redis::from_redis_value_ref(&pair[1])?;
        if let Some(t) = token {
            out.push((k, t, pttl));
        }
    }
    Ok(out)
}

/// Polls `INFO section` until `field` reads `value` (the node's own state; no event to wait
/// on), for at most 10 s.
async fn wait_for(
    c: &mut MultiplexedConnection,
    section: &str,
    field: &str,
    value: &str,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info: String = redis::cmd("INFO").arg(section).query_async(c).await?;
        let now = info_field(&info, field);
        if now == Some(value) {
            return Ok(());
        }
        if Instant::now() > deadline {
            anyhow::bail!("{field} is still {now:?} after 10 s, not {value}");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Makes a replica its shard's master at once (`CLUSTER FAILOVER TAKEOVER`: no agreement from
/// the dead master or the other masters needed) and waits until it says so.
async fn promote(r: &mut MultiplexedConnection) -> anyhow::Result<()> {
    let _: () = redis::cmd("CLUSTER")
        .arg("FAILOVER")
        .arg("TAKEOVER")
        .query_async(r)
        .await?;
    wait_for(r, "replication", "role:", "master").await
}

/// The first replica `INFO replication` of a master lists as online, `host:port`.
async fn online_replica(m: &mut MultiplexedConnection) -> anyhow::Result<Option<String>> {
    let info: String = redis::cmd("INFO").arg("replication").query_async(m).await?;
    Ok(info.lines().find_map(|l| {
        // slave0:ip=127.0.0.1,port=7004,state=online,offset=…,lag=0
        let fields = l.trim().strip_prefix("slave")?.split_once(':')?.1;
        let get = |k: &str| {
            fields
                .split(',')
                .find_map(|kv| kv.strip_prefix(k)?.strip_prefix('='))
        };
        if get("state")? != "online" {
            return None;
        }
        Some(format!("{}:{}", get("ip")?, get("port")?))
    }))
}

/// The server's own process id (`INFO server`).
async fn process_id(c: &mut MultiplexedConnection) -> anyhow::Result<u32> {
    let info: String = redis::cmd("INFO").arg("server").query_async(c).await?;
    info_field(&info, "process_id:")
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("INFO server gives no process_id"))
}

async fn connect(addr: &str) -> anyhow::Result<MultiplexedConnection> {
    connect_url(&format!("redis://{addr}")).await
}

async fn connect_url(url: &str) -> anyhow::Result<MultiplexedConnection> {
    let client = redis::Client::open(url)?;
    let cfg = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(2)))
        .set_response_timeout(Some(Duration::from_secs(5)));
    Ok(client
        .get_multiplexed_async_connection_with_config(&cfg)
        .await?)
}

fn port_of(addr: &str) -> anyhow::Result<u16> {
    addr.rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("`{addr}` is not host:port"))
}

async fn signal(pid: u32, sig: &str) -> anyhow::Result<()> {
    Ok(crate::signals::send(pid, sig).await?)
}

#[cfg(test)]
mod tests {
    use crate::store::glob_escape;

    #[test]
    fn glob_characters_are_escaped() {
        assert_eq!(glob_escape("lockbench:r1:token:"), "lockbench:r1:token:");
        assert_eq!(glob_escape("a*b?[c]\\"), "a\\*b\\?\\[c\\]\\\\");
    }
}
