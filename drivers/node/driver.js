#!/usr/bin/env node
// lockbench-driver protocol 2 for Node lock libraries (issues 33, 43).
//
//   node driver.js --lib redlock5|redlock4|redis-semaphore|redis-lock
//
// A process hosts one lock holder (protocol 1: requests without a `holder`) or many (protocol
// 2: every request names its `holder`, each served by an async loop of its own with its own
// connections and lock objects). Requests arrive as JSON lines on stdin, replies and events
// leave as JSON lines on stdout; nothing else is ever written to stdout (console.log is sent to
// stderr, a holder's lines prefixed `[holder N] `). The protocol is described in
// docs/src/reference/driver-protocol.md.
'use strict';

const readline = require('readline');
const fs = require('fs');
const path = require('path');

const PROTOCOL = 2;
// Protocol 1 is protocol 2 without `holder` fields: one holder a process.
const SPOKEN = [1, 2];
// The holder whose code runs (its loop, and the library timers and callbacks it started), for
// stderr's attribution.
const HOLDER = new (require('async_hooks').AsyncLocalStorage)();
const LIBS = ['redlock5', 'redlock4', 'redis-semaphore', 'redis-lock'];

// stdout belongs to the protocol alone.
const OUT_FD = 1;

// stderr is free text for lockbench's error messages. Once lockbench is gone its pipe is
// closed: a write then fails with EPIPE, and through process.stderr (a stream) that failure
// comes back as an 'error' event, an uncaught exception whose handler wrote to stderr again —
// a loop on the next-tick queue that kept an orphan at full CPU for ever, its timers starved
// (issue 40). So stderr is written synchronously here, a failure ends all further writing,
// and nothing else writes to it.
let stderrGone = false;
function warn(text) {
  if (stderrGone) return;
  const h = HOLDER.getStore();
  if (h !== undefined) text = text.replace(/^(?=.)/gm, `[holder ${h}] `);
  try {
    fs.writeSync(2, text.endsWith('\n') ? text : `${text}\n`);
  } catch (e) {
    stderrGone = true;
  }
}
process.stderr.on('error', () => { stderrGone = true; });
console.log = console.info = console.debug = console.warn = console.error = (...a) => warn(require('util').format(...a));

const now = () => process.hrtime.bigint(); // CLOCK_MONOTONIC (libuv uv_hrtime)

// BigInt stamps are written as exact JSON integers (a Number loses nanoseconds past 2^53).
let quiet = false; // after the bye reply nothing more is written
function send(obj) {
  if (quiet) return;
  const line = JSON.stringify(obj, (k, v) => (typeof v === 'bigint' ? `\u0000big${v}` : v))
    .replace(/"\\u0000big(\d+)"/g, '$1');
  try {
    fs.writeSync(OUT_FD, line + '\n');
  } catch (e) {
    // stdout gone: lockbench has left; nothing to tell.
  }
}

class Refused extends Error {}
class Busy extends Error {}

const errText = (e) => `${(e && (e.name || (e.constructor && e.constructor.name))) || 'Error'}: ${e && e.message !== undefined ? e.message : e}`;
// A Redis timeout leaves the command's effect unknown.
const isTimeout = (e) => !!e && /Command timed out|ETIMEDOUT|Connection timeout/i.test(String(e.message));
// The server could not be reached, or the connection broke.
const isConnection = (e) => !!e && /ECONNREFUSED|ECONNRESET|EPIPE|Connection is closed|The client is closed|Socket closed/i.test(String(e.message));
function errorReply(id, e, extra = {}) {
  const r = { id, outcome: 'error', error: errText(e) };
  if (isTimeout(e)) {
    r.unknown = true;
    r.kind = 'timeout';
  } else if (isConnection(e)) r.kind = 'connection';
  return Object.assign(r, extra);
}

function needInt(req, name, min = 0) {
  const v = req[name];
  if (!Number.isInteger(v) || v < min) throw new Refused(`field '${name}' must be an integer >= ${min}, got ${JSON.stringify(v)}`);
  return v;
}
function needKey(req) {
  const k = req.key;
  if (typeof k !== 'string' || !k) throw new Refused(`field 'key' must be a non-empty string, got ${JSON.stringify(k)}`);
  return k;
}

// The installed version, read at run time from the package's own package.json (some packages do
// not export it, so walk up from the resolved entry point).
function pkgVersion(mod) {
  let dir = path.dirname(require.resolve(mod));
  for (;;) {
    const f = path.join(dir, 'package.json');
    if (fs.existsSync(f)) {
      const j = JSON.parse(fs.readFileSync(f, 'utf8'));
      if (j.name && j.version) return j.version;
    }
    const up = path.dirname(dir);
    if (up === dir) throw new Error(`no package.json above ${mod}`);
    dir = up;
  }
}

// ---------------------------------------------------------------------------------------------
// Adapters. Each knows its library's idiom for a section, its explicit ops and how to name what
// the library said. `this.current` is the id of the open section (for asynchronous events).
// ---------------------------------------------------------------------------------------------

