// RoPE rotation frequencies for the CUDA backend's angle kernel: those of
// cpu::Rope (src/backend/cpu/rope.cpp), theta^(-2i/rope_dim) with linear or
// Llama 3 scaling. test_cuda_kernels checks the angles they give against
// cpu::Rope::Angles, so the two cannot drift apart unnoticed.
#pragma once

#include <vector>

#include "model/config.h"
#include "util/status.h"

namespace llm::cuda {

// (rope_dim / 2) frequencies; UNSUPPORTED for YaRN.
StatusOr<std::vector<double>> RopeInvFreq(const ModelConfig& config);

}  // namespace llm::cuda
