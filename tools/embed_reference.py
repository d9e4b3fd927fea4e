#!/usr/bin/env python3
"""Reference embeddings of llama.cpp for the encoder families' tiny
synthesized models (tests/test_embeddings.cpp), from llama-cpp-python
(llama.cpp built from source by pip, or a build given by LLAMA_CPP_LIB_PATH;
an oracle at test-data generation time only, never a build or CI
dependency).

  cmake --build build --target llm-synth
  pip install --user llama-cpp-python numpy
  LLAMA_CPP_LIB_PATH="$(bench/peer/build_llamacpp_exactgelu.sh)" \
    python3 tools/embed_reference.py [--synth build/bin/llm-synth] [NAME ...]
    # -> tests/data/embeddings/NAME.json and NAME.vec.bin, then
    #    tests/data/embeddings/embeddings.tar.xz holding them all

BERT's FFN is a GELU: the reference comes from llama.cpp built without its
F16 GELU table (bench/peer/build_llamacpp_exactgelu.sh; pip's build is
~1.3e-3 relative away from an exact GELU on these models, more than the
test's tolerance, and its vectors' cosine to llmrt's is still 0.9999999).

For each model, llm-synth writes the tiny model in F32 and llama.cpp embeds
token sequences of several lengths ([CLS] pseudo-random ids [SEP]), one
sequence per llama_decode, with each pooling type the model supports:
llama_get_embeddings_seq for mean / cls / last / rank, every token's row
(llama_get_embeddings_ith) for none. The vectors are llama.cpp's raw pooled
output (not normalised), float32 little-endian in NAME.vec.bin, case after
case. Recorded beside them: the llm-synth arguments and the FNV-1a 64 hash of
the file, so the test rebuilds exactly the model llama.cpp saw.
"""
import argparse
import ctypes
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "embeddings"
SYNTH = ["--type", "f32", "--seed", "7"]
N_CTX = 512
THREADS = 2
LENGTHS = (1, 2, 5, 17, 64, 200, 512)
NONE_MAX = 64  # pooling none records every token's row: the short sequences only (the data stays small)
# Texts for the tiny WordPiece vocabulary (letters, continuations, "w<i>"
# words): case, accents, punctuation, unknown characters, a long word (under
# 100 characters: llama.cpp 0.3.36 splits longer words into pieces where
# BERT (and llmrt) make them [UNK]).
TEXTS = ["w57 w123", "Hello, World! W250 w77w", "Ça va? naïve café", "x" * 40 + " w99", "日本 w64 ☃"]
INSTALL = "pip install --user llama-cpp-python numpy"

# XLM-RoBERTa's vocabulary: the Unigram test vocabulary (SentencePiece
# trained by tests/data/tokenizers/make_embed_vocabs.py, XLM-R's id layout
# <s> <pad> </s> <unk>, with its precompiled charsmap), unpacked at configure
# time from tests/data/tokenizers/embed-unigram.tar.xz.
UNIGRAM = "tests/data/tokenizers/embed/unigram.gguf"
# Texts for the Unigram vocabulary (trained on syllables of several
# scripts): accents and compatibility forms the charsmap folds (ﬁ, full-width
# letters, ①), runs of spaces, scripts it knows and one it does not.
XLMR_TEXTS = ["Hello, World! the quick brown fox", "Ça va? naïve café ﬁne", "Привет мир, κατα λεξη",
              "  leading   and  double  spaces  ", "ＦＵＬＬ ｗｉｄｔｈ ① 日本語 テキスト 한국어", "ภาษาไทย ✓ 🙂"]

