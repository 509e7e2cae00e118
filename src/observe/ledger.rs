//! The ledger of an observed run: every lock key's holds on one clock (the proxy's), built
//! from what the doors' replies told ([`super::stream::Event`]), and the figures of a run
//! from them — the same [`EventRow`]s, counts and histograms as lockbench's own workers.
//!
//! A hold runs from its acquisition's reply to its release's request (as a worker's section
//! does). Who holds is the *client*: a copy lockbench started (every connection to its door,
//! so a connection pool is one client), or one connection to the shared door. A release is
//! judged by the value it removed at the server: the client's own token (released), another
//! client's (a wrongful delete, client → victim), nothing (the lock was gone), or — a script
//! that left the key as it was while the client held it — refused.

use super::connections::{Connection, Connections};
use super::stream::{Event, KeyState};
use crate::analysis::counts::Counts;
use crate::analysis::overlap::{OverlapStats, compute};
use crate::analysis::summary::AttributedDelete;
use crate::model::error::ErrorKind;
use crate::model::release::ReleaseOutcome;
use crate::model::release::StaleRule;
use crate::record::{EventRow, HistSet, Metric, SectionOutcome};
use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Tokens remembered per key with the client that set them, to name a wrongful delete's
/// victim after its hold ended (a crashed client's token still on the key).
const TOKENS_PER_KEY: usize = 8;
/// Wrongful deletes kept with their names (the count is exact beyond it).
const KEPT: usize = 1000;

/// The longest TTL that makes no hold (µs): `PX`/`PTTL` count whole milliseconds, so a key
/// set to live 1 ms can be gone before its reply reaches the client, and no section runs
/// under it. Symfony Lock's `RedisStore` writes such a key as a probe of the server
/// (`symfony_check_support_time`, `SET … PX 1` in a script); a reader would not call it a lock.
const FLEETING_US: u64 = 1_000;

/// No expiry: the `ttl_us` of a hold whose key had none.
pub(crate) const NO_EXPIRY: u64 = u64::MAX;

/// One open hold.
#[derive(Debug, Clone)]
struct Hold {
    client: usize,
    token: Vec<u8>,
    seq: u64,
    asked_us: u64,
    acquired_us: u64,
    /// When the key expires as far as the proxy knows (`None`: no expiry).
    deadline_us: Option<u64>,
    /// The TTL last given (at the acquisition, an extension, or a cut), µs.
    ttl_us: Option<u64>,
    extensions: u32,
    holders_at_start: u32,
}

/// One lock key.
#[derive(Debug, Default)]
struct Key {
    index: usize,
    open: Vec<Hold>,
    /// Every hold's interval, for the exact overlap at the end (16 bytes a hold).
    intervals: Vec<(u64, u64)>,
    tokens: VecDeque<(Vec<u8>, usize)>,
    /// The longest TTL a hold ended with (the run's TTL, as a worker's `--ttl`): the last one
    /// given, so a TTL cut at once after the acquisition (Symfony's 300 s) does not count.
    ttl_max_us: u64,
}

/// What one client did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub(crate) struct ClientTally {
    /// `copy 3`, `connection 17`.
    pub(crate) name: String,
    pub(crate) connections: u64,
    pub(crate) commands: u64,
    pub(crate) holds: u64,
    pub(crate) released: u64,
    pub(crate) wrongful_deletes: u64,
    pub(crate) victim_of: u64,
    pub(crate) refused: u64,
    pub(crate) nothing_deleted: u64,
    pub(crate) crashed_holding: u64,
}

/// The ledger's contents, under its lock.
#[derive(Debug, Default)]
struct Book {
    keys: HashMap<Vec<u8>, Key>,
    clients: Vec<ClientTally>,
    seqs: Vec<u64>,
    counts: Counts,
    hists: HistSet,
    attributed: Vec<AttributedDelete>,
    /// Releases by a client that held nothing on the key.
    stray_releases: u64,
    /// Wrongful deletes by such releases (counted here, no row: there was no hold).
    stray_wrongful: u64,
    crash_blocked_censored: u64,
    stuck_locks: u64,
    /// Acquisitions with a TTL of at most [`FLEETING_US`]: no hold.
    fleeting: u64,
    /// Removals of a value no client was seen setting yet, by index in `attributed`: the
    /// acquisition's reply can reach the proxy after the delete's (two connections, two
    /// tasks), so the victim is named when it does.
    orphans: Vec<(Vec<u8>, Vec<u8>, usize)>,
}

