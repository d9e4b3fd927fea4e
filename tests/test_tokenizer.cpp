// Tokenizer against llama.cpp's outputs: its vocabulary test pairs, the
// stories260K golden vectors, and the Llama 3 / Qwen3 tokenizer.json vectors.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "model/gguf.h"
#include "model/vocab_gguf.h"
#include "support/test_paths.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "util/json.h"

namespace llm {
namespace {

std::unique_ptr<Tokenizer> LoadGgufTokenizer(const std::string& path) {
  auto f = GgufFile::Open(path);
  EXPECT_TRUE(f.ok()) << path << ": " << f.status().message();
  if (!f.ok()) return nullptr;
  auto d = TokenizerDataFromGguf(*f.value());
  EXPECT_TRUE(d.ok()) << path << ": " << d.status().message();
  if (!d.ok()) return nullptr;
  auto t = Tokenizer::Create(std::move(d).value());
  EXPECT_TRUE(t.ok()) << path << ": " << t.status().message();
  if (!t.ok()) return nullptr;
  return std::move(t).value();
}

std::string IdsToString(const std::vector<int32_t>& ids) {
  std::ostringstream s;
  for (size_t i = 0; i < ids.size(); ++i) s << (i ? " " : "") << ids[i];
  return s.str();
}

// The .inp file: strings each followed by "\n__ggml_vocab_test__\n".
std::vector<std::string> SplitInp(const std::string& inp) {
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    const size_t hit = inp.find(sep, pos);
    if (hit == std::string::npos) break;
    out.push_back(inp.substr(pos, hit - pos));
    pos = hit + sep.size();
  }
  return out;
}

std::vector<std::vector<int32_t>> ParseOut(const std::string& out) {
  std::vector<std::vector<int32_t>> rows;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream nums(line);
    std::vector<int32_t> ids;
    int32_t v;
    while (nums >> v) ids.push_back(v);
    rows.push_back(ids);
  }
  return rows;
}

void ExpectRoundTrip(const Tokenizer& tok, const std::string& text, const std::string& label) {
  auto ids = tok.Encode(text, false, false);
  ASSERT_TRUE(ids.ok());
  const bool spm = tok.data().kind == TokenizerData::Kind::kSpm;
  EXPECT_EQ(tok.Decode(ids.value(), false, spm && tok.data().add_space_prefix), text) << label;
}

// ------------------------------------------------------------ unit tests
TEST(Unicode, Classes) {
  EXPECT_EQ(GetUnicodeClass('a'), UnicodeClass::kLetter);
  EXPECT_EQ(GetUnicodeClass(0x00E9), UnicodeClass::kLetter);  // é
  EXPECT_EQ(GetUnicodeClass(0x4E2D), UnicodeClass::kLetter);  // 中
  EXPECT_EQ(GetUnicodeClass('7'), UnicodeClass::kNumber);
  EXPECT_EQ(GetUnicodeClass(0x0663), UnicodeClass::kNumber);  // Arabic-Indic 3
  EXPECT_EQ(GetUnicodeClass(0x2167), UnicodeClass::kNumber);  // Roman numeral 8 (Nl)
  EXPECT_EQ(GetUnicodeClass('!'), UnicodeClass::kPunctuation);
  EXPECT_EQ(GetUnicodeClass('$'), UnicodeClass::kSymbol);
  EXPECT_EQ(GetUnicodeClass(0x1F600), UnicodeClass::kSymbol);  // emoji
  EXPECT_EQ(GetUnicodeClass(0x0301), UnicodeClass::kMark);
  EXPECT_EQ(GetUnicodeClass(' '), UnicodeClass::kSeparator);
  EXPECT_EQ(GetUnicodeClass('\n'), UnicodeClass::kOther);
  EXPECT_EQ(GetUnicodeClass(0x10FFFF), UnicodeClass::kOther);
  EXPECT_EQ(GetUnicodeClass(0xE000), UnicodeClass::kOther);  // private use
  EXPECT_TRUE(IsUnicodeWhitespace(' '));
  EXPECT_TRUE(IsUnicodeWhitespace('\t'));
  EXPECT_TRUE(IsUnicodeWhitespace(0x3000));
  EXPECT_TRUE(IsUnicodeWhitespace(0x00A0));
  EXPECT_FALSE(IsUnicodeWhitespace('a'));
  EXPECT_FALSE(IsUnicodeWhitespace(0x200B));  // zero width space is Cf
  EXPECT_EQ(UnicodeToLower('A'), uint32_t('a'));
  EXPECT_EQ(UnicodeToLower(0x00C9), 0x00E9u);
  EXPECT_EQ(UnicodeToLower(0x0416), 0x0436u);  // Ж -> ж
  EXPECT_EQ(UnicodeToLower('a'), uint32_t('a'));
}