# pooling name -> llama.cpp's enum value
POOLING = {"none": 0, "mean": 1, "cls": 2, "last": 3, "rank": 4}
MODELS = {
    # BERT (BGE / E5 / MiniLM shape): absolute positions, token types,
    # post-norm LayerNorms with biases, GELU FFN, non-causal attention.
    "bert": {"shape": "tiny-bert", "poolings": ["mean", "cls", "last", "none"], "texts": True},
    # A cross-encoder: the same block with a classifier head (cls dense +
    # tanh, then one output) read at the CLS token: llama.cpp's RANK pooling.
    "bert_rerank": {"shape": "tiny-bert-rerank", "poolings": ["rank", "mean"]},
    # nomic-embed-text v1.5 (nomic-bert): RoPE (NEOX, base 1000) instead of
    # position embeddings, fused attn_qkv, SwiGLU FFN, no biases, post-norm,
    # WordPiece; mean pooling as the model's sentence-transformers config.
    "nomic_bert": {"shape": "tiny-nomic-bert", "poolings": ["mean", "cls", "none"], "texts": True},
    # XLM-RoBERTa (BGE-M3, multilingual-E5) as llama.cpp's converter writes
    # it: arch bert, one token-type row, a `t5` (SentencePiece Unigram)
    # tokenizer with its precompiled charsmap (the Unigram test vocabulary of
    # tests/data/tokenizers/embed), <s> text </s>; CLS pooling as BGE-M3.
    "xlmr": {"shape": "tiny-xlmr", "poolings": ["cls", "mean", "none"], "texts": True, "vocab": UNIGRAM,
             "specials": (0, 2)},
    # BGE-reranker-v2-m3: that model with the classifier head (cls dense +
    # tanh, cls.output), rank pooling; pairs laid out as llama.cpp's server
    # does with no rerank template: <s> q </s> </s> d </s>.
    "xlmr_rerank": {"shape": "tiny-xlmr-rerank", "poolings": ["rank", "cls"], "pairs": True, "vocab": UNIGRAM,
                    "specials": (0, 2)},
    # Qwen3-Embedding: a causal qwen3 decoder whose file names last-token
    # pooling (its tokenizer appends <|endoftext|>); the vector is the final
    # norm's output at the last token. Texts: a query with Qwen3-Embedding's
    # instruction prefix and documents without one.
    "qwen3_embed": {"shape": "tiny-qwen3-embed", "poolings": ["last", "mean", "none"], "texts": True,
                    "decoder": True},
    # Qwen3-Reranker: rank pooling over the last token through the [yes, no]
    # rows (cls.output.weight) and a softmax: P(yes) first.
    "qwen3_rerank": {"shape": "tiny-qwen3-rerank", "poolings": ["rank", "last"], "decoder": True, "pairs": True},
    # EmbeddingGemma (`gemma-embedding`): Gemma 3's block bidirectional
    # (local layers a symmetric window), mean pooling (the file's), then the
    # dense_2 / dense_3 projections, which llama.cpp applies to every token's
    # row for none. No KV cache in llama.cpp (F32 K/V); llmrt runs its F32 cache.
    "gemma_embed": {"shape": "tiny-gemma-embed", "poolings": ["mean", "none", "cls"], "decoder": True},
}
# (query, document) pairs a reranker scores: laid out as llama.cpp's server
# does (format_prompt_rerank: the file's rerank template, {query} then
# {document} replaced, tokenized with special tokens parsed, none added).
PAIRS = [("what is the capital of China?", d) for d in
         ("The capital of China is Beijing.", "Gravity is a force.", "Beijing is in China; it is the capital.",
          "the cat sat on the mat")]
# Qwen3-Embedding's convention: a query carries a one-line task instruction,
# a document goes in as it is (both end in <|endoftext|>, which the
# tokenizer appends).
QWEN3_TASK = "Given a web search query, retrieve relevant passages that answer the query"
DECODER_TEXTS = [f"Instruct: {QWEN3_TASK}\nQuery: what is the capital of China?",
                 "The capital of China is Beijing.", "Gravity is a force that attracts two bodies.",
                 "the cat sat on the mat " * 12]


COMMAND = ('LLAMA_CPP_LIB_PATH="$(bench/peer/build_llamacpp_exactgelu.sh)" python3 tools/embed_reference.py'
           f'  # after: {INSTALL}')


