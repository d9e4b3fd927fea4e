#!/usr/bin/env python3
"""Checks the command-line tools against llama.cpp's golden outputs.

  check_cli.py BIN_DIR REPO_DIR

The llama.cpp outputs are the repository's tests/data/llama.cpp/ files.

- llm-run --temp 0 -n 200 --json reproduces every greedy entry of
  stories260K-greedy.json (prompt ids, generated ids, text);
- llm-perplexity on stories260K-corpus.txt agrees with llama.cpp's
  perplexities (stories260K-perplexity.json) within 0.1%;
- llm-perplexity --nll-out writes one NLL per scored token, and their mean
  gives the perplexity it prints.
Prints 'N passed, N failed' and exits non-zero on any failure.
"""
import json
import os
import re
import subprocess
import sys

bin_dir, repo = sys.argv[1:3]
reference = os.path.join(repo, "tests/data/llama.cpp")
passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what)


models = {"F32": os.path.join(repo, "models/stories260K-f32.gguf"),
          "F16": os.path.join(repo, "models/stories260K-f16.gguf")}
golden = json.load(open(os.path.join(reference, "stories260K-greedy.json"), encoding="utf-8"))
for e in golden:
    cmd = [os.path.join(bin_dir, "llm-run"), "-m", models[e["weights"]], "-p", e["prompt"],
           "--temp", "0", "-n", str(e["n_predict"]), "-t", "2", "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8")
    what = f'llm-run {e["weights"]} {e["prompt"]!r}'
    if out.returncode != 0:
        check(False, what + ": exit " + str(out.returncode) + " " + out.stderr)
        continue
    j = json.loads(out.stdout)
    check(j["prompt_tokens"] == e["prompt_ids"], what + ": prompt ids")
    check(j["tokens"] == e["generated_ids"], what + ": generated ids")
    check(j["text"] == e["generated_text"], what + ": text")

# -ngl auto / all and --fit (llama.cpp's spellings): accepted; on the CPU
# backend (the suite's LLM_BACKEND=cpu) they change nothing. Bad values: exit 2.
e = golden[0]
for flags in (["-ngl", "auto"], ["-ngl", "all"], ["--fit", "on"], ["--fit", "off", "-ngl", "auto"]):
    cmd = [os.path.join(bin_dir, "llm-run"), "-m", models[e["weights"]], "-p", e["prompt"],
           "--temp", "0", "-n", str(e["n_predict"]), "-t", "2", "--json"] + flags
    out = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8")
    ok = out.returncode == 0 and json.loads(out.stdout)["tokens"] == e["generated_ids"]
    check(ok, "llm-run " + " ".join(flags) + ": the golden tokens (" + out.stderr[-200:] + ")")
for flags in (["-ngl", "most"], ["-ngl", "-2"], ["--fit", "maybe"]):
    out = subprocess.run([os.path.join(bin_dir, "llm-run"), "-m", models["F32"]] + flags,
                         capture_output=True, text=True)
    check(out.returncode == 2 and flags[0] in out.stderr, "llm-run " + " ".join(flags) + ": exit 2 naming it")

ppl = json.load(open(os.path.join(reference, "stories260K-perplexity.json"), encoding="utf-8"))
corpus = os.path.join(reference, "stories260K-corpus.txt")
for run in ppl["runs"]:
    # the KV type llama.cpp ran with ("f16 (llama.cpp default)" or "f32")
    kv = run["kv_cache_type"].split()[0]
    cmd = [os.path.join(bin_dir, "llm-perplexity"), "-m", models["F32"], "-f", corpus,
           "-c", str(run["n_ctx"]), "-t", "2", "-kv", kv]
    out = subprocess.run(cmd, capture_output=True, text=True)
    m = re.search(r"perplexity: ([0-9.]+)", out.stdout)
    what = f'llm-perplexity -c {run["n_ctx"]} -kv {kv} (llama.cpp {run["kv_cache_type"]} KV: {run["final_ppl"]})'
    if not m:
        check(False, what + ": no perplexity printed: " + out.stderr)
        continue
    got = float(m.group(1))
    rel = abs(got - run["final_ppl"]) / run["final_ppl"]
    print(f"{what}: got {got:.4f}, relative difference {rel:.2e}")
    check(rel < 1e-3, what)

# --nll-out: one line per scored token (chunks of 64, positions 32..62
# scored: 31 per chunk), exp(mean) is the printed perplexity.
import math  # noqa: E402
import tempfile  # noqa: E402
with tempfile.TemporaryDirectory() as tmp:
    nll_path = os.path.join(tmp, "nll.txt")
    out = subprocess.run([os.path.join(bin_dir, "llm-perplexity"), "-m", models["F32"], "-f", corpus, "-c", "64",
                          "-t", "2", "--nll-out", nll_path], capture_output=True, text=True)
    m = re.search(r"tokens scored: (\d+).*\nperplexity: ([0-9.]+)", out.stdout)
    nll = [float(x) for x in open(nll_path).read().split()] if os.path.exists(nll_path) else []
    ok = (out.returncode == 0 and m is not None and len(nll) == int(m.group(1)) and len(nll) % 31 == 0 and
          abs(math.exp(sum(nll) / max(1, len(nll))) - float(m.group(2))) < 1e-4 * float(m.group(2)))
    check(ok, f"llm-perplexity --nll-out: {len(nll)} NLLs against {m.groups() if m else out.stdout + out.stderr}")

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
