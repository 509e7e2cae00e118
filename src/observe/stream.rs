//! The RESP streams of one observed connection, as pure functions of the bytes read: the
//! watch's ([`crate::faults::resp`]) request parser and frame reader, with the lock commands of
//! any program recognised instead of only lockbench's own.
//!
//! What each request means is decided by what its reply says happened at the server, never by
//! trusting a script's text:
//!
//! - `SET k v NX [PX|EX t]` answered `+OK`, `SETNX k v` answered `:1`: an acquisition of `v`;
//! - `PEXPIRE`/`EXPIRE k t` answered `:1`, `SET k v XX|IFEQ … PX|EX t` answered `+OK`: the
//!   expiry moved (the TTL of a `SETNX` lock, or an extension);
//! - a single-key `DEL k`/`UNLINK k` goes out as `GETDEL k` (the watch's rewrite) and its reply
//!   comes back as `DEL`'s: the value it removed is known; `GETDEL k` itself; `DELEX k IFEQ v`
//!   answered `:1` removed `v`;
//! - `EVAL`/`EVALSHA`/`FCALL` (and their `_RO` forms) naming keys go out inside
//!   `MULTI`, `GET`+`ZRANGE`+`PTTL` of each key, the call, the same reads again, `EXEC`: one
//!   transaction, so nothing runs between the reads and the call, and the before/after of each
//!   key is exact (a side connection would race other clients; keyspace notifications are
//!   dropped when the subscriber lags and carry no values). The client gets the call's own
//!   reply. A key is read whatever its type: `GET` answers a string's value, `ZRANGE` a sorted
//!   set's members (Symfony Lock's `RedisStore` keeps a lock as a sorted set of tokens), the
//!   other one `WRONGTYPE` (an error inside `EXEC` ends nothing); `PTTL` says whether the key
//!   exists at all.
//!
//! Inside the client's own `MULTI`, or after a `WATCH` (a transaction of ours would end it),
//! nothing is rewritten. A subscribe, `MONITOR`, a replication stream or a RESP3 push stops the
//! recognition on that connection: from then on its bytes pass untouched. A request that is
//! not RESP, or larger than [`MAX_FRAME`], is an error: the connection is closed with a
//! message (the watch passes such bytes on; a proxy in front of a service must not guess).

use crate::faults::resp::{STOPPERS, command_into, inline};
use crate::faults::share::shares;
use crate::store::frame::frame_len;
use std::collections::VecDeque;
use std::ops::Range;
use std::time::Instant;

pub(crate) use crate::faults::resp::MAX_FRAME;
/// A script naming more lock keys than this passes unobserved (its transaction would grow).
const MAX_SCRIPT_KEYS: usize = 8;

/// Members of a sorted set read as its identity: a lock's set holds a token or a few (its
/// first ones by score beyond that; an extension moves every score alike, so the same ones).
const ZSET_MEMBERS: usize = 16;

/// A key's state read inside a script's transaction.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct KeyState {
    /// What it holds, as the identity of a lock: a string's value, or a sorted set's members
    /// ([`zset_identity`]); `None`: no key, or another type.
    pub(crate) value: Option<Vec<u8>>,
    /// `PTTL`: ms left, -1 without expiry, -2 without key.
    pub(crate) pttl: i64,
}

/// What a reply told about a lock key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Event {
    /// The client set `token` on a free `key`, expiring in `ttl_us` (`None`: no expiry).
    Acquired {
        key: Vec<u8>,
        token: Vec<u8>,
        ttl_us: Option<u64>,
    },
    /// The client moved `key`'s expiry to `ttl_us` from now (and set `token`, for `SET XX`).
    Expiry {
        key: Vec<u8>,
        ttl_us: u64,
        token: Option<Vec<u8>>,
    },
    /// The client's delete removed `value` from `key` (`None`: there was none).
    Removed {
        key: Vec<u8>,
        value: Option<Vec<u8>>,
    },
    /// The client's conditional delete removed nothing, for a reason the reply does not give.
    Refused { key: Vec<u8> },
    /// A script of the client's ran: `key` before and after it.
    Script {
        key: Vec<u8>,
        before: KeyState,
        after: KeyState,
    },
}

/// What a request forwarded upstream expects of its reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Expect {
    /// Forward the reply as it is.
    Pass,
    /// A reply to a request of the proxy's own (the `HELLO 3` that gives a RESP3 client its
    /// protocol back on a connection of its own): not forwarded.
    Swallow,
    /// `SET … NX` (`+OK`) or `SETNX` (`:1`): an acquisition.
    Acquire {
        key: Vec<u8>,
        token: Vec<u8>,
        ttl_us: Option<u64>,
        asked: Instant,
    },
    /// `PEXPIRE`/`EXPIRE` (`:1`) or `SET … XX PX` (`+OK`): the expiry moved.
    Expiry {
        key: Vec<u8>,
        ttl_us: u64,
        token: Option<Vec<u8>>,
        asked: Instant,
    },
    /// A delete: `rewritten` when it went out as `GETDEL` for a `DEL`, whose reply is
    /// translated back.
    Delete {
        key: Vec<u8>,
        rewritten: bool,
        asked: Instant,
    },
    /// `DELEX key IFEQ token`: `:1` removed `token`.
    DelEx {
        key: Vec<u8>,
        token: Vec<u8>,
        asked: Instant,
    },
    /// A script wrapped in a transaction: `swallow` replies of ours (`+OK`, `+QUEUED`) still
    /// to come before `EXEC`'s array; the first error among them answers the client when the
    /// transaction is refused.
    Script {
        keys: Vec<Vec<u8>>,
        swallow: usize,
        error: Option<Vec<u8>>,
        asked: Instant,
    },
}