/// Every door's notes, on one clock from `start`.
#[derive(Debug)]
pub(crate) struct Ledger {
    start: Instant,
    variant: Arc<str>,
    book: Mutex<Book>,
    events: Mutex<Option<std::io::BufWriter<std::fs::File>>>,
    /// Woken at every acquisition (a holder fault waits for a holder).
    pub(crate) acquired: tokio::sync::Notify,
    /// The clients' connections: requests read and answered, and what waits unread.
    pub(crate) connections: Connections,
}

/// The ledger's figures at the end.
#[derive(Debug, Default)]
pub(crate) struct Tallied {
    pub(crate) counts: Counts,
    pub(crate) hists: HistSet,
    pub(crate) per_key: Vec<OverlapStats>,
    pub(crate) keys: Vec<String>,
    pub(crate) clients: Vec<ClientTally>,
    pub(crate) attributed: Vec<AttributedDelete>,
    pub(crate) stray_releases: u64,
    pub(crate) stray_wrongful: u64,
    pub(crate) crash_blocked_censored: u64,
    pub(crate) stuck_locks: u64,
    /// Acquisitions of a key set to live at most 1 ms, counted as no hold ([`FLEETING_US`]).
    pub(crate) fleeting: u64,
    pub(crate) ttl_max_us: u64,
}

/// The ledger's figures while the run goes ([`Ledger::live`]).
#[derive(Debug, Default)]
pub(crate) struct LiveFigures {
    /// The counts of the holds that ended.
    pub(crate) counts: Counts,
    /// Their histograms.
    pub(crate) hists: HistSet,
    /// Overlap of every hold so far, summed over the keys.
    pub(crate) overlap: OverlapStats,
    /// Holds open now, summed over the keys.
    pub(crate) holders: u64,
    /// Most holds open now on one key.
    pub(crate) holders_max: u32,
    /// The longest TTL seen so far, µs.
    pub(crate) ttl_max_us: u64,
}

impl Ledger {
    /// A ledger from `start`, writing each hold's row to `events` as it ends.
    pub(crate) fn new(start: Instant, events: Option<std::fs::File>) -> Ledger {
        let events = events.map(|f| {
            let mut w = std::io::BufWriter::with_capacity(1 << 16, f);
            let _ = w.write_all(crate::results::events::header_line().as_bytes());
            w
        });
        Ledger {
            start,
            variant: Arc::from("observed"),
            book: Mutex::new(Book::default()),
            events: Mutex::new(events),
            acquired: tokio::sync::Notify::new(),
            connections: Connections::default(),
        }
    }

    /// µs from the start to `t`.
    pub(crate) fn us(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.start).as_micros() as u64
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Names client `client` (grows the table).
    pub(crate) fn name_client(&self, client: usize, name: String) {
        let mut b = self.book();
        b.client(client).name = name;
    }

    /// A new connection of `client` (`socket`: a copy of its descriptor, kept while it is
    /// open).
    pub(crate) fn connection(&self, client: usize, socket: Option<OwnedFd>) -> Connection {
        self.book().client(client).connections += 1;
        self.connections.open(client, socket)
    }

    /// `n` of `conn`'s requests were answered: once none is left, whoever waits on the ledger
    /// (a crash fault) is told.
    pub(crate) fn answered(&self, conn: &Connection, n: u64) {
        if n > 0 && conn.answered(n) {
            self.acquired.notify_waiters();
        }
    }

    /// What a reply told: `asked` is when its request was read, now when its reply was.
    pub(crate) fn seen(&self, client: usize, event: Event, asked: Instant) {
        let now = self.us(Instant::now());
        let asked = self.us(asked).min(now);
        let mut rows = Vec::new();
        {
            let mut b = self.book();
            b.client(client);
            b.apply(client, event, asked, now, &mut rows, &self.variant);
        }
        self.acquired.notify_waiters();
        self.write(rows);
    }

    /// The clients holding a lock now, the one holding longest first.
    pub(crate) fn holders(&self) -> Vec<usize> {
        let b = self.book();
        let mut open: Vec<(u64, usize)> = b
            .keys
            .values()
            .flat_map(|k| k.open.iter().map(|h| (h.acquired_us, h.client)))
            .collect();
        open.sort_unstable();
        let mut out: Vec<usize> = Vec::new();
        for (_, c) in open {
            if !out.contains(&c) {
                out.push(c);
            }
        }
        out
    }

