#!/usr/bin/env bash
# Cross-check `sweep replay` against AIPerf (PyPI) on the same server and traces:
#   - installs AIPerf into a virtualenv (default .venv-aiperf; AIPERF_VENV to change),
#   - starts `sweep engine serve` (the DSV4.1-Flash TP4 recipe flags, DeepSeek-V4 tokenizer,
#     time-scaled) on a free loopback port,
#   - replays the same real AgentX traces at the same concurrency with AIPerf's
#     `inferencex-agentx-mvp` scenario (`weka_trace` loader) and with `sweep replay`,
#   - prints both tools' aggregates side by side and both tools' client CPU seconds.
#
# Usage: scripts/crosscheck-aiperf.sh [--conc C] [--duration S] [--time-scale K] [--traces FILE]
#        [--sweep PATH] [--out DIR]
# Needs: python3 (venv, pip), network access to PyPI, the shared data (SWEEP_SHARED_DATA).
set -euo pipefail
cd "$(dirname "$0")/.."

conc=4
duration=180
# Real time by default: AIPerf's think delays run on wall time, so against a time-scaled server
# its workload would not be the same as sweep's (which follows the server's scale).
scale=1
data="${SWEEP_SHARED_DATA:-../shared/data}"
traces="$data/agentx-traces/kv-cache-tester-200.jsonl.gz"
sweep_bin=""
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --conc) conc="$2"; shift 2 ;;
    --duration) duration="$2"; shift 2 ;;
    --time-scale) scale="$2"; shift 2 ;;
    --traces) traces="$2"; shift 2 ;;
    --sweep) sweep_bin="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
tok="$data/tokenizers/deepseek-v4"
[ -f "$traces" ] || { echo "traces not found: $traces (set SWEEP_SHARED_DATA)" >&2; exit 1; }
[ -f "$tok/tokenizer.json" ] || { echo "tokenizer not found: $tok" >&2; exit 1; }
if [ -z "$sweep_bin" ]; then
  cargo build --release -p harness >&2
  sweep_bin=target/release/sweep
fi
out="${out:-$(mktemp -d)/crosscheck}"
mkdir -p "$out"

venv="${AIPERF_VENV:-.venv-aiperf}"
if [ ! -x "$venv/bin/aiperf" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check aiperf
fi
"$venv/bin/pip" show aiperf | sed -n '1,2p' >&2

# AIPerf's weka_trace loader reads one JSON document per file: a directory of <id>.json.
plain="$out/traces"
python3 scripts/split-weka-traces.py "$traces" "$plain"

flags=(--model-path deepseek-ai/DeepSeek-V4.1-Flash --served-model-name deepseek-ai/DeepSeek-V4.1-Flash
  --trust-remote-code --speculative-algorithm DSPARK --speculative-dspark-block-size 5 --reasoning-parser auto
  --tool-call-parser auto --tensor-parallel-size 4 --expert-parallel-size 1 --chunked-prefill-size 16384
  --mem-fraction-static 0.8 --max-running-requests 128 --cuda-graph-max-bs-decode 128 --swa-prefix-tails 4096
  --enable-metrics --enable-cache-report --tokenizer-path "$tok" --tokenizer-backend fastokens
  --hardware gb300 --time-scale "$scale")
export SGLANG_DEFAULT_THINKING=1

source scripts/lib/engine-server.sh
trap stop_server EXIT

# Client CPU seconds of a command (user + system of it and its children), from /proc-free getrusage.
cpu_of() {
  python3 - "$@" <<'PY'
import resource, subprocess, sys, time
t = time.time()
rc = subprocess.call(sys.argv[1:])
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"CPU {r.ru_utime + r.ru_stime:.2f} s wall {time.time() - t:.1f} s rc {rc}", file=sys.stderr)
sys.exit(rc)
PY
}

# One fresh server per tool, so both start from an empty prefix cache.
start_server "$out/server-sweep.log"
cpu_of "$sweep_bin" replay --url "$url" --concurrency "$conc" --duration "$duration" --gpus 4 \
  --traces "$traces" --tokenizer "$tok" --out "$out/sweep" 2> "$out/sweep.cpu" | tail -4 || true
