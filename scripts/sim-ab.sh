#!/usr/bin/env bash
# scripts/sim-ab.sh: is one build of the simulator faster than another? (issue 12)
#
# Runs profiles/day.toml (token release) for DURATION of simulated time with binary A, then B,
# alternating, PAIRS times, and prints each run's simulation wall time (from summary.json), each
# pair's B/A ratio and the median ratio. This machine's speed swings by a third from one minute
# to the next, so only alternating pairs of the same invocation compare two builds; a single
# run of each says little. Also checks that both builds simulated the same thing: the figures of
# summary.json (wall time and executor counts aside) must be equal for the same seed, or the
# script says they differ (expected when a change alters the order of events on purpose).
#
# USAGE
#   scripts/sim-ab.sh A_BINARY B_BINARY [--duration 30m] [--pairs 6] [--profile FILE]
#   e.g. cp target/release/lockbench /tmp/lb-old; (change, build); \
#        scripts/sim-ab.sh /tmp/lb-old target/release/lockbench

set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if (($# < 2)); then
    sed -n '/^# USAGE/,/^$/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
A="$1" B="$2"
shift 2
DURATION=30m
PAIRS=6
PROFILE=profiles/day.toml
while (($# > 0)); do
    case "$1" in
    --duration) DURATION="$2"; shift 2 ;;
    --pairs) PAIRS="$2"; shift 2 ;;
    --profile) PROFILE="$2"; shift 2 ;;
    -h | --help)
        sed -n '/^# USAGE/,/^$/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *) echo "sim-ab.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
for bin in "$A" "$B"; do
    [[ -x "$bin" ]] || { echo "sim-ab.sh: $bin is not an executable" >&2; exit 2; }
done
WORK=$(mktemp -d)
trap 'rm -rf -- "$WORK"' EXIT
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$PAIRS"); do
    for side in a b; do
        bin=$A
        [[ $side == b ]] && bin=$B
        "$bin" run "$PROFILE" --release token --duration "$DURATION" --quiet \
            --out "$WORK/$side$i" >/dev/null
    done
done
echo "load average after:  $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$WORK" "$PAIRS" "$A" "$B" <<'PY'
import json, statistics, sys
work, pairs, a, b = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def load(side, i):
    v = json.load(open(f"{work}/{side}{i}/summary.json"))["variants"][0]
    sim = v.pop("simulated")
    return sim["wall_s"], v
rows, same = [], True
for i in range(1, pairs + 1):
    (wa, va), (wb, vb) = load("a", i), load("b", i)
    same = same and va == vb
    rows.append((wa, wb, wb / wa))
print(f"{'pair':>4} {'A wall s':>9} {'B wall s':>9} {'B/A':>6}")
for i, (wa, wb, r) in enumerate(rows, 1):
    print(f"{i:>4} {wa:>9.2f} {wb:>9.2f} {r:>6.3f}")
ma = statistics.median(r[0] for r in rows)
mb = statistics.median(r[1] for r in rows)
mr = statistics.median(r[2] for r in rows)
faster = sum(r[2] < 1 for r in rows)
print(f"median: A {ma:.2f} s, B {mb:.2f} s, B/A {mr:.3f} (B faster in {faster} of {pairs} pairs)")
print(f"A = {a}\nB = {b}")
print("figures: the same for both builds" if same else
      "figures: DIFFERENT between the builds (same seed) — expected only if the change "
      "reorders events on purpose")
PY
