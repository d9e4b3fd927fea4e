#!/usr/bin/env python3
"""A saved conversation restored against recomputed, llmrt beside llama.cpp
(issue 30), on the same GGUF file with the same threads.

  llmrt      kv-state-bench: llm_kv_export_file / llm_kv_import_file
             (bench/kv_state_bench.cpp; it also runs the host and disk tiers)
  llama.cpp  through llama-cpp-python's low-level binding:
             llama_state_seq_save_file / llama_state_seq_load_file

Each round, per side (the sides alternate, llmrt first), with a different
prompt of N token ids per round (the same ids on both sides):
  cold      TTFT of the prompt in a fresh context: every token computed
  save      the sequence's KV to a file: MB/s (file bytes / seconds) and
            file bytes per token
  load      the file into a fresh context: MB/s
  restored  TTFT after the load: the first new token's logits. llmrt
            recomputes the last partial block (up to block_size - 1 tokens
            plus the last one); on the llama.cpp side the last position is
            removed from the loaded cache (llama_memory_seq_rm) and the
            last token decoded again, so both compute the last token's
            logits from the restored KV.
Both keep the KV cache in F16 (llmrt's CPU default, llama.cpp's default);
llama.cpp runs with llama-bench's batch defaults (n_batch 2048, n_ubatch 512).

The model: --model FILE, or (default) llm-synth's llama-3.2-1b shape in F16
quantized to Q8_0 by llama.cpp's own quantizer (as bench/peer/peer_bench.py
does), cached in --work.

  LLAMA_CPP_LIB_PATH=/tmp/embed_oracle/lib PYTHONPATH=/tmp/embed_oracle \\
      python3 bench/kv_state_peer.py --build build --tokens 4000 --threads 2 --rounds 1

Not part of CI: a 4k-token 1B prompt takes minutes on two cores.
"""
import argparse
import ctypes
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def prompt(n, variant, n_vocab):
    # kv_state_bench.cpp's Prompt(): BOS then a deterministic walk
    span = max(1, min(n_vocab - 3, 4000))
    return [1] + [(7 * i + 11 + 131 * variant) % span + 3 for i in range(1, n)]


def make_model(args):
    if args.model:
        return args.model
    os.makedirs(args.work, exist_ok=True)
    q = os.path.join(args.work, "llama-3.2-1b-q8_0.gguf")
    if os.path.exists(q):
        return q
    f16 = os.path.join(args.work, "llama-3.2-1b-f16.gguf")
    if not os.path.exists(f16):
        cmd = [os.path.join(args.build, "bin", "llm-synth"), "--shape", "llama-3.2-1b", "--type", "f16",
               "--out", f16, "--threads", str(args.threads)]
        log(" ".join(cmd))
        subprocess.run(cmd, check=True)
    import llama_cpp
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = 7  # LLAMA_FTYPE_MOSTLY_Q8_0
    p.nthread = args.threads
    log(f"quantizing {f16} to Q8_0")
    if llama_cpp.llama_model_quantize(f16.encode(), (q + ".tmp").encode(), p) != 0:
        raise SystemExit("quantizing failed")
    os.rename(q + ".tmp", q)
    os.remove(f16)
    return q


def llmrt_round(args, model, rnd):
    """One kv-state-bench round on prompt variant 2 * rnd (llama.cpp's round rnd gets the same ids)."""
    cmd = [os.path.join(args.build, "bin", "kv-state-bench"), "--model", model, "--tokens", str(args.tokens),
           "--rounds", "1", "--threads", str(args.threads), "--kv-type", "f16", "--dir", args.dir,
           "--variant", str(2 * rnd)]
    log(" ".join(cmd))
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    row = {}
    for name, key in (("cold (computed)", "cold"), ("restored from a file", "restored"),
                      ("host-memory tier", "host"), ("disk tier, new context", "disk")):
        m = re.search(re.escape(f"| {name} | ") + r"([0-9.]+) \| [0-9.]+ \| (\d+) \|", out)
        row[key] = float(m.group(1))
        row[key + "_cached"] = int(m.group(2))
    m = re.search(r"save ([0-9.]+) MB/s, load ([0-9.]+) MB/s .*, ([0-9]+) bytes per token", out)
    row["save_mbs"], row["load_mbs"], row["bytes_per_token"] = float(m.group(1)), float(m.group(2)), int(m.group(3))
    return row