std::vector<std::string> Pieces(const PreTokenizer& p, std::string_view s) {
  std::vector<std::string_view> v;
  p.Split(s, &v);
  return {v.begin(), v.end()};
}

TEST(PreTokenizer, Gpt2AndLlama3) {
  auto gpt2 = PreTokenizer::Create("gpt-2");
  ASSERT_TRUE(gpt2.ok());
  using V = std::vector<std::string>;
  EXPECT_EQ(Pieces(*gpt2.value(), "Hello world's  end!!\n"),
            (V{"Hello", " world", "'s", " ", " end", "!!", "\n"}));
  auto l3 = PreTokenizer::Create("llama-bpe");
  ASSERT_TRUE(l3.ok());
  EXPECT_EQ(Pieces(*l3.value(), "I'M 12345 ok\n\n  x"),
            (V{"I", "'M", " ", "123", "45", " ok", "\n\n", " ", " x"}));
  EXPECT_FALSE(PreTokenizer::Create("no-such-pre").ok());
}

TEST(Tokenizer, CreateValidates) {
  TokenizerData d;
  EXPECT_FALSE(Tokenizer::Create(d).ok());  // empty
  d.tokens = {"a", "b"};
  d.bos = 5;
  EXPECT_FALSE(Tokenizer::Create(d).ok());  // bos out of range
  d.bos = -1;
  d.scores = {0.0f};
  EXPECT_FALSE(Tokenizer::Create(d).ok());  // size mismatch
  d.scores.clear();
  d.kind = TokenizerData::Kind::kBpe;
  d.pre = "unknown-pre";
  auto t = Tokenizer::Create(d);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), LLM_ERR_UNSUPPORTED);
}

// ------------------------------------------------- llama.cpp vocab tests
TEST(Tokenizer, LlamaCppVocabularies) {
  const std::string dir = test::DataDir() + "/tokenizer-tests";
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir << " missing";
  int vocabs = 0, strings = 0, failures = 0;
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string p = e.path().string();
    if (p.size() > 5 && p.substr(p.size() - 5) == ".gguf") names.push_back(p);
  }
  std::sort(names.begin(), names.end());
  for (const std::string& gguf : names) {
    const std::string inp = test::ReadFile(gguf + ".inp");
    const std::string outp = test::ReadFile(gguf + ".out");
    if (inp.empty() || outp.empty()) continue;
    auto f = GgufFile::Open(gguf);
    ASSERT_TRUE(f.ok()) << gguf;
    auto model = f.value()->GetString("tokenizer.ggml.model");
    if (!model.ok() || (model.value() != "llama" && model.value() != "gpt2" && model.value() != "bert")) {
      continue;
    }
    auto tok = LoadGgufTokenizer(gguf);
    ASSERT_NE(tok, nullptr);
    const auto texts = SplitInp(inp);
    const auto expected = ParseOut(outp);
    ASSERT_EQ(texts.size(), expected.size()) << gguf;
    ++vocabs;
    for (size_t i = 0; i < texts.size(); ++i) {
      auto ids = tok->Encode(texts[i], false, false);
      ASSERT_TRUE(ids.ok());
      ++strings;
      if (ids.value() != expected[i]) {
        ++failures;
        ADD_FAILURE() << std::filesystem::path(gguf).filename() << " #" << i << " text=[" << texts[i]
                      << "]\n  got      " << IdsToString(ids.value()) << "\n  expected "
                      << IdsToString(expected[i]);
      }
      // WordPiece lower-cases and drops spaces: no round trip.
      if (tok->data().kind != TokenizerData::Kind::kWordPiece) {
        ExpectRoundTrip(*tok, texts[i], gguf + " #" + std::to_string(i));
      }
    }
  }
  std::printf("llama.cpp vocab vectors: %d vocabularies, %d strings, %d mismatches\n", vocabs,
              strings, failures);
  EXPECT_GE(vocabs, 12);
}

