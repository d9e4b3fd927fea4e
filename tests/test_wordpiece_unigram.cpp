// WordPiece and Unigram tokenizers against their reference libraries: the
// vocabularies of tests/data/tokenizers/embed/ (make_embed_vocabs.py; each
// as tokenizer.json and as GGUF), 69 fixed and 10,000 random Unicode
// strings each; the precompiled charsmap reader on hostile blobs.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "model/gguf.h"
#include "model/vocab_gguf.h"
#include "support/test_paths.h"
#include "tokenizer/charsmap.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_norm.h"
#include "tokenizer/wordpiece.h"
#include "util/json.h"

namespace llm {
namespace {

std::string EmbedDir() { return test::DataDir() + "/tokenizers/embed"; }

std::unique_ptr<Tokenizer> Load(const std::string& path) {
  StatusOr<TokenizerData> d = Status(LLM_ERR_INTERNAL, "unset");
  if (path.size() > 5 && path.substr(path.size() - 5) == ".gguf") {
    auto f = GgufFile::Open(path);
    EXPECT_TRUE(f.ok()) << path << ": " << f.status().message();
    if (!f.ok()) return nullptr;
    d = TokenizerDataFromGguf(*f.value());
  } else {
    d = TokenizerDataFromHfJson(path);
  }
  EXPECT_TRUE(d.ok()) << path << ": " << d.status().message();
  if (!d.ok()) return nullptr;
  auto t = Tokenizer::Create(std::move(d).value());
  EXPECT_TRUE(t.ok()) << path << ": " << t.status().message();
  return t.ok() ? std::move(t).value() : nullptr;
}

std::vector<int32_t> Ids(const Json& a) {
  std::vector<int32_t> v;
  for (const Json& x : a.array()) v.push_back(static_cast<int32_t>(x.as_int()));
  return v;
}

std::string Show(const std::vector<int32_t>& ids) {
  std::ostringstream s;
  for (size_t i = 0; i < ids.size(); ++i) s << (i ? " " : "") << ids[i];
  return s.str();
}

// ------------------------------------------------------ reference vectors
struct Case {
  const char* file;  // under embed/
  const char* ids;   // the expected ids, under embed/
  TokenizerData::Kind kind;
};

class EmbedVocab : public ::testing::TestWithParam<Case> {};

TEST_P(EmbedVocab, ExactOnFixedAndRandomStrings) {
  const Case& c = GetParam();
  auto tok = Load(EmbedDir() + "/" + c.file);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->data().kind, c.kind);
  auto strings = ParseJson(test::ReadFile(EmbedDir() + "/strings.json"));
  auto expected = ParseJson(test::ReadFile(EmbedDir() + "/" + c.ids));
  ASSERT_TRUE(strings.ok() && expected.ok()) << "unpacked by CMake from tests/data/tokenizers/embed-*.tar.xz";
  const auto& texts = strings->Find("strings")->array();
  const size_t n_fixed = static_cast<size_t>(strings->Find("n_fixed")->as_int());
  const auto& want = expected->Find("ids")->array();
  const auto& want_special = expected->Find("ids_special")->array();
  const Json* decoded = expected->Find("decoded");
  ASSERT_EQ(texts.size(), want.size());
  ASSERT_EQ(want_special.size(), n_fixed);
  ASSERT_GE(texts.size(), n_fixed + 10000);

  size_t exact = 0, shown = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string& text = texts[i].as_string();
    auto ids = tok->Encode(text, false, false);
    ASSERT_TRUE(ids.ok()) << ids.status().message();
    bool ok = ids.value() == Ids(want[i]);
    if (i < n_fixed) {
      auto with = tok->Encode(text, true, false);
      ASSERT_TRUE(with.ok());
      ok = ok && with.value() == Ids(want_special[i]);
    }
    if (decoded) ok = ok && tok->Decode(ids.value(), false, true) == (*decoded)[i].as_string();
    exact += ok;
    if (!ok && shown++ < 10) {
      ADD_FAILURE() << c.file << " #" << i << " [" << text << "]\n  got      " << Show(ids.value())
                    << "\n  expected " << Show(Ids(want[i]))
                    << (decoded ? "\n  decoded  [" + tok->Decode(ids.value(), false, true) + "] expected [" +
                                      (*decoded)[i].as_string() + "]"
                                : std::string());
    }
  }
  std::printf("%s: %zu of %zu strings exact (%zu fixed, %zu random)\n", c.file, exact, texts.size(), n_fixed,
              texts.size() - n_fixed);
  EXPECT_EQ(exact, texts.size());
}

