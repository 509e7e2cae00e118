#!/usr/bin/env bash
# Memory stays flat however long the run: the same workload for a short and a 4× longer run,
# in one invocation, reporting peak RSS of each and their ratio (≈ 1 means flat; a harness that
# kept every sample would grow ~4×). Sections and events.csv rows are printed beside it so the
# longer run visibly recorded ~4× more. Uses the memory backend so Redis's own memory and the
# network do not enter the figure. Usage: scripts/memory.sh [SHORT_SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
short=${1:-3}
long=$((short * 4))
cargo build --release --quiet
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

python3 - "$short" "$long" "$out" <<'PY'
import json, resource, subprocess, sys
short, long_, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]

def run(seconds, tag):
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    subprocess.run(
        ["target/release/lockbench", "run", "--backend", "memory", "--workers", "200",
         "--keys", "1000", "--ttl", "5ms", "--dist", "exponential(mean=2ms)",
         "--duration", f"{seconds}s", "--quiet", "--out", f"{out}/{tag}"],
        check=True)
    # ru_maxrss of children is the max over all waited children: run the longer one second.
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    s = json.load(open(f"{out}/{tag}/summary.json"))["variants"][0]
    rows = sum(1 for _ in open(f"{out}/{tag}/events.csv")) - 1
    return rss, max(before, 0), s["sections"], rows

rss_s, _, sec_s, rows_s = run(short, "short")
rss_l, _, sec_l, rows_l = run(long_, "long")
print(f"{'run':<8}{'seconds':>8}{'sections':>12}{'events rows':>14}{'peak RSS (MiB)':>16}")
print(f"{'short':<8}{short:>8}{sec_s:>12}{rows_s:>14}{rss_s/1024:>16.1f}")
print(f"{'long':<8}{long_:>8}{sec_l:>12}{rows_l:>14}{rss_l/1024:>16.1f}")
print(f"sections ratio long/short: {sec_l/sec_s:.2f}   peak RSS ratio long/short: {rss_l/rss_s:.2f}")
PY
