#!/usr/bin/env python3
"""lockbench-driver protocol 2 for Python lock libraries (issues 33, 43).

    python driver.py --lib redis-py|python-redis-lock|python-redis-lock-renew|pottery

A process hosts one lock holder (protocol 1: requests without a `holder`) or many (protocol 2:
every request names its `holder`, each served by a thread of its own with its own connections
and lock objects). Requests arrive as JSON lines on stdin, replies and events leave as JSON
lines on stdout; nothing else is ever written to stdout (library logs and warnings go to
stderr, a holder's thread's lines prefixed `[holder N] `). The protocol is described in
docs/src/reference/driver-protocol.md.
"""
from __future__ import annotations

import argparse
import io
import json
import logging
import math
import os
import sys
import threading
import time
import warnings
from importlib import metadata

PROTOCOL = 2
# Protocol 1 is protocol 2 without `holder` fields: one holder a process.
SPOKEN = (1, 2)
LIBS = ("redis-py", "python-redis-lock", "python-redis-lock-renew", "pottery")

# stdout belongs to the protocol alone: keep a private handle and point sys.stdout at stderr so
# that a stray print() in a library cannot corrupt the stream.
_OUT = io.TextIOWrapper(os.fdopen(os.dup(1), "wb", buffering=0), encoding="utf-8", write_through=True)
# The holder a thread serves, for stderr's attribution (None: the process's own lines).
_THREAD_HOLDER = threading.local()


class HolderStderr(io.TextIOBase):
    """stderr whose lines, written by a holder's thread, start `[holder N] `: lockbench keeps
    each holder's last words apart from the others' in a shared process."""

    def __init__(self, raw):
        self.raw = raw
        self.at_start = threading.local()

    def write(self, text):
        h = getattr(_THREAD_HOLDER, "holder", None)
        if h is not None and text:
            lead = "" if getattr(self.at_start, "no", False) else f"[holder {h}] "
            body = text.replace("\n", f"\n[holder {h}] ")
            if text.endswith("\n"):
                body = body[: -len(f"[holder {h}] ")]
            self.at_start.no = not text.endswith("\n")
            text = lead + body
        try:
            return self.raw.write(text)
        except (BrokenPipeError, OSError):
            return len(text)

    def flush(self):
        try:
            self.raw.flush()
        except (BrokenPipeError, OSError):
            pass

    def writable(self):
        return True


sys.stderr = HolderStderr(sys.stderr)
sys.stdout = sys.stderr
logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
warnings.simplefilter("default")
_OUT_LOCK = threading.Lock()


def now() -> int:
    return time.monotonic_ns()  # CLOCK_MONOTONIC on Linux


def send(obj: dict) -> None:
    line = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, cls=json.JSONEncoder) + "\n"
    with _OUT_LOCK:
        try:
            _OUT.write(line)
        except (BrokenPipeError, OSError):
            pass


def _held_lag_setting():
    """The test hook LOCKBENCH_DRIVER_HELD_LAG_MS (drivers/README.md): ms between the library's
    acquire returning and the `held` line written — what a loaded machine does to the line —
    for every holder, or for those LOCKBENCH_DRIVER_HELD_LAG_HOLDERS lists (`0,2`)."""
    ms = int(os.environ.get("LOCKBENCH_DRIVER_HELD_LAG_MS") or 0)
    only = os.environ.get("LOCKBENCH_DRIVER_HELD_LAG_HOLDERS")
    holders = None if not only else {int(h) for h in only.split(",")}
    return ms, holders


_HELD_LAG = _held_lag_setting()


def held_lag(holder) -> int:
    """The hook's lag for `holder` (None: the process's one holder), ms."""
    ms, holders = _HELD_LAG
    return ms if holders is None or holder in holders else 0


class Refused(Exception):
    """A request the library (or its driver) cannot do as asked: reply outcome error."""


def err_text(e: BaseException) -> str:
    if hasattr(e, "masters") and hasattr(e, "key"):
        # pottery's errors print every master's connection pool: name the key and the count.
        errs = [err_text(x) for x in getattr(e, "redis_errors", None) or []]
        return f"{type(e).__name__}: key {e.key} on {len(e.masters)} masters" + (f"; redis errors: {errs}" if errs else "")
    return f"{type(e).__name__}: {e}"


