//! One holder of a lock library, whichever way it is driven: a driver process of its own
//! ([`Driver`], the libraries of other languages) or in process ([`Rslock`], the Rust one).
//! The worker asks both the same things; what only a process can do (be stopped, be killed)
//! is what a task does for the in-process one: nothing, since the worker's own sleep is its
//! pause and dropping its lock is its crash.

use super::driver::{Driver, DriverError, Entered, Left, Recipe};
use super::rslock::Rslock;

/// A lock library's holder.
pub(crate) enum Holder {
    /// A driver process.
    Process(Box<Driver>),
    /// rslock, in process.
    Rslock(Box<Rslock>),
}

impl Holder {
    /// Starts holder `holder` as `recipe` says: rslock in process, any other library as its
    /// driver process, greeted.
    pub(crate) async fn start(recipe: &Recipe, holder: usize) -> Result<Holder, DriverError> {
        if recipe.client == crate::model::client::Client::Rslock.name() {
            return Ok(Holder::Rslock(Box::new(Rslock::start(recipe, holder)?)));
        }
        Ok(Holder::Process(Box::new(
            Driver::start(recipe, holder).await?,
        )))
    }

    /// Holder `holder` of a library joins a driver process it shares with other holders
    /// (`holders_per_process`), greeted there with connections of its own.
    pub(crate) async fn join(
        process: std::sync::Arc<super::driver::Process>,
        recipe: &Recipe,
        holder: usize,
    ) -> Result<Holder, DriverError> {
        Ok(Holder::Process(Box::new(
            Driver::join(process, recipe, holder).await?,
        )))
    }

    /// Kills the holder now: SIGKILL for a process; an in-process holder drops its lock
    /// unreleased.
    pub(crate) async fn kill_now(&mut self) {
        match self {
            Holder::Process(d) => d.kill_now().await,
            Holder::Rslock(r) => r.crash(),
        }
    }

    /// Kills the holder and waits until it is gone.
    pub(crate) async fn kill(self) {
        if let Holder::Process(d) = self {
            d.kill().await;
        }
    }

    /// Stops or resumes a process (SIGSTOP, SIGCONT). An in-process holder has no thread or
    /// timer of its own: the worker's pause stops all of it.
    pub(crate) async fn freeze(&self, on: bool) {
        if let Holder::Process(d) = self {
            d.freeze(on).await;
        }
    }

    /// The library's name and version.
    pub(crate) fn library(&self) -> String {
        let hello = self.hello();
        format!(
            "{} {}",
            hello["package"].as_str().unwrap_or("?"),
            hello["version"].as_str().unwrap_or("?")
        )
    }

    /// The key the library writes for lockbench's `key`.
    pub(crate) fn key_format(&self) -> String {
        self.hello()["key_format"]
            .as_str()
            .unwrap_or("{key}")
            .to_string()
    }

    /// Whether the library re-arms a held lock by itself.
    pub(crate) fn auto_renewal(&self) -> bool {
        self.hello()["capabilities"]["auto_renewal"] == true
    }

    fn hello(&self) -> std::borrow::Cow<'_, serde_json::Value> {
        match self {
            Holder::Process(d) => std::borrow::Cow::Borrowed(&d.hello),
            Holder::Rslock(_) => std::borrow::Cow::Owned(Rslock::hello()),
        }
    }

    /// Opens a section on `key`, waiting at most `wait_ms` for the lock.
    pub(crate) async fn section(
        &mut self,
        key: &str,
        ttl_ms: u64,
        wait_ms: u64,
    ) -> Result<Entered, DriverError> {
        match self {
            Holder::Process(d) => d.section(key, ttl_ms, wait_ms).await,
            Holder::Rslock(r) => r.section(key, ttl_ms, wait_ms).await,
        }
    }

    /// Leaves section `id`: the library releases.
    pub(crate) async fn leave(&mut self, id: u64) -> Result<Left, DriverError> {
        match self {
            Holder::Process(d) => d.leave(id).await,
            Holder::Rslock(r) => r.leave(id).await,
        }
    }

    /// Says goodbye: a process releases what it holds and exits; rslock releases what it
    /// holds.
    pub(crate) async fn bye(self) -> Vec<super::line::Tapped> {
        match self {
            Holder::Process(d) => d.bye().await,
            Holder::Rslock(mut r) => {
                r.bye().await;
                Vec::new()
            }
        }
    }
}
