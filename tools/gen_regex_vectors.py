#!/usr/bin/env python3
"""Reference data for the regex compiler's property test (tests/test_constrain.cpp).

Random regular expressions over the alphabet {a, b, c} (literals, classes
with ranges and negation, \\d \\w \\s and their negations, '.', groups,
alternation, * + ? {m} {m,} {m,n}, lazy suffixes, explicit ^/$), and for each
the set of strings over {a, b, c, 1, ' '} of length <= 4 that PyPI `regex`
fullmatches (ASCII semantics, as llmrt's compiler documents). Output, one
regex per line: <pattern>\\t<hex bitmask over the strings in enumeration
order>. Deterministic for a given --seed.

    python3 tools/gen_regex_vectors.py --seed 20 --count 300 > tests/data/constrain/regex_vectors.txt
"""
import argparse
import itertools
import random

import regex

ALPHABET = "abc1 "
MAX_LEN = 4


def strings():
    for n in range(MAX_LEN + 1):
        for t in itertools.product(ALPHABET, repeat=n):
            yield "".join(t)


def atom(rng, depth):
    r = rng.random()
    if depth < 3 and r < 0.25:
        inner = alt(rng, depth + 1)
        kind = rng.choice(["(", "(?:", "(?P<g>"]) if "(?P<g>" not in inner else "("
        return kind + inner + ")"
    if r < 0.45:
        neg = "^" if rng.random() < 0.3 else ""
        items = []
        for _ in range(rng.randint(1, 3)):
            x = rng.random()
            if x < 0.3:
                a, b = sorted(rng.sample("abc", 2))
                items.append(a + "-" + b)
            elif x < 0.45:
                items.append(rng.choice(["\\d", "\\w", "\\s", "\\D", "\\S"]))
            else:
                items.append(rng.choice("abc1 "))
        return "[" + neg + "".join(items) + "]"
    if r < 0.55:
        return "."
    if r < 0.62:
        return rng.choice(["\\d", "\\w", "\\s", "\\W"])
    return rng.choice("aabbc1 ")


def quant(rng):
    r = rng.random()
    if r < 0.55:
        return ""
    q = rng.choice(["*", "+", "?", "{2}", "{1,}", "{0,2}", "{1,3}", "{,2}"])
    if rng.random() < 0.15:
        q += "?"
    return q


def concat(rng, depth):
    return "".join(atom(rng, depth) + quant(rng) for _ in range(rng.randint(0, 3)))


def alt(rng, depth):
    parts = [concat(rng, depth)]
    while rng.random() < 0.3:
        parts.append(concat(rng, depth))
    return "|".join(parts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=20)
    ap.add_argument("--count", type=int, default=300)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    all_strings = list(strings())
    seen = set()
    while len(seen) < args.count:
        p = alt(rng, 0)
        if rng.random() < 0.1:
            p = "^" + p + "$"
        if p in seen or "\t" in p:
            continue
        try:
            rx = regex.compile(p, regex.ASCII | regex.V0)
        except regex.error:
            continue
        seen.add(p)
        bits = 0
        for i, s in enumerate(all_strings):
            if rx.fullmatch(s):
                bits |= 1 << i
        print(f"{p}\t{bits:x}")


if __name__ == "__main__":
    main()
