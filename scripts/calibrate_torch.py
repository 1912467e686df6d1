#!/usr/bin/env python3
"""PyTorch side of `sweep calibrate gpu`: the same measurements through PyTorch on the same GPU.

Same shapes (read from the profile `sweep calibrate gpu` wrote, so both measure exactly the
same GEMMs and M values), same method: CUDA events around replays of a captured CUDA graph
holding n copies of the operation (n sized for ~3 ms), after eager warm-up; the median of 9
replays divided by n; random inputs; weights rotated over copies totalling >= 512 MB.

Also runs the Llama-3.1-8B step chain: decode steps captured as CUDA graphs (as a serving
engine does) and prefill chunks eagerly with flash attention (SDPA), for the cost-model check.

Usage: calibrate_torch.py --profile h200-measured.yaml --out torch.json --steps-out torch-steps.json
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F

TARGET_MS = 3.0
REPLAYS = 9


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def time_once(fn):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    fn()
    e.record()
    e.synchronize()
    return s.elapsed_time(e)


def graph_replay_us(op, n, replays=REPLAYS):
    """Median µs per op of a graph holding op(0..n-1)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for i in range(3):
            op(i)
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(n):
            op(i)
    g.replay()
    torch.cuda.synchronize()
    times = [time_once(g.replay) * 1e3 / n for _ in range(replays)]
    return statistics.median(times)


def time_graph(op, target_ms=TARGET_MS, replays=REPLAYS):
    for i in range(3):
        op(i)
    torch.cuda.synchronize()
    one = time_once(lambda: op(0))
    n = max(1, min(256, math.ceil(target_ms / max(one, 1e-3))))
    return graph_replay_us(op, n, replays)


def weight_copies(nbytes):
    return max(1, min(16, math.ceil((512 << 20) / nbytes)))


def rand(shape, dtype=torch.bfloat16, scale=1.0):
    return torch.empty(shape, device="cuda", dtype=dtype).uniform_(-scale, scale)


def rand_fp8(shape):
    # Magnitudes in [1/8, 4): the same value range as the cudarc run's random e4m3 data.
    mag = torch.exp2(torch.randint(-3, 2, shape, device="cuda").float()) * (1 + torch.randint(0, 8, shape, device="cuda").float() / 8)
    sign = torch.where(torch.rand(shape, device="cuda") < 0.5, -1.0, 1.0)
    return (mag * sign).to(torch.float8_e4m3fn)


