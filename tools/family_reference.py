#!/usr/bin/env python3
"""Reference outputs of llama.cpp for the model families' tiny synthesized
models (tests/test_families.cpp), from llama-cpp-python (llama.cpp built from
source by pip; an oracle at test-data generation time only, never a build or
CI dependency).

  cmake --build build --target llm-synth
  python3 tools/family_reference.py [--synth build/bin/llm-synth] [NAME ...]
    # -> tests/data/families/NAME.json and NAME.logits.bin

For each family, llm-synth writes a tiny random model in F32 (weights large
enough that attention is sharp, not near-uniform: q·k / sqrt(head_dim) has a
standard deviation of several units) and llama.cpp runs it with F32 K/V and
flash attention off (its CPU flash-attention path casts K/V to F16 even with
F32 caches). Recorded:
  * the model's llm-synth arguments and the FNV-1a 64 hash of the file, so the
    test rebuilds exactly the model llama.cpp saw (or says it cannot);
  * the logits at every position of each prompt (token ids: BOS then
    pseudo-random ids), float32 little-endian in NAME.logits.bin, prompt after
    prompt, row-major (n_tokens, n_vocab);
  * a greedy continuation of GREEDY_TOKENS tokens from the first prompt's
    first 16 tokens, with the margin between the best and second-best logit
    at every step;
  * the perplexity of the first prompt (every position predicts the next
    token), from llama.cpp's logits;
  * for a family with rope_freqs.weight, the same model without that tensor:
    how far llama.cpp's logits move (the defect's size: a runtime that ignores
    the tensor is that far off).
"""
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import llama_cpp

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "families"
THREADS = 2
N_CTX = 256
GREEDY_PREFIX = 16
GREEDY_TOKENS = 64
INSTALL = "pip install llama-cpp-python==0.3.36 numpy"

# Common llm-synth options: F32, sharp attention, norms that are not all ones.
SYNTH = ["--type", "f32", "--seed", "7", "--std", "0.25", "--norm-std", "0.1", "--bias-std", "0.5"]

FAMILIES = {
    # Llama 3.1+: rope_freqs.weight and no scaling type (issue 19's defect).
    "llama3_rope_freqs": {"shape": "tiny-llama3", "rope_freqs": True},
    "qwen2": {"shape": "tiny-qwen2"},
    "qwen3": {"shape": "tiny-qwen3"},
}


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def prompts(n_vocab, bos):
    rng = np.random.default_rng(19)
    return [[bos] + [int(t) for t in rng.integers(3, n_vocab, size=n - 1)] for n in (96, 41)]


def load(path):
    return llama_cpp.Llama(model_path=str(path), n_ctx=N_CTX, n_batch=N_CTX, n_ubatch=N_CTX, n_threads=THREADS,
                           logits_all=True, flash_attn=False, type_k=llama_cpp.GGML_TYPE_F32,
                           type_v=llama_cpp.GGML_TYPE_F32, verbose=False, seed=0)


def all_logits(llm, ids):
    llm.reset()
    llm.eval(ids)
    return np.array(llm.scores[:len(ids)], dtype=np.float32)


def greedy(llm, ids):
    llm.reset()
    llm.eval(ids)
    out, margins = [], []
    for _ in range(GREEDY_TOKENS):
        logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
        top = np.argsort(logits)[::-1][:2]
        out.append(int(top[0]))
        margins.append(round(float(logits[top[0]] - logits[top[1]]), 4))
        llm.eval([int(top[0])])
    return out, margins


def perplexity(logits, ids):
    x = logits[:-1].astype(np.float64)
    m = x.max(axis=1, keepdims=True)
    lse = (m + np.log(np.exp(x - m).sum(axis=1, keepdims=True)))[:, 0]
    nll = lse - x[np.arange(len(ids) - 1), ids[1:]]
    return float(np.exp(nll.mean()))


def synth(tool, shape, path, extra=()):
    subprocess.run([tool, "--shape", shape, "--out", str(path), *SYNTH, *extra], check=True,
                   stdout=subprocess.DEVNULL)


def run(name, spec, tool, tmp):
    path = Path(tmp) / f"{name}.gguf"
    synth(tool, spec["shape"], path)
    data = path.read_bytes()
    llm = load(path)
    n_vocab = llm.n_vocab()
    ps = prompts(n_vocab, llm.token_bos())
    logits = [all_logits(llm, p) for p in ps]
    gen, margins = greedy(llm, ps[0][:GREEDY_PREFIX])
    ref = {
        "shape": spec["shape"],
        "synth_args": SYNTH,
        "model_fnv1a64": fnv1a64(data),
        "model_bytes": len(data),
        "oracle": f"llama-cpp-python {llama_cpp.__version__} (llama.cpp built from source by pip, CPU; "
                  f"F32 K/V, flash attention off, logits_all)",
        "command": f"python3 tools/family_reference.py {name}  # after: {INSTALL}",
        "threads": THREADS,
        "n_vocab": n_vocab,
        "prompts": ps,
        "logits_file": f"{name}.logits.bin",
        "greedy": {"prompt_ids": ps[0][:GREEDY_PREFIX], "ids": gen, "margins": margins},
        "perplexity": {"prompt": 0, "ppl": perplexity(logits[0], ps[0])},
    }
    del llm
    if spec.get("rope_freqs"):
        plain = Path(tmp) / f"{name}_plain.gguf"
        synth(tool, spec["shape"], plain, ["--no-rope-freqs"])
        llm = load(plain)
        other = all_logits(llm, ps[0])
        diff = np.abs(other - logits[0])
        ref["without_rope_freqs"] = {
            "max_abs_logit_diff": float(diff.max()),
            "max_rel_logit_diff": float((diff / np.maximum(np.abs(logits[0]), 1.0)).max()),
            "ppl": perplexity(other, ps[0]),
            "argmax_changed_at": int((other.argmax(axis=1) != logits[0].argmax(axis=1)).sum()),
        }
        del llm
    OUT.mkdir(parents=True, exist_ok=True)
    np.concatenate(logits).astype("<f4").tofile(OUT / ref["logits_file"])
    (OUT / f"{name}.json").write_text(json.dumps(ref, indent=1) + "\n", encoding="utf-8")
    print(f"{name}: ppl {ref['perplexity']['ppl']:.4f}, greedy min margin {min(margins)}",
          ref.get("without_rope_freqs", ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help=f"families (default: all of {sorted(FAMILIES)})")
    ap.add_argument("--synth", default=str(ROOT / "build" / "bin" / "llm-synth"))
    args = ap.parse_args()
    for n in args.names:
        if n not in FAMILIES:
            ap.error(f"unknown family {n!r}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.names or sorted(FAMILIES):
            run(name, FAMILIES[name], args.synth, tmp)


if __name__ == "__main__":
    sys.exit(main())
