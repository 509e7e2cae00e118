#!/usr/bin/env bash
# scripts/bench.sh: a first benchmark (issue 2).
#
# WHAT IS MEASURED
#   The raw command throughput of lockbench's lock cycle: one acquire
#   `SET key tok NX PX 10000` and one token release
#   `EVALSHA <release-sha> 1 key tok` (the compare-and-delete script RELEASE_LUA of
#   src/store/mod.rs), with zero-length critical sections and no think time, so the
#   worker loop, the client library and Redis are all that is timed. One "cycle" is
#   one of each command (for lockbench: one section, `throughput_per_s`).
#
#   Next to it, in the same invocation and against the same private redis-server,
#   redis-benchmark sends the same two commands at the same concurrency C. It runs one
#   command per run, so each command is timed separately and the peer's cycle rate is
#       peer cycles/s = 1 / (1/rps_SET + 1/rps_EVALSHA)
#   (the time to do one SET plus the time to do one EVALSHA).
#
# WHY A RATIO
#   The machine is small (2 cores) and shared, so absolute numbers move by tens of
#   percent with whatever else runs. Both programs are hit by the same noise when they
#   run close together, so the figure to read is lockbench / redis-benchmark: how close
#   lockbench gets to what this Redis, on this machine, at this moment, can do with
#   the same commands. A ratio near 1 means lockbench adds little; the absolute rates
#   are printed only for context. To limit noise further the runs are interleaved
#   (lockbench, peer, lockbench, peer, ..., order alternated every round so neither
#   side always goes first) for ROUNDS rounds and the median of each side is reported.
#
# THE TWO CONNECTION MODES AND THEIR PEERS
#   per-worker  lockbench: C workers, one socket each.
#               peer: `redis-benchmark -c C` (C sockets, no pipelining): the same shape,
#               C independent clients each with one command in flight.
#   shared      lockbench: C workers on ONE multiplexed socket (redis-rs
#               MultiplexedConnection), so up to C commands are in flight on it.
#               peer: `redis-benchmark -c 1 -P C`: one socket carrying batches of C
#               pipelined commands. This is the fairest redis-benchmark shape for a
#               single multiplexed connection: same socket count, same maximum depth.
#               It is an upper bound, not a twin: redis-benchmark sends C commands,
#               waits for all C replies and repeats (lock-step batches, one write and
#               one read per batch), whereas the multiplexer streams whatever the workers
#               have ready, and a lockbench worker cannot send its EVALSHA before its SET
#               reply came back. `-c C` (no pipelining) would instead compare against C
#               sockets, which measures a different thing (socket count, not client
#               overhead), so it is not used.
#
# KEYS AND CONTENTION
#   keys = C by default (-k / BENCH_KEYS to change), on both sides (lockbench --keys;
#   redis-benchmark -r with __rand_int__). The intent is little contention, so that
#   the figure is pure command throughput. Caveat: lockbench picks a key uniformly at
#   random per attempt (it does not pin worker i to key i), so with keys = C an attempt
#   often finds its key held by another worker (about 30 % of attempts at C = 50 on
#   the first runs); it then counts a rejection (--busy fail-fast: one SET, no
#   EVALSHA, no section). The table therefore also reports lockbench's rejection
#   share and a command-based rate, lockbench cmd-cycles/s = (SETs + EVALSHAs) / 2 /
#   elapsed, with its own ratio: that one compares commands with commands whatever
#   the contention. Likewise in the peer's runs most SET NX find the key already set
#   and most EVALSHA find it already gone (cheap paths); at these rates the cost is
#   dominated by the socket round trip, not by the command body.
#
# KEYS WRITTEN
#   redis-benchmark writes only lockbench:bench:<12 digits>; lockbench writes its own
#   run-id namespace lockbench:<run-id>:token:<k> and deletes it when a run ends. The
#   script deletes lockbench:bench:* after every peer run and at exit; the server is
#   private (own loopback port, own temp --dir, no persistence) and is stopped at exit.
#
# USAGE
#   scripts/bench.sh [-c C] [-d SECONDS] [-r ROUNDS] [-k KEYS] [--no-build]
#   Environment: BENCH_CONCURRENCY (50), BENCH_DURATION (5, seconds per run, each
#   redis-benchmark command is sized to run about that long), BENCH_ROUNDS (3, >= 2),
#   BENCH_KEYS (default C; e.g. 100*C makes lockbench's rejections negligible).
#   Prints the table and writes it as CSV to results/bench-<UTC timestamp>.csv.

