#!/usr/bin/env python3
"""Reference outputs of llama.cpp for the model families' tiny synthesized
models (tests/test_families.cpp), from llama-cpp-python (llama.cpp built from
source by pip; an oracle at test-data generation time only, never a build or
CI dependency).

  cmake --build build --target llm-synth
  python3 tools/family_reference.py [--synth build/bin/llm-synth] \
      [--exact-gelu-lib "$(bench/peer/build_llamacpp_exactgelu.sh)"] [NAME ...]
    # -> tests/data/families/NAME.json and NAME.logits.bin

Families with a GELU FFN (gemma2) need --exact-gelu-lib: llama.cpp's CPU GELU
rounds its input and output to F16 (a lookup table, GGML_GELU_FP16), which
alone moves the logits ~2.6e-3 relative; the reference for a 1e-3 test comes
from the same llama.cpp built without that table (libllama.so loaded through
LLAMA_CPP_LIB_PATH; the build is described in the json's "oracle"). The other
families do not use GELU and are generated with pip's llama.cpp.

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
  * a greedy continuation of GREEDY_TOKENS tokens from a prefix of a prompt
    (the first whose margins all reach MIN_MARGIN), with the margin between
    the best and second-best logit at every step;
  * the perplexity of the first prompt (every position predicts the next
    token), from llama.cpp's logits;
  * llama.cpp's token ids for a short text (the synthetic vocabulary: a
    SentencePiece one, or for Qwen a byte-level BPE with the qwen2
    pre-tokenizer);
  * for a family with rope_freqs.weight, the same model without that tensor:
    how far llama.cpp's logits move (the defect's size: a runtime that ignores
    the tensor is that far off).
"""
import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

llama_cpp = None  # imported in main(), after LLAMA_CPP_LIB_PATH is set

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "families"
THREADS = 2
N_CTX = 256
GREEDY_PREFIX = 16
GREEDY_TOKENS = 64
MIN_MARGIN = 0.005
TOKENIZE_TEXT = "The capital of France is Paris; it's 1234 km\n  away. <|im_end|>"
INSTALL = "pip install llama-cpp-python==0.3.36 numpy"

# Common llm-synth options: F32, sharp attention, norms that are not all ones.
SYNTH = ["--type", "f32", "--seed", "7", "--std", "0.25", "--norm-std", "0.1", "--bias-std", "0.5"]

GPT_OSS_SYNTH = ["--type", "f32", "--seed", "7", "--std", "0.15", "--norm-std", "0.1", "--bias-std", "0.5"]

