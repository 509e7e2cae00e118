#!/usr/bin/env bash
# Installs the pinned lock libraries that lockbench's drivers run (issue 33) and says where.
# Idempotent: a cache is rebuilt only when its pin file (or the interpreter) changed, which a
# stamp (sha256 of the pin file and the interpreter's version) inside the cache records.
#
#   bash scripts/drivers.sh                 # installs; prints: NAME PATH, one line per runtime
#   bash scripts/drivers.sh --which python  # the venv's python (installs first if needed)
#   bash scripts/drivers.sh --which node    # the node that runs drivers/node/driver.js
#   bash scripts/drivers.sh --which LIB     # the interpreter for driver LIB (e.g. redlock5)
#   bash scripts/drivers.sh --command LIB   # the driver's argv, one word a line
#
# Caches (git-ignored): .drivers/python (a Python 3.11 venv, pip --require-hashes from
# drivers/python/requirements.txt) and drivers/node/node_modules (npm ci from
# drivers/node/package-lock.json). Install logs go to stderr; stdout has only the answer.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
PY_LIBS=(redis-py python-redis-lock python-redis-lock-renew pottery)
NODE_LIBS=(redlock5 redlock4 redis-semaphore redis-lock)

die() {
  echo "drivers.sh: $*" >&2
  exit 1
}

usage() {
  sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

mode=install
arg=
case "${1:-}" in
"") ;;
--which | --command)
  mode=${1#--}
  arg=${2:-}
  [[ -n $arg ]] || usage
  ;;
-h | --help) usage ;;
*) usage ;;
esac

lib_runtime() { # LIB -> python|node
  local l
  for l in "${PY_LIBS[@]}"; do [[ $l == "$1" ]] && echo python && return; done
  for l in "${NODE_LIBS[@]}"; do [[ $l == "$1" ]] && echo node && return; done
  die "no driver named '$1' (python: ${PY_LIBS[*]}; node: ${NODE_LIBS[*]})"
}

need=all
if [[ $mode != install ]]; then
  case $arg in
  python | node) need=$arg ;;
  *) need=$(lib_runtime "$arg") ;;
  esac
fi

find_python() {
  local c
  for c in python3.11 python3; do
    if command -v "$c" >/dev/null 2>&1 &&
      [[ $("$c" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) == 3.11 ]]; then
      command -v "$c"
      return
    fi
  done
  die "Python 3.11 is needed for the Python drivers (python3.11 or a python3 that is 3.11); none found on PATH"
}

find_node() {
  command -v node >/dev/null 2>&1 || die "Node.js (node, 18 or newer) is needed for the Node drivers; none found on PATH"
  command -v npm >/dev/null 2>&1 || die "npm is needed to install the Node drivers' packages; none found on PATH"
  local major
  major=$(node -p 'process.versions.node.split(".")[0]')
  ((major >= 18)) || die "Node.js 18 or newer is needed (found $(node --version))"
  command -v node
}

sha() { sha256sum "$@" | sha256sum | cut -c1-64; }

mkdir -p .drivers
# One installer at a time (tests may call this in parallel on a cold cache).
exec 9>.drivers/.lock
flock 9

install_python() {
  local py stamp want venv=.drivers/python
  py=$(find_python)
  want="$(sha drivers/python/requirements.txt) $("$py" -c 'import sys; print(sys.version.split()[0])')"
  stamp=$venv/.lockbench-stamp
  if [[ ! -f $stamp || $(cat "$stamp") != "$want" || ! -x $venv/bin/python ]]; then
    echo "drivers.sh: installing the Python drivers' packages into $venv" >&2
    rm -rf "$venv"
    "$py" -m venv "$venv" >&2
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
      --require-hashes -r drivers/python/requirements.txt >&2
    echo "$want" >"$stamp"
  fi
}

install_node() {
  local stamp want mods=drivers/node/node_modules
  find_node >/dev/null
  want="$(sha drivers/node/package-lock.json drivers/node/package.json) $(node --version)"
  stamp=$mods/.lockbench-stamp
  if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
    echo "drivers.sh: installing the Node drivers' packages into $mods (npm ci)" >&2
    (cd drivers/node && npm ci --no-audit --no-fund --loglevel=error >&2)
    echo "$want" >"$stamp"
  fi
}

[[ $need == all || $need == python ]] && install_python
[[ $need == all || $need == node ]] && install_node

PYBIN=$ROOT/.drivers/python/bin/python
case $mode in
install)
  echo "python $PYBIN"
  echo "node $(command -v node) (packages in $ROOT/drivers/node/node_modules)"
  ;;
which)
  if [[ $need == python ]]; then echo "$PYBIN"; else command -v node; fi
  ;;
command)
  if [[ $need == python ]]; then
    printf '%s\n' "$PYBIN" "$ROOT/drivers/python/driver.py" --lib "$arg"
  else
    printf '%s\n' "$(command -v node)" "$ROOT/drivers/node/driver.js" --lib "$arg"
  fi
  ;;
esac