    /// The figures so far, for the live metrics (`--metrics`): the counts of the holds that
    /// ended, the holders open now, and the overlap of every hold so far (the open ones up to
    /// `now`). The intervals are copied under the lock and the overlap computed outside it,
    /// so the doors wait for a copy, not for the sort.
    pub(crate) fn live(&self, now: Instant) -> LiveFigures {
        let now = self.us(now);
        let (mut out, keys) = {
            let b = self.book();
            let mut out = LiveFigures {
                counts: b.counts,
                hists: b.hists.clone(),
                ..LiveFigures::default()
            };
            let mut keys = Vec::with_capacity(b.keys.len());
            for k in b.keys.values() {
                let open = k.open.len() as u32;
                out.holders += u64::from(open);
                out.holders_max = out.holders_max.max(open);
                out.ttl_max_us = out.ttl_max_us.max(k.ttl_max_us);
                for h in &k.open {
                    out.ttl_max_us = out.ttl_max_us.max(h.ttl_us.unwrap_or(0));
                }
                let mut iv = k.intervals.clone();
                iv.extend(
                    k.open
                        .iter()
                        .map(|h| (h.acquired_us, now.max(h.acquired_us))),
                );
                keys.push(iv);
            }
            (out, keys)
        };
        for iv in &keys {
            out.overlap.merge(&compute(iv).0);
        }
        out
    }

    /// Client `client` is gone (its process exited) at `at`: its open holds end as crashes,
    /// and the time each blocked its key (until its expiry) is counted.
    pub(crate) fn gone(&self, client: usize, at: Instant) {
        let at = self.us(at);
        let mut rows = Vec::new();
        {
            let mut b = self.book();
            let b = &mut *b;
            let mut blocked = Vec::new();
            for key in b.keys.values_mut() {
                let mut i = 0;
                while i < key.open.len() {
                    if key.open[i].client != client {
                        i += 1;
                        continue;
                    }
                    let h = key.open.remove(i);
                    blocked.push(h.deadline_us.map(|d| d.saturating_sub(at)));
                    let row = close(
                        key,
                        h,
                        at,
                        at,
                        SectionOutcome::Crashed,
                        false,
                        &self.variant,
                    );
                    rows.push(row);
                }
            }
            for d in blocked {
                match d {
                    Some(d) => b.hists.record(Metric::CrashBlocked, d),
                    None => b.crash_blocked_censored += 1,
                }
                b.client(client).crashed_holding += 1;
            }
            for row in &rows {
                b.count(row);
            }
        }
        self.write(rows);
    }

    /// Ends every open hold at `end` (the run ended under it: interrupted rows, and a hold
    /// without expiry is a stuck lock), and returns the figures.
    pub(crate) fn finish(&self, end: Instant) -> Tallied {
        let end = self.us(end);
        let mut rows = Vec::new();
        let mut b = self.book();
        let b = &mut *b;
        for key in b.keys.values_mut() {
            for h in std::mem::take(&mut key.open) {
                if h.deadline_us.is_none() {
                    b.stuck_locks += 1;
                }
                let row = close(
                    key,
                    h,
                    end,
                    end,
                    SectionOutcome::ReleaseFailed(ErrorKind::Abandoned),
                    true,
                    &self.variant,
                );
                b.counts.add(&Counts::of_section(&row, StaleRule::Reply));
                rows.push(row);
            }
        }
        let mut keys: Vec<(&Vec<u8>, &Key)> = b.keys.iter().collect();
        keys.sort_by_key(|(_, k)| k.index);
        let per_key = keys
            .iter()
            .map(|(_, k)| {
                let (stats, stretches) = compute(&k.intervals);
                for (s, e) in stretches {
                    b.hists.record(Metric::OverlapStretch, e - s);
                }
                stats
            })
            .collect();
        let names = keys
            .iter()
            .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
            .collect();
        let t = Tallied {
            counts: b.counts,
            hists: b.hists.clone(),
            per_key,
            keys: names,
            clients: b.clients.clone(),
            attributed: b.attributed.clone(),
            stray_releases: b.stray_releases,
            stray_wrongful: b.stray_wrongful,
            crash_blocked_censored: b.crash_blocked_censored,
            stuck_locks: b.stuck_locks,
            fleeting: b.fleeting,
            ttl_max_us: b.keys.values().map(|k| k.ttl_max_us).max().unwrap_or(0),
        };
        drop(keys);
        self.write(rows);
        t
    }

    /// Writes the rows of holds that ended to events.csv.
    fn write(&self, rows: Vec<EventRow>) {
        if rows.is_empty() {
            return;
        }
        let mut w = self.events.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(w) = w.as_mut() {
            let mut line = Vec::with_capacity(256);
            for r in &rows {
                line.clear();
                crate::results::events::encode_row(&mut line, r);
                let _ = w.write_all(&line);
            }
        }
    }