INSTANTIATE_TEST_SUITE_P(
    Vocabularies, EmbedVocab,
    ::testing::Values(Case{"wordpiece-uncased/tokenizer.json", "wordpiece-uncased.ids.json", TokenizerData::Kind::kWordPiece},
                      Case{"wordpiece-uncased.gguf", "wordpiece-uncased.ids.json", TokenizerData::Kind::kWordPiece},
                      Case{"wordpiece-cased/tokenizer.json", "wordpiece-cased.ids.json", TokenizerData::Kind::kWordPiece},
                      Case{"unigram/tokenizer.json", "unigram.ids.json", TokenizerData::Kind::kUnigram},
                      Case{"unigram.gguf", "unigram-gguf.ids.json", TokenizerData::Kind::kUnigram},
                      Case{"unigram-bytes/tokenizer.json", "unigram-bytes.ids.json", TokenizerData::Kind::kUnigram},
                      Case{"unigram-bytes.gguf", "unigram-bytes-gguf.ids.json", TokenizerData::Kind::kUnigram}),
    [](const ::testing::TestParamInfo<Case>& i) {
      std::string n = i.param.file;
      for (char& ch : n) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return n;
    });

// --------------------------------------------------------- special cases
TEST(WordPiece, WordsFollowBertNormalizer) {
  auto tok = Load(EmbedDir() + "/wordpiece-uncased/tokenizer.json");
  ASSERT_NE(tok, nullptr);
  const TokenizerData& d = tok->data();
  EXPECT_TRUE(d.lowercase && d.strip_accents && d.clean_text && d.split_chinese);
  EXPECT_GE(tok->TokenId("\xE2\x96\x81the"), 0);  // "the" stored as llama.cpp does
  WordPiece wp(d);
  using V = std::vector<std::string>;
  EXPECT_EQ(wp.Words("H\xC3\xA9llo, W\xC3\xB6rld!"), (V{"hello", ",", "world", "!"}));
  EXPECT_EQ(wp.Words("a\x01" "b\xE2\x80\x8B" "c\tx\xE4\xB8\xAD" "y"), (V{"abc", "x", "\xE4\xB8\xAD", "y"}));
  EXPECT_EQ(wp.Words("\xC4\xB0"), (V{"i"}));  // İ: NFD I + U+0307, mark dropped
  EXPECT_EQ(wp.Words("$5 a+b"), (V{"$", "5", "a", "+", "b"}));
}

TEST(Unicode, Nfd) {
  EXPECT_EQ(ToNfd({0x00E9}), (std::vector<uint32_t>{'e', 0x0301}));
  EXPECT_EQ(ToNfd({0x1E69}), (std::vector<uint32_t>{'s', 0x0323, 0x0307}));  // recursive
  EXPECT_EQ(ToNfd({'q', 0x0307, 0x0323}), (std::vector<uint32_t>{'q', 0x0323, 0x0307}));  // reordered
  EXPECT_EQ(ToNfd({0xD4DB}), (std::vector<uint32_t>{0x1111, 0x1171, 0x11B6}));  // Hangul
  EXPECT_TRUE(IsNonspacingMark(0x0301));
  EXPECT_FALSE(IsNonspacingMark(0x0903));  // Mc
  EXPECT_EQ(CanonicalCombiningClass(0x0301), 230);
}

TEST(Unigram, SpecialsAndInvalidUtf8) {
  for (const char* f : {"unigram/tokenizer.json", "unigram.gguf", "wordpiece-uncased/tokenizer.json"}) {
    auto tok = Load(EmbedDir() + "/" + f);
    ASSERT_NE(tok, nullptr);
    auto ids = tok->Encode("hello", true, false);
    ASSERT_TRUE(ids.ok());
    EXPECT_EQ(ids.value().front(), tok->bos()) << f;
    EXPECT_EQ(ids.value().back(), tok->eos()) << f;
    for (const char* bad : {"abc\xFF", "\xC3", "\xED\xA0\x80", "\xC0\xAF"}) {
      auto r = tok->Encode(bad, true, false);
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), LLM_ERR_INVALID_UTF8) << f;
    }
  }
}

TEST(Unigram, LongInputsAreLinear) {
  std::string mixed;
  for (int i = 0; i < 2000; ++i) mixed += "Hello, world! 12345 \xC3\xA9t\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87\n\t ";
  const std::string inputs[] = {std::string(100000, ' ') + "1", std::string(100000, 'a'), mixed,
                                std::string(30000, '\x01') + "\xCC\x81"};
  for (const char* f : {"unigram/tokenizer.json", "unigram-bytes.gguf", "wordpiece-uncased.gguf"}) {
    auto tok = Load(EmbedDir() + "/" + f);
    ASSERT_NE(tok, nullptr);
    for (const std::string& in : inputs) {
      auto t0 = std::chrono::steady_clock::now();
      auto ids = tok->Encode(in, false, false);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      ASSERT_TRUE(ids.ok());
      EXPECT_LT(s, 5.0) << f;
    }
  }
}

