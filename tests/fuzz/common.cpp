#include "fuzz/common.h"

#include "model/gguf.h"
#include "model/vocab_gguf.h"

namespace llm::fuzz {
namespace {

// Byte-level BPE over GPT-2's byte alphabet with a few merges, built in code
// so the target needs no file.
TokenizerData SmallBpe(const std::string& pre) {
  TokenizerData d;
  d.kind = TokenizerData::Kind::kBpe;
  d.pre = pre;
  d.add_space_prefix = false;
  // GPT-2's alphabet: printable Latin-1 bytes are themselves, the other 68
  // bytes are U+0100.. in byte order.
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    uint32_t cp = printable ? uint32_t(b) : next++;
    std::string s;
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else {
      s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
    d.tokens.push_back(s);
  }
  const char* merges[][2] = {{"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}, {"i", "n"}, {"Ġ", "a"},
                             {"o", "n"}, {"e", "r"}, {"Ġ", "s"},   {"a", "n"}, {"Ġa", "n"},
                             {"Ġan", "d"}, {"1", "2"}, {"12", "3"}, {"Ċ", "Ċ"}, {"Ġ", "Ġ"}};
  for (auto& m : merges) {
    d.merges.push_back(std::string(m[0]) + " " + m[1]);
    d.tokens.push_back(std::string(m[0]) + m[1]);
  }
  d.token_types.assign(d.tokens.size(), kTokenNormal);
  d.tokens.push_back("<|endoftext|>");
  d.token_types.push_back(kTokenControl);
  d.tokens.push_back("<think>");
  d.token_types.push_back(kTokenUserDefined);
  d.eos = static_cast<int32_t>(d.tokens.size()) - 2;
  d.bos = d.eos;
  d.add_bos = pre == "llama-bpe";
  d.eog.push_back(d.eos);
  return d;
}

void Add(std::vector<NamedTokenizer>* out, std::string name, StatusOr<TokenizerData> data, bool spm) {
  if (!data.ok()) {
    std::fprintf(stderr, "fuzz: vocabulary %s: %s\n", name.c_str(), data.status().message().c_str());
    std::abort();
  }
  auto tok = Tokenizer::Create(std::move(data).value());
  if (!tok.ok()) {
    std::fprintf(stderr, "fuzz: vocabulary %s: %s\n", name.c_str(), tok.status().message().c_str());
    std::abort();
  }
  out->push_back(NamedTokenizer{std::move(name), std::move(tok).value(), spm});
}

StatusOr<TokenizerData> FromGgufFile(const std::string& path) {
  LLM_ASSIGN_OR_RETURN(auto f, GgufFile::Open(path));
  return TokenizerDataFromGguf(*f);
}

}  // namespace

std::string SourceDir() {
  if (const char* d = std::getenv("LLM_SOURCE_DIR")) return d;
  return LLM_SOURCE_DIR;
}

const std::vector<NamedTokenizer>& Tokenizers() {
  static const std::vector<NamedTokenizer> all = [] {
    std::vector<NamedTokenizer> v;
    Add(&v, "stories260K", FromGgufFile(SourceDir() + "/models/stories260K-f32.gguf"), true);
    for (const char* pre : {"gpt-2", "llama-bpe", "qwen2"}) Add(&v, std::string("bpe-") + pre, SmallBpe(pre), false);
    for (const char* f : {"ggml-vocab-gpt-2.gguf", "ggml-vocab-llama-bpe.gguf"}) {
      const std::string path = SourceDir() + "/tests/data/tokenizer-tests/" + f;
      Add(&v, f, FromGgufFile(path), false);
    }
    return v;
  }();
  return all;
}

}  // namespace llm::fuzz
