#!/usr/bin/env bash
# Renders a run's report.html in headless Chromium: takes a screenshot, checks that the DOM has
# the summary table and the Pareto charts, and that the page logged no console errors.
# Usage: scripts/check-report.sh RUN_DIR   (writes RUN_DIR/report-screenshot.png)
set -euo pipefail
run=${1:?usage: check-report.sh RUN_DIR}
html=$(realpath "$run/report.html")
chrome=${CHROME:-$(command -v chromium || command -v chromium-browser || true)}
[ -n "$chrome" ] || { echo "chromium not found (apt-get install chromium)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
       --disable-component-update --disable-sync --user-data-dir="$tmp/profile" --enable-logging=stderr --v=0)
"$chrome" "${flags[@]}" --window-size=1400,2600 --screenshot="$run/report-screenshot.png" "file://$html" 2>"$tmp/console.log" >/dev/null
"$chrome" "${flags[@]}" --dump-dom "file://$html" 2>>"$tmp/console.log" >"$tmp/dom.html"
fail=0
grep -q '<table id="summary">' "$tmp/dom.html" || { echo "report.html: summary table missing" >&2; fail=1; }
[ "$(grep -c '<svg' "$tmp/dom.html")" -ge 4 ] || { echo "report.html: fewer than 4 charts" >&2; fail=1; }
if grep -E 'CONSOLE\(|Uncaught|ERROR:.*(javascript|Refused)' "$tmp/console.log" | grep -v 'dbus' >&2; then
  echo "report.html: console errors (above)" >&2; fail=1
fi
size=$(stat -c %s "$run/report-screenshot.png" 2>/dev/null || echo 0)
[ "$size" -gt 20000 ] || { echo "report.html: screenshot missing or blank ($size bytes)" >&2; fail=1; }
[ $fail = 0 ] && echo "report.html renders: table, $(grep -c '<svg' "$tmp/dom.html") charts, no console errors, screenshot $run/report-screenshot.png"
exit $fail
