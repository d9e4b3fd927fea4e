// The experts' products of a Mixture-of-Experts layer, all experts in one
// launch: y[r] = x[gather(r)] · W_{expert(r)}ᵀ for the permuted rows r of the
// work items (moe_route.cuh), reading each expert's weights in their GGUF
// block format (or BF16) directly.
//
//   LaunchMoeGemv  (decode: work items of <= 8 rows): one warp per weight row,
//                  the quant_gemv scheme, each expert block streamed once for
//                  all its rows.
//   LaunchMoeGemm  (prefill: items of kMoeGemmTileRows rows): a 32-row x
//                  64-weight-row tile per CTA, each 32-column chunk of the 64
//                  weight rows decoded once into shared memory and used by
//                  all 32 rows (F32 FMA, F32 accumulation).
//
// The grid's second dimension is the work-item bound, so a launch's shape is
// the routing's upper bound, never the routing (graph-safe); unused items
// return at once. Host-includable.
#pragma once

#include <cstdint>

#include "common.cuh"
#include "moe_route.cuh"

namespace llm::cuda {

// GGUF's BF16 type id: an expert stack kept as plain BF16 rows.
constexpr uint32_t kExpertBf16 = 30;

// n_expert matrices of (rows, cols), one type: expert e's row r at
// experts[e] + r * row_bytes (experts: a device array of n_expert pointers,
// so experts may live anywhere in device memory).
struct ExpertStack {
  const uint8_t* const* experts = nullptr;
  uint32_t type = 0;       // a quantized GGUF type (quant_matrix.cuh) or kExpertBf16
  int32_t n_expert = 0, rows = 0, cols = 0;
  int64_t row_bytes = 0;
};

// One or two stacks of the same cols and n_expert, stacked by rows (the
// [gate; up] pair in one launch, their types may differ).
struct ExpertMatrix {
  ExpertStack part[2];
  int32_t n_parts = 1;
  int32_t rows = 0;  // the parts' sum
  int32_t cols = 0;
};

// cudaSuccess when m is well formed: 1..2 parts of a decodable type, the
// same n_expert and cols (a whole number of blocks), rows the parts' sum.
cudaError_t CheckExpertMatrix(const ExpertMatrix& m);

constexpr int32_t kMoeGemvMaxRows = 8;
constexpr int32_t kMoeGemmTileRows = 32;

struct MoeMatmulParams {
  ExpertMatrix w;
  const bf16* x = nullptr;           // activations, rows of w.cols
  const int32_t* gather = nullptr;   // NULL: permuted row r reads x row r; else x row gather[r] / gather_div
  int32_t gather_div = 1;
  const MoeWorkItem* items = nullptr;
  int32_t n_items = 0;               // the bound the items were built for (MoeMaxWorkItems)
  float* y = nullptr;                // (permuted rows, w.rows) F32
};
// Items of at most kMoeGemvMaxRows rows.
cudaError_t LaunchMoeGemv(const MoeMatmulParams& p, cudaStream_t stream);
// Items of at most kMoeGemmTileRows rows.
cudaError_t LaunchMoeGemm(const MoeMatmulParams& p, cudaStream_t stream);

}  // namespace llm::cuda
