#!/usr/bin/env bash
# Side by side with InferenceX's fixed-sequence-length client: benchmark_serving.py (the random
# dataset, `--backend vllm`, as benchmark_lib.sh's run_benchmark_serving invokes it) and
# `sweep replay --url --isl --osl` run the same scenario against
#   (a) `sweep engine serve` with the DeepSeek-R1-0528 FP8 H200 recipe's flags (h200 profile,
#       DeepSeek-V4 tokenizer, --time-scale K), a fresh server for each client so both start from
#       an empty cache; the server's /metrics are kept after each run;
#   (b) llama.cpp's Python server (scripts/llama/setup.sh: llama-cpp-python and a tiny
#       random-weight GGUF), real time on this machine's CPU, a fresh server for each client,
# and scripts/compare-fixed.py compares the two result JSONs: `completed`, `output_lens`
# (identical: both draw them with numpy's legacy generator from the same seed), `input_lens`
# (mean within 1 %, two-sample KS) and every metric as sweep / benchmark_serving, PASS/FAIL
# within 2 % for the time-scaled engine (benchmark_serving's wall-clock figures × K into the
# server's time); llama.cpp's ratios are reported without a target. Against a server that sends
# no usage chunk (llama-cpp-python) benchmark_serving counts 0 output tokens per request (its
# `output_tokens` defaults to 0, so its tokenizer fallback never runs): its output_lens are then
# reported as not comparable, and sweep's are checked against numpy's draws.
#
# Usage: scripts/crosscheck-benchmark-serving.sh [--isl N] [--osl N] [--conc C] [--time-scale K]
#        [--ttft-tolerance F|none] [--llama-isl N] [--llama-osl N] [--llama-conc C]
#        [--no-engine] [--no-llama] [--sweep PATH] [--out DIR] [--check] [--install-only]
#   defaults: 1024/1024 at conc 4, K = 5; llama.cpp 128/32 at conc 2.
#   --check: exit 1 when a target is missed (either server's request count, output_lens or
#            input_lens; a metric of the time-scaled engine beyond 2 %).
#   --install-only: make benchmark_serving's venv and stop (CI installs it while it builds).
#   --ttft-tolerance: the TTFT rows' target (default 0.02; `none` reports them without one).
#            benchmark_serving's TTFT includes its own wall-clock path (a new aiohttp session and
#            connection per request, the server tokenizing its decoded-random-id prompts), about
#            1.5 ms per request here, which counts K times against a time-scaled server: see
#            docs/replay.md, "Side by side with benchmark_serving".
# Writes into --out (default a temporary folder): engine/{bs,sweep}/ and llama/{bs,sweep}/ (each
# client's results and log), the servers' logs and /metrics, compare-*.md and summary.json.
# Needs: python3 (venv, pip, PyPI: numpy, aiohttp, tqdm, transformers, huggingface_hub; cached in
# $SWEEP_CACHE/bench-serving-venv, default ~/.cache/sweep), curl, the shared data
# (SWEEP_SHARED_DATA: inferencex/fixed-seq-len/ and tokenizers/deepseek-v4/); for llama.cpp what
# scripts/llama/setup.sh needs (its wheel is built once, about 8 CPU-minutes).
set -euo pipefail
cd "$(dirname "$0")/.."

isl=1024
osl=1024
conc=4
scale=5
ttft_tol=0.02
llama_isl=128
llama_osl=32
llama_conc=2
run_engine=1
run_llama=1
install_only=0
sweep_bin=""
out=""
check=0
while [ $# -gt 0 ]; do
  case "$1" in
    --isl) isl="$2"; shift 2 ;;
    --osl) osl="$2"; shift 2 ;;
    --conc) conc="$2"; shift 2 ;;
    --time-scale) scale="$2"; shift 2 ;;
    --ttft-tolerance) ttft_tol="$2"; shift 2 ;;
    --llama-isl) llama_isl="$2"; shift 2 ;;
    --llama-osl) llama_osl="$2"; shift 2 ;;
    --llama-conc) llama_conc="$2"; shift 2 ;;
    --no-engine) run_engine=0; shift ;;
    --no-llama) run_llama=0; shift ;;
    --sweep) sweep_bin="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --check) check=1; shift ;;
    --install-only) install_only=1; shift ;;
    *) echo "unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