class Adapter {
  constructor(servers, options) {
    this.servers = servers;
    this.options = options;
    this.current = null;
    this.emit = send; // its driver's, which names the holder
  }
  static get quorum() { return false; }
  hello() {
    return {
      library: this.constructor.library,
      package: this.constructor.package,
      version: pkgVersion(this.constructor.module),
      capabilities: Object.assign({}, this.constructor.caps, {
        quorum: this.constructor.quorum, min_ttl_ms: 1, section_min_ttl_ms: this.sectionMinTtl(), ttl_step_ms: 1,
      }),
      key_format: this.constructor.keyFormat,
    };
  }
  redisKey(key) { return this.constructor.keyFormat.replace('{key}', key); }
  sectionMinTtl() { return 1; }
  // Why the library cannot run on a Redis Cluster (options.cluster); null: it can.
  static get noCluster() { return 'its driver has no cluster client for it'; }
  async ioredisClients() {
    const Redis = require('ioredis');
    const t = this.options.command_timeout_ms;
    const timeouts = t ? { commandTimeout: t, connectTimeout: t } : {};
    if (this.options.cluster) {
      this.clients = [clusterClient(Redis, this.servers, timeouts)];
    } else {
      this.clients = this.servers.map((u) => ioredisClient(Redis, u, Object.assign({ lazyConnect: true }, timeouts)));
    }
    for (const c of this.clients) c.on('error', (e) => warn(`driver: redis client: ${errText(e)}\n`));
    if (this.tap) for (const c of this.clients) tapIoredis(c, this.tap);
    try {
      for (const c of this.clients) { await c.connect(); await c.ping(); }
    } catch (e) {
      for (const c of this.clients) c.disconnect(); // no reconnecting in the background
      throw e;
    }
  }
  async close() {
    for (const c of this.clients || []) { try { await c.quit(); } catch (e) { /* gone */ } }
  }
  emitLost(detail) {
    if (this.current !== null) {
      this.lostIn = this.current;
      this.emit({ id: this.current, event: 'lost', t_ns: now(), detail });
    }
  }
  emitExtended() {
    if (this.current !== null) this.emit({ id: this.current, event: 'extended', t_ns: now() });
  }
}

// The tap (`options.tap` at hello: { prefix, getdel }): lockbench's attribution of deletes, inside
// this process instead of through a forwarder on the wire (docs/src/reference/driver-protocol.md).
// On a holder's own connections, and only on keys containing the run's prefix: a single-key
// `DEL k` / `UNLINK k` goes out as `GETDEL k` (where the server has it) and the library gets
// DEL's reply back (1 when a value came back, 0 for nil); a `SET k v … NX` answered OK is noted.
// Inside MULTI nothing is rewritten (the replies come in EXEC's array). What was set and removed
// leaves on the holder's next line (`seen`), the server's word on whose lock a delete removed.
class Tap {
  constructor(spec) {
    if (spec === null || typeof spec !== 'object' || typeof spec.prefix !== 'string' || !spec.prefix || typeof spec.getdel !== 'boolean') {
      throw new Refused(`options.tap must be {"prefix": a non-empty string, "getdel": true or false}, got ${JSON.stringify(spec)}`);
    }
    this.prefix = spec.prefix;
    this.getdel = spec.getdel;
    this.seen = [];
  }
  ours(key) { return key !== undefined && key !== null && tapText(key).includes(this.prefix); }
  // The command `args` (name first) as the tap sends it: `{ args, removed }` for a rewritten
  // delete, `{ args, set }` for a SET … NX of the run, null for anything else.
  judge(name, args) {
    const n = String(name).toUpperCase();
    if ((n === 'DEL' || n === 'UNLINK') && args.length === 1 && this.getdel && this.ours(args[0])) {
      return { name: 'getdel', key: tapText(args[0]) };
    }
    if (n === 'SET' && args.length >= 3 && this.ours(args[0])) {
      const opts = args.slice(2).map((o) => tapText(o).toUpperCase());
      if (opts.includes('NX') && !opts.includes('GET')) return { name: null, key: tapText(args[0]), value: tapText(args[1]) };
    }
    return null;
  }
  // A GETDEL's reply as DEL's, the value removed noted.
  removed(key, v) { this.seen.push(['del', key, v === null || v === undefined ? null : tapText(v)]); return v === null || v === undefined ? 0 : 1; }
  set(key, value, v) { if (v !== null && v !== undefined && tapText(v) === 'OK') this.seen.push(['set', key, value]); }
  take() { const s = this.seen; this.seen = []; return s; }
}
const tapText = (v) => (Buffer.isBuffer(v) ? v.toString('utf8') : String(v));

// ioredis: every command of a client goes through its sendCommand (a pipeline's too; a
// transaction's are marked inTransaction), whose Command resolves with the raw reply.
function tapIoredis(client, tap) {
  const sendCommand = client.sendCommand;
  client.sendCommand = function (command, ...rest) {
    if (!command.tapped && !command.inTransaction) {
      command.tapped = true;
      const j = tap.judge(command.name, command.args);
      if (j) {
        const resolve = command.resolve;
        if (j.name === 'getdel') {
          command.name = 'getdel';
          command.resolve = (v) => resolve(tap.removed(j.key, v));
        } else {
          command.resolve = (v) => { tap.set(j.key, j.value, v); return resolve(v); };
        }
      }
    }
    return sendCommand.call(this, command, ...rest);
  };
}

