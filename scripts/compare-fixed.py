#!/usr/bin/env python3
"""Compares two fixed-sequence-length results in benchmark_serving's `--save-result` shape:
InferenceX's benchmark_serving.py against `sweep replay --isl/--osl` (its benchmark_serving.json),
both run against the same server configuration. Used by scripts/crosscheck-benchmark-serving.sh.

Checks:
  - `completed`: the same number of successful requests;
  - `output_lens`: the same list (both clients draw the lengths with numpy's legacy generator from
    the same seed and send them with `ignore_eos`), in request order, and equal to the draws;
  - `input_lens`: means within --isl-tolerance (1 %) and a two-sample Kolmogorov–Smirnov statistic
    below its 5 % critical value (benchmark_serving re-encodes decoded random ids; sweep
    synthesizes text of the drawn length);
  - every metric of the result JSON side by side as sweep / benchmark_serving: throughputs,
    duration, token totals, mean / median / p99 of TTFT, TPOT, ITL and E2EL, each PASS when within
    --tolerance (2 %; `none`: reported without a target). std and other percentiles are shown
    without a target (they rest on the tails of a few dozen requests).

Against `sweep engine serve --time-scale K`, benchmark_serving's clock is the wall clock while
sweep's records are in the server's (engine) time: --time-scale K multiplies benchmark_serving's
durations and latencies by K and divides its throughputs by K before comparing.

With --server-metrics BS.prom SWEEP.prom (the server's /metrics after each client's run, warmup
included), the engine's own view of both runs is shown too: what the server measured of the
same work, whichever client timed it.

With --drawn (the lengths numpy draws for the scenario, computed by the calling script with
benchmark_serving's own calls) each client's output_lens are checked against the draws; with
--sweep-agg, a server that sends no usage chunk is recognised: benchmark_serving then counts 0
output tokens for every request (its `output_tokens` defaults to 0, so its tokenizer fallback
never runs), and its output_lens are reported as not comparable instead of failing.

Usage: compare-fixed.py BS.json SWEEP.json [--name NAME] [--time-scale K] [--tolerance F|none]
       [--ttft-tolerance F|none] [--isl-tolerance F] [--drawn DRAWN.json] [--sweep-agg agg.json]
       [--server-metrics BS.prom SWEEP.prom] [--json OUT] [--check]
Exit status: 1 with --check when a targeted row fails, 0 otherwise.
"""
import argparse
import json
import math
import re
import sys

# Rows with a target: (key, kind). kind: "time" (ms; ×K), "rate" (per second; ÷K), "dur" (s; ×K),
# "count" (no scaling).
TARGETED = [
    ("duration", "dur"),
    ("total_input_tokens", "count"),
    ("total_output_tokens", "count"),
    ("request_throughput", "rate"),
    ("output_throughput", "rate"),
    ("total_token_throughput", "rate"),
] + [(f"{s}_{m}_ms", "time") for m in ("ttft", "tpot", "itl", "e2el") for s in ("mean", "median", "p99")]

SKIP = {"date", "backend", "model_id", "tokenizer_id", "best_of", "num_prompts", "request_rate", "burstiness",
        "max_concurrency", "benchmark_start_time_unix", "benchmark_end_time_unix", "completed",
        "input_lens", "output_lens", "request_goodput:"}


def ks_statistic(a, b):
    """Two-sample Kolmogorov–Smirnov statistic: the largest gap between the empirical CDFs."""
    a, b = sorted(a), sorted(b)
    i = j = 0
    d = 0.0
    while i < len(a) and j < len(b):
        x = min(a[i], b[j])
        while i < len(a) and a[i] == x:
            i += 1
        while j < len(b) and b[j] == x:
            j += 1
        d = max(d, abs(i / len(a) - j / len(b)))
    return d


def ks_critical(n, m, alpha_c=1.358):
    """The statistic's 5 % critical value, c(α) · sqrt((n + m) / (n · m))."""
    return alpha_c * math.sqrt((n + m) / (n * m))


def prom(path):
    """Sums of the sglang:* samples of a Prometheus text file, by metric name (labels summed)."""
    out = {}
    try:
        with open(path) as f:
            for line in f:
                m = re.match(r"^(sglang:[a-z_]+)(\{[^}]*\})?\s+([-0-9.eE+naif]+)", line)
                if m:
                    out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(3))
    except OSError:
        return None
    return out


