#!/usr/bin/env python3
"""A tiny random-weight llama-architecture GGUF that carries a real tokenizer.

The weights are noise (2 layers, width 64): the model generates nonsense fast on a CPU, but
the server tokenizes prompts and counts tokens exactly as it would for the real model, which is
what a replay against it measures. Used by `.ci/run` to serve llama.cpp (llama-cpp-python) and
by the CPU sweep example (`docs/examples/llama-cpu/`).

usage: make_tiny_gguf.py TOKENIZER_JSON OUT.gguf [--ctx N] [--seed S]
"""

import argparse
import json

import numpy as np
import gguf

# DeepSeek-V4's chat format with thinking off (the reference engine's `deepseek-v4` family).
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}"
    "{% if m['role'] == 'system' %}{{ m['content'] }}"
    "{% elif m['role'] == 'user' %}<｜User｜>{{ m['content'] }}"
    "{% elif m['role'] == 'assistant' %}<｜Assistant｜></think>{{ m['content'] }}<｜end▁of▁sentence｜>"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<｜Assistant｜></think>{% endif %}"
)

EMBD, LAYERS, HEADS, FF = 64, 2, 4, 128


def vocabulary(path):
    tok = json.load(open(path, encoding="utf-8"))
    if tok["model"]["type"] != "BPE":
        raise SystemExit(f"{path}: a BPE tokenizer is needed (found {tok['model']['type']})")
    vocab = tok["model"]["vocab"]
    added = tok.get("added_tokens", [])
    size = max(list(vocab.values()) + [a["id"] for a in added]) + 1
    tokens = [f"[UNUSED_{i}]" for i in range(size)]
    types = [gguf.TokenType.UNUSED] * size
    for text, i in vocab.items():
        tokens[i], types[i] = text, gguf.TokenType.NORMAL
    for a in added:
        tokens[a["id"]] = a["content"]
        types[a["id"]] = gguf.TokenType.CONTROL if a.get("special") else gguf.TokenType.USER_DEFINED
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    bos = next((a["id"] for a in added if "begin" in a["content"] and "sentence" in a["content"]), 0)
    eos = next((a["id"] for a in added if "end" in a["content"] and "sentence" in a["content"]), 1)
    return tokens, types, merges, bos, eos


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tokenizer")
    ap.add_argument("out")
    ap.add_argument("--ctx", type=int, default=32768, help="the model's trained context length")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    tokens, types, merges, bos, eos = vocabulary(a.tokenizer)
    n_vocab = len(tokens)
    rng = np.random.default_rng(a.seed)

    w = gguf.GGUFWriter(a.out, "llama")
    w.add_name("tiny-random (sweep test model)")
    w.add_context_length(a.ctx)
    w.add_embedding_length(EMBD)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(FF)
    w.add_head_count(HEADS)
    w.add_head_count_kv(HEADS)
    w.add_rope_dimension_count(EMBD // HEADS)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(n_vocab)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_tokenizer_model("gpt2")
    # The DeepSeek-V3 pre-tokenizer split, which this tokenizer's pre_tokenizer is.
    w.add_tokenizer_pre("deepseek-v3")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(bos)
    w.add_eos_token_id(eos)
    w.add_add_bos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)

    def t(name, *shape, f16=True):
        x = rng.normal(0.0, 0.02, size=shape).astype(np.float16 if f16 else np.float32)
        w.add_tensor(name, x)

    t("token_embd.weight", n_vocab, EMBD)
    for i in range(LAYERS):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(EMBD, dtype=np.float32))
        for p in ("q", "k", "v", "output"):
            t(f"blk.{i}.attn_{p}.weight", EMBD, EMBD)
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(EMBD, dtype=np.float32))
        t(f"blk.{i}.ffn_gate.weight", FF, EMBD)
        t(f"blk.{i}.ffn_up.weight", FF, EMBD)
        t(f"blk.{i}.ffn_down.weight", EMBD, FF)
    w.add_tensor("output_norm.weight", np.ones(EMBD, dtype=np.float32))
    t("output.weight", n_vocab, EMBD)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {a.out}: llama, {LAYERS} layers x {EMBD}, vocab {n_vocab}, context {a.ctx}")


if __name__ == "__main__":
    main()
