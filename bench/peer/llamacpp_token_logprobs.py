#!/usr/bin/env python3
"""llama.cpp's log-probability of each token llm-perplexity scores, for
token-by-token comparisons (bench/ppl_token_compare.py).

Runs llama.cpp through llama-cpp-python's low-level binding, chunk by chunk as
llama-perplexity and llm-perplexity split the text (chunks of CTX tokens, the
first replaced by BOS where the model adds one, positions CTX/2 .. CTX-2
scored), with logits at every position. Weights are not repacked
(use_extra_bufts = false: llama.cpp's AMX matmul crashes on this VM's CPU).

  llamacpp_token_logprobs.py MODEL TEXT CTX THREADS FA(0|1) KV OUT.npz [MAX_CHUNKS]

KV: the cache type of K and V (f32, f16, q8_0, q4_0), or K/V apart as
KTYPE/VTYPE (f16/q4_0: llama-perplexity's -ctk f16 -ctv q4_0; a quantized V
needs FA 1). MAX_CHUNKS: score only the first chunks.

OUT.npz: tokens (the whole text's), bos, addbos, lp (scored tokens' log-probs in
chunk order). Not part of CI.
"""
import sys

import numpy as np
import llama_cpp as L


def main():
    model, text, n_ctx, threads, fa, kv, out = sys.argv[1:8]
    n_ctx, threads = int(n_ctx), int(threads)
    max_chunks = int(sys.argv[8]) if len(sys.argv) > 8 else None
    types = {"f32": 0, "f16": 1, "q4_0": 2, "q8_0": 8}  # ggml_type
    kt, vt = kv.split("/") if "/" in kv else (kv, kv)
    L.llama_backend_init()
    mp = L.llama_model_default_params()
    mp.use_extra_bufts = False
    m = L.llama_model_load_from_file(model.encode(), mp)
    vocab = L.llama_model_get_vocab(m)
    cp = L.llama_context_default_params()
    cp.n_ctx = cp.n_batch = cp.n_ubatch = n_ctx
    cp.n_threads = cp.n_threads_batch = threads
    cp.flash_attn_type = 1 if fa == "1" else 0
    cp.type_k, cp.type_v = types[kt], types[vt]
    c = L.llama_init_from_model(m, cp)
    s = open(text, "rb").read()
    if s.endswith(b"\n"):
        s = s[:-1]  # as both perplexity tools
    buf = (L.llama_token * (len(s) + 16))()
    n = L.llama_tokenize(vocab, s, len(s), buf, len(buf), True, False)
    if n < 0:  # more tokens than bytes (a byte-level vocabulary): -n is the count
        buf = (L.llama_token * -n)()
        n = L.llama_tokenize(vocab, s, len(s), buf, len(buf), True, False)
    toks = np.array(buf[:n], dtype=np.int32)
    bos = L.llama_vocab_bos(vocab)
    addbos = n > 0 and toks[0] == bos
    n_vocab = L.llama_vocab_n_tokens(vocab)
    first = n_ctx // 2
    lps = []
    n_chunks = n // n_ctx if max_chunks is None else min(n // n_ctx, max_chunks)
    for ci in range(n_chunks):
        ch = toks[ci * n_ctx:(ci + 1) * n_ctx].copy()
        if addbos:
            ch[0] = bos
        L.llama_memory_clear(L.llama_get_memory(c), True)
        b = L.llama_batch_init(n_ctx, 0, 1)
        for i in range(n_ctx):
            b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = int(ch[i]), i, 1, 1
            b.seq_id[i][0] = 0
        b.n_tokens = n_ctx
        if L.llama_decode(c, b) != 0:
            sys.exit(f"llama_decode failed on chunk {ci}")
        lg = np.ctypeslib.as_array(L.llama_get_logits(c), shape=(n_ctx, n_vocab))
        x = lg[first:n_ctx - 1].astype(np.float64)
        L.llama_batch_free(b)
        mx = x.max(1, keepdims=True)
        lse = np.log(np.exp(x - mx).sum(1)) + mx[:, 0]
        lps.append(x[np.arange(len(x)), ch[first + 1:n_ctx]] - lse)
    lp = np.concatenate(lps)
    print(f"tokens {n} chunks {n_chunks} ppl {np.exp(-lp.mean()):.4f}")
    np.savez(out, addbos=addbos, bos=bos, tokens=toks, lp=lp)


if __name__ == "__main__":
    main()
