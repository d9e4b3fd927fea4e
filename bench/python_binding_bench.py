#!/usr/bin/env python3
"""Single-stream decode through the Python package against the C API.

  bench/python_binding_bench.py [--model GGUF] [--threads N] [--rounds K] [--llm-bench PATH]

Both sides decode the same request (greedy, "Once upon a time", 256 tokens,
the shape of `llm-bench --mode micro`'s decode): the C side is llm-bench's
micro mode (a C consumer of llm_poll), the Python side `Context.events` in
this process, each measuring decode as the consumer sees it (time from the
first token to the last over the tokens between). Rounds alternate which
side goes first (this VM's speed drifts); the report gives each round's
ratio, their median and the ratio of each side's best round. The binding's
goal: at most 3% slower at batch 1.
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
import llmrt  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--model", default=str(REPO / "models/pypi/SmolLM2-135M-Instruct.Q4_1.gguf"))
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--llm-bench", default=str(REPO / "build/bin/llm-bench"))
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


with llmrt.Context(a.model, n_threads=a.threads, n_ctx=512) as ctx:
    py_side(ctx)  # warm: the weights paged in, the poller started
    rows = []
    for r in range(a.rounds):
        if r % 2 == 0:
            c = c_side()
            p = py_side(ctx)
        else:
            p = py_side(ctx)
            c = c_side()
        rows.append((c, p))
        print("round %d: C %.1f tok/s, Python %.1f tok/s, Python/C %.3f" % (r + 1, c, p, p / c), flush=True)
ratios = [p / c for c, p in rows]
best = max(p for _, p in rows) / max(c for c, _ in rows)
print("median Python/C %.3f; best-round ratio %.3f (model %s, %d threads)" %
      (statistics.median(ratios), best, os.path.basename(a.model), a.threads))
