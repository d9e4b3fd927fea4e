#!/usr/bin/env python3
"""Writes tests/data/quant_vectors.inc: random blocks of every block-quantized
type llmrt reads, with their dequantization by gguf-py (pip install gguf
numpy), an implementation independent of llmrt's. test_quant.cpp checks
llmrt's DequantizeBlocks against it.

Usage: python3 tools/gen_quant_vectors.py [OUT]   (default tests/data/quant_vectors.inc)

Blocks are random bytes (every quant, scale and high bit pattern occurs) with
the F16 scale fields replaced by random finite values of either sign, so the
expected floats are finite. Deterministic: a fixed seed.

MXFP4's second vector holds N(0, 0.02) weights quantized by gguf-py. For the
low-bit types gguf-py cannot quantize (IQ4_NL, IQ4_XS, Q3_K, Q2_K) a
second vector holds blocks of N(0, 0.02) weights quantized by the simple
quantizers below (nearest grid point under a max-based scale: not llama.cpp's
search, but the scale and quant distributions of a real file); their
expected values are still gguf-py's dequantization of those bytes.
"""
import sys
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import IQ4_NL, dequantize, quantize

# type, blocks per vector, byte offsets of the F16 fields in a block
FORMATS = [
    (T.Q4_0, 8, [0]),
    (T.Q4_1, 8, [0, 2]),
    (T.Q5_0, 8, [0]),
    (T.Q5_1, 8, [0, 2]),
    (T.Q8_0, 8, [0]),
    (T.Q4_K, 2, [0, 2]),
    (T.Q5_K, 2, [0, 2]),
    (T.Q6_K, 2, [208]),
    (T.IQ4_NL, 8, [0]),
    (T.IQ4_XS, 2, [0]),
    (T.Q3_K, 2, [108]),
    (T.Q2_K, 2, [80, 82]),
    (T.MXFP4, 8, []),
]
SIZES = {T.Q4_0: (32, 18), T.Q4_1: (32, 20), T.Q5_0: (32, 22), T.Q5_1: (32, 24),
         T.Q8_0: (32, 34), T.Q4_K: (256, 144), T.Q5_K: (256, 176), T.Q6_K: (256, 210),
         T.IQ4_NL: (32, 18), T.IQ4_XS: (256, 136), T.Q3_K: (256, 110), T.Q2_K: (256, 84),
         T.MXFP4: (32, 17)}


def f16_bytes(v):
    return np.array([v], dtype=np.float16).view(np.uint8)


def nearest(values, x):
    """Index of the value nearest to each x."""
    return np.abs(np.asarray(values, dtype=np.float32)[None, :] - x[:, None]).argmin(axis=1)


def quantize_iq4_nl(x):
    kv = np.array(IQ4_NL.kvalues, dtype=np.float32)
    out = []
    for blk in x.reshape(-1, 32):
        d = np.float16(np.abs(blk).max() / 127.0)
        idx = nearest(float(d) * kv, blk) if float(d) != 0 else np.zeros(32, dtype=np.int64)
        qs = (idx[:16] | (idx[16:] << 4)).astype(np.uint8)
        out.append(np.concatenate([f16_bytes(d), qs]))
    return np.stack(out)


def quantize_iq4_xs(x):
    kv = np.array(IQ4_NL.kvalues, dtype=np.float32)
    out = []
    for sb in x.reshape(-1, 256):
        subs = sb.reshape(8, 32)
        s = subs[np.arange(8), np.abs(subs).argmax(axis=1)] / -127.0  # signed: the extreme meets -127
        d = np.float16(np.abs(s).max() / 31.0)
        ls = np.clip(np.round(s / float(d)), -32, 31).astype(np.int64) + 32
        qs = np.zeros(128, dtype=np.uint8)
        for j in range(8):
            dl = float(d) * (ls[j] - 32)
            idx = nearest(dl * kv, subs[j])
            qs[16 * j:16 * j + 16] = idx[:16] | (idx[16:] << 4)
        scales_h = sum(int(ls[j] >> 4) << (2 * j) for j in range(8))
        scales_l = np.array([(ls[2 * i] & 15) | ((ls[2 * i + 1] & 15) << 4) for i in range(4)], dtype=np.uint8)
        out.append(np.concatenate([f16_bytes(d), np.array([scales_h], dtype=np.uint16).view(np.uint8), scales_l, qs]))
    return np.stack(out)


def pack2(q):
    """256 2-bit fields: weight 32j + l (j = 4h + s) at bits 2s of byte 32h + l."""
    qs = np.zeros(64, dtype=np.uint8)
    for j in range(8):
        h, sh = divmod(j, 4)
        qs[32 * h:32 * h + 32] |= (q[32 * j:32 * j + 32].astype(np.uint8) & 3) << (2 * sh)
    return qs