def is_timeout(e: BaseException) -> bool:
    import redis.exceptions as rex

    return isinstance(e, (rex.TimeoutError, TimeoutError))


def is_connection(e: BaseException) -> bool:
    import redis.exceptions as rex

    return isinstance(e, (rex.ConnectionError, ConnectionError)) and not is_timeout(e)


def error_reply(rid, e: BaseException, **extra) -> dict:
    r = {"id": rid, "outcome": "error", "error": err_text(e)}
    if is_timeout(e):
        r["unknown"] = True
        r["kind"] = "timeout"
    elif is_connection(e):
        r["kind"] = "connection"
    r.update(extra)
    return r


def need_int(req: dict, name: str, minimum: int = 0) -> int:
    v = req.get(name)
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise Refused(f"field {name!r} must be an integer >= {minimum}, got {v!r}")
    return v


def need_key(req: dict) -> str:
    k = req.get("key")
    if not isinstance(k, str) or not k:
        raise Refused(f"field 'key' must be a non-empty string, got {k!r}")
    return k


class Tap:
    """The tap (`options.tap` at hello: {prefix, getdel}): lockbench's attribution of deletes, inside
    this process instead of through a forwarder on the wire (docs/src/reference/driver-protocol.md).
    On a holder's own clients, and only on keys containing the run's prefix: a single-key `DEL k` /
    `UNLINK k` goes out as `GETDEL k` (where the server has it) and the library gets DEL's reply
    back (1 when a value came back, 0 for nil); a `SET k v … NX` answered OK is noted. A pipeline's
    commands do not pass here (their replies come as one list): they go out as they are. What was
    set and removed leaves on the holder's next line (`seen`): the server's word on whose lock a
    delete removed."""

    def __init__(self, spec):
        if (not isinstance(spec, dict) or not isinstance(spec.get("prefix"), str) or not spec["prefix"]
                or not isinstance(spec.get("getdel"), bool)):
            raise Refused(f'options.tap must be {{"prefix": a non-empty string, "getdel": true or false}}, got {spec!r}')
        self.prefix = spec["prefix"]
        self.getdel = spec["getdel"]
        self._seen = []
        self._lock = threading.Lock()  # a library's renewal thread sends commands too

    def ours(self, key) -> bool:
        return self.prefix in tap_text(key)

    def take(self) -> list:
        with self._lock:
            seen, self._seen = self._seen, []
        return seen

    def _note(self, item) -> None:
        with self._lock:
            self._seen.append(item)

    def wrap(self, client) -> None:
        """Routes `client`'s commands (redis-py's execute_command, which every command method
        calls) through the tap."""
        run = client.execute_command

        def execute_command(*args, **options):
            name = tap_text(args[0]).upper() if args else ""
            if name in ("DEL", "UNLINK") and len(args) == 2 and self.getdel and self.ours(args[1]):
                value = run("GETDEL", args[1], **options)
                self._note(["del", tap_text(args[1]), None if value is None else tap_text(value)])
                return 0 if value is None else 1
            reply = run(*args, **options)
            if name == "SET" and len(args) >= 4 and reply and self.ours(args[1]):
                opts = {tap_text(o).upper() for o in args[3:]}
                if "NX" in opts and "GET" not in opts:
                    self._note(["set", tap_text(args[1]), tap_text(args[2])])
            return reply

        client.execute_command = execute_command


def tap_text(v) -> str:
    """A command argument or reply as the tap writes it: bytes read as UTF-8, as a Node driver does."""
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).decode("utf-8", errors="replace")
    return str(v)


# --------------------------------------------------------------------------------------------
# Adapters: one per library. Each builds a lock object for (key, ttl_ms, wait_ms) and knows how
# to enter/leave the library's own idiom and how to name the outcome of what the library said.
# --------------------------------------------------------------------------------------------


