// A weight matrix kept on the device in its GGUF block format (the bytes of
// the file, unchanged), as the quantized kernels (quant_gemv, dequant) read
// it. Host-includable.
//
// Why the file's layout and no repacking: the blocks are already
// self-contained (scales beside their quants), a row is a whole number of
// blocks, and a 32-weight chunk of any supported type decodes from one block
// with byte loads, so one lane per chunk streams each block once without a
// transposed copy; the device holds exactly the file's bytes (issue 21: within
// 5% of the tensor bytes), and the decoding stays the GGUF spec's (and the
// CPU backend's, model/tensor_type.h) so both are checked against one
// reference. The GEMV's fast kernel stages tiles of blocks in shared memory
// with 16-byte loads whatever the block size; a repacking (scales split from
// quants) would save instructions, not load width (kernels/README.md).
#pragma once

#include <cstdint>

#include "common.cuh"

namespace llm::cuda {

// GGUF type ids (model/tensor_type.h's TensorType values) the kernels decode.
enum : uint32_t {
  kQuantQ4_0 = 2,
  kQuantQ4_1 = 3,
  kQuantQ5_0 = 6,
  kQuantQ5_1 = 7,
  kQuantQ8_0 = 8,
  kQuantQ2_K = 10,
  kQuantQ3_K = 11,
  kQuantQ4_K = 12,
  kQuantQ5_K = 13,
  kQuantQ6_K = 14,
  kQuantIQ2_XXS = 16,
  kQuantIQ2_XS = 17,
  kQuantIQ3_XXS = 18,
  kQuantIQ1_S = 19,
  kQuantIQ4_NL = 20,
  kQuantIQ3_S = 21,
  kQuantIQ2_S = 22,
  kQuantIQ4_XS = 23,
  kQuantIQ1_M = 29,
  kQuantTQ1_0 = 34,
  kQuantTQ2_0 = 35,
  kQuantMXFP4 = 39,
};

// Rows [0, rows) of one tensor: row r at data + r * row_bytes.
struct QuantPart {
  const void* data = nullptr;
  uint32_t type = 0;
  int32_t rows = 0;
  int64_t row_bytes = 0;
};

// Up to kMaxQuantParts tensors of the same column count stacked by rows (a
// fused [Wq; Wk; Wv] or [W_gate; W_up] whose parts may differ in type, as a
// Q4_K_M file's attn_v often does), one matrix of `rows` = the parts' sum.
constexpr int kMaxQuantParts = 3;
struct QuantMatrix {
  QuantPart part[kMaxQuantParts];
  int32_t n_parts = 0;
  int32_t rows = 0;
  int32_t cols = 0;
};

// True for a type the kernels decode (every block-quantized TensorType).
bool QuantTypeSupported(uint32_t type);
// Weights per block (32 or 256) and bytes per block of a supported type; 0 otherwise.
int32_t QuantBlockElems(uint32_t type);
int32_t QuantBlockBytes(uint32_t type);
// cudaSuccess when `w` is well formed: 1..kMaxQuantParts parts of supported
// types, rows the parts' sum, cols > 0 a whole number of every part's blocks,
// row_bytes the blocks' bytes.
cudaError_t CheckQuantMatrix(const QuantMatrix& w);

}  // namespace llm::cuda
