// Shared pieces of the fuzz targets: the fixed vocabularies they tokenize
// with, and a check that aborts (a libFuzzer finding) with a message.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace llm::fuzz {

// Prints `what` and aborts: libFuzzer records the input as a crash.
#define LLM_FUZZ_CHECK(cond, what)                                             \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::fprintf(stderr, "fuzz check failed: %s (%s)\n", #cond, what);       \
      std::abort();                                                            \
    }                                                                          \
  } while (0)

// The repository root (models/, tests/fuzz/corpus).
std::string SourceDir();

// A named tokenizer the targets round-trip text through.
struct NamedTokenizer {
  std::string name;
  std::unique_ptr<Tokenizer> tok;
  bool spm = false;
};

// The SentencePiece vocabulary of the bundled stories260K model, small
// byte-level BPE vocabularies (GPT-2, Llama 3 and Qwen2 pre-tokenizers, with a
// control and a user-defined token), and llama.cpp's GPT-2 and Llama 3
// vocabularies from tests/data/tokenizer-tests.
// Built once; aborts if the bundled model cannot be read.
const std::vector<NamedTokenizer>& Tokenizers();

}  // namespace llm::fuzz
