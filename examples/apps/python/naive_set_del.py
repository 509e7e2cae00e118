#!/usr/bin/env python3
"""A service that locks by hand: `SET key token NX PX ttl`, then a plain `DEL key` — the bug of
the lock that deletes whatever holds the key.

When a section outlives its TTL another copy takes the lock, and this copy's `DEL` then removes
*that* copy's lock (a wrongful delete): a third can enter while the second still works. The
program cannot tell: `DEL` answers 1 either way, and it always believes it held. Every hold is
written to $LOCKBENCH_APP_LOG (see applog.py), with the `DEL` reply in `deleted`.
"""
import os
import time

import redis

from applog import HoldLog, Plan, now, parse_args, redis_address, start_together

a = parse_args(__doc__.splitlines()[0])
r = redis.Redis(**redis_address())
plan = Plan(a)
start_together(r, a)
log = HoldLog("naive")
for _ in range(a.cycles):
    key, section = plan.key(), plan.section_s()
    token = os.urandom(8).hex()
    while True:
        sent = now()
        if r.set(key, token, nx=True, px=a.ttl_ms):
            break
        time.sleep(a.retry_ms / 1000.0)
    start = now()
    time.sleep(section)  # the work the lock protects
    end = now()
    deleted = r.delete(key)
    log.hold(key=key, ttl_ms=a.ttl_ms, planned_ms=section * 1000.0, acquire_sent_ns=sent,
             start_ns=start, end_ns=end, release_done_ns=now(), held=True,
             release="deleted" if deleted else "absent", deleted=deleted)