// node-redis 4: a client's commands reach its private queue's addCommand (args with the name
// first; a transaction's carry a chainId). The queue is private, so its class is tapped once,
// and a command finds its holder's tap by the holder whose code sent it (HOLDER).
const NODE_REDIS_TAPS = new Map(); // holder (null: protocol 1's one holder) -> Tap
function tapNodeRedis(tap, holder) {
  if (!tapNodeRedis.done) {
    tapNodeRedis.done = true;
    // The copy `redis` itself loads (a second copy elsewhere in node_modules would be tapped
    // for nothing).
    const from = { paths: [path.dirname(require.resolve('redis'))] };
    const Queue = require(require.resolve('@redis/client/dist/lib/client/commands-queue', from)).default;
    const addCommand = Queue.prototype.addCommand;
    Queue.prototype.addCommand = function (args, options) {
      const h = HOLDER.getStore();
      const t = NODE_REDIS_TAPS.get(h === undefined ? null : h);
      const j = t && !(options && options.chainId) ? t.judge(args[0], args.slice(1)) : null;
      if (!j) return addCommand.call(this, args, options);
      if (j.name === 'getdel') return addCommand.call(this, ['GETDEL', args[1]], options).then((v) => t.removed(j.key, v));
      return addCommand.call(this, args, options).then((v) => { t.set(j.key, j.value, v); return v; });
    };
  }
  NODE_REDIS_TAPS.set(holder, tap);
}

// A server's Unix socket, from a `unix:///path/to.sock` URL (`?db=N`, `username=`, `password=`
// in its query, as redis-py reads them): { path, db, username, password }; null for another
// scheme. WHATWG URLs take no credentials without a host, hence the query.
function unixSocket(url) {
  if (!url.startsWith('unix:')) return null;
  const u = new URL(url);
  const path = decodeURIComponent(u.pathname);
  if (!path) throw new Refused(`a unix:// server URL names a socket path: ${JSON.stringify(url.split('?')[0])} has none`);
  const q = u.searchParams;
  const out = { path };
  if (q.get('db') !== null) {
    const db = Number(q.get('db'));
    if (!Number.isInteger(db) || db < 0) throw new Refused(`a unix:// server URL's db is a whole number, got ${JSON.stringify(q.get('db'))}`);
    out.db = db;
  }
  if (q.get('username') !== null) out.username = q.get('username');
  if (q.get('password') !== null) out.password = q.get('password');
  return out;
}

// An ioredis client of one server (a redis:// URL, or a unix:// one through its `path`).
function ioredisClient(Redis, url, options) {
  const sock = unixSocket(url);
  return sock ? new Redis(Object.assign({}, options, sock)) : new Redis(url, options);
}

// ioredis's Cluster from the seed nodes' URLs: each one a startup node, the first one's
// credentials and TLS for every node (as lockbench's own cluster client does).
function clusterClient(Redis, servers, timeouts) {
  for (const u of servers) if (unixSocket(u)) throw new Refused('a Redis Cluster is reached over TCP: a unix:// seed has no host');
  const urls = servers.map((u) => new URL(u));
  const nodes = urls.map((u) => ({ host: u.hostname, port: Number(u.port) || 6379 }));
  const first = urls[0];
  const redisOptions = Object.assign({}, timeouts);
  if (first.username) redisOptions.username = decodeURIComponent(first.username);
  if (first.password) redisOptions.password = decodeURIComponent(first.password);
  if (first.protocol === 'rediss:') redisOptions.tls = {};
  return new Redis.Cluster(nodes, { lazyConnect: true, redisOptions });
}

// node-redlock 5.0.0-beta.2: using() auto-extends and hands the routine an AbortSignal.
class Redlock5 extends Adapter {
  static get library() { return 'redlock5'; }
  static get package() { return 'redlock'; }
  static get module() { return 'redlock5'; }
  static get keyFormat() { return '{key}'; }
  static get quorum() { return true; }
  static get caps() { return { section: true, acquire: true, extend: true, release: true, auto_renewal: true, lost_callback: true }; }
  static get optionNames() { return ['retry_delay_ms', 'retry_jitter_ms', 'retry_count', 'drift_factor', 'automatic_extension_threshold_ms', 'command_timeout_ms']; }
  static get noCluster() { return 'node-redlock takes a quorum over independent Redis servers, not one cluster'; }
  async init() {
    await this.ioredisClients();
    const Redlock = require('redlock5').default;
    const adapter = this;
    // Observes acquire (for the token) and extend (for `extended` events); behaviour unchanged.
    class Observed extends Redlock {
      async acquire(...a) { const l = await super.acquire(...a); adapter.lastLock = l; return l; }
      async extend(...a) { const l = await super.extend(...a); adapter.lastLock = l; adapter.emitExtended(); return l; }
    }
    const o = this.options;
    const s = {};
    if (o.retry_delay_ms !== undefined) s.retryDelay = o.retry_delay_ms;
    if (o.retry_jitter_ms !== undefined) s.retryJitter = o.retry_jitter_ms;
    if (o.retry_count !== undefined) s.retryCount = o.retry_count;
    if (o.drift_factor !== undefined) s.driftFactor = o.drift_factor;
    if (o.automatic_extension_threshold_ms !== undefined) s.automaticExtensionThreshold = o.automatic_extension_threshold_ms;
    this.redlock = new Observed(this.clients, s);
    this.redlock.on('error', (e) => { if (!(e && e.name === 'ResourceLockedError')) warn(`driver: redlock: ${errText(e)}\n`); });
  }
  // using() refuses a duration below automaticExtensionThreshold + 100 ms.
  sectionMinTtl() { return (this.redlock ? this.redlock.settings.automaticExtensionThreshold : 500) + 100; }
  // The wait budget is the library's retry count: one attempt plus floor(wait / retryDelay).
  acquireSettings(wait) { return { retryCount: Math.floor(wait / this.redlock.settings.retryDelay) }; }
  async section(key, ttl, wait, inside) {
    this.lastLock = null;
    await this.annotate(() => this.redlock.using([key], ttl, this.acquireSettings(wait), async (signal) => {
      signal.addEventListener('abort', () => this.emitLost(`abort signal: ${signal.error ? errText(signal.error) : 'aborted'}`));
      await inside(this.lastLock && this.lastLock.value);
    }));
  }
  async acquire(key, ttl, wait) {
    const l = await this.annotate(() => this.redlock.acquire([key], ttl, this.acquireSettings(wait)));
    return { handle: l, token: l.value };
  }
  async extend(h, ttl) { const l = await this.annotate(() => h.handle.extend(ttl)); h.handle = l; }
  async release(h) { await this.annotate(() => h.handle.release()); }
  // ExecutionError carries its attempts' statistics as promises: await them to tell a lock held
  // by another value (every vote against is a ResourceLockedError) from Redis errors.
  async annotate(fn) {
    try {
      return await fn();
    } catch (e) {
      if (e && e.name === 'ExecutionError' && Array.isArray(e.attempts)) {
        try {
          const stats = await Promise.all(e.attempts);
          e.lockedOnly = stats.every((st) => [...st.votesAgainst.values()].every((x) => x && x.name === 'ResourceLockedError'));
        } catch (e2) { e.lockedOnly = false; }
      }
      throw e;
    }
  }
  classify(e, phase) {
    if (e && e.name === 'ExecutionError') {
      if (/already-expired/.test(e.message)) return 'not_owned';
      if (!e.lockedOnly) return 'error';
      return phase === 'acquire' ? 'busy' : 'not_owned';
    }
    return 'error';
  }
}

