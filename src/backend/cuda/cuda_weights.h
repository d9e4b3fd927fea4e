// A weight matrix on the device: block-quantized GGUF types stay in their
// file's bytes (kernels/quant_matrix.cuh says why no repacking), everything
// else (F32, F16, BF16, or a fused matrix mixing quantized and plain parts)
// becomes BF16 on the host at upload, as the backend always did.
#pragma once

#include <initializer_list>
#include <span>
#include <string>

#include "backend/cuda/cuda_util.h"
#include "model/weights.h"
#include "moe_matmul.cuh"
#include "quant_matrix.cuh"

namespace llm::cuda {

class DeviceMatrix {
 public:
  // Uploads `parts` (same cols) stacked by rows, at most kMaxQuantParts of
  // them when they are all block-quantized. `name` names it in errors.
  // keep_quantized false forces BF16 (a debugging and comparison aid).
  Status Upload(std::initializer_list<const WeightView*> parts, const std::string& name, bool keep_quantized = true);
  // The device bytes Upload would hold for `parts` (0 when they are not a
  // matrix Upload takes): the fit planner's size rule (cuda_footprint.cpp).
  static size_t StoredBytes(std::initializer_list<const WeightView*> parts, bool keep_quantized = true);
  // Whether Upload keeps them in their file's blocks (quantized()).
  static bool StaysQuantized(std::initializer_list<const WeightView*> parts, bool keep_quantized = true);

  bool quantized() const { return q_.n_parts > 0; }
  const QuantMatrix& quant() const { return q_; }    // quantized() only
  const bf16* bf16_data() const { return buf_.get<bf16>(); }  // !quantized() only
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  size_t bytes() const { return buf_.bytes(); }  // device memory held

 private:
  DeviceBuffer buf_;
  QuantMatrix q_{};
  int64_t rows_ = 0, cols_ = 0;
};

// One MoE layer's experts of one projection (ffn_gate_exps, ffn_up_exps or
// ffn_down_exps): n_expert matrices of one shape, in one device buffer, in
// the file's block format when the kernels decode it, else BF16; a device
// table of the experts' addresses (ExpertStack) for the kernels.
class DeviceExperts {
 public:
  Status Upload(std::span<const WeightView> experts, const std::string& name, bool keep_quantized = true);
  // One expert's bytes as Upload (and the host copy, moe_host.h) store it:
  // the file's blocks when the kernels decode them, else BF16. 0 for an
  // empty list.
  static size_t ExpertBytes(std::span<const WeightView> experts, bool keep_quantized = true);
  // The device bytes Upload would hold: the experts and their address table.
  static size_t StoredBytes(std::span<const WeightView> experts, bool keep_quantized = true) {
    return ExpertBytes(experts, keep_quantized) * experts.size() + experts.size() * sizeof(const uint8_t*);
  }

  const ExpertStack& stack() const { return s_; }
  size_t bytes() const { return buf_.bytes(); }      // the weights
  size_t expert_bytes() const { return static_cast<size_t>(s_.rows) * s_.row_bytes; }

 private:
  DeviceBuffer buf_, table_;
  ExpertStack s_{};
};

}  // namespace llm::cuda
