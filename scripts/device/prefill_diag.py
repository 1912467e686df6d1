#!/usr/bin/env python3
"""Where the Llama-3.1-8B prefill chain's time goes, against the operator curves.

For each chunk: the 32-layer chain and one layer alone as CUDA graphs (the method of
calibrate_torch.py), one layer replayed back to back for ~0.5 s (does it slow down as the GPU
stays busy?), the chain's kernels from the profiler summed per kind and per layer, and the SM
clock, power and clock-limit reasons sampled through NVML throughout.

Usage: prefill_diag.py OUT_DIR
"""
import json
import os
import statistics
import sys
import threading
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..")]
import calibrate_torch as ct  # noqa: E402

OUT = sys.argv[1]
samples, marks = [], []


def sampler(stop):
    try:
        import pynvml as nv
        nv.nvmlInit()
        h = nv.nvmlDeviceGetHandleByIndex(0)
    except Exception as e:  # noqa: BLE001
        samples.append({"error": str(e)})
        return
    while not stop.is_set():
        try:
            samples.append({
                "t": time.time(),
                "sm_mhz": nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
                "mem_mhz": nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM),
                "power_w": nv.nvmlDeviceGetPowerUsage(h) / 1e3,
                "temp_c": nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU),
                "reasons": getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons",
                                   getattr(nv, "nvmlDeviceGetCurrentClocksThrottleReasons", lambda _: -1))(h),
            })
        except Exception as e:  # noqa: BLE001
            samples.append({"t": time.time(), "error": str(e)})
        time.sleep(0.005)


def mark(name):
    marks.append({"t": time.time(), "name": name})
    ct.log(f"[{time.strftime('%H:%M:%S')}] {name}")


def back_to_back(fn, n):
    """Replays fn n times with no host sync between; µs of each replay from events."""
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
    ev[0].record()
    for i in range(n):
        fn()
        ev[i + 1].record()
    ev[-1].synchronize()
    return [ev[i].elapsed_time(ev[i + 1]) * 1e3 for i in range(n)]


def graph_of(fn):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    g.replay()
    torch.cuda.synchronize()
    return g


def kernel_table(prof):
    rows = []
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            rows.append((e.time_range.start, e.time_range.elapsed_us(), e.name))
    rows.sort()
    return rows


def kind(name):
    n = name.lower()
    if "flash" in n or "fmha" in n or "attention" in n:
        return "attention"
    if any(s in n for s in ("gemm", "nvjet", "sm90_xmma", "cutlass", "cublas")):
        return "gemm"
    return "elementwise"


def main():
    stop = threading.Event()
    th = threading.Thread(target=sampler, args=(stop,), daemon=True)
    th.start()
    torch.manual_seed(42)
    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "chunks": [], "gemm": {}}
    m = ct.Llama()

    # A GEMM of the chain (gate_up, M = 4096) timed as the curves time it, and sustained.
    mark("gemm short")
    w = [ct.rand((28672, 4096), scale=0.02) for _ in range(3)]
    x = ct.rand((4096, 4096))
    out = torch.empty((4096, 28672), device="cuda", dtype=torch.bfloat16)
    short = ct.time_graph(lambda i: torch.matmul(x, w[i % 3].t(), out=out))
    time.sleep(1.0)
    mark("gemm sustained")
    g = graph_of(lambda: [torch.matmul(x, w[i].t(), out=out) for i in range(3)])
    sus = [us / 3 for us in back_to_back(g.replay, 400)]
    res["gemm"] = {"n": 28672, "k": 4096, "m": 4096, "curve_method_us": short, "sustained_us": sus}
    ct.log(f"gate_up M=4096: curve method {short:.1f} µs; back to back first 5 {statistics.mean(sus[:5]):.1f}, "
           f"last 100 {statistics.mean(sus[-100:]):.1f} µs")
    del w, g
    torch.cuda.empty_cache()
    time.sleep(1.0)

    # Decode attention at the largest KV of the decode steps (batch 32, 64K context), likewise.
    mark("attention short")
    kq = ct.rand((32, 8, 4, 128))
    kk, kv = ct.rand((32, 8, 65536, 128)), ct.rand((32, 8, 65536, 128))
    fa = lambda: torch.nn.functional.scaled_dot_product_attention(kq, kk, kv)
    a_short = ct.time_graph(lambda i: fa())
    time.sleep(1.0)
    mark("attention sustained")
    ga = graph_of(fa)
    a_sus = back_to_back(ga.replay, 300)
    res["decode_attention"] = {"batch": 32, "ctx": 65536, "curve_method_us": a_short, "sustained_us": a_sus}
    ct.log(f"decode attention b32 c65536: curve method {a_short:.1f} µs; back to back first 5 "
           f"{statistics.mean(a_sus[:5]):.1f}, last 100 {statistics.mean(a_sus[-100:]):.1f} µs")
    del kq, kk, kv, ga
    torch.cuda.empty_cache()
    time.sleep(1.0)

    for e in [1024, 2048, 4096, 8192, 16384]:
        r = {"tokens": e}
        xe = ct.rand((e, m.H))
        mark(f"chunk {e} one layer")
        r["one_layer_us"] = ct.graph_replay_us(lambda i: m.prefill(xe, layers=1, head=False), 1, replays=9)
        g1 = graph_of(lambda: m.prefill(xe, layers=1, head=False))
        n = max(20, int(500e3 / r["one_layer_us"]))
        r["one_layer_back_to_back_us"] = back_to_back(g1.replay, n)
        del g1
        mark(f"chunk {e} chain")
        r["chain_us"] = ct.graph_replay_us(lambda i: m.prefill(xe), 1, replays=5)
        mark(f"chunk {e} profile")
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            m.prefill(xe)
            torch.cuda.synchronize()
        rows = kernel_table(prof)
        per_layer, layer, gemms = [], -1, 0
        kinds = {}
        for _, us, name in rows:
            k = kind(name)
            kinds.setdefault(k, {}).setdefault(name[:90], [0, 0.0])
            kinds[k][name[:90]][0] += 1
            kinds[k][name[:90]][1] += us
            if k == "gemm":
                if gemms % 4 == 0:
                    layer += 1
                    per_layer.append({"gemm": 0.0, "attention": 0.0, "elementwise": 0.0})
                gemms += 1
            if layer >= 0:
                per_layer[layer][k] += us
        r["profile_kernels"] = kinds
        r["profile_per_layer"] = per_layer
        r["profile_total_us"] = sum(us for _, us, _ in rows)
        tot = {k: sum(v[1] for v in kinds[k].values()) for k in kinds}
        b2b = r["one_layer_back_to_back_us"]
        ct.log(f"chunk {e}: chain {r['chain_us']:.0f} µs ({r['chain_us'] / 32:.0f}/layer), one layer {r['one_layer_us']:.0f}, "
               f"back to back first 3 {statistics.mean(b2b[:3]):.0f} last 10 {statistics.mean(b2b[-10:]):.0f}; "
               f"profiled kernels {r['profile_total_us']:.0f}: " + ", ".join(f"{k} {v:.0f}" for k, v in sorted(tot.items())))
        res["chunks"].append(r)
        del xe
        torch.cuda.empty_cache()
    stop.set()
    th.join()
    res["nvml"] = samples
    res["marks"] = marks
    with open(os.path.join(OUT, "diag.json"), "w") as f:
        json.dump(res, f)


if __name__ == "__main__":
    main()
