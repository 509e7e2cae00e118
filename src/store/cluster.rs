//! A Redis Cluster as the lock store, through redis-rs's cluster client: each command goes to
//! its key's slot, `MOVED`/`ASK` are followed, and a failed-over shard is found again from the
//! cluster's own slot table. A lock's companion keys (fence counter, resource) carry its hash
//! tag (`…:{17}`, `…:{17}:fence`), so every script stays within one slot.

use super::Connector;
use super::Timeouts;
use super::redis::{Link, RedisConn, Scripts, classify, connect_hint};
use crate::model::error::CmdResult;
use crate::model::shards::Shard;
use crate::target::redact_url;
use crate::target::{check_loopback, check_url};
use anyhow::Context;
use redis::ConnectionAddr;
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// Number of hash slots of a Redis Cluster.
pub(crate) const SLOTS: u16 = 16384;

/// Where and how to connect to a cluster (any of its nodes is a seed).
#[derive(Clone)]
pub struct ClusterConnector {
    client: ClusterClient,
    /// The seed nodes' URLs, as given (with credentials: never printed), for a library's
    /// driver.
    seeds: Vec<String>,
    describe: String,
    scripts: Arc<Scripts>,
    shards: Arc<OnceLock<Vec<Shard>>>,
}

impl ClusterConnector {
    /// A connector for the cluster that `urls` (one or more seed nodes) belong to. Each URL is
    /// checked as for a single server (loopback only unless `allow_remote`); the first one's
    /// user, password and TLS settings are used for every node.
    pub fn new(urls: &[String], timeouts: Timeouts, allow_remote: bool) -> anyhow::Result<Self> {
        let mut infos = Vec::new();
        let mut shown = Vec::new();
        for url in urls {
            let info = check_url(url)?;
            match info.addr() {
                ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
                    check_loopback(host, allow_remote)?;
                    shown.push(format!("{host}:{port}"));
                }
                _ => anyhow::bail!(
                    "a Redis Cluster is reached over TCP, not {}: give a node's redis:// URL",
                    redact_url(url)
                ),
            }
            infos.push(info);
        }
        anyhow::ensure!(!infos.is_empty(), "a cluster needs at least one seed node");
        // Redirections (`MOVED`, `ASK`, `TRYAGAIN`) and a lost node (a failover) are retried
        // a few times within the response timeout, re-reading the slot table; what still
        // fails is counted as an error of that command.
        let client = ClusterClientBuilder::new(infos)
            .connection_timeout(timeouts.connect)
            .response_timeout(timeouts.response)
            .retries(5)
            .min_retry_wait(10)
            .max_retry_wait(200)
            .build()
            .with_context(|| {
                format!(
                    "cannot use the cluster seed {}",
                    urls.iter()
                        .map(|u| redact_url(u))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })?;
        Ok(Self {
            client,
            seeds: urls.to_vec(),
            describe: format!("redis cluster via {}", shown.join(", ")),
            scripts: Arc::new(Scripts::new()),
            shards: Arc::new(OnceLock::new()),
        })
    }

    /// The same connector, described as `text` (a spawned cluster says what it is).
    pub fn described(mut self, text: String) -> Self {
        self.describe = text;
        self
    }

    /// Reads the cluster's shards (`CLUSTER SLOTS`) once; later calls return the same.
    pub async fn load_shards(&self) -> anyhow::Result<&[Shard]> {
        if let Some(s) = self.shards.get() {
            return Ok(s);
        }
        let mut conn = self.connect().await?;
        let v: redis::Value = conn
            .conn
            .query_node(redis::cmd("CLUSTER").arg("SLOTS"))
            .await
            .map_err(|e| anyhow::anyhow!("CLUSTER SLOTS failed: {}", classify(e)))?;
        let shards = parse_cluster_slots(&v)?;
        Ok(self.shards.get_or_init(|| shards))
    }

    /// The shards read by [`ClusterConnector::load_shards`] (empty before).
    pub fn shards(&self) -> &[Shard] {
        self.shards.get().map_or(&[], |s| s.as_slice())
    }
}

impl Connector for ClusterConnector {
    type Conn = RedisConn<ClusterConnection>;
    async fn connect(&self) -> anyhow::Result<Self::Conn> {
        let conn = self.client.get_async_connection().await.map_err(|e| {
            let detail = classify(e).detail;
            let hint = connect_hint(&detail);
            anyhow::anyhow!("cannot connect to {}: {detail}{hint}", self.describe)
        })?;
        Ok(RedisConn::from_parts(conn, self.scripts.clone()))
    }
    fn describe(&self) -> String {
        self.describe.clone()
    }
    fn hash_tags(&self) -> bool {
        true
    }
    fn shards(&self) -> Vec<Shard> {
        ClusterConnector::shards(self).to_vec()
    }
    /// The seed nodes: a library's cluster client finds the rest of the cluster from them,
    /// as lockbench's does.
    fn driver_urls(&self) -> Result<Vec<String>, crate::store::Unreachable> {
        Ok(self.seeds.clone())
    }
}

