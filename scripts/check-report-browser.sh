#!/usr/bin/env bash
# Renders a run's report.html in headless Chromium and fails unless every <img> loaded
# (naturalWidth > 0) and there is at least one; saves DIR/report-screenshot.png.
#   scripts/check-report-browser.sh             fresh small `compare` run (memory backend) in a temp dir
#   scripts/check-report-browser.sh --dir DIR   check an existing run directory instead
# LOCKBENCH=path picks the binary (default target/release/lockbench, else target/debug/lockbench).
# Installs Debian's chromium with apt-get when it is missing (needs root).
set -euo pipefail
cd "$(dirname "$0")/.."
die() { echo "check-report-browser: FAIL: $*" >&2; exit 1; }

dir=
case "${1:-}" in
    --dir) [[ -d "${2:-}" ]] || die "--dir needs an existing run directory, got '${2:-}'"
           dir=$(cd "$2" && pwd) ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    "") ;;
    *) die "unknown argument '$1' (usage: $0 [--dir RUN_DIR])" ;;
esac

if ! command -v chromium >/dev/null; then
    [[ $(id -u) -eq 0 ]] || die "chromium is not installed and we are not root: apt-get install chromium"
    policy=$(apt-cache policy chromium 2>/dev/null || true)
    if [[ "$policy" != *"Candidate: "[0-9]* ]]; then
        echo "apt-cache knows no chromium candidate: running apt-get update" >&2
        apt-get update -qq
    fi
    echo "installing chromium (apt-get install -y chromium)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

if [[ -z "$dir" ]]; then
    bin=${LOCKBENCH:-}
    if [[ -z "$bin" ]]; then
        bin=target/debug/lockbench
        [[ -x target/release/lockbench ]] && bin=target/release/lockbench
    fi
    [[ -x "$bin" ]] || die "no lockbench binary at '$bin' (build it, or set LOCKBENCH=path)"
    dir=$(mktemp -d)/run
    "$bin" compare --backend memory --sections 300 --workers 8 --keys 2 --ttl 5ms \
        --dist 'exponential(mean=4ms)' --quiet --out "$dir" >/dev/null
    echo "run: $bin -> $dir"
fi
[[ -f "$dir/report.html" ]] || die "no report.html in $dir"

# The wrapper loads report.html in a same-directory iframe and writes a verdict into its own DOM.
# Reading the iframe's document from file:// needs --allow-file-access-from-files.
wrapper="$dir/.check-report-wrapper.html"
profile=$(mktemp -d)
log=$(mktemp)
trap 'rm -rf "$wrapper" "$profile" "$log"' EXIT
cat > "$wrapper" <<'EOF'
<!doctype html><html><head><script>
function check(f) {
  var v = document.getElementById('verdict'), imgs, bad;
  try { imgs = Array.from(f.contentDocument.images); } catch (e) { v.textContent = 'ERROR ' + e; return; }
  bad = imgs.filter(function (i) { return !(i.complete && i.naturalWidth > 0); });
  v.textContent = imgs.length === 0 ? 'FAIL page has no images'
    : bad.length ? 'FAIL broken images: ' + bad.map(function (i) { return i.getAttribute('src'); }).join(' ')
    : 'OK ' + imgs.length + ' images loaded: ' + imgs.map(function (i) {
        return i.getAttribute('src') + ' ' + i.naturalWidth + 'x' + i.naturalHeight; }).join(', ');
}
</script></head><body><pre id="verdict">PENDING iframe never loaded</pre>
<iframe src="report.html" onload="check(this)"></iframe></body></html>
EOF
chrome=(timeout 120 chromium --headless --disable-gpu --no-sandbox --disable-dev-shm-usage
        --user-data-dir="$profile" --virtual-time-budget=10000)
verdict=$("${chrome[@]}" --allow-file-access-from-files --dump-dom "file://$wrapper" 2>>"$log" \
    | sed -n 's/.*<pre id="verdict">\([^<]*\)<.*/\1/p') || true
[[ -n "$verdict" ]] || { tail -5 "$log" >&2; die "chromium printed no verdict for $wrapper"; }
shot="$dir/report-screenshot.png"
"${chrome[@]}" --window-size=1280,3000 --screenshot="$shot" "file://$dir/report.html" 2>>"$log" \
    || { tail -5 "$log" >&2; die "chromium could not take the screenshot"; }
echo "screenshot: $shot"
[[ "$verdict" == OK* ]] || die "$dir/report.html: $verdict"
echo "check-report-browser: $dir/report.html: $verdict"
