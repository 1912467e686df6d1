#!/usr/bin/env bash
# Wall time and peak RSS of `sweep trace gen --like` on the published cc-traces-weka-062126 stats
# (393 traces, 98,827 requests, 21.6 G input tokens as 338 M hash ids): plain JSONL and gzip, each
# three times, then the generated corpus checked with `sweep trace stats --against`. Needs the
# shared data (SWEEP_SHARED_DATA, default ../shared/data) and a release build (cargo build --release).
set -euo pipefail
cd "$(dirname "$0")/../.."
DATA="${SWEEP_SHARED_DATA:-../shared/data}"
STATS="$DATA/agentx-traces/cc-traces-weka-062126.stats.yaml"
[ -f "$STATS" ] || { echo "shared data not found at $DATA (set SWEEP_SHARED_DATA)"; exit 2; }
BIN=target/release/sweep
[ -x "$BIN" ] || { echo "build first: cargo build --release"; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for ext in jsonl jsonl.gz; do
  for i in 1 2 3; do
    /usr/bin/time -f "$ext run $i: %e s wall, %U s user, %M KB peak RSS" \
      "$BIN" trace gen --like "$STATS" -o "$out/like.$ext" 2>&1 | grep -E 'plan:|wall'
  done
  ls -l "$out/like.$ext" | awk -v e="$ext" '{printf "%s: %d bytes\n", e, $5}'
done
/usr/bin/time -f "stats --against: %e s wall, %M KB peak RSS" "$BIN" trace stats "$out/like.jsonl.gz" --against "$STATS" | tail -2