set -euo pipefail

CONCURRENCY="${BENCH_CONCURRENCY:-50}"
DURATION="${BENCH_DURATION:-5}"
ROUNDS="${BENCH_ROUNDS:-3}"
KEYS="${BENCH_KEYS:-}"
BUILD=1

usage() {
    sed -n '/^# USAGE/,/^# *Prints/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

die() {
    echo "bench.sh: $*" >&2
    exit 1
}

while (($# > 0)); do
    case "$1" in
    -c | --concurrency)
        (($# >= 2)) || die "$1 needs a value"
        CONCURRENCY="$2"
        shift 2
        ;;
    -d | --duration)
        (($# >= 2)) || die "$1 needs a value"
        DURATION="$2"
        shift 2
        ;;
    -k | --keys)
        (($# >= 2)) || die "$1 needs a value"
        KEYS="$2"
        shift 2
        ;;
    -r | --rounds)
        (($# >= 2)) || die "$1 needs a value"
        ROUNDS="$2"
        shift 2
        ;;
    --no-build)
        BUILD=0
        shift
        ;;
    -h | --help)
        usage
        exit 0
        ;;
    *) die "unknown argument: $1 (try --help)" ;;
    esac
done

[[ "$CONCURRENCY" =~ ^[1-9][0-9]*$ ]] || die "concurrency must be a positive integer, got '$CONCURRENCY'"
[[ "$DURATION" =~ ^[1-9][0-9]*$ ]] || die "duration must be whole seconds > 0, got '$DURATION'"
if ! [[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || ((ROUNDS < 2)); then
    die "rounds must be an integer >= 2, got '$ROUNDS'"
fi

for tool in redis-server redis-cli redis-benchmark python3 cargo; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool is not installed"
done

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"
cd -- "$ROOT"
LOCKBENCH="${CARGO_TARGET_DIR:-$ROOT/target}/release/lockbench"
KEYS="${KEYS:-$CONCURRENCY}"
[[ "$KEYS" =~ ^[1-9][0-9]*$ ]] || die "keys must be a positive integer, got '$KEYS'"
KEY_PATTERN='lockbench:bench:__rand_int__'

# --- build --------------------------------------------------------------------------
if ((BUILD)); then
    echo "building: cargo build --release" >&2
    cargo build --release --quiet
fi
[[ -x "$LOCKBENCH" ]] || die "$LOCKBENCH not found (build it, or drop --no-build)"

# --- private redis-server -----------------------------------------------------------
WORK="$(mktemp -d "${TMPDIR:-/tmp}/lockbench-bench.XXXXXX")"
REDIS_PID=""
PORT=""

rcli() {
    redis-cli -h 127.0.0.1 -p "$PORT" "$@"
}

cleanup_bench_keys() {
    # Only the peer's namespace; lockbench removes its own run keys itself.
    rcli --scan --pattern 'lockbench:bench:*' | xargs -r -n 200 redis-cli -h 127.0.0.1 -p "$PORT" DEL >/dev/null
}

on_exit() {
    local rc=$?
    trap - EXIT INT TERM
    if [[ -n "$REDIS_PID" ]] && kill -0 "$REDIS_PID" 2>/dev/null; then
        cleanup_bench_keys 2>/dev/null || true
        kill "$REDIS_PID" 2>/dev/null || true
        wait "$REDIS_PID" 2>/dev/null || true
    fi
    rm -rf -- "$WORK"
    exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() {
    python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}

start_redis() {
    mkdir -p -- "$WORK/redis"
    local attempt i
    # A port picked by binding port 0 can be taken again before redis-server binds it;
    # retry a few times with a fresh one.
    for attempt in 1 2 3; do
        PORT="$(free_port)"
        redis-server --bind 127.0.0.1 --port "$PORT" --save '' --appendonly no \
            --dir "$WORK/redis" --logfile "$WORK/redis/redis.log" --daemonize no &
        REDIS_PID=$!
        for ((i = 0; i < 100; i++)); do # up to ~10 s
            if ! kill -0 "$REDIS_PID" 2>/dev/null; then
                break
            fi
            if [[ "$(rcli ping 2>/dev/null || true)" == PONG ]]; then
                return 0
            fi
            sleep 0.1
        done
        kill "$REDIS_PID" 2>/dev/null || true
        wait "$REDIS_PID" 2>/dev/null || true
        REDIS_PID=""
        echo "redis-server did not come up on port $PORT (attempt $attempt)" >&2
    done
    [[ -f "$WORK/redis/redis.log" ]] && tail -n 20 "$WORK/redis/redis.log" >&2
    die "could not start redis-server"
}

start_redis
SERVER_VERSION="$(rcli info server | tr -d '\r' | sed -n 's/^redis_version://p')"
echo "redis-server $SERVER_VERSION on 127.0.0.1:$PORT (pid $REDIS_PID, dir $WORK/redis)" >&2

# The release script, exactly as lockbench sends it: RELEASE_LUA from src/store/mod.rs
# (Rust string with `\` line continuations, which drop the newline and leading blanks).
RELEASE_LUA="$(python3 - src/store/mod.rs <<'PY'
import re, sys
src = open(sys.argv[1], encoding="utf-8").read()
m = re.search(r'pub const RELEASE_LUA: &str = "((?:[^"\\]|\\.)*)";', src, re.S)
if not m:
    sys.exit("RELEASE_LUA not found in " + sys.argv[1])
body = re.sub(r'\\\n\s*', '', m.group(1))
if '\\' in body:
    sys.exit("RELEASE_LUA has escapes this script does not decode")
sys.stdout.write(body)
PY
)"
SHA="$(rcli script load "$RELEASE_LUA" | tr -d '\r')"
EXPECTED_SHA="$(printf '%s' "$RELEASE_LUA" | python3 -c 'import hashlib,sys; print(hashlib.sha1(sys.stdin.buffer.read()).hexdigest())')"
[[ "$SHA" == "$EXPECTED_SHA" ]] || die "SCRIPT LOAD returned '$SHA', expected $EXPECTED_SHA"

SET_CMD=(SET "$KEY_PATTERN" tok NX PX 10000)
EVALSHA_CMD=(EVALSHA "$SHA" 1 "$KEY_PATTERN" tok)

# --- one lockbench run --------------------------------------------------------------
# Appends "mode<TAB>round<TAB>lockbench<TAB>sections/s<TAB>cmd-cycles/s<TAB>rejection%"
# to $WORK/samples.tsv.
run_lockbench() {
    local mode="$1" round="$2" out="$WORK/lb-$1-$2"
    local -a cmd=("$LOCKBENCH" run --redis "redis://127.0.0.1:$PORT"
        --workers "$CONCURRENCY" --keys "$KEYS" --ttl 10s --dist 'constant(0ms)'
        --think 'constant(0ms)' --busy fail-fast --release token
        --connection "$mode" --duration "${DURATION}s" --quiet --out "$out")
    if ! "${cmd[@]}" >"$WORK/lb.log" 2>&1; then
        cat "$WORK/lb.log" >&2
        die "lockbench failed: ${cmd[*]}"
    fi
    python3 - "$out/summary.json" "$mode" "$round" >>"$WORK/samples.tsv" <<'PY'
import json, sys
path, mode, rnd = sys.argv[1:4]
v = json.load(open(path))["variants"][0]
if v["errors"] != 0:
    sys.exit(f"lockbench {mode} round {rnd}: {v['errors']} errors {v.get('errors_by_kind')} "
             f"{v.get('first_errors')}")
if v["sections"] == 0 or v["elapsed_s"] <= 0:
    sys.exit(f"lockbench {mode} round {rnd}: no sections")
# Commands actually sent: one SET per attempt, one EVALSHA per section.
cmd_cycles = (v["attempts"] + v["sections"]) / 2 / v["elapsed_s"]
rej = 100.0 * v["rejections"] / v["attempts"] if v["attempts"] else 0.0
print(f"{mode}\t{rnd}\tlockbench\t{v['throughput_per_s']:.1f}\t{cmd_cycles:.1f}\t{rej:.2f}")
PY
    rm -rf -- "$out"
}

# --- one redis-benchmark command ----------------------------------------------------
# bench_rps MODE N CMD... -> prints the requests per second.
bench_rps() {
    local mode="$1" n="$2"
    shift 2
    local -a shape
    if [[ "$mode" == shared ]]; then
        shape=(-c 1 -P "$CONCURRENCY")
    else
        shape=(-c "$CONCURRENCY")
    fi
    local csv
    if ! csv="$(redis-benchmark -h 127.0.0.1 -p "$PORT" "${shape[@]}" -n "$n" \
        -r "$KEYS" --csv "$@" 2>"$WORK/rb.err")"; then
        cat "$WORK/rb.err" >&2
        die "redis-benchmark failed: ${shape[*]} -n $n $*"
    fi
    printf '%s\n' "$csv" | python3 -c '
import csv, sys
rows = [r for r in csv.DictReader(sys.stdin) if r.get("rps")]
if len(rows) != 1 or float(rows[0]["rps"]) <= 0:
    sys.exit("cannot parse redis-benchmark output")
print(rows[0]["rps"])'
}

# Requests per run so that each command runs about DURATION seconds, from a short
# calibration run; a multiple of C so every client (or every batch) is full.
declare -A N_FOR
size_for() { # RPS SECONDS -> request count, a multiple of C, at least 100 per client
    python3 -c 'import sys
rps, secs, c = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
n = max(int(rps * secs), c * 100)
print((n + c - 1) // c * c)' "$1" "$2" "$CONCURRENCY"
}
calibrate() {
    local mode="$1" which="$2" rps n
    local -a cmdline
    if [[ "$which" == set ]]; then cmdline=("${SET_CMD[@]}"); else cmdline=("${EVALSHA_CMD[@]}"); fi
    # Two steps: a tiny run gives a rough rate, a ~0.5 s run sized from it the real one
    # (a pipelined run of the tiny size is over in milliseconds, too short to trust).
    n=$((CONCURRENCY * 200))
    for _ in 1 2; do
        rps="$(bench_rps "$mode" "$n" "${cmdline[@]}")"
        cleanup_bench_keys
        n="$(size_for "$rps" 0.5)"
    done
    N_FOR["$mode-$which"]="$(size_for "$rps" "$DURATION")"
}

run_peer() {
    local mode="$1" round="$2" rps_set rps_eval
    rps_set="$(bench_rps "$mode" "${N_FOR[$mode-set]}" "${SET_CMD[@]}")"
    rps_eval="$(bench_rps "$mode" "${N_FOR[$mode-evalsha]}" "${EVALSHA_CMD[@]}")"
    cleanup_bench_keys
    python3 -c 'import sys
mode, rnd, s, e = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
cyc = 1 / (1 / s + 1 / e)
print(f"{mode}\t{rnd}\tpeer\t{cyc:.1f}\t{s:.1f}\t{e:.1f}")' \
        "$mode" "$round" "$rps_set" "$rps_eval" >>"$WORK/samples.tsv"
}

MODES=(per-worker shared)
: >"$WORK/samples.tsv"

echo "calibrating redis-benchmark run sizes (~${DURATION}s per command)..." >&2
for mode in "${MODES[@]}"; do
    calibrate "$mode" set
    calibrate "$mode" evalsha
    echo "  $mode: SET n=${N_FOR[$mode-set]}, EVALSHA n=${N_FOR[$mode-evalsha]}" >&2
done

echo "C=$CONCURRENCY clients, keys=$KEYS, ${DURATION}s per run, $ROUNDS rounds, interleaved" >&2
for ((round = 1; round <= ROUNDS; round++)); do
    for mode in "${MODES[@]}"; do
        echo "  round $round/$ROUNDS $mode" >&2
        if ((round % 2)); then
            run_lockbench "$mode" "$round"
            run_peer "$mode" "$round"
        else
            run_peer "$mode" "$round"
            run_lockbench "$mode" "$round"
        fi
    done
done
cleanup_bench_keys
LEFT="$(rcli dbsize | tr -d '\r')"
[[ "$LEFT" == 0 ]] || echo "warning: $LEFT keys left on the private server" >&2

# --- report -------------------------------------------------------------------------
mkdir -p -- results
STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
CSV_OUT="results/bench-$STAMP.csv"
python3 - "$WORK/samples.tsv" "$CSV_OUT" "$CONCURRENCY" "$KEYS" "$DURATION" "$ROUNDS" \
    "$SERVER_VERSION" <<'PY'
import csv, sys
from statistics import median

tsv, out, conc, keys, dur, rounds, version = sys.argv[1:8]
lb, peer = {}, {}
for line in open(tsv):
    mode, rnd, who, a, b, c = line.rstrip("\n").split("\t")
    (lb if who == "lockbench" else peer).setdefault(mode, {})[int(rnd)] = (
        float(a), float(b), float(c))

shapes = {"per-worker": f"-c {conc}", "shared": f"-c 1 -P {conc}"}
rows = []
for mode in ("per-worker", "shared"):
    l, p = lb[mode], peer[mode]
    paired = sorted(l[r][0] / p[r][0] for r in l)
    lb_cyc = median(x[0] for x in l.values())
    lb_cmd = median(x[1] for x in l.values())
    pe_cyc = median(x[0] for x in p.values())
    rows.append({
        "mode": mode,
        "concurrency": conc,
        "keys": keys,
        "duration_s": dur,
        "rounds": rounds,
        "redis_version": version,
        "peer_shape": shapes[mode],
        "lockbench_cycles_per_s": round(lb_cyc, 1),
        "peer_cycles_per_s": round(pe_cyc, 1),
        "ratio": round(lb_cyc / pe_cyc, 4),
        "ratio_min": round(paired[0], 4),
        "ratio_max": round(paired[-1], 4),
        "lockbench_rejection_pct": round(median(x[2] for x in l.values()), 2),
        "lockbench_cmd_cycles_per_s": round(lb_cmd, 1),
        "cmd_ratio": round(lb_cmd / pe_cyc, 4),
        "peer_set_rps": round(median(x[1] for x in p.values()), 1),
        "peer_evalsha_rps": round(median(x[2] for x in p.values()), 1),
    })

with open(out, "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)

print(f"\nlockbench vs redis-benchmark: SET NX PX + EVALSHA release, zero-length sections, "
      f"C={conc}, keys={keys}, {dur}s runs, median of {rounds} interleaved rounds, "
      f"Redis {version}")
hdr = ("mode", "lockbench cyc/s", "redis-bench cyc/s", "ratio lb/peer",
       "paired range", "lb rejected", "lb cmd-cyc/s", "cmd ratio", "peer shape")
fmt = "{:<11} {:>15} {:>17} {:>13} {:>13} {:>11} {:>12} {:>9}  {}"
print(fmt.format(*hdr))
for r in rows:
    print(fmt.format(
        r["mode"], f"{r['lockbench_cycles_per_s']:,.0f}", f"{r['peer_cycles_per_s']:,.0f}",
        f"{r['ratio']:.3f}", f"{r['ratio_min']:.2f}-{r['ratio_max']:.2f}",
        f"{r['lockbench_rejection_pct']:.1f}%", f"{r['lockbench_cmd_cycles_per_s']:,.0f}",
        f"{r['cmd_ratio']:.3f}", r["peer_shape"]))
print("\ncycle = 1 SET + 1 EVALSHA; peer cycles/s = 1/(1/SET rps + 1/EVALSHA rps); "
      "lb cmd-cyc/s = (SETs + EVALSHAs)/2/s, counts rejected attempts too.")
PY
echo "csv: $CSV_OUT"
