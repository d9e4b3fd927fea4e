#!/usr/bin/env python3
"""A float64 reference for perplexity comparisons: the scored tokens'
log-probabilities of a llama-architecture GGUF (tied or separate output,
no rope scaling), every weight dequantized by the `gguf` package, every
activation in float64, attention exact (no F16 cache, exact softmax).

  ppl_f64_reference.py MODEL TOKENS.npz CTX MODE OUT.npz [KV [MAX_CHUNKS]]

TOKENS.npz: bench/peer/llamacpp_token_logprobs.py's output (the text's tokens
and whether chunks start with BOS), so the chunks are the ones both perplexity
tools score. MODE:
  exact  as above;
  peer   llama.cpp's activation rounding emulated before every matmul of a
         block-quantized weight (Q8_0 blocks with F16 scales for Q4_0, Q5_0,
         Q8_0, IQ4_NL, and Q4_1, Q5_1's Q8_1 values; Q8_K 256-blocks for
         the K-quants and IQ types), the rest
         float64: the arithmetic both runtimes intend, without their float32
         summation orders, F16 cache or attention roundings.
KV: the cache's values, K/V apart as KTYPE/VTYPE or one type for both
(default exact/exact): exact (float64), f16 (rounded to IEEE half), q8_0 or
q4_0 (GGUF blocks of 32 by ggml's reference quantizer, in float32, of the
row rotated by the 64-point orthonormal Walsh-Hadamard matrix for V and
the largest power-of-two point one dividing head_dim for K, as both runtimes
store a quantized cache; attention then reads the dequantized values rotated
back, exactly). The rest stays float64: what a cache of that type costs
with no other rounding. MAX_CHUNKS: score only the first chunks.
OUT.npz: lp (log-probs in chunk order). Prints the running perplexity after
each chunk. Slow (numpy, minutes for SmolLM2-135M); not part of CI.
"""
import sys

import numpy as np

F32 = np.float32
# Q4_1 and Q5_1 meet Q8_1 activations: Q8_0's values (the F16 block sum
# Q8_1 adds for the weights' offsets is not emulated)
Q8_0_ACTS = {"Q4_0", "Q5_0", "Q8_0", "IQ4_NL", "Q4_1", "Q5_1"}
Q8_K_ACTS = {"Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S",
             "IQ3_XXS", "IQ3_S", "IQ4_XS"}


def round_q8_0(x):
    """Rows as llama.cpp's Q8_0 (x86): d = F16(amax / 127), q = rint(x * 127 / amax)."""
    s = x.astype(F32).reshape(x.shape[0], -1, 32)
    amax = np.abs(s).max(-1, keepdims=True)
    d = (amax / F32(127)).astype(F32)
    inv = np.where(amax > 0, F32(127) / np.where(amax > 0, amax, F32(1)), F32(0)).astype(F32)
    q = np.rint(s * inv)
    return (q.astype(np.float64) * d.astype(np.float16).astype(np.float64)).reshape(x.shape)


def round_q8_k(x):
    """Rows as llama.cpp's Q8_K: per 256 values, the value m of largest magnitude
    maps to -127, q = min(127, rint(-127 / m * x)), d = 1 / (-127 / m)."""
    s = x.astype(F32).reshape(x.shape[0], -1, 256)
    m = np.take_along_axis(s, np.abs(s).argmax(-1)[..., None], -1)
    iscale = np.where(m != 0, F32(-127) / np.where(m != 0, m, F32(1)), F32(0)).astype(F32)
    q = np.minimum(F32(127), np.rint(iscale * s))
    d = np.where(m != 0, F32(1) / np.where(m != 0, iscale, F32(1)), F32(0)).astype(F32)
    return (q.astype(np.float64) * d.astype(np.float64)).reshape(x.shape)


def hadamard(n):
    """The n-point orthonormal Walsh-Hadamard matrix (Sylvester's order)."""
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h / np.sqrt(n)


def quantize_q8_0(x):
    """ggml's quantize_row_q8_0_ref on float32 rows, dequantized to float64."""
    s = x.astype(F32).reshape(-1, 32)
    amax = np.abs(s).max(-1, keepdims=True)
    d = (amax / F32(127)).astype(F32)
    idv = np.where(d != 0, F32(1) / np.where(d != 0, d, F32(1)), F32(0)).astype(F32)
    q = np.rint((s * idv).astype(F32))
    return (q.astype(np.float64) * d.astype(np.float16).astype(np.float64)).reshape(x.shape)


def quantize_q4_0(x):
    """ggml's quantize_row_q4_0_ref on float32 rows, dequantized to float64:
    d = m / -8 (m: the first value of largest magnitude), q = min(15,
    trunc(x / d + 8.5)), value (q - 8) * F16(d)."""
    s = x.astype(F32).reshape(-1, 32)
    m = np.take_along_axis(s, np.abs(s).argmax(-1)[:, None], -1)
    d = (m / F32(-8)).astype(F32)
    idv = np.where(d != 0, F32(1) / np.where(d != 0, d, F32(1)), F32(0)).astype(F32)
    q = np.minimum(F32(15), np.trunc(((s * idv).astype(F32) + F32(8.5)).astype(F32)))
    return ((q - 8).astype(np.float64) * d.astype(np.float16).astype(np.float64)).reshape(x.shape)


def cache_values(x, kind, n_rot):
    """x (tokens, heads, hd) as a cache of type `kind` holds it, rotated back."""
    if kind == "exact":
        return x
    if kind == "f16":
        return x.astype(np.float16).astype(np.float64)
    hd = x.shape[-1]
    h = hadamard(n_rot)
    r = (x.reshape(-1, n_rot) @ h).reshape(x.shape)  # H symmetric: row @ H = H row
    r = {"q8_0": quantize_q8_0, "q4_0": quantize_q4_0}[kind](r.reshape(-1, hd)).reshape(x.shape)
    return (r.reshape(-1, n_rot) @ h).reshape(x.shape)