def measure_copy():
    nbytes = 2 << 30
    src = rand((nbytes // 2,))
    dst = torch.empty_like(src)
    # Elementwise kernel (SMs) in a graph, as the cudarc copy kernel; and an eager memcpy.
    us = time_graph(lambda i: torch.mul(src, 1, out=dst), target_ms=20.0)
    dst.copy_(src)
    torch.cuda.synchronize()
    mc = statistics.median(time_once(lambda: [dst.copy_(src) for _ in range(10)]) * 1e3 / 10 for _ in range(REPLAYS))
    return {"bytes": nbytes, "us": us, "gbps": 2 * nbytes / us / 1e3, "memcpy_gbps": 2 * nbytes / mc / 1e3}


def measure_gemm(name, n, k, dtype, ms):
    eb = 2 if dtype == "bf16" else 1
    copies = weight_copies(n * k * eb)
    max_m = max(ms)
    if dtype == "bf16":
        ws = [rand((n, k)) for _ in range(copies)]
        x = rand((max_m, k))
    else:
        ws = [rand_fp8((n, k)) for _ in range(copies)]
        x = rand_fp8((max_m, k))
        one = torch.ones((), device="cuda", dtype=torch.float32)
    pts = []
    for m in ms:
        xm = x[:m]
        try:
            if dtype == "bf16":
                out = torch.empty((m, n), device="cuda", dtype=torch.bfloat16)
                op = lambda i: torch.matmul(xm, ws[i % copies].t(), out=out)
            else:
                op = lambda i: torch._scaled_mm(xm, ws[i % copies].t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
            us = time_graph(op)
            pts.append({"m": m, "us": us, "tflops": 2 * m * n * k / us / 1e6})
        except Exception as e:  # noqa: BLE001 - record what PyTorch refused and go on
            pts.append({"m": m, "us": None, "tflops": None, "error": str(e).splitlines()[0][:200]})
    return {"name": name, "n": n, "k": k, "dtype": dtype, "points": pts}


def experts_hit(e, k, t):
    f = 1 - (1 - k / e) ** t
    return int(max(1, min(round(e * f), min(t * k, e))))


def measure_moe(name, n, k, experts, top_k, tokens):
    w = rand((experts, n, k))
    max_rows = max(tokens) * top_k + experts
    x = rand((max_rows * k,))
    pts = []
    for t in tokens:
        active = experts_hit(experts, top_k, t)
        rows = math.ceil(t * top_k / active)
        groups = max(1, experts // active)
        xb = x[: active * rows * k].view(active, rows, k)
        out = torch.empty((active, rows, n), device="cuda", dtype=torch.bfloat16)
        op = lambda i: torch.bmm(xb, w[(i % groups) * active:(i % groups + 1) * active].transpose(1, 2), out=out)
        us = time_graph(op)
        pts.append({"tokens": t, "active_experts": active, "rows_per_expert": rows, "us": us,
                    "tflops": 2 * active * rows * n * k / us / 1e6, "weight_gbps": active * n * k * 2 / us / 1e3})
    return {"name": name, "n": n, "k": k, "dtype": "bf16", "experts": experts, "top_k": top_k, "points": pts}


def measure_attention(kv_heads, q_per_kv, d, batches, ctxs):
    pool_elems = 4 << 30  # 8 GiB of bf16 each for K and V
    kp, vp = rand((pool_elems,)), rand((pool_elems,))
    pts = []
    for b in batches:
        for c in ctxs:
            elems = b * kv_heads * c * d
            if elems > pool_elems:
                continue
            slots = max(1, pool_elems // elems)
            q = rand((b, kv_heads, q_per_kv, d))
            ks = [kp[s * elems:(s + 1) * elems].view(b, kv_heads, c, d) for s in range(min(slots, 64))]
            vs = [vp[s * elems:(s + 1) * elems].view(b, kv_heads, c, d) for s in range(min(slots, 64))]
            nsl = len(ks)
            # GQA decode: the query heads of one KV head become query rows (no mask).
            op = lambda i: F.scaled_dot_product_attention(q, ks[i % nsl], vs[i % nsl])
            us = time_graph(op)
            nbytes = 2 * elems * 2
            pts.append({"batch": b, "ctx": c, "kv_bytes": nbytes, "us": us, "gbps": nbytes / us / 1e3})
    return {"kv_heads": kv_heads, "q_per_kv": q_per_kv, "head_dim": d, "points": sorted(pts, key=lambda p: (p["kv_bytes"], p["batch"]))}


def causal_attention(q, k, v):
    """Causal flash attention of q's rows as the last rows of k's sequence (a chunk after a
    cached prefix: the mask is aligned to the bottom right, as serving engines align it)."""
    lq, lk = q.shape[-2], k.shape[-2]
    if lq == lk:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    # SDPA sends a bottom-right causal mask to its memory-efficient kernel, not to flash; the
    # flash kernel itself aligns a causal mask bottom-right when lq < lk, so call it directly.
    o = torch.ops.aten._flash_attention_forward(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                None, None, lq, lk, 0.0, True, False)[0]
    return o.transpose(1, 2)


def check_prefix_attention():
    """The flash call above against SDPA's bottom-right mask, on a small case."""
    from torch.nn.attention.bias import causal_lower_right
    q, k, v = rand((1, 4, 64, 128)), rand((1, 4, 192, 128)), rand((1, 4, 192, 128))
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(64, 192)).float()
    err = ((causal_attention(q, k, v).float() - ref).norm() / ref.norm()).item()
    assert err < 1e-2, f"prefix flash attention disagrees with SDPA's bottom-right mask: {err}"
    return err


class Llama:
    """Llama-3.1-8B-shaped random bf16 weights and its step chain."""

    def __init__(self, layers=32, hidden=4096, hq=32, hkv=8, d=128, ffn=14336, vocab=128256):
        self.L, self.H, self.hq, self.hkv, self.d, self.F, self.V = layers, hidden, hq, hkv, d, ffn, vocab
        qkv = (hq + 2 * hkv) * d
        s = 0.02
        self.wqkv = [rand((qkv, hidden), scale=s) for _ in range(layers)]
        self.wo = [rand((hidden, hq * d), scale=s) for _ in range(layers)]
        self.wgu = [rand((2 * ffn, hidden), scale=s) for _ in range(layers)]
        self.wd = [rand((hidden, ffn), scale=s) for _ in range(layers)]
        self.norm = [rand((hidden,)) for _ in range(2 * layers + 1)]
        self.lm = rand((vocab, hidden), scale=s)

    def rope(self, x, pos):
        # x: [..., T, d]; theta 1e6 as in the cudarc chain.
        half = self.d // 2
        inv = torch.exp2(-torch.arange(half, device="cuda", dtype=torch.float32) / half * 19.93156857)
        ang = pos[:, None].float() * inv[None, :]
        cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
        a, c = x[..., :half], x[..., half:]
        return torch.cat([a * cos - c * sin, c * cos + a * sin], dim=-1)

    def layer_ffn(self, x, l):
        h = F.rms_norm(x, (self.H,), self.norm[2 * l + 1], 1e-6)
        gu = h @ self.wgu[l].t()
        a = F.silu(gu[:, : self.F]) * gu[:, self.F:]
        return x + a @ self.wd[l].t()

    def decode(self, x, kcs, vcs, c, layers=None, head=True):
        b = x.shape[0]
        pos = torch.full((1,), c - 1, device="cuda")
        for l in range(self.L if layers is None else layers):
            h = F.rms_norm(x, (self.H,), self.norm[2 * l], 1e-6)
            qkv = h @ self.wqkv[l].t()
            q = qkv[:, : self.hq * self.d].view(b, self.hkv, self.hq // self.hkv, self.d)
            k = qkv[:, self.hq * self.d:(self.hq + self.hkv) * self.d].view(b, self.hkv, 1, self.d)
            v = qkv[:, (self.hq + self.hkv) * self.d:].view(b, self.hkv, 1, self.d)
            q, k = self.rope(q, pos), self.rope(k, pos)
            kc, vc = kcs[l], vcs[l]
            kc[:, :, c - 1:c].copy_(k)
            vc[:, :, c - 1:c].copy_(v)
            o = F.scaled_dot_product_attention(q, kc, vc).reshape(b, self.hq * self.d)
            x = x + o @ self.wo[l].t()
            x = self.layer_ffn(x, l)
        if not head:
            return x
        h = F.rms_norm(x, (self.H,), self.norm[2 * self.L], 1e-6)
        return h @ self.lm.t()

    def prefill(self, x, layers=None, head=True, kcs=None, vcs=None, ctx=0):
        """A chunk of x.shape[0] tokens after `ctx` cached ones (kcs/vcs: per-layer caches of
        [kv heads, ctx + chunk, d] holding the prefix; the chunk's K and V are written after it)."""
        e = x.shape[0]
        pos = torch.arange(ctx, ctx + e, device="cuda")
        for l in range(self.L if layers is None else layers):
            h = F.rms_norm(x, (self.H,), self.norm[2 * l], 1e-6)
            qkv = h @ self.wqkv[l].t()
            q = qkv[:, : self.hq * self.d].view(e, self.hq, self.d).transpose(0, 1)
            k = qkv[:, self.hq * self.d:(self.hq + self.hkv) * self.d].view(e, self.hkv, self.d).transpose(0, 1)
            v = qkv[:, (self.hq + self.hkv) * self.d:].view(e, self.hkv, self.d).transpose(0, 1)
            q, k = self.rope(q, pos), self.rope(k, pos)
            if ctx:
                kcs[l][:, ctx:ctx + e].copy_(k)
                vcs[l][:, ctx:ctx + e].copy_(v)
                k, v = kcs[l], vcs[l]
            g = self.hq // self.hkv
            k, v = k.repeat_interleave(g, dim=0), v.repeat_interleave(g, dim=0)
            o = causal_attention(q[None], k[None], v[None])
            x = x + o[0].transpose(0, 1).reshape(e, self.hq * self.d) @ self.wo[l].t()
            x = self.layer_ffn(x, l)
        if not head:
            return x
        h = F.rms_norm(x[-1:], (self.H,), self.norm[2 * self.L], 1e-6)
        return h @ self.lm.t()


def run_steps(decode_steps, prefill_chunks):
    m = Llama()
    out = []
    pool = rand((30 << 30,))  # 60 GiB KV pool shared by the layers' caches, as in the cudarc chain
    for b, c in decode_steps:
        per = b * m.hkv * c * m.d
        regions = max(1, pool.numel() // (2 * per))
        kcs = [pool[(l % regions) * 2 * per:(l % regions) * 2 * per + per].view(b, m.hkv, c, m.d) for l in range(m.L)]
        vcs = [pool[(l % regions) * 2 * per + per:(l % regions) * 2 * per + 2 * per].view(b, m.hkv, c, m.d) for l in range(m.L)]
        x = rand((b, m.H))
        logits = m.decode(x, kcs, vcs, c)
        assert torch.isfinite(logits.float()).all(), "decode produced non-finite logits"
        us = graph_replay_us(lambda i: m.decode(x, kcs, vcs, c), 1, replays=7)
        log(f"torch decode batch {b:>4} ctx {c:>6}: {us:9.1f} µs")
        out.append({"mode": "decode", "batch": b, "ctx": c, "tokens": b, "measured_us": us,
                    "runner": "PyTorch (CUDA graph, SDPA)"})
    # One layer alone, as graphs: decode at batch 1 / 1K context and a 4K-token prefill chunk
    # (what this chain's non-GEMM, non-attention kernels cost, for the peer's fitted terms).
    per = 1 * m.hkv * 1024 * m.d
    kc1, vc1 = pool[:per].view(1, m.hkv, 1024, m.d), pool[per:2 * per].view(1, m.hkv, 1024, m.d)
    x1 = rand((1, m.H))
    # Decode: the cost of one more layer inside a chain (8 layers less 4), so that the graph's
    # own launch and drain are not charged to every layer.
    d8 = graph_replay_us(lambda i: m.decode(x1, [kc1] * 8, [vc1] * 8, 1024, layers=8, head=False), 1, replays=9)
    d4 = graph_replay_us(lambda i: m.decode(x1, [kc1] * 4, [vc1] * 4, 1024, layers=4, head=False), 1, replays=9)
    layer = {"decode_us": (d8 - d4) / 4}
    x4 = rand((4096, m.H))
    layer["prefill_tokens"] = 4096
    layer["prefill_us"] = graph_replay_us(lambda i: m.prefill(x4, layers=1, head=False), 1, replays=9)
    log(f"torch one layer: decode b1 c1024 {layer['decode_us']:.1f} µs, prefill 4096 {layer['prefill_us']:.1f} µs")
    sustained = measure_sustained(m, x4, pool)
    del pool
    torch.cuda.empty_cache()
    attn_only, eager = [], []
    for e, c in prefill_chunks:
        x = rand((e, m.H))
        kcs = vcs = None
        if c:
            kcs = [rand((m.hkv, c + e, m.d)) for _ in range(m.L)]
            vcs = [rand((m.hkv, c + e, m.d)) for _ in range(m.L)]
        run = lambda: m.prefill(x, kcs=kcs, vcs=vcs, ctx=c)
        for _ in range(2):
            run()
        torch.cuda.synchronize()
        ts = [time_once(run) * 1e3 for _ in range(5)]
        eager_us = statistics.median(ts)
        eager.append({"tokens": e, "ctx": c, "us": eager_us})
        # The GPU work alone: the same chain captured as a graph (no Python launch gaps).
        us = graph_replay_us(lambda i: run(), 1, replays=5)
        q = rand((1, m.hq, e, m.d))
        k, v = rand((1, m.hq, c + e, m.d)), rand((1, m.hq, c + e, m.d))
        a_us = time_graph(lambda i: causal_attention(q, k, v))
        # Useful score FLOPs: each of the e rows attends its prefix and the chunk up to itself.
        attn_flops = 4 * m.hq * m.d * e * (c + e / 2)
        attn_only.append({"tokens": e, "ctx": c, "us": a_us, "tflops": attn_flops / a_us / 1e6})
        log(f"torch prefill chunk {e:>6} ctx {c:>6}: {us:9.1f} µs in a graph, {eager_us:9.1f} µs eager "
            f"(attention alone {a_us:.1f} µs per layer)")
        out.append({"mode": "prefill", "batch": 1, "ctx": c, "tokens": e, "measured_us": us,
                    "runner": "PyTorch (CUDA graph, SDPA flash)"})
        del kcs, vcs
        torch.cuda.empty_cache()
    return out, attn_only, eager, layer, sustained


def back_to_back_us(fn, n):
    """fn replayed n times with no host wait between: µs of each replay, from events."""
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
    ev[0].record()
    for i in range(n):
        fn()
        ev[i + 1].record()
    ev[-1].synchronize()
    return [ev[i].elapsed_time(ev[i + 1]) * 1e3 for i in range(n)]


def captured(fn):
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


def measure_sustained(m, x4, pool):
    """The curves are short bursts (~3 ms graphs) at the boost clock. Under steady load the
    board power limit lowers the SM clock: time a tensor-core-bound piece (one prefill layer of
    4096 tokens) and a bandwidth-bound one (decode attention reading 8.6 GB) at the first
    replays after idle and after ~0.5 s back to back."""
    out = {}
    g = captured(lambda: m.prefill(x4, layers=1, head=False))
    time.sleep(1.0)
    ts = back_to_back_us(g.replay, 160)
    out["prefill_layer"] = {"tokens": x4.shape[0], "burst_us": statistics.median(ts[:3]),
                            "steady_us": statistics.median(ts[-40:])}
    del g
    b, c = 32, 65536
    per = b * m.hkv * c * m.d
    kc, vc = pool[:per].view(b, m.hkv, c, m.d), pool[per:2 * per].view(b, m.hkv, c, m.d)
    q = rand((b, m.hkv, m.hq // m.hkv, m.d))
    g = captured(lambda: F.scaled_dot_product_attention(q, kc, vc))
    time.sleep(1.0)
    ts = back_to_back_us(g.replay, 300)
    out["decode_attention"] = {"batch": b, "ctx": c, "kv_bytes": 4 * per, "burst_us": statistics.median(ts[:3]),
                               "steady_us": statistics.median(ts[-100:])}
    for k, v in out.items():
        log(f"torch sustained {k}: first replays {v['burst_us']:.1f} µs, after ~0.5 s back to back {v['steady_us']:.1f} µs")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", help="profile YAML from `sweep calibrate gpu` (shapes and M values)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps-out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seed", type=int, default=42)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True
    gemms, ms = [], [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]
    moes, attn_cfg = [], (8, 4, 128, [1, 8, 32, 128], [1 << p for p in range(10, 19)])
    if a.profile:
        import yaml
        prof = yaml.safe_load(open(a.profile))["measured"]
        seen = set()
        for c in prof["gemm"]:
            if (c["n"], c["k"]) not in seen:
                seen.add((c["n"], c["k"]))
                gemms.append((c["name"], c["n"], c["k"]))
            ms = [p["m"] for p in c["points"]]
        for c in prof.get("moe", []):
            if c["dtype"] == "bf16":
                moes.append((c["name"], c["n"], c["k"], c["experts"], c["top_k"], [p["tokens"] for p in c["points"]]))
        at = prof["attention"]
        batches = sorted({p["batch"] for p in at["points"]})
        ctxs = sorted({p["ctx"] for p in at["points"]})
        attn_cfg = (at["kv_heads"], at["q_per_kv"], at["head_dim"], batches, ctxs)
    else:
        gemms = [("llama-3.1-8b/qkv_proj", 6144, 4096), ("llama-3.1-8b/o_proj", 4096, 4096),
                 ("llama-3.1-8b/gate_up_proj", 28672, 4096), ("llama-3.1-8b/down_proj", 4096, 14336),
                 ("llama-3.1-8b/lm_head", 128256, 4096)]
    if a.quick:
        ms = [1, 16, 256, 4096]
    dev = torch.cuda.get_device_properties(0)
    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
           "cublas": getattr(torch.backends.cuda, "cublas_version", lambda: None)() if hasattr(torch.backends.cuda, "cublas_version") else None,
           "sm_count": dev.multi_processor_count,
           "method": "CUDA graph of n ops (n for ~3 ms), events, median of 9 replays / n, random inputs, rotated weights"}
    t0 = time.time()
    res["copy"] = measure_copy()
    log(f"torch copy: kernel {res['copy']['gbps']:.0f} GB/s, memcpy {res['copy']['memcpy_gbps']:.0f} GB/s")
    res["gemm"] = []
    for name, n, k in gemms:
        for dt in ("bf16", "fp8"):
            c = measure_gemm(name, n, k, dt, ms)
            best = max((p["tflops"] or 0) for p in c["points"])
            log(f"torch gemm {name:<32} {n:>6}x{k:<6} {dt}: M=1 {c['points'][0]['us']} µs, best {best:.0f} TFLOP/s")
            res["gemm"].append(c)
    res["moe"] = [measure_moe(*mo) for mo in moes]
    res["attention"] = measure_attention(*attn_cfg)
    for p in res["attention"]["points"]:
        log(f"torch attn batch {p['batch']:>4} ctx {p['ctx']:>7}: {p['us']:9.1f} µs {p['gbps']:6.0f} GB/s")
    decode_steps = []
    for b in [1, 8, 32, 64, 128, 256]:
        for c in [1024, 4096, 16384, 65536]:
            if b * c <= 2 << 20:
                decode_steps.append((b, c))
    # Chunks from an empty cache, then chunks after a cached prefix (chunked prefill of a long
    # prompt, or a new turn after a cached conversation).
    chunks = [(e, 0) for e in [1024, 2048, 4096, 8192, 16384]]
    chunks += [(1024, 15360), (2048, 6144), (2048, 30720), (4096, 12288), (8192, 8192)]
    if a.quick:
        decode_steps, chunks = [(1, 1024), (32, 4096)], [(1024, 0), (8192, 0), (2048, 6144)]
    res["prefix_attention_check"] = check_prefix_attention()
    steps, attn_prefill, eager, layer, sustained = run_steps(decode_steps, chunks)
    res["layer"] = layer
    res["sustained"] = sustained
    res["attention_prefill"] = attn_prefill
    res["prefill_eager"] = eager
    res["seconds"] = time.time() - t0
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    with open(a.steps_out, "w") as f:
        json.dump(steps, f, indent=1)
    log(f"torch calibration done in {res['seconds']:.0f} s")


if __name__ == "__main__":
    main()
