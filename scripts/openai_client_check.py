#!/usr/bin/env python3
"""A real OpenAI client against `sweep engine serve`, unchanged.

Starts the server with the DeepSeek-V4.1-Flash TP4 recipe flags (Agg TP4, conc 4 point of
../shared/data/seed/dsv41flash-gb300-sglang-agentic.yaml), then streams and non-streams
through the `openai` package and checks the role chunk, the deltas (reasoning and content),
the separate finish chunk, the usage chunk, and that usage matches what was asked
(`ignore_eos`, `max_completion_tokens`). Also checks errors and auth as the client sees them.

Usage:  pip install openai
        cargo build -p harness
        python3 scripts/openai_client_check.py [--sweep target/debug/sweep]

Uses the DeepSeek-V4 tokenizer with the fastokens backend when the shared data is present
(SWEEP_SHARED_DATA, default ../shared/data), else the built-in vocabulary (and says so).
Prints 'N passed, M failed' and exits non-zero on any failure.
"""

import argparse
import os
import socket
import subprocess
import sys
import time
import urllib.request

import openai

API_KEY = "sk-sweep-check"
MODEL = "deepseek-ai/DeepSeek-V4.1-Flash"

RECIPE_FLAGS = [
    # worker args
    "--model-path", MODEL, "--served-model-name", MODEL, "--trust-remote-code",
    "--speculative-algorithm", "DSPARK", "--speculative-dspark-block-size", "5",
    "--reasoning-parser", "auto", "--tool-call-parser", "auto", "--watchdog-timeout", "3600",
    # Agg TP4 arm
    "--tensor-parallel-size", "4", "--expert-parallel-size", "1", "--chunked-prefill-size", "16384",
    "--mem-fraction-static", "0.8",
    # conc 4 point
    "--max-running-requests", "128", "--cuda-graph-max-bs-decode", "128",
    "--prefill-decode-interval", "0", "--swa-prefix-tails", "4096",
    # harness-only
    "--enable-metrics",
    # the recipe's hardware, for the engine's cost model
    "--hardware", "gb300",
]
RECIPE_ENV = {
    "NCCL_CUMEM_ENABLE": "1", "SGLANG_DEFAULT_THINKING": "1", "SGLANG_DSV41_REASONING_EFFORT": "high",
    "SGLANG_DSPARK_OPT_MARKOV_W2_BF16": "True", "SGLANG_DSPARK_FOLDED_SAMPLING": "2",
    "SGLANG_TIMEOUT_KEEP_ALIVE": "900", "SGLANG_RAGGED_VERIFY_MODE": "static",
    "SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE": "1", "SGLANG_DSV41_ENGRAM_HOST_TABLE_LAYOUT": "per_rank",
    "SGLANG_SIMULATE_ACC_LEN": "3.51", "SGLANG_SIMULATE_ACC_METHOD": "match-expected",
    "SGLANG_SIMULATE_ACC_TOKEN_MODE": "real-draft-token",
}

