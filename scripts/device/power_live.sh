#!/usr/bin/env bash
# The live GPU monitor with the real nvidia-smi: a fixed-length replay against `sweep engine
# serve` on loopback while a GEMM load keeps the GPU busy for part of the window, so the
# sampled power moves; the point's folder goes to OUT for the reference script to re-integrate.
# Usage: power_live.sh SWEEP_BINARY OUT
set -uo pipefail
BIN=$1; OUT=$2
mkdir -p "$OUT"
"$BIN" engine serve --model-path deepseek-ai/DeepSeek-R1-0528 --tensor-parallel-size 8 --hardware h200 --port 30123 \
  > "$OUT/server.log" 2>&1 &
SRV=$!
for _ in $(seq 60); do curl -sf localhost:30123/health >/dev/null && break; sleep 0.5; done
python3 - <<'PY' &
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
t0 = time.time()
time.sleep(3)
while time.time() - t0 < 9:
    for _ in range(20):
        a @ a
    torch.cuda.synchronize()
PY
LOAD=$!
"$BIN" replay --url http://127.0.0.1:30123 --isl 1024 --osl 256 --num-prompts 32 --concurrency 8 --gpus 1 \
  --out "$OUT/point" 2>&1 | tail -5
wait $LOAD
kill $SRV
