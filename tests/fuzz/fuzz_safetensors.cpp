// Fuzzes the safetensors reader (model/safetensors.h): any input must give
// a clean result or a status with a message, never a crash or a read outside
// the buffer. Every accepted tensor's extent is touched at both ends so
// ASan checks it, and tensors are checked pairwise not to overlap. An
// accepted file is then read as the weights of a tiny Qwen2 checkpoint
// (ModelWeights::FromSafetensors), whose shape checks must hold too.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "fuzz/common.h"
#include "model/config.h"
#include "model/safetensors.h"
#include "model/weights.h"

using namespace llm;  // NOLINT

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parsed = SafetensorsFile::FromMemory(data, size);
  if (!parsed.ok()) {
    LLM_FUZZ_CHECK(!parsed.status().message().empty(), "an error without a message");
    return 0;
  }
  const SafetensorsFile& f = *parsed.value();
  volatile uint64_t sink = 0;
  std::vector<std::pair<const uint8_t*, const uint8_t*>> extents;
  for (const SafetensorsTensor& t : f.tensors()) {
    LLM_FUZZ_CHECK(f.Find(t.name) == &t, "tensor lookup");
    if (t.nbytes == 0) continue;
    const auto* p = static_cast<const uint8_t*>(t.data);
    LLM_FUZZ_CHECK(p >= data + 8 && t.nbytes <= static_cast<uint64_t>(data + size - p), "tensor out of the buffer");
    sink = sink + p[0] + p[t.nbytes - 1];
    extents.emplace_back(p, p + t.nbytes);
  }
  std::sort(extents.begin(), extents.end());
  for (size_t i = 1; i < extents.size(); ++i)
    LLM_FUZZ_CHECK(extents[i].first >= extents[i - 1].second, "overlapping tensors accepted");
  (void)sink;

  ModelConfig c;
  c.arch = "qwen2";
  c.arch_kind = ModelArch::kQwen2;
  c.n_vocab = 4, c.n_embd = 4, c.n_layer = 1, c.n_head = 2, c.n_head_kv = 1, c.head_dim = 2, c.n_ff = 4;
  c.rope_dim = 2, c.qkv_bias = true, c.tied_embeddings = (size & 1) != 0;
  auto set = SafetensorsSet::FromFile(std::move(parsed).value());
  std::vector<std::vector<float>> owned;
  auto w = ModelWeights::FromSafetensors(*set, c, &owned);
  if (!w.ok()) LLM_FUZZ_CHECK(!w.status().message().empty(), "a weights error without a message");
  return 0;
}
