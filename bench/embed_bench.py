#!/usr/bin/env python3
"""Embedding throughput: texts per second for N chunks of 100-400 tokens,
llmrt (llm_embed through libllmrt, ctypes) beside llama.cpp's
`llama-embedding` on the same GGUF, at the same thread count (issue 31).

  cmake --build build --target llm-synth llmrt
  bench/peer/build_llamacpp.sh          # llama.cpp 0.3.36 with llama-embedding, into bench/peer/.cache
  python3 bench/embed_bench.py          # the issue's measurement: both shapes, 256 chunks,
                                        # F16, 2 threads, 3 alternating rounds, ratios printed
  python3 bench/embed_bench.py [--shape bert-base|qwen3-embed-0.6b|both] [--threads 2] [--n 256] \\
      [--llama-embedding /path/to/llama-embedding] [--type f16] [--rounds 3]

The model is llm-synth's (random weights, the shape's real sizes; its
WordPiece vocabulary spells token i as the word "w<i>", so a chunk is the
text "w<i> w<j> ..." and both runtimes see the same ids: [CLS] ids [SEP]).
Both runs include loading the model; llmrt's time is also given without
it. The model's pooling (BERT: mean, Qwen3: last token), normalised. Write the figures to
bench/results/<date>-embeddings.md with the machine and the command.
"""
import argparse
import ctypes
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def chunks(n, n_vocab, seed=3, decoder=False):
    """n texts of 100-400 tokens. WordPiece: "w<i>" words, one token each,
    plus [CLS] and [SEP]. The synthetic Qwen vocabulary (byte-level BPE with
    a few merges): k - 1 single characters that merge with nothing (digits
    and punctuation, one token each), then <|endoftext|>, which the
    tokenizer appends."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        if decoder:
            k = rng.randint(100, 400) - 1
            out.append("".join(rng.choice("0123456789.,;:!?") for _ in range(k)))
            continue
        k = rng.randint(100, 400) - 2  # + [CLS] and [SEP]
        out.append(" ".join("w%d" % rng.randint(57, n_vocab - 1) for _ in range(k)))
    return out


def run_llmrt(lib_path, model, texts, threads):
    lib = ctypes.CDLL(str(lib_path))
    # llm_ctx_params: 240 bytes (pinned by tests/test_abi.cpp; append-only, so
    # the offsets below hold for any later size); the buffer is larger so that
    # init never writes past it, and the size init reports is checked.
    params = ctypes.create_string_buffer(512)
    lib.llm_ctx_params_init(params)
    size = ctypes.c_uint32.from_buffer(params, 0).value
    if size < 144 or size > len(params):
        sys.exit("llm_ctx_params is %d bytes: this script knows 144 to %d" % (size, len(params)))
    path = ctypes.c_char_p(str(model).encode())
    ctypes.c_void_p.from_buffer(params, 8).value = ctypes.cast(path, ctypes.c_void_p).value  # model_path
    ctypes.c_int32.from_buffer(params, 4).value = 1                                          # backend CPU
    ctypes.c_int32.from_buffer(params, 16).value = threads                                   # n_threads
    ctypes.c_int32.from_buffer(params, 36).value = 8192                                      # max_batch_tokens
    ctx = ctypes.c_void_p()
    c0 = time.process_time()
    t0 = time.perf_counter()
    if lib.llm_ctx_create(params, ctypes.byref(ctx)) != 0:
        lib.llm_last_error.restype = ctypes.c_char_p
        sys.exit("llm_ctx_create: %s" % lib.llm_last_error().decode())
    t1 = time.perf_counter()
    arr = (ctypes.c_char_p * len(texts))(*[t.encode() for t in texts])
    dim = ctypes.c_int32()
    lib.llm_embed(ctx, arr, None, None, len(texts), None, None, ctypes.c_size_t(0), ctypes.byref(dim))
    out = (ctypes.c_float * (len(texts) * dim.value))()
    t2 = time.perf_counter()
    st = lib.llm_embed(ctx, arr, None, None, len(texts), None, out, ctypes.c_size_t(len(out)), ctypes.byref(dim))
    t3 = time.perf_counter()
    c3 = time.process_time()
    if st != 0:
        lib.llm_last_error.restype = ctypes.c_char_p
        sys.exit("llm_embed: %s" % lib.llm_last_error().decode())
    lib.llm_ctx_destroy(ctx)
    return t3 - t0 - (t2 - t1), t3 - t2, c3 - c0


def run_llama(binary, model, texts, threads, pooling):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(texts))
        prompts = f.name
    # An encoder's sequence must fit one ubatch (-ub 512: the whole of its
    # context); a causal decoder keeps every sequence of a batch in one KV
    # cache, so its context and ubatch hold the batch (8192, llmrt's
    # max_batch_tokens).
    ctx, ub = ("8192", "8192") if pooling == "last" else ("512", "512")
    cmd = [binary, "-m", str(model), "-f", prompts, "-t", str(threads), "-c", ctx, "-b", "8192", "-ub", ub,
           "--pooling", pooling, "--embd-normalize", "2", "--embd-output-format", "array", "-ngl", "0"]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t1 = time.perf_counter()
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return t1 - t0, cpu, " ".join(cmd)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default="both", help="bert-base, qwen3-embed-0.6b or both (default)")
    ap.add_argument("--type", default="f16")
    ap.add_argument("--threads", type=int, default=2, help="both runtimes (default 2, the issue's figure)")
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--synth", default=str(ROOT / "build" / "bin" / "llm-synth"))
    ap.add_argument("--lib", default=str(ROOT / "build" / "lib" / "libllmrt.so"))
    peer = ROOT / "bench" / "peer" / ".cache" / "llama.cpp-0.3.36-build" / "bin" / "llama-embedding"
    ap.add_argument("--llama-embedding", default=str(peer) if peer.exists() else "",
                    help="default: bench/peer/build_llamacpp.sh's build, when present")
    ap.add_argument("--rounds", type=int, default=3, help="alternating llmrt / llama.cpp rounds")
    args = ap.parse_args()
    shapes = ["bert-base", "qwen3-embed-0.6b"] if args.shape == "both" else [args.shape]
    print("%d chunks of 100-400 tokens, %s weights, %d threads, %d alternating rounds, llama-embedding: %s"
          % (args.n, args.type.upper(), args.threads, args.rounds, args.llama_embedding or "(none)"), flush=True)
    summary = [run_shape(args, shape) for shape in shapes]
    if len(summary) > 1:
        for line in summary:
            print(line)


def run_shape(args, shape):
    decoder = shape.startswith("qwen3")
    pooling = "last" if decoder else "mean"  # the model's own (Qwen3-Embedding: last token)
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / (shape + ".gguf")
        subprocess.run([args.synth, "--shape", shape, "--out", str(model), "--type", args.type], check=True,
                       stdout=subprocess.DEVNULL)
        texts = chunks(args.n, 30522 if shape == "bert-base" else 300, decoder=decoder)
        # Wall time and CPU time (all threads, loading included for both;
        # on a shared machine CPU seconds are the steadier measure).
        ours, theirs, ours_cpu, theirs_cpu = [], [], [], []
        for r in range(args.rounds):
            total, run, cpu = run_llmrt(args.lib, model, texts, args.threads)
            ours.append(total)
            ours_cpu.append(cpu)
            print("round %d llmrt:     %.2f texts/s wall, %.2f texts/CPU-s (%.2f s with loading; %.2f s embedding "
                  "%d texts; %.1f CPU-s; %d threads)" % (r, args.n / total, args.n / cpu, total, run, args.n, cpu,
                                                          args.threads), flush=True)
            if args.llama_embedding:
                t, tcpu, cmd = run_llama(args.llama_embedding, model, texts, args.threads, pooling)
                theirs.append(t)
                theirs_cpu.append(tcpu)
                print("round %d llama.cpp: %.2f texts/s wall, %.2f texts/CPU-s (%.2f s with loading; %.1f CPU-s)  %s"
                      % (r, args.n / t, args.n / tcpu, t, tcpu, cmd), flush=True)
                print("round %d llmrt / llama.cpp: %.2fx wall, %.2fx CPU" % (r, t / total, tcpu / cpu), flush=True)
        lens = [len(t.split()) + 2 if not decoder else len(t) + 1 for t in texts]  # + [CLS] [SEP] | + EOS
        head = "%s: %d chunks, %d tokens (%d-%d)" % (shape, len(texts), sum(lens), min(lens), max(lens))
        if not theirs:
            return "%s: llmrt median %.2f texts/s wall" % (head, args.n / statistics.median(ours))
        wall = statistics.median(t / o for o, t in zip(ours, theirs))
        cpu = statistics.median(t / o for o, t in zip(ours_cpu, theirs_cpu))
        line = ("%s: median llmrt / llama.cpp over %d rounds: %.2fx wall, %.2fx CPU (goal >= 1.5x)"
                % (head, len(theirs), wall, cpu))
        print(line, flush=True)
        return line


if __name__ == "__main__":
    main()