passed = 0
failed = 0


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print(f"ok   {name}")
    else:
        failed += 1
        print(f"FAIL {name} {detail}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser()
    ap.add_argument("--sweep", default=os.environ.get("SWEEP_BIN", os.path.join(root, "target", "debug", "sweep")))
    args = ap.parse_args()
    if not os.path.exists(args.sweep):
        sys.exit(f"no sweep binary at {args.sweep}; run `cargo build -p harness` first or pass --sweep")

    shared = os.environ.get("SWEEP_SHARED_DATA", os.path.join(root, "..", "shared", "data"))
    tok = os.path.join(shared, "tokenizers", "deepseek-v4", "tokenizer.json")
    flags = list(RECIPE_FLAGS)
    if os.path.exists(tok):
        flags += ["--tokenizer-path", tok, "--tokenizer-backend", "fastokens"]
        print(f"tokenizer: {tok} (fastokens)")
    else:
        print(f"shared data absent ({tok}): using the built-in vocabulary")
    port = free_port()
    flags += ["--host", "127.0.0.1", "--port", str(port), "--api-key", API_KEY, "--time-scale", "20"]
    env = dict(os.environ, **RECIPE_ENV)
    proc = subprocess.Popen([args.sweep, "engine", "serve", *flags], env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                with urllib.request.urlopen(base + "/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except Exception:
                pass
            if proc.poll() is not None:
                sys.exit(f"server exited with {proc.returncode}")
            if time.time() > deadline:
                sys.exit("server did not become healthy in 120 s")
            time.sleep(0.2)
        run_checks(base)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


def run_checks(base):
    client = openai.OpenAI(base_url=base + "/v1", api_key=API_KEY, max_retries=0)
    messages = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Explain what this function does: fn add(a: i32, b: i32) -> i32 { a + b }"},
    ]

    models = client.models.list()
    check("models.list serves the recipe's served name", [m.id for m in models.data] == [MODEL])

    # Streaming, as the AgentX harness and SGLang's bench client call it.
    stream = client.chat.completions.create(
        model=MODEL, messages=messages, stream=True, max_completion_tokens=28, temperature=0,
        stream_options={"include_usage": True}, extra_body={"ignore_eos": True},
    )
    chunks = list(stream)
    ids = {c.id for c in chunks}
    check("one chunk id for the whole stream", len(ids) == 1, ids)
    check("id is 32 lowercase hex chars", all(len(i) == 32 and i == i.lower() for i in ids), ids)
    first = chunks[0]
    check("first chunk is the role chunk", first.choices[0].delta.role == "assistant"
          and first.choices[0].delta.content == "", first)
    body = [c for c in chunks if c.choices and c.choices[0].finish_reason is None][1:]
    reasoning = "".join((getattr(c.choices[0].delta, "reasoning_content", None) or "") for c in body)
    content = "".join((c.choices[0].delta.content or "") for c in body)
    check("content deltas arrive", len(content) > 0, chunks)
    check("reasoning deltas arrive (thinking on, reasoning parser set)", len(reasoning) > 0)
    finish = [c for c in chunks if c.choices and c.choices[0].finish_reason is not None]
    check("exactly one finish chunk", len(finish) == 1, finish)
    if finish:
        f = finish[0].choices[0]
        check("finish_reason is length under ignore_eos", f.finish_reason == "length", f)
        check("finish chunk has an empty delta", not f.delta.content and not f.delta.role, f)
    usage_chunks = [c for c in chunks if c.usage is not None]
    check("one usage chunk, last, with choices: []", len(usage_chunks) == 1
          and usage_chunks[0] is chunks[-1] and chunks[-1].choices == [])
    u = chunks[-1].usage
    check("usage.completion_tokens equals max_completion_tokens", u is not None and u.completion_tokens == 28, u)
    check("usage.total = prompt + completion", u is not None and u.total_tokens == u.prompt_tokens + u.completion_tokens, u)
    check("reasoning tokens counted inside completion tokens",
          u is not None and 0 < (u.completion_tokens_details.reasoning_tokens if u.completion_tokens_details else 0) < 28, u)

    # Without stream_options there is no usage chunk.
    chunks = list(client.chat.completions.create(
        model=MODEL, messages=messages, stream=True, max_tokens=5, extra_body={"ignore_eos": True}))
    check("no usage chunk without include_usage", all(c.usage is None for c in chunks))

    # Non-streaming.
    r = client.chat.completions.create(
        model="whatever-name", messages=messages, max_completion_tokens=17, extra_body={"ignore_eos": True})
    check("non-streaming: model echoed unchanged", r.model == "whatever-name", r.model)
    check("non-streaming: finish_reason length", r.choices[0].finish_reason == "length", r)
    check("non-streaming: usage.completion_tokens == 17", r.usage.completion_tokens == 17, r.usage)
    check("non-streaming: assistant message with content", r.choices[0].message.role == "assistant"
          and isinstance(r.choices[0].message.content, str))

    # A reply that ends on its own (no ignore_eos) stops with finish_reason stop.
    r = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=100000)
    check("natural stop: finish_reason stop below the cap", r.choices[0].finish_reason == "stop"
          and r.usage.completion_tokens < 100000, r)

    # Errors as the client sees them.
    try:
        client.chat.completions.create(model=MODEL, messages=[], max_tokens=3)
        check("empty messages rejected", False)
    except openai.BadRequestError as e:
        check("empty messages -> 400 BadRequestError", e.status_code == 400 and "Messages cannot be empty" in str(e), e)
    try:
        client.chat.completions.create(model=MODEL, messages=messages, max_tokens=-4)
        check("negative max_tokens rejected", False)
    except openai.BadRequestError as e:
        check("negative max_tokens -> 400", e.status_code == 400, e)
    bad = openai.OpenAI(base_url=base + "/v1", api_key="wrong", max_retries=0)
    try:
        bad.chat.completions.create(model=MODEL, messages=messages, max_tokens=3)
        check("wrong API key rejected", False)
    except openai.AuthenticationError as e:
        check("wrong API key -> 401", e.status_code == 401, e)

    # Still serving after the errors.
    r = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=3, extra_body={"ignore_eos": True})
    check("serves after errors", r.usage.completion_tokens == 3, r.usage)


if __name__ == "__main__":
    main()