// node-redlock 4.2.0: the section idiom is bluebird's Promise.using(redlock.disposer(...)).
class Redlock4 extends Adapter {
  static get library() { return 'redlock4'; }
  static get package() { return 'redlock'; }
  static get module() { return 'redlock4'; }
  static get keyFormat() { return '{key}'; }
  static get quorum() { return true; }
  static get caps() { return { section: true, acquire: true, extend: true, release: true, auto_renewal: false, lost_callback: false }; }
  static get optionNames() { return ['retry_delay_ms', 'retry_jitter_ms', 'drift_factor', 'command_timeout_ms']; }
  static get noCluster() { return 'node-redlock takes a quorum over independent Redis servers, not one cluster'; }
  async init() {
    await this.ioredisClients();
    this.Redlock = require('redlock4');
    this.clientErrors = 0;
    this.redlock = this.make(0);
  }
  make(retryCount) {
    const o = this.options;
    const r = new this.Redlock(this.clients, {
      retryCount,
      retryDelay: o.retry_delay_ms !== undefined ? o.retry_delay_ms : 200,
      retryJitter: o.retry_jitter_ms !== undefined ? o.retry_jitter_ms : 100,
      driftFactor: o.drift_factor !== undefined ? o.drift_factor : 0.01,
    });
    r.on('clientError', (e) => { this.clientErrors++; warn(`driver: redlock4: ${errText(e)}\n`); });
    return r;
  }
  retries(wait) { return Math.floor(wait / this.redlock.retryDelay); }
  async section(key, ttl, wait, inside) {
    const Promise = require('bluebird');
    // disposer() takes no options: a Redlock with the section's retry count (one attempt plus
    // floor(wait / retryDelay)). Its errorHandler is where the library reports a failed unlock.
    const rl = this.make(this.retries(wait));
    let unlockError = null;
    const before = this.clientErrors;
    try {
      await Promise.using(rl.disposer(key, ttl, (e) => { unlockError = e; }), (lock) => inside(lock.value));
    } catch (e) {
      e.clientErrors = this.clientErrors - before;
      throw e;
    }
    if (unlockError) {
      unlockError.lockbenchPhase = 'release';
      unlockError.clientErrors = this.clientErrors - before;
      throw unlockError;
    }
  }
  async acquire(key, ttl, wait) {
    const r = this.retries(wait);
    // lockWithOptions reads `options.retryCount || self.retryCount`: 0 falls back to the
    // instance's retryCount, which is 0 here too.
    const before = this.clientErrors;
    let l;
    try { l = await this.redlock.lockWithOptions(key, ttl, { retryCount: r }); } catch (e) { e.clientErrors = this.clientErrors - before; throw e; }
    return { handle: l, token: l.value };
  }
  async extend(h, ttl) {
    const before = this.clientErrors;
    try { await h.handle.extend(ttl); } catch (e) { e.clientErrors = this.clientErrors - before; throw e; }
  }
  async release(h) {
    const before = this.clientErrors;
    try { await h.handle.unlock(); } catch (e) { e.clientErrors = this.clientErrors - before; throw e; }
  }
  classify(e, phase) {
    if (e && e.name === 'LockError') {
      if (e.clientErrors) return 'error';
      return phase === 'acquire' && !e.lockbenchPhase ? 'busy' : 'not_owned';
    }
    return 'error';
  }
}