t_start=$(date +%s)
data="${SWEEP_SHARED_DATA:-../shared/data}"
client_dir="${BENCH_SERVING_DIR:-$data/inferencex/fixed-seq-len}"
tok_src="$data/tokenizers/deepseek-v4"
cache="${SWEEP_CACHE:-$HOME/.cache/sweep}"
# benchmark_serving's dependencies (no torch: transformers loads the tokenizer alone), pinned so
# that the cached venv is rebuilt when the pins change.
pins="numpy==2.4.6 aiohttp==3.14.5 tqdm==4.70.1 transformers==5.25.0 huggingface_hub==2.4.0"
venv="${BENCH_SERVING_VENV:-$cache/bench-serving-venv}"
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$venv/.pins" 2>/dev/null)" != "$pins" ]; then
  echo "installing benchmark_serving's dependencies into $venv" >&2
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  # shellcheck disable=SC2086
  "$venv/bin/pip" install --quiet --disable-pip-version-check $pins
  echo "$pins" > "$venv/.pins"
fi
[ "$install_only" = 1 ] && exit 0
[ -f "$client_dir/benchmark_serving.py" ] || { echo "benchmark_serving.py not found in $client_dir (set SWEEP_SHARED_DATA)" >&2; exit 1; }
[ -f "$tok_src/tokenizer.json" ] || { echo "tokenizer not found: $tok_src" >&2; exit 1; }
if [ -z "$sweep_bin" ]; then
  cargo build --release -p harness >&2
  sweep_bin=target/release/sweep
fi
[ -x "$sweep_bin" ] || sweep_bin=$(command -v "$sweep_bin") || { echo "sweep binary not found: $sweep_bin" >&2; exit 1; }
sweep_bin=$(realpath "$sweep_bin")
out="${out:-$(mktemp -d)/crosscheck-bs}"
mkdir -p "$out"
out=$(realpath "$out")

