// ModelFingerprint: what identifies the weights a KV cache was computed
// with, so a saved or transferred KV stream (src/kvstate/) is refused by a
// context running anything else. Not only the architecture name (all
// llama.cpp's state files check): every tensor's name, type and shape, and
// a hash of weight bytes sampled at fixed offsets of every tensor, which
// tells apart two fine-tunes of one shape. Computed once per loaded model
// (Model::FromGguf / FromHfDir), reading a few hundred bytes per tensor.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/tensor_type.h"

namespace llm {

struct FingerprintTensor {
  std::string name;
  int32_t type = 0;            // TensorType value
  std::vector<int64_t> dims;   // as the file gives them (GGUF ne order; HF: slowest first)
  bool operator==(const FingerprintTensor&) const = default;
};

struct ModelFingerprint {
  std::string arch;                        // general.architecture
  std::vector<FingerprintTensor> tensors;  // in file order
  uint64_t weights_hash = 0;               // over the sampled bytes of every tensor

  // Samples per tensor and their size in bytes (part of the KV format's
  // version: changing either changes every fingerprint).
  static constexpr int kSamples = 4;
  static constexpr uint64_t kSampleBytes = 32;
};

// 64-bit hash of `n` bytes continuing from `h` (FNV-style over 8-byte words
// with a final mix; not cryptographic: it tells apart, it does not
// authenticate). Also the KV stream's per-block checksum.
uint64_t Hash64(const void* data, size_t n, uint64_t h = 0x6A09E667F3BCC908ull);

// Adds one tensor: its identity and kSamples slices of its bytes at offsets
// 0, n/3, 2n/3 and n - kSampleBytes (fewer, overlapping ones for tiny tensors).
void AddFingerprintTensor(ModelFingerprint* fp, std::string name, TensorType type, std::vector<int64_t> dims,
                          const void* data, uint64_t nbytes);

}  // namespace llm