FAMILIES = {
    # Llama 3.1+: rope_freqs.weight and no scaling type (issue 19's defect).
    "llama3_rope_freqs": {"shape": "tiny-llama3", "rope_freqs": True},
    "qwen2": {"shape": "tiny-qwen2"},
    "qwen3": {"shape": "tiny-qwen3"},
    # YaRN as Qwen2.5's long-context files write it (rope.scaling.type yarn,
    # factor 4, original context 64 so the 96-token prompt runs past it).
    "qwen2_yarn": {"shape": "tiny-qwen2-yarn"},
    # Mistral as its converter writes it: `llama` with key_length != n_embd /
    # n_head and attention.sliding_window (32 here, shorter than the prompts).
    # llama.cpp reads no window for `llama` (n_swa 0, recorded): every layer
    # attends to all keys, and so does llmrt.
    "mistral": {"shape": "tiny-mistral"},
    # Gemma 2: attention and final logits soft-capped (caps 5 and 4, low so
    # that the tiny model reaches them), post-norms, even layers local with a
    # window of 32 under the 96-token prompt.
    #
    # GeGLU (llama.cpp's fused ggml_geglu_split, tanh GELU): generated with
    # --exact-gelu-lib. Pip's llama.cpp rounds the gate and the GELU to F16
    # (GGML_GELU_FP16), llmrt computes it in F32: against that build, 2.3e-3 /
    # 2.6e-3 worst relative logit difference (3.7e-4 with the F16 rounding
    # emulated in llmrt's kernel); against the exact-GELU build, 6e-6
    # (bench/results/2026-11-24-gemma2-gelu.md).
    "gemma2": {"shape": "tiny-gemma2", "exact_gelu": True},
    # Phi-3: fused attn_qkv and gate+up, NEOX RoPE over 24 of 32 dimensions,
    # attention.sliding_window 32 (llama.cpp reads it for phi3 and does not
    # apply it; the 96-token prompt shows which).
    "phi3": {"shape": "tiny-phi3"},
    # Phi-3.5's LongRoPE: rope_factors_long / rope_factors_short and
    # rope.scaling.attn_factor. llama.cpp takes the long factors when the
    # context (N_CTX, 256) exceeds rope.scaling.original_context_length: 64
    # here (long factors, attn_factor sqrt 2), 1024 in phi35_short (short ones).
    "phi35": {"shape": "tiny-phi35"},
    "phi35_short": {"shape": "tiny-phi35-short"},
    # Mixture of Experts: 4 experts, 2 per token (softmax, top-2,
    # renormalised), as Mixtral (`llama` with expert_count) and qwen3moe.
    "mixtral": {"shape": "tiny-mixtral"},
    "qwen3moe": {"shape": "tiny-qwen3moe"},
    # qwen2moe: biases, top-2 of 4 without renormalisation, a shared expert
    # gated by sigmoid(x · ffn_gate_inp_shexp).
    "qwen2moe": {"shape": "tiny-qwen2moe"},
    # gpt-oss: attention sinks, even layers local (window 32 under the
    # 96-token prompt), YaRN (factor 32, original context 64) on every layer,
    # biases on q/k/v/o, router and experts, 32 MXFP4 experts, top 4 by raw
    # logit weighted by their softmax, clamped SwiGLU.
    # std 0.15 (not 0.25): a less chaotic model, in which one activation
    # rounding of the MXFP4 matmuls' Q8_0 inputs (test_families' GptOssMxfp4)
    # moves the logits less. gpt_oss_plain: the same with F32 experts.
    "gpt_oss": {"shape": "tiny-gpt-oss", "synth": GPT_OSS_SYNTH},
    "gpt_oss_plain": {"shape": "tiny-gpt-oss-plain", "synth": GPT_OSS_SYNTH},
}


def loaded_llama_libs():
    """The libllama / libggml* files this process has mapped (from
    /proc/self/maps): which llama.cpp produced the numbers. A libggml.so.0
    loaded from pip's package (llama_cpp._ggml does) would serve the exact
    libllama too, under the same soname, so every one is checked."""
    with open("/proc/self/maps", encoding="utf-8") as f:
        names = {line.split()[-1] for line in f if "/lib" in line}
    return sorted({os.path.realpath(n) for n in names
                   if Path(n).name.startswith(("libllama.so", "libggml"))})


def check_loaded_from(lib_dir):
    libs = loaded_llama_libs()
    strays = [x for x in libs if Path(x).parent != Path(os.path.realpath(lib_dir))]
    if not any(Path(x).name.startswith("libllama.so") for x in libs) or strays:
        sys.exit(f"llama.cpp libraries not all from {lib_dir}: {libs}")
    return libs


def oracle(spec):
    run_opts = "F32 K/V, flash attention off, logits_all"
    if not spec.get("exact_gelu"):
        return f"llama-cpp-python {llama_cpp.__version__} (llama.cpp built from source by pip, CPU; {run_opts})"
    lib_dir = Path(os.environ["LLAMA_CPP_LIB_PATH"])
    built = (lib_dir / "llmrt-oracle.txt").read_text(encoding="utf-8").strip()
    return f"llama-cpp-python {llama_cpp.__version__}'s bindings on {built}; {run_opts}"


def command(name, spec):
    if spec.get("exact_gelu"):
        return (f"python3 tools/family_reference.py --exact-gelu-lib \"$(bench/peer/build_llamacpp_exactgelu.sh)\" "
                f"{name}  # after: {INSTALL}")
    return f"python3 tools/family_reference.py {name}  # after: {INSTALL}"


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


