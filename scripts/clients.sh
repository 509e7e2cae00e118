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
# what the library said (refused releases, lost-lock signals, errors), and writes the page
# docs/src/measurements/clients.md with the versions and the date.
#
# USAGE
#   scripts/clients.sh [--seconds 8] [--only LIB,...] [--scenarios NAME,...] [--no-build]
#   LOCKBENCH=path/to/lockbench to use a given binary (default target/release/lockbench).
#   --scenarios runs only those (long, restart, pause, crash, failover) and prints their
#   table without writing the page, which needs every scenario.

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
    v = runs[s].get(r)
    if s == "failover" and r not in cluster_libs + ["token"]:
        return "not run (reference: `token`)" if r == "del" else "no cluster support"
    if v is None:
        return "—"
    noticed = []
    if v.get("refused_releases"):
        noticed.append(f'{v["refused_releases"]} refused')
    if v.get("extension_failures"):
        noticed.append(f'{v["extension_failures"]} lost')
    if v.get("errors"):
        noticed.append(f'{v["errors"]} errors')
    if v.get("crashes"):
        b = v.get("crash_blocked_ms") or {}
        noticed.append(f'{v["crashes"]} crashes, key blocked {b.get("mean", 0):.0f} ms avg')
    for w in v.get("faults") or []:
        f = w.get("failover")
        if f:
            noticed.append(f'failover lost {f["locks_lost"]} of {f["locks_held"]} locks')
        elif w.get("kind") == "failover" and w.get("error"):
            noticed.append(f'failover failed: {w["error"]}')
    return (f'{v["overlap_ms"]:.0f} ms / {v["lost_updates"]} / {v["wrongful_deletes"]} / '
            f'{v.get("stuck_locks", 0)} · {", ".join(noticed) or "nothing"}')
rows = ["del", "token"] + libs
lines = [
    "# Lock libraries under the same faults",
    "",
    f"Written by `scripts/clients.sh` on {datetime.date.today()}: four holders on one key, the",
    "resource on a store of its own (on the cluster, beside the lock in its slot), the same seed",
    "for every row. Each cell is *overlap / lost updates / wrongful deletes / stuck locks*,",
    "measured by lockbench, then what the library itself said (refused releases, lost-lock",
    "signals, errors). Scenarios: `long` sections longer than the TTL; `restart` of the lock's",
    "server while locks are held; `pause` of a holder for 2 × TTL (its process stopped); `crash`",
    "of a holder's process mid-section (SIGKILL, started again 100 ms later), with how long its",
    "lock then blocked the key; `failover` of the lock key's master on a private Redis Cluster",
    "(3 masters × 1 replica, the replica lagging 1 s: TTL 1 s, sections 800 ms), with how many",
    "locks the promoted replica had lost, run by the libraries with a cluster client and `token`.",
    "See [Your lock library](../guides/lock-libraries.md).",
    "",
    "| variant | library | " + " | ".join(scen) + " |",
    "|---|---|" + "---|" * len(scen),
]
for r in rows:
    lib = next((runs[s][r].get("library") for s in scen if r in runs[s]), None)
    lib = lib or ("built-in" if r in ("del", "token") else "—")
    lines.append(f"| `{r}` | {lib} | " + " | ".join(cell(s, r) for s in scen) + " |")
lines += [
    "",
    "Reading it: overlap is what any TTL lock allows once a holder outlives its TTL (or its",
    "process stops); lost updates are what the resource suffered from it; wrongful deletes are",
    "a release that removed another holder's lock (only a plain `DEL` can). `refused` counts",
    "releases the library itself reported as not owned; `lost` the lost-lock signals of the",
    "libraries that have them.",
    "",
    "Wrongful deletes are attributed at the server, not taken from the library's word: each",
    "holder reaches the server through lockbench's watch, which sends its single-key `DEL` as",
    "`GETDEL`, so the value removed names whose lock it was (`wrongful_deletes_source` in",
    "summary.json). A compare-and-delete script never removes another's lock; npm `redis-lock`",
    "sends a plain `DEL` while its own deadline lasts, and a restart that empties the server",
    "inside that deadline lets it delete the next holder's lock.",
    "",
    "In `crash`, a dead holder's lock blocks its key for about the TTL, except under",
    "`python-redis-lock-renew`, where it blocks for about the wait budget (5 s here). A waiter",
    "of python-redis-lock sleeps in `BLPOP` on the lock's signal list, and only a release pushes",
    "to that list. A crash pushes nothing, so the waiter tries `SET NX` again only when its",
    "`BLPOP` times out, and the library makes that timeout the one passed to",
    "`acquire(timeout=)`. Without renewal the library refuses a timeout above `expire`, so the",
    "driver caps the wait at the TTL (1 s): the waiter is back when the key expires. With",
    "`auto_renewal=True` the library accepts the whole 5 s, and the key stays free, unused,",
    "until the earliest waiter's 5 s run out. The numbers and how the block follows the budget",
    "are in [Your lock library](../guides/lock-libraries.md).",
    "",
    "Where a cell matches a library's public issue (by the issue's topic):",
    "",
    "- `rslock` · `crash`: a dropped lock is not released, so a dead holder's key waits for",
    "  its TTL ([hexcowboy/rslock#30](https://github.com/hexcowboy/rslock/issues/30)).",
    "- `redlock5` · `long`, `pause`: the release of a lock already lost is refused only after",
    "  its retries ([mike-marcacci/node-redlock#168](https://github.com/mike-marcacci/node-redlock/issues/168),",
    "  [#309](https://github.com/mike-marcacci/node-redlock/issues/309)).",
    "- `redis-semaphore` · `pause`: a stopped process misses its refresh timer and the lock is",
    "  lost (`onLockLost`) ([swarthy/redis-semaphore#9](https://github.com/swarthy/redis-semaphore/issues/9),",
    "  [#24](https://github.com/swarthy/redis-semaphore/issues/24), a stalled event loop).",
    "- `python-redis-lock` · `failover`: no cluster support; its two keys per lock need one",
    "  slot ([ionelmc/python-redis-lock#59](https://github.com/ionelmc/python-redis-lock/issues/59)).",
    "- `python-redis-lock-renew` · `crash`: no issue found for it; the nearest,",
    "  [#58](https://github.com/ionelmc/python-redis-lock/issues/58) and",
    "  [#71](https://github.com/ionelmc/python-redis-lock/issues/71), are waiters sleeping a",
    "  whole `BLPOP` timeout after a missed signal.",
]
print("\n".join(lines[next(i for i, l in enumerate(lines) if l.startswith("| variant")):]))
page = "docs/src/measurements/clients.md"
if os.environ["WRITE_PAGE"] == "1":
    open(page, "w").write("\n".join(lines) + "\n")
    print(f"\nwrote {page}", file=sys.stderr)
else:
    print(f"\n{page} not written: it needs every scenario (--scenarios)", file=sys.stderr)
EOF
