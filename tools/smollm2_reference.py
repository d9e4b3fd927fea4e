#!/usr/bin/env python3
"""Reference outputs for SmolLM2-135M-Instruct Q4_1 from llama-cpp-python
(llama.cpp built from source by pip; an oracle only, never vendored).

Writes tests/data/smollm2_reference.json, which tests/test_smollm2.cpp
compares llmrt against:
  * greedy: for each raw completion prompt, its token ids and the greedy
    continuation (N_GEN tokens or up to EOS), with the margin between the best
    and second-best logit at every step (a step with a tiny margin can flip
    under any change of summation order);
  * perplexity of tests/data/smollm2_ppl.txt the way llama.cpp's perplexity
    tool computes it: the text (one trailing newline dropped) tokenized with
    the model's special-token rule (SmolLM2 adds no BOS), floor(n / CTX)
    chunks of CTX tokens, each evaluated alone and scored on its second half
    (positions CTX/2 .. CTX-2 predict the next token); PPL = exp(mean NLL).
    The first token of a chunk is replaced by BOS only when the model adds
    BOS (llama.cpp's rule), so not for SmolLM2.

Usage (after scripts/fetch-models.sh, with `pip install llama-cpp-python numpy`):
  python3 tools/smollm2_reference.py [MODEL] [OUT]
"""
import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import llama_cpp

ROOT = Path(__file__).resolve().parent.parent
MODEL = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "models/pypi/SmolLM2-135M-Instruct.Q4_1.gguf"
OUT = Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT / "tests/data/smollm2_reference.json"
TEXT = ROOT / "tests/data/smollm2_ppl.txt"
PROMPTS = [
    "The capital of France is",
    "Once upon a time, there was a little robot who",
    "def fibonacci(n):\n",
]
N_GEN = 32
CTX = 128
THREADS = 2


def log_softmax(row):
    row = row.astype(np.float64)
    m = row.max()
    return row - m - np.log(np.exp(row - m).sum())


def main():
    sha = hashlib.sha256(MODEL.read_bytes()).hexdigest()
    llm = llama_cpp.Llama(model_path=str(MODEL), n_ctx=512, n_batch=512, n_threads=THREADS,
                          logits_all=True, verbose=False, seed=0)
    eos = llm.token_eos()
    add_bos = bool(llama_cpp.llama_vocab_get_add_bos(llama_cpp.llama_model_get_vocab(llm.model)))
    bos = llm.token_bos()

    greedy = []
    for prompt in PROMPTS:
        ids = llm.tokenize(prompt.encode(), add_bos=True, special=False)
        llm.reset()
        llm.eval(ids)
        out, margins = [], []
        for _ in range(N_GEN):
            logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
            top = np.argsort(logits)[::-1][:2]
            tok = int(top[0])
            margins.append(round(float(logits[top[0]] - logits[top[1]]), 4))
            out.append(tok)
            if tok == eos:
                break
            llm.eval([tok])
        greedy.append({
            "prompt": prompt,
            "prompt_ids": ids,
            "ids": out,
            "text": llm.detokenize(out).decode("utf-8", errors="replace"),
            "margins": margins,
        })

    text = TEXT.read_text(encoding="utf-8")
    if text.endswith("\n"):
        text = text[:-1]
    toks = llm.tokenize(text.encode(), add_bos=True, special=False)
    n_chunks = len(toks) // CTX
    nll = []
    chunk_ppl = []
    for c in range(n_chunks):
        chunk = toks[c * CTX:(c + 1) * CTX]
        if add_bos:
            chunk[0] = bos
        llm.reset()
        llm.eval(chunk)
        scores = np.array(llm.scores[:CTX], dtype=np.float64)
        for p in range(CTX // 2, CTX - 1):
            nll.append(-log_softmax(scores[p])[chunk[p + 1]])
        chunk_ppl.append(round(float(np.exp(np.mean(nll))), 6))
    ppl = float(np.exp(np.mean(nll)))

    ref = {
        "model": MODEL.name,
        "model_sha256": sha,
        "oracle": f"llama-cpp-python {llama_cpp.__version__} (llama.cpp built from source by pip, CPU)",
        "command": "python3 tools/smollm2_reference.py  # after scripts/fetch-models.sh; "
                   "CMAKE_ARGS=\"-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON\" "
                   "pip install llama-cpp-python numpy",
        "activation_quantization": True,  # llama.cpp's Q4_1/Q8_0 matmuls quantize activations to Q8
        "threads": THREADS,
        "add_bos": add_bos,
        "eos": eos,
        "greedy": greedy,
        "perplexity": {
            "file": "tests/data/smollm2_ppl.txt",
            "ctx": CTX,
            "n_tokens": len(toks),
            "n_chunks": n_chunks,
            "running_ppl": chunk_ppl,
            "ppl": round(ppl, 6),
            "token_ids": toks,
        },
    }
    OUT.write_text(json.dumps(ref, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {OUT}: ppl {ppl:.4f} over {len(nll)} tokens")
    for g in greedy:
        print(repr(g["prompt"]), "->", repr(g["text"]), "min margin", min(g["margins"]))


if __name__ == "__main__":
    main()
