#!/usr/bin/env python3
"""Compares two AgentX replays request by request: agentx-harness's profile_export.jsonl against
sweep's (both AIPerf-shaped records). Used by scripts/crosscheck-agentx-harness.sh.

A request is keyed by (trace id, outer request index, inner index for subagent requests). Records
are grouped into session trees (root correlation id; the k-th play of a trace is tree (trace, k))
and, within a tree, into conversations; each conversation's ordered key sequence is compared per
phase (flattened agents, `::fa:` / `::aux:` / `::wg:` conversations, included). Aggregates are
computed from the records the same way for both.

Usage: compare-replays.py HARNESS.jsonl SWEEP.jsonl [--sweep-agg agg.json] [--check] [--min-match F]
"""
import argparse
import json
import statistics
import sys
from collections import defaultdict


def kind(conv):
    if "::sa:" in conv:
        return "subagent"
    if "::fa:" in conv or "::aux:" in conv or "::wg:" in conv:
        return "flat"
    return "main"


def load(path):
    recs = []
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            m, x = r["metadata"], r.get("metrics", {})
            conv = m.get("conversation_id", "")
            k = kind(conv)
            val = lambda name: (x.get(name) or {}).get("value")
            recs.append({
                "phase": m.get("benchmark_phase"),
                "trace": m.get("source_trace_id"),
                "conv": conv,
                "kind": k,
                "key": (m.get("source_trace_id"), m.get("source_outer_idx"), m.get("turn_index") if k == "subagent" else None),
                "root": m.get("root_correlation_id") or m.get("x_correlation_id"),
                "start": m.get("request_start_ns"),
                "end": m.get("request_end_ns"),
                "isl": val("input_sequence_length"),
                "osl": val("output_sequence_length"),
                "ttft": val("time_to_first_token"),
                "e2el": val("request_latency"),
                "ok": r.get("error") is None and not m.get("was_cancelled"),
            })
    return recs


def trees(recs):
    """{(trace, k): {(phase, conversation kind + agent): [records in start order]}}."""
    first = {}
    for r in recs:
        first[r["root"]] = min(first.get(r["root"], r["start"]), r["start"])
    per_trace = defaultdict(list)
    for root, t0 in first.items():
        trace = next(r["trace"] for r in recs if r["root"] == root)
        per_trace[trace].append((t0, root))
    name = {}
    for trace, roots in per_trace.items():
        for k, (_, root) in enumerate(sorted(roots)):
            name[root] = (trace, k)
    out = defaultdict(lambda: defaultdict(list))
    for r in sorted(recs, key=lambda r: r["start"]):
        conv = r["conv"].split("::", 1)[1] if "::" in r["conv"] and r["kind"] != "main" else r["kind"]
        out[name[r["root"]]][(r["phase"], conv)].append(r)
    return out


def agg(recs):
    prof = [r for r in recs if r["phase"] == "profiling" and r["ok"]]
    q = lambda xs, p: statistics.quantiles(xs, n=100, method="inclusive")[p - 1] if len(xs) > 1 else (xs[0] if xs else None)
    col = lambda f: [r[f] for r in prof if r[f] is not None]
    return {
        "requests (profiling, ok)": len(prof),
        "warmup requests": sum(1 for r in recs if r["phase"] == "warmup"),
        "ISL mean": statistics.fmean(col("isl")) if col("isl") else None,
        "OSL mean": statistics.fmean(col("osl")) if col("osl") else None,
        "TTFT p50 (ms)": q(col("ttft"), 50),
        "TTFT p90 (ms)": q(col("ttft"), 90),
        "E2EL p50 (ms)": q(col("e2el"), 50),
        "E2EL p90 (ms)": q(col("e2el"), 90),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("harness")
    ap.add_argument("sweep")
    ap.add_argument("--sweep-agg")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--min-match", type=float, default=None,
                    help="exit 1 when fewer than this share of the compared requests match in order")
    a = ap.parse_args()
    h, s = load(a.harness), load(a.sweep)
    th, ts = trees(h), trees(s)
    compared = matched = 0
    isl_diffs, osl_mismatch, problems = [], 0, []
    print("| tree | phase / conversation | harness | sweep | same sequence |\n|---|---|---|---|---|")
    for tree in sorted(set(th) | set(ts), key=lambda t: (t[0], t[1])):
        for conv in sorted(set(th.get(tree, {})) | set(ts.get(tree, {}))):
            a_seq = [r["key"] for r in th.get(tree, {}).get(conv, [])]
            b_seq = [r["key"] for r in ts.get(tree, {}).get(conv, [])]
            n = min(len(a_seq), len(b_seq))
            same_prefix = a_seq[:n] == b_seq[:n]
            # At the deadline one tool may have started one more request than the other.
            tail_ok = abs(len(a_seq) - len(b_seq)) <= (1 if conv[0] == "profiling" else 0)
            ok = same_prefix and tail_ok
            compared += max(len(a_seq), len(b_seq))
            if same_prefix:
                matched += n
                for x, y in zip(th[tree][conv][:n], ts[tree][conv][:n]):
                    if x["isl"] is not None and y["isl"] is not None:
                        isl_diffs.append(y["isl"] - x["isl"])
                    if x["osl"] is not None and y["osl"] is not None and x["osl"] != y["osl"]:
                        osl_mismatch += 1
            if not ok:
                problems.append(f"{tree} {conv}: harness {a_seq[:6]}… ({len(a_seq)}) vs sweep {b_seq[:6]}… ({len(b_seq)})")
            print(f"| {tree[0]} #{tree[1]} | {conv[0]} / {conv[1]} | {len(a_seq)} | {len(b_seq)} | {'yes' if ok else 'NO'} |")
    print()
    print(f"requests compared {compared}, matched in order {matched}")
    if isl_diffs:
        print(f"ISL sweep − harness: mean {statistics.fmean(isl_diffs):+.1f}, min {min(isl_diffs):+.0f}, max {max(isl_diffs):+.0f} tokens; OSL mismatches {osl_mismatch}")
    print()
    ah, as_ = agg(h), agg(s)
    print("| metric (from the records) | agentx-harness | sweep | sweep / harness |\n|---|---|---|---|")
    for k in ah:
        x, y = ah[k], as_[k]
        ratio = f"{y / x:.3f}" if isinstance(x, (int, float)) and isinstance(y, (int, float)) and x else "n/a"
        f = lambda v: f"{v:.4g}" if isinstance(v, float) else str(v)
        print(f"| {k} | {f(x)} | {f(y)} | {ratio} |")
    for p in problems:
        print("DIFFERS:", p)
    bad = bool(problems) or osl_mismatch > 0 or any(abs(d) > 64 for d in isl_diffs) or matched == 0
    if a.check and bad:
        print("crosscheck: FAIL", file=sys.stderr)
        return 1
    share = matched / compared if compared else 0.0
    if a.min_match is not None and share < a.min_match:
        print(f"crosscheck: FAIL: {matched}/{compared} requests match in order, below {a.min_match:.0%}", file=sys.stderr)
        return 1
    print("crosscheck: " + ("differences listed above" if bad else "same requests in the same order"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