/// The requests in flight on one connection, in order, and whether it still recognises.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    pub(crate) expects: VecDeque<Expect>,
    stopped: bool,
}

impl Queue {
    /// Requests whose replies have not come yet.
    pub(crate) fn in_flight(&self) -> usize {
        self.expects.len()
    }
}

/// Which keys are locks: every key matching one glob (Redis's `*`, `?`, `[…]`), or every key.
#[derive(Debug, Clone, Default)]
pub(crate) struct LockKeys {
    globs: Vec<Vec<u8>>,
}

impl LockKeys {
    /// Keys matching one of `globs` (none: every key).
    pub(crate) fn new(globs: &[String]) -> LockKeys {
        LockKeys {
            globs: globs.iter().map(|g| g.as_bytes().to_vec()).collect(),
        }
    }

    /// Whether `key` is a lock key.
    pub(crate) fn matches(&self, key: &[u8]) -> bool {
        self.globs.is_empty() || self.globs.iter().any(|g| glob(g, key))
    }
}

/// Redis's glob: `*` any run, `?` one byte, `[abc]`/`[a-z]`/`[^a]` a class, `\` escapes.
fn glob(p: &[u8], s: &[u8]) -> bool {
    match p.first() {
        None => s.is_empty(),
        Some(b'*') => (0..=s.len()).any(|i| glob(&p[1..], &s[i..])),
        Some(b'?') => !s.is_empty() && glob(&p[1..], &s[1..]),
        Some(b'[') => {
            let Some(&c) = s.first() else { return false };
            let Some(end) = p.iter().skip(1).position(|&b| b == b']').map(|e| e + 1) else {
                return p == s;
            };
            let class = &p[1..end];
            let (neg, class) = match class.first() {
                Some(b'^') => (true, &class[1..]),
                _ => (false, class),
            };
            let mut hit = false;
            let mut i = 0;
            while i < class.len() {
                if i + 2 < class.len() && class[i + 1] == b'-' {
                    hit |= (class[i]..=class[i + 2]).contains(&c);
                    i += 3;
                } else {
                    hit |= class[i] == c;
                    i += 1;
                }
            }
            hit != neg && glob(&p[end + 1..], &s[1..])
        }
        Some(b'\\') if p.len() > 1 => s.first() == Some(&p[1]) && glob(&p[2..], &s[1..]),
        Some(&c) => s.first() == Some(&c) && glob(&p[1..], &s[1..]),
    }
}

/// A request or reply stream that cannot go on: the message says why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Broken(pub(crate) String);

/// The client's side of a connection: bytes from the client to the server.
#[derive(Debug, Default)]
pub(crate) struct Requests {
    buf: Vec<u8>,
    args: Vec<Range<usize>>,
    in_multi: bool,
    watching: bool,
    raw: bool,
    /// The database `SELECT` chose: keys of another than 0 are told apart by it.
    db: u32,
    /// Requests read (complete frames).
    pub(crate) commands: u64,
    /// A request was read that needs a server connection of the client's own
    /// ([`shares`]).
    pub(crate) needs_own: bool,
    /// The client asked for RESP3 (`HELLO 3`; `HELLO 2` back).
    pub(crate) resp3: bool,
    /// The client sent `WAIT` or `WAITAOF` (they count the connection's own writes).
    pub(crate) waits: bool,
    /// `commands` when the current read began.
    fed_from: u64,
    /// The server refuses `CLIENT MAINT_NOTIFICATIONS` (before Redis 8.2): a client's
    /// request of it changes nothing and may go on the shared line.
    pub(crate) server_refuses_maint: bool,
}

/// The server's side of a connection: bytes from the server to the client.
#[derive(Debug, Default)]
pub(crate) struct Replies {
    buf: Vec<u8>,
    raw: bool,
    /// The client's requests answered so far (not the proxy's own, swallowed).
    pub(crate) answered: u64,
}

/// Where a stream parses from: what it kept from earlier reads with `bytes` appended, or
/// `bytes` alone when it kept nothing (no copy on the common path).
fn take_input(kept: &mut Vec<u8>, bytes: &[u8]) -> (Vec<u8>, bool) {
    let mut buf = std::mem::take(kept);
    let from_buf = !buf.is_empty();
    if from_buf {
        buf.extend_from_slice(bytes);
    }
    (buf, from_buf)
}

