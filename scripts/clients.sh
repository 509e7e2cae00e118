#!/usr/bin/env bash
# scripts/clients.sh: the table people link to (issue 33) — every lock library lockbench drives,
# and the built-in `token` and `del` for reference, through a fixed set of scenarios on a
# private redis-server, each with the protected resource on a store of its own:
#
#   long      sections longer than the TTL: TTL 1 s, sections uniform(500ms, 1500ms)
#   restart   the lock's server restarts (empty) while sections are held: TTL 2 s, sections
#             800 ms, server-restart@2s+200ms
#   pause     a holder stops the world for 2 × TTL: TTL 1 s, sections 200 ms, 20 % of them
#             paused 2 s (a library's driver gets SIGSTOP, so its renewal stops too)
#   crash     a holder's process dies mid-section: TTL 1 s, sections 200 ms, 20 % of the
#             sections from 1 s on crash (a library's driver gets SIGKILL and is started
#             again 100 ms later): how long the dead holder's lock blocks its key
#   failover  on a private Redis Cluster (--backend spawn-cluster: 3 masters × 1 replica), the
#             lock key's master fails over while its replica lags: TTL 1 s, sections 800 ms,
#             failover@2s+1s,shard=2 (the key's hash tag {0} is slot 13907, shard 2's; a lag
#             of a TTL, so the promoted replica has no older lock that covers the lost one). Only
#             the libraries with a cluster client (redis-py, redis-semaphore) and the built-in
#             `token` run it; the others' cell says "no cluster support". The resource lives
#             beside the lock, in its slot
#
# Four holders contend for one key (busy = retry, each library's own wait budget of 5 s, the
# default `retry.max_wait`), the same seed for every library. Per library × scenario it
# reports what lockbench measured (overlap, lost updates, wrongful deletes, stuck locks) and
# what the library said (refused releases, lost-lock signals, errors), and writes the results
# docs/src/measurements/clients.json with the versions and the date; the page's table
# (docs/src/measurements/clients.md), each cell led by one word, is drawn from it by
# src/report/clients_table.rs through the docs drift test, which this script then runs.
#
# USAGE
#   scripts/clients.sh [--seconds 8] [--only LIB,...] [--scenarios NAME,...] [--no-build]
#   LOCKBENCH=path/to/lockbench to use a given binary (default target/release/lockbench).
#   --scenarios runs only those (long, restart, pause, crash, failover) and prints their
#   results without writing them, which needs every scenario.

set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SECONDS_PER_RUN=8
ONLY=""
ALL_SCENARIOS=(long restart pause crash failover)
SCENARIOS=("${ALL_SCENARIOS[@]}")
BUILD=1
while (($# > 0)); do
    case "$1" in
    --seconds) SECONDS_PER_RUN="$2"; shift 2 ;;
    --only) ONLY="$2"; shift 2 ;;
    --scenarios) IFS=, read -r -a SCENARIOS <<<"$2"; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    -h | --help) sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "clients.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
BIN=${LOCKBENCH:-target/release/lockbench}
if [[ -z ${LOCKBENCH:-} && $BUILD == 1 ]]; then
    cargo build --release --quiet
fi
[[ -x $BIN ]] || { echo "clients.sh: no lockbench binary at $BIN" >&2; exit 1; }
bash scripts/drivers.sh >/dev/null

LIBS=(redis-py python-redis-lock python-redis-lock-renew pottery redlock5 redlock4 redis-semaphore redis-lock rslock)
[[ -n $ONLY ]] && IFS=, read -r -a LIBS <<<"$ONLY"
# The libraries whose driver connects to a Redis Cluster (the others refuse at hello).
CLUSTER_LIBS=(redis-py redis-semaphore rslock)
for s in "${SCENARIOS[@]}"; do
    [[ " ${ALL_SCENARIOS[*]} " == *" $s "* ]] ||
        { echo "clients.sh: unknown scenario $s (${ALL_SCENARIOS[*]})" >&2; exit 2; }
done
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

common=(--resource --workers 4 --keys 1 --busy retry --seed 33
    --duration "${SECONDS_PER_RUN}s" --quiet)