    /// Flushes events.csv.
    pub(crate) fn flush(&self) -> std::io::Result<()> {
        let mut w = self.events.lock().unwrap_or_else(|p| p.into_inner());
        match w.as_mut() {
            Some(w) => w.flush(),
            None => Ok(()),
        }
    }
}

/// Ends hold `h` of `key`: its row (released at `released_us`, the reply at `reply_us`).
fn close(
    key: &mut Key,
    h: Hold,
    released_us: u64,
    reply_us: u64,
    outcome: SectionOutcome,
    interrupted: bool,
    variant: &Arc<str>,
) -> EventRow {
    let released_us = released_us.max(h.acquired_us);
    // A hold that began after this one's release was asked for did not begin while this one
    // was held (holds end at the release request): replies to different clients are noted
    // in the order their connections' tasks ran, which need not be the server's.
    for o in key.open.iter_mut().filter(|o| o.acquired_us >= released_us) {
        o.holders_at_start = o.holders_at_start.saturating_sub(1);
    }
    key.ttl_max_us = key.ttl_max_us.max(h.ttl_us.unwrap_or(0));
    key.intervals.push((h.acquired_us, released_us));
    let duration_us = released_us - h.acquired_us;
    let ttl_us = h
        .deadline_us
        .map_or(NO_EXPIRY, |d| d.saturating_sub(h.acquired_us));
    EventRow {
        variant: variant.clone(),
        worker: h.client,
        key: key.index,
        seq: h.seq,
        attempt_start_us: h.asked_us,
        set_sent_us: h.asked_us,
        acquired_us: h.acquired_us,
        released_us,
        intended_us: 0,
        duration_us,
        ttl_us,
        overrun: duration_us > ttl_us,
        excess_us: duration_us.saturating_sub(ttl_us),
        holders_at_start: h.holders_at_start,
        attempts: 1,
        acquire_latency_us: h.acquired_us - h.asked_us.min(h.acquired_us),
        release_latency_us: reply_us.saturating_sub(released_us),
        release: "observed".into(),
        outcome,
        interrupted,
        extensions: h.extensions,
        ..EventRow::default()
    }
}

impl Book {
    fn client(&mut self, client: usize) -> &mut ClientTally {
        if self.clients.len() <= client {
            self.clients.resize_with(client + 1, ClientTally::default);
            self.seqs.resize(client + 1, 0);
        }
        &mut self.clients[client]
    }

    fn count(&mut self, row: &EventRow) {
        self.counts.add(&Counts::of_section(row, StaleRule::Reply));
        if row.interrupted {
            return;
        }
        self.hists.record(Metric::Duration, row.duration_us);
        if row.overrun {
            self.hists.record(Metric::Excess, row.excess_us);
        }
        if matches!(row.outcome, SectionOutcome::Release(_)) {
            self.hists
                .record(Metric::ReleaseLatency, row.release_latency_us);
        }
    }

    fn key(&mut self, key: Vec<u8>) -> &mut Key {
        let n = self.keys.len();
        self.keys.entry(key).or_insert_with(|| Key {
            index: n,
            ..Key::default()
        })
    }

