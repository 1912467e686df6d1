#!/usr/bin/env bash
# Client benchmark: `sweep replay` (release) holding C concurrent AgentX sessions against
# `sweep engine serve` (release) on this machine. Reports the client's CPU seconds per 1,000
# requests (getrusage of the replay process, warmup included) and its added latency: the
# client-observed TTFT minus the server's TTFT, request by request (the engine stamps its events
# with engine time; see docs/replay.md). With --aiperf VENV the
# same replay (same traces, concurrency, duration) is run with AIPerf against a fresh server and
# the CPU ratio printed.
#
# Usage: scripts/bench/replay-client.sh [--conc 1000] [--duration 300] [--time-scale 1]
#        [--traces FILE (default: the shared kv-cache-tester-200 traces)] [--warmup-per-lane 1] [--aiperf VENV] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."

conc=1000
duration=300
scale=1
traces="${SWEEP_SHARED_DATA:-../shared/data}/agentx-traces/kv-cache-tester-200.jsonl.gz"
warmup=1
aiperf=""
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --conc) conc="$2"; shift 2 ;;
    --duration) duration="$2"; shift 2 ;;
    --time-scale) scale="$2"; shift 2 ;;
    --traces) traces="$2"; shift 2 ;;
    --warmup-per-lane) warmup="$2"; shift 2 ;;
    --aiperf) aiperf="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
cargo build --release -p harness >&2
sweep_bin=target/release/sweep
out="${out:-$(mktemp -d)/replay-client}"
mkdir -p "$out"

# A large decode batch so the server, not its admission limit, holds the sessions.
flags=(--model-path deepseek-ai/DeepSeek-V4.1-Flash --tp 4 --hardware gb300 --max-running-requests 1024
  --enable-metrics --enable-cache-report --tokenizer-worker-num 1 --time-scale "$scale"
  --tokenizer-path "${SWEEP_SHARED_DATA:-../shared/data}/tokenizers/deepseek-v4" --tokenizer-backend fastokens)

source scripts/lib/engine-server.sh
trap stop_server EXIT

start_server "$out/server.log"
/usr/bin/env time -f "%U %S %e" -o "$out/sweep.time" "$sweep_bin" replay --url "$url" --concurrency "$conc" \
  --duration "$duration" --traces "$traces" --warmup-per-lane "$warmup" --gpus 4 --out "$out/sweep" \
  > "$out/sweep.log" 2>&1 || true
stop_server
tail -6 "$out/sweep.log"

python3 - "$out" "$scale" <<'PY'
import json, sys
out, scale = sys.argv[1], float(sys.argv[2])
u, s, wall = map(float, open(f"{out}/sweep.time").read().split()[-3:])
recs = [json.loads(l) for l in open(f"{out}/sweep/profile_export.jsonl")]
ok = [r for r in recs if not r["error"]]
agg = json.load(open(f"{out}/sweep/agg.json"))
client = agg.get("client", {})
cpu = u + s
print(f"sweep replay: {len(recs)} requests ({len(ok)} ok), wall {wall:.1f} s, CPU {cpu:.2f} s "
      f"(user {u:.2f} + sys {s:.2f}), {cpu / len(recs) * 1000:.2f} CPU s per 1,000 requests, "
      f"peak {100 * (client.get('cpu_max_share') or 0):.0f} % of the cores")
# Per request: client-observed TTFT minus the server's own TTFT for that request (its stamped
# first output minus its stamped arrival), over the profiling records; wall milliseconds.
a = client.get("added_latency_ms")
if a:
    print(f"added latency (client TTFT - server TTFT, per request, ms): mean {a['mean']:.2f}, p50 {a['p50']:.2f}, "
          f"p90 {a['p90']:.2f}, p99 {a['p99']:.2f}; server TTFT p50 {client['server_ttft']['p50']:.3f} s")
json.dump({"requests": len(recs), "cpu_s": cpu, "wall_s": wall}, open(f"{out}/sweep.json", "w"))
PY

if [ -n "$aiperf" ]; then
  start_server "$out/server-aiperf.log"
  # AIPerf's weka_trace loader reads one JSON document per file.
  plain="$out/traces"
  python3 scripts/split-weka-traces.py "$traces" "$plain"
  /usr/bin/env time -f "%U %S %e" -o "$out/aiperf.time" "$aiperf/bin/aiperf" profile --scenario inferencex-agentx-mvp \
    --unsafe-override --url "$url" --endpoint-type chat --streaming --model deepseek-ai/DeepSeek-V4.1-Flash \
    --tokenizer "${SWEEP_SHARED_DATA:-../shared/data}/tokenizers/deepseek-v4" --input-file "$plain" \
    --custom-dataset-type weka_trace --concurrency "$conc" --benchmark-duration "$duration" --random-seed 42 \
    --use-server-token-count --extra-inputs ignore_eos:true --ui-type none --burst-phase-starts --output-artifact-dir "$out/aiperf" \
    > "$out/aiperf.log" 2>&1 || { echo "AIPerf failed (see $out/aiperf.log)"; tail -5 "$out/aiperf.log"; }
  stop_server
  python3 - "$out" <<'PY'
import glob, json, sys
out = sys.argv[1]
u, s, wall = map(float, open(f"{out}/aiperf.time").read().split()[-3:])
n = None
for f in glob.glob(f"{out}/aiperf/**/profile_export.jsonl", recursive=True):
    n = sum(1 for _ in open(f))
ours = json.load(open(f"{out}/sweep.json"))
print(f"AIPerf: {n} requests, wall {wall:.1f} s, CPU {u + s:.2f} s")
if n:
    a = (u + s) / n * 1000
    o = ours["cpu_s"] / ours["requests"] * 1000
    print(f"CPU per 1,000 requests: sweep {o:.2f} s, AIPerf {a:.2f} s, ratio sweep/AIPerf = {o / a:.3f}")
PY
fi
echo "artifacts: $out"
