#!/usr/bin/env python3
"""A second, llmrt-independent oracle for Llama-architecture GGUF models: the
weights dequantized by gguf-py (pip install gguf numpy) and the forward pass
written out in NumPy, in float64, with no activation quantization.

Run as a script, it prints, for the prompts and the perplexity text of
tests/data/smollm2_reference.json, the greedy ids and the perplexity this
forward pass gives (token ids taken from that file, so no tokenizer is
involved): a cross-check of the llama.cpp reference. tools/smollm2_numpy_reference.py
uses it to write tests/data/smollm2_reference_numpy.json.

Usage: python3 tools/llama_numpy_reference.py [MODEL] [REFERENCE_JSON]
"""
import json
import sys
from pathlib import Path

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

ROOT = Path(__file__).resolve().parent.parent
MODEL = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "models/pypi/SmolLM2-135M-Instruct.Q4_1.gguf"
REF = Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT / "tests/data/smollm2_reference.json"


class Model:
    def __init__(self, path):
        r = GGUFReader(str(path))
        arch = r.fields["general.architecture"].contents()
        assert arch == "llama", arch
        kv = lambda k, d=None: r.fields[f"llama.{k}"].contents() if f"llama.{k}" in r.fields else d
        self.n_layer = kv("block_count")
        self.n_embd = kv("embedding_length")
        self.n_head = kv("attention.head_count")
        self.n_kv = kv("attention.head_count_kv", self.n_head)
        self.hd = self.n_embd // self.n_head
        self.theta = kv("rope.freq_base", 10000.0)
        self.eps = kv("attention.layer_norm_rms_epsilon")
        self.t = {}
        for t in r.tensors:
            w = dequantize(t.data, t.tensor_type).astype(np.float64)
            self.t[t.name] = w.reshape([int(x) for x in reversed(t.shape)]) if w.ndim > 1 or len(t.shape) > 1 else w
        self.out = self.t.get("output.weight", self.t["token_embd.weight"])

    def rms(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def rope(self, x, pos):  # x (n, heads, hd); adjacent pairs (GGUF llama layout)
        i = np.arange(self.hd // 2)
        freq = self.theta ** (-2.0 * i / self.hd)
        ang = pos[:, None] * freq[None, :]
        c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        x0, x1 = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = x0 * c - x1 * s
        out[..., 1::2] = x0 * s + x1 * c
        return out

    def logits(self, ids, last_only=False):  # (n or 1, vocab) for a sequence from position 0
        n = len(ids)
        x = self.t["token_embd.weight"][ids]
        pos = np.arange(n, dtype=np.float64)
        rep = self.n_head // self.n_kv
        mask = np.triu(np.full((n, n), -np.inf), 1)
        for l in range(self.n_layer):
            p = f"blk.{l}."
            xn = self.rms(x, self.t[p + "attn_norm.weight"])
            q = (xn @ self.t[p + "attn_q.weight"].T).reshape(n, self.n_head, self.hd)
            k = (xn @ self.t[p + "attn_k.weight"].T).reshape(n, self.n_kv, self.hd)
            v = (xn @ self.t[p + "attn_v.weight"].T).reshape(n, self.n_kv, self.hd)
            q, k = self.rope(q, pos), self.rope(k, pos)
            att = np.empty((n, self.n_head, self.hd))
            for h in range(self.n_head):
                s = q[:, h, :] @ k[:, h // rep, :].T / np.sqrt(self.hd) + mask
                s = np.exp(s - s.max(axis=1, keepdims=True))
                s /= s.sum(axis=1, keepdims=True)
                att[:, h, :] = s @ v[:, h // rep, :]
            x = x + att.reshape(n, -1) @ self.t[p + "attn_output.weight"].T
            xn = self.rms(x, self.t[p + "ffn_norm.weight"])
            g = xn @ self.t[p + "ffn_gate.weight"].T
            u = xn @ self.t[p + "ffn_up.weight"].T
            x = x + (g / (1 + np.exp(-g)) * u) @ self.t[p + "ffn_down.weight"].T
        if last_only:
            x = x[-1:]
        return self.rms(x, self.t["output_norm.weight"]) @ self.out.T


def log_softmax(row):
    m = row.max()
    return row - m - np.log(np.exp(row - m).sum())


def main():
    ref = json.loads(REF.read_text(encoding="utf-8"))
    m = Model(MODEL)
    for g in ref["greedy"]:
        ids = list(g["prompt_ids"])
        out = []
        for _ in range(len(g["ids"])):
            lg = m.logits(ids, last_only=True)[-1]
            tok = int(np.argmax(lg))
            out.append(tok)
            ids.append(tok)
        same = next((i for i, (a, b) in enumerate(zip(out, g["ids"])) if a != b), len(out))
        print(json.dumps({"prompt": g["prompt"], "ids": out, "agrees_with_reference_for": same}))
    p = ref["perplexity"]
    toks = p.get("token_ids")
    if toks is None:
        print("reference JSON has no perplexity token_ids; skipping perplexity")
        return
    ctx = p["ctx"]
    nll = []
    for c in range(len(toks) // ctx):
        chunk = toks[c * ctx:(c + 1) * ctx]
        lg = m.logits(chunk)
        for q in range(ctx // 2, ctx - 1):
            nll.append(-log_softmax(lg[q])[chunk[q + 1]])
    print(json.dumps({"ppl": float(np.exp(np.mean(nll))), "reference_ppl": p["ppl"]}))


if __name__ == "__main__":
    main()
