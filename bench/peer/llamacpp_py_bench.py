#!/usr/bin/env python3
"""llama-bench's pp / tg / depth tests through the llama-cpp-python binding.

For when the llama.cpp tools are not built yet (build_llamacpp.sh takes an
hour on a loaded 2-core VM): the installed llama-cpp-python package carries
the same llama.cpp (its libllama / libggml-cpu, built natively by pip from
the same sdist), and a llama-bench test is only llama_decode in a loop:

  pp N: one llama_decode of N tokens into an empty cache (n_batch 2048,
        n_ubatch 512, llama-bench's defaults);
  tg N: N llama_decode calls of one token each;
  -d D: D tokens decoded first, untimed, and the test runs after them.

Context defaults as llama-bench's (F16 KV, flash attention auto). The
Python overhead per llama_decode is some microseconds against the
milliseconds of a 1B-shape token. Prints llama-bench's JSON fields
(n_prompt, n_gen, n_depth, avg_ts).

With -c C the context is C tokens (0: the model's), as llama-completion
-c C, for peak-RSS runs under /usr/bin/time (the interpreter and the
binding add their own, measured apart by peer_bench.py).

usage: llamacpp_py_bench.py -m MODEL -t THREADS [-p 128] [-n 32] [-d 0] [-r 1] [-c C]
"""
import argparse
import ctypes
import json
import statistics
import time

import llama_cpp as l


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", required=True)
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("-p", type=int, default=128)
    ap.add_argument("-n", type=int, default=32)
    ap.add_argument("-d", type=int, default=0)
    ap.add_argument("-r", type=int, default=1)
    ap.add_argument("-c", type=int, default=-1, help="context size (0: the model's); default: what the tests need")
    a = ap.parse_args()

    l.llama_backend_init()
    mp = l.llama_model_default_params()
    model = l.llama_model_load_from_file(a.m.encode(), mp)
    if not model:
        raise SystemExit(f"cannot load {a.m}")
    cp = l.llama_context_default_params()
    cp.n_ctx = a.d + max(a.p, a.n) + 16 if a.c < 0 else a.c
    cp.n_batch = 2048
    cp.n_ubatch = 512
    cp.n_threads = a.t
    cp.n_threads_batch = a.t
    cp.no_perf = True
    ctx = l.llama_init_from_model(model, cp)
    if not ctx:
        raise SystemExit("cannot create a context")
    n_vocab = l.llama_vocab_n_tokens(l.llama_model_get_vocab(model))
    mem = l.llama_get_memory(ctx)

    def decode(tokens, pos0):
        # llama_batch_get_one: positions follow the cache's
        arr = (ctypes.c_int32 * len(tokens))(*tokens)
        for i in range(0, len(tokens), 2048):
            n = min(2048, len(tokens) - i)
            rc = l.llama_decode(ctx, l.llama_batch_get_one(ctypes.cast(ctypes.byref(arr, 4 * i),
                                                                         ctypes.POINTER(ctypes.c_int32)), n))
            if rc != 0:
                raise SystemExit(f"llama_decode: {rc}")
        l.llama_synchronize(ctx)

    def rand_tokens(n, seed):
        return [(seed * 7919 + i * 37) % n_vocab for i in range(n)]

    def prepare():
        l.llama_memory_clear(mem, True)
        if a.d:
            decode(rand_tokens(a.d, 3), 0)

    out = []
    # warm-up, as llama-bench: one pp and one tg token
    prepare()
    decode(rand_tokens(min(a.p, 32) or 1, 1), a.d)
    for test in (["pp"] if a.p else []) + (["tg"] if a.n else []):
        ts = []
        for _ in range(a.r):
            prepare()
            t0 = time.perf_counter()
            if test == "pp":
                decode(rand_tokens(a.p, 5), a.d)
                ts.append(a.p / (time.perf_counter() - t0))
            else:
                tok = 1
                for i in range(a.n):
                    decode([tok], a.d + i)
                    tok = (tok * 31 + 7) % n_vocab
                ts.append(a.n / (time.perf_counter() - t0))
        out.append({"n_prompt": a.p if test == "pp" else 0, "n_gen": a.n if test == "tg" else 0, "n_depth": a.d,
                    "avg_ts": statistics.mean(ts), "samples_ts": ts})
    l.llama_free(ctx)
    l.llama_model_free(model)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