// redis-semaphore 5.8.0 Mutex: acquire/try/finally release; refresh setInterval at 0.8 TTL;
// onLockLost. Its release() never says whether the key was still ours.
class RedisSemaphore extends Adapter {
  static get library() { return 'redis-semaphore'; }
  static get package() { return 'redis-semaphore'; }
  static get module() { return 'redis-semaphore'; }
  static get keyFormat() { return 'mutex:{key}'; }
  static get caps() { return { section: true, acquire: true, extend: false, release: true, auto_renewal: true, lost_callback: true }; }
  static get optionNames() { return ['retry_interval_ms', 'refresh_interval_ms', 'command_timeout_ms']; }
  // Its Mutex touches one key (SET NX PX, one-key scripts): an ioredis Cluster routes them.
  static get noCluster() { return null; }
  async init() {
    await this.ioredisClients();
    this.Mutex = require('redis-semaphore').Mutex;
  }
  make(key, ttl, wait) {
    const o = this.options;
    const opts = {
      lockTimeout: ttl,
      acquireTimeout: wait,
      retryInterval: o.retry_interval_ms !== undefined ? o.retry_interval_ms : 10,
      onLockLost: (e) => this.emitLost(`onLockLost: ${errText(e)}`),
    };
    if (wait === 0) {
      // acquireTimeout 0 would make no attempt at all: one attempt, however long it takes.
      opts.acquireAttemptsLimit = 1;
      opts.acquireTimeout = 60000;
    }
    if (o.refresh_interval_ms !== undefined) opts.refreshInterval = o.refresh_interval_ms;
    return new this.Mutex(this.clients[0], key, opts);
  }
  async section(key, ttl, wait, inside) {
    const m = this.make(key, ttl, wait);
    await m.acquire();
    try {
      await inside(m.identifier);
    } finally {
      await m.release();
    }
  }
  async acquire(key, ttl, wait) {
    const m = this.make(key, ttl, wait);
    await m.acquire();
    return { handle: m, token: m.identifier };
  }
  async release(h) { await h.handle.release(); }
  classify(e, phase) {
    if (e instanceof require('redis-semaphore').TimeoutError && phase === 'acquire') return 'busy';
    return 'error';
  }
}

// npm redis-lock 1.0.0: SET NX PX, retried forever every 50 ms; the release is a plain DEL,
// sent only while its own wall-clock deadline (Date.now() at acquire + TTL + 1) is ahead.
class RedisLock extends Adapter {
  static get library() { return 'redis-lock'; }
  static get package() { return 'redis-lock'; }
  static get module() { return 'redis-lock'; }
  static get keyFormat() { return 'lock.{key}'; }
  static get caps() { return { section: true, acquire: true, extend: false, release: true, auto_renewal: false, lost_callback: false }; }
  static get optionNames() { return ['retry_delay_ms', 'command_timeout_ms']; }
  static get noCluster() { return 'it takes a node-redis client of one server (createClient), not a cluster (createCluster)'; }
  async init() {
    if (this.servers.length !== 1) throw new Refused(`redis-lock takes exactly one server, got ${this.servers.length}`);
    const { createClient } = require('redis');
    const t = this.options.command_timeout_ms;
    let ready = false;
    // A server that is not there fails hello (node-redis would otherwise retry for ever);
    // once connected, its default reconnecting applies.
    const socket = { reconnectStrategy: (n) => (ready ? Math.min(n * 50, 500) : new Error('could not connect')) };
    if (t) socket.connectTimeout = t;
    const sock = unixSocket(this.servers[0]);
    if (sock) {
      socket.path = sock.path;
      this.client = createClient({ socket, database: sock.db, username: sock.username, password: sock.password });
    } else {
      this.client = createClient({ url: this.servers[0], socket });
    }
    this.client.on('error', (e) => warn(`driver: redis client: ${errText(e)}\n`));
    if (this.tap) tapNodeRedis(this.tap, this.holder);
    await this.client.connect();
    await this.client.ping();
    ready = true;
    this.retryDelay = this.options.retry_delay_ms !== undefined ? this.options.retry_delay_ms : 50;
    this.lock = require('redis-lock')(this.client, this.retryDelay);
  }
  async close() { try { await this.client.quit(); } catch (e) { /* gone */ } }
  // The library has no wait budget and no way to cancel: its retry loop goes on after a
  // timeout here. Such an orphan acquire, when it succeeds, is released at once through the
  // library's own release function and noted on stderr.
  async lockWithin(key, ttl, wait) {
    // No try-once either: wait_ms 0 waits one retry delay (the first attempt's answer comes
    // before the second attempt starts).
    if (wait === 0) wait = this.retryDelay;
    const p = this.lock(key, ttl);
    let timer;
    const expired = new Promise((resolve) => { timer = setTimeout(() => resolve(null), wait); });
    const unlock = await Promise.race([p, expired]);
    clearTimeout(timer);
    if (unlock === null) {
      p.then(async (late) => {
        warn(`driver: redis-lock: an acquire of ${key} that timed out succeeded later; releasing it\n`);
        try { await late(); } catch (e) { /* logged below */ warn(`driver: ${errText(e)}\n`); }
      });
      throw new Busy(`redis-lock: not acquired within ${wait} ms`);
    }
    return unlock;
  }
  async section(key, ttl, wait, inside) {
    const unlock = await this.lockWithin(key, ttl, wait);
    try {
      await inside(null);
    } finally {
      this.releaseDetail = releaseDetail(await unlock());
    }
  }
  async acquire(key, ttl, wait) {
    const unlock = await this.lockWithin(key, ttl, wait);
    return { handle: unlock, token: null };
  }
  async release(h) { this.releaseDetail = releaseDetail(await h.handle()); }
  classify(e, phase) { return e instanceof Busy ? 'busy' : 'error'; }
}
function releaseDetail(r) {
  if (r === undefined) return 'no DEL sent: past its local deadline';
  return `DEL returned ${r}`;
}

const ADAPTERS = { redlock5: Redlock5, redlock4: Redlock4, 'redis-semaphore': RedisSemaphore, 'redis-lock': RedisLock };

// ---------------------------------------------------------------------------------------------

