// Unigram (SentencePiece "UGM": T5, XLM-RoBERTa, BGE-M3, multilingual-E5):
//
//   text ─► precompiled charsmap (charsmap.h) ─► spaces: ' ' → "▁", a "▁"
//        in front, extra spaces dropped as the vocabulary says
//        ─► Viterbi: the segmentation with the highest sum of piece scores;
//           a character no piece starts with costs min score - 10 as
//           [UNK]; adjacent unknowns fuse into one [UNK] (or its bytes as
//           <0xNN> pieces when byte_fallback and they all exist)
//
// Two rule sets (TokenizerData::hf_rules), each exact against its library:
// - SentencePiece's (GGUF; llama.cpp's): the charsmap's longest match at
//   each position; with remove_extra_whitespaces no spaces at either end and
//   none after another; Viterbi over the whole text.
// - tokenizers' (tokenizer.json): the charsmap per grapheme cluster (see
//   CharsMap::NormalizeGraphemes), Replace " {2,}" and Metaspace as written
//   (a "▁" in front unless the text already starts with one), Viterbi per
//   word (Metaspace split: each "▁" starts one).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/charsmap.h"
#include "tokenizer/tokenizer.h"

namespace llm {

class Unigram {
 public:
  // d must outlive the Unigram (token strings are viewed). byte_ids: the
  // Tokenizer's byte -> <0xNN> id table (256 entries, -1 where none).
  static StatusOr<std::unique_ptr<Unigram>> Create(const TokenizerData& d, const int32_t* byte_ids);

  // text: valid UTF-8. Appends the ids.
  void Encode(std::string_view text, std::vector<int32_t>* out) const;
  // The text after normalization and whitespace handling (for tests).
  std::string Normalize(std::string_view text) const;

 private:
  explicit Unigram(const TokenizerData& d) : d_(d) {}
  void Viterbi(std::string_view s, std::vector<int32_t>* out) const;

  const TokenizerData& d_;
  CharsMap charsmap_;
  std::unordered_map<std::string_view, int32_t> ids_;  // pieces Viterbi may use
  size_t max_piece_bytes_ = 0;
  double unk_score_ = 0.0;
  int32_t byte_ids_[256];
};

}  // namespace llm
