#!/usr/bin/env bash
# scripts/bench.sh: a first benchmark (issue 2), per server (issue 17).
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
#   shared      lockbench: C workers on ONE pipelined socket (lockbench's own link,
#               src/store/pipe.rs), so up to C commands are in flight on it.
#               peer: `redis-benchmark -c 1 -P C`: one socket carrying batches of C
#               pipelined commands. This is the fairest redis-benchmark shape for a
#               single multiplexed connection: same socket count, same maximum depth.
#               Not a twin: redis-benchmark sends C commands, waits for all C replies
#               and repeats (lock-step batches, one write and one read per batch),
#               whereas lockbench's link writes as soon as 8 commands are queued (the
#               server starts on them while the client prepares the rest), and a
#               lockbench worker cannot send its EVALSHA before its SET reply came back. `-c C` (no pipelining) would instead compare against C
#               sockets, which measures a different thing (socket count, not client
#               overhead), so it is not used.
#
# THE BARE LOOP (issue 11)
#   A third row per mode, in the same rounds on the same server: examples/bare_loop.rs,
#   a bare loop doing exactly lockbench's cycle (per task: SET k tok NX PX 10000,
#   then EVALSHA of RELEASE_LUA; C tasks, key per task, so no contention; commands built
#   once; lockbench's default runtime against a server on this machine: one thread per core
#   but one, and one thread is the current-thread scheduler; lockbench's own link, as its runs
#   use: LOCKBENCH_BARE_LINK=redis-rs for redis-rs's multiplexed connection instead).
#   per-worker: one connection per task; shared: one for all tasks. It is
#   what "lockbench adds nothing" means: `lb/bare` = lockbench cyc/s / bare cyc/s (median
#   of the paired per-round ratios). Built with `cargo build --release --examples`.
#   Also printed: client CPU per cycle (user+system of the process, from wait4, over its
#   whole life, so lockbench's start-up and result writing count; per command-cycle, i.e.
#   (SETs + EVALSHAs)/2, for lockbench) and the server's busy share during lockbench's run
#   (redis-server CPU time from /proc/<pid>/stat / wall time of the lockbench process), and
#   the server's busy share at saturation during lockbench, the bare loop and redis-benchmark
#   alike: the median over 100 ms slices of each client's life of the server main thread's
#   time on a CPU (/proc/<pid>/schedstat) — the load itself, without a client's start-up or
#   lockbench's report writing. The issue's goal is >= 0.90: the server core is the limit.
#   The round order is lockbench, bare, peer in odd rounds and peer, bare, lockbench in
#   even ones.
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
# SEVERAL SERVERS (--redis-server, issue 17)
#   By default the harness runs against one private `redis-server` from PATH. Each
#   `--redis-server PATH` adds a server binary instead (redis-server, valkey-server, any
#   RESP server that takes `--port P --save '' --appendonly no`; `bash scripts/servers.sh
#   --paths` prints Valkey 8.1 and Redis 8.2). The script starts every one of them itself
#   (own loopback port, own temp --dir), names it from its `INFO server` (`valkey 8.1.8`
#   when valkey_version is there, else `redis <redis_version>`, as lockbench does) and
#   runs the same harness and the same peer against each: redis-benchmark speaks to any of
#   them. The servers are interleaved too: every round visits every server, starting one
#   further along the list each round, so a slow moment is shared rather than landing on
#   one server. Each row still has its own ratio against the peer on the same server; the
#   columns `lb vs 1st` and `peer vs 1st` are the medians over rounds of that round's rate
#   divided by the first server's rate in the same round: whether changing the server
#   moves the limit, for the peer (what the server can do) and for lockbench.
#   With --redis-server the table and CSV gain the server columns (the CSV has `server`
#   and `server_path` in place of `redis_version`); without it they are as they were.
#   Three servers at the default settings take about 5 minutes; --quick (2 s runs,
#   3 rounds) about 2.
#
# LIVE METRICS (--metrics, issue 34)
#   With --metrics every round also runs lockbench with `--metrics 127.0.0.1:PORT` while a
#   scraper fetches /metrics once a second (as Prometheus at a 1 s interval would), right
#   beside the plain lockbench run (plain first in odd rounds, served first in even ones).
#   A second table gives both cycle rates and `served/plain`, the median of the paired
#   per-round ratios: the cost of serving metrics (target: within 3 %).
#
# USAGE
#   scripts/bench.sh [-c C] [-d SECONDS] [-r ROUNDS] [-k KEYS] [--quick]
#                    [--redis-server PATH]... [--metrics] [--no-build]
#   scripts/bench.sh --client NAME [--client NAME]... [-c WORKERS] [-d S] [-r R]
#                    [--watch on|off|both] [--no-build]
#                    (a lock library through its driver beside `token`: scripts/bench_clients.py)
#   Environment: BENCH_CONCURRENCY (50), BENCH_DURATION (5, or 2 with --quick; seconds
#   per run, each redis-benchmark command is sized to run about that long),
#   BENCH_ROUNDS (3, >= 2), BENCH_KEYS (default C; e.g. 100*C makes lockbench's
#   rejections negligible). -d and -r win over --quick.
#   Exit codes: 0 done, 1 a run or a server failed, 2 bad arguments (or a --redis-server
#   binary that is missing or does not start as a RESP server).
#   Prints the table and writes it as CSV to results/bench-<UTC timestamp>.csv.

