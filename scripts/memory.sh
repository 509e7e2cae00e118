#!/usr/bin/env bash
# Memory stays flat however long the run: the same workload for a short and a 4× longer run,
# in one invocation, reporting peak RSS of each and their ratio (≈ 1 means flat; a harness that
# kept every sample would grow ~4×). Sections and events.csv rows are printed beside it so the
# longer run visibly recorded ~4× more; then a million sections by count and 10,000 workers
# (budget: 200 MB). Uses the memory backend so Redis's own memory and the network do not enter
# the figure. Usage: scripts/memory.sh [SHORT_SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
short=${1:-3}
long=$((short * 4))
cargo build --release --quiet
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

python3 - "$short" "$long" "$out" <<'PY'
import json, os, subprocess, sys
short, long_, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]

def run(tag, *args):
    # wait4 gives this child's own peak RSS, whatever ran before it.
    p = subprocess.Popen(["target/release/lockbench", "run", "--backend", "memory", *args,
                          "--quiet", "--out", f"{out}/{tag}"])
    _, status, usage = os.wait4(p.pid, 0)
    if status != 0:
        sys.exit(f"lockbench {tag} failed ({status})")
    s = json.load(open(f"{out}/{tag}/summary.json"))["variants"][0]
    rows = sum(1 for _ in open(f"{out}/{tag}/events.csv")) - 1
    return usage.ru_maxrss, s["sections"], rows

base = ["--workers", "200", "--keys", "1000", "--ttl", "5ms", "--dist", "exponential(mean=2ms)"]
runs = [
    ("short", f"{short} s", run("short", *base, "--duration", f"{short}s")),
    ("long", f"{long_} s", run("long", *base, "--duration", f"{long_}s")),
    # A million sections by count, and ten thousand workers: both must stay small.
    ("million", "1M sect", run("million", *base, "--sections", "1000000")),
    ("10k-work", "3 s", run("10k", "--workers", "10000", "--keys", "10000", "--ttl", "50ms",
                           "--dist", "exponential(mean=10ms)", "--duration", "3s")),
]
print(f"{'run':<10}{'length':>8}{'sections':>12}{'events rows':>14}{'peak RSS (MiB)':>16}")
for tag, length, (rss, sections, rows) in runs:
    print(f"{tag:<10}{length:>8}{sections:>12}{rows:>14}{rss/1024:>16.1f}")
(rss_s, sec_s, _), (rss_l, sec_l, _) = runs[0][2], runs[1][2]
print(f"sections ratio long/short: {sec_l/sec_s:.2f}   peak RSS ratio long/short: {rss_l/rss_s:.2f}")
print(f"peak RSS of 1M sections / short: {runs[2][2][0]/rss_s:.2f}   10,000 workers: {runs[3][2][0]/1024:.1f} MiB (budget 200)")
PY