# The tokenizer in a folder of its own (transformers resolves tokenizer_config.json beside it),
# loaded offline.
tok="$out/tokenizer"
rm -rf "$tok" && mkdir -p "$tok" && cp "$tok_src"/* "$tok"/
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HOME="$out/hf-home" TOKENIZERS_PARALLELISM=false

# A client run: "$@" with its output in LOG, in the background and waited for, so that an
# interrupt reaches this script's trap at once (bash defers a trap until a foreground child has
# exited, and ignores SIGINT when the child handled it, as Python's asyncio does).
client_pid=""
run_client() {
  local log=$1 rc=0
  shift
  "$@" > "$log" 2>&1 &
  client_pid=$!
  wait "$client_pid" || rc=$?
  client_pid=""
  return $rc
}
stop_client() {
  [ -n "$client_pid" ] || return 0
  kill "$client_pid" 2>/dev/null || true
  wait "$client_pid" 2>/dev/null || true
  client_pid=""
}

# benchmark_serving.py exactly as benchmark_lib.sh runs it (plus --model, --base-url, --tokenizer;
# --disable-tqdm keeps the log readable). Runs from $out so nothing is written beside the client.
# Args: URL MODEL ISL OSL CONC DIR
run_bs() {
  local url=$1 model=$2 i=$3 o=$4 c=$5 dir=$6
  mkdir -p "$dir"
  run_client "$dir.log" bash -c 'cd "$1" && shift && exec "$@"' _ "$dir" "$venv/bin/python" "$client_dir/benchmark_serving.py" \
    --model "$model" --backend vllm --base-url "$url" --tokenizer "$tok" --dataset-name random \
    --random-input-len "$i" --random-output-len "$o" --random-range-ratio 0.8 --num-prompts $((10 * c)) \
    --max-concurrency "$c" --request-rate inf --ignore-eos --save-result --num-warmups $((2 * c)) \
    --percentile-metrics 'ttft,tpot,itl,e2el' --result-dir "$dir" --result-filename result.json --disable-tqdm \
    || { echo "benchmark_serving failed; last lines of $dir.log:" >&2; tail -20 "$dir.log" >&2; return 1; }
}

# Args: URL ISL OSL CONC DIR [more sweep replay flags]
run_sweep() {
  local url=$1 i=$2 o=$3 c=$4 dir=$5
  shift 5
  run_client "$dir.log" "$sweep_bin" replay --url "$url" --isl "$i" --osl "$o" --concurrency "$c" \
    --random-range-ratio 0.8 --tokenizer "$tok" --out "$dir" "$@" \
    || { echo "sweep replay failed; last lines of $dir.log:" >&2; tail -20 "$dir.log" >&2; return 1; }
}

# The lengths benchmark_serving's sample_random_requests draws (its own numpy calls, in its order:
# the prefix ids, input lengths, output lengths), as JSON. Args: ISL OSL CONC FILE
draws() {
  "$venv/bin/python" - "$1" "$2" $((10 * $3)) > "$4" <<'PY'
import json, sys
import numpy as np
isl, osl, n = map(int, sys.argv[1:4])
ratio, seed, prefix_len, vocab_size = 0.8, 0, 0, 128000
np.random.seed(seed)
np.random.randint(0, vocab_size, size=prefix_len)
draw = lambda seq_len: np.random.randint(int(seq_len * ratio), seq_len + 1, size=n).tolist()
ins = draw(isl)
print(json.dumps({"input_lens": ins, "output_lens": draw(osl)}))
PY
}

# Seconds since $1 (epoch seconds), for the summary.
since() { echo $(( $(date +%s) - $1 )); }

llama_pid=""
stop_llama() {
  [ -n "$llama_pid" ] || return 0
  kill "$llama_pid" 2>/dev/null || true
  wait "$llama_pid" 2>/dev/null || true
  llama_pid=""
}
source scripts/lib/engine-server.sh
trap 'stop_client; stop_server; stop_llama' EXIT
trap 'exit 130' INT TERM

status=0
declare -A took
compare_flags=()
[ "$check" = 1 ] && compare_flags+=(--check)

if [ "$run_engine" = 1 ]; then
  t0=$(date +%s)
  # InferenceX's dsr1_fp8_h200.sh: 512 running requests for 1k/1k, 256 otherwise.
  mrr=256
  [ "$isl" = 1024 ] && [ "$osl" = 1024 ] && mrr=512
  model=deepseek-ai/DeepSeek-R1-0528
  flags=(--model-path "$model" --served-model-name "$model" --trust-remote-code
    --tensor-parallel-size 8 --data-parallel-size 1 --disable-radix-cache
    --max-running-requests "$mrr" --cuda-graph-max-bs "$mrr" --chunked-prefill-size 32768
    --max-prefill-tokens 32768 --mem-fraction-static 0.82 --attention-backend flashinfer
    --stream-interval 10 --decode-log-interval 1 --enable-metrics
    --tokenizer-path "$tok" --hardware h200 --time-scale "$scale")
  mkdir -p "$out/engine"
  echo "== sweep engine serve (DeepSeek-R1-0528 H200 TP8, ×$scale): benchmark_serving $isl/$osl c$conc" >&2
  start_server "$out/engine/server-bs.log"
  run_bs "$url" "$model" "$isl" "$osl" "$conc" "$out/engine/bs" || status=1
  curl -sf "$url/metrics" > "$out/engine/metrics-bs.prom" || true
  stop_server
  echo "== sweep engine serve: sweep replay" >&2
  start_server "$out/engine/server-sweep.log"
  run_sweep "$url" "$isl" "$osl" "$conc" "$out/engine/sweep" || status=1
  curl -sf "$url/metrics" > "$out/engine/metrics-sweep.prom" || true
  stop_server
  if [ -f "$out/engine/bs/result.json" ] && [ -f "$out/engine/sweep/benchmark_serving.json" ]; then
    draws "$isl" "$osl" "$conc" "$out/engine/draws.json"
    python3 scripts/compare-fixed.py "$out/engine/bs/result.json" "$out/engine/sweep/benchmark_serving.json" \
      --drawn "$out/engine/draws.json" --sweep-agg "$out/engine/sweep/agg.json" \
      --name "sweep engine serve, DeepSeek-R1-0528 H200 TP8, $isl/$osl c$conc, time scale $scale" \
      --time-scale "$scale" --tolerance 0.02 --ttft-tolerance "$ttft_tol" --server-metrics "$out/engine/metrics-bs.prom" "$out/engine/metrics-sweep.prom" \
      --json "$out/compare-engine.json" ${compare_flags[@]+"${compare_flags[@]}"} | tee "$out/compare-engine.md" || status=1
  else
    status=1
  fi
  took[engine]=$(since "$t0")
fi

if [ "$run_llama" = 1 ]; then
  t0=$(date +%s)
  if [ -z "${SWEEP_LLAMA_PYTHON:-}" ] || [ -z "${SWEEP_LLAMA_GGUF:-}" ]; then
    eval "$(SWEEP_SHARED_DATA="$data" scripts/llama/setup.sh)"
  fi
  n_ctx=$(( (llama_isl + llama_osl + 256 + 511) / 512 * 512 ))
  start_llama() {
    local port
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "$SWEEP_LLAMA_PYTHON" -m llama_cpp.server --model "$SWEEP_LLAMA_GGUF" --n_ctx "$n_ctx" --n_threads 2 \
      --interrupt_requests False --host 127.0.0.1 --port "$port" > "$1" 2>&1 &
    llama_pid=$!
    llama_url="http://127.0.0.1:$port"
    for _ in $(seq 1 600); do
      curl -sf "$llama_url/v1/models" >/dev/null 2>&1 && return 0
      kill -0 "$llama_pid" 2>/dev/null || break
      sleep 0.5
    done
    echo "llama_cpp.server did not start; see $1" >&2
    exit 1
  }
  mkdir -p "$out/llama"
  echo "== llama.cpp (llama_cpp.server, tiny GGUF, n_ctx $n_ctx): benchmark_serving $llama_isl/$llama_osl c$llama_conc" >&2
  start_llama "$out/llama/server-bs.log"
  lmodel=$(curl -sf "$llama_url/v1/models" | python3 -c 'import json, sys; print(json.load(sys.stdin)["data"][0]["id"])')
  run_bs "$llama_url" "$lmodel" "$llama_isl" "$llama_osl" "$llama_conc" "$out/llama/bs" || status=1
  stop_llama
  echo "== llama.cpp: sweep replay" >&2
  start_llama "$out/llama/server-sweep.log"
  run_sweep "$llama_url" "$llama_isl" "$llama_osl" "$llama_conc" "$out/llama/sweep" \
    --context-length "$n_ctx" --ready-timeout 300 || status=1
  stop_llama
  if [ -f "$out/llama/bs/result.json" ] && [ -f "$out/llama/sweep/benchmark_serving.json" ]; then
    draws "$llama_isl" "$llama_osl" "$llama_conc" "$out/llama/draws.json"
    python3 scripts/compare-fixed.py "$out/llama/bs/result.json" "$out/llama/sweep/benchmark_serving.json" \
      --drawn "$out/llama/draws.json" --sweep-agg "$out/llama/sweep/agg.json" \
      --name "llama.cpp (llama-cpp-python, tiny GGUF, CPU), $llama_isl/$llama_osl c$llama_conc, real time" \
      --tolerance none --json "$out/compare-llama.json" ${compare_flags[@]+"${compare_flags[@]}"} | tee "$out/compare-llama.md" || status=1
  else
    status=1
  fi
  took[llama]=$(since "$t0")
fi

wall=$(since "$t_start")
python3 - "$out" "$wall" "${took[engine]:-}" "${took[llama]:-}" "$status" <<'PY'
import json, os, sys
out, wall, t_engine, t_llama, status = sys.argv[1:]
summary = {"wall_s": int(wall), "exit_status": int(status)}
for name, took in (("engine", t_engine), ("llama", t_llama)):
    p = os.path.join(out, f"compare-{name}.json")
    if os.path.exists(p):
        summary[name] = json.load(open(p))
        summary[name]["wall_s"] = int(took)
    elif took:
        summary[name] = {"pass": False, "missed": ["no result"], "wall_s": int(took)}
summary["pass"] = all(summary[n].get("pass") for n in ("engine", "llama") if n in summary)
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)
PY
echo "wall time ${wall} s (engine ${took[engine]:-skipped} s, llama.cpp ${took[llama]:-skipped} s); artifacts: $out" >&2
exit $status