TEST(EmbedVocabJson, MalformedOrUnsupportedIsAStatus) {
  const auto dir = std::filesystem::temp_directory_path() / ("llm_wpug_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "tokenizer.json").string();
  const char* bad[] = {
      R"({"model": {"type": "WordPiece"}})",
      R"({"model": {"type": "WordPiece", "vocab": {"a": 99999999}}})",
      R"({"model": {"type": "WordPiece", "vocab": {"a": 0}}, "normalizer": {"type": "NFKC"}})",
      R"({"model": {"type": "WordPiece", "vocab": {"a": 0}}, "pre_tokenizer": {"type": "Whitespace"}})",
      R"({"model": {"type": "WordPiece", "vocab": {"a": 0}}, "post_processor": {"type": "BertProcessing", "cls": ["a", -4], "sep": ["a", 0]}})",
      R"({"model": {"type": "Unigram", "vocab": [["a"]]}, "pre_tokenizer": {"type": "Metaspace", "replacement": "▁"}})",
      R"({"model": {"type": "Unigram", "vocab": [["a", 0.5]], "unk_id": 7}, "pre_tokenizer": {"type": "Metaspace", "replacement": "▁"}})",
      R"({"model": {"type": "Unigram", "vocab": [["a", 0.5]]}})",
      R"({"model": {"type": "Unigram", "vocab": [["a", 0.5]]}, "normalizer": {"type": "Precompiled", "precompiled_charsmap": "!!"}, "pre_tokenizer": {"type": "Metaspace", "replacement": "▁"}})",
      R"({"model": {"type": "Unigram", "vocab": [["a", 0.5]]}, "normalizer": {"type": "Precompiled", "precompiled_charsmap": "AQID"}, "pre_tokenizer": {"type": "Metaspace", "replacement": "▁"}})",
      R"({"model": {"type": "Unigram", "vocab": [["a", 0.5]]}, "normalizer": {"type": "Lowercase"}, "pre_tokenizer": {"type": "Metaspace", "replacement": "▁"}})",
  };
  for (const char* b : bad) {
    std::ofstream(path, std::ios::binary) << b;
    auto d = TokenizerDataFromHfJson(path);
    if (d.ok()) {
      auto t = Tokenizer::Create(std::move(d).value());  // the charsmap is read here
      EXPECT_FALSE(t.ok()) << b;
    }
  }
  std::filesystem::remove_all(dir);
}

// ------------------------------------------------------ charsmap reader
// A map with one entry, "a" -> "xy", built by hand in darts-clone's layout:
// root at 0 (offset 1), "a" (0x61) at 1 ^ 0x61 = 0x60 with a leaf, whose
// value unit sits at 0x60 ^ offset.
std::string TinyCharsMap() {
  std::vector<uint32_t> units(0x62, 0);
  units[0] = 1u << 10;  // offset 1
  // Unit for 'a' at 0x60: label 0x61, has_leaf, offset 2 -> value at 0x62.
  units.resize(0x63, 0);
  units[0x60] = 0x61u | (1u << 8) | (2u << 10);
  units[0x62] = 0x80000000u | 0u;  // value 0: offset into the strings
  std::string blob(4, '\0');
  const uint32_t bytes = static_cast<uint32_t>(units.size() * 4);
  std::memcpy(blob.data(), &bytes, 4);
  blob.append(reinterpret_cast<const char*>(units.data()), units.size() * 4);
  blob.append("xy\0", 3);
  return blob;
}

TEST(CharsMap, ReadsAndRefusesHostileBlobs) {
  auto m = CharsMap::Parse(TinyCharsMap());
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->NormalizeLongest("bab"), "bxyb");
  EXPECT_EQ(m->NormalizeGraphemes("bab"), "bxyb");
  EXPECT_TRUE(CharsMap::Parse("").ok());
  for (std::string bad : {std::string("\x01\x00", 2), std::string("\x08\x00\x00\x00\x01\x02\x03\x04", 8),
                          std::string("\x06\x00\x00\x00\x01\x02\x03\x04\x05\x06", 10),
                          std::string("\x00\x00\x00\x00", 4), std::string("\xFF\xFF\xFF\xFF", 4)}) {
    EXPECT_FALSE(CharsMap::Parse(bad).ok());
  }
  // Offsets that point outside the units or the strings: no match, no read.
  std::string blob = TinyCharsMap();
  blob[4 + 0x60 * 4 + 3] = '\x7F';  // huge offset from 'a'
  auto wild = CharsMap::Parse(blob);
  ASSERT_TRUE(wild.ok());
  EXPECT_EQ(wild->NormalizeLongest("a"), "a");
  blob = TinyCharsMap();
  blob[4 + 0x62 * 4] = '\x50';  // value past the strings
  auto past = CharsMap::Parse(blob);
  ASSERT_TRUE(past.ok());
  EXPECT_EQ(past->NormalizeLongest("a"), "a");
}

}  // namespace
}  // namespace llm
