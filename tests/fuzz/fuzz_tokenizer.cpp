// Fuzzes the tokenizers on fixed vocabularies: encode -> decode must give the
// text back (byte for byte; SentencePiece adds a dummy-prefix space that
// decoding strips), every id must be in the vocabulary, and invalid UTF-8
// must be an INVALID_UTF8 status.
//
// Input: byte 0 picks the vocabulary (modulo their count) and the flags
// (bit 7 add_special, bit 6 parse_special); the rest is the text.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz/common.h"
#include "util/utf8.h"

using namespace llm;  // NOLINT

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto& toks = fuzz::Tokenizers();
  const fuzz::NamedTokenizer& nt = toks[(data[0] & 0x3F) % toks.size()];
  const bool add_special = (data[0] & 0x80) != 0;
  const bool parse_special = (data[0] & 0x40) != 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const Tokenizer& t = *nt.tok;

  auto ids = t.Encode(text, add_special, parse_special);
  if (!IsValidUtf8(text)) {
    LLM_FUZZ_CHECK(!ids.ok() && ids.status().code() == LLM_ERR_INVALID_UTF8, nt.name.c_str());
    return 0;
  }
  LLM_FUZZ_CHECK(ids.ok(), nt.name.c_str());
  for (int32_t id : *ids) LLM_FUZZ_CHECK(id >= 0 && id < t.n_vocab(), nt.name.c_str());
  if (add_special && t.add_bos()) LLM_FUZZ_CHECK(!ids->empty() && ids->front() == t.bos(), "BOS");

  const std::string rendered = t.Decode(*ids, true, nt.spm);
  if (!add_special && !parse_special) {
    // Plain text: control tokens are not recognised, so decoding (without
    // rendering specials) is the exact inverse.
    const std::string back = t.Decode(*ids, false, nt.spm);
    if (back != text) {
      std::fprintf(stderr, "round trip of %zu bytes through %s gave %zu bytes\n", text.size(),
                   nt.name.c_str(), back.size());
      std::abort();
    }
  }
  (void)rendered;
  return 0;
}
