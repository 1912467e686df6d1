#!/usr/bin/env bash
# Side by side with the reference replay: agentx-harness 1.0.12 (the AIPerf fork InferenceX runs).
# First, over the whole trace file, the conversations each builds (`sweep trace conversations
# --json` against scripts/fixtures/agentx_conversations.py, which runs the harness's loader):
# subagent and flattened-agent chains, spawning and joining turns, dispatch points, predecessors.
# Then agentx-harness and `sweep replay --url` replay the same AgentX traces at the same concurrency, seed and duration
# against `sweep engine serve` (a fresh server for each, so both start from an empty prefix cache),
# and the requests each sent are compared one by one:
#   - per session tree (trace id, in order of play), the ordered (conversation, request index)
#     sequence of the warmup and of the profiling window,
#   - per matched request, ISL and OSL as the server counted them,
#   - the aggregate metrics.
#
# Usage: scripts/crosscheck-agentx-harness.sh [--conc C] [--duration S] [--traces FILE] [--limit N]
#        [--sweep PATH] [--out DIR] [--check] [--min-match F]
#   --check: exit 1 unless the conversations are identical and every compared tree sent the same sequence (a tree may run one request
#            further than the other at the deadline) with ISL within 64 tokens and equal OSL.
#   --min-match F: exit 1 when fewer than a share F of the compared requests match in order (the
#            harness's own idle-cap race can reorder a run, see docs/replay.md, so CI uses this).
#   --install-only: make the agentx-harness venv and stop (CI installs it while it builds).
# Needs: python3 (venv, pip, PyPI; the venv is cached in $AGENTX_VENV, default
# $SWEEP_CACHE/agentx-harness-1.0.12, SWEEP_CACHE default ~/.cache/sweep), the shared data
# (SWEEP_SHARED_DATA).
set -euo pipefail
cd "$(dirname "$0")/.."

conc=2
duration=120
limit=12
data="${SWEEP_SHARED_DATA:-../shared/data}"
traces="$data/agentx-traces/kv-cache-tester-200.jsonl.gz"
sweep_bin=""
out=""
check=0
min_match=""
install_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --conc) conc="$2"; shift 2 ;;
    --duration) duration="$2"; shift 2 ;;
    --traces) traces="$2"; shift 2 ;;
    --limit) limit="$2"; shift 2 ;;
    --sweep) sweep_bin="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --check) check=1; shift ;;
    --min-match) min_match="$2"; shift 2 ;;
    --install-only) install_only=1; shift ;;
    *) echo "unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
cache="${SWEEP_CACHE:-$HOME/.cache/sweep}"
venv="${AGENTX_VENV:-$cache/agentx-harness-1.0.12}"
if [ ! -x "$venv/bin/agentx" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check agentx-harness==1.0.12
fi
[ "$install_only" = 1 ] && exit 0
tok="$data/tokenizers/deepseek-v4"
[ -f "$traces" ] || { echo "traces not found: $traces (set SWEEP_SHARED_DATA)" >&2; exit 1; }
[ -f "$tok/tokenizer.json" ] || { echo "tokenizer not found: $tok" >&2; exit 1; }
if [ -z "$sweep_bin" ]; then
  cargo build --release -p harness >&2
  sweep_bin=target/release/sweep
fi
out="${out:-$(mktemp -d)/crosscheck}"
mkdir -p "$out"

"$venv/bin/pip" show agentx-harness | sed -n '1,2p' >&2

status=0
echo "== conversations over $(basename "$traces")" >&2
"$sweep_bin" trace conversations --json "$traces" > "$out/conversations-sweep.jsonl"
"$venv/bin/python" scripts/fixtures/agentx_conversations.py "$traces" > "$out/conversations-harness.jsonl"
conv_status=0
python3 scripts/compare-conversations.py "$out/conversations-sweep.jsonl" "$out/conversations-harness.jsonl" || conv_status=$?
if [ "$conv_status" != 0 ] && { [ "$check" = 1 ] || [ -n "$min_match" ]; }; then status=1; fi

# The harness's weka_trace loader reads one JSON document per file; both tools read that folder,
# in file-name order, so their sequential samplers hand out the same traces.
plain="$out/traces"
rm -rf "$plain"
python3 - "$traces" "$plain" "$limit" <<'PY'
import gzip, json, os, sys
src, dst, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
os.makedirs(dst)
with (gzip.open if src.endswith(".gz") else open)(src, "rt") as f:
    n = 0
    for line in f:
        if line.strip() and n < limit:
            t = json.loads(line)
            with open(os.path.join(dst, f"{t['id']}.json"), "w") as o:
                json.dump(t, o)
            n += 1
PY

flags=(--model-path deepseek-ai/DeepSeek-V4.1-Flash --served-model-name deepseek-ai/DeepSeek-V4.1-Flash
  --tensor-parallel-size 4 --chunked-prefill-size 16384 --mem-fraction-static 0.8 --max-running-requests 128
  --enable-metrics --enable-cache-report --tokenizer-path "$tok" --tokenizer-backend fastokens --hardware gb300)
export SGLANG_DEFAULT_THINKING=1
source scripts/lib/engine-server.sh
trap stop_server EXIT

start_server "$out/server-harness.log"
# InferenceX's environment for the harness (spec agentx.md §14); --unsafe-override below 900 s.
AIPERF_DATASET_WEKA_LIVE_ASSISTANT_RESPONSES=0 "$venv/bin/agentx" profile --scenario agentx --unsafe-override \
  --url "$url" --endpoint-type chat --streaming --model deepseek-ai/DeepSeek-V4.1-Flash --tokenizer "$tok" \
  --input-file "$plain" --custom-dataset-type weka_trace --concurrency "$conc" \
  --benchmark-duration "$duration" --random-seed 42 --use-server-token-count --ui-type none \
  --output-artifact-dir "$out/harness" > "$out/harness.log" 2>&1 \
  || { echo "agentx-harness failed; last lines of $out/harness.log:" >&2; tail -20 "$out/harness.log" >&2; }
stop_server

start_server "$out/server-sweep.log"
"$sweep_bin" replay --url "$url" --concurrency "$conc" --duration "$duration" --seed 42 --gpus 4 \
  --traces "$plain" --tokenizer "$tok" --out "$out/sweep" > "$out/sweep.log" 2>&1 || true
stop_server

python3 scripts/compare-replays.py "$out/harness/profile_export.jsonl" "$out/sweep/profile_export.jsonl" \
  --sweep-agg "$out/sweep/agg.json" $([ "$check" = 1 ] && echo --check) \
  $([ -n "$min_match" ] && echo --min-match "$min_match") || status=$?
echo "artifacts: $out"
exit $status
