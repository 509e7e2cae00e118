#!/usr/bin/env bash
# scripts/proxy-bench.sh: what a hop through lockbench's proxy costs (issue 42, item 6), beside
# the proxies people already run, in one invocation.
#
# WHAT IS MEASURED
#   `redis-benchmark -t set,get -c C -n N` (C clients, one command in flight each, no
#   pipelining) against one private redis-server on a free loopback port, by four paths:
#     direct     redis-benchmark → redis-server
#     haproxy    through HAProxy in TCP mode: byte forwarding, the floor of a hop
#     nutcracker through twemproxy, a Redis-aware proxy (it parses each command, and carries
#                all clients' commands to the server on one pipelined connection)
#     observe    through `lockbench observe` listening in front of the same server (the row is
#                skipped, with a message, when this lockbench has no `observe` command); its
#                clients share one pipelined server connection (the default)
#     observe-per-client
#                the same with `--server-connections per-client`: one server connection per
#                client, as HAProxy does (only with the default OBSERVE_ARGS)
#   For each path and command: throughput (requests/s) and the median latency (p50, ms) as
#   redis-benchmark reports them (--csv).
#
# WHY ROUNDS AND RATIOS
#   This machine is small (2 cores) and shared: absolute rates move by tens of percent with
#   whatever else runs. The paths run one after the other inside a round, their order rotated
#   every round so that none always goes first, for ROUNDS rounds; the table gives the median
#   of each figure and the median of the per-round ratios (path / direct, path / haproxy),
#   paired within a round so that both sides of a ratio saw the same moment of the machine.
#   "added p50" is path p50 − direct p50 of the same round: the latency of the hop.
#   Issue 42's goal for observe: rate/haproxy >= 1 and added p50 <= haproxy's.
#
# USAGE
#   scripts/proxy-bench.sh [-c CLIENTS] [-n REQUESTS] [-r ROUNDS] [--lockbench PATH]
#   Environment: PROXY_BENCH_CLIENTS (50), PROXY_BENCH_REQUESTS (100000 per command and run),
#   PROXY_BENCH_ROUNDS (3), LOCKBENCH (the binary; default $CARGO_TARGET_DIR/release/lockbench,
#   else target/release/lockbench; a debug build makes the observe row meaningless).
#   OBSERVE_ARGS: how observe is started, `{redis}` and `{listen}` and `{dir}` replaced
#   (default: observe --redis {redis} --listen {listen} --out {dir} --duration 1h).
#   Needs redis-server, redis-benchmark, redis-cli, haproxy and nutcracker
#   (apt-get install -y redis-server redis-tools haproxy nutcracker), and python3.
#   Exit codes: 0 done, 1 a server or proxy failed, 2 bad arguments or a missing tool.
#   Prints the table and writes it as CSV to results/proxy-bench-<UTC timestamp>.csv.

set -euo pipefail

CLIENTS="${PROXY_BENCH_CLIENTS:-50}"
REQUESTS="${PROXY_BENCH_REQUESTS:-100000}"
ROUNDS="${PROXY_BENCH_ROUNDS:-3}"
ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"
LOCKBENCH="${LOCKBENCH:-${CARGO_TARGET_DIR:-$ROOT/target}/release/lockbench}"
DEFAULT_OBSERVE_ARGS='observe --redis {redis} --listen {listen} --out {dir} --duration 1h'
OBSERVE_ARGS="${OBSERVE_ARGS:-$DEFAULT_OBSERVE_ARGS}"

bad_input() {
    echo "proxy-bench.sh: $*" >&2
    exit 2
}
die() {
    echo "proxy-bench.sh: $*" >&2
    exit 1
}

while (($#)); do
    case "$1" in
    -c) CLIENTS="${2:-}"; shift 2 ;;
    -n) REQUESTS="${2:-}"; shift 2 ;;
    -r) ROUNDS="${2:-}"; shift 2 ;;
    --lockbench) LOCKBENCH="${2:-}"; shift 2 ;;
    -h | --help)
        sed -n '2,/^$/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
        exit 0
        ;;
    *) bad_input "unknown argument '$1' (valid: -c CLIENTS, -n REQUESTS, -r ROUNDS, --lockbench PATH)" ;;
    esac
done
[[ "$CLIENTS" =~ ^[1-9][0-9]*$ ]] || bad_input "-c: clients must be a positive integer, got '$CLIENTS'"
[[ "$REQUESTS" =~ ^[1-9][0-9]*$ ]] || bad_input "-n: requests must be a positive integer, got '$REQUESTS'"
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || bad_input "-r: rounds must be a positive integer, got '$ROUNDS'"
for tool in redis-server redis-benchmark redis-cli haproxy nutcracker python3; do
    command -v "$tool" >/dev/null 2>&1 ||
        bad_input "$tool not found on PATH (apt-get install -y redis-server redis-tools haproxy nutcracker python3)"
