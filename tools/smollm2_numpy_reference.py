#!/usr/bin/env python3
"""Writes tests/data/smollm2_reference_numpy.json with the NumPy oracle
(tools/llama_numpy_reference.py: gguf-py dequantization, float64 forward, no
activation quantization), the fallback when llama-cpp-python cannot be built.
tools/llamacpp_reference.py smollm2 writes the same schema with llama.cpp as oracle
(tests/data/smollm2_reference.json).

Token ids come from llmrt's tokenizer (itself checked against llama.cpp's
tokenizer vectors in test_tokenizer), one JSON line per prompt from
  ./build/bin/llm-run -m MODEL -p PROMPT -n 1 --json > /tmp/ids.txt   (each prompt below, in order)
  ./build/bin/llm-run -m MODEL -p "$(cat tests/data/smollm2_ppl.txt)" -n 1 --json > /tmp/ppl_ids.txt
(the text without its trailing newline). Usage: python3 tools/smollm2_numpy_reference.py
"""
import json, sys, hashlib, numpy as np
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))
from llama_numpy_reference import Model, log_softmax, MODEL
prompts = ["The capital of France is", "Once upon a time, there was a little robot who", "def fibonacci(n):\n"]
ids = [json.loads(l)["prompt_tokens"] for l in open("/tmp/ids.txt") if l.strip()]
text_ids = json.loads(open("/tmp/ppl_ids.txt").read().strip())["prompt_tokens"]
m = Model(MODEL)
greedy = []
for prompt, pid in zip(prompts, ids):
    seq, out, margins = list(pid), [], []
    for _ in range(32):
        lg = m.logits(seq, last_only=True)[-1]
        top = np.argsort(lg)[::-1][:2]
        out.append(int(top[0])); margins.append(round(float(lg[top[0]] - lg[top[1]]), 4))
        if out[-1] == 2: break
        seq.append(out[-1])
    greedy.append({"prompt": prompt, "prompt_ids": pid, "ids": out, "margins": margins})
    print(prompt, out, min(margins), flush=True)
CTX = 128
nll, running = [], []
for c in range(len(text_ids) // CTX):
    chunk = text_ids[c * CTX:(c + 1) * CTX]
    lg = m.logits(chunk)
    for q in range(CTX // 2, CTX - 1):
        nll.append(-log_softmax(lg[q])[chunk[q + 1]])
    running.append(round(float(np.exp(np.mean(nll))), 6))
ppl = float(np.exp(np.mean(nll)))
print("ppl", ppl)
ref = {
  "model": MODEL.name,
  "model_sha256": hashlib.sha256(MODEL.read_bytes()).hexdigest(),
  "oracle": "NumPy float64 forward pass over gguf-py's dequantization (tools/llama_numpy_reference.py); "
            "no activation quantization. Prompt and text token ids from llmrt's tokenizer (checked separately "
            "against llama.cpp's tokenizer vectors). Provisional: tools/smollm2_reference.py regenerates this "
            "file with llama-cpp-python as the oracle.",
  "activation_quantization": False,
  "command": "python3 tools/smollm2_numpy_reference.py  # ids from llm-run --json, see its docstring",
  "add_bos": False, "eos": 2,
  "greedy": greedy,
  "perplexity": {"file": "tests/data/smollm2_ppl.txt", "ctx": CTX, "n_tokens": len(text_ids),
                 "n_chunks": len(text_ids) // CTX, "running_ppl": running, "ppl": round(ppl, 6), "token_ids": text_ids},
}
open("tests/data/smollm2_reference_numpy.json", "w").write(json.dumps(ref, indent=1, ensure_ascii=False) + "\n")