def quantize_q3_k(x):
    out = []
    for sb in x.reshape(-1, 256):
        g = sb.reshape(16, 16)
        s = g[np.arange(16), np.abs(g).argmax(axis=1)] / -4.0  # the extreme meets -4
        d = np.float16(np.abs(s).max() / 31.0)
        sc = np.clip(np.round(s / float(d)), -32, 31).astype(np.int64)
        dl = np.repeat(float(d) * sc, 16)
        q = np.clip(np.round(np.divide(sb, dl, out=np.zeros_like(sb), where=dl != 0)), -4, 3).astype(np.int64)
        hbit = (q >= 0).astype(np.uint8)
        low = np.where(q >= 0, q, q + 4)
        hmask = np.zeros(32, dtype=np.uint8)
        for j in range(8):
            hmask |= hbit[32 * j:32 * j + 32] << j
        u = sc + 32
        scales = np.zeros(12, dtype=np.uint8)
        for i in range(16):
            scales[i % 8] |= (u[i] & 15) << (4 * (i // 8))
            scales[8 + i % 4] |= (u[i] >> 4) << (2 * (i // 4))
        out.append(np.concatenate([hmask, pack2(low), scales, f16_bytes(d)]))
    return np.stack(out)


def quantize_q2_k(x):
    out = []
    for sb in x.reshape(-1, 256):
        g = sb.reshape(16, 16)
        mn = np.maximum(-g.min(axis=1), 0.0)
        sc = (g.max(axis=1) + mn) / 3.0
        d, dmin = np.float16(sc.max() / 15.0), np.float16(mn.max() / 15.0)
        isc = np.clip(np.round(sc / float(d)), 0, 15).astype(np.int64) if float(d) else np.zeros(16, np.int64)
        imn = np.clip(np.round(mn / float(dmin)), 0, 15).astype(np.int64) if float(dmin) else np.zeros(16, np.int64)
        dl, ml = np.repeat(float(d) * isc, 16), np.repeat(float(dmin) * imn, 16)
        q = np.clip(np.round(np.divide(sb + ml, dl, out=np.zeros_like(sb), where=dl != 0)), 0, 3).astype(np.int64)
        scales = (isc | (imn << 4)).astype(np.uint8)
        out.append(np.concatenate([scales, pack2(q), f16_bytes(d), f16_bytes(dmin)]))
    return np.stack(out)


QUANTIZERS = {T.IQ4_NL: (quantize_iq4_nl, 512), T.IQ4_XS: (quantize_iq4_xs, 1024),
              T.Q3_K: (quantize_q3_k, 1024), T.Q2_K: (quantize_q2_k, 1024)}


def main():
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "tests/data/quant_vectors.inc"
    rng = np.random.default_rng(20261121)
    lines = [
        "// Generated by tools/gen_quant_vectors.py (gguf-py's dequantize as the reference); do not edit.",
        "// Per type: raw GGUF blocks and the F32 bit patterns gguf-py dequantizes them to.",
    ]
    table = []

    def emit(name, type_name, raw, values):
        lines.append(f"static const uint8_t k{name}Bytes[{raw.size}] = {{")
        flat = raw.reshape(-1)
        for i in range(0, flat.size, 24):
            lines.append("    " + ", ".join(str(int(b)) for b in flat[i:i + 24]) + ",")
        lines.append("};")
        bits = values.view(np.uint32)
        lines.append(f"static const uint32_t k{name}Values[{bits.size}] = {{")
        for i in range(0, bits.size, 8):
            lines.append("    " + ", ".join(f"0x{int(b):08x}" for b in bits[i:i + 8]) + ",")
        lines.append("};")
        table.append(f"    {{TensorType::{type_name}, \"{name}\", k{name}Bytes, sizeof k{name}Bytes, k{name}Values, {bits.size}}},")
    for qtype, n_blocks, f16_offsets in FORMATS:
        elems, nbytes = SIZES[qtype]
        raw = rng.integers(0, 256, size=(n_blocks, nbytes), dtype=np.uint8)
        for off in f16_offsets:
            scale = (rng.uniform(0.002, 0.05, size=n_blocks) * rng.choice([-1, 1], size=n_blocks)).astype(np.float16)
            raw[:, off:off + 2] = scale.view(np.uint8).reshape(n_blocks, 2)
        if qtype == T.MXFP4:  # E8M0 exponents: the subnormal scales (0, 1) and 2^-28 .. 2^3
            raw[:, 0] = np.concatenate([[0, 1], rng.integers(100, 132, size=n_blocks - 2)]).astype(np.uint8)
        values = dequantize(raw.reshape(-1), qtype).astype(np.float32).reshape(-1)
        assert values.size == n_blocks * elems and np.all(np.isfinite(values))
        emit(qtype.name, qtype.name, raw, values)
    # MXFP4: gguf-py quantizes it itself
    weights = rng.normal(0.0, 0.02, size=(16, 32)).astype(np.float32)
    raw = quantize(weights, T.MXFP4).reshape(16, 17)
    emit("MXFP4_real", "MXFP4", raw, dequantize(raw.reshape(-1), T.MXFP4).astype(np.float32).reshape(-1))
    for qtype, (quantizer, n_weights) in QUANTIZERS.items():
        if qtype not in [f[0] for f in FORMATS]:
            continue
        raw = quantizer(rng.normal(0.0, 0.02, size=n_weights).astype(np.float32))
        values = dequantize(raw.reshape(-1), qtype).astype(np.float32).reshape(-1)
        assert values.size == n_weights and np.all(np.isfinite(values))
        emit(qtype.name + "_real", qtype.name, raw, values)
    lines.append("static const QuantVector kQuantVectors[] = {")
    lines += table
    lines.append("};")
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
