#!/usr/bin/env bash
# Builds the book in docs/ as HTML into docs/book/ (open docs/book/index.html) with the mdbook on
# PATH, or else one installed from crates.io into .tools/ (git-ignored) the first time. CI does
# not build the book: it runs tests/it/docs.rs, which checks the generated reference pages and the
# links.
set -euo pipefail
cd "$(dirname "$0")/.."

tools="$PWD/.tools"
mdbook=$(command -v mdbook || echo "$tools/bin/mdbook")
if [[ ! -x "$mdbook" ]]; then
    echo "installing mdbook into $tools (once; a few minutes)"
    cargo install mdbook --locked --root "$tools"
fi
"$mdbook" build docs
echo "book: docs/book/index.html"
