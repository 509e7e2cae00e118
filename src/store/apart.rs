//! The protected resource on a store of its own, as in the systems lockbench models (the lock
//! in Redis, the data in a database elsewhere): a lock-server fault — a restart that empties
//! it, a pause — is then a fault of the lock only, and lost updates count only what the lock
//! failed to protect. [`Apart`] pairs a lock store's connector with the resource's; its
//! connections send the lock commands to the one and the resource's reads and writes to the
//! other.
//!
//! What changes with the resource apart: read-write fencing registers a holder's fence at its
//! read (one script cannot reach both servers), and the resource's server cannot look at the
//! lock as it applies a write, so a write is [`WriteOutcome::Written`] and the worker tells
//! whether its writer still held the lock from the run's own timeline.

use super::{
    CmdResult, Connector, KeySweep, LockCommands, ReadOutcome, ResourceCommands, ServerProbes,
    UserScripts, WriteOutcome,
};
use crate::model::release::ExtendCommand;
use crate::model::script::{ScriptReply, UserScript};
use crate::model::shards::Shard;

/// A lock store and, apart from it, the store of the protected resource.
#[derive(Debug, Clone)]
pub struct Apart<K> {
    /// Where the locks (and their fence counters) live.
    pub lock: K,
    /// Where the protected resource lives.
    pub resource: K,
}

impl<K: Connector> Connector for Apart<K> {
    type Conn = ApartConn<K::Conn>;

    async fn connect(&self) -> anyhow::Result<Self::Conn> {
        let lock = self.lock.connect().await?;
        let resource = self.resource.connect().await.map_err(|e| {
            anyhow::anyhow!(
                "the protected resource's store ({}): {e:#}",
                self.resource.describe()
            )
        })?;
        Ok(ApartConn { lock, resource })
    }

    fn describe(&self) -> String {
        self.lock.describe()
    }

    fn hash_tags(&self) -> bool {
        self.lock.hash_tags()
    }

    fn shards(&self) -> Vec<Shard> {
        self.lock.shards()
    }

    fn take_redlock_figures(&self) -> Option<crate::quorum::RedlockFigures> {
        self.lock.take_redlock_figures()
    }

    fn driver_urls(&self) -> Result<Vec<String>, crate::store::Unreachable> {
        self.lock.driver_urls()
    }

    fn resource_store(&self) -> Option<String> {
        Some(self.resource.describe())
    }
}

/// A connection of [`Apart`]: one to each store.
#[derive(Clone)]
pub struct ApartConn<C> {
    lock: C,
    resource: C,
}

impl<C: LockCommands> LockCommands for ApartConn<C> {
    /// Closes both: a holder's process dies with its connection to the resource too.
    async fn renew_own_socket(&mut self) -> bool {
        let lock = self.lock.renew_own_socket().await;
        self.resource.renew_own_socket().await | lock
    }

    async fn set_nx_px(&mut self, key: &str, value: &str, ttl_ms: u64) -> CmdResult<bool> {
        self.lock.set_nx_px(key, value, ttl_ms).await
    }

    async fn setnx(&mut self, key: &str, value: &str) -> CmdResult<bool> {
        self.lock.setnx(key, value).await
    }

    async fn pexpire(&mut self, key: &str, ms: u64) -> CmdResult<bool> {
        self.lock.pexpire(key, ms).await
    }

    async fn getdel(&mut self, key: &str) -> CmdResult<Option<String>> {
        self.lock.getdel(key).await
    }

    async fn release_script(&mut self, key: &str, token: &str) -> CmdResult<i64> {
        self.lock.release_script(key, token).await
    }

    async fn canonical_cad(&mut self, key: &str, token: &str) -> CmdResult<i64> {
        self.lock.canonical_cad(key, token).await
    }

    async fn delex(&mut self, key: &str, token: &str) -> CmdResult<i64> {
        self.lock.delex(key, token).await
    }

    async fn get(&mut self, key: &str) -> CmdResult<Option<String>> {
        self.lock.get(key).await
    }

    async fn exists(&mut self, key: &str) -> CmdResult<i64> {
        self.lock.exists(key).await
    }

    async fn pttl(&mut self, key: &str) -> CmdResult<i64> {
        self.lock.pttl(key).await
    }

