#!/usr/bin/env bash
# Runs the GPU calibration and its PyTorch comparison on a CUDA machine.
# Usage: calibrate_h200.sh SWEEP_BINARY OUT_DIR [extra `sweep calibrate gpu` flags]
# Uses the cuBLAS/NVRTC of the pip nvidia-* packages beside PyTorch (so both runs share one
# cuBLAS), then the CUDA toolkit's, then the driver's folder.
set -uo pipefail
BIN=$1; OUT=$2; shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
NV=$(python3 -c 'import nvidia, os; print(list(nvidia.__path__)[0])' 2>/dev/null || true)
LIBDIRS=$( (find $NV /usr/local/cuda*/lib64 /usr/local/cuda*/targets/*/lib -maxdepth 3 \
    \( -name 'libcublas.so*' -o -name 'libcublasLt.so*' -o -name 'libnvrtc.so*' \) 2>/dev/null) \
    | grep -v /stubs/ | xargs -r -n1 dirname | awk '!seen[$0]++' | tr '\n' ':')
# The driver's libcuda first: the toolkit's stubs folder holds a stub libcuda that cannot run.
export LD_LIBRARY_PATH="/usr/local/nvidia/lib64:/usr/local/nvidia/lib:${LIBDIRS}${LD_LIBRARY_PATH:-}"
{
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
} 2>&1 | tee "$OUT/env.txt"
timeout 300 "$BIN" calibrate gpu --out "$OUT/h200-measured.yaml" --steps-out "$OUT/rust-steps.json" "$@" 2>&1 | tee "$OUT/rust.log"
echo "sweep calibrate gpu exit: ${PIPESTATUS[0]}"
PROFILE_ARG=()
[ -f "$OUT/h200-measured.yaml" ] && PROFILE_ARG=(--profile "$OUT/h200-measured.yaml")
QUICK=(); for a in "$@"; do [ "$a" = --quick ] && QUICK=(--quick); done
PYTHONUNBUFFERED=1 timeout 330 python3 "$HERE/../calibrate_torch.py" "${PROFILE_ARG[@]}" "${QUICK[@]}" \
    --out "$OUT/torch.json" --steps-out "$OUT/torch-steps.json" 2>&1 | tee "$OUT/torch.log"
echo "torch exit: ${PIPESTATUS[0]}"
if [ -f "$OUT/h200-measured.yaml" ] && [ -f "$OUT/torch.json" ]; then
  "$BIN" calibrate import-peer --profile "$OUT/h200-measured.yaml" --peer "$OUT/torch.json"
fi
