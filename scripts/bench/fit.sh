#!/usr/bin/env bash
# Wall time of `sweep calibrate fit` on the published DSV4.1-Flash GB300 calibration table at a
# fixed budget (1 restart x 24 evaluations, 3 points x 1200 s each on the virtual clock), with one
# and with two simulations at once. Needs the shared data (SWEEP_SHARED_DATA, default ../shared/data)
# and a release build (cargo build --release).
set -euo pipefail
cd "$(dirname "$0")/../.."
DATA="${SWEEP_SHARED_DATA:-../shared/data}"
TABLE="$DATA/seed/dsv41flash-gb300-sglang-agentic.yaml"
TRACES="${FIT_TRACES:-$DATA/agentx-traces/kv-cache-tester-200.jsonl.gz}"
[ -f "$TABLE" ] || { echo "shared data not found at $DATA (set SWEEP_SHARED_DATA)"; exit 2; }
BIN=target/release/sweep
[ -x "$BIN" ] || { echo "build first: cargo build --release"; exit 2; }
out=$(mktemp -d)
for jobs in 1 2; do
  start=$(date +%s.%N)
  "$BIN" calibrate fit --results "$TABLE" --config dsv41flash-fp4-gb300-sglang-agentic-dspark \
    --traces "$TRACES" --duration 1200 --restarts 1 --max-evals 24 --jobs "$jobs" \
    --params eta_bw,eta_flops,tau_layer_us,tau_step_us,eager_overhead_us,a2a_latency_us,osl_scale,delay_scale \
    --out "$out/fit-$jobs.yaml" > "$out/fit-$jobs.md" 2>/dev/null
  end=$(date +%s.%N)
  evals=$(grep -o '[0-9]* evaluations in' "$out/fit-$jobs.md" | grep -o '^[0-9]*')
  printf 'jobs %s: %.1f s wall, %s evaluations, %.2f s per evaluation (3 points each)\n' \
    "$jobs" "$(echo "$end - $start" | bc)" "$evals" "$(echo "($end - $start) / $evals" | bc -l)"
done
cmp -s <(grep -v wall_s "$out/fit-1.yaml") <(grep -v wall_s "$out/fit-2.yaml") && echo "profiles identical with 1 and 2 jobs (deterministic)" || echo "profiles DIFFER between 1 and 2 jobs"
rm -rf "$out"
