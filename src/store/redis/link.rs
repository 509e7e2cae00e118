//! What a lock connection runs on: the [`Link`] trait (one server's connection or a Redis
//! Cluster's), the one server's [`ServerLink`] (lockbench's pipelined link or redis-rs's
//! connection manager), and the `SCAN` walk both the end-of-run sweep and a failover use.

use super::super::pipe::PipeLink;
use redis::aio::ConnectionManager;

/// What a lock connection runs on: one server's connection (a [`ConnectionManager`]), or a
/// Redis Cluster's ([`redis::cluster_async::ClusterConnection`]), which routes each command to
/// its key's slot and follows `MOVED`/`ASK`.
pub trait Link: redis::aio::ConnectionLike + Clone + Send + Sync + 'static {
    /// A command about the server rather than a key (`INFO`, `COMMAND DOCS`): one node's reply,
    /// any node's on a cluster (they run the same binary), never a map of every node's.
    fn query_node<T: redis::FromRedisValue>(
        &mut self,
        cmd: &redis::Cmd,
    ) -> impl std::future::Future<Output = redis::RedisResult<T>> + Send;
    /// Closes the socket and opens another (see [`crate::store::LockCommands::renew_own_socket`]); `false` when
    /// it cannot.
    fn renew(&self) -> impl std::future::Future<Output = bool> + Send {
        async { false }
    }
    /// The keys matching `pattern`, walked with `SCAN` to the end (text names only).
    fn scan_match(
        &mut self,
        pattern: &str,
    ) -> impl std::future::Future<Output = redis::RedisResult<Vec<String>>> + Send {
        let pattern = pattern.to_string();
        async move { scan_keys(self, &pattern).await }
    }
}

/// One server's connection: lockbench's pipelined link ([`PipeLink`]) for plain TCP and Unix
/// sockets with RESP2, redis-rs's [`ConnectionManager`] for TLS and RESP3. Both reconnect
/// after the connection is lost; clones share the socket.
#[derive(Clone)]
pub enum ServerLink {
    Pipe(PipeLink),
    Managed(ConnectionManager),
}

impl redis::aio::ConnectionLike for ServerLink {
    fn req_packed_command<'a>(
        &'a mut self,
        cmd: &'a redis::Cmd,
    ) -> redis::RedisFuture<'a, redis::Value> {
        match self {
            Self::Pipe(c) => c.req_packed_command(cmd),
            Self::Managed(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
        match self {
            Self::Pipe(c) => c.req_packed_commands(pipeline, offset, count),
            Self::Managed(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Pipe(c) => c.get_db(),
            Self::Managed(c) => c.get_db(),
        }
    }
}

/// The keys matching `pattern` on one server, walked with `SCAN` to the end (text names only;
/// a name that is not UTF-8 is not one lockbench wrote): the end-of-run sweep and the
/// failover's reading of a node's locks.
pub(crate) async fn scan_keys<C: redis::aio::ConnectionLike + Send>(
    c: &mut C,
    pattern: &str,
) -> redis::RedisResult<Vec<String>> {
    let mut keys = Vec::new();
    let mut cursor: u64 = 0;
    loop {
        let (next, batch): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(c)
            .await?;
        keys.extend(batch.into_iter().filter_map(|k| String::from_utf8(k).ok()));
        if next == 0 {
            return Ok(keys);
        }
        cursor = next;
    }
}

impl Link for ServerLink {
    async fn renew(&self) -> bool {
        match self {
            Self::Pipe(c) => c.renew().await,
            Self::Managed(_) => false,
        }
    }

    async fn query_node<T: redis::FromRedisValue>(
        &mut self,
        cmd: &redis::Cmd,
    ) -> redis::RedisResult<T> {
        cmd.query_async(self).await
    }
}
