#!/usr/bin/env python3
"""Chunk-by-chunk comparison of two perplexity runs on the same text.

    bench/ppl_chunk_compare.py A.log B.log

Reads the running perplexities "[k]PPL," that llm-perplexity and
llama-perplexity print after each chunk, recovers each chunk's own mean NLL
(k·ln PPL_k − (k−1)·ln PPL_{k−1}), and prints per chunk A's and B's
perplexity and A/B − 1, then the mean of the per-chunk log differences and
its standard error over chunks. An offset many standard errors from zero is
systematic; one within about two is what the chunk-to-chunk noise of the
two runs' arithmetic allows. Only the chunks both logs reached are used.
"""
import math
import re
import statistics
import sys


def running(path):
    vals = {}
    with open(path, errors="replace") as f:
        for k, v in re.findall(r"\[(\d+)\]([0-9]+\.[0-9]+)", f.read()):
            vals[int(k)] = float(v)
    return [vals[k] for k in sorted(vals)]


def per_chunk_nll(run):
    out, prev = [], 0.0
    for k, p in enumerate(run, 1):
        total = k * math.log(p)
        out.append(total - prev)
        prev = total
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    a, b = running(sys.argv[1]), running(sys.argv[2])
    n = min(len(a), len(b))
    if n == 0:
        sys.exit("no [k]PPL figures in one of the logs")
    ca, cb = per_chunk_nll(a[:n]), per_chunk_nll(b[:n])
    d = [x - y for x, y in zip(ca, cb)]
    for k in range(n):
        print(f"chunk {k + 1}: A {math.exp(ca[k]):.4f} B {math.exp(cb[k]):.4f} A/B-1 {math.exp(d[k]) - 1:+.3%}")
    m = statistics.mean(d)
    se = statistics.stdev(d) / math.sqrt(n) if n > 1 else float("nan")
    print(f"{n} chunks: A {a[n - 1]:.4f} B {b[n - 1]:.4f} A/B-1 {a[n - 1] / b[n - 1] - 1:+.3%}; "
          f"per-chunk log difference {m:+.5f} nats (SE {se:.5f}) = {math.exp(m) - 1:+.3%} +/- {se:.3%}; "
          f"range {math.exp(min(d)) - 1:+.2%} .. {math.exp(max(d)) - 1:+.2%}")


if __name__ == "__main__":
    main()
