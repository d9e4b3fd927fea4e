// The vocabulary of a GGUF file (its tokenizer.ggml.* metadata) as the plain
// TokenizerData the tokenizer takes. Reading GGUF is model/'s job; the
// tokenizer knows no file format but tokenizer.json (tokenizer/vocab_hf.cpp).
#pragma once

#include "model/gguf.h"
#include "tokenizer/tokenizer.h"
#include "util/status.h"

namespace llm {

// Every array length is checked against the others and the memory the
// vocabulary would take against the file's size before anything is copied.
StatusOr<TokenizerData> TokenizerDataFromGguf(const GgufFile& file);

}  // namespace llm
