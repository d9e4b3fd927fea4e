// SentencePiece's precompiled character map (the normalizer of T5,
// XLM-RoBERTa and other Unigram vocabularies: GGUF
// tokenizer.ggml.precompiled_charsmap, tokenizer.json's Precompiled). It is
// untrusted input, read with every index checked:
//
//   u32 LE trie_bytes | trie: trie_bytes / 4 u32 LE units | normalized strings
//
// The trie is a darts-clone double array over the UTF-8 bytes of the source
// sequences; a leaf's value is the offset of the replacement in the
// normalized strings, which runs up to a NUL (or the blob's end).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace llm {

class CharsMap {
 public:
  // An empty blob is the identity map. Malformed headers fail; a bad index
  // met later inside the trie only ends that lookup (no match).
  static StatusOr<CharsMap> Parse(std::string_view blob);

  bool empty() const { return units_.empty(); }

  // The replacement for a prefix of s: the longest (shortest == false) or
  // the shortest mapped prefix. Returns false when no prefix is mapped.
  bool Match(std::string_view s, bool shortest, size_t* consumed, std::string_view* replacement) const;

  // SentencePiece's normalization: at each position the longest mapped
  // prefix is replaced, else one character is copied (an invalid byte
  // becomes U+FFFD).
  std::string NormalizeLongest(std::string_view s) const;
  // tokenizers' (the Precompiled normalizer's): per grapheme cluster under
  // 6 bytes, the shortest mapped prefix replaces the whole cluster; other
  // clusters are mapped one code point at a time. Clusters follow UAX #29's
  // main rules (charsmap.cpp: marks, joiners, emoji modifiers and ZWJ
  // sequences, regional-indicator pairs, Hangul syllables, CR LF, controls
  // alone); the rare Prepend and SpacingMark exceptions are not modelled.
  std::string NormalizeGraphemes(std::string_view s) const;

 private:
  std::vector<uint32_t> units_;
  std::string normalized_;
};

}  // namespace llm
