// Fuzzes the JSON parser, ModelConfig::FromHfConfig and the tokenizer.json loader. The loader reads
// files, so each input is written to a private temporary folder:
// everything before the first NUL byte is tokenizer.json, everything after
// it (if there is a NUL) is tokenizer_config.json beside it. A loaded
// vocabulary is built into a Tokenizer and round-trips a short text.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "fuzz/common.h"
#include "model/config.h"
#include "tokenizer/tokenizer.h"
#include "util/json.h"

using namespace llm;  // NOLINT

namespace {

// A folder of this process's own, removed at exit.
struct TempDir {
  std::string path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "llm_fuzz_hf_XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) {
      std::perror("mkdtemp");
      std::abort();
    }
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

const std::string& Dir() {
  static const TempDir dir;
  return dir.path;
}

void Write(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t nul = all.find('\0');
  const std::string_view tok_json = all.substr(0, nul);

  // The parser on its own (any depth limit, any input).
  auto j = ParseJson(tok_json, 64);
  if (!j.ok()) LLM_FUZZ_CHECK(!j.status().message().empty(), "JSON error without a message");
  // The same text as a config.json (every family's keys: Gemma 2's caps and
  // scalar, Phi-3's partial_rotary_factor, rope_scaling...).
  if (j.ok()) {
    auto c = ModelConfig::FromHfConfig(*j);
    if (!c.ok()) LLM_FUZZ_CHECK(!c.status().message().empty(), "config.json error without a message");
  }

  const std::string tok_path = Dir() + "/tokenizer.json";
  const std::string cfg_path = Dir() + "/tokenizer_config.json";
  Write(tok_path, tok_json);
  if (nul != std::string_view::npos) {
    Write(cfg_path, all.substr(nul + 1));
  } else {
    std::remove(cfg_path.c_str());
  }
  auto d = TokenizerDataFromHfJson(tok_path);
  if (!d.ok()) {
    LLM_FUZZ_CHECK(!d.status().message().empty(), "loader error without a message");
    return 0;
  }
  auto tok = Tokenizer::Create(std::move(d).value());
  if (!tok.ok()) return 0;
  const Tokenizer& t = *tok.value();
  const std::string text = "Hello, world! 123 <think> caf\xC3\xA9\n\n  x";
  auto ids = t.Encode(text, true, true);
  LLM_FUZZ_CHECK(ids.ok(), "encoding valid UTF-8 failed");
  for (int32_t id : *ids) LLM_FUZZ_CHECK(id >= 0 && id < t.n_vocab(), "token id out of range");
  (void)t.Decode(*ids, true, false);
  return 0;
}