def attention_sharpness(path, ids):
    """Layer 0's attention on the prompt, in numpy from the file's weights
    (RoPE left out: it moves scores, not their spread): the mean over heads
    and over positions >= 32 of the largest attention weight (uniform
    attention over p keys would give 1/p), and the spread of q·k scale."""
    import gguf
    r = gguf.GGUFReader(str(path))
    t = {x.name: np.array(x.data, dtype=np.float64) for x in r.tensors}

    def field(key):
        f = r.fields[key]
        return f.parts[f.data[0]]

    arch = bytes(field("general.architecture")).decode()
    hd = int(field(f"{arch}.attention.key_length")[0])

    def rms(v, w, eps=1e-6):
        return v / np.sqrt((v * v).mean(-1, keepdims=True) + eps) * w

    xn = rms(t["token_embd.weight"][ids], t["blk.0.attn_norm.weight"])
    if "blk.0.attn_qkv.weight" in t:  # phi3: q rows, then k, then v
        n_q = int(field(f"{arch}.attention.head_count")[0]) * hd
        n_k = int(field(f"{arch}.attention.head_count_kv")[0]) * hd
        qkv = t["blk.0.attn_qkv.weight"]
        t["blk.0.attn_q.weight"], t["blk.0.attn_k.weight"] = qkv[:n_q], qkv[n_q:n_q + n_k]
    q = xn @ t["blk.0.attn_q.weight"].T
    k = xn @ t["blk.0.attn_k.weight"].T
    if "blk.0.attn_q.bias" in t:
        q, k = q + t["blk.0.attn_q.bias"], k + t["blk.0.attn_k.bias"]
    n_head, n_kv = q.shape[1] // hd, k.shape[1] // hd
    q, k = q.reshape(len(ids), n_head, hd), k.reshape(len(ids), n_kv, hd)
    if "blk.0.attn_q_norm.weight" in t:
        q, k = rms(q, t["blk.0.attn_q_norm.weight"]), rms(k, t["blk.0.attn_k_norm.weight"])
    top, spread = [], []
    for h in range(n_head):
        s = q[:, h] @ k[:, h // (n_head // n_kv)].T / np.sqrt(hd)
        spread.append(s[np.tril_indices(len(ids))].std())
        s = np.where(np.tril(np.ones_like(s)) > 0, s, -np.inf)
        p = np.exp(s - s.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        top.append(p.max(1)[32:].mean())
    return {"layer0_mean_max_weight": round(float(np.mean(top)), 3),
            "layer0_score_std": round(float(np.mean(spread)), 2),
            "uniform_max_weight_at_64_keys": round(1 / 64, 3)}


def synth(tool, shape, path, extra=(), args=None):
    subprocess.run([tool, "--shape", shape, "--out", str(path), *(args or SYNTH), *extra], check=True,
                   stdout=subprocess.DEVNULL)


def run(name, spec, tool, tmp):
    path = Path(tmp) / f"{name}.gguf"
    synth(tool, spec["shape"], path, args=spec.get("synth"))
    data = path.read_bytes()
    llm = load(path)
    n_vocab = llm.n_vocab()
    ps = prompts(n_vocab, llm.token_bos())
    logits = [all_logits(llm, p) for p in ps]
    # The first of a few prompt prefixes whose continuation never has a
    # margin under MIN_MARGIN: a near-tie flips under any change of summation
    # order (llmrt's and llama.cpp's logits differ by ~1e-4 here), which
    # would test rounding, not the model.
    for prefix in [p[:n] for n in (GREEDY_PREFIX, GREEDY_PREFIX + 8, GREEDY_PREFIX + 16) for p in ps]:
        gen, margins = greedy(llm, prefix)
        if min(margins) >= MIN_MARGIN:
            break
    ref = {
        "shape": spec["shape"],
        "synth_args": spec.get("synth", SYNTH),
        "model_fnv1a64": fnv1a64(data),
        "model_bytes": len(data),
        "oracle": oracle(spec),
        "command": command(name, spec),
        "threads": THREADS,
        "n_vocab": n_vocab,
        "llama_cpp_n_swa": int(llama_cpp.llama_model_n_swa(llm.model)),
        **({"rel_tol": spec["rel_tol"]} if "rel_tol" in spec else {}),  # test_families: 1e-3 otherwise
        "prompts": ps,
        "logits_file": f"{name}.logits.bin",
        "greedy": {"prompt_ids": prefix, "ids": gen, "margins": margins},
        "tokenize": {"text": TOKENIZE_TEXT,
                     "ids": llm.tokenize(TOKENIZE_TEXT.encode(), add_bos=False, special=False)},
        "perplexity": {"prompt": 0, "ppl": perplexity(logits[0], ps[0])},
        "attention_sharpness": attention_sharpness(path, ps[0]),
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
    print(f"{name}: ppl {ref['perplexity']['ppl']:.4f}, greedy min margin {min(margins)},",
          ref["attention_sharpness"], ref.get("without_rope_freqs", ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help=f"families of {sorted(FAMILIES)} (default: all those the llama.cpp "
                                             "build is for: the GELU ones with --exact-gelu-lib, the others without)")
    ap.add_argument("--synth", default=str(ROOT / "build" / "bin" / "llm-synth"))
    ap.add_argument("--exact-gelu-lib", metavar="DIR",
                    help="directory of a libllama.so built by bench/peer/build_llamacpp_exactgelu.sh; "
                         "the GELU families (gemma2) are generated with it, and only with it")
    ap.add_argument("--no-extra-bufts", action="store_true",
                    help="load with llama.cpp's use_extra_bufts off (no weight repacking: its AMX path "
                         "crashes on some VMs); the results are the same kernels' on unpacked weights")
    args = ap.parse_args()
    for n in args.names:
        if n not in FAMILIES:
            ap.error(f"unknown family {n!r}")
    # Default: the families the chosen llama.cpp is for.
    names = args.names or sorted(n for n, spec in FAMILIES.items()
                                 if bool(spec.get("exact_gelu")) == bool(args.exact_gelu_lib))
    # One process loads one libllama: the GELU families and the others come
    # from different builds, so they are generated by separate runs.
    gelu = {n for n in names if FAMILIES[n].get("exact_gelu")}
    if gelu and len(gelu) != len(names):
        ap.error(f"generate {sorted(gelu)} (with --exact-gelu-lib) apart from the other families")
    if gelu and not args.exact_gelu_lib:
        ap.error(f"{sorted(gelu)} need --exact-gelu-lib (llama.cpp's F16 GELU table is ~2.6e-3 off)")
    if not gelu and args.exact_gelu_lib:
        ap.error("--exact-gelu-lib is for the GELU families only (" +
                 ", ".join(sorted(n for n in FAMILIES if FAMILIES[n].get("exact_gelu"))) + ")")
    global llama_cpp
    if args.exact_gelu_lib:
        lib_dir = Path(args.exact_gelu_lib).resolve()
        if not (lib_dir / "libllama.so").is_file() or not (lib_dir / "llmrt-oracle.txt").is_file():
            ap.error(f"{lib_dir} holds no libllama.so and llmrt-oracle.txt from build_llamacpp_exactgelu.sh")
        os.environ["LLAMA_CPP_LIB_PATH"] = str(lib_dir)
        llama_cpp = importlib.import_module("llama_cpp")
        print("llama.cpp from", " ".join(check_loaded_from(lib_dir)))
    else:
        os.environ.pop("LLAMA_CPP_LIB_PATH", None)
        llama_cpp = importlib.import_module("llama_cpp")
    if args.no_extra_bufts:
        default_params = llama_cpp.llama_cpp.llama_model_default_params

        def no_extra_bufts():
            p = default_params()
            p.use_extra_bufts = False
            return p
        llama_cpp.llama_cpp.llama_model_default_params = no_extra_bufts
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            run(name, FAMILIES[name], args.synth, tmp)
            if args.exact_gelu_lib:
                check_loaded_from(lib_dir)


if __name__ == "__main__":
    sys.exit(main())
