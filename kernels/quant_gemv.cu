// One warp per weight row, four rows per CTA. Lane l decodes chunks
// l, l + 32, ... of its row (neighbouring lanes read neighbouring blocks)
// and dots each with the n activation rows, so a weight byte is loaded once
// for all n tokens. The 32 lanes' partial sums meet in shared memory after
// one barrier (instead of 5 n shuffles per row), and 32 threads add them up
// in a fixed order.
#include "quant_gemv.cuh"

#include "quant_blocks.cuh"

namespace llm::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kN = kQuantGemvMaxRows;

template <bool kLattice>
__global__ void QuantGemvKernel(QuantMatrix w, const bf16* __restrict__ x, int32_t n, float* __restrict__ y) {
  __shared__ float partial[kWarps][kN][32];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  float acc[kN];
#pragma unroll
  for (int j = 0; j < kN; ++j) acc[j] = 0.0f;
  if (row < w.rows) {
    uint32_t type = 0;
    const uint8_t* wr = dev::QuantRow(w, row, &type);
    const int64_t n_chunks = w.cols / 32;
    for (int64_t c = lane; c < n_chunks; c += 32) {
      float v[32];
      dev::DecodeChunk<kLattice>(type, wr, c, v);
#pragma unroll
      for (int j = 0; j < kN; ++j) {
        if (j >= n) break;
        const bf16* xr = x + static_cast<int64_t>(j) * w.cols + c * 32;
        float s = 0.0f;
        for (int k = 0; k < 32; ++k) s += v[k] * __bfloat162float(xr[k]);
        acc[j] += s;
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kN; ++j) partial[warp][j][lane] = acc[j];
  __syncthreads();
  const int t = threadIdx.x;
  if (t < kWarps * kN) {
    const int wi = t / kN, j = t % kN;
    const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarps + wi;
    if (j < n && r < w.rows) {
      float s = 0.0f;
      for (int l = 0; l < 32; ++l) s += partial[wi][j][l];
      y[static_cast<int64_t>(j) * w.rows + r] = s;
    }
  }
}

}  // namespace

cudaError_t LaunchQuantGemv(const QuantMatrix& w, const bf16* x, int32_t n, float* y, cudaStream_t stream) {
  if (CheckQuantMatrix(w) != cudaSuccess || n < 1 || n > kN || x == nullptr || y == nullptr)
    return cudaErrorInvalidValue;
  const int64_t blocks = (static_cast<int64_t>(w.rows) + kWarps - 1) / kWarps;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  // The lattice types' decoding in its own instantiation: the others keep
  // their register count (quant_blocks.cuh).
  if (dev::QuantMatrixHasLattice(w))
    LLM_LAUNCH(QuantGemvKernel<true>, static_cast<unsigned>(blocks), kWarps * 32, 0, stream, w, x, n, y);
  else
    LLM_LAUNCH(QuantGemvKernel<false>, static_cast<unsigned>(blocks), kWarps * 32, 0, stream, w, x, n, y);
  return cudaGetLastError();
}

}  // namespace llm::cuda
