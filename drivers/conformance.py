#!/usr/bin/env python3
"""Conformance of lockbench's lock-library drivers to protocol lockbench-driver 2 (issues 33, 43;
protocol 1 is 2 without `holder` fields, and most checks speak it).

    python3 drivers/conformance.py [LIB ...]      # all drivers when none is named

Starts private redis-server instances on free loopback ports (three: quorum drivers get all
three, the others the first), installs the drivers' pinned packages (scripts/drivers.sh) and, for
every driver: hello; one short section; two driver processes contending on one key (their
critical sections, held -> leave, never overlap); a section that outlives its TTL while another
process acquires after the expiry (what the library says on release, and whose key is left); a
lock whose key vanished while held (what the release does to the next holder's key: the npm
redis-lock control deletes it); refusals; garbage input; block; bye and EOF. Prints a table and
exits 1 on any failed check. The servers are stopped at the end, also on failure.
"""
from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DRIVERS = ["redis-py", "python-redis-lock", "python-redis-lock-renew", "pottery",
           "redlock5", "redlock4", "redis-semaphore", "redis-lock"]
QUORUM = {"pottery", "redlock5", "redlock4"}
PINS = {"redis-py": "8.2.0", "python-redis-lock": "4.0.1", "python-redis-lock-renew": "4.0.1",
        "pottery": "3.0.1", "redlock5": "v5.0.0-beta.2", "redlock4": "4.2.0",
        "redis-semaphore": "5.8.0", "redis-lock": "1.0.0"}
MS = 1_000_000


def mono() -> int:
    return time.monotonic_ns()


# ---- a minimal RESP client (no dependency: runs on any python3) -------------------------------

