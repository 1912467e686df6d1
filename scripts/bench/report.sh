#!/usr/bin/env bash
# What the reports cost a run, and what compression saves: the main job on the virtual clock
# (`sweep run full-sweep-fail-fast`, 13 one-hour points with the gate seeds), its wall time, the
# time `sweep report` takes to redraw everything (charts, report.md, report.html and the 13 point
# pages, reading every point's records), and the run folder's size with the compressed records
# against the same records uncompressed. Needs a release build.
#
#   scripts/bench/report.sh [RUNS]        (default: 3 timings of `sweep report`)
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=target/release/sweep
[ -x "$BIN" ] || { echo "build first: cargo build --release -p harness"; exit 2; }
runs=${1:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
t0=$(date +%s.%N)
"$BIN" run full-sweep-fail-fast --out "$out/run" > "$out/run.txt" 2>&1
t1=$(date +%s.%N)
printf 'sweep run full-sweep-fail-fast: %.1f s wall (load average %s)\n' "$(echo "$t1 - $t0" | bc)" "$(cut -d' ' -f1 /proc/loadavg)"
for i in $(seq "$runs"); do
  t0=$(date +%s.%N)
  "$BIN" report "$out/run" > /dev/null
  t1=$(date +%s.%N)
  printf 'sweep report (charts, report.md, report.html, %s point pages): %.2f s wall\n' \
    "$(find "$out/run" -mindepth 3 -name report.html | wc -l)" "$(echo "$t1 - $t0" | bc)"
done
gz=$(find "$out/run" -name profile_export.jsonl.gz -printf '%s\n' | awk '{s+=$1} END {print s}')
plain=$(find "$out/run" -name profile_export.jsonl.gz -exec sh -c 'gzip -dc "$1" | wc -c' _ {} \; | awk '{s+=$1} END {print s}')
total=$(du -sb "$out/run" | cut -f1)
printf 'run folder: %.1f MB with compressed records (%.1f MB of them); %.1f MB were they plain (%.1f MB)\n' \
  "$(echo "$total / 1000000" | bc -l)" "$(echo "$gz / 1000000" | bc -l)" \
  "$(echo "($total - $gz + $plain) / 1000000" | bc -l)" "$(echo "$plain / 1000000" | bc -l)"
