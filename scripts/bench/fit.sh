#!/usr/bin/env bash
# Wall time of the committed `sweep calibrate fit` (docs/calibration.md): the three published
# DSV4.1-Flash GB300 points replaying the synthesized published corpus, cost parameters only,
# 4 trace orders, one-hour points, two-level search (restarts at 900 s, polish at 3600 s), with
# one and with two simulations at once; checks that both write the same profile. Generates the
# corpus (1.8 GB, `sweep trace gen --like`, seed 42) under target/corpus when it is missing.
# Needs the shared data (SWEEP_SHARED_DATA, default ../shared/data) and a release build.
#
#   scripts/bench/fit.sh [JOBS...]        (default: 1 2)
set -euo pipefail
cd "$(dirname "$0")/../.."
DATA="${SWEEP_SHARED_DATA:-../shared/data}"
TABLE="$DATA/seed/dsv41flash-gb300-sglang-agentic.yaml"
STATS="$DATA/agentx-traces/cc-traces-weka-062126.stats.yaml"
CORPUS="${FIT_CORPUS:-target/corpus/cc-traces-weka-062126-like-s42.jsonl}"
[ -f "$TABLE" ] || { echo "shared data not found at $DATA (set SWEEP_SHARED_DATA)"; exit 2; }
BIN=target/release/sweep
[ -x "$BIN" ] || { echo "build first: cargo build --release"; exit 2; }
if [ ! -f "$CORPUS" ]; then
  mkdir -p "$(dirname "$CORPUS")"
  "$BIN" trace gen --like "$STATS" --seed 42 -o "$CORPUS"
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
jobs_list=("${@:-1 2}")
for jobs in ${jobs_list[@]}; do
  start=$(date +%s.%N)
  "$BIN" calibrate fit --results "$TABLE" --config dsv41flash-fp4-gb300-sglang-agentic-dspark \
    --traces "$CORPUS" --traces-like "$STATS" --traces-seed 42 \
    --duration 3600 --coarse-duration 900 --polish-evals 24 --trace-orders 4 --restarts 2 --max-evals 50 \
    --params eta_bw,eta_flops,tau_layer_us,tau_step_us,eager_overhead_us,a2a_latency_us \
    --weights ttft_p50=0.1,ttft_p90=0.1,ttft_p99=0.05 --jobs "$jobs" --timings \
    --out "$out/fit-$jobs.yaml" > "$out/fit-$jobs.md" 2> "$out/fit-$jobs.err"
  end=$(date +%s.%N)
  evals=$(grep -o '[0-9]* evaluations in' "$out/fit-$jobs.md" | grep -o '^[0-9]*')
  loss=$(grep -o 'loss [0-9.]*' "$out/fit-$jobs.md" | head -1)
  printf 'jobs %s: %.1f s wall, %s evaluations, %s (load average %s)\n' \
    "$jobs" "$(echo "$end - $start" | bc)" "$evals" "$loss" "$(cut -d' ' -f1 /proc/loadavg)"
  tr '\r' '\n' < "$out/fit-$jobs.err" | sed -n '/^timings/,$p'
done
if [ -f "$out/fit-1.yaml" ] && [ -f "$out/fit-2.yaml" ]; then
  cmp -s <(grep -v wall_s "$out/fit-1.yaml") <(grep -v wall_s "$out/fit-2.yaml") \
    && echo "profiles identical with 1 and 2 jobs (deterministic)" || echo "profiles DIFFER between 1 and 2 jobs"
fi