stop_server

start_server "$out/server-aiperf.log"
# Durations are in the server's time; AIPerf runs on wall time, so it gets duration / scale.
aiperf_duration=$(python3 -c "print(max(1, round($duration / $scale)))")
cpu_of "$venv/bin/aiperf" profile --scenario inferencex-agentx-mvp --unsafe-override \
  --url "$url" --endpoint-type chat --streaming --model deepseek-ai/DeepSeek-V4.1-Flash --tokenizer "$tok" \
  --input-file "$plain" --custom-dataset-type weka_trace --concurrency "$conc" \
  --benchmark-duration "$aiperf_duration" --random-seed 42 --use-server-token-count \
  --extra-inputs ignore_eos:true --ui-type none --output-artifact-dir "$out/aiperf" \
  > "$out/aiperf.log" 2> "$out/aiperf.cpu" || { echo "AIPerf failed; last lines of $out/aiperf.log:" >&2; tail -20 "$out/aiperf.log" >&2; }
stop_server

python3 - "$out" "$scale" <<'PY'
import glob, json, os, sys
out, scale = sys.argv[1], float(sys.argv[2])
def cpu(name):
    try:
        return open(os.path.join(out, name + ".cpu")).read().strip().splitlines()[-1]
    except Exception:
        return "n/a"
rows = []
s = json.load(open(os.path.join(out, "sweep", "agg.json")))
lat, tok = s["request_metrics"]["latency"], s["request_metrics"]["tokens"]
ours = {
    "requests (profiling, ok)": s["num_requests_successful"],
    "ISL mean / p50 / p90": (tok["input"]["mean"], tok["input"]["p50"], tok["input"]["p90"]),
    "OSL mean / p50 / p90": (tok["output_actual"]["mean"], tok["output_actual"]["p50"], tok["output_actual"]["p90"]),
    "TTFT p50 / p90 (s)": (lat["ttft"]["p50"], lat["ttft"]["p90"]),
    "E2EL p50 / p90 (s)": (lat["e2el"]["p50"], lat["e2el"]["p90"]),
    "interactivity p90 (tok/s/user)": lat["intvty"]["p90"],
    "theoretical cache hit": s["request_metrics"]["cache"]["theoretical_cache_hit_rate"],
}
theirs = {k: "n/a" for k in ours}
f = glob.glob(os.path.join(out, "aiperf", "**", "profile_export_aiperf.json"), recursive=True)
if f:
    a = json.load(open(f[0]))
    g = lambda m, *ks: tuple(a.get(m, {}).get(k) for k in ks)
    # AIPerf times are wall-clock ms against the time-scaled server: ×scale into server seconds.
    ms = lambda v: None if v is None else v * scale / 1000
    theirs = {
        "requests (profiling, ok)": a.get("request_count", {}).get("avg"),
        "ISL mean / p50 / p90": g("input_sequence_length", "avg", "p50", "p90"),
        "OSL mean / p50 / p90": g("output_sequence_length", "avg", "p50", "p90"),
        "TTFT p50 / p90 (s)": tuple(map(ms, g("time_to_first_token", "p50", "p90"))),
        "E2EL p50 / p90 (s)": tuple(map(ms, g("request_latency", "p50", "p90"))),
        "interactivity p90 (tok/s/user)": (lambda v: None if not v else 1000 / (v * scale))(a.get("inter_token_latency", {}).get("p90")),
        "theoretical cache hit": (lambda t: t.get("sum", 0) / t["count"] if t.get("count") else (t.get("avg", 0) or 0) / 100)(a.get("theoretical_prefix_cache_hit", {})),
    }
def fmt(v):
    if isinstance(v, tuple):
        return " / ".join(fmt(x) for x in v)
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)
print(f"| metric | sweep replay | AIPerf |\n|---|---|---|")
for k in ours:
    print(f"| {k} | {fmt(ours[k])} | {fmt(theirs[k])} |")
print(f"| client CPU | {cpu('sweep')} | {cpu('aiperf')} |")
PY
echo "artifacts: $out"
