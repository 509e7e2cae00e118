#!/usr/bin/env node
// A service that locks with node-redlock 5 (`redlock.acquire([key], ttl)`, a random value set by
// a Lua script, released by a script that deletes the key only while it holds that value) on
// one ioredis client.
//
// Each cycle picks one of --keys keys, takes its lock (trying again every --retry-ms while it is
// busy), works for a section drawn from uniform(--min-ms, --max-ms), and releases. A section
// longer than --ttl-ms outlives its lock: the release then fails with an ExecutionError and
// deletes nothing. Every hold is written to $LOCKBENCH_APP_LOG, one JSON line, on
// CLOCK_MONOTONIC (process.hrtime): see ../python/applog.py for the fields.
//
// The packages are the pinned ones of lockbench's Node drivers:
//   NODE_PATH=drivers/node/node_modules lockbench observe -- node examples/apps/node/redlock.js
// (redlock5 is node-redlock 5.0.0-beta.2 under an npm alias; a project of your own would
// `require('redlock')`.)
'use strict';

const fs = require('fs');
const Redis = require('ioredis');
const Redlock = require('redlock5').default;
const { ExecutionError } = require('redlock5');

function flags(argv) {
  const a = { keys: 3, 'ttl-ms': 100, 'min-ms': 20, 'max-ms': 80, cycles: 20, seed: 1, 'retry-ms': 5, prefix: 'app:lock:', 'start-together': 1 };
  for (let i = 0; i < argv.length; i += 2) {
    const name = argv[i].replace(/^--/, '');
    if (!(name in a) || argv[i + 1] === undefined) {
      process.stderr.write(`redlock.js: unknown flag or missing value: ${argv[i]} (flags: ${Object.keys(a).map((k) => '--' + k).join(' ')})\n`);
      process.exit(2);
    }
    a[name] = name === 'prefix' ? argv[i + 1] : Number(argv[i + 1]);
    if (Number.isNaN(a[name])) {
      process.stderr.write(`redlock.js: --${name} needs a number, got ${argv[i + 1]}\n`);
      process.exit(2);
    }
  }
  return a;
}

// REDIS_URL, else REDIS_HOST/REDIS_PORT, else localhost:6379.
function client() {
  if (process.env.REDIS_URL) return new Redis(process.env.REDIS_URL);
  return new Redis({ host: process.env.REDIS_HOST || 'localhost', port: Number(process.env.REDIS_PORT || 6379) });
}

// mulberry32: a small seeded generator (Math.random takes no seed).
function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const now = () => process.hrtime.bigint(); // CLOCK_MONOTONIC, ns
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  const a = flags(process.argv.slice(2));
  const redis = client();
  // retryCount 0: one try per acquire (this loop retries) and one per release (a stale release
  // is not retried ten times, the library's default).
  const redlock = new Redlock([redis], { retryCount: 0 });
  const random = rng(a.seed * 1000003 + process.pid);
  // --start-together N: count in at PREFIXstarted, wait until N copies have (see applog.py).
  if (a['start-together'] > 1) {
    await redis.incr(a.prefix + 'started');
    while (Number(await redis.get(a.prefix + 'started')) < a['start-together']) await sleep(2);
  }
  // One write() per line on an O_APPEND file: copies can share one log.
  const log = process.env.LOCKBENCH_APP_LOG ? fs.openSync(process.env.LOCKBENCH_APP_LOG, 'a') : null;
  for (let i = 0; i < a.cycles; i++) {
    const key = a.prefix + Math.floor(random() * a.keys);
    const section = a['min-ms'] + random() * (a['max-ms'] - a['min-ms']);
    let lock, sent;
    for (;;) {
      sent = now();
      try {
        lock = await redlock.acquire([key], a['ttl-ms']);
        break;
      } catch (e) {
        if (!(e instanceof ExecutionError)) throw e;
        await sleep(a['retry-ms']);
      }
    }
    const start = now();
    await sleep(section); // the work the lock protects
    const held = lock.expiration > Date.now(); // what the library believes
    const end = now();
    let outcome = 'released';
    try {
      await lock.release();
    } catch (e) {
      if (!(e instanceof ExecutionError)) throw e;
      outcome = 'refused';
    }
    const done = now();
    if (log !== null) {
      const rec = {
        app: 'redlock', pid: process.pid, key, ttl_ms: a['ttl-ms'], planned_ms: section,
        acquire_sent_ns: Number(sent), start_ns: Number(start), end_ns: Number(end),
        release_done_ns: Number(done), held, release: outcome,
      };
      fs.writeSync(log, JSON.stringify(rec) + '\n');
    }
  }
  redis.disconnect();
}

main().catch((e) => {
  process.stderr.write(`redlock.js: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
