#!/usr/bin/env python3
"""Cross-checks the Unigram (`t5`) references against llama.cpp: the token
ids that tests/data/tokenizers/make_embed_vocabs.py recorded from
SentencePiece for the GGUF Unigram vocabularies (and that test_tokenizer
holds llmrt to) are tokenized again by llama.cpp's UGM tokenizer through
llama-cpp-python, every string without specials and the fixed strings with
them (<s> ... </s>, XLM-RoBERTa's wrapping). An oracle check at data time,
not a CI test.

  cmake -S . -B build   # unpacks tests/data/tokenizers/embed-unigram.tar.xz
  pip install --user llama-cpp-python
  python3 tools/unigram_llamacpp_check.py [NAME ...]   # default: unigram unigram-bytes

Exit status 1 when a vocabulary that should agree does not. On
`unigram-bytes` (a vocabulary with byte pieces: SentencePiece's byte
fallback) llama.cpp 0.3.36 is known to differ: its UGM tokenizer has no
byte fallback and emits <unk> where SentencePiece (and llmrt) emit the
bytes; XLM-RoBERTa's vocabulary has no byte pieces. That count is printed,
not failed.
"""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EMBED = ROOT / "tests" / "data" / "tokenizers" / "embed"
KNOWN_DIFFERENT = {"unigram-bytes"}  # llama.cpp has no byte fallback
_QUIET = None


def check(llama_cpp, name, strings):
    expected = json.loads((EMBED / f"{name}-gguf.ids.json").read_text(encoding="utf-8"))
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(str(EMBED / f"{name}.gguf").encode(), params)
    if not model:
        sys.exit(f"{name}.gguf: llama.cpp could not load it")
    vocab = llama_cpp.llama_model_get_vocab(model)

    def tokenize(text, add_special):
        data = text.encode("utf-8", "surrogatepass")
        buf = (llama_cpp.llama_token * (2 * len(data) + 8))()
        n = llama_cpp.llama_tokenize(vocab, data, len(data), buf, len(buf), add_special, False)
        if n < 0:
            sys.exit(f"{name}: llama_tokenize failed on {text!r}")
        return list(buf[:n])

    plain = sum(tokenize(s, False) != ids for s, ids in zip(strings, expected["ids"]))
    special = sum(tokenize(s, True) != ids for s, ids in zip(strings, expected["ids_special"]))
    llama_cpp.llama_model_free(model)
    print(f"{name}: {plain} of {len(expected['ids'])} strings differ without specials, "
          f"{special} of {len(expected['ids_special'])} with <s> ... </s>")
    return plain == 0 and special == 0


def main():
    import llama_cpp
    global _QUIET  # the callback must outlive every call into llama.cpp
    _QUIET = llama_cpp.llama_log_callback(lambda *_: None)
    llama_cpp.llama_log_set(_QUIET, None)
    llama_cpp.llama_backend_init()
    strings = json.loads((EMBED / "strings.json").read_text(encoding="utf-8"))["strings"]
    ok = True
    for name in sys.argv[1:] or ["unigram", "unigram-bytes"]:
        same = check(llama_cpp, name, strings)
        if not same and name not in KNOWN_DIFFERENT:
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
