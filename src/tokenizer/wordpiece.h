// WordPiece (BERT and its descendants: BGE, E5, MiniLM), as Hugging Face
// `tokenizers` runs it (BertNormalizer, BertPreTokenizer, WordPiece model)
// and llama.cpp's "bert" vocabularies store it:
//
//   text ─► clean (drop controls, whitespace → ' ') ─► space around CJK
//        ─► NFD, drop nonspacing marks (strip_accents) ─► lowercase
//        ─► words: split on whitespace, each punctuation character alone
//        ─► per word: greedy longest match, "▁word" first, then bare
//           continuations; no match anywhere or too long: one [UNK]
//
// Special tokens and [CLS]/[SEP] are the Tokenizer's business.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace llm {

class WordPiece {
 public:
  // d must outlive the WordPiece (its token strings are viewed, not copied).
  explicit WordPiece(const TokenizerData& d);

  // text: valid UTF-8. Appends the ids of its words.
  void Encode(std::string_view text, std::vector<int32_t>* out) const;
  // The words after normalization and pre-tokenization (for tests).
  std::vector<std::string> Words(std::string_view text) const;

 private:
  void EncodeWord(std::string_view word, std::vector<int32_t>* out) const;
  int32_t Find(std::string_view piece) const;

  const TokenizerData& d_;
  std::unordered_map<std::string_view, int32_t> ids_;  // normal and user-defined pieces
  size_t max_piece_bytes_ = 0;
};

}  // namespace llm