// The test hook LOCKBENCH_DRIVER_HELD_LAG_MS (drivers/README.md): ms between the library's
// acquire returning and the `held` line written — what a loaded machine does to the line — for
// every holder, or for those LOCKBENCH_DRIVER_HELD_LAG_HOLDERS lists (`0,2`).
const HELD_LAG_MS = parseInt(process.env.LOCKBENCH_DRIVER_HELD_LAG_MS || '0', 10) || 0;
const HELD_LAG_HOLDERS = process.env.LOCKBENCH_DRIVER_HELD_LAG_HOLDERS
  ? new Set(process.env.LOCKBENCH_DRIVER_HELD_LAG_HOLDERS.split(',').map((h) => parseInt(h, 10)))
  : null;
function heldLag(holder) {
  return HELD_LAG_HOLDERS === null || HELD_LAG_HOLDERS.has(holder) ? HELD_LAG_MS : 0;
}

class Driver {
  // `holder`: the holder this driver serves in a shared process (protocol 2); null: the
  // process's one holder (protocol 1), whose lines carry no `holder`.
  constructor(lib, holder = null) {
    this.lib = lib;
    this.holder = holder;
    this.quiet = false; // after its bye reply nothing more is written
    this.adapter = null;
    this.sections = new Map(); // id -> { leave: resolve fn | null, leaveEarly: bool }
    this.held = new Map(); // key -> handle
    this.acquiring = new Set();
  }
  send(obj) {
    if (this.quiet) return;
    if (this.holder !== null) obj.holder = this.holder;
    // What the tap saw leaves on the holder's next line (before the reply it led to); a `held`
    // line's token already tells the SET of that value on its key.
    let seen = this.adapter && this.adapter.tap ? this.adapter.tap.take() : [];
    if (obj.event === 'held' && typeof obj.token === 'string') {
      seen = seen.filter(([what, k, v]) => !(what === 'set' && k === obj.redis_key && v === obj.token));
    }
    if (seen.length) obj.seen = seen;
    send(obj);
  }
  needAdapter() { if (!this.adapter) throw new Refused('no hello yet'); return this.adapter; }
  busyOutcome(wait) { return wait > 0 ? 'timeout' : 'fail'; }

  async hello(req) {
    if (!SPOKEN.includes(req.protocol)) throw new Refused(`protocol ${JSON.stringify(req.protocol)} not spoken; this driver speaks ${SPOKEN.join(' and ')}`);
    if (req.protocol === 1 && this.holder !== null) throw new Refused('protocol 1 has no holders: a request with `holder` speaks protocol 2');
    const servers = req.servers;
    if (!Array.isArray(servers) || !servers.every((s) => typeof s === 'string') || servers.length === 0) throw new Refused("field 'servers' must be a non-empty list of redis:// or unix:// URLs");
    const options = req.options || {};
    if (typeof options !== 'object' || Array.isArray(options)) throw new Refused("field 'options' must be an object");
    const cls = ADAPTERS[this.lib];
    const cluster = options.cluster === undefined ? false : options.cluster;
    if (typeof cluster !== 'boolean') throw new Refused(`options.cluster must be true or false, got ${JSON.stringify(cluster)}`);
    if (cluster && cls.noCluster) throw new Refused(`${cls.library} does not connect to a Redis Cluster: ${cls.noCluster}`);
    if (!cluster && !cls.quorum && servers.length !== 1) throw new Refused(`${cls.library} takes exactly one server, got ${servers.length}`);
    if (this.adapter) await this.adapter.close();
    this.adapter = null;
    const a = new cls(servers, options);
    a.emit = (o) => this.send(o);
    a.holder = this.holder;
    if (options.tap !== undefined) {
      if (cluster) throw new Refused('options.tap: a cluster client follows the nodes\' own addresses; the tap is for one server or independent ones');
      a.tap = new Tap(options.tap);
    }
    await a.init();
    if (options.ttl_ms !== undefined) {
      for (const t of [].concat(options.ttl_ms)) {
        if (!Number.isInteger(t) || t < a.sectionMinTtl()) {
          await a.close();
          throw new Refused(`ttl_ms=${t} refused: a ${cls.library} section takes a TTL of at least ${a.sectionMinTtl()} ms`);
        }
      }
    }
    this.adapter = a;
    const ignored = Object.keys(options).filter((k) => !cls.optionNames.includes(k) && !['ttl_ms', 'cluster', 'tap'].includes(k)).sort();
    return Object.assign({ id: req.id, outcome: 'ok', protocol: req.protocol }, a.hello(), { pid: process.pid, ignored_options: ignored, tap: !!a.tap });
  }

  async section(req) {
    const a = this.needAdapter();
    const id = req.id;
    const key = needKey(req);
    const ttl = needInt(req, 'ttl_ms', 1);
    const wait = needInt(req, 'wait_ms', 0);
    if (this.sections.size) throw new Refused(`section ${[...this.sections.keys()][0]} is open: one section at a time`);
    const s = { leave: null, held: null, leaveNs: null };
    let heldSignal;
    s.heldPromise = new Promise((resolve) => { heldSignal = resolve; });
    this.sections.set(id, s);
    // A section its holder's goodbye leaves has no reply: the goodbye's is the last line.
    s.done = this.sectionRun(a, id, key, ttl, wait, s, heldSignal).then((r) => { if (!this.closing) this.send(r); });
    // The next request is served once the section is held (or over): a section stays open
    // while block, acquire, ... are served, until its leave.
    await Promise.race([s.heldPromise, s.done]);
    return null;
  }

