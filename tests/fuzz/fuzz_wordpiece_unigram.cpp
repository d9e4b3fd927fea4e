// Fuzzes the WordPiece and Unigram tokenizers and the precompiled charsmap
// reader. Input: byte 0 picks the case (modulo their count), the rest is
// the text (or, for the charsmap case, the blob).
//
// - Every id is in the vocabulary; invalid UTF-8 is an INVALID_UTF8 status.
// - WordPiece: encoding what the ids decode to gives the same ids (when no
//   [UNK] came out): normalization and word splitting are idempotent.
// - Unigram: the pieces decode to exactly the normalized text (when no
//   [UNK] came out): Viterbi covers every byte once.
// - A charsmap blob either fails to parse or normalizes any text without
//   reading outside itself.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/common.h"
#include "model/gguf.h"
#include "model/vocab_gguf.h"
#include "tokenizer/charsmap.h"
#include "tokenizer/unigram.h"
#include "util/utf8.h"

using namespace llm;  // NOLINT

namespace {

struct Vocab {
  std::string name;
  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<Unigram> unigram;  // Unigram vocabularies: its normalizer
  int32_t bytes[256];
};

std::unique_ptr<Tokenizer> Load(const std::string& path) {
  StatusOr<TokenizerData> d = Status(LLM_ERR_INTERNAL, "unset");
  if (path.size() > 5 && path.substr(path.size() - 5) == ".gguf") {
    auto f = GgufFile::Open(path);
    if (f.ok()) d = TokenizerDataFromGguf(*f.value());
    else d = f.status();
  } else {
    d = TokenizerDataFromHfJson(path);
  }
  auto t = d.ok() ? Tokenizer::Create(std::move(d).value()) : StatusOr<std::unique_ptr<Tokenizer>>(d.status());
  if (!t.ok()) {
    std::fprintf(stderr, "fuzz: %s: %s\n", path.c_str(), t.status().message().c_str());
    std::abort();
  }
  return std::move(t).value();
}

const std::vector<Vocab>& Vocabs() {
  static const std::vector<Vocab> all = [] {
    const std::string data = fuzz::SourceDir() + "/tests/data/";
    std::vector<Vocab> v;
    for (const char* f : {"tokenizer-tests/ggml-vocab-bert-bge.gguf", "tokenizers/embed/wordpiece-cased/tokenizer.json",
                          "tokenizers/embed/unigram/tokenizer.json", "tokenizers/embed/unigram.gguf",
                          "tokenizers/embed/unigram-bytes.gguf"}) {
      Vocab x;
      x.name = f;
      x.tok = Load(data + f);
      for (int b = 0; b < 256; ++b) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "<0x%02X>", b);
        x.bytes[b] = x.tok->TokenId(buf);
      }
      if (x.tok->data().kind == TokenizerData::Kind::kUnigram) x.unigram = Unigram::Create(x.tok->data(), x.bytes).value();
      v.push_back(std::move(x));
    }
    return v;
  }();
  return all;
}

std::string Spaces(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.substr(i, 3) == "\xE2\x96\x81") {
      out.push_back(' ');
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto& vocabs = Vocabs();
  const size_t pick = data[0] % (vocabs.size() + 1);
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  if (pick == vocabs.size()) {  // the charsmap reader
    auto m = CharsMap::Parse(text);
    if (!m.ok()) return 0;
    const std::string sample =
        "A\xEF\xBC\xA1\xC3\xA9" "e\xCC\x81 \xEF\xAC\x81\xE2\x91\xA0\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD";
    (void)m->NormalizeLongest(sample);
    (void)m->NormalizeGraphemes(sample);
    (void)m->NormalizeLongest(text.substr(0, 256));
    (void)m->NormalizeGraphemes(text.substr(0, 256));
    return 0;
  }

  const Vocab& v = vocabs[pick];
  const Tokenizer& t = *v.tok;
  auto ids = t.Encode(text, false, false);
  if (!IsValidUtf8(text)) {
    LLM_FUZZ_CHECK(!ids.ok() && ids.status().code() == LLM_ERR_INVALID_UTF8, v.name.c_str());
    return 0;
  }
  LLM_FUZZ_CHECK(ids.ok(), v.name.c_str());
  bool unk = false;
  for (int32_t id : *ids) {
    LLM_FUZZ_CHECK(id >= 0 && id < t.n_vocab(), v.name.c_str());
    unk = unk || id == t.data().unk;
  }
  if (unk) return 0;
  const std::string back = t.Decode(*ids, false, false);
  if (t.data().kind == TokenizerData::Kind::kWordPiece) {
    auto again = t.Encode(back, false, false);
    LLM_FUZZ_CHECK(again.ok() && again.value() == ids.value(), "WordPiece: encode(decode(ids)) != ids");
  } else {
    LLM_FUZZ_CHECK(back == Spaces(v.unigram->Normalize(text)), "Unigram: pieces do not cover the normalized text");
  }
  return 0;
}
