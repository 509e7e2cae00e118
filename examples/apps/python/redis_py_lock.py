#!/usr/bin/env python3
"""A service that locks with redis-py's `Lock` (a random token, `SET NX PX`, release by a Lua
script that deletes the key only while it still holds the token).

Each cycle picks one of --keys keys, takes its lock (trying again every --retry-ms while it is
busy), works for a section drawn from uniform(--min-ms, --max-ms), and releases. A section
longer than --ttl-ms outlives its lock: another copy may take it meanwhile, and the release then
raises `LockNotOwnedError` and deletes nothing. Every hold is written to $LOCKBENCH_APP_LOG
(see applog.py). Run it under `lockbench observe -- python redis_py_lock.py …`.
"""
import time

import redis
from redis.exceptions import LockNotOwnedError

from applog import HoldLog, Plan, now, parse_args, redis_address, start_together

a = parse_args(__doc__.splitlines()[0])
r = redis.Redis(**redis_address())
plan = Plan(a)
start_together(r, a)
log = HoldLog("redis-py")
for _ in range(a.cycles):
    key, section = plan.key(), plan.section_s()
    lock = r.lock(key, timeout=a.ttl_ms / 1000.0)
    while True:
        sent = now()
        if lock.acquire(blocking=False):
            break
        time.sleep(a.retry_ms / 1000.0)
    start = now()
    time.sleep(section)  # the work the lock protects
    end = now()
    try:
        lock.release()
        held, outcome = True, "released"
    except LockNotOwnedError:
        held, outcome = False, "refused"
    log.hold(key=key, ttl_ms=a.ttl_ms, planned_ms=section * 1000.0, acquire_sent_ns=sent,
             start_ns=start, end_ns=end, release_done_ns=now(), held=held, release=outcome)