def oracle(llama_cpp):
    """Which llama.cpp computed the vectors. BERT's FFN is a GELU: pip's
    llama.cpp rounds GELU's input and output to F16 (GGML_GELU_FP16), which
    alone moves these vectors ~1.3e-3 relative from an exact F32 GELU, so the
    reference comes from the same llama.cpp built without that table
    (bench/peer/build_llamacpp_exactgelu.sh, loaded through LLAMA_CPP_LIB_PATH)."""
    run = "CPU, one sequence per llama_decode, embedding=True, raw pooled output"
    lib_dir = os.environ.get("LLAMA_CPP_LIB_PATH")
    if not lib_dir:
        return f"llama-cpp-python {llama_cpp.__version__} (llama.cpp built by pip; {run})"
    built = (Path(lib_dir) / "llmrt-oracle.txt").read_text(encoding="utf-8").strip()
    return f"llama-cpp-python {llama_cpp.__version__}'s bindings on {built}; {run}"


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def sequences(n_vocab, decoder=False, specials=(2, 3)):
    """[CLS] ids [SEP] for an encoder (XLM-R: <s> ids </s>, specials (0, 2));
    for a decoder, byte-level ids then its <|endoftext|> (the last of the
    synthetic Qwen vocabulary's three specials counted from the end:
    n_vocab - 3)."""
    rng = np.random.default_rng(31)
    out = []
    for n in LENGTHS:
        if decoder:
            out.append([int(t) for t in rng.integers(0, n_vocab - 3, size=n - 1)] + [n_vocab - 3])
            continue
        if n == 1:
            out.append([specials[0]])
            continue
        out.append([specials[0]] + [int(t) for t in rng.integers(5, n_vocab, size=n - 2)] + [specials[1]])
    return out


def rerank_layout(llama_cpp, llm, query, doc):
    """A pair as llama.cpp's server lays it out for a file with no rerank
    template (format_prompt_rerank): [BOS] q [EOS] [SEP] d [EOS], each
    special where the vocabulary adds it, EOS falling back to SEP."""
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    q = llm.tokenize(query.encode(), add_bos=False, special=False)
    d = llm.tokenize(doc.encode(), add_bos=False, special=False)
    eos = llama_cpp.llama_vocab_eos(vocab)
    if eos == -1:
        eos = llama_cpp.llama_vocab_sep(vocab)
    out = [llama_cpp.llama_vocab_bos(vocab)] if llama_cpp.llama_vocab_get_add_bos(vocab) else []
    out += q
    if llama_cpp.llama_vocab_get_add_eos(vocab):
        out.append(eos)
    if llama_cpp.llama_vocab_get_add_sep(vocab):
        out.append(llama_cpp.llama_vocab_sep(vocab))
    out += d
    if llama_cpp.llama_vocab_get_add_eos(vocab):
        out.append(eos)
    return out


def embed(llama_cpp, llm, tokens, pooling, n_out):
    """llama.cpp's output for one sequence alone: (rows, n_out) float32."""
    ctx = llm._ctx.ctx
    try:
        mem = llama_cpp.llama_get_memory(ctx)
        if mem:
            llama_cpp.llama_memory_clear(mem, True)
    except AttributeError:
        pass
    llm._batch.reset()
    llm._batch.add_sequence(tokens, 0, True)
    llm._ctx.decode(llm._batch)
    if pooling == "none":
        rows = []
        for i in range(len(tokens)):
            ptr = llama_cpp.llama_get_embeddings_ith(ctx, i)
            rows.append(np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctypes.c_float)), (n_out,)).copy())
        return np.stack(rows)
    ptr = llama_cpp.llama_get_embeddings_seq(ctx, 0)
    return np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctypes.c_float)), (n_out,)).copy()[None, :]