class Resp:
    def __init__(self, port: int):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.f = self.s.makefile("rb")

    def cmd(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.s.sendall(out)
        return self._read()

    def _read(self):
        line = self.f.readline()
        t, rest = line[:1], line[1:-2]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            raise RuntimeError(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)[:-2]
            return data.decode(errors="replace")
        if t == b"*":
            return [self._read() for _ in range(int(rest))]
        raise RuntimeError(f"bad reply {line!r}")

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Servers:
    def __init__(self, n: int):
        self.procs, self.ports, self.clients = [], [], []
        # Each server also listens on a Unix socket of its own (the `unix://` URLs).
        self.dir = tempfile.mkdtemp(prefix="lockbench-conformance-")
        self.sockets = []
        exe = shutil.which("redis-server")
        if not exe:
            sys.exit("conformance: redis-server is not on PATH")
        for i in range(n):
            for attempt in range(5):
                port = free_port()
                sock = os.path.join(self.dir, f"redis-{i}-{attempt}.sock")
                p = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no", "--unixsocket", sock, "--unixsocketperm", "700"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                self.procs.append(p)
                if self._wait(port, p):
                    self.ports.append(port)
                    self.sockets.append(sock)
                    self.clients.append(Resp(port))
                    break
                p.kill()
                p.wait()
                self.procs.remove(p)
            else:
                raise RuntimeError("could not start redis-server")

    @staticmethod
    def _wait(port, p) -> bool:
        end = time.time() + 5
        while time.time() < end:
            if p.poll() is not None:
                return False
            try:
                r = Resp(port)
                ok = r.cmd("PING") == "PONG"
                r.close()
                if ok:
                    return True
            except OSError:
                time.sleep(0.02)
        return False

    def urls(self, n: int):
        return [f"redis://127.0.0.1:{p}/0" for p in self.ports[:n]]

    def unix_urls(self, n: int, db: int):
        return [f"unix://{s}?db={db}" for s in self.sockets[:n]]

    def stop(self):
        for c in self.clients:
            c.close()
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


# ---- one driver process ---------------------------------------------------------------------

class DriverProc:
    def __init__(self, argv, env=None):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  cwd=ROOT, start_new_session=True,
                                  env=None if env is None else dict(os.environ, **env))
        self.q: queue.Queue = queue.Queue()
        self.seen = []  # every message, in order
        self.bad_lines = []  # stdout lines that are not JSON objects
        self.stderr = []
        threading.Thread(target=self._read_out, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()
        self.next_id = 1

    def _read_out(self):
        for raw in self.p.stdout:
            try:
                m = json.loads(raw)
                if not isinstance(m, dict):
                    raise ValueError
            except ValueError:
                self.bad_lines.append(raw)
                continue
            m["_read_ns"] = mono()  # when the line was read here (the held lag's check)
            self.q.put(m)
        self.q.put(None)

    def _read_err(self):
        for raw in self.p.stderr:
            self.stderr.append(raw.decode(errors="replace").rstrip())

    def send_raw(self, text: str):
        self.p.stdin.write(text.encode() + b"\n")
        self.p.stdin.flush()

    def send(self, obj) -> int:
        if "id" not in obj:
            obj = dict(obj, id=self.next_id)
            self.next_id += 1
        self.send_raw(json.dumps(obj))
        return obj["id"]

    def wait(self, pred, timeout=10.0):
        """The first message (seen before or arriving) that pred accepts."""
        for m in self.seen:
            if pred(m) and not m.get("_taken"):
                m["_taken"] = True
                return m
        end = time.time() + timeout
        while True:
            left = end - time.time()
            if left <= 0:
                raise TimeoutError(f"no matching message within {timeout}s; stderr: {self.stderr[-5:]}")
            try:
                m = self.q.get(timeout=left)
            except queue.Empty:
                continue
            if m is None:
                raise EOFError(f"driver exited (rc={self.p.poll()}); stderr: {self.stderr[-5:]}")
            self.seen.append(m)
            if pred(m):
                m["_taken"] = True
                return m

    def reply(self, rid, timeout=10.0):
        return self.wait(lambda m: m.get("id") == rid and "outcome" in m, timeout)

    def request(self, obj, timeout=10.0):
        return self.reply(self.send(obj), timeout)

    def events(self, rid, name=None):
        return [m for m in self.seen if m.get("id") == rid and "event" in m and (name is None or m["event"] == name)]

    def section_start(self, key, ttl, wait):
        """Sends section; returns (id, held event or None, reply if it came without held)."""
        rid = self.send({"op": "section", "key": key, "ttl_ms": ttl, "wait_ms": wait})
        m = self.wait(lambda m: m.get("id") == rid and (m.get("event") == "held" or "outcome" in m), wait / 1000 + 30)
        if "outcome" in m:
            return rid, None, m
        return rid, m, None

    def leave(self, rid, timeout=30.0):
        self.send({"id": rid, "op": "leave"})
        return self.reply(rid, timeout)

    def close(self):
        if self.p.poll() is None:
            try:
                self.p.stdin.close()
            except OSError:
                pass
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait()


# ---- checks -----------------------------------------------------------------------------------

class Failed(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failed(what)


class Run:
    def __init__(self, lib, servers):
        self.lib = lib
        self.servers = servers
        self.n = 3 if lib in QUORUM else 1
        self.argv = subprocess.run(["bash", os.path.join(ROOT, "scripts/drivers.sh"), "--command", lib],
                                   check=True, capture_output=True, text=True).stdout.split("\n")[:4]
        self.procs = []
        self.cells = {}
        self.failures = []
        self.notes = []
        self.key_format = "{key}"

    def spawn(self, options=None, env=None):
        d = DriverProc(self.argv, env)
        self.procs.append(d)
        r = d.request({"op": "hello", "protocol": 1, "servers": self.servers.urls(self.n),
                       "options": options or {}}, timeout=30)
        check(r["outcome"] == "ok", f"hello: {r}")
        return d, r

    def key(self, name):
        return f"conf:{self.lib}:{name}:{os.getpid()}"

    def rkey(self, key):
        return self.key_format.replace("{key}", key)

    def server_values(self, rkey):
        return [c.cmd("GET", rkey) for c in self.servers.clients[: self.n]]

    def majority_value(self, rkey):
        vals = self.server_values(rkey)
        for v in set(vals):
            if vals.count(v) > self.n // 2:
                return v
        return "(no majority)"

    def step(self, name, fn):
        try:
            self.cells[name] = fn()
        except Failed as e:
            self.cells[name] = "FAIL"
            self.failures.append(f"{self.lib} {name}: {e}")
        except Exception as e:  # noqa: BLE001
            self.cells[name] = "FAIL"
            self.failures.append(f"{self.lib} {name}: {type(e).__name__}: {e}")

    # -- the checks

    def t_hello(self):
        before = mono()
        d, r = self.spawn()
        check(r.get("protocol") == 1, "protocol != 1")
        check(r.get("pid") == d.p.pid, f"pid {r.get('pid')} is not the process {d.p.pid}")
        check(r.get("library") == self.lib, f"library {r.get('library')!r}")
        check(r.get("version") == PINS[self.lib], f"version {r.get('version')!r}, pinned {PINS[self.lib]}")
        caps = r.get("capabilities", {})
        for k in ("section", "acquire", "extend", "release", "auto_renewal", "lost_callback", "quorum", "min_ttl_ms",
                  "section_min_ttl_ms", "ttl_step_ms"):
            check(k in caps, f"capability {k} missing")
        check(caps["quorum"] == (self.lib in QUORUM), "quorum capability")
        self.key_format = r.get("key_format", "{key}")
        self.caps = caps
        bad = d.request({"op": "hello", "protocol": 3, "servers": self.servers.urls(self.n)})
        check(bad["outcome"] == "error", f"protocol 3 accepted: {bad}")
        d.send({"op": "bye"})
        d.close()
        self.version = r["version"]
        return f"ok {r['version']}"

    def t_holders(self):
        """Protocol 2: two holders in one process, each with its own lock objects, take turns on
        one key. While A holds, B's section waits inside the driver and A's leave is still served
        (no holder waits behind another's request); B is held only after A's release; every
        reply and event names its request's holder; a holder's bye ends it alone."""
        d = DriverProc(self.argv)
        self.procs.append(d)
        for h in (1, 2):
            r = d.request({"op": "hello", "protocol": 2, "holder": h, "servers": self.servers.urls(self.n)},
                          timeout=30)
            check(r["outcome"] == "ok" and r.get("holder") == h and r.get("protocol") == 2, f"hello of holder {h}: {r}")
            check(r.get("pid") == d.p.pid, "pid")
        key = self.key("holders")
        ttl = max(2000, self.caps.get("section_min_ttl_ms", 1))
        ttl += -ttl % self.caps.get("ttl_step_ms", 1)
        holder_of = {}
        for turn in range(4):
            a, b = (1, 2) if turn % 2 == 0 else (2, 1)
            ra = d.send({"op": "section", "holder": a, "key": key, "ttl_ms": ttl, "wait_ms": 0})
            holder_of[ra] = a
            held_a = d.wait(lambda m: m.get("id") == ra and (m.get("event") == "held" or "outcome" in m), 30)
            check(held_a.get("event") == "held", f"turn {turn}: holder {a} not held: {held_a}")
            rb = d.send({"op": "section", "holder": b, "key": key, "ttl_ms": ttl, "wait_ms": 5000})
            holder_of[rb] = b
            time.sleep(0.15)
            check(not d.events(rb, "held"), f"turn {turn}: holder {b} held while holder {a} was in")
            d.send({"id": ra, "op": "leave", "holder": a})
            left = d.reply(ra, 30)
            check(left["outcome"] == "ok", f"turn {turn}: holder {a}'s leave: {left}")
            held_b = d.wait(lambda m: m.get("id") == rb and (m.get("event") == "held" or "outcome" in m), 30)
            check(held_b.get("event") == "held", f"turn {turn}: holder {b} not held after the release: {held_b}")
            check(held_b["t_ns"] >= left["released_ns"] - 5_000_000 and held_b["t_ns"] > left["leave_ns"],
                  f"turn {turn}: holder {b} held at {held_b['t_ns']}, holder {a} left at {left['leave_ns']}")
            d.send({"id": rb, "op": "leave", "holder": b})
            check(d.reply(rb, 30)["outcome"] == "ok", f"turn {turn}: holder {b}'s leave")
        for m in d.seen:
            if m.get("id") in holder_of:
                check(m.get("holder") == holder_of[m["id"]], f"a line of holder {holder_of[m['id']]} names {m.get('holder')}: {m}")
        bye = d.request({"op": "bye", "holder": 1})
        check(bye["outcome"] == "ok" and bye.get("holder") == 1, f"bye of holder 1: {bye}")
        still = d.request({"op": "block", "holder": 2, "ms": 1})
        check(still["outcome"] == "ok" and d.p.poll() is None, "holder 2 ended with holder 1's bye")
        d.close()
        check(d.p.returncode == 0, f"exit {d.p.returncode} at the end of input")
        return "ok 8 turns"

    def t_unix(self):
        """A section on servers reached through their Unix sockets (`unix://path?db=N`), as
        lockbench's watch offers them: the lock lands in database N, and is gone after release."""
        d = DriverProc(self.argv)
        self.procs.append(d)
        r = d.request({"op": "hello", "protocol": 1, "servers": self.servers.unix_urls(self.n, 2),
                       "options": {}}, timeout=30)
        check(r["outcome"] == "ok", f"hello over unix://: {r}")
        key = self.key("unix")
        rid, held, early = d.section_start(key, 1000, 1000)
        check(held is not None, f"no held event: {early}")
        in_db = []
        for c in self.servers.clients[: self.n]:
            c.cmd("SELECT", "2")
            in_db.append(c.cmd("EXISTS", held["redis_key"]))
            c.cmd("SELECT", "0")
        check(sum(in_db) > self.n // 2, f"the lock is not in database 2 of a majority: {in_db}")
        check(self.majority_value(held["redis_key"]) is None, "the lock went to database 0")
        r = d.leave(rid)
        check(r["outcome"] == "ok", f"leave: {r}")
        left = []
        for c in self.servers.clients[: self.n]:
            c.cmd("SELECT", "2")
            left.append(c.cmd("EXISTS", held["redis_key"]))
            c.cmd("SELECT", "0")
        check(sum(left) <= self.n // 2, f"key left after release: {left}")
        d.send({"op": "bye"})
        d.close()
        return "ok"

    def t_section(self):
        d, _ = self.spawn()
        key = self.key("s")
        before = mono()
        rid, held, early = d.section_start(key, 1000, 1000)
        check(held is not None, f"no held event: {early}")
        check(held.get("redis_key") == self.rkey(key), f"redis_key {held.get('redis_key')!r}")
        if held.get("token") is not None:
            check(self.majority_value(held["redis_key"]) == held["token"], "the server does not hold the token")
        time.sleep(0.02)
        r = d.leave(rid)
        after = mono()
        check(r["outcome"] == "ok", f"leave: {r}")
        t0, h, lv, rel = r["t0_ns"], r["held_ns"], r["leave_ns"], r["released_ns"]
        check(before <= t0 <= h <= lv <= rel <= after, "stamps out of order or not CLOCK_MONOTONIC")
        check(h == held["t_ns"], "held_ns differs from the held event's t_ns")
        check(lv - h >= 20 * MS, "held less than the 20 ms asked")
        # A quorum library returns once a majority answered: the others may still be deleting.
        check(self.majority_value(self.rkey(key)) is None, "key left after release")
        # block: the stalled loop / interpreter
        b = d.request({"op": "block", "ms": 50})
        check(b["outcome"] == "ok" and b["t1_ns"] - b["t0_ns"] >= 50 * MS, f"block: {b}")
        d.send({"op": "bye"})
        d.close()
        return f"ok {(rel - lv) / MS:.1f}ms rel"

    def t_held_lag(self, lag_ms=80):
        """The test hook LOCKBENCH_DRIVER_HELD_LAG_MS delays the `held` line, not its stamp:
        `t_ns` is when the acquire returned, the line is read `lag_ms` later (what a loaded
        machine does to it, and what lockbench's stamps are checked against)."""
        d, _ = self.spawn(env={"LOCKBENCH_DRIVER_HELD_LAG_MS": str(lag_ms)})
        key = self.key("lag")
        before = mono()
        rid, held, early = d.section_start(key, 1000, 1000)
        check(held is not None, f"no held event: {early}")
        check(before <= held["t_ns"], "t_ns before the request")
        late = held["_read_ns"] - held["t_ns"]
        check(late >= lag_ms * MS, f"held line read {late / MS:.1f} ms after t_ns, under the {lag_ms} ms lag")
        r = d.leave(rid)
        check(r["outcome"] == "ok" and r["held_ns"] == held["t_ns"], f"leave: {r}")
        d.send({"op": "bye"})
        d.close()
        return f"ok +{late / MS:.0f}ms"

    def t_contend(self, rounds=8):
        a, _ = self.spawn()
        b, _ = self.spawn()
        key = self.key("c")
        ttl = 2000 if self.lib.startswith("python-redis-lock") else 1000
        spans, outcomes, errors = [], {}, []

        def worker(d):
            for _ in range(rounds):
                rid, held, early = d.section_start(key, ttl, 5000)
                if held is None:
                    outcomes[early["outcome"]] = outcomes.get(early["outcome"], 0) + 1
                    continue
                time.sleep(0.01)
                r = d.leave(rid)
                outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
                spans.append((r["held_ns"], r["leave_ns"], r["released_ns"]))

        ts = [threading.Thread(target=lambda d=d: _catch(errors, worker, d)) for d in (a, b)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
        check(not errors, f"{errors}")
        spans.sort()
        overlaps = sum(1 for x, y in zip(spans, spans[1:]) if y[0] < x[1])
        check(overlaps == 0, f"{overlaps} overlapping critical sections")
        check(outcomes.get("ok", 0) >= rounds, f"too few sections completed: {outcomes}")
        for d in (a, b):
            d.send({"op": "bye"})
            d.close()
        return f"{len(spans)} ok, 0 overlap" + (f", {outcomes.get('timeout')} timeout" if outcomes.get("timeout") else "")

    def t_expiry(self):
        """A holds past its TTL; B asks after the expiry; what A's release says; whose key is left."""
        ttl, hold = {"python-redis-lock": (1000, 2500), "python-redis-lock-renew": (1000, 2500),
                     "redlock5": (700, 1500)}.get(self.lib, (100, 300))
        a, _ = self.spawn()
        b, _ = self.spawn()
        key = self.key("x")
        rk = self.rkey(key)
        rid, held, early = a.section_start(key, ttl, 1000)
        check(held is not None, f"A not held: {early}")
        t_held = held["t_ns"]
        _sleep_until(t_held + (ttl + 50) * MS)
        b_ttl = 10000
        # B gives up before A leaves (a renewing library keeps A's lock: B must time out then).
        b_wait = {"python-redis-lock": 1000, "python-redis-lock-renew": 1000,
                  "redlock5": 400, "redlock4": 400}.get(self.lib, hold - ttl - 100)
        b_id = b.send({"op": "section", "key": key, "ttl_ms": b_ttl, "wait_ms": b_wait})
        # B's answer: held, or a reply (timeout) when A's lock is kept alive.
        bm = b.wait(lambda m: m.get("id") == b_id and (m.get("event") == "held" or "outcome" in m), 30)
        b_during = bm.get("event") == "held" and bm["t_ns"] < t_held + hold * MS
        _sleep_until(t_held + hold * MS)
        ra = a.leave(rid)
        after = self.majority_value(rk)
        if bm.get("event") != "held":
            b_state = f"B {bm['outcome']}"
        elif b_during:
            b_state = "B held"
        else:
            b_state = "B held after A"
        if bm.get("event") == "held":
            b_token = bm.get("token")
            if b_token is not None:
                key_state = "B's key kept" if after == b_token else ("B's key GONE" if after is None else f"key={after}")
            else:
                key_state = "B's key kept" if after is not None else "B's key GONE"
            rb = b.leave(b_id)
        else:
            key_state = "no key" if after is None else "A's key"
        ext = len(a.events(rid, "extended"))
        lost = len(a.events(rid, "lost"))
        what = ra["outcome"] + (f" ({ra['detail']})" if ra.get("detail") else "")
        cell = f"A {what}; {b_state}; {key_state}" + (f"; {ext} ext" if ext else "") + (f"; lost" if lost else "")
        self.notes.append(f"{self.lib} expiry (TTL {ttl} ms, held {hold} ms): A release -> {ra['outcome']}"
                          f"{': ' + ra.get('error', '') if ra.get('error') else ''}"
                          f"{' [' + ra['detail'] + ']' if ra.get('detail') else ''}; {b_state}; {key_state};"
                          f" A events: {ext} extended, {lost} lost")
        exp = EXPECT_EXPIRY[self.lib]
        check((ra["outcome"], b_during, key_state) == exp,
              f"expected A {exp[0]}, B during A {exp[1]}, {exp[2]}; got {ra['outcome']}, {b_during}, {key_state}")
        for d in (a, b):
            d.send({"op": "bye"})
            d.close()
        return cell

    def t_vanish(self):
        """A's key vanishes while A holds (failover, eviction, a clock): B takes the lock; what
        does A's release do to B's key?"""
        ttl = 1000 if not self.lib.startswith("python-redis-lock") else 1000
        hold_after = 100 if self.lib == "redis-lock" else 1200
        a, _ = self.spawn()
        b, _ = self.spawn()
        key = self.key("v")
        rk = self.rkey(key)
        rid, held, early = a.section_start(key, ttl, 1000)
        check(held is not None, f"A not held: {early}")
        for c in self.servers.clients[: self.n]:
            c.cmd("DEL", rk)
        b_id, bh, bearly = b.section_start(key, 10000, 2000)
        check(bh is not None, f"B not held after the key vanished: {bearly}")
        time.sleep(hold_after / 1000)
        ra = a.leave(rid, timeout=60)
        after = self.majority_value(rk)
        if bh.get("token") is not None:
            key_state = "B's key kept" if after == bh["token"] else ("B's key GONE" if after is None else f"key={after}")
        else:
            key_state = "B's key kept" if after is not None else "B's key GONE"
        lost = len(a.events(rid, "lost"))
        b.leave(b_id)
        what = ra["outcome"] + (f" ({ra['detail']})" if ra.get("detail") else "")
        self.notes.append(f"{self.lib} vanished key (TTL {ttl} ms, A left {hold_after} ms after B held):"
                          f" A release -> {ra['outcome']}{': ' + ra.get('error', '') if ra.get('error') else ''}"
                          f"{' [' + ra['detail'] + ']' if ra.get('detail') else ''}; {key_state};"
                          f" A events: {[e.get('detail', e['event']) for e in a.events(rid) if e['event'] != 'held']};"
                          f" release took {(ra['released_ns'] - ra['leave_ns']) / MS:.0f} ms")
        exp = EXPECT_VANISH[self.lib]
        check((ra["outcome"], key_state, lost > 0) == exp,
              f"expected A {exp[0]}, {exp[1]}, lost event {exp[2]}; got {ra['outcome']}, {key_state}, {lost > 0}")
        for d in (a, b):
            d.send({"op": "bye"})
            d.close()
        return f"A {what}; {key_state}" + ("; lost" if lost else "")

    def t_tap(self):
        """The vanish case again with the tap on (`options.tap`): the library sees what it saw
        without it (the same outcomes as `vanish`); B's `held` line tells the value its SET NX
        set (every library but node-redlock's, which acquire with a script), which is the server's; A's release tells what its DEL removed — B's value for the
        plain DEL of redis-lock (the negative control), nothing for a compare-and-delete — and
        the server then holds no key A's DEL would have left."""
        tap = {"tap": {"prefix": f"conf:{self.lib}:", "getdel": True}}
        a, ra_hello = self.spawn(tap)
        b, _ = self.spawn(tap)
        check(ra_hello.get("tap") is True, f"hello did not confirm the tap: {ra_hello}")
        key = self.key("tap")
        rk = self.rkey(key)
        rid, held, early = a.section_start(key, 1000, 1000)
        check(held is not None, f"A not held: {early}")
        for c in self.servers.clients[: self.n]:
            c.cmd("DEL", rk)
        b_id, bh, bearly = b.section_start(key, 10000, 2000)
        check(bh is not None, f"B not held after the key vanished: {bearly}")
        b_sets = [v for what, k, v in bh.get("seen", []) if what == "set" and k == rk]
        b_value = self.majority_value(rk)
        # A set whose value is the held line's token is told by the token alone.
        check(bh.get("token") is None or bh["token"] not in b_sets, f"B's SET told twice: {bh}")
        # Every library here acquires with SET NX but node-redlock (a script the tap cannot read).
        if not self.lib.startswith("redlock"):
            check(b_sets or bh.get("token") is not None, f"B's tap told no SET NX: {bh}")
        if bh.get("token") is not None and not self.lib.startswith("redlock"):
            b_sets.append(bh["token"])
        for v in b_sets:
            check(v == b_value, f"B's tap told {v!r}, the server holds {b_value!r}")
        time.sleep((100 if self.lib == "redis-lock" else 1200) / 1000)
        ra = a.leave(rid, timeout=60)
        removed = [v for what, k, v in ra.get("seen", []) if what == "del" and k == rk]
        after = self.majority_value(rk)
        exp = EXPECT_VANISH[self.lib]
        check(ra["outcome"] == exp[0], f"A's release {ra['outcome']}, {exp[0]} without the tap")
        if self.lib == "redis-lock":
            check(removed == [b_value], f"A's tap told it removed {removed}, B's value was {b_value!r}")
            check(after is None, "B's key left after A's DEL")
        else:
            check(removed == [], f"a compare-and-delete library's tap told a DEL: {removed}")
        b.leave(b_id)
        for d in (a, b):
            d.send({"op": "bye"})
            d.close()
        return f"ok, B set {len(b_sets)}, A removed {len(removed)}"

    def t_pause(self):
        """SIGSTOP a renewing holder past its TTL (a GC pause); B takes the lock meanwhile; after
        SIGCONT the library must say the lock was lost (redis-semaphore #175 was a silent
        re-acquire)."""
        if not self.caps.get("auto_renewal"):
            return "-"
        ttl, stop = {"python-redis-lock-renew": (1000, 3000), "redlock5": (700, 2000)}.get(self.lib, (300, 1000))
        a, _ = self.spawn()
        b, _ = self.spawn()
        key = self.key("p")
        rid, held, early = a.section_start(key, ttl, 1000)
        check(held is not None, f"A not held: {early}")
        time.sleep(0.05)
        os.kill(a.p.pid, signal.SIGSTOP)
        try:
            b_id, bh, bearly = b.section_start(key, 10000, stop - 200)
        finally:
            _sleep_until(held["t_ns"] + (stop + 50) * MS)
            os.kill(a.p.pid, signal.SIGCONT)
        check(bh is not None, f"B did not get the lock while A was stopped: {bearly}")
        lost = a.wait(lambda m: m.get("id") == rid and m.get("event") == "lost", ttl / 1000 + 5)
        ra = a.leave(rid, timeout=60)
        after = self.majority_value(self.rkey(key))
        b.leave(b_id)
        key_state = "B's key kept" if after == bh.get("token") else "B's key GONE"
        self.notes.append(f"{self.lib} SIGSTOP {stop} ms (TTL {ttl} ms): A lost event {(lost['t_ns'] - held['t_ns']) / MS:.0f} ms"
                          f" after held ({lost.get('detail')}); A release -> {ra['outcome']}; {key_state}")
        check(key_state == "B's key kept", "A's release deleted B's key")
        return f"B held; A lost; A {ra['outcome']}"

    def t_refuse(self):
        d, _ = self.spawn()
        out = []
        if self.caps.get("section_min_ttl_ms", 1) > 100:
            rid = d.send({"op": "section", "key": self.key("r"), "ttl_ms": 100, "wait_ms": 0})
            r = d.reply(rid)
            check(r["outcome"] == "error" and not d.events(rid, "held"), f"TTL 100 not refused: {r}")
            out.append("TTL 100 refused")
            self.notes.append(f"{self.lib} TTL 100 ms: {r.get('error')}")
        if self.caps.get("section_min_ttl_ms", 1) > 100:
            d2 = DriverProc(self.argv)
            self.procs.append(d2)
            r = d2.request({"op": "hello", "protocol": 1, "servers": self.servers.urls(self.n),
                            "options": {"ttl_ms": [100, 1000]}})
            check(r["outcome"] == "error", f"hello with ttl_ms 100 not refused: {r}")
            d2.close()
            out.append("in hello too")
        # extend/release explicit ops where the library has them
        if self.caps.get("acquire"):
            k = self.key("e")
            ttl = 2000
            r = d.request({"op": "acquire", "key": k, "ttl_ms": ttl, "wait_ms": 0})
            check(r["outcome"] == "ok", f"acquire: {r}")
            busy = d.request({"op": "acquire", "key": k, "ttl_ms": ttl, "wait_ms": 0})
            check(busy["outcome"] == "error", f"second acquire of a held key in one driver: {busy}")
            if self.caps.get("extend"):
                r = d.request({"op": "extend", "key": k, "ttl_ms": 3000})
                check(r["outcome"] == "ok", f"extend: {r}")
            r = d.request({"op": "release", "key": k})
            check(r["outcome"] == "ok", f"release: {r}")
            out.append("acquire/" + ("extend/" if self.caps.get("extend") else "") + "release ok")
        d.send({"op": "bye"})
        d.close()
        return ", ".join(out) or "-"

    def t_garbage(self):
        d, _ = self.spawn()
        d.send_raw("this is not json")
        r = d.wait(lambda m: m.get("id") is None and "outcome" in m)
        check(r["outcome"] == "error" and "error" in r, f"garbage: {r}")
        d.send_raw("[1,2]")
        r = d.wait(lambda m: m.get("id") is None and "outcome" in m)
        check(r["outcome"] == "error", f"array: {r}")
        r = d.request({"id": 77, "op": "frobnicate"})
        check(r["outcome"] == "error", f"unknown op: {r}")
        r = d.request({"id": 78, "op": "section", "key": 5, "ttl_ms": 1000, "wait_ms": 0})
        check(r["outcome"] == "error", f"bad key: {r}")
        r = d.request({"id": 79, "op": "leave"})
        check(r["outcome"] == "error", f"leave without section: {r}")
        rid, held, early = d.section_start(self.key("g"), 1000, 1000)
        check(held is not None, f"not serving after garbage: {early}")
        r2 = d.request({"op": "section", "key": self.key("g2"), "ttl_ms": 1000, "wait_ms": 0})
        check(r2["outcome"] == "error", f"a second open section was accepted: {r2}")
        r = d.leave(rid)
        check(r["outcome"] == "ok", f"section after garbage: {r}")
        check(not d.bad_lines, f"non-JSON on stdout: {d.bad_lines[:3]}")
        # bye: reply ok, exit 0
        bye = d.request({"op": "bye"})
        check(bye["outcome"] == "ok", f"bye: {bye}")
        rc = d.p.wait(timeout=10)
        check(rc == 0, f"exit {rc} after bye")
        # EOF: exit 0 too
        e, _ = self.spawn()
        e.p.stdin.close()
        rc = e.p.wait(timeout=10)
        check(rc == 0, f"exit {rc} on EOF")
        check(not e.bad_lines, f"non-JSON on stdout: {e.bad_lines[:3]}")
        return "ok; bye 0, EOF 0"

    def run(self):
        self.step("hello", self.t_hello)
        if "hello" in self.cells and self.cells["hello"] == "FAIL":
            return
        for name, fn in (("section", self.t_section), ("unix", self.t_unix), ("held lag", self.t_held_lag), ("holders", self.t_holders), ("contend", self.t_contend), ("expiry", self.t_expiry),
                         ("vanish", self.t_vanish), ("tap", self.t_tap), ("pause", self.t_pause), ("refuse+ops", self.t_refuse), ("garbage/bye", self.t_garbage)):
            self.step(name, fn)
        for d in self.procs:
            if d.p.poll() is None:
                os.killpg(d.p.pid, signal.SIGKILL)
                d.p.wait()


# What each library does, read from its source (and checked here): (A's release outcome, B held
# while A was still inside, whose key is left after A's release).
EXPECT_EXPIRY = {
    "redis-py": ("not_owned", True, "B's key kept"),
    "python-redis-lock": ("not_owned", True, "B's key kept"),
    "python-redis-lock-renew": ("ok", False, "no key"),
    "pottery": ("not_owned", True, "B's key kept"),
    "redlock5": ("ok", False, "no key"),
    "redlock4": ("not_owned", True, "B's key kept"),
    "redis-semaphore": ("ok", False, "no key"),
    # its release sends DEL only before its own deadline (Date.now() at acquire + TTL + 1): past
    # it, nothing is sent, so B's key survives this one.
    "redis-lock": ("ok", True, "B's key kept"),
}
# (A's release outcome, B's key after A's release, a lost event while held).
EXPECT_VANISH = {
    "redis-py": ("not_owned", "B's key kept", False),
    "python-redis-lock": ("not_owned", "B's key kept", False),
    "python-redis-lock-renew": ("not_owned", "B's key kept", True),
    "pottery": ("not_owned", "B's key kept", False),
    "redlock5": ("not_owned", "B's key kept", True),
    "redlock4": ("not_owned", "B's key kept", False),
    "redis-semaphore": ("lost", "B's key kept", True),
    "redis-lock": ("ok", "B's key GONE", False),  # the negative control: a plain DEL
}


def _catch(errors, fn, *a):
    try:
        fn(*a)
    except Exception as e:  # noqa: BLE001
        errors.append(f"{type(e).__name__}: {e}")


def _sleep_until(t_ns):
    d = (t_ns - mono()) / 1e9
    if d > 0:
        time.sleep(d)


def table(rows, cols):
    head = ["driver"] + cols
    body = [[r.lib] + [str(r.cells.get(c, "-")) for c in cols] for r in rows]
    w = [max(len(x[i]) for x in [head] + body) for i in range(len(head))]
    line = lambda cells: "| " + " | ".join(c.ljust(w[i]) for i, c in enumerate(cells)) + " |"
    out = [line(head), "|" + "|".join("-" * (x + 2) for x in w) + "|"]
    out += [line(b) for b in body]
    return "\n".join(out)


def main():
    libs = sys.argv[1:] or DRIVERS
    for l in libs:
        if l not in DRIVERS:
            sys.exit(f"conformance: no driver {l!r} (drivers: {' '.join(DRIVERS)})")
    subprocess.run(["bash", os.path.join(ROOT, "scripts/drivers.sh")], check=True, stdout=subprocess.DEVNULL)
    # SIGTERM unwinds like Ctrl-C, so the servers are stopped (the finally below).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    servers = Servers(3)
    rows = []
    try:
        for lib in libs:
            t = time.time()
            r = Run(lib, servers)
            try:
                r.run()
            finally:
                for d in r.procs:
                    if d.p.poll() is None:
                        os.killpg(d.p.pid, signal.SIGKILL)
                        d.p.wait()
            rows.append(r)
            print(f"conformance: {lib} done in {time.time() - t:.1f}s", file=sys.stderr)
    finally:
        servers.stop()
    cols = ["hello", "section", "unix", "held lag", "holders", "contend", "expiry", "vanish", "tap", "pause", "refuse+ops", "garbage/bye"]
    print(table(rows, cols))
    print()
    print("What the libraries said:")
    for r in rows:
        for n in r.notes:
            print(f"  {n}")
    failures = [f for r in rows for f in r.failures]
    if failures:
        print()
        print(f"{len(failures)} failed check(s):")
        for f in failures:
            print(f"  FAIL {f}")
        return 1
    print()
    print(f"all checks passed ({len(rows)} drivers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