impl Link for ClusterConnection {
    /// None found: a `SCAN` cursor walks one node, and the final sweep is not yet taken to
    /// every master. A cluster's keys are removed by name (those lockbench wrote).
    async fn scan_match(&mut self, _pattern: &str) -> redis::RedisResult<Vec<String>> {
        Ok(Vec::new())
    }

    async fn query_node<T: redis::FromRedisValue>(
        &mut self,
        cmd: &redis::Cmd,
    ) -> redis::RedisResult<T> {
        let v = self
            .route_command(
                cmd.clone(),
                RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
            )
            .await?;
        Ok(redis::from_redis_value(v)?)
    }
}

/// Whether the server at `url` runs in cluster mode (`INFO cluster`: `cluster_enabled:1`).
pub(crate) async fn is_cluster(connector: &super::redis::RedisConnector) -> anyhow::Result<bool> {
    let mut conn = connector.connect().await?;
    let info: CmdResult<String> = conn.query(redis::cmd("INFO").arg("cluster")).await;
    let info = info.map_err(|e| anyhow::anyhow!("INFO cluster failed: {e}"))?;
    Ok(super::redis::info_field(&info, "cluster_enabled:") == Some("1"))
}

/// Shards from a `CLUSTER SLOTS` reply: `[[start, end, [host, port, id], replica…]…]`, ranges
/// of one master gathered.
pub(crate) fn parse_cluster_slots(v: &redis::Value) -> anyhow::Result<Vec<Shard>> {
    use redis::Value;
    let bad = || anyhow::anyhow!("unexpected CLUSTER SLOTS reply: {v:?}");
    let int = |v: &Value| match v {
        Value::Int(i) => u16::try_from(*i).ok(),
        _ => None,
    };
    let node = |v: &Value| -> Option<String> {
        let Value::Array(parts) = v else { return None };
        let host = match parts.first()? {
            Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            Value::SimpleString(s) => s.clone(),
            _ => return None,
        };
        let Value::Int(port) = parts.get(1)? else {
            return None;
        };
        Some(format!("{host}:{port}"))
    };
    let Value::Array(rows) = v else {
        return Err(bad());
    };
    let mut shards: Vec<Shard> = Vec::new();
    for row in rows {
        let Value::Array(f) = row else {
            return Err(bad());
        };
        let (Some(a), Some(b)) = (f.first().and_then(int), f.get(1).and_then(int)) else {
            return Err(bad());
        };
        let master = f.get(2).and_then(node).ok_or_else(bad)?;
        let replicas: Vec<String> = f.iter().skip(3).filter_map(node).collect();
        match shards.iter_mut().find(|s| s.master == master) {
            Some(s) => {
                s.ranges.push((a, b));
                for r in replicas {
                    if !s.replicas.contains(&r) {
                        s.replicas.push(r);
                    }
                }
            }
            None => shards.push(Shard {
                master,
                replicas,
                ranges: vec![(a, b)],
            }),
        }
    }
    for s in &mut shards {
        s.ranges.sort_unstable();
    }
    shards.sort_by_key(|s| s.ranges.first().copied());
    Ok(shards)
}

/// The hash slot of `key`, as Redis computes it: CRC16 (XMODEM) of the hash tag — the part
/// between the first `{` and the next `}`, when that is not empty — or else of the whole key,
/// modulo 16384.
pub(crate) fn key_slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&c| c == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        let close = rest.iter().position(|&c| c == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    crc16(tagged.unwrap_or(key)) % SLOTS
}

/// CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0.
fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// How long a cluster may take to settle (all slots served, every node agreeing).
pub(crate) const SETTLE: Duration = Duration::from_secs(30);

#[cfg(test)]
mod tests {
    use super::*;

    /// The slots Redis's own documentation gives (`CLUSTER KEYSLOT`), hash tags included.
    #[test]
    fn slots_as_redis_computes_them() {
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"somekey"), 11058);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"lock:{17}:fence"), key_slot(b"17"));
        // An empty tag is no tag: the whole key is hashed.
        assert_eq!(key_slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") % SLOTS);
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
    }

    /// A CLUSTER SLOTS reply becomes one shard per master, ranges gathered.
    #[test]
    fn parses_cluster_slots() {
        use redis::Value::{Array, BulkString, Int};
        let node = |port: i64| Array(vec![BulkString(b"127.0.0.1".to_vec()), Int(port)]);
        let v = Array(vec![
            Array(vec![Int(5461), Int(10922), node(7001), node(7004)]),
            Array(vec![Int(0), Int(5460), node(7000), node(7003)]),
            Array(vec![Int(10923), Int(16383), node(7002)]),
        ]);
        let s = parse_cluster_slots(&v).unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].master, "127.0.0.1:7000");
        assert_eq!(s[0].replicas, vec!["127.0.0.1:7003"]);
        assert_eq!(s.iter().map(Shard::slots).sum::<u32>(), 16384);
        assert!(s[2].owns(16383) && !s[2].owns(0));
        assert!(parse_cluster_slots(&Int(3)).is_err());
    }
}
