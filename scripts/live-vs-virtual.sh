#!/usr/bin/env bash
# One point two ways: the DSV4.1-Flash GB300 TP4 c4 recipe (flags and env as
# `sweep plan --show-commands` prints them), synthetic traces, replayed
#   - live: `sweep replay --url` against `sweep engine serve --time-scale K` on a free loopback port,
#   - virtual: `sweep replay --engine "<the same flags>"` on the virtual clock,
# and the aggregates compared (relative difference of live against virtual).
#
# Usage: scripts/live-vs-virtual.sh [--duration S] [--time-scale K] [--conc C] [--sweep PATH] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/.."

duration=3600
scale=20
conc=4
sweep_bin=""
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --duration) duration="$2"; shift 2 ;;
    --time-scale) scale="$2"; shift 2 ;;
    --conc) conc="$2"; shift 2 ;;
    --sweep) sweep_bin="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
if [ -z "$sweep_bin" ]; then
  cargo build --release -p harness >&2
  sweep_bin=target/release/sweep
fi
out="${out:-$(mktemp -d)/live-vs-virtual}"
mkdir -p "$out"

flags="--model-path deepseek-ai/DeepSeek-V4.1-Flash --served-model-name deepseek-ai/DeepSeek-V4.1-Flash \
--trust-remote-code --speculative-algorithm DSPARK --speculative-dspark-block-size 5 --reasoning-parser auto \
--tool-call-parser auto --watchdog-timeout 3600 --tensor-parallel-size 4 --expert-parallel-size 1 \
--chunked-prefill-size 16384 --mem-fraction-static 0.8 --tokenizer-backend fastokens --max-running-requests 128 \
--cuda-graph-max-bs-decode 128 --prefill-decode-interval 0 --swa-prefix-tails 4096 --enable-metrics"
export NCCL_CUMEM_ENABLE=1 SGLANG_DEFAULT_THINKING=1 SGLANG_DSPARK_FOLDED_SAMPLING=2 \
  SGLANG_DSPARK_OPT_MARKOV_W2_BF16=True SGLANG_DSV41_ENGRAM_HOST_TABLE_LAYOUT=per_rank

"$sweep_bin" replay --engine "$flags" --hardware gb300 --concurrency "$conc" --duration "$duration" --gpus 4 \
  --out "$out/virtual" | tail -3

# shellcheck disable=SC2086
"$sweep_bin" engine serve $flags --hardware gb300 --time-scale "$scale" --port 0 2> "$out/server.log" &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  url=$(grep -o 'http://127.0.0.1:[0-9]*' "$out/server.log" | head -1 || true)
  [ -n "$url" ] && break
  sleep 0.1
done
/usr/bin/env time -f "live wall %e s, client CPU %U+%S s" "$sweep_bin" replay --url "$url" --concurrency "$conc" \
  --duration "$duration" --gpus 4 --out "$out/live" | tail -3

python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
v, l = (json.load(open(f"{out}/{k}/agg.json")) for k in ("virtual", "live"))
def g(a, p):
    for k in p.split("."):
        a = a[k]
    return a
rows = [
    ("total tok/s/GPU", "request_metrics.throughput.per_gpu.total_tput_tps"),
    ("TTFT p50 (s)", "request_metrics.latency.ttft.p50"),
    ("TTFT p90 (s)", "request_metrics.latency.ttft.p90"),
    ("E2EL p90 (s)", "request_metrics.latency.e2el.p90"),
    ("ITL p90 (s)", "request_metrics.latency.itl.p90"),
    ("ISL mean", "request_metrics.tokens.input.mean"),
    ("OSL mean", "request_metrics.tokens.output_actual.mean"),
    ("requests ok", "num_requests_successful"),
    ("server cache hit rate", "server_metrics.cache_hit_rate"),
]
print("| metric | virtual clock | live (time-scaled) | live / virtual − 1 |\n|---|---|---|---|")
for name, p in rows:
    a, b = g(v, p), g(l, p)
    d = f"{(b / a - 1) * 100:+.1f} %" if a else "n/a"
    print(f"| {name} | {a:.6g} | {b:.6g} | {d} |")
PY
echo "artifacts: $out"
