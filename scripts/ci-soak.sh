#!/usr/bin/env bash
# scripts/ci-soak.sh: the whole test suite, the README's test command, run N times with one core
# kept busy — the machine CI sometimes runs on (issue 40, item 15).
#
# WHY
#   A test asserts what lockbench guarantees, not what a quiet machine happens to give. A test
#   that passes alone but fails when another process takes a core is measuring the machine. This
#   script makes that load on purpose: a shell loop spinning on one core (`while :; do :; done`)
#   for the whole soak, killed by its pid at the end (also on Ctrl-C or an error).
#
# USAGE
#   bash scripts/ci-soak.sh            # 3 runs of `cargo test` with one busy core
#   bash scripts/ci-soak.sh -n 5       # 5 runs
#   bash scripts/ci-soak.sh -n 1 -- --test it clients::   # arguments after -- go to cargo test
#
# OUTPUT
#   One line per run (passed/failed, wall seconds, the failing tests), then "N of M green".
#   Each run's full output is kept in results/soak/run-K.log. Exit 0 only if every run passed.
set -uo pipefail
cd "$(dirname "$0")/.."

runs=3
while (($#)); do
    case "$1" in
    -n | --runs)
        runs="${2:?-n needs a number}"
        shift 2
        ;;
    --)
        shift
        break
        ;;
    -h | --help)
        sed -n '2,20p' "$0"
        exit 0
        ;;
    *)
        echo "ci-soak.sh: unknown argument '$1' (valid: -n N, -- CARGO_TEST_ARGS...)" >&2
        exit 2
        ;;
    esac
done
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || {
    echo "ci-soak.sh: -n must be a positive integer, got '$runs'" >&2
    exit 2
}

mkdir -p results/soak
# Build first, outside the timed and loaded runs: the soak is about the tests, not the compiler.
cargo test --no-run "$@" >/dev/null 2>&1 || {
    echo "ci-soak.sh: the tests do not build (cargo test --no-run $*)" >&2
    exit 1
}

# The busy core: a shell loop, in its own process, killed by its pid however this script ends.
bash -c 'while :; do :; done' &
busy=$!
trap 'kill "$busy" 2>/dev/null; wait "$busy" 2>/dev/null' EXIT
echo "ci-soak.sh: one core kept busy by pid $busy; $runs run(s) of: cargo test $*"

green=0
for ((k = 1; k <= runs; k++)); do
    log="results/soak/run-$k.log"
    start=$(date +%s)
    cargo test "$@" >"$log" 2>&1
    rc=$?
    secs=$(($(date +%s) - start))
    if ((rc == 0)); then
        green=$((green + 1))
        echo "run $k: passed in ${secs} s ($log)"
    else
        failed=$(grep -E '^    [a-z_:0-9]+$' "$log" | sed 's/^ *//' | tr '\n' ' ')
        echo "run $k: FAILED (exit $rc) in ${secs} s: ${failed:-see $log}"
    fi
done
echo "$green of $runs green (load average now: $(cut -d' ' -f1-3 /proc/loadavg))"
((green == runs))
