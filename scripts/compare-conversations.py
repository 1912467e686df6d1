#!/usr/bin/env python3
"""Compare two `sweep trace conversations --json`-format files (sweep's and the reference's, from
scripts/fixtures/agentx_conversations.py) conversation by conversation: the same conversations
with the same requests, spawning and joining root turns, dispatch point and predecessors.
Prints a summary and the first differences; exits 1 when any conversation differs."""

import json
import sys


def load(path):
    out = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                c = json.loads(line)
                c["preds"] = [sorted(tuple(p) for p in ps) for ps in c["preds"]]
                out[(c["trace"], c["conversation"])] = c
    return out


def main(ours_path, ref_path):
    ours, ref = load(ours_path), load(ref_path)
    fields = ["kind", "requests", "spawn", "join", "at_issue", "preds"]
    problems = []
    for key in sorted(set(ours) | set(ref)):
        if key not in ours:
            problems.append(f"{key[1]}: only in the reference")
            continue
        if key not in ref:
            problems.append(f"{key[1]}: only in sweep")
            continue
        a, b = ours[key], ref[key]
        for f in fields:
            if a[f] != b[f]:
                if f == "preds":
                    diff = [(k, x, y) for k, (x, y) in enumerate(zip(a[f], b[f])) if x != y]
                    problems.append(f"{key[1]}: preds differ at {len(diff)} turns, first turn {diff[0][0]}: sweep {diff[0][1]} reference {diff[0][2]}" if diff else f"{key[1]}: preds lengths differ")
                else:
                    problems.append(f"{key[1]}: {f}: sweep {a[f]} reference {b[f]}")
    kinds = {}
    for c in ref.values():
        kinds[c["kind"]] = kinds.get(c["kind"], 0) + 1
    traces = len({k[0] for k in ref})
    turns = sum(len(c["requests"]) for c in ref.values())
    print(f"reference: {traces} traces, {len(ref)} conversations ({', '.join(f'{v} {k}' for k, v in sorted(kinds.items()))}), {turns} requests")
    print(f"sweep:     {len({k[0] for k in ours})} traces, {len(ours)} conversations")
    if problems:
        print(f"{len(problems)} differences:")
        for p in problems[:20]:
            print("  " + p)
        return 1
    print("identical: conversations, requests, spawn and join turns, dispatch points, predecessors")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
