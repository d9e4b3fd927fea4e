#!/usr/bin/env python3
"""Writes tests/data/quant_vectors.inc: random blocks of every block-quantized
type llmrt reads, with their dequantization by gguf-py (pip install gguf
numpy), an implementation independent of llmrt's. test_quant.cpp checks
llmrt's DequantizeBlocks against it.

Usage: python3 tools/gen_quant_vectors.py [OUT]   (default tests/data/quant_vectors.inc)
         [--llama-quantize BIN --synth BIN]

With --llama-quantize (llama.cpp's, e.g. from bench/peer/build_llamacpp.sh)
and --synth (build/bin/llm-synth), the lattice types (IQ2_XXS, IQ2_XS,
IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) and the ternary ones (TQ1_0, TQ2_0) also get vectors of blocks from real quantized tensors: llm-synth
writes the `tiny` shape in F32 (seed 7), llama-quantize quantizes it to each
type with an importance matrix (the IQ2 types refuse to run without one)
written here in llama.cpp's legacy imatrix format (per column a
deterministic pseudo-random importance in [0.5, 1.5]), and the first blocks
of one of its matrices of that type are stored with gguf-py's dequantization.
Without these tools those vectors are left out (the file says so).

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
import argparse
import struct
import subprocess
import tempfile
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
    (T.IQ2_XXS, 2, [0]),
    (T.IQ2_XS, 2, [0]),
    (T.IQ3_XXS, 2, [0]),
    (T.IQ3_S, 2, [0]),
    (T.IQ2_S, 2, [0]),
    (T.IQ1_S, 2, [0]),
    (T.IQ1_M, 2, []),
    (T.TQ1_0, 8, [52]),
    (T.TQ2_0, 2, [64]),
]
SIZES = {T.Q4_0: (32, 18), T.Q4_1: (32, 20), T.Q5_0: (32, 22), T.Q5_1: (32, 24),
         T.Q8_0: (32, 34), T.Q4_K: (256, 144), T.Q5_K: (256, 176), T.Q6_K: (256, 210),
         T.IQ4_NL: (32, 18), T.IQ4_XS: (256, 136), T.Q3_K: (256, 110), T.Q2_K: (256, 84),
         T.MXFP4: (32, 17), T.IQ2_XXS: (256, 66), T.IQ2_XS: (256, 74), T.IQ3_XXS: (256, 98),
         T.IQ3_S: (256, 110), T.IQ2_S: (256, 82), T.TQ1_0: (256, 54), T.TQ2_0: (256, 66),
         T.IQ1_S: (256, 50), T.IQ1_M: (256, 56)}


def set_iq1m_scale(raw, rng):
    d = (rng.uniform(0.002, 0.05, size=len(raw)) * rng.choice([-1, 1], size=len(raw))).astype(np.float16).view(np.uint16)
    for i in range(4):
        raw[:, 49 + 2 * i] = (raw[:, 49 + 2 * i] & 0x0F) | (((d >> (4 * i)) & 0xF) << 4).astype(np.uint8)


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


# llama-quantize's file types whose main type each is (its IQ2_S type is mostly
# IQ2_XS tensors; IQ2_M is mostly IQ2_S)
LLAMA_FTYPES = {T.IQ2_XXS: "IQ2_XXS", T.IQ2_XS: "IQ2_XS", T.IQ3_XXS: "IQ3_XXS", T.IQ3_S: "IQ3_S", T.IQ2_S: "IQ2_M",
                T.TQ1_0: "TQ1_0", T.TQ2_0: "TQ2_0", T.IQ1_S: "IQ1_S", T.IQ1_M: "IQ1_M"}
LATTICES = [T.IQ2_XXS, T.IQ2_XS, T.IQ3_XXS, T.IQ3_S, T.IQ2_S, T.IQ1_S, T.IQ1_M]
REAL_BLOCKS = 4


def write_imatrix(model, path):
    """llama.cpp's legacy imatrix file for every 2-D weight of `model`: per
    entry its name, ncall 1 and one importance per column."""
    from gguf import GGUFReader
    rng = np.random.default_rng(99)
    entries = [(t.name, int(t.shape[0])) for t in GGUFReader(model).tensors
               if len(t.shape) == 2 and t.name.endswith(".weight") and t.name != "token_embd.weight"]
    with open(path, "wb") as f:
        f.write(struct.pack("<i", len(entries)))
        for name, cols in entries:
            f.write(struct.pack("<i", len(name)) + name.encode() + struct.pack("<ii", 1, cols))
            f.write(rng.uniform(0.5, 1.5, size=cols).astype("<f4").tobytes())


def llama_quantized_blocks(llama_quantize, synth):
    """{type: (tensor name, raw blocks)} from llama-quantize's output."""
    from gguf import GGUFReader
    got = {}
    with tempfile.TemporaryDirectory() as tmp:
        f32, imat = f"{tmp}/tiny-f32.gguf", f"{tmp}/tiny.imatrix"
        subprocess.run([synth, "--shape", "tiny", "--type", "f32", "--seed", "7", "--out", f32],
                       check=True, stdout=subprocess.DEVNULL)
        write_imatrix(f32, imat)
        for qtype, ftype in LLAMA_FTYPES.items():
            q = f"{tmp}/tiny-{ftype}.gguf"
            subprocess.run([llama_quantize, "--imatrix", imat, f32, q, ftype, "1"], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            tensors = [t for t in GGUFReader(q).tensors if t.tensor_type == qtype]
            assert tensors, f"llama-quantize wrote no {ftype} tensor"
            t = tensors[0]
            raw = np.asarray(t.data).reshape(-1, SIZES[qtype][1])[:REAL_BLOCKS]
            got[qtype] = (t.name, raw.copy())
    return got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default=str(Path(__file__).resolve().parent.parent / "tests/data/quant_vectors.inc"))
    ap.add_argument("--llama-quantize")
    ap.add_argument("--synth")
    args = ap.parse_args()
    out = Path(args.out)
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
        if qtype == T.IQ1_M:  # d: the top nibbles of the 4 u16 scales (bytes 49, 51, 53, 55)
            set_iq1m_scale(raw, rng)
        if qtype == T.TQ1_0:  # every byte value among the base-3 bytes
            flat = raw[:, :48].reshape(-1)
            flat[:256] = rng.permutation(256)
            raw[:, :48] = flat.reshape(n_blocks, 48)
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
    # The lattice types: blocks that use every grid point and every sign index
    # (random scales and bytes otherwise), so every table entry is checked.
    for qtype in LATTICES:
        elems, nbytes = SIZES[qtype]
        n_points = {T.IQ2_XXS: 256, T.IQ2_XS: 512, T.IQ3_XXS: 256, T.IQ3_S: 512, T.IQ2_S: 1024,
                    T.IQ1_S: 2048, T.IQ1_M: 2048}[qtype]
        per_block = {T.IQ2_XXS: 32, T.IQ2_XS: 32, T.IQ3_XXS: 64, T.IQ3_S: 64, T.IQ2_S: 32,
                     T.IQ1_S: 32, T.IQ1_M: 32}[qtype]
        n_blocks = n_points // per_block
        raw = rng.integers(0, 256, size=(n_blocks, nbytes), dtype=np.uint8)
        scale = (rng.uniform(0.002, 0.05, size=n_blocks) * rng.choice([-1, 1], size=n_blocks)).astype(np.float16)
        if qtype == T.IQ1_M:
            set_iq1m_scale(raw, rng)
        else:
            raw[:, 0:2] = scale.view(np.uint8).reshape(n_blocks, 2)
        points = rng.permutation(n_points)
        signs = np.arange(n_blocks * 32) % 128
        for b in range(n_blocks):
            pts = points[per_block * b:per_block * (b + 1)]
            sg = signs[32 * b:32 * (b + 1)]
            if qtype == T.IQ2_XS:  # u16 per 8 weights: index | sign << 9
                raw[b, 2:66] = (pts | (sg << 9)).astype("<u2").view(np.uint8)
            elif qtype == T.IQ2_XXS:  # per sub-block: 4 index bytes, u32 signs | scale << 28
                for ib in range(8):
                    o = 2 + 8 * ib
                    raw[b, o:o + 4] = pts[4 * ib:4 * ib + 4]
                    aux = int(np.frombuffer(raw[b, o + 4:o + 8].tobytes(), "<u4")[0]) & 0xF0000000
                    aux |= sum(int(sg[4 * ib + l]) << (7 * l) for l in range(4))
                    raw[b, o + 4:o + 8] = np.frombuffer(struct.pack("<I", aux), np.uint8)
            elif qtype == T.IQ3_S:  # 64 low index bytes, then 8 bytes of ninth bits (bit k of byte k / 8)
                raw[b, 2:66] = pts & 255
                raw[b, 66:74] = [sum(int(pts[8 * i + k] >> 8) << k for k in range(8)) for i in range(8)]
            elif qtype == T.IQ1_S:  # 32 low index bytes, then per sub-block a u16: 3 high bits each | scale, delta
                raw[b, 2:34] = pts & 255
                qh = raw[b, 34:50].copy().view("<u2") & 0xF000
                for i in range(8):
                    qh[i] |= sum(int(pts[4 * i + k] >> 8) << (3 * k) for k in range(4))
                raw[b, 34:50] = qh.view(np.uint8)
            elif qtype == T.IQ1_M:  # 32 low index bytes, then per group a nibble: 3 high bits | delta sign
                raw[b, 0:32] = pts & 255
                for k in range(32):
                    o = 32 + k // 2
                    sh = 4 * (k % 2)
                    raw[b, o] = (int(raw[b, o]) & ~(7 << sh) & 0xFF) | (int(pts[k] >> 8) << sh)
            elif qtype == T.IQ2_S:  # 32 low index bytes, 32 sign bytes, 8 bytes of 2 high bits each
                raw[b, 2:34] = pts & 255
                raw[b, 66:74] = [sum(int(pts[4 * i + k] >> 8) << (2 * k) for k in range(4)) for i in range(8)]
            else:  # IQ3_XXS: 64 index bytes, then per sub-block u32 signs | scale << 28
                raw[b, 2:66] = pts
                for ib in range(8):
                    o = 66 + 4 * ib
                    aux = int(np.frombuffer(raw[b, o:o + 4].tobytes(), "<u4")[0]) & 0xF0000000
                    aux |= sum(int(sg[4 * ib + l]) << (7 * l) for l in range(4))
                    raw[b, o:o + 4] = np.frombuffer(struct.pack("<I", aux), np.uint8)
        values = dequantize(raw.reshape(-1), qtype).astype(np.float32).reshape(-1)
        assert values.size == n_blocks * elems and np.all(np.isfinite(values))
        emit(qtype.name + "_grid", qtype.name, raw, values)
    if args.llama_quantize and args.synth:
        for qtype, (tname, raw) in llama_quantized_blocks(args.llama_quantize, args.synth).items():
            lines.append(f"// {qtype.name}_llama: the first {len(raw)} blocks of {tname} in llm-synth's tiny (seed 7)"
                         f" quantized by llama.cpp's llama-quantize to {LLAMA_FTYPES[qtype]}")
            values = dequantize(raw.reshape(-1), qtype).astype(np.float32).reshape(-1)
            assert np.all(np.isfinite(values))
            emit(qtype.name + "_llama", qtype.name, raw, values)
    else:
        lines.append("// (no vectors from llama-quantize: generated without --llama-quantize/--synth)")
    lines.append("static const QuantVector kQuantVectors[] = {")
    lines += table
    lines.append("};")
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
