//! The lock libraries of other languages lockbench drives through a driver process
//! (`drivers/`, the protocol in the book's reference): each is a variant of its own, named
//! after the driver (`redis-py`, `redlock5`…), measured on the same workload as the built-in
//! release methods.

use serde::{Deserialize, Serialize};

/// A lock library, by the driver that runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Client {
    /// redis-py's `redis.lock.Lock` (Python).
    RedisPy,
    /// python-redis-lock, without auto-renewal.
    PythonRedisLock,
    /// python-redis-lock with `auto_renewal`.
    PythonRedisLockRenew,
    /// pottery's `Redlock` (Python).
    Pottery,
    /// node-redlock 5 (`using()`, automatic extension).
    Redlock5,
    /// node-redlock 4.
    Redlock4,
    /// redis-semaphore's `Mutex` (Node; refresh timer, `onLockLost`).
    RedisSemaphore,
    /// npm `redis-lock` (Node): releases with a plain `DEL` while its local deadline lasts.
    RedisLock,
    /// rslock (Rust), driven in process: a Redlock over redis-rs.
    Rslock,
}

impl Client {
    /// Every driver.
    pub const ALL: [Client; 9] = [
        Self::RedisPy,
        Self::PythonRedisLock,
        Self::PythonRedisLockRenew,
        Self::Pottery,
        Self::Redlock5,
        Self::Redlock4,
        Self::RedisSemaphore,
        Self::RedisLock,
        Self::Rslock,
    ];

    /// The driver's `--lib` name, which is also the variant's.
    pub fn name(self) -> &'static str {
        match self {
            Self::RedisPy => "redis-py",
            Self::PythonRedisLock => "python-redis-lock",
            Self::PythonRedisLockRenew => "python-redis-lock-renew",
            Self::Pottery => "pottery",
            Self::Redlock5 => "redlock5",
            Self::Redlock4 => "redlock4",
            Self::RedisSemaphore => "redis-semaphore",
            Self::RedisLock => "redis-lock",
            Self::Rslock => "rslock",
        }
    }

    /// The driver named `s`, if any.
    pub fn parse(s: &str) -> Option<Client> {
        Self::ALL.into_iter().find(|c| c.name() == s.trim())
    }

    /// Whether lockbench runs the library in its own process (no driver process, no
    /// `scripts/drivers.sh`).
    pub fn in_process(self) -> bool {
        self == Self::Rslock
    }

    /// Every driver's name, for messages.
    pub fn names() -> String {
        Self::ALL.map(Self::name).join(", ")
    }
}
