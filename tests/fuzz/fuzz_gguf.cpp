// Fuzzes the GGUF reader and everything that reads a parsed file: every
// metadata accessor on every key, the tensor table, ModelConfig::FromGguf,
// ModelWeights::FromGguf, the tokenizer read from tokenizer.ggml.* and a
// projector file's reader (VisionConfig / VisionWeights: the `clip.*` keys
// and the v.* / mm.* tensors).
// Any input must give a clean result or a status, never a crash, a read out
// of bounds or an allocation the input size does not justify.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "fuzz/common.h"
#include "model/config.h"
#include "model/gguf.h"
#include "model/vision_config.h"
#include "model/vision_weights.h"
#include "model/vocab_gguf.h"
#include "model/weights.h"
#include "tokenizer/tokenizer.h"

using namespace llm;  // NOLINT

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parsed = GgufFile::FromMemory(data, size);
  if (!parsed.ok()) {
    LLM_FUZZ_CHECK(!parsed.status().message().empty(), "an error without a message");
    return 0;
  }
  const GgufFile& f = *parsed.value();
  volatile uint64_t sink = 0;
  for (std::string_view k : f.keys()) {
    LLM_FUZZ_CHECK(f.Has(k) && f.KeyType(k).has_value(), "a listed key is not found");
    if (auto s = f.GetString(k); s.ok()) sink = sink + s->size();
    if (auto v = f.GetInt(k); v.ok()) sink = sink + static_cast<uint64_t>(*v);
    if (auto v = f.GetFloat(k); v.ok()) sink = sink + (*v != 0);
    if (auto v = f.GetBool(k); v.ok()) sink = sink + *v;
    if (auto a = f.GetStringArray(k); a.ok()) {
      for (std::string_view s : *a) sink = sink + (s.empty() ? 0 : static_cast<uint8_t>(s.back()));
    }
    if (auto a = f.GetFloatArray(k); a.ok()) sink = sink + a->size();
    if (auto a = f.GetIntArray(k); a.ok()) sink = sink + a->size();
    (void)f.ArrayElemType(k);
    (void)f.ArrayLength(k);
  }
  for (const GgufTensorInfo& t : f.tensors()) {
    LLM_FUZZ_CHECK(t.offset <= size && t.nbytes <= size - t.offset, "tensor data out of the buffer");
    LLM_FUZZ_CHECK(f.FindTensor(t.name) == &t, "tensor lookup");
    if (t.nbytes > 0) {  // touch the first and last byte: ASan checks the extent
      const auto* p = static_cast<const uint8_t*>(t.data);
      sink = sink + p[0] + p[t.nbytes - 1];
    }
  }

  auto config = ModelConfig::FromGguf(f);
  if (config.ok()) {
    auto weights = ModelWeights::FromGguf(f, config.value());
    if (weights.ok()) LLM_FUZZ_CHECK(weights->layers.size() == static_cast<size_t>(config->n_layer), "layers");
  }

  auto vision = VisionConfig::FromGguf(f);
  if (vision.ok()) {
    VisionConfig vc = *vision;
    auto vw = VisionWeights::FromGguf(f, &vc);
    if (vw.ok()) {
      LLM_FUZZ_CHECK(vw->layers.size() == static_cast<size_t>(vc.n_layer), "vision layers");
      LLM_FUZZ_CHECK(vc.n_embd_out > 0 && vc.n_image_tokens() > 0, "vision sizes");
    }
  }

  auto tok_data = TokenizerDataFromGguf(f);
  if (tok_data.ok()) {
    auto tok = Tokenizer::Create(std::move(tok_data).value());
    if (tok.ok()) {
      const Tokenizer& t = *tok.value();
      auto ids = t.Encode("Hello world <s> once\n\t\xC3\xA9 123", true, true);
      LLM_FUZZ_CHECK(ids.ok(), "encoding valid UTF-8 failed");
      for (int32_t id : *ids) LLM_FUZZ_CHECK(id >= 0 && id < t.n_vocab(), "token id out of range");
      sink = sink + t.Decode(*ids, true, true).size();
    }
  }
  (void)sink;
  return 0;
}
