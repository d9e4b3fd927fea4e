#!/usr/bin/env python3
"""Reference outputs for the real PyPI models from llama-cpp-python (llama.cpp
built from source by pip; an oracle only, never vendored).

  python3 tools/llamacpp_reference.py smollm2   # -> tests/data/smollm2_reference.json
  python3 tools/llamacpp_reference.py gemma3    # -> tests/data/gemma3_reference.json

after scripts/fetch-models.sh and
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" \\
    pip install llama-cpp-python numpy

tests/test_smollm2.cpp and tests/test_gemma3.cpp compare llmrt against:
  * greedy: for each raw completion prompt (tokenized with the model's BOS
    rule) and, where the model has chat cases, each conversation rendered with
    its chat template (tools/chat_reference.py's jinja2 environment; the text
    parsed for special tokens, BOS added only when the rendering does not start
    with it), the token ids and the greedy continuation (N_GEN tokens or up to
    EOS / end of turn), with the margin between the best and second-best logit
    at every step (a step with a tiny margin can flip under any change of
    summation order);
  * perplexity of a text the way llama.cpp's perplexity tool computes it: the
    text (one trailing newline dropped) tokenized with the model's
    special-token rule, floor(n / ctx) chunks of ctx tokens, each evaluated
    alone and scored on its second half (positions ctx/2 .. ctx-2 predict the
    next token); PPL = exp(mean NLL). The first token of a chunk is replaced by
    BOS only when the model adds BOS (llama.cpp's rule).

Gemma 3 uses ctx 1024 and a prompt of over 700 tokens so that its
sliding-window layers (window 512) mask keys in both prefill and decode.

KV cache precision: llama.cpp keeps K/V in F16 by default, llmrt in F32.
Gemma 3 270M is sensitive to that rounding (between llama.cpp's F16 and F32
caches its greedy choice changes at 55 of the 1024 positions of the first
perplexity chunk, and the perplexity by 0.2%), so the Gemma 3 reference runs
llama.cpp with an F32 cache, like llmrt's, and records the F16-cache
perplexity beside it.
The SmolLM2 reference keeps llama.cpp's default F16 cache.
"""
import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import llama_cpp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import chat_reference  # noqa: E402  (the jinja2 environment of the chat template tests)

THREADS = 2
N_GEN = 32
INSTALL = ("CMAKE_ARGS=\"-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON\" "
           "pip install llama-cpp-python numpy")
COMMON_PROMPTS = [
    "The capital of France is",
    "Once upon a time, there was a little robot who",
    "def fibonacci(n):\n",
]


def text_prefix(path, n_chars):
    """The first paragraphs of a text file, at least n_chars long."""
    text = (ROOT / path).read_text(encoding="utf-8")
    end = text.index("\n\n", n_chars)
    return text[:end] + "\n\n"


MODELS = {
    "smollm2": {
        "model": "models/pypi/SmolLM2-135M-Instruct.Q4_1.gguf",
        "out": "tests/data/smollm2_reference.json",
        "text": "tests/data/smollm2_ppl.txt",
        "ctx": 128,
        "n_ctx": 512,
        "prompts": lambda: COMMON_PROMPTS,
        "chat": [],
        "kv_types": ["f16"],  # the first runs everything; the others only the perplexity
    },
    "gemma3": {
        "model": "models/pypi/gemma-3-270m-q4_k_m.gguf",
        "out": "tests/data/gemma3_reference.json",
        "text": "tests/data/gemma3_ppl.txt",
        "ctx": 1024,
        "n_ctx": 1024,
        "kv_types": ["f32", "f16"],
        # The last prompt is the start of the perplexity text (> 512 tokens):
        # its prefill and its decode steps see the sliding window.
        "prompts": lambda: COMMON_PROMPTS + [text_prefix("tests/data/gemma3_ppl.txt", 3000)],
        # The GGUF has no chat template: Gemma 3's own (the instruct models'),
        # which llmrt builds in for gemma3 models without one.
        "template": "tests/data/chat/templates/gemma3.jinja",
        "chat": [
            [{"role": "user", "content": "What is the capital of France?"}],
            [{"role": "system", "content": "You are a helpful assistant."},
             {"role": "user", "content": "Write a short poem about the sea."}],
            [{"role": "user", "content": "Hi! What can you do?"},
             {"role": "assistant", "content": "I can answer questions and write text."},
             {"role": "user", "content": "Then tell me a fact about the Moon."}],
        ],
    },
}


def log_softmax(row):
    row = row.astype(np.float64)
    m = row.max()
    return row - m - np.log(np.exp(row - m).sum())


def greedy(llm, ids, stop_ids):
    llm.reset()
    llm.eval(ids)
    out, margins = [], []
    for _ in range(N_GEN):
        logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
        top = np.argsort(logits)[::-1][:2]
        tok = int(top[0])
        margins.append(round(float(logits[top[0]] - logits[top[1]]), 4))
        out.append(tok)
        if tok in stop_ids:
            break
        llm.eval([tok])
    return out, margins


KV_TYPES = {"f16": llama_cpp.GGML_TYPE_F16, "f32": llama_cpp.GGML_TYPE_F32}


def load(model, spec, kv_type):
    kw = {}
    if kv_type != "f16":  # llama.cpp's default, passed as such to keep the SmolLM2 call unchanged
        kw = {"type_k": KV_TYPES[kv_type], "type_v": KV_TYPES[kv_type]}
    return llama_cpp.Llama(model_path=str(model), n_ctx=spec["n_ctx"], n_batch=512, n_threads=THREADS,
                           logits_all=True, verbose=False, seed=0, **kw)