// ------------------------------------------------- stories260K (tok512)
TEST(Tokenizer, Stories260KGolden) {
  auto tok = LoadGgufTokenizer(test::RepoDir() + "/models/stories260K-f32.gguf");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->data().kind, TokenizerData::Kind::kSpm);
  auto j = ParseJson(test::ReadFile(test::DataDir() + "/llama.cpp/stories260K-tokenize.json"));
  ASSERT_TRUE(j.ok()) << j.status().message();
  auto ids_of = [](const Json& a) {
    std::vector<int32_t> v;
    for (const Json& x : a.array()) v.push_back(static_cast<int32_t>(x.as_int()));
    return v;
  };
  int n = 0;
  for (const Json& c : j->array()) {
    const std::string& text = c.Find("text")->as_string();
    struct Variant {
      const char* key;
      bool bos, special;
    } variants[] = {{"ids_with_bos", true, false},
                    {"ids_without_bos", false, false},
                    {"ids_with_bos_parse_special", true, true},
                    {"ids_without_bos_parse_special", false, true}};
    for (const Variant& v : variants) {
      auto ids = tok->Encode(text, v.bos, v.special);
      ASSERT_TRUE(ids.ok());
      EXPECT_EQ(IdsToString(ids.value()), IdsToString(ids_of(*c.Find(v.key))))
          << v.key << " text=[" << text << "]";
      ++n;
    }
    ExpectRoundTrip(*tok, text, "stories260K [" + text + "]");
  }
  EXPECT_EQ(n, 160);
}

// ----------------------------------------------- tokenizer.json (HF) files
class HfTokenizer : public ::testing::TestWithParam<const char*> {};

TEST_P(HfTokenizer, Vectors) {
  const std::string dir = test::DataDir() + "/tokenizers/" + GetParam();
  auto d = TokenizerDataFromHfJson(dir + "/tokenizer.json");
  ASSERT_TRUE(d.ok()) << d.status().message();
  auto tok = Tokenizer::Create(std::move(d).value());
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  const Tokenizer& t = *tok.value();
  auto j = ParseJson(test::ReadFile(dir + "/vectors.json"));
  ASSERT_TRUE(j.ok());
  ASSERT_EQ(j->size(), 46u);
  for (const Json& c : j->array()) {
    const std::string& text = c.Find("text")->as_string();
    std::vector<int32_t> expected;
    for (const Json& x : c.Find("ids")->array()) expected.push_back(static_cast<int32_t>(x.as_int()));
    auto ids = t.Encode(text, false, false);
    ASSERT_TRUE(ids.ok());
    EXPECT_EQ(IdsToString(ids.value()), IdsToString(expected)) << "text=[" << text << "]";
    ExpectRoundTrip(t, text, text);
  }
  if (std::string(GetParam()) == "llama3") {
    EXPECT_EQ(t.bos(), 128000);
    EXPECT_TRUE(t.add_bos());
    EXPECT_TRUE(t.IsEog(128009));  // <|eot_id|>
    EXPECT_TRUE(t.IsControl(128000));
    auto ids = t.Encode("<|begin_of_text|>Hi", true, true);
    ASSERT_TRUE(ids.ok());
    EXPECT_EQ(ids.value().front(), 128000);
    EXPECT_EQ(ids.value()[1], 128000);
    EXPECT_EQ(t.Decode(ids.value(), true, false), "<|begin_of_text|><|begin_of_text|>Hi");
    EXPECT_EQ(t.Decode(ids.value(), false, false), "Hi");
  } else {
    EXPECT_TRUE(t.data().normalize_nfc);
    EXPECT_TRUE(t.IsEog(151645));  // <|im_end|>
    // <think> is a user-defined token: split out even without parse_special;
    // <|im_start|> is a control token: plain text unless parse_special.
    auto plain = t.Encode("<think>x<|im_start|>", false, false);
    ASSERT_TRUE(plain.ok());
    EXPECT_EQ(plain.value().front(), t.TokenId("<think>"));
    EXPECT_GT(plain.value().size(), 3u);
    auto special = t.Encode("<think>x<|im_start|>", false, true);
    ASSERT_TRUE(special.ok());
    EXPECT_EQ(special.value().back(), 151644);
  }
}

INSTANTIATE_TEST_SUITE_P(LlamaAndQwen, HfTokenizer, ::testing::Values("llama3", "qwen3"));

// ------------------------------------------------------- errors, threads
TEST(Tokenizer, InvalidUtf8IsRejected) {
  for (const std::string& path : {test::RepoDir() + "/models/stories260K-f32.gguf",
                                 test::DataDir() + "/tokenizer-tests/ggml-vocab-bert-bge.gguf"}) {
    auto tok = LoadGgufTokenizer(path);
    ASSERT_NE(tok, nullptr);
    for (const char* bad : {"abc\xFF", "\xC3", "\xED\xA0\x80", "\xC0\xAF"}) {
      auto ids = tok->Encode(bad, true, false);
      ASSERT_FALSE(ids.ok());
      EXPECT_EQ(ids.status().code(), LLM_ERR_INVALID_UTF8) << path;
    }
  }
}