set -euo pipefail

# --client NAME: a lock library through its driver beside the built-in token method
# (issue 33); scripts/bench_clients.py says what it measures.
for arg in "$@"; do
    if [[ "$arg" == --client || "$arg" == --client=* ]]; then
        exec python3 "$(dirname -- "${BASH_SOURCE[0]}")/bench_clients.py" "$@"
    fi
done

CONCURRENCY="${BENCH_CONCURRENCY:-50}"
DURATION="${BENCH_DURATION:-}"
ROUNDS="${BENCH_ROUNDS:-}"
KEYS="${BENCH_KEYS:-}"
BUILD=1
QUICK=0
METRICS=0 # 1: also runs lockbench --metrics, scraped every second (--metrics)
SERVER_ARGS=() # --redis-server values, as given

usage() {
    sed -n '/^# USAGE/,/^# *Prints/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

die() {
    echo "bench.sh: $*" >&2
    exit 1
}

bad_input() { # exit 2, as lockbench does for bad input
    echo "bench.sh: $*" >&2
    exit 2
}

while (($# > 0)); do
    case "$1" in
    -c | --concurrency)
        (($# >= 2)) || bad_input "$1 needs a value"
        CONCURRENCY="$2"
        shift 2
        ;;
    -d | --duration)
        (($# >= 2)) || bad_input "$1 needs a value"
        DURATION="$2"
        shift 2
        ;;
    -k | --keys)
        (($# >= 2)) || bad_input "$1 needs a value"
        KEYS="$2"
        shift 2
        ;;
    -r | --rounds)
        (($# >= 2)) || bad_input "$1 needs a value"
        ROUNDS="$2"
        shift 2
        ;;
    --redis-server)
        (($# >= 2)) || bad_input "$1 needs a path (e.g. \$(bash scripts/servers.sh --paths))"
        SERVER_ARGS+=("$2")
        shift 2
        ;;
    --quick)
        QUICK=1
        shift
        ;;
    --no-build)
        BUILD=0
        shift
        ;;
    --metrics)
        METRICS=1
        shift
        ;;
    -h | --help)
        usage
        exit 0
        ;;
    *) bad_input "unknown argument: $1 (try --help)" ;;
    esac
done

if ((QUICK)); then
    DURATION="${DURATION:-2}"
else
    DURATION="${DURATION:-5}"
fi
ROUNDS="${ROUNDS:-3}"
[[ "$CONCURRENCY" =~ ^[1-9][0-9]*$ ]] || bad_input "concurrency must be a positive integer, got '$CONCURRENCY'"
[[ "$DURATION" =~ ^[1-9][0-9]*$ ]] || bad_input "duration must be whole seconds > 0, got '$DURATION'"
if ! [[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || ((ROUNDS < 2)); then
    bad_input "rounds must be an integer >= 2, got '$ROUNDS'"
fi

tools=(redis-cli redis-benchmark python3 timeout)
((${#SERVER_ARGS[@]})) || tools+=(redis-server)
((BUILD)) && tools+=(cargo)
for tool in "${tools[@]}"; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool is not installed"
done

# The server binaries, resolved to absolute paths, each once. Without --redis-server:
# redis-server from PATH, and the output keeps its single-server form (PER_SERVER=0).
SERVER_PATHS=()
SERVER_GIVEN=() # as the user wrote it, for messages
PER_SERVER=0
if ((${#SERVER_ARGS[@]})); then
    PER_SERVER=1
    for arg in "${SERVER_ARGS[@]}"; do
        path="$arg"
        if [[ "$path" != */* ]]; then # a bare name: look it up on PATH
            path="$(command -v -- "$path" 2>/dev/null || true)"
            [[ -n "$path" ]] ||
                bad_input "--redis-server $arg: not found on PATH (give the path of redis-server or valkey-server, e.g. from bash scripts/servers.sh --paths)"
        fi
        [[ -e "$path" ]] ||
            bad_input "--redis-server $arg: no such file (give the path of redis-server or valkey-server, e.g. from bash scripts/servers.sh --paths)"
        [[ -f "$path" && -x "$path" ]] ||
            bad_input "--redis-server $arg: not an executable file (give the path of redis-server or valkey-server)"
        # Absolute, symlinks kept: Debian's redis-server is a link to a multi-call binary
        # that picks its role from the name it was started by.
        path="$(realpath -s -- "$path")"
        dup=0
        for p in "${SERVER_PATHS[@]}"; do [[ "$p" == "$path" ]] && dup=1; done
        if ((!dup)); then
            SERVER_PATHS+=("$path")
            SERVER_GIVEN+=("$arg")
        fi
    done
else
    SERVER_PATHS=("$(command -v redis-server)")
fi
NSERVERS=${#SERVER_PATHS[@]}

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"
cd -- "$ROOT"
LOCKBENCH="${CARGO_TARGET_DIR:-$ROOT/target}/release/lockbench"
KEYS="${KEYS:-$CONCURRENCY}"
[[ "$KEYS" =~ ^[1-9][0-9]*$ ]] || bad_input "keys must be a positive integer, got '$KEYS'"
KEY_PATTERN='lockbench:bench:__rand_int__'

# --- build --------------------------------------------------------------------------
if ((BUILD)); then
    echo "building: cargo build --release && cargo build --release --examples" >&2
    cargo build --release --quiet
    cargo build --release --quiet --examples
fi
[[ -x "$LOCKBENCH" ]] || die "$LOCKBENCH not found (build it, or drop --no-build)"
BARE="${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/bare_loop"
[[ -x "$BARE" ]] || die "$BARE not found (cargo build --release --examples, or drop --no-build)"

# --- private servers ----------------------------------------------------------------
# Server s (0-based, in the order given) listens on PORTS[s], runs as PIDS[s] in
# $WORK/server-s, and is called LABELS[s] (`redis 7.0.15`, `valkey 8.1.8`).
WORK="$(mktemp -d "${TMPDIR:-/tmp}/lockbench-bench.XXXXXX")"
PORTS=()
PIDS=()
LABELS=()

rcli() { # PORT ARGS...
    local port="$1"
    shift
    redis-cli -h 127.0.0.1 -p "$port" "$@"
}

cleanup_bench_keys() { # PORT
    # Only the peer's namespace; lockbench removes its own run keys itself.
    rcli "$1" --scan --pattern 'lockbench:bench:*' | xargs -r -n 200 redis-cli -h 127.0.0.1 -p "$1" DEL >/dev/null
}

on_exit() {
    local rc=$? s
    trap - EXIT INT TERM
    for s in "${!PIDS[@]}"; do
        if [[ -n "${PIDS[s]}" ]] && kill -0 "${PIDS[s]}" 2>/dev/null; then
            cleanup_bench_keys "${PORTS[s]}" 2>/dev/null || true
            kill "${PIDS[s]}" 2>/dev/null || true
            wait "${PIDS[s]}" 2>/dev/null || true
        fi
    done
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

start_server() { # S: starts SERVER_PATHS[S], sets PORTS[S] and PIDS[S]
    local s="$1" exe="${SERVER_PATHS[$1]}" dir="$WORK/server-$1" attempt i port pid alive
    mkdir -p -- "$dir"
    # A port picked by binding port 0 can be taken again before the server binds it;
    # retry a few times with a fresh one (only when the server exited: one that runs but
    # never answers would not do better on another port).
    for attempt in 1 2 3; do
        port="$(free_port)"
        # Its output goes to a file, capped (a binary that ignores its arguments and
        # prints forever stops at the cap): one that is not a Redis server says why there.
        "$exe" --bind 127.0.0.1 --port "$port" --save '' --appendonly no \
            --dir "$dir" --logfile "$dir/server.log" --daemonize no \
            </dev/null > >(head -c 65536 >>"$dir/output.log") 2>&1 &
        pid=$!
        PORTS[s]="$port"
        PIDS[s]="$pid"
        alive=0
        for ((i = 0; i < 100; i++)); do # up to ~10 s
            alive=0
            kill -0 "$pid" 2>/dev/null || break
            alive=1
            # timeout: something that accepts connections but never answers is not ready.
            if [[ "$(timeout 2 redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null || true)" == PONG ]]; then
                return 0
            fi
            sleep 0.1
        done
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        PIDS[s]=""
        ((PER_SERVER)) || echo "redis-server did not come up on port $port (attempt $attempt)" >&2
        ((alive)) && break
    done
    # What it said: a Redis server's last log line, or else the first line it printed.
    local said
    said="$(grep -v '^[[:space:]]*$' "$dir/server.log" 2>/dev/null | tail -n 1 || true)"
    [[ -n "$said" ]] || said="$(grep -v '^[[:space:]]*$' "$dir/output.log" 2>/dev/null | head -n 1 || true)"
    if ((PER_SERVER)); then
        local why="exited before answering PING ($attempt tries)"
        ((alive)) && why="ran but did not answer PING on 127.0.0.1 within 10 s"
        bad_input "--redis-server ${SERVER_GIVEN[s]} did not start as a Redis server: $why${said:+; it said: $said}"
    fi
    [[ -f "$dir/server.log" ]] && tail -n 20 "$dir/server.log" >&2
    die "could not start redis-server"
}

# `valkey 8.1.8` or `redis 7.0.15` from INFO server, the rule of lockbench's
# parse_server_version (Valkey also reports a redis_version, the one it is compatible with).
server_label() { # PORT
    rcli "$1" info server | tr -d '\r' | awk -F: '
        $1 == "valkey_version" { v = $2 } $1 == "redis_version" { r = $2 }
        END { if (v != "") print "valkey " v; else if (r != "") print "redis " r; else print "unknown" }'
}

for ((s = 0; s < NSERVERS; s++)); do
    start_server "$s"
    LABELS[s]="$(server_label "${PORTS[s]}")"
done
# The single-server table's title names the server by its redis_version, as it always did.
SERVER_VERSION="$(rcli "${PORTS[0]}" info server | tr -d '\r' | sed -n 's/^redis_version://p')"
for ((s = 0; s < NSERVERS; s++)); do
    if ((PER_SERVER)); then
        echo "${LABELS[s]} (${SERVER_PATHS[s]}) on 127.0.0.1:${PORTS[s]} (pid ${PIDS[s]}, dir $WORK/server-$s)" >&2
    else
        echo "redis-server $SERVER_VERSION on 127.0.0.1:${PORTS[s]} (pid ${PIDS[s]}, dir $WORK/server-$s)" >&2
    fi
done

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
EXPECTED_SHA="$(printf '%s' "$RELEASE_LUA" | python3 -c 'import hashlib,sys; print(hashlib.sha1(sys.stdin.buffer.read()).hexdigest())')"
for ((s = 0; s < NSERVERS; s++)); do
    SHA="$(rcli "${PORTS[s]}" script load "$RELEASE_LUA" | tr -d '\r')"
    [[ "$SHA" == "$EXPECTED_SHA" ]] || die "${LABELS[s]}: SCRIPT LOAD returned '$SHA', expected $EXPECTED_SHA"
done

SET_CMD=(SET "$KEY_PATTERN" tok NX PX 10000)
EVALSHA_CMD=(EVALSHA "$EXPECTED_SHA" 1 "$KEY_PATTERN" tok)

# --- CPU accounting -----------------------------------------------------------------
# run_timed OUT SERVER_PID CMD...: runs CMD (stdout/stderr as given), writes
# "client_cpu_s wall_s server_cpu_s server_busy_steady" to OUT: the child's user+system time
# (wait4), its wall time, the server's user+system time over the same span (/proc/PID/stat),
# and the server's busy share at saturation: the median over 100 ms slices of the child's life
# of the server main thread's time on a CPU (/proc/PID/schedstat, ns). The whole-life share
# (server_cpu_s / wall_s) also counts the child's start-up and, for lockbench, the report it
# writes after the load, when the server idles; the median slice is the load itself.
# Exit status is CMD's.
run_timed() {
    python3 -c '
import os, sys, time
out, spid, *cmd = sys.argv[1:]
tck = os.sysconf("SC_CLK_TCK")
def server_cpu():
    with open(f"/proc/{spid}/stat") as f:
        st = f.read()
    fields = st[st.rindex(")") + 2:].split()  # fields[0] is field 3 (state)
    return (int(fields[11]) + int(fields[12])) / tck  # utime, stime
def server_oncpu():
    with open(f"/proc/{spid}/schedstat") as f:
        return int(f.read().split()[0]) / 1e9
s0, t0 = server_cpu(), time.monotonic()
pid = os.posix_spawnp(cmd[0], cmd, os.environ)
slices = [(t0, server_oncpu())]
while True:
    done, status, ru = os.wait4(pid, os.WNOHANG)
    if done:
        break
    time.sleep(0.1)
    slices.append((time.monotonic(), server_oncpu()))
t1, s1 = time.monotonic(), server_cpu()
busy = sorted((b[1] - a[1]) / (b[0] - a[0]) for a, b in zip(slices, slices[1:]) if b[0] > a[0])
steady = busy[len(busy) // 2] if busy else (s1 - s0) / max(t1 - t0, 1e-9)
with open(out, "w") as f:
    f.write(f"{ru.ru_utime + ru.ru_stime:.6f} {t1 - t0:.6f} {s1 - s0:.6f} {steady:.6f}\n")
sys.exit(os.waitstatus_to_exitcode(status))' "$@"
}

# --- one bare-loop run --------------------------------------------------------------
# run_bare S MODE ROUND: appends "server<TAB>mode<TAB>round<TAB>bare<TAB>cycles/s<TAB>
# cpu µs/cycle<TAB>server busy" to $WORK/samples.tsv.
run_bare() {
    local s="$1" mode="$2" round="$3" rate
    local -a cmd=("$BARE" "redis://127.0.0.1:${PORTS[s]}" "$CONCURRENCY" "$DURATION" "$mode")
    if ! rate="$(run_timed "$WORK/bare.cpu" "${PIDS[s]}" "${cmd[@]}" 2>"$WORK/bare.log")"; then
        cat "$WORK/bare.log" >&2
        die "bare loop failed against ${LABELS[s]}: ${cmd[*]}"
    fi
    python3 -c 'import sys
srv, mode, rnd, rate, dur, cpu = sys.argv[1:7]
rate, dur = float(rate), float(dur)
if rate <= 0:
    sys.exit(f"bare loop {mode} round {rnd}: no cycles")
c, w, sc, steady = map(float, cpu.split())
print(f"{srv}	{mode}	{rnd}	bare	{rate:.1f}	{c * 1e6 / (rate * dur):.2f}	{sc / w:.3f}	{steady:.3f}")' \
        "$s" "$mode" "$round" "$rate" "$DURATION" "$(cat "$WORK/bare.cpu")" >>"$WORK/samples.tsv"
}

# --- one lockbench run --------------------------------------------------------------
# run_lockbench S MODE ROUND [metrics]: appends
# "server<TAB>mode<TAB>round<TAB>lockbench<TAB>sections/s<TAB>cmd-cycles/s<TAB>rejection%"
# to $WORK/samples.tsv and "server<TAB>mode<TAB>round<TAB>cpu µs/cmd-cycle<TAB>server busy"
# to $WORK/lbcpu.tsv. With `metrics`: served with --metrics and scraped every second while it
# runs; the row says `metrics` instead of `lockbench`, and its CPU row goes to $WORK/mxcpu.tsv.
run_lockbench() {
    local s="$1" mode="$2" round="$3" served="${4:-}" out="$WORK/lb-$1-$2-$3-${4:-plain}"
    local who=lockbench cpu_out="$WORK/lbcpu.tsv" scraper=""
    local -a cmd=("$LOCKBENCH" run --redis "redis://127.0.0.1:${PORTS[s]}"
        --workers "$CONCURRENCY" --keys "$KEYS" --ttl 10s --dist 'constant(0ms)'
        --think 'constant(0ms)' --busy fail-fast --release token
        --connection "$mode" --duration "${DURATION}s" --quiet --out "$out")
    if [[ "$served" == metrics ]]; then
        local mport
        mport="$(free_port)"
        cmd+=(--metrics "127.0.0.1:$mport")
        who=metrics
        cpu_out="$WORK/mxcpu.tsv"
        # A scrape a second, over bash's /dev/tcp (no HTTP client needed).
        (
            while sleep 1; do
                exec 3<>"/dev/tcp/127.0.0.1/$mport" 2>/dev/null || continue
                printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3
                cat <&3 >/dev/null
                exec 3<&-
            done
        ) &
        scraper=$!
    fi
    if ! run_timed "$WORK/lb.cpu" "${PIDS[s]}" "${cmd[@]}" >"$WORK/lb.log" 2>&1; then
        [[ -n "$scraper" ]] && kill "$scraper" 2>/dev/null
        cat "$WORK/lb.log" >&2
        die "lockbench failed against ${LABELS[s]}: ${cmd[*]}"
    fi
    if [[ -n "$scraper" ]]; then
        kill "$scraper" 2>/dev/null || true
        wait "$scraper" 2>/dev/null || true
    fi
    python3 - "$out/summary.json" "$s" "$mode" "$round" "$(cat "$WORK/lb.cpu")" "$cpu_out" "$who" \
        >>"$WORK/samples.tsv" <<'PY'
import json, sys
path, srv, mode, rnd, cpu, cpu_out, who = sys.argv[1:8]
v = json.load(open(path))["variants"][0]
if v["errors"] != 0:
    sys.exit(f"lockbench {mode} round {rnd}: {v['errors']} errors {v.get('errors_by_kind')} "
             f"{v.get('first_errors')}")
if v["sections"] == 0 or v["elapsed_s"] <= 0:
    sys.exit(f"lockbench {mode} round {rnd}: no sections")
# Commands actually sent: one SET per attempt, one EVALSHA per section.
cmd_cycles = (v["attempts"] + v["sections"]) / 2 / v["elapsed_s"]
rej = 100.0 * v["rejections"] / v["attempts"] if v["attempts"] else 0.0
print(f"{srv}\t{mode}\t{rnd}\t{who}\t{v['throughput_per_s']:.1f}\t{cmd_cycles:.1f}\t{rej:.2f}")
c, w, sc, steady = map(float, cpu.split())
with open(cpu_out, "a") as f:
    f.write(f"{srv}\t{mode}\t{rnd}\t{c * 1e6 / (cmd_cycles * v['elapsed_s']):.2f}\t{sc / w:.3f}"
            f"\t{steady:.3f}\n")
PY
    rm -rf -- "$out"
}

# --- one redis-benchmark command ----------------------------------------------------
# bench_rps S MODE N CMD... -> prints the requests per second.
bench_rps() {
    local s="$1" mode="$2" n="$3"
    shift 3
    local -a shape
    if [[ "$mode" == shared ]]; then
        shape=(-c 1 -P "$CONCURRENCY")
    else
        shape=(-c "$CONCURRENCY")
    fi
    local csv
    if ! csv="$(run_timed "$WORK/rb.cpu" "${PIDS[s]}" redis-benchmark -h 127.0.0.1 \
        -p "${PORTS[s]}" "${shape[@]}" -n "$n" -r "$KEYS" --csv "$@" 2>"$WORK/rb.err")"; then
        cat "$WORK/rb.err" >&2
        die "redis-benchmark failed against ${LABELS[s]}: ${shape[*]} -n $n $*"
    fi
    printf '%s\n' "$csv" | python3 -c '
import csv, sys
rows = [r for r in csv.DictReader(sys.stdin) if r.get("rps")]
if len(rows) != 1 or float(rows[0]["rps"]) <= 0:
    sys.exit("cannot parse redis-benchmark output")
print(rows[0]["rps"])'
}

# Requests per run so that each command runs about DURATION seconds, from a short
# calibration run; a multiple of C so every client (or every batch) is full. Sized per
# server: each runs for about DURATION seconds whatever its speed.
declare -A N_FOR
size_for() { # RPS SECONDS -> request count, a multiple of C, at least 100 per client
    python3 -c 'import sys
rps, secs, c = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
n = max(int(rps * secs), c * 100)
print((n + c - 1) // c * c)' "$1" "$2" "$CONCURRENCY"
}
calibrate() { # S MODE set|evalsha
    local s="$1" mode="$2" which="$3" rps n
    local -a cmdline
    if [[ "$which" == set ]]; then cmdline=("${SET_CMD[@]}"); else cmdline=("${EVALSHA_CMD[@]}"); fi
    # Two steps: a tiny run gives a rough rate, a ~0.5 s run sized from it the real one
    # (a pipelined run of the tiny size is over in milliseconds, too short to trust).
    n=$((CONCURRENCY * 200))
    for _ in 1 2; do
        rps="$(bench_rps "$s" "$mode" "$n" "${cmdline[@]}")"
        cleanup_bench_keys "${PORTS[s]}"
        n="$(size_for "$rps" 0.5)"
    done
    N_FOR["$s-$mode-$which"]="$(size_for "$rps" "$DURATION")"
}

run_peer() { # S MODE ROUND
    local s="$1" mode="$2" round="$3" rps_set rps_eval busy_set busy_eval
    rps_set="$(bench_rps "$s" "$mode" "${N_FOR[$s-$mode-set]}" "${SET_CMD[@]}")"
    busy_set="$(cut -d' ' -f4 "$WORK/rb.cpu")"
    rps_eval="$(bench_rps "$s" "$mode" "${N_FOR[$s-$mode-evalsha]}" "${EVALSHA_CMD[@]}")"
    busy_eval="$(cut -d' ' -f4 "$WORK/rb.cpu")"
    cleanup_bench_keys "${PORTS[s]}"
    python3 -c 'import sys
srv, mode, rnd = sys.argv[1:4]
s, e, bs, be = map(float, sys.argv[4:8])
cyc = 1 / (1 / s + 1 / e)
# The server busy at saturation during the peer: the mean of its SET and EVALSHA runs.
print(f"{srv}\t{mode}\t{rnd}\tpeer\t{cyc:.1f}\t{s:.1f}\t{e:.1f}\t{(bs + be) / 2:.3f}")' \
        "$s" "$mode" "$round" "$rps_set" "$rps_eval" "$busy_set" "$busy_eval" >>"$WORK/samples.tsv"
}

MODES=(per-worker shared)
: >"$WORK/samples.tsv"
: >"$WORK/lbcpu.tsv"

echo "calibrating redis-benchmark run sizes (~${DURATION}s per command)..." >&2
for ((s = 0; s < NSERVERS; s++)); do
    for mode in "${MODES[@]}"; do
        calibrate "$s" "$mode" set
        calibrate "$s" "$mode" evalsha
        if ((PER_SERVER)); then
            echo "  ${LABELS[s]} $mode: SET n=${N_FOR[$s-$mode-set]}, EVALSHA n=${N_FOR[$s-$mode-evalsha]}" >&2
        else
            echo "  $mode: SET n=${N_FOR[$s-$mode-set]}, EVALSHA n=${N_FOR[$s-$mode-evalsha]}" >&2
        fi
    done
done

SERVERS_NOTE=""
((NSERVERS > 1)) && SERVERS_NOTE=", $NSERVERS servers"
echo "C=$CONCURRENCY clients, keys=$KEYS, ${DURATION}s per run, $ROUNDS rounds, interleaved$SERVERS_NOTE" >&2
for ((round = 1; round <= ROUNDS; round++)); do
    for ((i = 0; i < NSERVERS; i++)); do
        s=$(((i + round - 1) % NSERVERS)) # each round starts one server further on
        for mode in "${MODES[@]}"; do
            if ((PER_SERVER)); then
                echo "  round $round/$ROUNDS ${LABELS[s]} $mode" >&2
            else
                echo "  round $round/$ROUNDS $mode" >&2
            fi
            if ((round % 2)); then
                run_lockbench "$s" "$mode" "$round"
                ((METRICS)) && run_lockbench "$s" "$mode" "$round" metrics
                run_bare "$s" "$mode" "$round"
                run_peer "$s" "$mode" "$round"
            else
                run_peer "$s" "$mode" "$round"
                run_bare "$s" "$mode" "$round"
                ((METRICS)) && run_lockbench "$s" "$mode" "$round" metrics
                run_lockbench "$s" "$mode" "$round"
            fi
        done
    done
done
for ((s = 0; s < NSERVERS; s++)); do
    cleanup_bench_keys "${PORTS[s]}"
    LEFT="$(rcli "${PORTS[s]}" dbsize | tr -d '\r')"
    [[ "$LEFT" == 0 ]] || echo "warning: $LEFT keys left on the private server ${LABELS[s]}" >&2
done

# --- report -------------------------------------------------------------------------
: >"$WORK/servers.tsv"
for ((s = 0; s < NSERVERS; s++)); do
    printf '%s\t%s\t%s\n' "$s" "${LABELS[s]}" "${SERVER_PATHS[s]}" >>"$WORK/servers.tsv"
done
mkdir -p -- results
STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
CSV_OUT="results/bench-$STAMP.csv"
python3 - "$WORK/samples.tsv" "$CSV_OUT" "$CONCURRENCY" "$KEYS" "$DURATION" "$ROUNDS" \
    "$SERVER_VERSION" "$WORK/servers.tsv" "$PER_SERVER" "$WORK/lbcpu.tsv" "$WORK/mxcpu.tsv" <<'PY'
import csv, os, sys
from statistics import median

tsv, out, conc, keys, dur, rounds, version, servers_tsv, per_server, lbcpu_tsv, mxcpu_tsv = \
    sys.argv[1:12]
per_server = per_server == "1"
servers = []  # (label, path), in the order given
for line in open(servers_tsv):
    _, label, path = line.rstrip("\n").split("\t")
    servers.append((label, path))

# (server, mode) -> {round: the row's numbers: rates, CPU, busy shares, as each side writes them}
lb, peer, bare, served = {}, {}, {}, {}
for line in open(tsv):
    srv, mode, rnd, who, *vals = line.rstrip("\n").split("\t")
    side = {"lockbench": lb, "peer": peer, "bare": bare, "metrics": served}[who]
    side.setdefault((int(srv), mode), {})[int(rnd)] = tuple(map(float, vals))
# (server, mode) -> {round: (cpu µs per cmd-cycle, server busy whole life, at saturation)}
lbcpu, mxcpu = {}, {}
for path, side in ((lbcpu_tsv, lbcpu), (mxcpu_tsv, mxcpu)):
    for line in open(path) if os.path.exists(path) else ():
        srv, mode, rnd, *vals = line.rstrip("\n").split("\t")
        side.setdefault((int(srv), mode), {})[int(rnd)] = tuple(map(float, vals))


def vs_first(side, srv, mode):
    """Median over rounds of this server's rate / the first server's rate, same round."""
    mine, first = side[(srv, mode)], side[(0, mode)]
    return median(mine[r][0] / first[r][0] for r in mine)


shapes = {"per-worker": f"-c {conc}", "shared": f"-c 1 -P {conc}"}
rows = []
for mode in ("per-worker", "shared"):
    for srv, (label, path) in enumerate(servers):
        l, p = lb[(srv, mode)], peer[(srv, mode)]
        paired = sorted(l[r][0] / p[r][0] for r in l)
        lb_cyc = median(x[0] for x in l.values())
        lb_cmd = median(x[1] for x in l.values())
        pe_cyc = median(x[0] for x in p.values())
        row = {"mode": mode}
        if per_server:
            row.update({"server": label, "server_path": path})
        row.update({
            "concurrency": conc,
            "keys": keys,
            "duration_s": dur,
            "rounds": rounds,
        })
        if not per_server:
            row["redis_version"] = version
        row.update({
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
        if per_server:
            row["lockbench_vs_first"] = round(vs_first(lb, srv, mode), 4)
            row["peer_vs_first"] = round(vs_first(peer, srv, mode), 4)
        b, lc = bare[(srv, mode)], lbcpu[(srv, mode)]
        row.update({
            "bare_cycles_per_s": round(median(x[0] for x in b.values()), 1),
            "lb_bare_ratio": round(median(l[r][0] / b[r][0] for r in l), 4),
            "lockbench_cpu_us_per_cycle": round(median(x[0] for x in lc.values()), 2),
            "bare_cpu_us_per_cycle": round(median(x[1] for x in b.values()), 2),
            "server_busy_lockbench": round(median(x[1] for x in lc.values()), 3),
            "server_busy_bare": round(median(x[2] for x in b.values()), 3),
            "server_busy_steady_lockbench": round(median(x[2] for x in lc.values()), 3),
            "server_busy_steady_bare": round(median(x[3] for x in b.values()), 3),
            "server_busy_steady_peer": round(median(x[3] for x in p.values()), 3),
        })
        if (srv, mode) in served:
            m = served[(srv, mode)]
            pm = sorted(m[r][0] / l[r][0] for r in m)
            mc, lc = mxcpu[(srv, mode)], lbcpu[(srv, mode)]
            row.update({
                "metrics_cycles_per_s": round(median(x[0] for x in m.values()), 1),
                "metrics_ratio": round(median(pm), 4),
                "metrics_ratio_min": round(pm[0], 4),
                "metrics_ratio_max": round(pm[-1], 4),
                "metrics_cpu_us_per_cycle": round(median(x[0] for x in mc.values()), 2),
                "metrics_cpu_ratio": round(median(mc[r][0] / lc[r][0] for r in mc), 4),
            })
        rows.append(row)

with open(out, "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)

title = (f"\nlockbench vs redis-benchmark: SET NX PX + EVALSHA release, zero-length sections, "
         f"C={conc}, keys={keys}, {dur}s runs, median of {rounds} interleaved rounds")
if not per_server:
    print(f"{title}, Redis {version}")
    hdr = ("mode", "lockbench cyc/s", "redis-bench cyc/s", "ratio lb/peer",
           "paired range", "lb rejected", "lb cmd-cyc/s", "cmd ratio", "bare cyc/s",
           "lb/bare", "lb µs/cyc", "bare µs/cyc", "srv busy lb", "saturated lb/bare/peer",
           "peer shape")
    fmt = ("{:<11} {:>15} {:>17} {:>13} {:>13} {:>11} {:>12} {:>9} {:>10} {:>7} {:>9} "
           "{:>11} {:>11} {:>22}  {}")
else:
    print(f"{title}, {len(servers)} server{'s' if len(servers) > 1 else ''} interleaved")
    hdr = ("mode", "server", "lockbench cyc/s", "redis-bench cyc/s", "ratio lb/peer",
           "paired range", "lb rejected", "lb cmd-cyc/s", "cmd ratio", "lb vs 1st",
           "peer vs 1st", "bare cyc/s", "lb/bare", "lb µs/cyc", "bare µs/cyc", "srv busy lb",
           "saturated lb/bare/peer", "peer shape")
    width = max(len(hdr[1]), *(len(label) for label, _ in servers))
    fmt = ("{:<11} {:<%d} {:>15} {:>17} {:>13} {:>13} {:>11} {:>12} {:>9} {:>9} {:>11} "
           "{:>10} {:>7} {:>9} {:>11} {:>11} {:>22}  {}" % width)
print(fmt.format(*hdr))
for r in rows:
    cells = [r["mode"]]
    if per_server:
        cells.append(r["server"])
    cells += [f"{r['lockbench_cycles_per_s']:,.0f}", f"{r['peer_cycles_per_s']:,.0f}",
              f"{r['ratio']:.3f}", f"{r['ratio_min']:.2f}-{r['ratio_max']:.2f}",
              f"{r['lockbench_rejection_pct']:.1f}%", f"{r['lockbench_cmd_cycles_per_s']:,.0f}",
              f"{r['cmd_ratio']:.3f}"]
    if per_server:
        cells += [f"{r['lockbench_vs_first']:.3f}", f"{r['peer_vs_first']:.3f}"]
    cells += [f"{r['bare_cycles_per_s']:,.0f}", f"{r['lb_bare_ratio']:.3f}",
              f"{r['lockbench_cpu_us_per_cycle']:.1f}", f"{r['bare_cpu_us_per_cycle']:.1f}",
              f"{r['server_busy_lockbench']:.2f}",
              f"{r['server_busy_steady_lockbench']:.2f}/{r['server_busy_steady_bare']:.2f}/"
              f"{r['server_busy_steady_peer']:.2f}"]
    cells.append(r["peer_shape"])
    print(fmt.format(*cells))
print("\ncycle = 1 SET + 1 EVALSHA; peer cycles/s = 1/(1/SET rps + 1/EVALSHA rps); "
      "lb cmd-cyc/s = (SETs + EVALSHAs)/2/s, counts rejected attempts too.")
print("bare = examples/bare_loop.rs (lockbench's link, same cycle, key per task); lb/bare = median "
      "paired ratio of cyc/s; µs/cyc = client user+system CPU per cycle (lockbench: per "
      "cmd-cycle, whole process life); srv busy lb = server CPU / wall during lockbench's run "
      "(bare's run: " + ", ".join("%s %.2f" % (r["mode"], r["server_busy_bare"]) for r in rows)
      + "), start-up and report included; saturated = the server main thread's share of a CPU, "
      "median of 100 ms slices of each client's life (the load itself), during lockbench, the "
      "bare loop and redis-benchmark (mean of its SET and EVALSHA runs). Goal: >= 0.90.")
if per_server:
    print(f"lb/peer vs 1st = median over rounds of the rate / {servers[0][0]}'s in the same "
          "round. Servers:")
    for label, path in servers:
        print(f"  {label:<{width}}  {path}")
if served:
    print("\nlive metrics (--metrics, scraped every 1 s) beside plain runs, same rounds:")
    mfmt = "{:<11} {:<16} {:>12} {:>13} {:>13} {:>13} {:>14} {:>14} {:>9}"
    print(mfmt.format("mode", "server", "plain cyc/s", "served cyc/s", "served/plain",
                      "paired range", "plain µs/cyc", "served µs/cyc", "cpu ratio"))
    for r in rows:
        if "metrics_ratio" in r:
            print(mfmt.format(
                r["mode"], r.get("server", version), f"{r['lockbench_cycles_per_s']:,.0f}",
                f"{r['metrics_cycles_per_s']:,.0f}", f"{r['metrics_ratio']:.3f}",
                f"{r['metrics_ratio_min']:.2f}-{r['metrics_ratio_max']:.2f}",
                f"{r['lockbench_cpu_us_per_cycle']:.2f}", f"{r['metrics_cpu_us_per_cycle']:.2f}",
                f"{r['metrics_cpu_ratio']:.3f}"))
    print("served/plain = median of the per-round ratios of cycles/s (1 = no cost; target "
          ">= 0.97); cpu ratio = the same for client CPU per cmd-cycle (1 = no cost).")
PY
echo "csv: $CSV_OUT"
