#!/usr/bin/env python3
"""Single-stream decode through the Python package against the C API.

  bench/python_binding_bench.py [--model GGUF] [--threads N] [--rounds K] [--llm-bench PATH] [--peer]

Both sides decode the same request (greedy, "Once upon a time", 256 tokens,
the shape of `llm-bench --mode micro`'s decode): the C side is llm-bench's
micro mode (a C consumer of llm_poll), the Python side `Context.events` in
this process, each measuring decode as the consumer sees it (time from the
first token to the last over the tokens between). Rounds alternate which
side goes first (this VM's speed drifts); the report gives each round's
ratio, their median and the ratio of each side's best round. The binding's
goal: at most 3% slower at batch 1.

--peer adds llama-cpp-python on the same file and threads (its package must
be importable; LLAMA_CPP_LIB_PATH may name its libraries): `Llama.generate`
from the same prompt, greedy (top_k 1), 256 tokens whatever they are (EOS
not checked, as ignore_eos on our side), timed the same way; its round
position rotates with the others'. llama.cpp runs without its extra buffer
types (AMX, weight repacking): the wheel's AMX matmul crashes on this VM.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bindings" / "python" / "src"))

ap = argparse.ArgumentParser()
ap.add_argument("--model", default=str(REPO / "models/pypi/SmolLM2-135M-Instruct.Q4_1.gguf"))
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--llm-bench", default=str(REPO / "build/bin/llm-bench"))
ap.add_argument("--peer", action="store_true", help="also llama-cpp-python on the same file and threads")
a = ap.parse_args()


def c_side() -> float:
    out = subprocess.run([a.llm_bench, "-m", a.model, "-t", str(a.threads), "--mode", "micro", "--json"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])["decode_tok_s"]


def py_side(ctx) -> float:
    times = []
    for e in ctx.events("Once upon a time", max_tokens=256, temperature=0, ignore_eos=True):
        if e.kind == "token":
            times.append(time.perf_counter())
    return (len(times) - 1) / (times[-1] - times[0])


def peer_side(llm) -> float:
    llm.reset()
    times = []
    for _ in llm.generate(llm.tokenize(b"Once upon a time"), top_k=1, top_p=1.0, temp=0.0, reset=True):
        times.append(time.perf_counter())
        if len(times) == 256:
            break
    return (len(times) - 1) / (times[-1] - times[0])


peer = None
if a.peer:
    import llama_cpp
    # No extra buffer types (as bench/kv_state_peer.py): the wheel's AMX
    # matmul, one of them, crashes on this VM's CPU; llama.cpp then also
    # skips its weight repacking (say so beside the figures).
    import llama_cpp.llama_cpp as _lc  # the module Llama takes its defaults from
    _default_params = _lc.llama_model_default_params

    def _params_without_extra_bufts():
        mp = _default_params()
        mp.use_extra_bufts = False
        return mp

    _lc.llama_model_default_params = _params_without_extra_bufts
    peer = llama_cpp.Llama(model_path=a.model, n_threads=a.threads, n_threads_batch=a.threads, n_ctx=512,
                           n_batch=512, verbose=True)  # verbose=False crashes this build (its stderr redirection)
    peer_side(peer)  # warm

import llmrt  # noqa: E402  (after llama_cpp: see tests/dlopen for why the order once mattered)

with llmrt.Context(a.model, n_threads=a.threads, n_ctx=512) as ctx:
    py_side(ctx)  # warm: the weights paged in, the poller started
    rows = []
    for r in range(a.rounds):
        sides = [("c", c_side), ("py", lambda: py_side(ctx))] + ([("peer", lambda: peer_side(peer))] if peer else [])
        k = r % len(sides)
        got = {name: fn() for name, fn in sides[k:] + sides[:k]}
        c, p = got["c"], got["py"]
        rows.append((c, p, got.get("peer")))
        line = "round %d: C %.1f tok/s, Python %.1f tok/s, Python/C %.3f" % (r + 1, c, p, p / c)
        if peer:
            line += ", llama-cpp-python %.1f tok/s, Python/llama-cpp-python %.3f" % (got["peer"], p / got["peer"])
        print(line, flush=True)
ratios = [p / c for c, p, _ in rows]
best = max(p for _, p, _ in rows) / max(c for c, _, _ in rows)
print("median Python/C %.3f; best-round ratio %.3f (model %s, %d threads)" %
      (statistics.median(ratios), best, os.path.basename(a.model), a.threads))
if peer:
    pr = [p / q for _, p, q in rows]
    print("median Python/llama-cpp-python %.3f; best-round ratio %.3f" %
          (statistics.median(pr), max(p for _, p, _ in rows) / max(q for _, _, q in rows)))