def perplexity(llm, toks, ctx, add_bos, bos):
    """(running ppl per chunk, ppl) over floor(len / ctx) chunks."""
    nll = []
    chunk_ppl = []
    for c in range(len(toks) // ctx):
        chunk = toks[c * ctx:(c + 1) * ctx]
        if add_bos:
            chunk[0] = bos
        llm.reset()
        llm.eval(chunk)
        scores = np.array(llm.scores[:ctx], dtype=np.float64)
        for p in range(ctx // 2, ctx - 1):
            nll.append(-log_softmax(scores[p])[chunk[p + 1]])
        chunk_ppl.append(round(float(np.exp(np.mean(nll))), 6))
    return chunk_ppl, float(np.exp(np.mean(nll))), len(nll)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("name", choices=sorted(MODELS))
    ap.add_argument("--model", help="GGUF path (default: the fetched one)")
    ap.add_argument("--out", help="JSON path (default: the committed one)")
    args = ap.parse_args()
    spec = MODELS[args.name]
    model = Path(args.model) if args.model else ROOT / spec["model"]
    out_path = Path(args.out) if args.out else ROOT / spec["out"]

    sha = hashlib.sha256(model.read_bytes()).hexdigest()
    kv_types = spec["kv_types"]
    llm = load(model, spec, kv_types[0])
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    eos = llm.token_eos()
    add_bos = bool(llama_cpp.llama_vocab_get_add_bos(vocab))
    bos = llm.token_bos()
    # Generation ends at any end-of-generation token (Gemma's <end_of_turn> too).
    stop_ids = {t for t in range(llm.n_vocab()) if llama_cpp.llama_vocab_is_eog(vocab, t)}

    greedy_cases = []
    for prompt in spec["prompts"]():
        ids = llm.tokenize(prompt.encode(), add_bos=True, special=False)
        out, margins = greedy(llm, ids, stop_ids)
        greedy_cases.append({
            "prompt": prompt,
            "prompt_ids": ids,
            "ids": out,
            "text": llm.detokenize(out).decode("utf-8", errors="replace"),
            "margins": margins,
        })

    chat_cases = []
    if spec["chat"]:
        env = chat_reference.make_env()
        template = (ROOT / spec["template"]).read_text(encoding="utf-8")
        special = {"bos_token": llm.detokenize([bos], special=True).decode(),
                   "eos_token": llm.detokenize([eos], special=True).decode()}
        for messages in spec["chat"]:
            rendered = chat_reference.render(env, template, messages, True, special)
            starts_with_bos = rendered.startswith(special["bos_token"])
            ids = llm.tokenize(rendered.encode(), add_bos=not starts_with_bos, special=True)
            out, margins = greedy(llm, ids, stop_ids)
            chat_cases.append({
                "messages": messages,
                "rendered": rendered,
                "prompt_ids": ids,
                "ids": out,
                "text": llm.detokenize(out).decode("utf-8", errors="replace"),
                "margins": margins,
            })

    ctx = spec["ctx"]
    text = (ROOT / spec["text"]).read_text(encoding="utf-8")
    if text.endswith("\n"):
        text = text[:-1]
    toks = llm.tokenize(text.encode(), add_bos=True, special=False)
    n_chunks = len(toks) // ctx
    chunk_ppl, ppl, n_scored = perplexity(llm, toks, ctx, add_bos, bos)
    other_ppl = {}
    for kv in kv_types[1:]:
        del llm
        llm = load(model, spec, kv)
        other_ppl[kv] = round(perplexity(llm, toks, ctx, add_bos, bos)[1], 6)

    ref = {
        "model": model.name,
        "model_sha256": sha,
        "oracle": f"llama-cpp-python {llama_cpp.__version__} (llama.cpp built from source by pip, CPU)",
        "command": f"python3 tools/llamacpp_reference.py {args.name}  # after scripts/fetch-models.sh; {INSTALL}",
        "activation_quantization": True,  # llama.cpp's quantized matmuls quantize activations (Q8_0 / Q8_K)
        "threads": THREADS,
        **({"kv_cache": kv_types[0]} if kv_types[0] != "f16" else {}),
        "add_bos": add_bos,
        "eos": eos,
        "greedy": greedy_cases,
    }
    if chat_cases:
        ref["eog"] = sorted(stop_ids)
        ref["chat_template"] = spec["template"]
        ref["chat"] = chat_cases
    ref["perplexity"] = {
        "file": spec["text"],
        "ctx": ctx,
        "n_tokens": len(toks),
        "n_chunks": n_chunks,
        "running_ppl": chunk_ppl,
        "ppl": round(ppl, 6),
        **({f"ppl_{kv}_kv_cache": v for kv, v in other_ppl.items()}),
        "token_ids": toks,
    }
    out_path.write_text(json.dumps(ref, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {out_path}: ppl {ppl:.4f} over {n_scored} tokens ({kv_types[0]} KV cache); others {other_ppl}")
    for g in greedy_cases + chat_cases:
        what = g.get("prompt", g.get("rendered", ""))[-60:]
        print(repr(what), "->", repr(g["text"]), "min margin", min(g["margins"]))


if __name__ == "__main__":
    main()
