#!/usr/bin/env bash
# Wall time and peak memory of the committed joint fit (`sweep calibrate fit --points`,
# docs/calibration.md): every published point of ../shared/data/published/points.yaml predicted at
# each evaluation (12 DeepSeek-R1 fixed-length points, 4 DeepSeek-V4.1-Flash AgentX points at
# 1,200 s), per-GPU eta_bw, tau_layer_us, tau_step_us and the shared eager_layer_us, the AgentX
# config excluded from the loss; with one and with two simulations at once, checking that both
# write the same profiles. Needs the shared data (SWEEP_SHARED_DATA) and a release build.
#
#   scripts/bench/fit-joint.sh [JOBS...]        (default: 1 2)
set -euo pipefail
cd "$(dirname "$0")/../.."
DATA="${SWEEP_SHARED_DATA:-../shared/data}"
POINTS="$DATA/published/points.yaml"
[ -f "$POINTS" ] || { echo "shared data not found at $DATA (set SWEEP_SHARED_DATA)"; exit 2; }
BIN=target/release/sweep
[ -x "$BIN" ] || { echo "build first: cargo build --release"; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
jobs_list=("${@:-1 2}")
for jobs in ${jobs_list[@]}; do
  mkdir -p "$out/$jobs"
  /usr/bin/time -f '%e %M' -o "$out/time-$jobs" "$BIN" calibrate fit --points "$POINTS" \
    --exclude dsv41flash-fp4-b200-sglang-agentic-dspark --max-evals 80 --jobs "$jobs" \
    --out "$out/$jobs" > "$out/fit-$jobs.md" 2> "$out/fit-$jobs.err"
  read -r wall rss < "$out/time-$jobs"
  evals=$(grep -o '[0-9]* evaluations in' "$out/fit-$jobs.md" | grep -o '^[0-9]*')
  loss=$(grep -o 'loss [0-9.]*' "$out/fit-$jobs.md" | head -1)
  printf 'jobs %s: %s s wall, peak RSS %.0f MB, %s evaluations, %s (load average %s)\n' \
    "$jobs" "$wall" "$(echo "$rss / 1024" | bc)" "$evals" "$loss" "$(cut -d' ' -f1 /proc/loadavg)"
done
if [ -d "$out/1" ] && [ -d "$out/2" ]; then
  if diff -rq -I '^  wall_s:' "$out/1" "$out/2" > /dev/null; then echo "profiles identical with 1 and 2 jobs (but for wall_s)"; else echo "profiles DIFFER between 1 and 2 jobs"; diff -r "$out/1" "$out/2" | head -20; exit 1; fi
fi
