// Byte-level BPE pre-tokenizers: split text into the pieces that BPE merges
// never cross. Each `pre` name maps to llama.cpp's list of regexes for it;
// the regexes are implemented by hand as matchers over code points, so
// \p{L}/\p{N}/\p{P}/\s follow our Unicode tables exactly.
//
// A list of regexes is applied in turn: each one splits every piece produced
// so far into its matches and the text between them (kept as pieces too),
// and only sees its own piece ($ and lookahead stop at the piece's end).
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace llm {

class PreTokenizer {
 public:
  // Unknown names are LLM_ERR_UNSUPPORTED.
  static StatusOr<std::unique_ptr<PreTokenizer>> Create(std::string_view pre);

  // Appends the pieces of `text` (valid UTF-8) to *out, as views into text,
  // in order; their concatenation is text.
  void Split(std::string_view text, std::vector<std::string_view>* out) const;

  // A matcher returns the length in code points of the match starting at
  // cps[pos] within the piece [begin, end), or 0 for no match there.
  using Matcher = size_t (*)(const uint32_t* cps, size_t begin, size_t end, size_t pos);

 private:
  std::vector<Matcher> passes_;
};

}  // namespace llm