  async sectionRun(a, id, key, ttl, wait, s, heldSignal) {
    const t0 = now();
    a.current = id;
    a.lostIn = null;
    a.releaseDetail = undefined;
    const inside = (token) => new Promise((resolve) => {
      s.held = now();
      const tell = () => {
        this.send({ id, event: 'held', t_ns: s.held, token: token === undefined ? null : token, redis_key: a.redisKey(key) });
        s.leave = () => { s.leaveNs = now(); resolve(); };
        heldSignal();
      };
      // The test hook: a loaded machine's delay between the acquire and the `held` line.
      const lag = heldLag(this.holder);
      if (lag > 0) setTimeout(tell, lag);
      else tell();
    });
    let reply;
    try {
      await a.section(key, ttl, wait, inside);
      reply = { id, outcome: a.lostIn === id ? 'lost' : 'ok' };
    } catch (e) {
      const kind = e instanceof Busy ? 'busy' : a.classify(e, s.held === null ? 'acquire' : 'release');
      if (s.held === null) {
        if (kind === 'busy') reply = { id, outcome: this.busyOutcome(wait) };
        else reply = errorReply(id, e);
        reply.t1_ns = now();
      } else if (kind === 'not_owned' || kind === 'fail') {
        reply = { id, outcome: kind, error: errText(e) };
      } else {
        reply = errorReply(id, e);
      }
    } finally {
      this.sections.delete(id);
      if (a.current === id) a.current = null;
    }
    const released = s.held === null ? null : now();
    Object.assign(reply, { t0_ns: t0, held_ns: s.held, leave_ns: s.leaveNs, released_ns: released });
    if (a.releaseDetail !== undefined && s.held !== null) reply.detail = a.releaseDetail;
    return reply;
  }

  async leave(req) {
    const s = this.sections.get(req.id);
    if (!s || !s.leave) throw new Refused(`no open section ${req.id}`);
    s.leave();
    await s.done; // the section's reply is out before the next request is read
    return null;
  }

  async acquire(req) {
    const a = this.needAdapter();
    const key = needKey(req);
    const ttl = needInt(req, 'ttl_ms', 1);
    const wait = needInt(req, 'wait_ms', 0);
    if (this.held.has(key) || this.acquiring.has(key)) throw new Refused(`key '${key}' is already held by this driver`);
    this.acquiring.add(key);
    const t0 = now();
    try {
      const h = await a.acquire(key, ttl, wait);
      this.held.set(key, h);
      return { id: req.id, outcome: 'ok', t0_ns: t0, t1_ns: now(), token: h.token === undefined ? null : h.token, redis_key: a.redisKey(key) };
    } catch (e) {
      const kind = e instanceof Busy ? 'busy' : a.classify(e, 'acquire');
      if (kind === 'busy') return { id: req.id, outcome: this.busyOutcome(wait), t0_ns: t0, t1_ns: now(), token: null };
      return errorReply(req.id, e, { t0_ns: t0, t1_ns: now(), token: null });
    } finally {
      this.acquiring.delete(key);
    }
  }

  heldHandle(req, what) {
    const a = this.needAdapter();
    const key = needKey(req);
    const h = this.held.get(key);
    if (!h) throw new Refused(`key '${key}' was not acquired by this driver (use acquire first)`);
    if (!a[what]) throw new Refused(`${a.constructor.library} has no ${what}`);
    return [a, key, h];
  }

  async extend(req) {
    const [a, , h] = this.heldHandle(req, 'extend');
    const ttl = needInt(req, 'ttl_ms', 1);
    const t0 = now();
    let out;
    try {
      await a.extend(h, ttl);
      out = { id: req.id, outcome: 'ok' };
    } catch (e) {
      const kind = a.classify(e, 'extend');
      out = kind === 'not_owned' || kind === 'fail' ? { id: req.id, outcome: kind, error: errText(e) } : errorReply(req.id, e);
    }
    return Object.assign(out, { t0_ns: t0, t1_ns: now() });
  }

  async release(req) {
    const [a, key, h] = this.heldHandle(req, 'release');
    this.held.delete(key);
    a.releaseDetail = undefined;
    const t0 = now();
    let out;
    try {
      await a.release(h);
      out = { id: req.id, outcome: 'ok' };
    } catch (e) {
      const kind = a.classify(e, 'release');
      out = kind === 'not_owned' || kind === 'fail' ? { id: req.id, outcome: kind, error: errText(e) } : errorReply(req.id, e);
    }
    Object.assign(out, { t0_ns: t0, t1_ns: now() });
    if (a.releaseDetail !== undefined) out.detail = a.releaseDetail;
    return out;
  }

  block(req) {
    const ms = needInt(req, 'ms', 0);
    // A stalled event loop: a synchronous spin; no timer, socket or callback runs meanwhile.
    const t0 = now();
    const end = t0 + BigInt(ms) * 1000000n;
    while (process.hrtime.bigint() < end) { /* spin */ }
    return { id: req.id, outcome: 'ok', t0_ns: t0, t1_ns: now() };
  }

  async shutdown() {
    this.closing = true;
    const open = [...this.sections.values()];
    for (const s of open) if (s.leave) s.leave();
    await Promise.allSettled(open.map((s) => s.done));
    const a = this.adapter;
    if (!a) return;
    for (const h of this.held.values()) {
      try { if (a.release) await a.release(h); } catch (e) { warn(`driver: releasing at exit: ${errText(e)}\n`); }
    }
    this.held.clear();
    await a.close();
  }
}

