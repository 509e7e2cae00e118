"""What the Python example apps share: their flags, the Redis address from the environment, the
section durations, and their own log of holds (one JSON line per hold).

The log is the program's own account, on CLOCK_MONOTONIC (one clock for every process on the
machine, so the logs of several copies merge): for each hold, when the winning acquisition was
sent (`acquire_sent_ns`), when its reply came back (`start_ns`), when the release was sent
(`end_ns`) and when its reply came back (`release_done_ns`). A proxy between the program and
Redis sees the hold begin inside [acquire_sent_ns, start_ns] and end inside
[end_ns, release_done_ns]: the two bounds are what a test compares the proxy's figures with.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import time
from urllib.parse import urlsplit


def parse_args(description: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--keys", type=int, default=3, help="lock keys to choose from (default 3)")
    p.add_argument("--ttl-ms", type=int, default=100, help="lock TTL in ms (default 100)")
    p.add_argument("--min-ms", type=float, default=20.0, help="shortest section in ms (default 20)")
    p.add_argument("--max-ms", type=float, default=80.0, help="longest section in ms (default 80)")
    p.add_argument("--cycles", type=int, default=20, help="locks taken and released (default 20)")
    p.add_argument("--seed", type=int, default=1, help="random seed, mixed with the pid (default 1)")
    p.add_argument("--retry-ms", type=float, default=5.0, help="pause between tries of a busy lock (default 5)")
    p.add_argument("--prefix", default="app:lock:", help="lock key prefix (default app:lock:)")
    p.add_argument("--start-together", type=int, default=1, metavar="N",
                   help="wait until N copies have started before the first lock (default 1)")
    a = p.parse_args()
    if a.keys < 1 or a.cycles < 0 or a.ttl_ms < 1 or not 0 <= a.min_ms <= a.max_ms or a.retry_ms < 0 or a.start_together < 1:
        p.error("need --keys >= 1, --cycles >= 0, --ttl-ms >= 1, 0 <= --min-ms <= --max-ms, --retry-ms >= 0, --start-together >= 1")
    return a


def redis_address() -> dict:
    """REDIS_URL, else REDIS_HOST/REDIS_PORT, else localhost:6379, as redis-py keyword arguments."""
    url = os.environ.get("REDIS_URL")
    if url:
        u = urlsplit(url)
        kw = {"host": u.hostname or "localhost", "port": u.port or 6379}
        if u.password:
            kw["password"] = u.password
        if u.username:
            kw["username"] = u.username
        if u.path.strip("/"):
            kw["db"] = int(u.path.strip("/"))
        if u.scheme == "rediss":
            kw["ssl"] = True
        return kw
    return {"host": os.environ.get("REDIS_HOST", "localhost"), "port": int(os.environ.get("REDIS_PORT", "6379"))}


def now() -> int:
    return time.monotonic_ns()  # CLOCK_MONOTONIC on Linux


class Plan:
    """The key and section length of each cycle, from the seed and the pid (copies differ)."""

    def __init__(self, a: argparse.Namespace):
        self.rng = random.Random(a.seed * 1_000_003 + os.getpid())
        self.a = a

    def key(self) -> str:
        return f"{self.a.prefix}{self.rng.randrange(self.a.keys)}"

    def section_s(self) -> float:
        return self.rng.uniform(self.a.min_ms, self.a.max_ms) / 1000.0


class HoldLog:
    """Appends one JSON line per hold to $LOCKBENCH_APP_LOG (nothing when it is unset).

    Each line is one write() on a file opened with O_APPEND, so copies of the program can share
    one log file without interleaving their lines."""

    def __init__(self, app: str):
        self.app = app
        path = os.environ.get("LOCKBENCH_APP_LOG")
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) if path else None

    def hold(self, **fields) -> None:
        if self.fd is None:
            return
        line = json.dumps({"app": self.app, "pid": os.getpid(), **fields}, separators=(",", ":")) + "\n"
        os.write(self.fd, line.encode())


def start_together(r, a: argparse.Namespace) -> None:
    """Counts this copy in at `PREFIXstarted` and waits until --start-together copies are: copies
    that start one after the other on a busy machine still contend from their first lock."""
    if a.start_together <= 1:
        return
    key = f"{a.prefix}started"
    r.incr(key)
    while int(r.get(key) or 0) < a.start_together:
        time.sleep(0.002)
