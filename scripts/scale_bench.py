#!/usr/bin/env python3
"""The measuring half of scripts/scale-bench.sh (issue 43): runs lockbench with many holders of a
lock library and watches its process tree through /proc while it runs.

For each run it reports:
  start-up   the seconds lockbench says its holders took to start (its line "N holders started
             in X s"), and the wall time from launch to that line;
  peak RSS   the largest sum of VmRSS over lockbench and every process below it (drivers,
             the private redis-server), sampled every 100 ms;
  CPU        over the measured phase only (from 1 s after the start-up line to 1 s before the
             planned end, so neither start-up nor goodbye counts): lockbench's own CPU (its
             utime+stime, every thread) against the drivers' (the same, summed over every
             process whose command line runs drivers/python/driver.py or drivers/node/driver.js),
             and each per lock cycle (one acquire attempt: the run's attempts scaled to the
             window).
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

TICK = os.sysconf("SC_CLK_TCK")
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


def children_map():
    """parent pid -> child pids, for every process."""
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(d))
    return kids


def tree(root):
    kids, out, todo = children_map(), [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def cpu_s(pid):
    """utime + stime of the process (all its threads), seconds."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK
    except (OSError, IndexError):
        return None


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE_KB
    except OSError:
        return 0


def is_driver(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().decode(errors="replace")
    except OSError:
        return False
    return "drivers/python/driver.py" in cmd or "drivers/node/driver.js" in cmd


# How the holders' deletes are watched, by the name WATCHES gives it: the environment it runs in.
WATCH_ENVS = {
    "tap": {},  # the drivers' taps, lockbench's default for driver processes
    "unix": {"LOCKBENCH_WATCH": "wire", "LOCKBENCH_WATCH_SOCKET": "unix"},  # on the wire, Unix sockets
    "tcp": {"LOCKBENCH_WATCH": "wire", "LOCKBENCH_WATCH_SOCKET": "tcp"},  # on the wire, loopback TCP
    "off": {"LOCKBENCH_WATCH": "off"},  # not watched: the timeline
}


def run(lockbench, lib, holders, per_process, duration_s, keys, watch="tap"):
    out = tempfile.mkdtemp(prefix="scale-bench-")
    argv = [lockbench, "run", "--backend", "spawn", "--release", lib,
            "--workers", str(holders), "--keys", str(keys), "--duration", f"{duration_s}s",
            "--holders-per-process", str(per_process), "--out", f"{out}/run"]
    t0 = time.monotonic()
    env = {k: v for k, v in os.environ.items() if k not in ("LOCKBENCH_WATCH", "LOCKBENCH_WATCH_SOCKET")}
    env.update(WATCH_ENVS[watch])
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    started = {}
    err_lines = []

    def read_err():
        for line in p.stderr:
            err_lines.append(line)
            m = re.search(r"(\d+) holders started in ([\d.]+) s \((\d+) driver processes", line)
            if m and "at" not in started:
                started.update(at=time.monotonic(), said_s=float(m.group(2)), processes=int(m.group(3)))

    reader = threading.Thread(target=read_err, daemon=True)
    reader.start()
    peak_kb, window = 0, {}
    while p.poll() is None:
        pids = tree(p.pid)
        peak_kb = max(peak_kb, sum(rss_kb(x) for x in pids))
        if "at" in started:
            since = time.monotonic() - started["at"]
            mark = "a" if since >= 1.0 and "a" not in window else ("b" if since >= duration_s - 1.0 and "b" not in window and "a" in window else None)
            if mark:
                drivers = [x for x in pids if is_driver(x)]
                window[mark] = (time.monotonic(), cpu_s(p.pid) or 0.0, sum(cpu_s(x) or 0.0 for x in drivers), len(drivers))
        time.sleep(0.1)
    reader.join(timeout=5)
    if p.returncode != 0 or "at" not in started or set(window) != {"a", "b"}:
        sys.exit(f"lockbench {' '.join(argv[1:])} failed (exit {p.returncode}):\n{''.join(err_lines[-20:])}")
    with open(f"{out}/run/summary.json") as f:
        v = json.load(f)["variants"][0]
    # How the holders reached their watches, as lockbench says it ("off": no watch).
    reached = (v.get("watch") or {}).get("reached_by", "off")
    (ta, la, da, _), (tb, lb, db, n_drivers) = window["a"], window["b"]
    attempts = v["attempts"] * (tb - ta) / v["elapsed_s"]
    lock_cpu, driver_cpu = lb - la, db - da
    subprocess.run(["rm", "-rf", out])
    return {
        "lib": lib, "holders": holders, "per_process": per_process, "watch": reached,
        "processes": started["processes"], "drivers_seen": n_drivers,
        "startup_s": started["said_s"], "to_start_line_s": started["at"] - t0,
        "peak_rss_mb": peak_kb / 1024,
        "window_s": tb - ta, "attempts_per_s": attempts / (tb - ta),
        "lockbench_cpu_s": lock_cpu, "drivers_cpu_s": driver_cpu,
        "lockbench_us_per_cycle": lock_cpu / attempts * 1e6 if attempts else float("nan"),
        "drivers_us_per_cycle": driver_cpu / attempts * 1e6 if attempts else float("nan"),
        "lockbench_over_drivers": lock_cpu / driver_cpu if driver_cpu else float("nan"),
        "sections": v["sections"], "overlaps": v["overlap_incidents"], "errors": v["errors"],
    }


def main():
    lockbench = os.environ.get("LOCKBENCH", "target/release/lockbench")
    holders = int(os.environ.get("HOLDERS", "1000"))
    peer = int(os.environ.get("PEER_HOLDERS", "100"))
    shared = int(os.environ.get("SHARED", "100"))
    duration = int(os.environ.get("DURATION_S", "10"))
    libs = os.environ.get("LIBS", "redis-py redis-semaphore").split()
    # The shared runs once per way of watching the holders' deletes (WATCHES, of WATCH_ENVS):
    # what each costs, in the same invocation.
    watches = os.environ.get("WATCHES", "tap unix").split()
    unknown = [w for w in watches if w not in WATCH_ENVS]
    if unknown:
        sys.exit(f"WATCHES: {' '.join(unknown)} unknown; each is one of {', '.join(WATCH_ENVS)}")
    rounds = int(os.environ.get("ROUNDS", "1"))
    rows = []
    for lib in libs:
        plan = [(holders, shared, w) for _ in range(rounds) for w in watches] + [(peer, 1, watches[0])]
        for n, per, watch in plan:
            if n == 0:
                continue  # PEER_HOLDERS=0: the shared runs alone
            r = run(lockbench, lib, n, per, duration, keys=n, watch=watch)
            rows.append(r)
            print(json.dumps(r), file=sys.stderr, flush=True)
    print(f"{'library':<16} {'watch':<12} {'holders':>7} {'per proc':>8} {'procs':>5} {'start-up s':>10} {'peak RSS MB':>11} "
          f"{'cycles/s':>9} {'lb µs/cycle':>11} {'drv µs/cycle':>12} {'lb/drivers':>10}")
    for r in rows:
        print(f"{r['lib']:<16} {r['watch']:<12} {r['holders']:>7} {r['per_process']:>8} {r['processes']:>5} {r['startup_s']:>10.1f} "
              f"{r['peak_rss_mb']:>11.0f} {r['attempts_per_s']:>9.0f} {r['lockbench_us_per_cycle']:>11.1f} "
              f"{r['drivers_us_per_cycle']:>12.1f} {r['lockbench_over_drivers']:>10.1%}")


if __name__ == "__main__":
    main()