class Adapter:
    library = ""
    package = ""
    quorum = False
    min_ttl_ms = 1
    ttl_step_ms = 1
    key_format = "{key}"
    caps = dict(section=True, acquire=True, extend=True, release=True, auto_renewal=False, lost_callback=False)
    option_names: tuple = ()
    # Why the library cannot run on a Redis Cluster (options.cluster); None: it can.
    no_cluster = "its driver has no cluster client for it"

    def __init__(self, servers: list, options: dict):
        import redis

        cluster = options.get("cluster", False)
        if not isinstance(cluster, bool):
            raise Refused(f"options.cluster must be true or false, got {cluster!r}")
        if cluster and self.no_cluster:
            raise Refused(f"{self.library} does not connect to a Redis Cluster: {self.no_cluster}")
        if not cluster and not self.quorum and len(servers) != 1:
            raise Refused(f"{self.library} takes exactly one server, got {len(servers)}")
        if not servers:
            raise Refused("no servers")
        self.options = options
        # Events go out through the holder's driver, which names the holder.
        self.emit = send
        self.current_lock = None  # the open section's lock object
        # lockbench sends its command timeout; socket_timeout_ms, when given, wins.
        timeout = options.get("socket_timeout_ms", options.get("command_timeout_ms"))
        kw = {}
        if timeout is not None:
            kw["socket_timeout"] = timeout / 1000
            kw["socket_connect_timeout"] = timeout / 1000
        self.tap = None
        if "tap" in options:
            if cluster:
                raise Refused("options.tap: a cluster client follows the nodes' own addresses; the tap is for one server or independent ones")
            self.tap = Tap(options["tap"])
        if cluster:
            self.clients = [cluster_client(servers, kw)]
        else:
            self.clients = [redis.Redis.from_url(u, **kw) for u in servers]
        for c in self.clients if self.tap else ():
            self.tap.wrap(c)
        for c in self.clients:
            c.ping()  # a server that is not there fails hello, not the first section
        self.current = None  # id of the open section, for events from library threads

    def hello_fields(self) -> dict:
        caps = dict(self.caps)
        caps.update(quorum=self.quorum, min_ttl_ms=self.min_ttl_ms, section_min_ttl_ms=self.min_ttl_ms,
                    ttl_step_ms=self.ttl_step_ms)
        return {
            "library": self.library,
            "package": self.package,
            "version": metadata.version(self.package),
            "capabilities": caps,
            "key_format": self.key_format,
        }

    def check_ttl(self, ttl_ms: int) -> None:
        if ttl_ms < self.min_ttl_ms or ttl_ms % self.ttl_step_ms:
            raise Refused(
                f"ttl_ms={ttl_ms} refused: {self.library} takes a TTL of at least {self.min_ttl_ms} ms"
                + (f" in whole multiples of {self.ttl_step_ms} ms" if self.ttl_step_ms > 1 else "")
            )

    def redis_key(self, key: str) -> str:
        return self.key_format.format(key=key)

    def close(self) -> None:
        RENEWING.discard(self)
        for c in self.clients:
            try:
                c.close()
            except Exception:
                pass


_OBSERVED = []


def observed_lock_class():
    """python-redis-lock's Lock, reporting each extension (the renewal thread's too) as an
    `extended` event of its adapter's open section; the library's behaviour is unchanged. One
    class for the process: the library registers its scripts on the first class that asks
    (a module global says they are registered), so a class of each holder's would find its
    scripts None."""
    if not _OBSERVED:
        import redis_lock

        class ObservedLock(redis_lock.Lock):
            adapter = None

            def extend(self, expire=None):
                super().extend(expire)
                a = self.adapter
                if a is not None and a.current is not None:
                    a.emit({"id": a.current, "event": "extended", "t_ns": now()})

        _OBSERVED.append(ObservedLock)
    return _OBSERVED[0]


# The adapters whose locks may have a renewal thread (python-redis-lock), for the hook below.
RENEWING = set()
_HOOKED = []


def install_renewal_hook() -> None:
    """python-redis-lock's renewal thread dies on NotAcquired (its extend found the key not
    ours): that is the library's only word that the lock was lost, so it becomes a `lost` event
    of the section whose lock that thread renewed (in a shared process, of that holder alone)."""
    if _HOOKED:
        return
    _HOOKED.append(True)
    import redis_lock

    prior = threading.excepthook

    def hook(args):
        if isinstance(args.exc_value, redis_lock.NotAcquired):
            for a in list(RENEWING):
                lock, rid = a.current_lock, a.current
                if rid is not None and lock is not None and getattr(lock, "_lock_renewal_thread", None) is args.thread:
                    a.emit({"id": rid, "event": "lost", "t_ns": now(),
                            "detail": "renewal thread: " + err_text(args.exc_value)})
        prior(args)

    threading.excepthook = hook