    /// Applies one event of `client`'s: asked at `asked`, its reply at `now` (µs).
    fn apply(
        &mut self,
        client: usize,
        event: Event,
        asked: u64,
        now: u64,
        rows: &mut Vec<EventRow>,
        variant: &Arc<str>,
    ) {
        match event {
            Event::Acquired { key, token, ttl_us } => {
                self.acquire(client, key, token, ttl_us, asked, now, rows, variant)
            }
            Event::Expiry { key, ttl_us, token } => {
                self.expiry(client, &key, ttl_us, token, now);
            }
            Event::Removed { key, value } => {
                self.removed(client, key, value, asked, now, rows, variant);
            }
            Event::Refused { key } => {
                let outcome = ReleaseOutcome::RefusedUnclassified;
                self.end_own(client, key, outcome, None, asked, now, rows, variant);
            }
            Event::Script { key, before, after } => {
                self.script(client, key, before, after, asked, now, rows, variant);
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn acquire(
        &mut self,
        client: usize,
        key: Vec<u8>,
        token: Vec<u8>,
        ttl_us: Option<u64>,
        asked: u64,
        now: u64,
        rows: &mut Vec<EventRow>,
        variant: &Arc<str>,
    ) {
        if ttl_us.is_some_and(|t| t <= FLEETING_US) {
            self.fleeting += 1;
            return;
        }
        // A client acquiring a key it still holds gave its earlier hold up unreleased.
        self.end_own(
            client,
            key.clone(),
            ReleaseOutcome::NothingDeleted,
            Some(SectionOutcome::ReleaseFailed(ErrorKind::Abandoned)),
            now,
            now,
            rows,
            variant,
        );
        let seq = {
            self.client(client);
            let s = &mut self.seqs[client];
            *s += 1;
            *s - 1
        };
        self.clients[client].holds += 1;
        if let Some(i) = self
            .orphans
            .iter()
            .position(|(k, t, _)| *k == key && *t == token)
        {
            let (_, _, at) = self.orphans.swap_remove(i);
            self.attributed[at].victim = Some(client);
            self.clients[client].victim_of += 1;
        }
        self.hists
            .record(Metric::AcquireLatency, now.saturating_sub(asked));
        let k = self.key(key);
        if k.tokens.len() == TOKENS_PER_KEY {
            k.tokens.pop_front();
        }
        k.tokens.push_back((token.clone(), client));
        let holders_at_start = k.open.len() as u32;
        k.open.push(Hold {
            client,
            token,
            seq,
            asked_us: asked,
            acquired_us: now,
            deadline_us: ttl_us.map(|t| now + t),
            ttl_us,
            extensions: 0,
            holders_at_start,
        });
    }

    /// The expiry of `client`'s hold on `key` moved to `ttl_us` from `now`: its TTL when it
    /// had none yet (`SETNX` then `EXPIRE`), an extension otherwise.
    fn expiry(&mut self, client: usize, key: &[u8], ttl_us: u64, token: Option<Vec<u8>>, now: u64) {
        let Some(k) = self.keys.get_mut(key) else {
            return;
        };
        let Some(h) = k.open.iter_mut().rev().find(|h| h.client == client) else {
            return;
        };
        if h.deadline_us.is_some() || h.extensions > 0 {
            h.extensions += 1;
        }
        h.deadline_us = Some(now + ttl_us);
        h.ttl_us = Some(ttl_us);
        if let Some(t) = token {
            h.token = t;
        }
    }

    /// The expiry of `client`'s hold on `key` moved sooner, to `ttl_us` from `now`: its TTL
    /// from then on, no extension.
    fn cut(&mut self, client: usize, key: &[u8], ttl_us: u64, now: u64) {
        let Some(k) = self.keys.get_mut(key) else {
            return;
        };
        if let Some(h) = k.open.iter_mut().rev().find(|h| h.client == client) {
            h.deadline_us = Some(now + ttl_us);
            h.ttl_us = Some(ttl_us);
        }
    }

    /// `client`'s delete removed `value` from `key` (`None`: nothing).
    #[allow(clippy::too_many_arguments)]
    fn removed(
        &mut self,
        client: usize,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
        asked: u64,
        now: u64,
        rows: &mut Vec<EventRow>,
        variant: &Arc<str>,
    ) {
        let Some(value) = value else {
            let o = ReleaseOutcome::NothingDeleted;
            return self.end_own(client, key, o, None, asked, now, rows, variant);
        };
        let k = self.key(key.clone());
        let owner = k
            .open
            .iter()
            .rev()
            .find(|h| h.token == value)
            .map(|h| h.client)
            .or_else(|| {
                k.tokens
                    .iter()
                    .rev()
                    .find(|(t, _)| *t == value)
                    .map(|&(_, c)| c)
            });
        if owner == Some(client) {
            let o = ReleaseOutcome::Released;
            return self.end_own(client, key, o, None, asked, now, rows, variant);
        }
        // Another client's lock (or a value no client was seen setting).
        if self.attributed.len() < KEPT {
            if owner.is_none() {
                self.orphans
                    .push((key.clone(), value.clone(), self.attributed.len()));
            }
            self.attributed.push(AttributedDelete {
                deleter: client,
                victim: owner,
                key: String::from_utf8_lossy(&key).into_owned(),
                at_ms: now as f64 / 1000.0,
            });
        }
        if let Some(v) = owner {
            self.client(v).victim_of += 1;
        }
        let held = self
            .keys
            .get(&key)
            .is_some_and(|k| k.open.iter().any(|h| h.client == client));
        if !held {
            self.stray_wrongful += 1;
            self.client(client).wrongful_deletes += 1;
        }
        let o = ReleaseOutcome::WrongfulDelete;
        self.end_own(client, key, o, None, asked, now, rows, variant);
    }

    /// A script of `client`'s ran on `key`: what it did, from the key before and after.
    #[allow(clippy::too_many_arguments)]
    fn script(
        &mut self,
        client: usize,
        key: Vec<u8>,
        before: KeyState,
        after: KeyState,
        asked: u64,
        now: u64,
        rows: &mut Vec<EventRow>,
        variant: &Arc<str>,
    ) {
        let ttl = |s: &KeyState| u64::try_from(s.pttl).ok().map(|ms| ms * 1000);
        let after_ttl = ttl(&after);
        match (before.value, after.value) {
            // A key in its last millisecond (`PTTL` 0) removed by a script of a client that
            // does not hold it: the key's expiry, seen by the script first (Symfony's scripts
            // drop the tokens whose score is now, the key itself expires a millisecond later).
            (Some(v), None) if before.pttl == 0 && !self.holds_token(client, &key, &v) => {}
            (Some(v), None) => self.removed(client, key, Some(v), asked, now, rows, variant),
            (None, Some(t)) => self.acquire(client, key, t, after_ttl, asked, now, rows, variant),
            (Some(b), Some(a)) if a != b => {
                self.acquire(client, key, a, after_ttl, asked, now, rows, variant)
            }
            (Some(b), Some(_)) => {
                let held_token = self
                    .keys
                    .get(&key)
                    .and_then(|k| k.open.iter().rev().find(|h| h.client == client))
                    .map(|h| h.token.clone());
                match (held_token, after_ttl) {
                    // The expiry moved later: an extension.
                    (Some(_), Some(t)) if after.pttl > before.pttl || before.pttl < 0 => {
                        self.expiry(client, &key, t, None, now)
                    }
                    // The expiry moved sooner (by more than the millisecond the reads may
                    // straddle): the holder set its TTL — Symfony Lock saves with the store's
                    // initial TTL (300 s) and at once cuts it to the lock's own.
                    (Some(own), Some(t)) if own == b && after.pttl + 1 < before.pttl => {
                        self.cut(client, &key, t, now)
                    }
                    // The key is another's: the client's release (or extension) was refused.
                    (Some(own), _) if own != b => {
                        let o = ReleaseOutcome::RefusedHeldByOther;
                        self.end_own(client, key, o, None, asked, now, rows, variant)
                    }
                    _ => {}
                }
            }
            (None, None) => {
                let held = self
                    .keys
                    .get(&key)
                    .is_some_and(|k| k.open.iter().any(|h| h.client == client));
                if held {
                    let o = ReleaseOutcome::RefusedExpired;
                    self.end_own(client, key, o, None, asked, now, rows, variant);
                }
            }
        }
    }

    /// Whether `client` holds `key` with `token`.
    fn holds_token(&self, client: usize, key: &[u8], token: &[u8]) -> bool {
        self.keys.get(key).is_some_and(|k| {
            k.open
                .iter()
                .any(|h| h.client == client && h.token == token)
        })
    }

    /// Ends `client`'s newest hold on `key`, released at `asked` with `outcome` (`instead`
    /// overrides the row's outcome). A release with no hold is a stray one.
    #[allow(clippy::too_many_arguments)]
    fn end_own(
        &mut self,
        client: usize,
        key: Vec<u8>,
        outcome: ReleaseOutcome,
        instead: Option<SectionOutcome>,
        asked: u64,
        now: u64,
        rows: &mut Vec<EventRow>,
        variant: &Arc<str>,
    ) {
        let Some(k) = self.keys.get_mut(&key) else {
            if instead.is_none() {
                self.stray_releases += 1;
            }
            return;
        };
        let Some(i) = k.open.iter().rposition(|h| h.client == client) else {
            if instead.is_none() {
                self.stray_releases += 1;
            }
            return;
        };
        let h = k.open.remove(i);
        let so = instead.unwrap_or(SectionOutcome::Release(outcome));
        let row = close(k, h, asked, now, so, false, variant);
        let c = self.client(client);
        match so {
            SectionOutcome::Release(ReleaseOutcome::Released) => c.released += 1,
            SectionOutcome::Release(ReleaseOutcome::WrongfulDelete) => c.wrongful_deletes += 1,
            SectionOutcome::Release(ReleaseOutcome::NothingDeleted) => c.nothing_deleted += 1,
            SectionOutcome::Release(_) => c.refused += 1,
            _ => {}
        }
        self.count(&row);
        rows.push(row);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acquired(key: &str, token: &str, ttl_ms: u64) -> Event {
        Event::Acquired {
            key: key.into(),
            token: token.into(),
            ttl_us: Some(ttl_ms * 1000),
        }
    }

    /// The live figures: the holders open now, their overlap up to now, the longest TTL so
    /// far, and the counts of the holds that ended — the same as at the end once all ended.
    #[test]
    fn live_figures_count_the_open_holds() {
        let l = Ledger::new(Instant::now(), None);
        l.seen(0, acquired("k", "a", 2), Instant::now());
        std::thread::sleep(std::time::Duration::from_millis(5));
        l.seen(1, acquired("k", "b", 1000), Instant::now());
        let now = l.live(Instant::now());
        assert_eq!((now.holders, now.holders_max), (2, 2));
        assert_eq!(now.ttl_max_us, 1_000_000);
        assert_eq!(now.overlap.peak_holders, 2);
        assert_eq!(now.counts.sections, 0);
        let gone = Event::Removed {
            key: "k".into(),
            value: Some("b".into()),
        };
        l.seen(1, gone, Instant::now());
        let now = l.live(Instant::now());
        assert_eq!((now.holders, now.counts.sections), (1, 1));
        assert!(now.overlap.overlap_us > 0 && now.overlap.incidents == 1);
    }

    /// A hold noted after another's release was asked for, but before that release's reply
    /// was noted (two connections' replies, noted in whichever order their tasks ran), did not
    /// begin while the other was held: its holders at start are 0, as its overlap is.
    #[test]
    fn a_release_asked_before_the_next_acquisition_is_not_counted_at_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.csv");
        let file = std::fs::File::create(&path).unwrap();
        let l = Ledger::new(Instant::now(), Some(file));
        l.seen(0, acquired("k", "a", 1000), Instant::now());
        std::thread::sleep(std::time::Duration::from_millis(2));
        let release_asked = Instant::now();
        std::thread::sleep(std::time::Duration::from_millis(2));
        l.seen(1, acquired("k", "b", 1000), Instant::now());
        let released = |v: &str| Event::Removed {
            key: "k".into(),
            value: Some(v.into()),
        };
        l.seen(0, released("a"), release_asked);
        l.seen(1, released("b"), Instant::now());
        let t = l.finish(Instant::now());
        assert_eq!((t.counts.sections, t.per_key[0].incidents), (2, 0));
        drop(l);
        let text = std::fs::read_to_string(&path).unwrap();
        let starts: Vec<(String, String)> = text
            .lines()
            .skip(1)
            .map(|r| {
                let f: Vec<&str> = r.split(',').collect();
                (f[1].to_string(), f[13].to_string())
            })
            .collect();
        assert_eq!(
            starts,
            [("0".into(), "0".into()), ("1".into(), "0".into())],
            "{text}"
        );
    }

    /// A naive client whose lock expired deletes the next holder's: a wrongful delete, client
    /// 0 → victim 1, with the overlap of their holds; a token client's own release is released.
    #[test]
    fn a_wrongful_delete_is_attributed_and_overlaps() {
        let l = Ledger::new(Instant::now(), None);
        let t0 = Instant::now();
        l.seen(0, acquired("k", "a", 2), t0);
        std::thread::sleep(std::time::Duration::from_millis(5));
        l.seen(1, acquired("k", "b", 1000), Instant::now());
        l.seen(
            0,
            Event::Removed {
                key: "k".into(),
                value: Some("b".into()),
            },
            Instant::now(),
        );
        l.seen(
            1,
            Event::Removed {
                key: "k".into(),
                value: None,
            },
            Instant::now(),
        );
        let t = l.finish(Instant::now());
        assert_eq!(t.counts.sections, 2);
        assert_eq!(t.counts.wrongful_deletes, 1);
        assert_eq!(t.counts.nothing_deleted, 1);
        assert_eq!(
            t.counts.overruns, 1,
            "client 0 held 5 ms on a 2 ms TTL (1 ms would be no hold)"
        );
        assert_eq!(t.attributed.len(), 1);
        assert_eq!(
            (t.attributed[0].deleter, t.attributed[0].victim),
            (0, Some(1))
        );
        assert_eq!(t.per_key[0].incidents, 1);
        assert_eq!(t.stray_wrongful, 0);
    }

    /// The victim's acquisition reply reaching the ledger after the delete that removed its
    /// token (two connections) still names it.
    #[test]
    fn a_victim_seen_late_is_named() {
        let l = Ledger::new(Instant::now(), None);
        l.seen(0, acquired("k", "a", 1), Instant::now());
        l.seen(
            0,
            Event::Removed {
                key: "k".into(),
                value: Some("b".into()),
            },
            Instant::now(),
        );
        l.seen(1, acquired("k", "b", 1000), Instant::now());
        let t = l.finish(Instant::now());
        assert_eq!(
            (t.attributed[0].deleter, t.attributed[0].victim),
            (0, Some(1))
        );
        assert_eq!(t.clients[1].victim_of, 1);
    }

    /// A script that removed the client's own token releases; one that found another's token
    /// is refused; one that moved the expiry extends; one that created the key acquires.
    #[test]
    fn scripts_are_judged_by_the_key() {
        let l = Ledger::new(Instant::now(), None);
        let st = |v: Option<&str>, pttl| KeyState {
            value: v.map(Into::into),
            pttl,
        };
        let script = |c, before, after| {
            l.seen(
                c,
                Event::Script {
                    key: "k".into(),
                    before,
                    after,
                },
                Instant::now(),
            )
        };
        script(0, st(None, -2), st(Some("a"), 100));
        script(0, st(Some("a"), 50), st(Some("a"), 100));
        script(0, st(Some("a"), 90), st(None, -2));
        script(1, st(None, -2), st(Some("b"), 100));
        script(1, st(Some("c"), 90), st(Some("c"), 90));
        let t = l.finish(Instant::now());
        assert_eq!(t.counts.sections, 2);
        assert_eq!(t.counts.released, 1);
        assert_eq!(t.counts.extensions, 1);
        assert_eq!(t.counts.refused_held_by_other, 1);
        assert_eq!(t.counts.wrongful_deletes, 0);
    }

    /// Symfony Lock's sorted-set lock, as the stream reads it (the members as the value): its
    /// acquisition (300 s, cut at once to the lock's TTL: no extension), extension, release; a stale release refused by another's set; the 1 ms
    /// probe key no hold; a script dropping an expired set in its last millisecond no delete.
    #[test]
    fn sorted_set_locks_and_the_probe() {
        let l = Ledger::new(Instant::now(), None);
        let st = |v: Option<&str>, pttl| KeyState {
            value: v.map(|v| format!("(sorted set) {v}").into_bytes()),
            pttl,
        };
        let script = |c, key: &str, before, after| {
            l.seen(
                c,
                Event::Script {
                    key: key.into(),
                    before,
                    after,
                },
                Instant::now(),
            )
        };
        // The probe: a string set to live 1 ms, never released.
        let probe = |pttl| KeyState {
            value: Some(b"1".to_vec()),
            pttl,
        };
        script(
            0,
            "symfony_check_support_time",
            KeyState {
                value: None,
                pttl: -2,
            },
            probe(1),
        );
        script(
            1,
            "symfony_check_support_time",
            KeyState {
                value: None,
                pttl: -2,
            },
            probe(0),
        );
        // Client 0 acquires, extends, releases.
        script(0, "k", st(None, -2), st(Some("a w"), 300_000));
        script(0, "k", st(Some("a w"), 300_000), st(Some("a w"), 100));
        script(0, "k", st(Some("a w"), 40), st(Some("a w"), 100));
        script(0, "k", st(Some("a w"), 90), st(None, -2));
        // Client 1 acquires; client 2, which never held, drops it in its last millisecond.
        script(1, "k", st(None, -2), st(Some("b w"), 100));
        script(2, "k", st(Some("b w"), 0), st(None, -2));
        // Client 2 acquires; client 1's stale release is refused by client 2's set.
        script(2, "k", st(None, -2), st(Some("c w"), 100));
        script(1, "k", st(Some("c w"), 60), st(Some("c w"), 60));
        let t = l.finish(Instant::now());
        assert_eq!(t.fleeting, 2);
        assert_eq!(t.counts.sections, 3);
        assert_eq!(t.counts.released, 1);
        assert_eq!(t.counts.extensions, 1);
        assert_eq!(t.counts.refused_held_by_other, 1);
        assert_eq!(t.counts.wrongful_deletes, 0);
        assert_eq!(t.counts.crashes, 0);
        assert_eq!(t.stray_releases, 0);
        assert_eq!(
            t.ttl_max_us, 100_000,
            "the TTL cut to, not the one acquired with"
        );
    }

    /// A client gone while holding: its hold is a crash and the key's blocked time counted; a
    /// hold without expiry open at the end is a stuck lock.
    #[test]
    fn crashes_and_stuck_locks() {
        let l = Ledger::new(Instant::now(), None);
        l.seen(0, acquired("k", "a", 60_000), Instant::now());
        l.seen(
            1,
            Event::Acquired {
                key: "s".into(),
                token: "x".into(),
                ttl_us: None,
            },
            Instant::now(),
        );
        l.gone(0, Instant::now());
        let t = l.finish(Instant::now());
        assert_eq!(t.counts.crashes, 1);
        assert_eq!(t.hists.get(Metric::CrashBlocked).len(), 1);
        assert!(t.hists.get(Metric::CrashBlocked).max() > 50_000_000);
        assert_eq!(t.stuck_locks, 1);
        assert_eq!(t.clients[0].crashed_holding, 1);
    }
}
