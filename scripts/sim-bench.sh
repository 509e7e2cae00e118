#!/usr/bin/env bash
# scripts/sim-bench.sh: how fast and how small is the simulator? (issue 12)
#
# Runs profiles/day.toml (the article's backend: 1,000 requests/s, 100,000 keys, 10,000 request
# slots, TTL 30 s, events = "none", in two parts at once: sim_parallel = 2) with the token
# release for SHORT and for LONG of simulated time, and LONG again in one piece (the peer: how
# much the parts buy, as a ratio from the same invocation), each as its own process, and prints
# per run: simulated seconds, wall seconds, simulated seconds per wall second, executor events
# per wall second, sections, and peak RSS (wait4).
# Then the two figures the issue asks for, from the same invocation (and the machine's load
# average before and after, since a loaded machine slows every figure):
#   - a day's wall time, extrapolated from the LONG run's speed (an upper bound: see below), and
#   - memory flatness: peak RSS of LONG / peak RSS of SHORT (flat = close to 1).
# A full day is `--full` (one run of 24 h simulated; a minute or two): the figure for the
# target (under 60 s of wall time).
#
# USAGE
#   scripts/sim-bench.sh [--short 10m] [--long 1h] [--full] [--no-build]
#   Writes results/sim-bench-<UTC timestamp>.csv.

set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SHORT=10m
LONG=1h
FULL=0
BUILD=1
while (($# > 0)); do
    case "$1" in
    --short) SHORT="$2"; shift 2 ;;
    --long) LONG="$2"; shift 2 ;;
    --full) FULL=1; shift ;;
    --no-build) BUILD=0; shift ;;
    -h | --help)
        sed -n '/^# USAGE/,/^# *Writes/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *) echo "sim-bench.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
((BUILD)) && cargo build --release --quiet
LB=target/release/lockbench
WORK=$(mktemp -d)
trap 'rm -rf -- "$WORK"' EXIT
CSV="results/sim-bench-$(date -u +%Y%m%dT%H%M%SZ).csv"
mkdir -p results
echo "run,simulated_s,wall_s,sim_s_per_wall_s,events_per_wall_s,sections,peak_rss_mib" >"$CSV"

one() { # one NAME DURATION [FLAGS...]
    local name="$1" dur="$2"
    shift 2
    /usr/bin/time -f "%M" -o "$WORK/$name.rss" "$LB" run profiles/day.toml --release token \
        --duration "$dur" --quiet --out "$WORK/$name" "$@" >/dev/null
    python3 - "$WORK/$name/summary.json" "$(cat "$WORK/$name.rss")" "$name" >>"$CSV" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))["variants"][0]
s = v["simulated"]
print(f"{sys.argv[3]},{v['elapsed_s']:.0f},{s['wall_s']:.2f},{s['simulated_s_per_wall_s']:.0f},"
      f"{s['events_per_wall_s']:.0f},{v['sections']},{int(sys.argv[2]) / 1024:.1f}")
PY
}

# The figures are wall time: a busy machine slows them. Its load is printed with them.
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
one short "$SHORT"
one long "$LONG"
# The peer: the long run in one piece, right after it in parts (the profile's sim_parallel).
one long-1 "$LONG" --sim-parallel 1
((FULL)) && one day 24h
python3 - "$CSV" <<'PY'
import csv, sys
rows = {r["run"]: r for r in csv.DictReader(open(sys.argv[1]))}
print(f"{'run':<7} {'simulated s':>12} {'wall s':>8} {'sim s/wall s':>13} {'events/wall s':>14} {'sections':>10} {'peak RSS MiB':>13}")
for r in rows.values():
    print(f"{r['run']:<7} {r['simulated_s']:>12} {r['wall_s']:>8} {r['sim_s_per_wall_s']:>13} "
          f"{float(r['events_per_wall_s']):>14,.0f} {int(r['sections']):>10,} {r['peak_rss_mib']:>13}")
l, s = rows["long"], rows["short"]
day = 86400 / float(l["sim_s_per_wall_s"])
# The long run cuts as many interval-log intervals as a day (about 2,000), so per simulated
# second it pays 24x the day's interval cost: its extrapolation is an upper bound (measured:
# 181-227 s extrapolated, 144 s for the whole day, same binary and hour). --full measures it.
print(f"a simulated day at the long run's speed: {day:.0f} s of wall time, an upper bound "
      f"({'the full day below is the figure' if 'day' in rows else 'target < 60 s: ' + ('met' if day < 60 else 'see --full')})")
print(f"memory flatness: peak RSS long / short = {float(l['peak_rss_mib']) / float(s['peak_rss_mib']):.2f}")
o = rows["long-1"]
print(f"in parts vs in one piece (long run, same invocation): wall time {float(o['wall_s']) / float(l['wall_s']):.2f}x "
      f"shorter, peak RSS {float(l['peak_rss_mib']) / float(o['peak_rss_mib']):.2f}x")
if "day" in rows:
    d = rows["day"]
    print(f"the full day: {d['wall_s']} s of wall time, {int(d['sections']):,} sections, peak RSS {d['peak_rss_mib']} MiB "
          f"(target < 60 s: {'met' if float(d['wall_s']) < 60 else 'NOT met'})")
PY
echo "load average (1, 5, 15 min) before: $LOAD_BEFORE, after: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
echo "csv: $CSV"