def server_rows(a, b):
    """What the engine itself measured in each run (warmup and readiness probes included)."""
    rows = []
    mean = lambda p, name: p[f"{name}_sum"] / p[f"{name}_count"] if p.get(f"{name}_count") else None
    for label, f in [
        ("server: requests", lambda p: p.get("sglang:num_requests_total")),
        ("server: prompt tokens", lambda p: p.get("sglang:prompt_tokens_total")),
        ("server: generation tokens", lambda p: p.get("sglang:generation_tokens_total")),
        ("server: TTFT mean (ms, engine time)", lambda p: None if mean(p, "sglang:time_to_first_token_seconds") is None else 1e3 * mean(p, "sglang:time_to_first_token_seconds")),
        ("server: ITL mean (ms, engine time)", lambda p: None if mean(p, "sglang:inter_token_latency_seconds") is None else 1e3 * mean(p, "sglang:inter_token_latency_seconds")),
        ("server: E2E mean (ms, engine time)", lambda p: None if mean(p, "sglang:e2e_request_latency_seconds") is None else 1e3 * mean(p, "sglang:e2e_request_latency_seconds")),
    ]:
        x, y = f(a), f(b)
        rows.append({"metric": label, "benchmark_serving": x, "sweep": y, "ratio": (y / x if x and y is not None else None),
                     "target": None, "pass": None})
    return rows