def cluster_client(servers: list, kw: dict):
    """redis-py's RedisCluster from the seed nodes' URLs: each one a startup node, the first
    one's credentials and TLS for all (as lockbench's own cluster client does)."""
    from redis.cluster import ClusterNode, RedisCluster
    from redis.connection import SSLConnection, parse_url

    nodes, first = [], None
    for u in servers:
        p = parse_url(u)
        if "host" not in p:
            raise Refused(f"a Redis Cluster is reached over TCP: {u.split('@')[-1]!r} has no host")
        nodes.append(ClusterNode(p["host"], p.get("port", 6379)))
        first = first or p
    for k in ("username", "password"):
        if first.get(k) is not None:
            kw[k] = first[k]
    if first.get("connection_class") is SSLConnection:
        kw["ssl"] = True
    return RedisCluster(startup_nodes=nodes, **kw)


class RedisPy(Adapter):
    library = "redis-py"
    package = "redis"
    option_names = ("sleep_ms", "socket_timeout_ms")
    # RedisCluster's lock() is the same redis.lock.Lock on one key (SET NX PX, one-key scripts).
    no_cluster = None

    def make(self, key, ttl_ms, wait_ms):
        from redis.lock import Lock

        sleep = self.options.get("sleep_ms", 100) / 1000
        return Lock(
            self.clients[0], key, timeout=ttl_ms / 1000, sleep=sleep,
            blocking=wait_ms > 0, blocking_timeout=wait_ms / 1000 if wait_ms > 0 else None,
        )

    def enter(self, lock):  # `with lock:` is __enter__ then __exit__
        lock.__enter__()

    def leave(self, lock):
        lock.__exit__(None, None, None)

    def acquire(self, lock, wait_ms):
        return lock.acquire()

    def release(self, lock):
        lock.release()

    def extend(self, lock, ttl_ms):
        lock.extend(ttl_ms / 1000, replace_ttl=True)

    def token(self, lock):
        t = lock.local.token
        return t.decode() if isinstance(t, bytes) else t

    def classify(self, e, phase):
        from redis.exceptions import LockError, LockNotOwnedError

        if isinstance(e, LockNotOwnedError):
            return "not_owned"
        if phase == "acquire" and isinstance(e, LockError) and "Unable to acquire" in str(e):
            return "busy"
        return "error"


