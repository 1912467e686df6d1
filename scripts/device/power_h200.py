#!/usr/bin/env python3
"""Board power of one GPU against what its kernels keep busy: the measurements behind a hardware
profile's `power` block (idle, active, compute and memory watts), and a held-out check.

Phases, each held for --hold seconds after a settle: idle; launch-bound (tiny kernels back to
back: clocks up, nothing busy); HBM-bound (a large copy); tensor-core-bound (BF16 and FP8 GEMMs
of 8192^3); and, held out of the fit, decode-like and prefill-like chains (GEMMs of a
Llama-3.1-8B layer at M=64 and M=4096, alternated with copies). Power is sampled by nvidia-smi
(`power.draw.instant` where the driver has it) at 100 ms; energy by NVML's counter when pynvml
is present. Clocks and throttle reasons are recorded per phase.

Usage: power_h200.py --out power.json [--hold 8]
"""
import argparse
import calendar
import json
import os
import subprocess
import sys
import tempfile
import time

import torch

# Datasheet peaks (dense), set from the GPU's name in main().
PEAKS = {"H200": (4.8e12, 989e12, 1979e12), "H100": (3.35e12, 989e12, 1979e12)}
PEAK_BW, PEAK_BF16, PEAK_FP8 = PEAKS["H200"]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def smi_fields():
    for f in ("power.draw.instant", "power.draw"):
        r = subprocess.run(["nvidia-smi", f"--query-gpu={f}", "--format=csv,noheader", "-i", "0"], capture_output=True, text=True)
        if r.returncode == 0 and "Not Supported" not in r.stdout and "N/A" not in r.stdout:
            return f
    return "power.draw"


class Sampler:
    def __init__(self, field):
        self.file = tempfile.NamedTemporaryFile("w+", suffix=".csv", delete=False)
        q = f"timestamp,{field},clocks.current.sm,clocks.current.memory,clocks_throttle_reasons.active,temperature.gpu"
        self.proc = subprocess.Popen(
            ["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader,nounits", "-lms", "100", "-i", "0"],
            stdout=self.file, stderr=subprocess.DEVNULL, env={**os.environ, "TZ": "UTC0"})

    def stop(self):
        self.proc.terminate()
        self.proc.wait()
        self.file.flush()
        rows = []
        with open(self.file.name) as f:
            for line in f:
                p = [x.strip() for x in line.split(",")]
                if len(p) < 6:
                    continue
                try:
                    t = calendar.timegm(time.strptime(p[0].split(".")[0], "%Y/%m/%d %H:%M:%S")) + float("0." + p[0].split(".")[1])
                    rows.append({"t": t, "w": float(p[1]), "sm": float(p[2]), "mem": float(p[3]), "throttle": p[4], "temp": float(p[5])})
                except (ValueError, IndexError):
                    continue
        return rows


def nvml():
    try:
        import pynvml
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        return lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(h) / 1000.0
    except Exception as e:  # noqa: BLE001
        log(f"no NVML energy counter: {e}")
        return None


def run_for(seconds, step):
    """Calls step() until `seconds` pass; returns (calls, elapsed)."""
    torch.cuda.synchronize()
    t0 = time.time()
    n = 0
    while time.time() - t0 < seconds:
        step()
        n += 1
        if n % 8 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    return n, time.time() - t0