def main():
    model, tok_file, n_ctx, mode, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
    if mode not in ("exact", "peer"):
        sys.exit("MODE: exact or peer")
    kv_arg = sys.argv[6] if len(sys.argv) > 6 else "exact"
    k_kind, v_kind = kv_arg.split("/") if "/" in kv_arg else (kv_arg, kv_arg)
    kinds = ("exact", "f16", "q8_0", "q4_0")
    if k_kind not in kinds or v_kind not in kinds:
        sys.exit(f"KV: one of {kinds}, or two of them as K/V")
    max_chunks = int(sys.argv[7]) if len(sys.argv) > 7 else None
    import gguf  # here, so that the quantizers above import without it
    from gguf.quants import dequantize
    r = gguf.GGUFReader(model)
    kv = {k: v.parts[-1][0] for k, v in r.fields.items() if k.startswith("llama.")}
    n_layer = int(kv["llama.block_count"])
    n_head, n_kv = int(kv["llama.attention.head_count"]), int(kv["llama.attention.head_count_kv"])
    eps = float(kv["llama.attention.layer_norm_rms_epsilon"])
    base = float(kv.get("llama.rope.freq_base", 10000.0))  # llama.cpp's default when the file has none
    W = {t.name: np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float64) for t in r.tensors}
    T = {t.name: t.tensor_type.name for t in r.tensors}
    out_name = "output.weight" if "output.weight" in W else "token_embd.weight"
    E = W["token_embd.weight"]
    D = E.shape[1]
    hd = D // n_head
    # rotation sizes of a quantized cache (none unless head_dim % 64 == 0)
    rot_k = 64 if hd % 64 == 0 else 0
    while rot_k and hd % (2 * rot_k) == 0:
        rot_k *= 2
    rot_v = 64 if hd % 64 == 0 else 0
    if (k_kind in ("q8_0", "q4_0") and not rot_k) or (v_kind in ("q8_0", "q4_0") and not rot_v):
        sys.exit("a quantized cache is emulated only for head_dim % 64 == 0")

    def rounded(x, name):
        if mode == "peer" and T[name] in Q8_0_ACTS:
            return round_q8_0(x)
        if mode == "peer" and T[name] in Q8_K_ACTS:
            return round_q8_k(x)
        return x

    def mm(x, name):
        return rounded(x, name) @ W[name].T

    def rms(x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w

    inv_freq = base ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
    pos = np.arange(n_ctx, dtype=np.float64)
    ang = pos[:, None] * inv_freq[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]

    def rope(x):  # adjacent pairs: llama.cpp's "norm" rope (GGUF Q/K rows are permuted to it)
        y = np.empty_like(x)
        y[..., 0::2] = x[..., 0::2] * cos - x[..., 1::2] * sin
        y[..., 1::2] = x[..., 0::2] * sin + x[..., 1::2] * cos
        return y

    z = np.load(tok_file)
    toks, bos, addbos = z["tokens"], int(z["bos"]), bool(z["addbos"])
    first = n_ctx // 2
    mask = np.triu(np.full((n_ctx, n_ctx), -np.inf), 1)
    lps = []
    n_chunks = len(toks) // n_ctx if max_chunks is None else min(len(toks) // n_ctx, max_chunks)
    for ci in range(n_chunks):
        ch = toks[ci * n_ctx:(ci + 1) * n_ctx].copy()
        if addbos:
            ch[0] = bos
        h = E[ch].copy()
        for layer in range(n_layer):
            p = f"blk.{layer}."
            x = rms(h, W[p + "attn_norm.weight"])
            q = rope(mm(x, p + "attn_q.weight").reshape(n_ctx, n_head, hd))
            k = rope(mm(x, p + "attn_k.weight").reshape(n_ctx, n_kv, hd))
            v = mm(x, p + "attn_v.weight").reshape(n_ctx, n_kv, hd)
            k, v = cache_values(k, k_kind, rot_k), cache_values(v, v_kind, rot_v)
            o = np.empty((n_ctx, n_head, hd))
            for hh in range(n_head):
                g = hh // (n_head // n_kv)
                s = q[:, hh] @ k[:, g].T / np.sqrt(hd) + mask
                s = np.exp(s - s.max(1, keepdims=True))
                o[:, hh] = (s / s.sum(1, keepdims=True)) @ v[:, g]
            h = h + mm(o.reshape(n_ctx, D), p + "attn_output.weight")
            x = rms(h, W[p + "ffn_norm.weight"])
            gate, up = mm(x, p + "ffn_gate.weight"), mm(x, p + "ffn_up.weight")
            h = h + mm(gate / (1 + np.exp(-gate)) * up, p + "ffn_down.weight")
        lg = mm(rms(h[first:n_ctx - 1], W["output_norm.weight"]), out_name)
        mx = lg.max(1, keepdims=True)
        lse = np.log(np.exp(lg - mx).sum(1)) + mx[:, 0]
        lps.append(lg[np.arange(len(lg)), ch[first + 1:n_ctx]] - lse)
        print(f"[{ci + 1}]{np.exp(-np.concatenate(lps).mean()):.4f}", flush=True)
    lp = np.concatenate(lps)
    print(f"{mode} kv {k_kind}/{v_kind}: perplexity {np.exp(-lp.mean()):.4f}")
    np.savez(out, lp=lp)


if __name__ == "__main__":
    main()