class PythonRedisLock(Adapter):
    library = "python-redis-lock"
    package = "python-redis-lock"
    min_ttl_ms = 1000
    ttl_step_ms = 1000
    key_format = "lock:{key}"
    option_names = ("signal_expire_ms", "socket_timeout_ms")
    renew = False
    # The two keys alone would pass with lockbench's names, which carry a hash tag; the
    # client check does not, and strict=False is not the library's documented use.
    no_cluster = (
        "its Lock refuses any client but a redis.StrictRedis (strict=True), so a RedisCluster; past "
        "that, its scripts write two keys, lock:NAME and lock-signal:NAME, which share a slot only "
        "when NAME has a hash tag (its issue #59: CROSSSLOT otherwise)"
    )

    def __init__(self, servers, options):
        super().__init__(servers, options)
        self.Lock = observed_lock_class()
        install_renewal_hook()
        RENEWING.add(self)

    def hello_fields(self):
        f = super().hello_fields()
        f["capabilities"]["auto_renewal"] = self.renew
        f["capabilities"]["lost_callback"] = self.renew
        return f

    def make(self, key, ttl_ms, wait_ms):
        self.check_ttl(ttl_ms)
        lock = self.Lock(
            self.clients[0], key, expire=ttl_ms // 1000, auto_renewal=self.renew,
            signal_expire=self.options.get("signal_expire_ms", 1000), blocking=wait_ms > 0,
        )
        lock.adapter = self
        return lock

    def _acquire(self, lock, wait_ms):
        if wait_ms <= 0:
            return lock.acquire(blocking=False)
        # The library waits in whole seconds and refuses a timeout above the expire (unless
        # renewing): round the budget up to seconds and cap it at the expire.
        secs = math.ceil(wait_ms / 1000)
        if not lock._lock_renewal_interval:
            secs = min(secs, lock._expire)
        return lock.acquire(blocking=True, timeout=secs)

    def enter(self, lock):
        # `with lock:` cannot take a wait budget (its __enter__ blocks without a timeout), so the
        # acquire is the library's acquire(timeout=) and leaving is its __exit__ (= release()).
        if not self._acquire(lock, self._wait):
            raise Busy()

    def leave(self, lock):
        lock.__exit__(None, None, None)

    def acquire(self, lock, wait_ms):
        return self._acquire(lock, wait_ms)

    def release(self, lock):
        lock.release()

    def extend(self, lock, ttl_ms):
        self.check_ttl(ttl_ms)
        lock.extend(ttl_ms // 1000)

    def token(self, lock):
        return lock.id

    def classify(self, e, phase):
        import redis_lock

        if isinstance(e, redis_lock.NotAcquired) and phase in ("release", "extend"):
            return "not_owned"
        return "error"


class PythonRedisLockRenew(PythonRedisLock):
    library = "python-redis-lock-renew"
    renew = True


class Pottery(Adapter):
    library = "pottery"
    package = "pottery"
    quorum = True
    key_format = "redlock:{key}"
    option_names = ("raise_on_redis_errors", "num_extensions", "socket_timeout_ms")
    no_cluster = "its Redlock takes a quorum over independent redis.Redis masters, not one cluster"

    def make(self, key, ttl_ms, wait_ms):
        from pottery import Redlock

        kw = dict(
            key=key, masters=self.clients, auto_release_time=ttl_ms / 1000,
            raise_on_redis_errors=bool(self.options.get("raise_on_redis_errors", False)),
            num_extensions=self.options.get("num_extensions", 3),
        )
        if wait_ms > 0:
            kw.update(context_manager_blocking=True, context_manager_timeout=wait_ms / 1000)
        else:
            kw.update(context_manager_blocking=False)
        return Redlock(**kw)

    def enter(self, lock):
        lock.__enter__()

    def leave(self, lock):
        lock.__exit__(None, None, None)

    def acquire(self, lock, wait_ms):
        if wait_ms > 0:
            return lock.acquire(blocking=True, timeout=wait_ms / 1000)
        return lock.acquire(blocking=False)

    def release(self, lock):
        lock.release()

    def extend(self, lock, ttl_ms):
        lock.auto_release_time = ttl_ms / 1000  # extend() re-arms to auto_release_time
        lock.extend()

    def token(self, lock):
        return lock._uuid or None

    def classify(self, e, phase):
        from pottery import QuorumNotAchieved, ReleaseUnlockedLock, ExtendUnlockedLock, TooManyExtensions

        if isinstance(e, (ReleaseUnlockedLock, ExtendUnlockedLock)):
            return "not_owned"
        if isinstance(e, QuorumNotAchieved) and phase == "acquire":
            return "busy"
        if isinstance(e, TooManyExtensions):
            return "fail"
        return "error"


ADAPTERS = {
    "redis-py": RedisPy,
    "python-redis-lock": PythonRedisLock,
    "python-redis-lock-renew": PythonRedisLockRenew,
    "pottery": Pottery,
}


class Busy(Exception):
    """The acquire did not succeed within its wait budget."""


# --------------------------------------------------------------------------------------------


class Driver:
    def __init__(self, lib: str, holder=None):
        self.lib = lib
        # The holder this driver serves in a shared process (protocol 2); None: the process's
        # one holder (protocol 1), whose lines carry no `holder`.
        self.holder = holder
        self.adapter = None
        self.sections = {}  # id -> dict(lock, t0, held, lost)
        self.held = {}  # key -> lock (explicit acquire)
        self._send_lock = threading.Lock()

    def send(self, obj: dict) -> None:
        if self.holder is not None:
            obj["holder"] = self.holder
        # What the tap saw leaves on the holder's next line (before the reply it led to). Taken
        # and written under one lock: a library thread's event must not take a release's
        # removal and be written after that release's reply.
        tap = self.adapter.tap if self.adapter is not None else None
        with self._send_lock:
            seen = tap.take() if tap is not None else None
            # A `held` line's token already tells the SET of that value on its key.
            if seen and obj.get("event") == "held" and isinstance(obj.get("token"), str):
                told = ["set", obj.get("redis_key"), obj["token"]]
                seen = [s for s in seen if s != told]
            if seen:
                obj["seen"] = seen
            send(obj)

    def busy_outcome(self, wait_ms):
        return "timeout" if wait_ms > 0 else "fail"

    # ---- ops

    def op_hello(self, req):
        protocol = req.get("protocol")
        if protocol not in SPOKEN or isinstance(protocol, bool):
            raise Refused(f"protocol {protocol!r} not spoken; this driver speaks {' and '.join(map(str, SPOKEN))}")
        if protocol == 1 and self.holder is not None:
            raise Refused("protocol 1 has no holders: a request with `holder` speaks protocol 2")
        servers = req.get("servers")
        if not isinstance(servers, list) or not all(isinstance(s, str) for s in servers):
            raise Refused("field 'servers' must be a list of redis:// or unix:// URLs")
        options = req.get("options") or {}
        if not isinstance(options, dict):
            raise Refused("field 'options' must be an object")
        if self.adapter is not None:
            self.adapter.close()
            self.adapter = None  # a failed hello leaves no connection behind
        cls = ADAPTERS[self.lib]
        ignored = sorted(k for k in options if k not in cls.option_names and k not in ("ttl_ms", "command_timeout_ms", "cluster", "tap"))
        adapter = cls(servers, options)
        adapter.emit = self.send
        ttls = options.get("ttl_ms")
        try:
            for t in ttls if isinstance(ttls, list) else ([] if ttls is None else [ttls]):
                if isinstance(t, bool) or not isinstance(t, int):
                    raise Refused(f"options.ttl_ms must be integers, got {t!r}")
                adapter.check_ttl(t)
        except Refused:
            adapter.close()
            raise
        self.adapter = adapter
        r = {"id": req["id"], "outcome": "ok", "protocol": protocol}
        r.update(adapter.hello_fields())
        r["pid"] = os.getpid()
        r["ignored_options"] = ignored
        r["tap"] = adapter.tap is not None
        return r

    def need_adapter(self):
        if self.adapter is None:
            raise Refused("no hello yet")
        return self.adapter

    def op_section(self, req):
        a = self.need_adapter()
        rid = req["id"]
        key = need_key(req)
        ttl_ms = need_int(req, "ttl_ms", 1)
        wait_ms = need_int(req, "wait_ms", 0)
        if self.sections:
            raise Refused(f"section {next(iter(self.sections))} is open: one section at a time")
        t0 = now()
        try:
            lock = a.make(key, ttl_ms, wait_ms)
            a._wait = wait_ms
            a.current = rid
            a.current_lock = lock
            a.enter(lock)
        except Refused:
            a.current = None
            raise
        except Exception as e:  # noqa: BLE001 - every library error is reported, not raised
            a.current = None
            t1 = now()
            kind = "busy" if isinstance(e, Busy) else a.classify(e, "acquire")
            if kind == "busy":
                return {"id": rid, "outcome": self.busy_outcome(wait_ms), "t0_ns": t0, "t1_ns": t1,
                        "held_ns": None, "leave_ns": None, "released_ns": None}
            r = error_reply(rid, e, t0_ns=t0, t1_ns=t1, held_ns=None, leave_ns=None, released_ns=None)
            if kind == "fail":
                r["outcome"] = "fail"
            return r
        held = now()
        self.sections[rid] = dict(lock=lock, t0=t0, held=held, lost=False)
        if held_lag(self.holder):
            time.sleep(held_lag(self.holder) / 1000)  # the test hook: a loaded machine's delay
        self.send({"id": rid, "event": "held", "t_ns": held, "token": a.token(lock), "redis_key": a.redis_key(key)})
        return None  # the reply comes with `leave`

    def op_leave(self, req):
        a = self.need_adapter()
        rid = req["id"]
        s = self.sections.pop(rid, None)
        if s is None:
            raise Refused(f"no open section {rid}")
        leave_ns = now()
        r = {"id": rid, "t0_ns": s["t0"], "held_ns": s["held"], "leave_ns": leave_ns}
        try:
            a.leave(s["lock"])
            r["outcome"] = "ok"
        except Exception as e:  # noqa: BLE001
            kind = a.classify(e, "release")
            if kind in ("not_owned", "fail"):
                r["outcome"] = kind
                r["error"] = err_text(e)
            else:
                r.update(error_reply(rid, e))
        r["released_ns"] = now()
        if a.current == rid:
            a.current = None
        return r

    def op_acquire(self, req):
        a = self.need_adapter()
        rid = req["id"]
        key = need_key(req)
        ttl_ms = need_int(req, "ttl_ms", 1)
        wait_ms = need_int(req, "wait_ms", 0)
        if key in self.held:
            raise Refused(f"key {key!r} is already held by this driver")
        t0 = now()
        try:
            lock = a.make(key, ttl_ms, wait_ms)
            a._wait = wait_ms
            ok = a.acquire(lock, wait_ms)
        except Refused:
            raise
        except Exception as e:  # noqa: BLE001
            t1 = now()
            kind = a.classify(e, "acquire")
            if kind == "busy":
                return {"id": rid, "outcome": self.busy_outcome(wait_ms), "t0_ns": t0, "t1_ns": t1, "token": None}
            return error_reply(rid, e, t0_ns=t0, t1_ns=t1, token=None)
        t1 = now()
        if not ok:
            return {"id": rid, "outcome": self.busy_outcome(wait_ms), "t0_ns": t0, "t1_ns": t1, "token": None}
        self.held[key] = lock
        return {"id": rid, "outcome": "ok", "t0_ns": t0, "t1_ns": t1, "token": a.token(lock),
                "redis_key": a.redis_key(key)}

    def _on_held(self, req, what):
        a = self.need_adapter()
        key = need_key(req)
        lock = self.held.get(key)
        if lock is None:
            raise Refused(f"key {key!r} was not acquired by this driver (use acquire first)")
        return a, key, lock

    def op_extend(self, req):
        a, key, lock = self._on_held(req, "extend")
        ttl_ms = need_int(req, "ttl_ms", 1)
        t0 = now()
        try:
            a.extend(lock, ttl_ms)
            out = {"outcome": "ok"}
        except Refused:
            raise
        except Exception as e:  # noqa: BLE001
            kind = a.classify(e, "extend")
            out = {"outcome": kind, "error": err_text(e)} if kind in ("not_owned", "fail") else error_reply(req["id"], e)
        return {"id": req["id"], **out, "t0_ns": t0, "t1_ns": now()}

    def op_release(self, req):
        a, key, lock = self._on_held(req, "release")
        t0 = now()
        del self.held[key]
        try:
            a.release(lock)
            out = {"outcome": "ok"}
        except Exception as e:  # noqa: BLE001
            kind = a.classify(e, "release")
            out = {"outcome": kind, "error": err_text(e)} if kind in ("not_owned", "fail") else error_reply(req["id"], e)
        return {"id": req["id"], **out, "t0_ns": t0, "t1_ns": now()}

    def op_block(self, req):
        ms = need_int(req, "ms", 0)
        # A stop-the-world pause: the main thread spins while holding the GIL (the switch
        # interval is raised for the duration), so library threads (renewal, executors) stall too.
        t0 = now()
        end = t0 + ms * 1_000_000
        prior = sys.getswitchinterval()
        sys.setswitchinterval(ms / 1000 + 1)
        try:
            while time.monotonic_ns() < end:
                pass
        finally:
            sys.setswitchinterval(prior)
        return {"id": req["id"], "outcome": "ok", "t0_ns": t0, "t1_ns": now()}

    def op_bye(self, req):
        # Sections left and locks released before the reply, which carries what the tap saw of
        # those releases: after it, nothing more is read.
        self.let_go()
        return {"id": req["id"], "outcome": "ok"}

    def shutdown(self):
        a = self.adapter
        if a is None:
            return
        self.let_go()
        a.close()

    def let_go(self):
        """Leaves the open sections and releases the held locks (each once)."""
        a = self.adapter
        if a is None:
            return
        sections, held = list(self.sections.values()), list(self.held.values())
        self.sections, self.held = {}, {}
        for s in sections:
            try:
                a.leave(s["lock"])
            except Exception as e:  # noqa: BLE001
                print(f"driver: leaving an open section at exit: {err_text(e)}", file=sys.stderr)
        for lock in held:
            try:
                a.release(lock)
            except Exception as e:  # noqa: BLE001
                print(f"driver: releasing at exit: {err_text(e)}", file=sys.stderr)

    def handle(self, line: str) -> bool:
        """Handles one line; returns False when the driver should exit."""
        rid = None
        try:
            req = json.loads(line)
            if not isinstance(req, dict):
                raise Refused("a request must be a JSON object")
            rid = req.get("id")
            if isinstance(rid, bool) or not isinstance(rid, int):
                rid = None
                raise Refused("field 'id' must be an integer")
            op = req.get("op")
            fn = getattr(self, f"op_{op}", None) if isinstance(op, str) else None
            if fn is None:
                raise Refused(f"unknown op {op!r}")
            reply = fn(req)
            if reply is not None:
                self.send(reply)
            return op != "bye"
        except json.JSONDecodeError as e:
            self.send({"id": None, "outcome": "error", "error": f"not JSON: {e}"})
        except Refused as e:
            self.send({"id": rid, "outcome": "error", "error": str(e)})
        except Exception as e:  # noqa: BLE001 - the driver keeps serving
            self.send(error_reply(rid, e))
        return True


# The end of lockbench, however it came (its goodbye and exit, Ctrl-C, kill -9): stdin ends, or
# the parent changes. The usual end then runs — open sections left, held locks released —
# within GONE_GRACE_S, after which the process exits whatever it is doing (a library call
# waiting on a server that went with lockbench): a driver never outlives lockbench for long
# (issue 40).
GONE_GRACE_S = 3.0
PARENT_POLL_S = 0.25
_gone = threading.Event()


def lockbench_gone() -> None:
    if _gone.is_set():
        return
    _gone.set()
    t = threading.Timer(GONE_GRACE_S, os._exit, (0,))
    t.daemon = True
    t.start()


def watch_parent() -> None:
    """A kill -9 of lockbench makes this process an orphan: its parent changes. The main
    thread may be inside a library call rather than reading stdin, so this thread notices."""
    parent = os.getppid()
    while not _gone.is_set():
        time.sleep(PARENT_POLL_S)
        if os.getppid() != parent:
            lockbench_gone()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True, choices=LIBS)
    args = ap.parse_args()
    threading.Thread(target=watch_parent, name="lockbench-parent", daemon=True).start()
    d = Driver(args.lib)
    hosted = {}  # holder -> Hosted: the holders of protocol 2, each served by its own thread
    stdin = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")
    try:
        for line in stdin:
            if not line.strip():
                continue
            h = holder_of(line)
            if h is None:
                if not d.handle(line):
                    break
                continue
            host = hosted.get(h)
            if host is None or not host.thread.is_alive():
                host = hosted[h] = Hosted(args.lib, h)
            host.lines.put(line)
    finally:
        lockbench_gone()
        for host in hosted.values():
            host.lines.put(None)
        for host in hosted.values():
            host.thread.join()
        d.shutdown()
        _OUT.close()
    return 0


def holder_of(line: str):
    """The `holder` a request names (protocol 2), or None: the process's own holder, which also
    answers a line that is not a request."""
    try:
        req = json.loads(line)
    except ValueError:
        return None
    h = req.get("holder") if isinstance(req, dict) else None
    return h if isinstance(h, int) and not isinstance(h, bool) and h >= 0 else None


class Hosted:
    """One holder of a shared process: its own thread serves its requests in order (a section
    waiting for its lock holds up no other holder), with its own connections and lock objects.
    Its `bye` ends it alone: its sections are left, its locks released, its connections closed."""

    def __init__(self, lib: str, holder: int):
        import queue

        self.driver = Driver(lib, holder)
        self.lines = queue.SimpleQueue()
        self.thread = threading.Thread(target=self.serve, name=f"holder-{holder}", daemon=True)
        self.thread.start()

    def serve(self) -> None:
        _THREAD_HOLDER.holder = self.driver.holder
        try:
            while True:
                line = self.lines.get()
                if line is None or not self.driver.handle(line):
                    break
        finally:
            self.driver.shutdown()


if __name__ == "__main__":
    sys.exit(main())
