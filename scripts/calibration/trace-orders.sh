#!/usr/bin/env bash
# How much a point's predicted metrics depend on which sessions it replays: AgentX hands traces to
# lanes in file order, so the trace set is rotated to start at traces 0, 20, 40, … and every
# rotation is predicted with the same profile. Prints, per rotation, tok/s/GPU, E2EL p90 / p75 and
# P90 interactivity of the three published calibration points.
#
#   scripts/calibration/trace-orders.sh [TRACES.jsonl.gz] [PROFILE] [STEP] [DURATION_S]
#
# Needs a release build (target/release/sweep) and python3.
set -euo pipefail
cd "$(dirname "$0")/../.."
traces="${1:-../shared/data/agentx-traces/kv-cache-tester-200.jsonl.gz}"
profile="${2:-fitted}"
step="${3:-20}"
duration="${4:-3600}"
key=dsv41flash-fp4-gb300-sglang-agentic-dspark
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
n=$(python3 - "$traces" "$work" "$step" <<'PY'
import gzip, sys
src, out, step = sys.argv[1], sys.argv[2], int(sys.argv[3])
lines = [l for l in gzip.open(src, "rt").read().splitlines() if l.strip()]
for k in range(0, len(lines), step):
    with gzip.open(f"{out}/rot{k:04d}.jsonl.gz", "wt") as f:
        f.write("\n".join(lines[k:] + lines[:k]) + "\n")
print(len(lines))
PY
)
echo "$n traces, rotations every $step, profile $profile, $duration s per point"
printf '%-8s %-40s %-40s %-40s\n' first "tp4-c1 (tok/s/GPU, E2EL p90/p75, intvty)" tp2-ep2-c32 dep2-c128
for f in "$work"/rot*.jsonl.gz; do
  k=$(basename "$f" .jsonl.gz); k=${k#rot}
  target/release/sweep predict --config "$key" --profile "$profile" --traces "$f" --duration "$duration" --jobs 1 \
    --out "$work/p$k" >/dev/null 2>&1 || true
  python3 - "$work/p$k/summary.json" "$k" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
row = {p["id"].split("/")[-1]: p["summary"] for p in s["points"] if p.get("summary")}
cells = []
for pid in ("tp4-c1", "tp2-ep2-c32", "dep2-c128"):
    m = row.get(pid)
    cells.append(f"{m['tput_per_gpu']:9.0f} {m['e2el']['p90']:6.2f} {m['e2el']['p75']:6.2f} {m['intvty_p90']:6.1f}" if m else "failed")
print(f"{int(sys.argv[2]):<8d} " + "   ".join(f"{c:<37s}" for c in cells))
PY
done