// The end of lockbench, however it came (its goodbye and exit, Ctrl-C, kill -9): stdin
// closes, or the parent changes. The usual end then runs — open sections left, held locks
// released — within GONE_GRACE_MS, after which the process exits whatever it is doing (a
// library awaiting a server that went with lockbench, a request never finished): a driver
// never outlives lockbench for long (issue 40).
const GONE_GRACE_MS = 3000;
const PARENT_POLL_MS = 250;
let goneTimer = null;
function lockbenchGone() {
  if (goneTimer) return;
  goneTimer = setTimeout(() => process.exit(0), GONE_GRACE_MS);
  goneTimer.unref(); // it does not keep an otherwise finished process alive
}

async function main() {
  const i = process.argv.indexOf('--lib');
  const lib = i >= 0 ? process.argv[i + 1] : undefined;
  if (!LIBS.includes(lib)) {
    warn(`usage: driver.js --lib ${LIBS.join('|')}\n`);
    process.exit(2);
  }
  const OPS = new Set(['hello', 'section', 'leave', 'acquire', 'extend', 'release', 'block', 'bye']);

  // Requests of a holder are served one at a time, in order (as the Python driver does); a
  // section counts as served once it is held, so the requests after it are served while it
  // stays open. Each holder has a loop of its own: one waiting for its lock holds up no other.
  const handle = async (d, line) => {
    let id = null;
    try {
      let req;
      try { req = JSON.parse(line); } catch (e) { throw new Refused(`not JSON: ${e.message}`); }
      if (req === null || typeof req !== 'object' || Array.isArray(req)) throw new Refused('a request must be a JSON object');
      if (!Number.isInteger(req.id)) throw new Refused("field 'id' must be an integer");
      id = req.id;
      const op = req.op;
      if (typeof op !== 'string' || !OPS.has(op)) throw new Refused(`unknown op ${JSON.stringify(op)}`);
      if (op === 'bye') return { bye: id };
      const r = await d[op](req);
      if (r) d.send(r);
    } catch (e) {
      if (e instanceof Refused) d.send({ id, outcome: 'error', error: e.message });
      else d.send(errorReply(id, e));
    }
    return null;
  };

  // A holder's lines, awaited by its loop; `end()` is the end of input.
  class Inbox {
    constructor() { this.lines = []; this.wake = null; this.eof = false; }
    push(line) { this.lines.push(line); this.poke(); }
    end() { this.eof = true; this.poke(); }
    poke() { if (this.wake) { this.wake(); this.wake = null; } }
  }
  // Serves `d` from `inbox` until its bye (the bye's id) or the end of input (null).
  const serve = async (d, inbox) => {
    for (;;) {
      if (inbox.lines.length === 0) {
        if (inbox.eof) return null;
        await new Promise((resolve) => { inbox.wake = resolve; });
        continue;
      }
      const line = inbox.lines.shift();
      if (!line.trim()) continue;
      const r = await handle(d, line);
      if (r && r.bye !== undefined) return r.bye;
    }
  };
  // The holder a request names (protocol 2), or null: the process's own holder, which also
  // answers a line that is not a request.
  const holderOf = (line) => {
    try {
      const h = JSON.parse(line).holder;
      return Number.isInteger(h) && h >= 0 ? h : null;
    } catch (e) { return null; }
  };

  const d = new Driver(lib);
  const inbox = new Inbox();
  // Protocol 2's holders: each its driver, inbox and loop. Its bye ends it alone (its sections
  // left, its locks released, its connections closed); the process ends with its input.
  const hosted = new Map();
  const host = (h) => {
    const o = { driver: new Driver(lib, h), inbox: new Inbox() };
    o.done = HOLDER.run(h, async () => {
      const bye = await serve(o.driver, o.inbox);
      if (hosted.get(h) === o) hosted.delete(h);
      // Sections left, locks released and connections closed before the reply, which carries
      // what the tap saw of those releases: after it, nothing more is read.
      await o.driver.shutdown();
      if (bye !== null) o.driver.send({ id: bye, outcome: 'ok' });
      o.driver.quiet = true;
    });
    hosted.set(h, o);
    return o;
  };
  const endOfInput = () => { inbox.end(); for (const o of hosted.values()) o.inbox.end(); };
  const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity, terminal: false });
  rl.on('line', (line) => {
    const h = holderOf(line);
    if (h === null) inbox.push(line);
    else (hosted.get(h) || host(h)).inbox.push(line);
  });
  rl.on('close', () => { lockbenchGone(); endOfInput(); });
  // A kill -9 of lockbench also makes this process an orphan: its parent changes.
  const parent = process.ppid;
  setInterval(() => { if (process.ppid !== parent) { lockbenchGone(); endOfInput(); } }, PARENT_POLL_MS).unref();

  const byeId = await serve(d, inbox);
  rl.close();
  // Open sections left and held locks released before the reply (it carries what the tap saw
  // of them); then nothing more is written.
  const rest = [...hosted.values()];
  for (const o of rest) o.inbox.end();
  await Promise.allSettled([d.shutdown(), ...rest.map((o) => o.done)]);
  if (byeId !== null) d.send({ id: byeId, outcome: 'ok' });
  quiet = true;
  process.exit(0);
}

process.on('unhandledRejection', (e) => warn(`driver: unhandled rejection: ${errText(e)}\n`));
process.on('uncaughtException', (e) => warn(`driver: uncaught exception: ${errText(e)}\n`));
main();
