#!/usr/bin/env bash
# scripts/scale-bench.sh: a thousand holders of a real library (issue 43).
#
# WHAT IS MEASURED
#   For redis-py (Python) and redis-semaphore (Node): HOLDERS holders (1,000) sharing driver
#   processes (SHARED to a process, 100: lockbench's default without holder faults) against today's
#   one process per holder, in the same invocation, on a private redis-server, each holder on a
#   key of its own for DURATION_S seconds:
#     start-up      what lockbench says its holders took to start ("N holders started in X s")
#     peak RSS      the largest sum of VmRSS over lockbench's process tree (drivers, server)
#     CPU           over the measured phase only: lockbench's own CPU per lock cycle (one
#                   acquire attempt) against the drivers' — the library should be the
#                   bottleneck, not the harness
#   The per-process peer runs PEER_HOLDERS (100) holders: 1,000 processes would not fit this
#   machine (redis-py 33 MB, Node 62 MB each: 33 and 62 GB), and its figures per holder are
#   what matter. Targets: 1,000 shared holders started in < 10 s, in < 2 GiB, lockbench's CPU
#   < 10 % of the drivers'.
#
#   The shared runs go once per way the holders' deletes are watched (WATCHES, default
#   "tap unix"): tap — each driver process taps its holders' own connections, lockbench's
#   default; unix — on the wire, a forwarder per holder connection on a Unix socket
#   (LOCKBENCH_WATCH=wire); tcp — the same on loopback TCP; off — not watched
#   (LOCKBENCH_WATCH=off). ROUNDS (1) repeats them, interleaved; the `watch` column says
#   what lockbench reported.
#
#   LOCKBENCH names the binary (default: target/release/lockbench, built when missing). A
#   debug binary measures lockbench's CPU several times too high: say so with its figures.
#
# Usage: bash scripts/scale-bench.sh   (env: HOLDERS PEER_HOLDERS SHARED DURATION_S LIBS WATCHES ROUNDS LOCKBENCH)
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z ${LOCKBENCH:-} ]]; then
    LOCKBENCH=${CARGO_TARGET_DIR:-target}/release/lockbench
    [[ -x $LOCKBENCH ]] || cargo build --release >&2
fi
export LOCKBENCH
bash scripts/drivers.sh >/dev/null
exec python3 scripts/scale_bench.py
