#!/usr/bin/env bash
# scripts/sim-crosscheck.sh: is the simulator right? (issue 12)
#
# Runs PROFILE (default profiles/crosscheck.toml: 20 clients, 4 keys, sections around a 20 ms
# TTL, del and token) for real on a private redis-server, then simulates the same profile and
# seed with the round trips and timer lateness that real run measured (--sim-from), and
# prints `lockbench crosscheck`: overruns, stale releases, wrongful deletes and overlap
# incidents per section, and the overlap-time fraction, side by side with the interval of
# each difference (simultaneous 99 %). Then the negative control: the same simulation with
# round trips ten times the measured ones, which must disagree.
#
# USAGE
#   scripts/sim-crosscheck.sh [PROFILE] [--no-build]
#   Exit codes: 0 the model agrees and the wrong model is caught; 1 otherwise.
#   Needs redis-server on PATH. Writes results/crosscheck-<UTC timestamp>/{real,sim,wrong}.

set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PROFILE=profiles/crosscheck.toml
BUILD=1
for a in "$@"; do
    case "$a" in
    --no-build) BUILD=0 ;;
    -h | --help)
        sed -n '/^# USAGE/,/^# *Needs/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *) PROFILE="$a" ;;
    esac
done
[[ -f "$PROFILE" ]] || { echo "sim-crosscheck.sh: no profile $PROFILE" >&2; exit 2; }
((BUILD)) && cargo build --release --quiet
LB=target/release/lockbench
OUT="results/crosscheck-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$OUT"

echo "== real run on a private redis-server ($PROFILE)"
"$LB" compare "$PROFILE" --backend spawn --quiet --out "$OUT/real"
echo "== simulated with what the real run measured"
"$LB" compare "$PROFILE" --backend sim --sim-from "$OUT/real" --quiet --out "$OUT/sim"
ok=0
"$LB" crosscheck "$OUT/real" "$OUT/sim" || ok=1

# The negative control: round trips ten times the measured release round trips.
rtt=$(python3 - "$OUT/real/summary.json" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))["variants"][0]["release_latency_ms"]
p50, p99 = v["p50"], max(v["p99"], 1.5 * v["p50"])
print(f"lognormal(median={10 * p50:.3f}ms,p99={10 * p99:.3f}ms)")
PY
)
echo "== negative control: round trip $rtt (ten times the measured)"
"$LB" compare "$PROFILE" --backend sim --sim-from "$OUT/real" --sim-rtt "$rtt" --quiet --out "$OUT/wrong"
if "$LB" crosscheck "$OUT/real" "$OUT/wrong"; then
    echo "the wrong model was NOT caught" >&2
    ok=1
else
    echo "(the wrong model is caught, as it must be)"
fi
echo "results: $OUT"
exit "$ok"
