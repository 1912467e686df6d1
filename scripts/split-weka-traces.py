#!/usr/bin/env python3
"""Writes each Weka trace of a JSONL (optionally gzip) file as <id>.json in a folder: the layout
AIPerf's weka_trace loader reads (one JSON document per file).

Usage: scripts/split-weka-traces.py TRACES.jsonl[.gz] OUT_DIR
"""
import gzip, json, os, sys

src, dst = sys.argv[1], sys.argv[2]
os.makedirs(dst, exist_ok=True)
with (gzip.open if src.endswith(".gz") else open)(src, "rt") as f:
    for line in f:
        if line.strip():
            t = json.loads(line)
            with open(os.path.join(dst, f"{t['id']}.json"), "w") as o:
                json.dump(t, o)