def run(name, spec, tool, tmp):
    import llama_cpp
    path = Path(tmp) / f"{name}.gguf"
    synth = SYNTH + (["--vocab-from", spec["vocab"]] if "vocab" in spec else [])
    subprocess.run([tool, "--shape", spec["shape"], "--out", str(path), *synth], check=True,
                   stdout=subprocess.DEVNULL, cwd=ROOT)
    data = path.read_bytes()
    cases, vecs = [], []
    offset = 0
    for pooling in spec["poolings"]:
        # A decoder's K/V go through llama.cpp's KV cache: F32 there (as
        # tools/family_reference.py does; an F16 cache also rounds q and the
        # attention weights to F16 on the CPU, ~2e-3 relative on these
        # vectors), and the test runs llmrt with an F32 cache too.
        kv = {"type_k": llama_cpp.GGML_TYPE_F32, "type_v": llama_cpp.GGML_TYPE_F32} if spec.get("decoder") else {}
        llm = llama_cpp.Llama(model_path=str(path), embedding=True, pooling_type=POOLING[pooling], n_ctx=N_CTX,
                              n_batch=N_CTX, n_ubatch=N_CTX, n_threads=THREADS, flash_attn=False, verbose=False, **kv)
        n_embd = llm.n_embd()
        n_out = int(llama_cpp.llama_model_n_cls_out(llm.model)) if pooling == "rank" else n_embd
        for toks in sequences(llm.n_vocab(), spec.get("decoder", False), spec.get("specials", (2, 3))):
            if pooling == "none" and len(toks) > NONE_MAX:
                continue
            v = embed(llama_cpp, llm, toks, pooling, n_out)
            cases.append({"pooling": pooling, "tokens": toks, "rows": int(v.shape[0]), "dim": int(v.shape[1]),
                          "offset": offset})
            offset += v.size
            vecs.append(v.astype("<f4").ravel())
        if spec.get("texts") and pooling == spec["poolings"][0]:
            # Text through llama.cpp's own tokenizer (WordPiece; a decoder's
            # BPE), the test embeds the same text through llmrt's.
            texts = DECODER_TEXTS if spec.get("decoder") else XLMR_TEXTS if "vocab" in spec else TEXTS
            for text in texts:
                toks = llm.tokenize(text.encode(), add_bos=True, special=False)
                v = embed(llama_cpp, llm, toks, pooling, n_out)
                cases.append({"pooling": pooling, "text": text, "tokens": toks, "rows": 1, "dim": int(v.shape[1]),
                              "offset": offset})
                offset += v.size
                vecs.append(v.astype("<f4").ravel())
        if spec.get("pairs") and pooling == "rank":
            tmpl = llama_cpp.llama_model_chat_template(llm.model, b"rerank")
            for query, doc in PAIRS:
                if tmpl:
                    prompt = tmpl.decode().replace("{query}", query).replace("{document}", doc)
                    toks = llm.tokenize(prompt.encode(), add_bos=False, special=True)
                else:
                    toks = rerank_layout(llama_cpp, llm, query, doc)
                v = embed(llama_cpp, llm, toks, pooling, n_out)
                cases.append({"pooling": pooling, "query": query, "document": doc, "tokens": toks, "rows": 1,
                              "dim": int(v.shape[1]), "offset": offset})
                offset += v.size
                vecs.append(v.astype("<f4").ravel())
        del llm
    ref = {
        "shape": spec["shape"],
        "synth_args": synth,
        "model_fnv1a64": fnv1a64(data),
        "model_bytes": len(data),
        "oracle": oracle(llama_cpp),
        "command": COMMAND,
        "n_ctx": N_CTX,
        "kv_type": "f32" if spec.get("decoder") else "none",
        "vectors_file": f"{name}.vec.bin",
        "cases": cases,
    }
    lib_dir = os.environ.get("LLAMA_CPP_LIB_PATH")
    if lib_dir:  # every libllama / libggml this process mapped comes from there
        with open("/proc/self/maps", encoding="utf-8") as f:
            libs = {os.path.realpath(x.split()[-1]) for x in f if "libllama" in x or "libggml" in x}
        strays = [x for x in libs if Path(x).parent != Path(os.path.realpath(lib_dir))]
        if strays or not libs:
            sys.exit(f"llama.cpp libraries not all from {lib_dir}: {sorted(libs)}")
    OUT.mkdir(parents=True, exist_ok=True)
    np.concatenate(vecs).tofile(OUT / ref["vectors_file"])
    (OUT / f"{name}.json").write_text(json.dumps(ref, indent=1) + "\n", encoding="utf-8")
    print(f"{name}: {len(cases)} cases, {offset} floats")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help=f"of {sorted(MODELS)} (default: all)")
    ap.add_argument("--synth", default=str(ROOT / "build" / "bin" / "llm-synth"))
    args = ap.parse_args()
    names = args.names or sorted(MODELS)
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            run(name, MODELS[name], args.synth, tmp)
    # Every model's files in one archive (unpacked at configure time).
    with tarfile.open(OUT / "embeddings.tar.xz", "w:xz") as tar:
        for name in sorted(MODELS):
            for f in (f"{name}.json", f"{name}.vec.bin"):
                if (OUT / f).exists():
                    tar.add(OUT / f, arcname=f)


if __name__ == "__main__":
    sys.exit(main())
