#!/usr/bin/env python3
"""Compares scored tokens' log-probabilities from several sources, token by
token: each source's perplexity, its distance from the first source (mean
|Δ log p| per token, perplexity ratio), and every pair's distance.

  ppl_token_compare.py LABEL=FILE [LABEL=FILE ...]

FILE: an .npz with `lp` (bench/ppl_f64_reference.py,
bench/peer/llamacpp_token_logprobs.py) or llm-perplexity --nll-out's text
(one NLL per line). Put the reference first. Not part of CI.
"""
import sys

import numpy as np


def load(path):
    return np.load(path)["lp"] if path.endswith(".npz") else -np.loadtxt(path)


def main():
    src = {}
    for a in sys.argv[1:]:
        label, path = a.split("=", 1)
        src[label] = load(path)
    n = min(len(v) for v in src.values())
    if any(len(v) != n for v in src.values()):
        sys.exit("sources score different token counts")
    labels = list(src)
    ref = src[labels[0]]
    print(f"{n} tokens; reference {labels[0]}")
    print("| source | perplexity | vs reference | mean abs d log p vs reference |")
    print("| --- | --- | --- | --- |")
    for k in labels:
        v = src[k]
        print(f"| {k} | {np.exp(-v.mean()):.4f} | {np.exp(ref.mean() - v.mean()) - 1:+.3%} | "
              f"{np.abs(v - ref).mean():.4f} |")
    print("\n| a | b | mean abs d log p | perplexity a / b - 1 |")
    print("| --- | --- | --- | --- |")
    for i in range(len(labels)):
        for j in range(i + 1, len(labels)):
            a, b = src[labels[i]], src[labels[j]]
            print(f"| {labels[i]} | {labels[j]} | {np.abs(a - b).mean():.4f} | {np.exp(b.mean() - a.mean()) - 1:+.3%} |")


if __name__ == "__main__":
    main()