// BERT (llama.cpp's bge vocabulary): [CLS] text [SEP], [UNK] for a word no
// piece covers or one past 100 characters, pieces decode with their spaces.
TEST(WordPiece, BgeSpecials) {
  auto tok = LoadGgufTokenizer(test::DataDir() + "/tokenizer-tests/ggml-vocab-bert-bge.gguf");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->data().kind, TokenizerData::Kind::kWordPiece);
  auto ids = tok->Encode("Hello world", true, false);
  ASSERT_TRUE(ids.ok());
  ASSERT_EQ(ids.value().size(), 4u);
  EXPECT_EQ(ids.value().front(), 101);  // [CLS]
  EXPECT_EQ(ids.value().back(), 102);   // [SEP]
  EXPECT_EQ(tok->Decode(ids.value(), false, true), "hello world");
  EXPECT_EQ(tok->Decode(ids.value(), true, false), "[CLS] hello world[SEP]");
  // "[SEP]" in the text: plain punctuation and letters unless parse_special.
  EXPECT_EQ(tok->Encode("[SEP]", false, true).value(), std::vector<int32_t>{102});
  EXPECT_GT(tok->Encode("[SEP]", false, false).value().size(), 1u);
  EXPECT_EQ(tok->Encode(std::string(101, 'a'), false, false).value(), std::vector<int32_t>{100});
  EXPECT_NE(tok->Encode(std::string(100, 'a'), false, false).value(), std::vector<int32_t>{100});
}

TEST(Tokenizer, MalformedTokenizerJson) {
  const auto dir = std::filesystem::temp_directory_path() / ("llm_tok_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "tokenizer.json").string();
  const char* bad[] = {
      "",
      "{",
      "[]",
      R"({"model": {"type": "BPE"}})",
      R"({"model": {"type": "BPE", "vocab": {"a": -1}, "merges": []}, "pre_tokenizer": {"type": "ByteLevel"}})",
      R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [3]}, "pre_tokenizer": {"type": "ByteLevel"}})",
      R"({"model": {"type": "Unigram", "vocab": []}})",
      R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": "Metaspace"}})",
  };
  for (const char* b : bad) {
    std::ofstream(path, std::ios::binary) << b;
    auto d = TokenizerDataFromHfJson(path);
    EXPECT_FALSE(d.ok()) << b;
  }
  EXPECT_FALSE(TokenizerDataFromHfJson((dir / "missing.json").string()).ok());
  std::filesystem::remove_all(dir);
}

// Long and degenerate inputs stay fast (no quadratic rescans) for every
// pre-tokenizer.
TEST(Tokenizer, LongInputsAreLinear) {
  std::string mixed;
  for (int i = 0; i < 2000; ++i) mixed += "Hello, world! 12345 \xC3\xA9t\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87\n\t ";
  const std::string inputs[] = {std::string(100000, ' ') + "1", std::string(100000, 'a'),
                                std::string(50000, '\n') + "x", mixed};
  for (const char* name : {"llama-spm", "deepseek-llm", "deepseek-coder", "falcon", "llama-bpe"}) {
    auto tok = LoadGgufTokenizer(test::DataDir() + "/tokenizer-tests/ggml-vocab-" + name + ".gguf");
    ASSERT_NE(tok, nullptr);
    for (const std::string& in : inputs) {
      auto t0 = std::chrono::steady_clock::now();
      auto ids = tok->Encode(in, false, false);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      ASSERT_TRUE(ids.ok());
      EXPECT_LT(s, 5.0) << name;  // generous: sanitizer builds are slow
      const bool spm = tok->data().kind == TokenizerData::Kind::kSpm;
      EXPECT_EQ(tok->Decode(ids.value(), false, spm), in) << name;
    }
  }
}

TEST(Tokenizer, ConcurrentEncode) {
  auto d = TokenizerDataFromHfJson(test::DataDir() + "/tokenizers/llama3/tokenizer.json");
  ASSERT_TRUE(d.ok());
  auto tok = Tokenizer::Create(std::move(d).value());
  ASSERT_TRUE(tok.ok());
  const Tokenizer& t = *tok.value();
  const std::string text = "Once upon a time, 12345 ünïcödé 中文 🦙 can't stop\n\n  ok";
  const auto want = t.Encode(text, true, true).value();
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      for (int k = 0; k < 200; ++k) {
        if (t.Encode(text, true, true).value() != want) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace llm
