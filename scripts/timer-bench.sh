#!/usr/bin/env bash
# scripts/timer-bench.sh: the precise timer's default runtime at a thousand holders (issue 43).
#
# WHAT IS MEASURED
#   The p99 of the timer error (how late a section ended against its drawn end,
#   summary.json `timer_error_ms.p99`) of
#       lockbench run --backend memory --workers 1000 --keys 1000 --ttl 1s \
#           --dist 'uniform(5ms,50ms)' --timer precise --duration ${DURATION}
#   with the default runtime (no --threads: one thread for the precise timer, see
#   PRECISE_ON_ONE_THREAD in src/cli.rs) against the same run with `--threads 2` (the
#   default before, one per core on this 2-core machine), in ROUNDS alternating pairs in one
#   invocation (the order alternates every round), so that both sides meet the same machine.
#
# THE TARGET
#   The default's p99 within 0.2 ms in 9 runs of 10 (0.1 ms the aim). The script prints every
#   p99, how many default runs are within 0.2 ms and within 0.1 ms, the medians, each run's
#   runtime threads as its manifest recorded them, and the load average before and after
#   (the p99 is the host's scheduler as much as lockbench's: read it with the load).
#   Exit 1 when fewer than TARGET_RUNS default runs are within 0.2 ms.
#
# USAGE
#   scripts/timer-bench.sh [BIN]   (default: target/release/lockbench under
#                                   $CARGO_TARGET_DIR or ./target; build it with
#                                   `cargo build --release`)
#   ROUNDS=10 DURATION=4s TARGET_RUNS=9 scripts/timer-bench.sh
set -euo pipefail

ROUNDS=${ROUNDS:-10}
DURATION=${DURATION:-4s}
TARGET_RUNS=${TARGET_RUNS:-9}
BIN=${1:-${CARGO_TARGET_DIR:-target}/release/lockbench}
if [[ ! -x $BIN ]]; then
    echo "timer-bench: $BIN is not an executable: build it with cargo build --release" >&2
    exit 2
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# One run; prints "p99_ms threads".
one() {
    local out=$WORK/run-$RANDOM$RANDOM
    "$BIN" run --backend memory --workers 1000 --keys 1000 --ttl 1s \
        --dist 'uniform(5ms,50ms)' --timer precise --duration "$DURATION" \
        --out "$out" "$@" >/dev/null
    python3 - "$out" <<'PY'
import json, sys
d = sys.argv[1]
s = json.load(open(f"{d}/summary.json"))
m = json.load(open(f"{d}/manifest.json"))
v = s["variants"][0] if "variants" in s else s
print(f'{v["timer_error_ms"]["p99"]:.3f} {m["runtime_threads"]}')
PY
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
defaults=() peers=()
for ((r = 1; r <= ROUNDS; r++)); do
    if ((r % 2)); then
        d=$(one); p=$(one --threads 2)
    else
        p=$(one --threads 2); d=$(one)
    fi
    defaults+=("${d% *}") peers+=("${p% *}")
    printf 'round %2d  default (%s thread): p99 %s ms   --threads 2: p99 %s ms\n' \
        "$r" "${d#* }" "${d% *}" "${p% *}"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$TARGET_RUNS" "${defaults[*]}" "${peers[*]}" <<'PY'
import statistics, sys
target = int(sys.argv[1])
d = [float(x) for x in sys.argv[2].split()]
p = [float(x) for x in sys.argv[3].split()]
within = sum(x <= 0.2 for x in d)
aim = sum(x <= 0.1 for x in d)
print(f"default      p99 ms: {' '.join(f'{x:.3f}' for x in d)}  (median {statistics.median(d):.3f})")
print(f"--threads 2  p99 ms: {' '.join(f'{x:.3f}' for x in p)}  (median {statistics.median(p):.3f})")
print(f"default runs within 0.2 ms: {within} of {len(d)} (target {target}); within 0.1 ms: {aim}")
sys.exit(0 if within >= target else 1)
PY
