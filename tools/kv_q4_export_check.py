#!/usr/bin/env python3
"""Checks that llmrt's Q4_0 KV cache holds GGUF Q4_0 blocks byte for byte:
the same prompt through an F32-KV and a Q4_0-KV context on the CPU, both
exported (llm_kv_export_file); layer 0's K and V (identical inputs in both
contexts: later layers see the quantized cache's effect) quantized from the
F32 stream by gguf-py's numpy Q4_0 quantizer, after the Walsh-Hadamard
rotation a Q4_0 cache applies to its rows (src/backend/kv_rotation.h; the
matrix here is built independently, in float64), must equal the Q4_0
stream's tiles (a rare byte may differ where float32 and float64 rotations
round a value to opposite sides of a level boundary). Not part of CI
(needs build/lib/libllmrt.so and a model).

  LLMRT_LIB=build/lib/libllmrt.so python3 tools/kv_q4_export_check.py MODEL.gguf TEXT
"""
import os, struct, sys, tempfile
import numpy as np
import gguf
from gguf import quants
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bindings", "python", "src"))
import llmrt
M = sys.argv[1]
text = open(sys.argv[2]).read()[:600]

def stream(kv):
    ctx = llmrt.Context(M, backend="cpu", kv_type=kv, n_threads=2, n_ctx=512)
    ids = ctx.tokenize(text)[:97]
    ctx.generate(ids, max_tokens=1, temperature=0)
    n = ctx.kv_export_file(ids, os.path.join(tempfile.gettempdir(), f"kvq4_{kv}.kv"))
    return open(os.path.join(tempfile.gettempdir(), f"kvq4_{kv}.kv"), "rb").read(), n

def parse(b):
    at = 16; geom = None; blocks = []
    while at < len(b):
        tag, fl, ln = struct.unpack_from("<4sIQ", b, at); at += 16
        p = b[at:at+ln]; at += ln
        if tag == b"GEOM": geom = struct.unpack_from("<5i", p)
        if tag == b"BLCK": blocks.append(p)
    return geom, blocks

def hadamard(n):
    m = np.ones((1, 1))
    while m.shape[0] < n:
        m = np.block([[m, m], [m, -m]])
    return m / np.sqrt(n)

def rotation(hd, kv):  # llama.cpp's sizes: K the largest power of two dividing hd, V 64
    if hd % 64: return 0
    if kv == 1: return 64
    n = 64
    while hd % (2 * n) == 0: n *= 2
    return n

(bf, nf), (bq, nq) = stream("f32"), stream("q4_0")
gf, blf = parse(bf); gq, blq = parse(bq)
print("geom", gf, gq, "tokens", nf, nq)
L, H, hd, bs, _ = gf
tf = bs * hd * 4; tq = bs * (hd // 32) * 18
same = diff = 0; maxerr = 0.0
for bi in range(len(blf)):
    pf = blf[bi][24 + 4 * bs:]; pq = blq[bi][24 + 4 * bs:]
    for kv in range(2):
        for h in range(H):
            l = 0
            o = ((l * 2 + kv) * H + h)
            x = np.frombuffer(pf[o * tf:(o + 1) * tf], dtype=np.float32).reshape(bs, hd)
            n = rotation(hd, kv)
            if n:
                x = (x.astype(np.float64).reshape(-1, n) @ hadamard(n).T).reshape(bs, hd).astype(np.float32)
            want = quants.quantize(x.reshape(-1, 32), gguf.GGMLQuantizationType.Q4_0).reshape(-1)
            got = np.frombuffer(pq[o * tq:(o + 1) * tq], dtype=np.uint8)
            same += int((want == got).sum()); diff += int((want != got).sum())
            deq = quants.dequantize(got.reshape(-1, 18), gguf.GGMLQuantizationType.Q4_0).reshape(bs, hd)
            maxerr = max(maxerr, float(np.abs(deq - x).max() / (np.abs(x).max() + 1e-30)))
print("layer 0 bytes equal", same, "differ", diff, "max rel err", maxerr)
