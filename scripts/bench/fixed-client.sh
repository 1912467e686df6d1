#!/usr/bin/env bash
# The live client under InferenceX's fixed-length load: `sweep replay --isl --osl` at a high
# concurrency against `sweep engine serve` in real time (time scale 1) with the DeepSeek-R1 FP8
# H200 1k/1k recipe's flags, on this machine's cores. Prints the client's CPU (seconds, per 1,000
# requests, peak share of the cores) and the TTFT the path from the engine to the client added
# (client TTFT − the server's own, per request, from its engine-time stamps; see docs/replay.md).
# Target (docs/PERFORMANCE.md): conc 512 of 1k/1k streams on 2 cores with ≤ 1 ms added TTFT p50.
#
# Usage: scripts/bench/fixed-client.sh [--sweep PATH] [--conc 512] [--isl 1024] [--osl 1024]
#        [--num-prompts N (default 2 × conc)] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."

sweep_bin=""
conc=512
isl=1024
osl=1024
prompts=""
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --sweep) sweep_bin="$2"; shift 2 ;;
    --conc) conc="$2"; shift 2 ;;
    --isl) isl="$2"; shift 2 ;;
    --osl) osl="$2"; shift 2 ;;
    --num-prompts) prompts="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
prompts="${prompts:-$((2 * conc))}"
if [ -z "$sweep_bin" ]; then
  cargo build --release -p harness >&2
  sweep_bin=target/release/sweep
fi
out="${out:-$(mktemp -d)/fixed-client}"
mkdir -p "$out"

flags=(--model-path deepseek-ai/DeepSeek-R1-0528 --served-model-name deepseek-ai/DeepSeek-R1-0528
  --trust-remote-code --tensor-parallel-size 8 --data-parallel-size 1 --disable-radix-cache
  --max-running-requests 512 --cuda-graph-max-bs 512 --chunked-prefill-size 32768 --max-prefill-tokens 32768
  --mem-fraction-static 0.82 --attention-backend flashinfer --stream-interval 10 --hardware h200 --enable-metrics)
source scripts/lib/engine-server.sh
trap stop_server EXIT
start_server "$out/server.log"
start=$(date +%s.%N)
"$sweep_bin" replay --url "$url" --isl "$isl" --osl "$osl" --concurrency "$conc" --num-prompts "$prompts" \
  --gpus 8 --out "$out/sweep" > "$out/sweep.log" 2>&1 \
  || { echo "sweep replay failed; see $out/sweep.log" >&2; tail -5 "$out/sweep.log" >&2; exit 1; }
end=$(date +%s.%N)
stop_server

python3 - "$out/sweep/agg.json" "$start" "$end" "$conc" "$isl" "$osl" <<'PY'
import json, sys
agg = json.load(open(sys.argv[1]))
c = agg.get("client", {})
added = c.get("added_latency_ms", {})
bs = agg["benchmark_serving"]
print(f"fixed {sys.argv[5]}/{sys.argv[6]} at conc {sys.argv[4]}: {bs['completed']} requests in {bs['duration']:.1f} s "
      f"(wall {float(sys.argv[3]) - float(sys.argv[2]):.1f} s), {bs['output_throughput']:.0f} output tok/s")
print(f"client CPU {c.get('cpu_seconds', float('nan')):.2f} s ({c.get('cpu_seconds_per_1000_requests', float('nan')):.2f} s per 1,000 requests), "
      f"peak {100 * (c.get('cpu_max_share') or 0):.0f} % of the cores")
print(f"added TTFT p50 {added.get('p50', float('nan')):.3f} ms, p90 {added.get('p90', float('nan')):.3f} ms, p99 {added.get('p99', float('nan')):.3f} ms")
PY