done

WORK="$(mktemp -d "${TMPDIR:-/tmp}/lockbench-proxy-bench.XXXXXX")"
PIDS=()
on_exit() {
    local rc=$? p
    trap - EXIT INT TERM
    for p in "${PIDS[@]}"; do
        # SIGTERM, not SIGINT: a background job of a script starts with SIGINT ignored, and
        # haproxy keeps it so. lockbench observe ends its run cleanly on either.
        kill -TERM "$p" 2>/dev/null || true
    done
    for p in "${PIDS[@]}"; do
        wait "$p" 2>/dev/null || true
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

# Waits until PORT answers PING through whatever listens there (PID must stay alive).
wait_ready() { # NAME PID PORT LOG
    local i
    for ((i = 0; i < 100; i++)); do # up to ~10 s
        kill -0 "$2" 2>/dev/null || die "$1 exited before answering PING on port $3: $(tail -n 5 "$4" 2>/dev/null)"
        [[ "$(timeout 2 redis-cli -h 127.0.0.1 -p "$3" ping 2>/dev/null || true)" == PONG ]] && return 0
        sleep 0.1
    done
    die "$1 did not answer PING on 127.0.0.1:$3 within 10 s: $(tail -n 5 "$4" 2>/dev/null)"
}

# --- the server and the proxies in front of it ----------------------------------------
declare -A PORT
PORT[direct]="$(free_port)"
redis-server --bind 127.0.0.1 --port "${PORT[direct]}" --save '' --appendonly no \
    --dir "$WORK" --logfile "$WORK/redis.log" --daemonize no </dev/null >/dev/null 2>&1 &
PIDS+=($!)
wait_ready redis-server $! "${PORT[direct]}" "$WORK/redis.log"
SERVER="$(redis-cli -p "${PORT[direct]}" info server | tr -d '\r' | sed -n 's/^redis_version:/redis /p')"

PORT[haproxy]="$(free_port)"
cat >"$WORK/haproxy.cfg" <<EOF
global
    maxconn 4096
defaults
    mode tcp
    timeout connect 5s
    timeout client 60s
    timeout server 60s
frontend bench
    bind 127.0.0.1:${PORT[haproxy]}
    default_backend redis
backend redis
    server r1 127.0.0.1:${PORT[direct]}
EOF
haproxy -f "$WORK/haproxy.cfg" -db </dev/null >"$WORK/haproxy.log" 2>&1 &
PIDS+=($!)
wait_ready haproxy $! "${PORT[haproxy]}" "$WORK/haproxy.log"

PORT[nutcracker]="$(free_port)"
cat >"$WORK/nutcracker.yml" <<EOF
bench:
  listen: 127.0.0.1:${PORT[nutcracker]}
  redis: true
  hash: fnv1a_64
  distribution: ketama
  auto_eject_hosts: false
  servers:
   - 127.0.0.1:${PORT[direct]}:1
EOF
# -s: its stats port, free too (the default 22222 is a fixed port).
nutcracker -c "$WORK/nutcracker.yml" -s "$(free_port)" -a 127.0.0.1 -o "$WORK/nutcracker.log" \
    </dev/null >/dev/null 2>&1 &
PIDS+=($!)
wait_ready nutcracker $! "${PORT[nutcracker]}" "$WORK/nutcracker.log"

PATHS=(direct haproxy nutcracker)
OBSERVE_NOTE=""
if [[ ! -x "$LOCKBENCH" ]]; then
    OBSERVE_NOTE="observe: skipped, $LOCKBENCH not found (cargo build --release, or --lockbench PATH)"
elif ! "$LOCKBENCH" observe --help >/dev/null 2>&1; then
    OBSERVE_NOTE="observe: skipped, $LOCKBENCH has no observe command (issue 42)"
else
    PORT[observe]="$(free_port)"
    redis_at="redis://127.0.0.1:${PORT[direct]}" listen_at="127.0.0.1:${PORT[observe]}"
    args="${OBSERVE_ARGS//"{redis}"/$redis_at}"
    args="${args//"{listen}"/$listen_at}"
    args="${args//"{dir}"/$WORK/observe}"
    # shellcheck disable=SC2086 # OBSERVE_ARGS is a list of words
    "$LOCKBENCH" $args </dev/null >"$WORK/observe.log" 2>&1 &
    PIDS+=($!)
    wait_ready "lockbench observe" $! "${PORT[observe]}" "$WORK/observe.log"
    PATHS+=(observe)
    # The same proxy with a server connection per client (no shared line): what the line buys.
    if [[ "$OBSERVE_ARGS" == "$DEFAULT_OBSERVE_ARGS" ]] &&
        "$LOCKBENCH" observe --help 2>/dev/null | grep -q -- --server-connections; then
        PORT[observe-per-client]="$(free_port)"
        "$LOCKBENCH" observe --server-connections per-client --redis "$redis_at" \
            --listen "127.0.0.1:${PORT[observe-per-client]}" --out "$WORK/observe-per-client" \
            --duration 1h </dev/null >"$WORK/observe-per-client.log" 2>&1 &
        PIDS+=($!)
        wait_ready "lockbench observe --server-connections per-client" $! \
            "${PORT[observe-per-client]}" "$WORK/observe-per-client.log"
        PATHS+=(observe-per-client)
    fi
    [[ "$LOCKBENCH" == */debug/* ]] &&
        OBSERVE_NOTE="observe: $LOCKBENCH is a debug build, its row says nothing of the release's cost"
fi
[[ -n "$OBSERVE_NOTE" ]] && echo "$OBSERVE_NOTE" >&2

# --- the rounds ----------------------------------------------------------------------
RUNS="$WORK/runs.csv"
echo "round,path,test,rps,p50_ms" >"$RUNS"
n=${#PATHS[@]}
for ((r = 0; r < ROUNDS; r++)); do
    for ((i = 0; i < n; i++)); do
        path="${PATHS[(i + r) % n]}"
        echo "round $((r + 1))/$ROUNDS: $path" >&2
        out="$(redis-benchmark -h 127.0.0.1 -p "${PORT[$path]}" -t set,get -c "$CLIENTS" -n "$REQUESTS" --csv 2>"$WORK/bench.err")" ||
            die "redis-benchmark through $path failed: $(tail -n 3 "$WORK/bench.err")"
        # "SET","25201.61","1.510","0.088","0.711",...: test, rps, avg, min, p50, ...
        rows="$(tr -d '"' <<<"$out" | awk -F, -v r="$r" -v p="$path" '$1 == "SET" || $1 == "GET" { print r "," p "," $1 "," $2 "," $5 }')"
        [[ $(wc -l <<<"$rows") -eq 2 ]] || die "redis-benchmark through $path printed no SET and GET rows: $out"
        echo "$rows" >>"$RUNS"
    done
done

# --- the table -----------------------------------------------------------------------
mkdir -p "$ROOT/results"
CSV="$ROOT/results/proxy-bench-$(date -u +%Y%m%dT%H%M%SZ).csv"
python3 - "$RUNS" "$CSV" <<'EOF'
import csv, statistics, sys
runs = list(csv.DictReader(open(sys.argv[1])))
fig = {(int(x["round"]), x["path"], x["test"]): (float(x["rps"]), float(x["p50_ms"])) for x in runs}
rounds = sorted({k[0] for k in fig})
paths = list(dict.fromkeys(x["path"] for x in runs))
med = statistics.median
head = ["path", "test", "req/s", "p50 ms", "rate/direct", "rate/haproxy", "added p50 ms", "haproxy added"]
rows = []
for test in ("SET", "GET"):
    for p in paths:
        rps = [fig[r, p, test][0] for r in rounds]
        p50 = [fig[r, p, test][1] for r in rounds]
        vs_d = [fig[r, p, test][0] / fig[r, "direct", test][0] for r in rounds]
        vs_h = [fig[r, p, test][0] / fig[r, "haproxy", test][0] for r in rounds]
        added = [fig[r, p, test][1] - fig[r, "direct", test][1] for r in rounds]
        h_added = [fig[r, "haproxy", test][1] - fig[r, "direct", test][1] for r in rounds]
        rows.append([p, test, f"{med(rps):,.0f}", f"{med(p50):.3f}", f"{med(vs_d):.2f}", f"{med(vs_h):.2f}",
                     f"{med(added):+.3f}", f"{med(h_added):+.3f}"])
w = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
print("  ".join(h.ljust(w[i]) if i < 2 else h.rjust(w[i]) for i, h in enumerate(head)))
for r in rows:
    print("  ".join(c.ljust(w[i]) if i < 2 else c.rjust(w[i]) for i, c in enumerate(r)))
with open(sys.argv[2], "w", newline="") as f:
    out = csv.writer(f)
    out.writerow(["path", "test", "rps_median", "p50_ms_median", "rate_vs_direct", "rate_vs_haproxy", "added_p50_ms", "haproxy_added_p50_ms"])
    for r in rows:
        out.writerow([c.replace(",", "") if i == 2 else c for i, c in enumerate(r)])
EOF
echo "medians of $ROUNDS rounds, redis-benchmark -t set,get -c $CLIENTS -n $REQUESTS, $SERVER, $(nproc) cores; ratios and added p50 paired per round"
[[ -n "$OBSERVE_NOTE" ]] && echo "$OBSERVE_NOTE"
echo "CSV: ${CSV#"$ROOT"/}"
