#!/usr/bin/env bash
# Regenerates the charts the README shows (docs/charts/) from real runs with fixed seeds:
#   - `compare profiles/naive-vs-token.toml` (the README's worked example): durations,
#     survival, timeline, acquire-latency and compare charts;
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

mkdir -p docs/charts
for png in durations survival timeline acquire-latency compare; do
    cp "$out/compare/$png.png" "docs/charts/$png.png"
done
cp "$out/compare/summary.csv" docs/charts/summary.csv
cp "$out/table.txt" docs/charts/compare-table.txt
cp "$out/sweep/sweep.png" docs/charts/sweep.png
cp "$out/sweep/sweep.csv" docs/charts/sweep.csv
cp "$out/sweep-table.txt" docs/charts/sweep-table.txt
echo "docs/charts/: $(cd docs/charts && ls | tr '\n' ' ')"
