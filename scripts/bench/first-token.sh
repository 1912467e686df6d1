#!/usr/bin/env bash
# First-token latency in real time against `sweep engine serve` (time scale 1): per request, the
# client-observed TTFT minus the server's own TTFT for that request (its engine-time stamps, see
# docs/replay.md), split into the first turn of each play (turn 0) and later turns, and TTFT
# p50/p90 over the profiling window. With --agentx VENV, agentx-harness (the reference replay)
# replays the same traces at the same concurrency, seed and duration against a fresh server with
# the same flags, and its TTFTs are printed beside.
#
# The default traces are short plays (40 traces of three ~1K-token turns, 0.5 s apart): most
# requests are then the first of a play, sent right after the previous play's end on a pooled
# connection, and the engine's TTFT stays near its 17 ms floor.
#
# Usage: scripts/bench/first-token.sh [--sweep PATH] [--conc 2] [--duration 60]
#        [--traces FILE (default: short plays)] [--agentx VENV] [--out DIR]
# Needs: python3; the shared data (SWEEP_SHARED_DATA) for the DeepSeek-V4 tokenizer.
set -euo pipefail
cd "$(dirname "$0")/../.."

sweep_bin=""
conc=2
duration=60
traces=""
agentx=""
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --sweep) sweep_bin="$2"; shift 2 ;;
    --conc) conc="$2"; shift 2 ;;
    --duration) duration="$2"; shift 2 ;;
    --traces) traces="$2"; shift 2 ;;
    --agentx) agentx="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
if [ -z "$sweep_bin" ]; then
  cargo build --release -p harness >&2
  sweep_bin=target/release/sweep
fi
out="${out:-$(mktemp -d)/first-token}"
mkdir -p "$out"
tok="${SWEEP_SHARED_DATA:-../shared/data}/tokenizers/deepseek-v4"
[ -f "$tok/tokenizer.json" ] || { echo "tokenizer not found: $tok (set SWEEP_SHARED_DATA)" >&2; exit 1; }

if [ -z "$traces" ]; then
  traces="$out/short-plays.jsonl"
  python3 - "$traces" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(40):
        reqs = [{"t": k * 0.5, "type": "n", "model": "m", "in": (10 + 4 * k) * 64, "out": 16,
                 "hash_ids": list(range(1, 11 + 4 * k)), "input_types": ["text"], "output_types": ["text"],
                 "stop": "end_turn", "api_time": 0.2, "think_time": 0.0} for k in range(3)]
        f.write(json.dumps({"id": f"trace_{i:04d}", "models": ["m"], "block_size": 64, "hash_id_scope": "local",
                            "tool_tokens": 0, "system_tokens": 0, "requests": reqs}) + "\n")
PY
fi

# Both tools read the traces from a folder of one JSON document per trace (agentx-harness's
# weka_trace layout), in file-name order, so their sequential samplers hand out the same traces.
plain="$out/traces"
rm -rf "$plain"
python3 scripts/split-weka-traces.py "$traces" "$plain"

flags=(--model-path deepseek-ai/DeepSeek-V4.1-Flash --served-model-name deepseek-ai/DeepSeek-V4.1-Flash
  --tensor-parallel-size 4 --hardware gb300 --enable-metrics --enable-cache-report
  --tokenizer-path "$tok" --tokenizer-backend fastokens)
source scripts/lib/engine-server.sh
trap stop_server EXIT

start_server "$out/server-sweep.log"
"$sweep_bin" replay --url "$url" --concurrency "$conc" --duration "$duration" --seed 42 --gpus 4 \
  --traces "$plain" --tokenizer "$tok" --out "$out/sweep" > "$out/sweep.log" 2>&1 \
  || { echo "sweep replay failed; see $out/sweep.log" >&2; tail -5 "$out/sweep.log" >&2; exit 1; }
stop_server

if [ -n "$agentx" ]; then
  start_server "$out/server-agentx.log"
  AIPERF_DATASET_WEKA_LIVE_ASSISTANT_RESPONSES=0 "$agentx/bin/agentx" profile --scenario agentx --unsafe-override \
    --url "$url" --endpoint-type chat --streaming --model deepseek-ai/DeepSeek-V4.1-Flash --tokenizer "$tok" \
    --input-file "$plain" --custom-dataset-type weka_trace --concurrency "$conc" \
    --benchmark-duration "$duration" --random-seed 42 --use-server-token-count --ui-type none \
    --output-artifact-dir "$out/agentx" > "$out/agentx.log" 2>&1 \
    || { echo "agentx-harness failed; see $out/agentx.log" >&2; tail -5 "$out/agentx.log" >&2; }
  stop_server
fi

python3 - "$out" <<'PY'
import glob, json, sys
out = sys.argv[1]

def pct(v, q):
    # numpy's `linear`, as the aggregate computes.
    v = sorted(v)
    if not v:
        return float("nan")
    i = (len(v) - 1) * q
    lo = int(i)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (i - lo)

def load(path):
    recs = [json.loads(l) for l in open(path) if l.strip()]
    return [r for r in recs if r.get("error") is None and not r["metadata"].get("was_cancelled")]

def value(r, name):
    return (r["metrics"].get(name) or {}).get("value")

def ttft_line(tool, recs):
    prof = [value(r, "time_to_first_token") for r in recs if r["metadata"]["benchmark_phase"] == "profiling"]
    t0 = [value(r, "time_to_first_token") for r in recs if r["metadata"]["turn_index"] == 0]
    print(f"{tool}: profiling TTFT p50 {pct(prof, .5):.2f} ms, p90 {pct(prof, .9):.2f} ms ({len(prof)} requests); "
          f"turn-0 TTFT p50 {pct(t0, .5):.2f} ms ({len(t0)}, warmup included)")

recs = load(f"{out}/sweep/profile_export.jsonl")
ttft_line("sweep", recs)
# Every request with stamps, warmup included: warmup requests follow each other as closely.
for name, keep in [("turn 0", lambda r: r["metadata"]["turn_index"] == 0), ("later turns", lambda r: r["metadata"]["turn_index"] > 0)]:
    g = [r for r in recs if keep(r) and value(r, "client_added_latency") is not None]
    a = [value(r, "client_added_latency") for r in g]
    s = [value(r, "server_time_to_first_token") for r in g]
    print(f"  {name}: added latency p50 {pct(a, .5):.2f} ms, p99 {pct(a, .99):.2f} ms, over 10 ms {sum(x > 10 for x in a)} "
          f"of {len(a)}; server TTFT p50 {pct(s, .5):.2f} ms")
for f in glob.glob(f"{out}/agentx/**/profile_export.jsonl", recursive=True):
    ttft_line("agentx-harness", load(f))
PY
echo "artifacts: $out"