declare -A SCEN=(
    [long]="--backend spawn --ttl 1s --dist uniform(500ms,1500ms)"
    [restart]="--backend spawn --ttl 2s --dist constant(800ms) --fault server-restart@2s+200ms"
    [pause]="--backend spawn --ttl 1s --dist constant(200ms) --pause mixture(0.8*constant(0ms),0.2*constant(2s))"
    [crash]="--backend spawn --ttl 1s --dist constant(200ms) --fault holder-crash@1s+100s,probability=0.2,restart=100ms"
    [failover]="--backend spawn-cluster --ttl 1s --dist constant(800ms) --fault failover@2s+1s,shard=2"
)
for s in "${SCENARIOS[@]}"; do
    # shellcheck disable=SC2206
    extra=(${SCEN[$s]})
    releases=del,token
    libs=("${LIBS[@]}")
    if [[ $s == failover ]]; then
        releases=token
        libs=()
        for l in "${LIBS[@]}"; do
            [[ " ${CLUSTER_LIBS[*]} " == *" $l "* ]] && libs+=("$l")
        done
    fi
    args=(compare "${common[@]}" "${extra[@]}" --release "$releases")
    for l in "${libs[@]}"; do args+=(--client "$l"); done
    echo "clients.sh: $s (${libs[*]})" >&2
    "$BIN" "${args[@]}" --out "$OUT/$s" || true # a crossed gate or a failed library still reports
done

WRITE_PAGE=0
[[ ${SCENARIOS[*]} == "${ALL_SCENARIOS[*]}" ]] && WRITE_PAGE=1
SCENARIOS_RUN="${SCENARIOS[*]}" CLUSTER_LIBS="${CLUSTER_LIBS[*]}" WRITE_PAGE=$WRITE_PAGE \
    python3 - "$OUT" "${LIBS[@]}" <<'EOF'
import datetime, json, os, sys
out, libs = sys.argv[1], sys.argv[2:]
scen = os.environ["SCENARIOS_RUN"].split()
cluster_libs = os.environ["CLUSTER_LIBS"].split()
runs = {}
for s in scen:
    p = os.path.join(out, s, "summary.json")
    runs[s] = {v["variant"]: v for v in json.load(open(p))["variants"]} if os.path.exists(p) else {}
def cell(s, r):
    """The cell's figures for the results file (src/report/clients_table.rs reads them)."""
    v = runs[s].get(r)
    if s == "failover" and r not in cluster_libs + ["token"]:
        return {"absent": "not run (reference: `token`)" if r == "del" else "no cluster support"}
    if v is None:
        return None
    b = v.get("crash_blocked_ms") or {}
    failover = next((w["failover"] for w in v.get("faults") or [] if w.get("failover")), None)
    return {
        "overlap_ms": v["overlap_ms"],
        "lost_updates": v["lost_updates"],
        "wrongful_deletes": v["wrongful_deletes"],
        "stuck_locks": v.get("stuck_locks", 0),
        "errors": v.get("errors", 0),
        "crash_blocked_mean_ms": b.get("mean", 0) if b.get("count") else 0,
        "ttl_ms": v["ttl_ms"],
        "fault_failed": any(w.get("error") for w in v.get("faults") or []),
        "refused": v.get("refused_releases", 0),
        "lost": v.get("extension_failures", 0),
        "crashes": v.get("crashes", 0),
        "failover_lost": [failover["locks_lost"], failover["locks_held"]] if failover else None,
    }
rows = []
for r in ["del", "token"] + libs:
    lib = next((runs[s][r].get("library") for s in scen if r in runs[s]), None)
    lib = lib or ("built-in" if r in ("del", "token") else "—")
    cells = {s: c for s in scen if (c := cell(s, r)) is not None}
    rows.append({"variant": r, "library": lib, "cells": cells})
results = {"date": str(datetime.date.today()), "scenarios": scen, "rows": rows}
path = "docs/src/measurements/clients.json"
if os.environ["WRITE_PAGE"] == "1":
    with open(path, "w") as f:
        json.dump(results, f, indent=1)
        f.write("\n")
    print(f"\nwrote {path}", file=sys.stderr)
else:
    print(json.dumps(results, indent=1))
    print(f"\n{path} not written: it needs every scenario (--scenarios)", file=sys.stderr)
EOF
if [[ $WRITE_PAGE == 1 ]]; then
    LOCKBENCH_BLESS=1 cargo test --quiet --test it docs::clients_page_follows_its_results >&2
fi
