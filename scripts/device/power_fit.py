#!/usr/bin/env python3
"""The `power` block of a hardware profile from `power_h200.py`'s phases, and its check on the
held-out chains.

idle_w = idle; active_w = launch-bound - idle; memory_w = (copy - idle - active) / u_mem(copy);
compute_w = (GEMM - idle - active - memory_w * u_mem(GEMM)) / u_compute(GEMM), where a share is
the time the cost model prices the phase's bytes or FLOPs at (rate x efficiency of the profile,
`--eta-bw`, `--eta-flops`) over the phase's time, capped at 1, as the engine computes it.

Usage: power_fit.py power.json [--eta-bw 0.8] [--eta-flops 0.4] [--limit 700]
"""
import argparse
import json


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("power")
    ap.add_argument("--eta-bw", type=float, default=0.8)
    ap.add_argument("--eta-flops", type=float, default=0.4)
    ap.add_argument("--limit", type=float, default=700.0)
    a = ap.parse_args()
    d = json.load(open(a.power))
    ph = {p["name"]: p for p in d["phases"]}

    def watts(p):
        return p.get("nvml_avg_w") or p["smi_avg_w"]

    def u_mem(p):
        return min(1.0, p["bw_share"] / a.eta_bw)

    def u_cmp(p):
        return min(1.0, max(p["bf16_share"], p["fp8_share"]) / a.eta_flops)

    idle = watts(ph["idle"])
    active = watts(ph["launch"]) - idle
    memory = (watts(ph["copy"]) - idle - active) / max(u_mem(ph["copy"]), 1e-9)
    g = ph["gemm_bf16"]
    compute = (watts(g) - idle - active - memory * u_mem(g)) / max(u_cmp(g), 1e-9)
    model = {"idle_w": round(idle), "active_w": round(active), "compute_w": round(compute), "memory_w": round(memory), "limit_w": a.limit}
    print(json.dumps(model))
    print(f"{'phase':22} {'measured W':>10} {'model W':>8} {'resid %':>8}  u_mem  u_cmp  SM MHz  throttle")
    for p in d["phases"]:
        pred = min(a.limit, idle + (0 if p["name"] == "idle" else active + compute * u_cmp(p) + memory * u_mem(p)))
        w = watts(p)
        held = "" if p["name"].startswith("chain") else " (fitted)" if p["name"] in ("idle", "launch", "copy", "gemm_bf16") else ""
        print(f"{p['name'] + held:22} {w:10.1f} {pred:8.1f} {100 * (pred - w) / w:8.1f}  {u_mem(p):5.2f}  {u_cmp(p):5.2f}  "
              f"{p.get('sm_clock_mhz', 0):6.0f}  {','.join(p.get('throttle_reasons', []))}")


if __name__ == "__main__":
    main()
