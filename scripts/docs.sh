#!/usr/bin/env bash
# Builds the book in docs/ as HTML into docs/book/ (open docs/book/index.html) with the pinned
# mdbook: the one on PATH if it is that version, or else one installed from crates.io into
# .tools/ (git-ignored) the first time (about 2 minutes of compiling on 2 cores; then cached).
# A newer mdbook is a one-line change below. `.ci/run` does not build the book (see there); the reference
# pages and the links are checked by tests/it/docs.rs.
#
#   bash scripts/docs.sh            # builds docs/book/
#   bash scripts/docs.sh --which    # only installs; prints the mdbook's path
set -euo pipefail
cd "$(dirname "$0")/.."

MDBOOK_VERSION=0.4.52
tools="$PWD/.tools"
mkdir -p "$tools"
# One installer at a time (two runs may start on a cold cache); `.ci/run` starts this before
# it installs what may be missing, flock's util-linux among it.
if command -v flock >/dev/null 2>&1; then
    exec 9>"$tools/.lock"
    flock 9
fi

mdbook=$(command -v mdbook || true)
if [[ -z "$mdbook" || "$("$mdbook" --version)" != "mdbook v$MDBOOK_VERSION" ]]; then
    mdbook="$tools/bin/mdbook"
    if [[ ! -x "$mdbook" || "$("$mdbook" --version)" != "mdbook v$MDBOOK_VERSION" ]]; then
        echo "installing mdbook $MDBOOK_VERSION into $tools (once)" >&2
        # Without the `serve`/`watch` features: building the book needs neither, and they
        # double the compile.
        cargo install mdbook --locked --version "$MDBOOK_VERSION" \
            --no-default-features --features search --root "$tools" >&2
    fi
fi
if [[ "${1:-}" == "--which" ]]; then
    echo "$mdbook"
    exit 0
fi
# A page missing from the disk that SUMMARY.md lists fails the build (create-missing = false).
"$mdbook" build docs >&2
echo "book: docs/book/index.html"