def fmt(v):
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e3 else f"{v:,.1f}"
    return str(v)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bs")
    ap.add_argument("sweep")
    ap.add_argument("--name", default="server")
    ap.add_argument("--time-scale", type=float, default=1.0)
    ap.add_argument("--tolerance", default="0.02", help="relative target of the metric rows, or `none`")
    ap.add_argument("--ttft-tolerance", default=None,
                    help="target of the TTFT rows (default: --tolerance), or `none` to report them without one")
    ap.add_argument("--isl-tolerance", type=float, default=0.01)
    ap.add_argument("--server-metrics", nargs=2, metavar=("BS_PROM", "SWEEP_PROM"))
    ap.add_argument("--drawn", help="JSON {input_lens, output_lens}: numpy's draws for the scenario")
    ap.add_argument("--sweep-agg", help="sweep's agg.json (token_counts: whether the server sent usage)")
    ap.add_argument("--json")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    tol = None if a.tolerance == "none" else float(a.tolerance)
    ttft_tol = tol if a.ttft_tolerance is None else (None if a.ttft_tolerance == "none" else float(a.ttft_tolerance))
    k = a.time_scale
    bs, sw = json.load(open(a.bs)), json.load(open(a.sweep))
    drawn = json.load(open(a.drawn)) if a.drawn else None

    checks = []

    def check(name, ok, detail):
        """ok: True, False, or None (not applicable: shown, never a miss)."""
        checks.append({"check": name, "pass": None if ok is None else bool(ok), "detail": detail})

    check("completed", bs.get("completed") == sw.get("completed"),
          f"benchmark_serving {bs.get('completed')}, sweep {sw.get('completed')} of {bs.get('num_prompts')} prompts")
    bo, so = bs.get("output_lens") or [], sw.get("output_lens") or []
    # benchmark_serving's output_tokens defaults to 0, not None: without a usage chunk
    # (llama-cpp-python sends none) it counts 0 tokens and its tokenizer fallback never runs.
    no_usage = None
    if a.sweep_agg:
        counts = json.load(open(a.sweep_agg)).get("token_counts") or {}
        no_usage = counts.get("usage", 0) == 0 and sum(counts.values()) > 0
    bs_blind = bool(no_usage) and bo and not any(bo)
    blind = "not comparable: the server sent no usage, so benchmark_serving counted 0 output tokens per request"

    def lens(xs, ys):
        differ = sum(1 for x, y in zip(xs, ys) if x != y) + abs(len(xs) - len(ys))
        return f"{'identical' if xs == ys else f'{differ} of {max(len(xs), len(ys))} differ'} (means {sum(xs) / max(1, len(xs)):.1f} vs {sum(ys) / max(1, len(ys)):.1f})"

    if drawn:
        check("output_lens: sweep = numpy draws", so == drawn["output_lens"], lens(so, drawn["output_lens"]))
        check("output_lens: benchmark_serving = numpy draws", None if bs_blind else bo == drawn["output_lens"],
              blind if bs_blind else lens(bo, drawn["output_lens"]))
    check("output_lens identical", None if bs_blind else (bo == so and len(bo) > 0),
          blind if bs_blind else f"in request order: {lens(bo, so)}" + ("" if bo == so or sorted(bo) != sorted(so) else "; same multiset"))
    bi, si = bs.get("input_lens") or [], sw.get("input_lens") or []
    if bi and si:
        mb, ms = sum(bi) / len(bi), sum(si) / len(si)
        rel = ms / mb - 1 if mb else float("inf")
        check("input_lens mean", abs(rel) <= a.isl_tolerance,
              f"benchmark_serving {mb:.1f}, sweep {ms:.1f} ({rel:+.2%}; target ±{a.isl_tolerance:.0%})")
        d, crit = ks_statistic(bi, si), ks_critical(len(bi), len(si))
        same = sum(1 for x, y in zip(bi, si) if x == y)
        at_draw = "" if not drawn else (
            f"; at the drawn length: benchmark_serving {sum(1 for x, y in zip(bi, drawn['input_lens']) if x == y)}/{len(bi)}, "
            f"sweep {sum(1 for x, y in zip(si, drawn['input_lens']) if x == y)}/{len(si)}")
        check("input_lens KS", d <= crit,
              f"D = {d:.3f} (5 % critical value {crit:.3f}); {same}/{min(len(bi), len(si))} requests the same length in request order{at_draw}")
    else:
        check("input_lens", False, "missing input_lens")

    scale = {"time": k, "dur": k, "rate": 1 / k, "count": 1.0}
    rows = []
    targeted = dict(TARGETED)
    keys = [key for key, _ in TARGETED] + sorted(
        key for key in bs if key in sw and key not in targeted and key not in SKIP
        and isinstance(bs[key], (int, float)) and not isinstance(bs[key], bool))
    for key in keys:
        x, y = bs.get(key), sw.get(key)
        kind = targeted.get(key) or ("time" if key.endswith("_ms") else "count")
        if isinstance(x, (int, float)) and kind != "count":
            x = x * scale[kind]
        ratio = y / x if isinstance(x, (int, float)) and isinstance(y, (int, float)) and x else None
        target = (ttft_tol if "_ttft_" in key else tol) if key in targeted else None
        ok = None if target is None else (ratio is not None and abs(ratio - 1) <= target)
        rows.append({"metric": key, "benchmark_serving": x, "sweep": y, "ratio": ratio, "target": target, "pass": ok})
    srv = []
    if a.server_metrics:
        pa, pb = prom(a.server_metrics[0]), prom(a.server_metrics[1])
        if pa and pb:
            srv = server_rows(pa, pb)

    print(f"### {a.name}" + (f" (benchmark_serving's wall-clock figures × {k:g} into the server's time)" if k != 1 else ""))
    print()
    for c in checks:
        print(f"- {'n/a ' if c['pass'] is None else 'PASS' if c['pass'] else 'FAIL'} {c['check']}: {c['detail']}")
    print()
    tol_s = "no target" if tol is None else f"±{tol:.0%}"
    if ttft_tol != tol:
        tol_s += f" (TTFT: {'no target' if ttft_tol is None else f'±{ttft_tol:.0%}'})"
    print(f"| metric | benchmark_serving | sweep | sweep / bs | {tol_s} |\n|---|---:|---:|---:|---|")
    for r in rows + srv:
        verdict = "" if r["pass"] is None else ("PASS" if r["pass"] else "FAIL")
        ratio = "n/a" if r["ratio"] is None else f"{r['ratio']:.3f}"
        print(f"| {r['metric']} | {fmt(r['benchmark_serving'])} | {fmt(r['sweep'])} | {ratio} | {verdict} |")
    failed = [c["check"] for c in checks if c["pass"] is False] + [r["metric"] for r in rows if r["pass"] is False]
    print()
    print(f"{a.name}: " + ("all targets met" if not failed else "missed: " + ", ".join(failed)))
    summary = {"name": a.name, "time_scale": k, "tolerance": tol, "ttft_tolerance": ttft_tol, "isl_tolerance": a.isl_tolerance,
               "checks": checks, "metrics": rows, "server_metrics": srv, "missed": failed, "pass": not failed}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(summary, f, indent=1)
    return 1 if a.check and failed else 0


if __name__ == "__main__":
    sys.exit(main())
