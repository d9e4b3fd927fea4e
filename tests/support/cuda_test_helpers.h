// Helpers of the CUDA backend tests (test_cuda_backend, test_cuda_graphs):
// device detection, the synthesised `tiny` model, logit comparisons.
// Header-only: only the tests that include it link the synthesiser.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/model.h"
#include "synth_model.h"

namespace llm::test {

inline bool HaveDevice() { return CudaDeviceCount() > 0; }

#define SKIP_WITHOUT_DEVICE()                                                               \
  do {                                                                                      \
    if (!::llm::test::HaveDevice())                                                         \
      GTEST_SKIP() << "no usable CUDA device (or a build without CUDA): CUDA backend untested here"; \
  } while (0)

// |a - ref| / |ref| over whole vectors; NaN in a gives NaN (fails every bound).
inline double RelL2(const std::vector<float>& a, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (static_cast<double>(a[i]) - ref[i]) * (static_cast<double>(a[i]) - ref[i]);
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// The synthesised `tiny` Llama (head_dim 64: the tensor-core prefill path),
// written to a temporary file the caller removes.
inline std::string SynthTiny() {
  const std::string path = ::testing::TempDir() + "/llmrt_cuda_tiny_" + std::to_string(::getpid()) + ".gguf";
  synth::SynthOptions o;
  o.stddev = 0.05f;
  Status st = synth::WriteSynthModel(*synth::FindSynthShape("tiny"), o, path);
  EXPECT_TRUE(st.ok()) << st.message();
  return path;
}

// One decoding sequence of a test: its block table and length so far.
struct DecodeSeq {
  std::vector<int32_t> table;
  int32_t n_past = 0;
};

// A CUDA backend for `m` with graphs on or off; null (and a failure) when
// it cannot be created.
inline std::unique_ptr<Backend> MakeGpu(const Model& m, int32_t n_blocks, bool graphs, int32_t max_seqs = 8) {
  KvCacheSpec kv{16, n_blocks};
  CudaBackendOptions o;
  o.cuda_graphs = graphs;
  o.max_seqs = max_seqs;
  o.max_seq_len = 256;
  auto gpu = CreateCudaBackend(m.config, m.weights, &kv, o);
  EXPECT_TRUE(gpu.ok()) << gpu.status().message();
  return gpu.ok() ? std::move(*gpu) : nullptr;
}

}  // namespace llm::test