    async fn extend(
        &mut self,
        key: &str,
        token: &str,
        ttl_ms: u64,
        how: ExtendCommand,
    ) -> CmdResult<bool> {
        self.lock.extend(key, token, ttl_ms, how).await
    }
}

impl<C: ResourceCommands> ResourceCommands for ApartConn<C> {
    /// The fence comes from the lock's server; it is registered at the resource by the read.
    async fn set_nx_px_fenced(
        &mut self,
        key: &str,
        fence_key: &str,
        _register_at: Option<&str>,
        token: &str,
        ttl_ms: u64,
    ) -> CmdResult<Option<u64>> {
        self.lock
            .set_nx_px_fenced(key, fence_key, None, token, ttl_ms)
            .await
    }

    async fn resource_read(
        &mut self,
        res_key: &str,
        register_fence: Option<u64>,
    ) -> CmdResult<ReadOutcome> {
        self.resource.resource_read(res_key, register_fence).await
    }

    /// The write without the look at the lock, which is not on the resource's server.
    async fn resource_write(
        &mut self,
        res_key: &str,
        _lock_key: &str,
        _token: &str,
        fence: Option<u64>,
        value: u64,
    ) -> CmdResult<WriteOutcome> {
        self.resource_write_apart(res_key, fence, value).await
    }

    async fn resource_write_apart(
        &mut self,
        res_key: &str,
        fence: Option<u64>,
        value: u64,
    ) -> CmdResult<WriteOutcome> {
        self.resource
            .resource_write_apart(res_key, fence, value)
            .await
    }

    async fn resource_value(&mut self, res_key: &str) -> CmdResult<u64> {
        self.resource.resource_value(res_key).await
    }
}

impl<C: ServerProbes> ServerProbes for ApartConn<C> {
    async fn supports_command(&mut self, name: &str) -> CmdResult<bool> {
        self.lock.supports_command(name).await
    }

    async fn knows_set_ifeq(&mut self) -> CmdResult<bool> {
        self.lock.knows_set_ifeq().await
    }

    async fn server_version(&mut self) -> CmdResult<String> {
        self.lock.server_version().await
    }

    async fn dry_run(&mut self, args: &[&str]) -> CmdResult<Result<(), crate::store::Refusal>> {
        self.lock.dry_run(args).await
    }

    async fn resource_dry_run(
        &mut self,
        args: &[&str],
    ) -> CmdResult<Result<(), crate::store::Refusal>> {
        self.resource.dry_run(args).await
    }

    async fn load_release_script(&mut self) -> CmdResult<()> {
        self.lock.load_release_script().await
    }
}

impl<C: UserScripts> UserScripts for ApartConn<C> {
    async fn load_user_script(&mut self, text: &str) -> CmdResult<String> {
        self.lock.load_user_script(text).await
    }

    async fn user_command(&mut self, args: &[String]) -> CmdResult<ScriptReply> {
        self.lock.user_command(args).await
    }

    async fn command_keys(
        &mut self,
        args: &[String],
    ) -> CmdResult<Result<Vec<String>, crate::store::Refusal>> {
        self.lock.command_keys(args).await
    }

    async fn eval_user_script(
        &mut self,
        script: &UserScript,
        key: &str,
        token: &str,
        ttl_ms: u64,
    ) -> CmdResult<ScriptReply> {
        self.lock.eval_user_script(script, key, token, ttl_ms).await
    }
}

impl<C: KeySweep> KeySweep for ApartConn<C> {
    /// On both stores: the cleanup removes the run's keys wherever they are.
    async fn del(&mut self, key: &str) -> CmdResult<i64> {
        Ok(self.lock.del(key).await? + self.resource.del(key).await?)
    }

    /// On both stores, as [`del`](Self::del).
    async fn del_many(&mut self, keys: &[String]) -> CmdResult<i64> {
        Ok(self.lock.del_many(keys).await? + self.resource.del_many(keys).await?)
    }

    /// On both stores.
    async fn keys_containing(&mut self, needle: &str) -> CmdResult<Vec<String>> {
        let mut keys = self.lock.keys_containing(needle).await?;
        keys.extend(self.resource.keys_containing(needle).await?);
        Ok(keys)
    }
}
