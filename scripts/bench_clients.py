#!/usr/bin/env python3
"""scripts/bench.sh --client NAME: what driving a lock library costs (issue 33).

WHAT IS MEASURED
  Lock cycles per second (`throughput_per_s`: sections completed per second) of a lock
  library driven through its driver process (`--release NAME`: one process per worker,
  JSON lines over a pipe) beside lockbench's built-in `token` method, with the same
  workload on the same private redis-server, in the same invocation. A cycle is one
  acquisition, one section of the drawn length and one release.

  Each section length is measured on its own: 0 ms (the pipe and the library are all
  there is: the ceiling), 1 ms and 10 ms. `lib/token` is the median of the paired
  per-round ratios (the runs alternate: token first in odd rounds, the library first in
  even ones), so the noise of this 2-core machine hits both sides alike. The driver is
  not the bottleneck at a section length where `lib/token` is near 1: the cycle is then
  the section's, not the pipe's.

  Keys = workers x 100, so contention is negligible and a cycle is not a wait for
  another holder's lock.

  --watch both: the library also runs with its holders' watches off (LOCKBENCH_WATCH=off,
  an environment variable for this measurement only: the driver then connects to the
  server directly and wrongful deletes come from the timeline), in the same rounds; the
  rows then add its cycles/s, its lib/token, and `watch on/off` (the median of the paired
  per-round ratios): what the watch between each holder and the server costs.

USAGE
  scripts/bench.sh --client NAME [--client NAME]... [-c WORKERS] [-d SECONDS] [-r ROUNDS]
                   [--watch on|off|both] [--no-build]
  Defaults: 8 workers, 3 s a run, 3 rounds. Prints the table and writes it as CSV to
  results/bench-clients-<UTC timestamp>.csv. Exit codes: 0 done, 1 a run failed, 2 bad
  arguments.
"""

import argparse
import csv
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

SECTIONS_MS = [0, 1, 10]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(work: str):
    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", work],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2) as c:
                c.sendall(b"PING\r\n")
                if c.recv(16).startswith(b"+PONG"):
                    return proc, port
        except OSError:
            pass
        if proc.poll() is not None:
            break
        time.sleep(0.05)  # a readiness poll of a child process, not synchronisation
    proc.kill()
    sys.exit("bench.sh: redis-server did not start")


def run(lockbench, url, release, workers, section_ms, seconds, out, watch="on"):
    cmd = [lockbench, "run", "--redis", url, "--release", release, "--workers", str(workers),
           "--keys", str(workers * 100), "--ttl", "10s", "--dist", f"constant({section_ms}ms)",
           "--duration", f"{seconds}s", "--seed", "1", "--quiet", "--out", out]
    env = dict(os.environ)
    env.pop("LOCKBENCH_WATCH", None)
    if watch == "off":
        env["LOCKBENCH_WATCH"] = "off"
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.stderr.write(p.stderr)
        sys.exit(f"bench.sh: {' '.join(cmd)} failed (exit {p.returncode})")
    with open(os.path.join(out, "summary.json")) as f:
        v = json.load(f)["variants"][0]
    return v["throughput_per_s"], v.get("library") or "lockbench"


