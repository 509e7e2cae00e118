#!/usr/bin/env bash
# Regenerates the charts the README and the book show (docs/src/charts/, inside the book's
# source so mdBook copies them) from real runs with fixed seeds:
#   - `compare profiles/naive-vs-token.toml` (the README's tour, the guide "Compare releases"):
#     durations, survival, timeline, acquire-latency and compare charts;
#   - `sweep profiles/seed-backend.toml` over six TTLs: sweep.png.
# Uses a private redis-server when one is installed (the memory model otherwise; force one with
# BACKEND=spawn|memory). LOCKBENCH_BIN=path skips the release build. Never edit the PNGs by hand.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${LOCKBENCH_BIN:-}
if [[ -z "$bin" ]]; then
    cargo build --release --quiet
    bin=target/release/lockbench
fi
backend=${BACKEND:-auto}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

"$bin" compare profiles/naive-vs-token.toml --backend "$backend" --out "$out/compare" \
    | sed -e "s#$out/compare#results/<run-id>#" > "$out/table.txt"
"$bin" sweep profiles/seed-backend.toml --backend "$backend" --ttl 5s,10s,20s,30s,60s,120s \
    --duration 4s --out "$out/sweep" 2>/dev/null \
    | sed -e "s#$out/sweep#results/<run-id>-sweep#" > "$out/sweep-table.txt"

charts=docs/src/charts
mkdir -p "$charts"
for png in durations survival timeline acquire-latency compare; do
    cp "$out/compare/$png.png" "$charts/$png.png"
done
cp "$out/compare/summary.csv" "$charts"/summary.csv
cp "$out/table.txt" "$charts"/compare-table.txt
cp "$out/sweep/sweep.png" "$charts"/sweep.png
cp "$out/sweep/sweep.csv" "$charts"/sweep.csv
cp "$out/sweep-table.txt" "$charts"/sweep-table.txt
echo "$charts/: $(cd "$charts" && ls | tr '\n' ' ')"
