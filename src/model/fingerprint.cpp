#include "model/fingerprint.h"

#include <algorithm>
#include <cstring>

namespace llm {

uint64_t Hash64(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const uint8_t*>(data);
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  auto mix = [](uint64_t x) {
    x ^= x >> 32;
    x *= 0xD6E8FEB86659FD93ull;
    return x ^ (x >> 32);
  };
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * kMul;
    h ^= h >> 29;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, p + i, n - i);
  h = (h ^ tail ^ (static_cast<uint64_t>(n - i) << 56)) * kMul;
  return mix(h ^ n);
}

void AddFingerprintTensor(ModelFingerprint* fp, std::string name, TensorType type, std::vector<int64_t> dims,
                          const void* data, uint64_t nbytes) {
  uint64_t h = Hash64(name.data(), name.size(), fp->weights_hash);
  if (data != nullptr && nbytes > 0) {
    const uint64_t len = std::min(nbytes, ModelFingerprint::kSampleBytes);
    const uint64_t last = nbytes - len;
    const uint64_t offsets[ModelFingerprint::kSamples] = {0, last / 3, last / 3 * 2, last};
    for (uint64_t off : offsets) h = Hash64(static_cast<const uint8_t*>(data) + off, len, h);
  }
  fp->weights_hash = h;
  fp->tensors.push_back({std::move(name), static_cast<int32_t>(type), std::move(dims)});
}

}  // namespace llm