def main():
    ap = argparse.ArgumentParser(prog="bench.sh --client", add_help=True)
    ap.add_argument("--client", action="append", required=True)
    ap.add_argument("-c", "--concurrency", type=int, default=8)
    ap.add_argument("-d", "--duration", type=int, default=3)
    ap.add_argument("-r", "--rounds", type=int, default=3)
    ap.add_argument("--watch", choices=["on", "off", "both"], default="on")
    ap.add_argument("--no-build", action="store_true")
    a = ap.parse_args()
    if a.concurrency < 1 or a.duration < 1 or a.rounds < 2:
        print("bench.sh: workers and seconds must be >= 1, rounds >= 2", file=sys.stderr)
        sys.exit(2)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(root, "target"))
    lockbench = os.path.join(target, "release", "lockbench")
    if not a.no_build:
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=root, check=True)
    if not os.access(lockbench, os.X_OK):
        sys.exit(f"bench.sh: {lockbench} not found (build it, or drop --no-build)")
    work = tempfile.mkdtemp(prefix="lockbench-bench-clients.")
    server, port = start_server(work)
    url = f"redis://127.0.0.1:{port}"
    rows = []
    try:
        for client in a.client:
            for ms in SECTIONS_MS:
                token, lib, ratios, library = [], [], [], ""
                off, off_ratios, on_off = [], [], []
                # (name in the results, release, watch): the library with its watches as
                # asked, and with them off too under --watch both.
                runs = [("token", "token", "on"),
                        (client, client, "off" if a.watch == "off" else "on")]
                if a.watch == "both":
                    runs.append(("off", client, "off"))
                for r in range(a.rounds):
                    order = runs[r % len(runs):] + runs[:r % len(runs)]
                    if r % 2:
                        order.reverse()
                    got = {}
                    for name, rel, watch in order:
                        out = os.path.join(work, f"{client}-{ms}-{r}-{name}")
                        got[name] = run(lockbench, url, rel, a.concurrency, ms, a.duration, out,
                                        watch)
                        shutil.rmtree(out, ignore_errors=True)
                    token.append(got["token"][0])
                    lib.append(got[client][0])
                    library = got[client][1]
                    ratios.append(got[client][0] / got["token"][0])
                    if "off" in got:
                        off.append(got["off"][0])
                        off_ratios.append(got["off"][0] / got["token"][0])
                        on_off.append(got[client][0] / got["off"][0])
                row = {
                    "client": client, "library": library, "section_ms": ms,
                    "workers": a.concurrency, "rounds": a.rounds, "seconds": a.duration,
                    "watch": a.watch,
                    "token_cycles_per_s": round(statistics.median(token), 1),
                    "client_cycles_per_s": round(statistics.median(lib), 1),
                    "client_over_token": round(statistics.median(ratios), 3),
                    "ratio_min": round(min(ratios), 3), "ratio_max": round(max(ratios), 3),
                }
                if off:
                    row.update({
                        "watch_off_cycles_per_s": round(statistics.median(off), 1),
                        "watch_off_over_token": round(statistics.median(off_ratios), 3),
                        "watch_on_over_off": round(statistics.median(on_off), 3),
                        "on_off_min": round(min(on_off), 3),
                        "on_off_max": round(max(on_off), 3),
                    })
                rows.append(row)
                print(f"  {client} section {ms} ms: done", file=sys.stderr)
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nlock cycles/s, {a.concurrency} workers, {a.rounds} rounds of {a.duration} s, "
          "median (token vs the library through its driver, same server, alternated):")
    print(f"watch: {a.watch} (the library's holders through lockbench's watch; "
          "off: LOCKBENCH_WATCH=off)")
    both = a.watch == "both"
    print(f"{'client':<24}{'library':<22}{'section':>8}{'token/s':>11}{'client/s':>11}"
          f"{'lib/token':>11}  range" + (f"{'off/s':>11}{'off/token':>11}{'on/off':>9}  range"
                                         if both else ""))
    for r in rows:
        line = (f"{r['client']:<24}{r['library']:<22}{r['section_ms']:>6}ms"
                f"{r['token_cycles_per_s']:>11}{r['client_cycles_per_s']:>11}"
                f"{r['client_over_token']:>11}  {r['ratio_min']}-{r['ratio_max']}")
        if both:
            line += (f"{r['watch_off_cycles_per_s']:>11}{r['watch_off_over_token']:>11}"
                     f"{r['watch_on_over_off']:>9}  {r['on_off_min']}-{r['on_off_max']}")
        print(line)
    os.makedirs(os.path.join(root, "results"), exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = os.path.join(root, "results", f"bench-clients-{stamp}.csv")
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"\nwritten: {path}")


if __name__ == "__main__":
    main()
