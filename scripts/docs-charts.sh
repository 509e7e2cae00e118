#!/usr/bin/env bash
# Makes the charts the docs show from a real run with a fixed seed, and copies them into
# docs/charts/. Uses a private redis-server when one is installed (the memory model otherwise;
# force one with BACKEND=spawn|memory). LOCKBENCH_BIN=path skips the release build.
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

# del against token on one key: overruns, wrongful deletes and overlap with the same seed.
"$bin" compare --backend "$backend" --seed 1 --workers 20 --keys 1 --ttl 20ms \
    --dist 'exponential(mean=15ms)' --think 'constant(1ms)' --duration 2s \
    --releases del,token -q --out "$out/compare"

mkdir -p docs/charts
for png in durations survival timeline acquire-latency compare; do
    cp "$out/compare/$png.png" "docs/charts/$png.png"
done
cp "$out/compare/summary.csv" docs/charts/summary.csv
echo "docs/charts/: $(cd docs/charts && ls | tr '\n' ' ')"
