#!/usr/bin/env python3
"""Connection flood against `sweep engine serve`: resident memory before, during and after.

Starts the server, answers one chat request (the baseline is a warm server), then opens
--total connections in waves of --wave held at once; each sends half a request head and the
wave is closed together. Prints the server's VmRSS (from /proc) before, at each wave's peak, and
1, 3, 5 and 10 s after the last wave, then checks that the server still answers.

Usage: scripts/bench/conn_flood.py [--sweep target/debug/sweep] [--total 20000] [--wave 5000]
"""

import argparse
import json
import re
import resource
import socket
import subprocess
import sys
import time
import urllib.request


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        kb = int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))
    return kb / 1024


def chat(port):
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "ignore_eos": True})
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", body.encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)["usage"]["completion_tokens"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sweep", default="target/debug/sweep")
    ap.add_argument("--total", type=int, default=20000)
    ap.add_argument("--wave", type=int, default=5000)
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if a.wave + 64 > hard:
        sys.exit(f"--wave {a.wave} needs more descriptors than this shell's hard limit ({hard})")
    server = subprocess.Popen(
        [a.sweep, "engine", "serve", "--model-path", "deepseek-ai/DeepSeek-V4-Flash", "--tp", "8", "--port", "0"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = server.stderr.readline()
        port = int(re.search(r"http://127\.0\.0\.1:(\d+)", line).group(1))
        assert chat(port) == 8
        pid = server.pid
        print(f"before flood: {rss_mb(pid):.1f} MB")
        partial = b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Le"
        done, t0 = 0, time.time()
        while done < a.total:
            n = min(a.wave, a.total - done)
            socks = []
            for _ in range(n):
                s = socket.create_connection(("127.0.0.1", port))
                s.sendall(partial)
                socks.append(s)
            time.sleep(0.5)  # let the server read every partial head
            print(f"wave of {n} open ({done + n}/{a.total}): {rss_mb(pid):.1f} MB")
            for s in socks:
                s.close()
            done += n
        end = time.time()
        print(f"flood of {a.total} connections took {end - t0:.1f} s")
        for t in (1, 3, 5, 10):
            time.sleep(max(0.0, end + t - time.time()))
            print(f"{t:>2} s after: {rss_mb(pid):.1f} MB")
        assert chat(port) == 8, "the server no longer answers"
        print("still serving")
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