def phase(name, step, hold, settle, energy, work):
    """Runs a phase; returns its window, call count and what each call moves/computes."""
    if step is not None:
        run_for(settle, step)
    else:
        time.sleep(settle)
    e0 = energy() if energy else None
    t0 = time.time() + 0.0
    if step is None:
        time.sleep(hold)
        n, dt = 0, hold
    else:
        n, dt = run_for(hold, step)
    t1 = time.time()
    e1 = energy() if energy else None
    bytes_per, flops_per = work
    out = {"name": name, "t0": t0, "t1": t1, "calls": n, "seconds": dt,
           "bw_share": bytes_per * n / dt / PEAK_BW if dt > 0 else 0.0,
           "bf16_share": 0.0, "fp8_share": 0.0}
    if flops_per:
        key = "fp8_share" if "fp8" in name else "bf16_share"
        out[key] = flops_per * n / dt / (PEAK_FP8 if key == "fp8_share" else PEAK_BF16)
    if e0 is not None:
        out["nvml_energy_j"] = e1 - e0
        out["nvml_avg_w"] = (e1 - e0) / (t1 - t0)
    log(f"{name}: {n} calls in {dt:.2f} s, bw {out['bw_share']:.2f}, bf16 {out['bf16_share']:.2f}, fp8 {out['fp8_share']:.2f}, "
        f"nvml {out.get('nvml_avg_w', float('nan')):.1f} W")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--hold", type=float, default=8.0)
    ap.add_argument("--settle", type=float, default=3.0)
    a = ap.parse_args()
    global PEAK_BW, PEAK_BF16, PEAK_FP8
    gpu = torch.cuda.get_device_name(0)
    PEAK_BW, PEAK_BF16, PEAK_FP8 = next((v for k, v in PEAKS.items() if k in gpu), PEAKS["H200"])
    log(f"{gpu}: peaks {PEAK_BW / 1e12} TB/s, {PEAK_BF16 / 1e12} / {PEAK_FP8 / 1e12} TFLOP/s")
    dev = torch.device("cuda")
    field = smi_fields()
    energy = nvml()
    sampler = Sampler(field)
    time.sleep(1.0)
    phases = []
    hold, settle = a.hold, a.settle

    tiny = torch.ones(256, device=dev)
    phases.append(phase("idle", None, hold, settle, energy, (0, 0)))

    def launch():
        for _ in range(64):
            tiny.add_(1.0)
    phases.append(phase("launch", launch, hold, settle, energy, (64 * 2 * 1024, 0)))

    n = 1 << 30  # 2 GiB of bf16 each way
    src = torch.randn(n, device=dev, dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    phases.append(phase("copy", lambda: dst.copy_(src), hold, settle, energy, (2 * n * 2, 0)))
    del src, dst

    s = 8192
    A = torch.randn(s, s, device=dev, dtype=torch.bfloat16)
    B = torch.randn(s, s, device=dev, dtype=torch.bfloat16)
    C = torch.empty(s, s, device=dev, dtype=torch.bfloat16)
    phases.append(phase("gemm_bf16", lambda: torch.matmul(A, B, out=C), hold, settle, energy, (3 * s * s * 2, 2 * s ** 3)))
    try:
        A8 = A.to(torch.float8_e4m3fn)
        B8 = B.t().contiguous().to(torch.float8_e4m3fn).t()
        one = torch.ones((), device=dev)
        phases.append(phase("gemm_fp8", lambda: torch._scaled_mm(A8, B8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16),
                            hold, settle, energy, (2 * s * s + s * s * 2, 2 * s ** 3)))
    except Exception as e:  # noqa: BLE001
        log(f"fp8 GEMM skipped: {e}")

    # Held out: a Llama-3.1-8B layer's GEMMs (qkv, o, gate+up, down) at decode and prefill M.
    shapes = [(4096, 6144), (4096, 4096), (4096, 28672), (14336, 4096)]
    W = [torch.randn(k, n_, device=dev, dtype=torch.bfloat16) for k, n_ in shapes]
    for m, name in ((64, "chain_decode_m64"), (4096, "chain_prefill_m4096")):
        X = [torch.randn(m, k, device=dev, dtype=torch.bfloat16) for k, _ in shapes]
        flops = sum(2 * m * k * n_ for k, n_ in shapes)
        byts = sum(k * n_ * 2 + m * k * 2 + m * n_ * 2 for k, n_ in shapes)
        phases.append(phase(name, lambda X=X: [x @ w for x, w in zip(X, W)], hold, settle, energy, (byts, flops)))
    time.sleep(1.0)
    rows = sampler.stop()
    for p in phases:
        inside = [r for r in rows if p["t0"] <= r["t"] <= p["t1"]]
        if inside:
            p["smi_avg_w"] = sum(r["w"] for r in inside) / len(inside)
            p["smi_samples"] = len(inside)
            p["sm_clock_mhz"] = sum(r["sm"] for r in inside) / len(inside)
            p["mem_clock_mhz"] = sum(r["mem"] for r in inside) / len(inside)
            p["throttle_reasons"] = sorted({r["throttle"] for r in inside})
            p["temp_c_max"] = max(r["temp"] for r in inside)
    name = torch.cuda.get_device_name(0)
    out = {"gpu": name, "power_field": field, "nvml_energy": energy is not None, "date": time.strftime("%Y-%m-%d", time.gmtime()),
           "torch": torch.__version__, "phases": phases, "samples": len(rows)}
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    log(json.dumps([{k: p.get(k) for k in ("name", "smi_avg_w", "nvml_avg_w", "bw_share", "bf16_share", "fp8_share", "sm_clock_mhz", "throttle_reasons")} for p in phases], indent=1))


if __name__ == "__main__":
    main()
