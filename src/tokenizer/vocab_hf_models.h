// tokenizer.json files whose model is WordPiece or Unigram (BERT-style and
// SentencePiece-style vocabularies); vocab_hf.cpp reads BPE ones and hands
// these over.
#pragma once

#include <string>

#include "tokenizer/tokenizer.h"
#include "util/json.h"

namespace llm {

// root: the parsed tokenizer.json; path only names it in errors.
StatusOr<TokenizerData> TokenizerDataFromHfWordPiece(const Json& root, const std::string& path);
StatusOr<TokenizerData> TokenizerDataFromHfUnigram(const Json& root, const std::string& path);

}  // namespace llm