class LlamaCpp:
    def __init__(self, model, threads, n_ctx, extra_bufts=False):
        import llama_cpp as l
        self.l = l
        l.llama_backend_init()
        self._quiet = l.llama_log_callback(lambda level, text, user: None)  # kept alive: llama.cpp calls it
        l.llama_log_set(self._quiet, ctypes.c_void_p(0))
        mp = l.llama_model_default_params()
        # No extra buffer types: the prebuilt library's AMX matmul (an extra
        # buffer type) crashes on this VM's CPU; without them llama.cpp also
        # skips its weight repacking (noted in the results).
        mp.use_extra_bufts = extra_bufts
        self.model = l.llama_model_load_from_file(model.encode(), mp)
        if not self.model:
            raise SystemExit(f"llama.cpp cannot load {model}")
        self.threads, self.n_ctx = threads, n_ctx
        self.n_vocab = l.llama_vocab_n_tokens(l.llama_model_get_vocab(self.model))

    def context(self):
        l = self.l
        cp = l.llama_context_default_params()
        cp.n_ctx = self.n_ctx
        cp.n_batch = 2048
        cp.n_ubatch = 512
        cp.n_threads = self.threads
        cp.n_threads_batch = self.threads
        cp.no_perf = True
        ctx = l.llama_init_from_model(self.model, cp)
        if not ctx:
            raise SystemExit("llama.cpp cannot create a context")
        return ctx

    def decode(self, ctx, tokens):
        l = self.l
        arr = (ctypes.c_int32 * len(tokens))(*tokens)
        for i in range(0, len(tokens), 2048):
            n = min(2048, len(tokens) - i)
            ptr = ctypes.cast(ctypes.byref(arr, 4 * i), ctypes.POINTER(ctypes.c_int32))
            if l.llama_decode(ctx, l.llama_batch_get_one(ptr, n)) != 0:
                raise SystemExit("llama_decode failed")
        l.llama_synchronize(ctx)
        return l.llama_get_logits_ith(ctx, -1)[0]  # the last token's logits exist

    def round(self, toks, path):
        l = self.l
        row = {}
        ctx = self.context()
        t0 = time.perf_counter()
        self.decode(ctx, toks)
        row["cold"] = (time.perf_counter() - t0) * 1e3
        arr = (ctypes.c_int32 * len(toks))(*toks)
        t0 = time.perf_counter()
        if l.llama_state_seq_save_file(ctx, path.encode(), 0, arr, len(toks)) == 0:
            raise SystemExit("llama_state_seq_save_file failed")
        save_s = time.perf_counter() - t0
        size = os.path.getsize(path)
        row["save_mbs"] = size / save_s / 1e6
        row["bytes_per_token"] = round(size / len(toks))
        l.llama_free(ctx)

        ctx = self.context()
        out = (ctypes.c_int32 * len(toks))()
        n_out = ctypes.c_size_t(0)
        t0 = time.perf_counter()
        if l.llama_state_seq_load_file(ctx, path.encode(), 0, out, len(toks), ctypes.byref(n_out)) == 0:
            raise SystemExit("llama_state_seq_load_file failed")
        row["load_mbs"] = size / (time.perf_counter() - t0) / 1e6
        if n_out.value != len(toks) or list(out) != toks:
            raise SystemExit("llama.cpp restored other tokens than it saved")
        t0 = time.perf_counter()
        l.llama_memory_seq_rm(l.llama_get_memory(ctx), 0, len(toks) - 1, -1)
        self.decode(ctx, toks[-1:])
        row["restored"] = (time.perf_counter() - t0) * 1e3
        row["restored_cached"] = len(toks) - 1
        l.llama_free(ctx)
        os.remove(path)
        return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--model", default="")
    ap.add_argument("--work", default="bench/peer/.cache/models")
    ap.add_argument("--dir", default=tempfile.gettempdir(), help="where the state files go")
    ap.add_argument("--tokens", type=int, default=4000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--side", choices=["both", "llmrt", "llama.cpp"], default="both",
                    help="one side only: its rounds and medians as JSON (two such runs may go side by side)")
    args = ap.parse_args()

    model = make_model(args)
    lc = LlamaCpp(model, args.threads, args.tokens + 64) if args.side != "llmrt" else None
    rows = {"llmrt": [], "llama.cpp": []}
    for r in range(args.rounds):
        if args.side != "llama.cpp":
            rows["llmrt"].append(llmrt_round(args, model, r))
            log(f"llmrt round {r}: {rows['llmrt'][-1]}")
        if lc is not None:
            toks = prompt(args.tokens, 2 * r, lc.n_vocab)
            rows["llama.cpp"].append(lc.round(toks, os.path.join(args.dir, f"lcpp-kv-{os.getpid()}.bin")))
            log(f"llama.cpp round {r}: {rows['llama.cpp'][-1]}")
    if args.side != "both":
        rs = rows[args.side]
        print(json.dumps({"side": args.side, "model": os.path.basename(model), "tokens": args.tokens,
                          "threads": args.threads, "rounds": rs,
                          "median": {k: statistics.median(row[k] for row in rs) for k in rs[0]}}))
        return

    med = {side: {k: statistics.median(row[k] for row in rs) for k in rs[0]} for side, rs in rows.items()}
    print(f"model {os.path.basename(model)}, {args.tokens}-token prompt, {args.threads} threads, F16 KV, "
          f"{args.rounds} round(s), medians\n")
    print("| | llmrt | llama.cpp | llmrt / llama.cpp |")
    print("| --- | --- | --- | --- |")

    def line(name, k, fmt):
        a, b = med["llmrt"][k], med["llama.cpp"][k]
        print(f"| {name} | {fmt.format(a)} | {fmt.format(b)} | {a / b:.2f} |")

    line("cold TTFT ms (computed)", "cold", "{:.0f}")
    line("restored TTFT ms (from a file)", "restored", "{:.1f}")
    a = med["llmrt"]["restored"] / med["llmrt"]["cold"]
    b = med["llama.cpp"]["restored"] / med["llama.cpp"]["cold"]
    print(f"| restored / cold | {a:.4f} | {b:.4f} | |")
    line("save MB/s (to a file)", "save_mbs", "{:.0f}")
    line("load MB/s (from a file)", "load_mbs", "{:.0f}")
    line("bytes per token (file)", "bytes_per_token", "{:.0f}")
    print(f"| tokens reused after the restore | {med['llmrt']['restored_cached']:.0f} | "
          f"{med['llama.cpp']['restored_cached']:.0f} | |")
    print(f"\nllmrt's tiers in the same rounds: host-memory tier TTFT {med['llmrt']['host']:.1f} ms "
          f"({med['llmrt']['host'] / med['llmrt']['cold']:.4f} of cold), disk tier in a new context "
          f"{med['llmrt']['disk']:.1f} ms ({med['llmrt']['disk'] / med['llmrt']['cold']:.4f}).")


if __name__ == "__main__":
    main()
