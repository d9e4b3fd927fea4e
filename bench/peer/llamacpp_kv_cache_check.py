#!/usr/bin/env python3
"""What llama.cpp's quantized V cache holds, read back from the cache itself.

The first N tokens of TEXT go through llama.cpp (llama-cpp-python's low-level
binding, flash attention, no repacking) twice: with an F32 cache, and with
K F16 / V VTYPE (q4_0 or q8_0). Both caches are read back through
llama_state_seq_get_data. Layer 0's V rows have identical inputs in both
contexts, so the quantized cache's layer 0 must equal this script's own
quantization (bench/ppl_f64_reference.py: ggml's reference rule, in float32)
of the F32 cache's rows after the 64-point Walsh-Hadamard rotation; later
layers are compared by their error against their own context's F32 rows
(their inputs already differ). Prints, per layer, the fraction of values
equal to the rule (1 at layer 0; later layers' inputs differ), the relative
error of the stored values rotated back against the F32 context's rows (the
quantization and the drift of the inputs), and the relative error of the
rule itself on the F32 rows, rotated as the cache does and unrotated.
The same check for llmrt's cache is tests/test_kv_q4.cpp and
tools/kv_q4_export_check.py. Not part of CI.

  llamacpp_kv_cache_check.py MODEL TEXT N [VTYPE]
"""
import ctypes
import os
import struct
import sys

import numpy as np
import llama_cpp as L

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from ppl_f64_reference import hadamard, quantize_q4_0, quantize_q8_0  # noqa: E402

TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q8_0": 8}  # ggml_type


def cache_rows(model, toks, kt, vt):
    """K and V rows of every layer (cells, row bytes) after decoding toks."""
    cp = L.llama_context_default_params()
    cp.n_ctx = cp.n_batch = cp.n_ubatch = max(512, len(toks))
    cp.n_threads = cp.n_threads_batch = 1
    cp.flash_attn_type = 1
    cp.type_k, cp.type_v = TYPES[kt], TYPES[vt]
    c = L.llama_init_from_model(model, cp)
    b = L.llama_batch_init(len(toks), 0, 1)
    for i, t in enumerate(toks):
        b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = t, i, 1, 0
        b.seq_id[i][0] = 0
    b.n_tokens = len(toks)
    if L.llama_decode(c, b) != 0:
        sys.exit("llama_decode failed")
    L.llama_batch_free(b)
    size = L.llama_state_seq_get_size(c, 0)
    buf = (ctypes.c_uint8 * size)()
    d = bytes(buf[:L.llama_state_seq_get_data(c, buf, size, 0)])
    L.llama_free(c)
    # llama-kv-cache.cpp state_write (0.3.36), after an 8-byte header:
    # n_stream, cell_count, per cell (pos, n_seq_id, seq ids), v_trans,
    # n_layer, then per layer K (type, row size, rows), then per layer V
    at = 8

    def rd(fmt):
        nonlocal at
        v = struct.unpack_from(fmt, d, at)
        at += struct.calcsize(fmt)
        return v
    n_stream, cells = rd("<II")
    if n_stream != 1 or cells != len(toks):
        sys.exit(f"unexpected state layout: {n_stream} streams, {cells} cells")
    for _ in range(cells):
        _, n_seq = rd("<iI")
        rd(f"<{n_seq}i")
    v_trans, n_layer = rd("<II")
    if v_trans:
        sys.exit("V is transposed (flash attention off?)")
    sides = []
    for _ in range(2):
        rows = []
        for _ in range(n_layer):
            ty, row = rd("<iQ")
            rows.append((ty, np.frombuffer(d, np.uint8, cells * row, at).reshape(cells, row)))
            at += cells * row
        sides.append(rows)
    if at != len(d):
        sys.exit("state longer than parsed")
    return sides


def dequant(raw, vt):
    """GGUF Q4_0 / Q8_0 rows as float64."""
    if vt == "q4_0":
        blk = raw.reshape(raw.shape[0], -1, 18)
        q = blk[..., 2:]
        v = np.concatenate([(q & 15).astype(np.int8) - 8, (q >> 4).astype(np.int8) - 8], -1)
    else:
        blk = raw.reshape(raw.shape[0], -1, 34)
        v = blk[..., 2:].copy().view(np.int8)
    d = blk[..., :2].copy().view(np.float16).astype(np.float64)
    return (v.astype(np.float64) * d).reshape(raw.shape[0], -1)


def main():
    model_path, text, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    vt = sys.argv[4] if len(sys.argv) > 4 else "q4_0"
    L.llama_backend_init()
    mp = L.llama_model_default_params()
    mp.use_extra_bufts = False
    model = L.llama_model_load_from_file(model_path.encode(), mp)
    vocab = L.llama_model_get_vocab(model)
    s = open(text, "rb").read()
    buf = (L.llama_token * (len(s) + 16))()
    got = L.llama_tokenize(vocab, s, len(s), buf, len(buf), True, False)
    if got < 0:  # more tokens than bytes: -got is the count
        buf = (L.llama_token * -got)()
        got = L.llama_tokenize(vocab, s, len(s), buf, len(buf), True, False)
    toks = list(buf[:min(n, got)])
    _, v32 = cache_rows(model, toks, "f32", "f32")
    _, vq = cache_rows(model, toks, "f16", vt)
    h = hadamard(64)
    rule = {"q4_0": quantize_q4_0, "q8_0": quantize_q8_0}[vt]
    print(f"{len(toks)} tokens, V {vt}")
    print("| layer | equal to the rule on H·(F32 row) | stored, rotated back | rule, rotated | rule, unrotated |")
    print("| --- | --- | --- | --- | --- |")
    for layer, ((t32, r32), (tq, rq)) in enumerate(zip(v32, vq)):
        if t32 != 0 or tq != TYPES[vt]:
            sys.exit(f"layer {layer}: cache types {t32}, {tq}")
        x = r32.view(np.float32).astype(np.float64)
        stored = dequant(rq, vt)
        expect = rule((x.reshape(-1, 64) @ h).reshape(x.shape).astype(np.float32))
        back = (stored.reshape(-1, 64) @ h).reshape(x.shape)
        rot = (expect.reshape(-1, 64) @ h).reshape(x.shape)
        nx = np.linalg.norm(x)
        print(f"| {layer} | {np.mean(expect == stored):.4f} | {np.linalg.norm(back - x) / nx:.4f} | "
              f"{np.linalg.norm(rot - x) / nx:.4f} | {np.linalg.norm(rule(x.astype(np.float32)) - x) / nx:.4f} |")


if __name__ == "__main__":
    main()