/// Keeps the unparsed rest (`data[at..]`, `data` being `buf` or `bytes`) for the next read;
/// a buffer grown by a large frame gives its memory back.
fn keep_rest(mut buf: Vec<u8>, from_buf: bool, bytes: &[u8], at: usize, ok: bool) -> Vec<u8> {
    if !ok {
        buf.clear();
    } else if from_buf {
        buf.drain(..at.min(buf.len()));
    } else if at < bytes.len() {
        buf.extend_from_slice(&bytes[at..]);
    }
    if buf.is_empty() && buf.capacity() > 1 << 20 {
        buf = Vec::new();
    }
    buf
}

/// Appends `*n` and each of `args` as bulk strings.
fn push_command(out: &mut Vec<u8>, args: &[&[u8]]) {
    let mut n = itoa::Buffer::new();
    out.push(b'*');
    out.extend_from_slice(n.format(args.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    for a in args {
        out.push(b'$');
        out.extend_from_slice(n.format(a.len()).as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

impl Requests {
    /// Takes `bytes` read from the client; appends what goes upstream to `out` and queues each
    /// request's expectation. `Err` when the client sent what is not a request, or one larger
    /// than [`MAX_FRAME`].
    pub(crate) fn feed(
        &mut self,
        bytes: &[u8],
        keys: &LockKeys,
        queue: &std::sync::Mutex<Queue>,
        out: &mut Vec<u8>,
    ) -> Result<(), Broken> {
        if self.raw {
            out.extend_from_slice(bytes);
            return Ok(());
        }
        let (buf, from_buf) = take_input(&mut self.buf, bytes);
        let data: &[u8] = if from_buf { &buf } else { bytes };
        let mut q = queue.lock().unwrap_or_else(|p| p.into_inner());
        let mut at = 0;
        let mut args = std::mem::take(&mut self.args);
        self.fed_from = self.commands;
        let result = loop {
            if at >= data.len() {
                break Ok(());
            }
            if q.stopped {
                self.raw = true;
                out.extend_from_slice(&data[at..]);
                at = data.len();
                break Ok(());
            }
            let rest = &data[at..];
            let parsed = if rest[0] == b'*' {
                command_into(rest, &mut args)
            } else {
                inline(rest).map(|p| {
                    p.map(|(len, words)| {
                        args.clear();
                        args.extend(words);
                        len
                    })
                })
            };
            let len = match parsed {
                Ok(Some(len)) => len,
                Ok(None) if rest.len() > MAX_FRAME => {
                    break Err(Broken(format!(
                        "a request larger than {} MiB",
                        MAX_FRAME >> 20
                    )));
                }
                Ok(None) => break Ok(()),
                Err(()) => {
                    let shown = String::from_utf8_lossy(&rest[..rest.len().min(32)]).into_owned();
                    break Err(Broken(format!("a malformed request ({shown:?}…)")));
                }
            };
            let frame = &rest[..len];
            self.commands += 1;
            self.decide(frame, &args, keys, &mut q, out);
            at += len;
        };
        self.args = args;
        self.buf = keep_rest(buf, from_buf, bytes, at, result.is_ok());
        result
    }

    /// Forwards one request (`frame`, its arguments `args`), rewritten or not, and queues what
    /// its reply means.
    fn decide(
        &mut self,
        frame: &[u8],
        args: &[Range<usize>],
        keys: &LockKeys,
        q: &mut Queue,
        out: &mut Vec<u8>,
    ) {
        let arg = |i: usize| args.get(i).map(|r| &frame[r.clone()]);
        let first_of_read = self.commands - 1 == self.fed_from;
        let maint = self.server_refuses_maint;
        if !shares(frame, args, maint, first_of_read, &mut self.resp3) {
            self.needs_own = true;
        }
        let Some(name) = arg(0) else {
            // An empty inline line: the server answers nothing.
            out.extend_from_slice(frame);
            return;
        };
        let is = |n: &[u8]| name.eq_ignore_ascii_case(n);
        if is(b"WAIT") || is(b"WAITAOF") {
            self.waits = true;
        }
        if STOPPERS.iter().any(|s| is(s)) {
            q.stopped = true;
            out.extend_from_slice(frame);
            return;
        }
        let in_multi = self.in_multi;
        if is(b"MULTI") {
            self.in_multi = true;
        } else if is(b"EXEC") || is(b"DISCARD") {
            self.in_multi = false;
            self.watching = false;
        } else if is(b"WATCH") {
            self.watching = true;
        } else if is(b"UNWATCH") {
            self.watching = false;
        } else if is(b"SELECT") && !in_multi {
            self.db = arg(1)
                .and_then(|d| std::str::from_utf8(d).ok())
                .and_then(|d| d.parse().ok())
                .unwrap_or(self.db);
        }
        let pass = |q: &mut Queue, out: &mut Vec<u8>| {
            out.extend_from_slice(frame);
            q.expects.push_back(Expect::Pass);
        };
        if in_multi || frame[0] != b'*' || args.len() < 2 {
            return pass(q, out);
        }
        let key = &frame[args[1].clone()];
        let script = is(b"EVAL")
            || is(b"EVALSHA")
            || is(b"EVAL_RO")
            || is(b"EVALSHA_RO")
            || is(b"FCALL")
            || is(b"FCALL_RO");
        if script {
            return self.script(frame, args, keys, q, out);
        }
        if !keys.matches(key) {
            return pass(q, out);
        }
        let lk = || self.lock_key(key);
        let upper = |i: usize| arg(i).map(|a| a.to_ascii_uppercase());
        let now = Instant::now;
        let e = if (is(b"DEL") || is(b"UNLINK")) && args.len() == 2 {
            push_command(out, &[b"GETDEL", key]);
            q.expects.push_back(Expect::Delete {
                key: lk(),
                rewritten: true,
                asked: now(),
            });
            return;
        } else if is(b"GETDEL") && args.len() == 2 {
            Expect::Delete {
                key: lk(),
                rewritten: false,
                asked: now(),
            }
        } else if is(b"DELEX") && args.len() == 4 && upper(2).as_deref() == Some(b"IFEQ") {
            Expect::DelEx {
                key: lk(),
                token: frame[args[3].clone()].to_vec(),
                asked: now(),
            }
        } else if is(b"SETNX") && args.len() == 3 {
            Expect::Acquire {
                key: lk(),
                token: frame[args[2].clone()].to_vec(),
                ttl_us: None,
                asked: now(),
            }
        } else if (is(b"PEXPIRE") || is(b"EXPIRE")) && args.len() >= 3 {
            let unit = if is(b"PEXPIRE") { 1_000 } else { 1_000_000 };
            match ttl_arg(arg(2), unit) {
                Some(ttl_us) => Expect::Expiry {
                    key: lk(),
                    ttl_us,
                    token: None,
                    asked: now(),
                },
                None => Expect::Pass,
            }
        } else if is(b"SET") && args.len() >= 4 {
            set_expect(frame, args, &lk())
        } else {
            Expect::Pass
        };
        out.extend_from_slice(frame);
        q.expects.push_back(e);
    }

    /// The ledger's name of `key` in this connection's database: the key itself in database
    /// 0, `[db N] key` in another (so one name in two databases is two locks).
    fn lock_key(&self, key: &[u8]) -> Vec<u8> {
        if self.db == 0 {
            return key.to_vec();
        }
        let mut k = format!("[db {}] ", self.db).into_bytes();
        k.extend_from_slice(key);
        k
    }

    /// A script call: wrapped in a transaction reading its lock keys before and after, unless
    /// it names none, too many, or a transaction of ours would change the client's.
    fn script(
        &mut self,
        frame: &[u8],
        args: &[Range<usize>],
        keys: &LockKeys,
        q: &mut Queue,
        out: &mut Vec<u8>,
    ) {
        let numkeys = args
            .get(2)
            .and_then(|r| std::str::from_utf8(&frame[r.clone()]).ok())
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|&n| n <= MAX_SCRIPT_KEYS && 3 + n <= args.len());
        let named: Vec<&[u8]> = match numkeys {
            Some(n) if !self.watching => args[3..3 + n]
                .iter()
                .map(|r| &frame[r.clone()])
                .filter(|k| keys.matches(k))
                .collect(),
            _ => Vec::new(),
        };
        if named.is_empty() {
            out.extend_from_slice(frame);
            q.expects.push_back(Expect::Pass);
            return;
        }
        push_command(out, &[b"MULTI"]);
        let last = (ZSET_MEMBERS - 1).to_string();
        let read = |out: &mut Vec<u8>| {
            for k in &named {
                push_command(out, &[b"GET", k]);
                push_command(out, &[b"ZRANGE", k, b"0", last.as_bytes()]);
                push_command(out, &[b"PTTL", k]);
            }
        };
        read(out);
        out.extend_from_slice(frame);
        read(out);
        push_command(out, &[b"EXEC"]);
        q.expects.push_back(Expect::Script {
            swallow: 2 + 2 * READS * named.len(),
            keys: named.into_iter().map(|k| self.lock_key(k)).collect(),
            error: None,
            asked: Instant::now(),
        });
    }
}

/// Commands reading one key's state in a script's transaction ([`key_state`]).
const READS: usize = 3;

/// A key's state from the replies to its [`READS`]: `GET`, `ZRANGE`, `PTTL`.
fn key_state(r: &[&[u8]]) -> KeyState {
    let value = bulk(r[0])
        .flatten()
        .or_else(|| elements(r[1]).and_then(|m| zset_identity(&m)));
    KeyState {
        value,
        pttl: integer(r[2]).unwrap_or(-2),
    }
}

/// A sorted set's identity as a lock: its members (the tokens), sorted and each prefixed with
/// its length, so two sets are one value exactly when they hold the same members, whatever
/// their scores (an extension moves the scores, not the holder). `None` for an empty reply
/// (no key) or one that is not all bulk strings.
fn zset_identity(members: &[&[u8]]) -> Option<Vec<u8>> {
    let mut m: Vec<Vec<u8>> = members
        .iter()
        .map(|f| bulk(f).flatten())
        .collect::<Option<_>>()?;
    if m.is_empty() {
        return None;
    }
    m.sort();
    let mut id = b"(sorted set)".to_vec();
    for v in m {
        id.extend_from_slice(format!(" {}:", v.len()).as_bytes());
        id.extend_from_slice(&v);
    }
    Some(id)
}

/// A TTL argument in `unit` µs, when it is a positive whole number.
fn ttl_arg(a: Option<&[u8]>, unit: u64) -> Option<u64> {
    let n: u64 = std::str::from_utf8(a?).ok()?.parse().ok()?;
    (n > 0).then(|| n.saturating_mul(unit))
}

/// What a `SET key value opts…` (four arguments or more) is: `NX` an acquisition, `XX`/`IFEQ`
/// with an expiry an extension (with `GET` it answers a value: neither).
fn set_expect(frame: &[u8], args: &[Range<usize>], key: &[u8]) -> Expect {
    let opt = |i: usize| &frame[args[i].clone()];
    let (mut nx, mut xx, mut get, mut ttl_us) = (false, false, false, None);
    let mut i = 3;
    while i < args.len() {
        let o = opt(i);
        let is = |n: &[u8]| o.eq_ignore_ascii_case(n);
        if is(b"NX") {
            nx = true;
        } else if is(b"XX") {
            xx = true;
        } else if is(b"GET") {
            get = true;
        } else if is(b"IFEQ") || is(b"IFNE") || is(b"IFDEQ") || is(b"IFDNE") {
            xx = true;
            i += 1;
        } else if is(b"PX") || is(b"EX") {
            let unit = if is(b"PX") { 1_000 } else { 1_000_000 };
            ttl_us = ttl_arg(args.get(i + 1).map(|r| &frame[r.clone()]), unit);
            i += 1;
        } else if is(b"PXAT") || is(b"EXAT") {
            // An absolute expiry: its length is not in the request.
            i += 1;
        }
        i += 1;
    }
    let token = frame[args[2].clone()].to_vec();
    let asked = Instant::now();
    match (nx, xx, get, ttl_us) {
        (true, false, false, ttl_us) => Expect::Acquire {
            key: key.to_vec(),
            token,
            ttl_us,
            asked,
        },
        (false, true, false, Some(ttl_us)) => Expect::Expiry {
            key: key.to_vec(),
            ttl_us,
            token: Some(token),
            asked,
        },
        _ => Expect::Pass,
    }
}

impl Replies {
    /// Takes `bytes` read from the server; appends what goes to the client to `out`, and
    /// calls `seen` with what a reply told (and when its request was read) before its bytes
    /// are in `out`. `Err` when the server sent what is not RESP.
    pub(crate) fn feed(
        &mut self,
        bytes: &[u8],
        queue: &std::sync::Mutex<Queue>,
        out: &mut Vec<u8>,
        mut seen: impl FnMut(Event, Instant),
    ) -> Result<(), Broken> {
        if self.raw {
            out.extend_from_slice(bytes);
            return Ok(());
        }
        let (buf, from_buf) = take_input(&mut self.buf, bytes);
        let data: &[u8] = if from_buf { &buf } else { bytes };
        let mut q = queue.lock().unwrap_or_else(|p| p.into_inner());
        // Requests answered: expectations popped, but a reply of the proxy's own.
        let (expected, mut swallowed) = (q.expects.len(), 0);
        let mut at = 0;
        let result = loop {
            if at >= data.len() {
                break Ok(());
            }
            if q.stopped && q.expects.is_empty() {
                self.raw = true;
                out.extend_from_slice(&data[at..]);
                at = data.len();
                break Ok(());
            }
            let rest = &data[at..];
            let len = match frame_len(rest) {
                Ok(Some(n)) => n,
                Ok(None) if rest.len() > MAX_FRAME => {
                    break Err(Broken(format!(
                        "a reply larger than {} MiB",
                        MAX_FRAME >> 20
                    )));
                }
                Ok(None) => break Ok(()),
                Err(e) => break Err(Broken(format!("the server sent what is not RESP: {e}"))),
            };
            let frame = &rest[..len];
            at += len;
            if !matches!(frame[0], b'>' | b'|') && q.expects.front() == Some(&Expect::Swallow) {
                swallowed += 1;
            }
            reply(frame, &mut q, out, &mut seen);
        };
        self.answered += (expected - q.expects.len() - swallowed) as u64;
        drop(q);
        self.buf = keep_rest(buf, from_buf, bytes, at, result.is_ok());
        result
    }
}

/// One reply frame: matched with the request it answers, translated where that request was
/// rewritten, and what it tells passed to `seen`.
fn reply(frame: &[u8], q: &mut Queue, out: &mut Vec<u8>, seen: &mut impl FnMut(Event, Instant)) {
    match frame[0] {
        // Out of band: a push stops recognising, an attribute precedes its reply.
        b'>' => {
            q.stopped = true;
            out.extend_from_slice(frame);
            return;
        }
        b'|' => {
            out.extend_from_slice(frame);
            return;
        }
        _ => {}
    }
    if q.expects.front() == Some(&Expect::Swallow) {
        q.expects.pop_front();
        return;
    }
    if let Some(Expect::Script { swallow, error, .. }) = q.expects.front_mut()
        && *swallow > 0
    {
        *swallow -= 1;
        if frame[0] == b'-' && error.is_none() {
            *error = Some(frame.to_vec());
        }
        return;
    }
    let ok = frame == b"+OK\r\n" || frame == b":1\r\n";
    match q.expects.pop_front() {
        Some(Expect::Acquire {
            key,
            token,
            ttl_us,
            asked,
        }) if ok => seen(Event::Acquired { key, token, ttl_us }, asked),
        Some(Expect::Expiry {
            key,
            ttl_us,
            token,
            asked,
        }) if ok => seen(Event::Expiry { key, ttl_us, token }, asked),
        Some(Expect::Delete {
            key,
            rewritten,
            asked,
        }) => {
            if let Some(value) = bulk(frame) {
                if rewritten {
                    out.extend_from_slice(if value.is_some() {
                        b":1\r\n"
                    } else {
                        b":0\r\n"
                    });
                } else {
                    out.extend_from_slice(frame);
                }
                seen(Event::Removed { key, value }, asked);
                return;
            }
        }
        Some(Expect::DelEx { key, token, asked }) => match frame {
            b":1\r\n" => seen(
                Event::Removed {
                    key,
                    value: Some(token),
                },
                asked,
            ),
            b":0\r\n" => seen(Event::Refused { key }, asked),
            _ => {}
        },
        Some(Expect::Script {
            keys, error, asked, ..
        }) => {
            let n = keys.len();
            match elements(frame).filter(|e| e.len() == 2 * READS * n + 1) {
                Some(e) => {
                    out.extend_from_slice(e[READS * n]);
                    for (i, key) in keys.into_iter().enumerate() {
                        let state = |at: usize| key_state(&e[at..at + READS]);
                        let (before, after) = (state(READS * i), state(READS * n + 1 + READS * i));
                        seen(Event::Script { key, before, after }, asked);
                    }
                }
                // Refused before it ran (EXECABORT): the client gets its command's error.
                None => out.extend_from_slice(error.as_deref().unwrap_or(frame)),
            }
            return;
        }
        _ => {}
    }
    out.extend_from_slice(frame);
}

/// A bulk reply's value: `Some(None)` for nil, `None` for what is not a value.
fn bulk(frame: &[u8]) -> Option<Option<Vec<u8>>> {
    match frame {
        b"$-1\r\n" | b"_\r\n" => Some(None),
        [b'$', ..] => {
            let (n, head) = crate::faults::resp::line(frame)?;
            let n: usize = n.parse().ok()?;
            Some(Some(frame.get(head..head + n)?.to_vec()))
        }
        _ => None,
    }
}

/// An integer reply's value.
fn integer(frame: &[u8]) -> Option<i64> {
    match frame.first() {
        Some(b':') => crate::faults::resp::line(frame)?.0.parse().ok(),
        _ => None,
    }
}

/// The elements of an array reply (each a whole frame); `None` for what is not an array.
fn elements(frame: &[u8]) -> Option<Vec<&[u8]>> {
    if frame.first() != Some(&b'*') {
        return None;
    }
    let (n, mut at) = crate::faults::resp::line(frame)?;
    let n: usize = n.parse().ok()?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let len = frame_len(&frame[at..]).ok()??;
        out.push(&frame[at..at + len]);
        at += len;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn cmd(args: &[&str]) -> Vec<u8> {
        let mut v = Vec::new();
        push_command(
            &mut v,
            &args.iter().map(|a| a.as_bytes()).collect::<Vec<_>>(),
        );
        v
    }

    fn all() -> LockKeys {
        LockKeys::default()
    }

    /// Globs as Redis reads them.
    #[test]
    fn globs_match_as_redis_does() {
        let k = LockKeys::new(&["lock:*".into(), "job-?".into(), "r[a-c]x".into()]);
        assert!(k.matches(b"lock:1") && k.matches(b"lock:"));
        assert!(k.matches(b"job-1") && !k.matches(b"job-12"));
        assert!(k.matches(b"rbx") && !k.matches(b"rdx"));
        assert!(!k.matches(b"other"));
        assert!(glob(b"[^a]b", b"cb") && !glob(b"[^a]b", b"ab"));
        assert!(glob(b"a\\*", b"a*") && !glob(b"a\\*", b"ab"));
        assert!(all().matches(b"anything"));
    }

    /// Requests split at every position: pipelined, what is rewritten and what each expects.
    #[test]
    fn requests_split_anywhere_are_recognised() {
        let parts = [
            cmd(&["SET", "l", "t1", "NX", "PX", "100"]),
            cmd(&["del", "l"]),
            cmd(&["SETNX", "m", "t2"]),
            cmd(&["EXPIRE", "m", "2"]),
            cmd(&["SET", "l", "t1", "XX", "EX", "3"]),
            cmd(&["GET", "l"]),
            cmd(&["MULTI"]),
            cmd(&["DEL", "l"]),
            cmd(&["EXEC"]),
            b"PING\r\n".to_vec(),
        ];
        let bytes = parts.concat();
        let mut want = bytes.clone();
        let del = cmd(&["del", "l"]);
        let p = want.windows(del.len()).position(|w| w == del).unwrap();
        want.splice(p..p + del.len(), cmd(&["GETDEL", "l"]));
        for at in 0..=bytes.len() {
            let q = Mutex::new(Queue::default());
            let (mut r, mut out) = (Requests::default(), Vec::new());
            r.feed(&bytes[..at], &all(), &q, &mut out).unwrap();
            r.feed(&bytes[at..], &all(), &q, &mut out).unwrap();
            assert_eq!(out, want, "split at {at}");
            assert_eq!(r.commands, 10);
            let kinds: Vec<&str> = q
                .lock()
                .unwrap()
                .expects
                .iter()
                .map(|e| match e {
                    Expect::Pass => "pass",
                    Expect::Acquire {
                        ttl_us: Some(100_000),
                        ..
                    } => "acquire 100ms",
                    Expect::Acquire { ttl_us: None, .. } => "acquire",
                    Expect::Expiry { ttl_us, .. } if *ttl_us == 2_000_000 => "expiry 2s",
                    Expect::Expiry { ttl_us, .. } if *ttl_us == 3_000_000 => "extension 3s",
                    Expect::Delete {
                        rewritten: true, ..
                    } => "del",
                    _ => "other",
                })
                .collect();
            assert_eq!(
                kinds,
                [
                    "acquire 100ms",
                    "del",
                    "acquire",
                    "expiry 2s",
                    "extension 3s",
                    "pass",
                    "pass",
                    "pass",
                    "pass",
                    "pass"
                ],
                "split at {at}"
            );
        }
    }

    /// One key name in two databases is two locks.
    #[test]
    fn a_selected_database_names_its_keys() {
        let q = Mutex::new(Queue::default());
        let reqs = [
            cmd(&["SET", "l", "a", "NX", "PX", "50"]),
            cmd(&["SELECT", "3"]),
            cmd(&["SET", "l", "b", "NX", "PX", "50"]),
        ]
        .concat();
        let mut out = Vec::new();
        Requests::default()
            .feed(&reqs, &all(), &q, &mut out)
            .unwrap();
        assert_eq!(out, reqs);
        let keys: Vec<Vec<u8>> = q
            .lock()
            .unwrap()
            .expects
            .iter()
            .filter_map(|e| match e {
                Expect::Acquire { key, .. } => Some(key.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(keys, [b"l".to_vec(), b"[db 3] l".to_vec()]);
    }

    /// A script naming a lock key goes out in a transaction; its reply comes back as the
    /// script's own, with the key's state before and after; a refused transaction answers
    /// with the command's error.
    #[test]
    fn a_script_is_wrapped_and_its_reply_unwrapped() {
        let q = Mutex::new(Queue::default());
        let (mut r, mut out) = (Requests::default(), Vec::new());
        let eval = cmd(&["EVAL", "return 1", "1", "l", "tok"]);
        r.feed(&eval, &all(), &q, &mut out).unwrap();
        let want = [
            cmd(&["MULTI"]),
            cmd(&["GET", "l"]),
            cmd(&["ZRANGE", "l", "0", "15"]),
            cmd(&["PTTL", "l"]),
            eval.clone(),
            cmd(&["GET", "l"]),
            cmd(&["ZRANGE", "l", "0", "15"]),
            cmd(&["PTTL", "l"]),
            cmd(&["EXEC"]),
        ]
        .concat();
        assert_eq!(out, want);
        let replies: &[u8] = b"+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*7\r\n$3\r\ntok\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n:900\r\n:1\r\n$-1\r\n*0\r\n:-2\r\n";
        for at in 0..=replies.len() {
            let q = Mutex::new(Queue::default());
            r.feed(&eval, &all(), &q, &mut Vec::new()).unwrap();
            let (mut rep, mut out, mut seen) = (Replies::default(), Vec::new(), Vec::new());
            rep.feed(&replies[..at], &q, &mut out, |e, _| seen.push(e))
                .unwrap();
            rep.feed(&replies[at..], &q, &mut out, |e, _| seen.push(e))
                .unwrap();
            assert_eq!(out, b":1\r\n", "split at {at}");
            assert_eq!(
                seen,
                [Event::Script {
                    key: b"l".to_vec(),
                    before: KeyState {
                        value: Some(b"tok".to_vec()),
                        pttl: 900
                    },
                    after: KeyState {
                        value: None,
                        pttl: -2
                    },
                }]
            );
        }
        let q = Mutex::new(Queue::default());
        r.feed(&eval, &all(), &q, &mut Vec::new()).unwrap();
        let refused: &[u8] = b"+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n-ERR wrong number\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n-EXECABORT Transaction discarded\r\n";
        let mut out = Vec::new();
        Replies::default()
            .feed(refused, &q, &mut out, |_, _| panic!("nothing ran"))
            .unwrap();
        assert_eq!(out, b"-ERR wrong number\r\n");
    }

    /// A sorted-set lock (Symfony Lock's `RedisStore`) is read by its members, whatever their
    /// scores: `GET` answers `WRONGTYPE`, `ZRANGE` the tokens; the same members in another
    /// order (an extension moved the scores) are one identity, another member another.
    #[test]
    fn a_sorted_set_is_read_by_its_members() {
        let q = Mutex::new(Queue::default());
        let eval = cmd(&["EVAL", "return 1", "1", "l", "tok"]);
        Requests::default()
            .feed(&eval, &all(), &q, &mut Vec::new())
            .unwrap();
        let wrongtype = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
        let replies = format!(
            "+OK\r\n{}*7\r\n$-1\r\n*0\r\n:-2\r\n:1\r\n{wrongtype}*2\r\n$3\r\ntok\r\n$9\r\n__write__\r\n:300\r\n",
            "+QUEUED\r\n".repeat(7)
        );
        let (mut out, mut seen) = (Vec::new(), Vec::new());
        Replies::default()
            .feed(replies.as_bytes(), &q, &mut out, |e, _| seen.push(e))
            .unwrap();
        assert_eq!(out, b":1\r\n");
        let id = |m: &[&[u8]]| {
            let frames: Vec<Vec<u8>> = m
                .iter()
                .map(|v| [format!("${}\r\n", v.len()).as_bytes(), v, b"\r\n"].concat())
                .collect();
            zset_identity(&frames.iter().map(Vec::as_slice).collect::<Vec<_>>())
        };
        assert_eq!(
            seen,
            [Event::Script {
                key: b"l".to_vec(),
                before: KeyState {
                    value: None,
                    pttl: -2
                },
                after: KeyState {
                    value: id(&[b"tok", b"__write__"]),
                    pttl: 300
                },
            }]
        );
        assert_eq!(id(&[b"__write__", b"tok"]), id(&[b"tok", b"__write__"]));
        assert_ne!(id(&[b"other", b"__write__"]), id(&[b"tok", b"__write__"]));
        assert_ne!(id(&[b"a b", b"c"]), id(&[b"a", b"b c"]));
        assert_eq!(id(&[]), None);
    }

    /// A rewritten DEL answers as DEL; SET NX `+OK` and nil; a push stops recognising.
    #[test]
    fn replies_translate_and_tell() {
        let q = Mutex::new(Queue::default());
        let mut r = Requests::default();
        let reqs = [
            cmd(&["SET", "l", "a", "NX", "PX", "50"]),
            cmd(&["SET", "l", "b", "NX", "PX", "50"]),
            cmd(&["DEL", "l"]),
            cmd(&["DEL", "l"]),
        ]
        .concat();
        r.feed(&reqs, &all(), &q, &mut Vec::new()).unwrap();
        let (mut out, mut seen) = (Vec::new(), Vec::new());
        Replies::default()
            .feed(b"+OK\r\n$-1\r\n$1\r\na\r\n_\r\n", &q, &mut out, |e, _| {
                seen.push(e)
            })
            .unwrap();
        assert_eq!(out, b"+OK\r\n$-1\r\n:1\r\n:0\r\n");
        assert_eq!(seen.len(), 3);
        assert!(matches!(&seen[0], Event::Acquired { token, .. } if token == b"a"));
        assert_eq!(
            seen[2],
            Event::Removed {
                key: b"l".to_vec(),
                value: None
            }
        );
    }

    /// Garbage from a client is an error; an oversized frame too; others pass.
    #[test]
    fn bad_requests_break_the_connection() {
        let q = Mutex::new(Queue::default());
        let e = Requests::default()
            .feed(b"*1\r\n:1\r\n", &all(), &q, &mut Vec::new())
            .unwrap_err();
        assert!(e.0.contains("malformed"), "{e:?}");
        let mut r = Requests::default();
        let head = format!("*2\r\n$3\r\nSET\r\n${}\r\n", MAX_FRAME + 10);
        r.feed(head.as_bytes(), &all(), &q, &mut Vec::new())
            .unwrap();
        let chunk = vec![b'x'; 1 << 20];
        let mut err = None;
        for _ in 0..(MAX_FRAME >> 20) + 2 {
            if let Err(e) = r.feed(&chunk, &all(), &q, &mut Vec::new()) {
                err = Some(e);
                break;
            }
        }
        assert!(err.unwrap().0.contains("larger than"));
    }
}
