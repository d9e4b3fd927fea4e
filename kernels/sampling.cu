#include "sampling.cuh"

namespace llm::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ bool Better(float v, int32_t i, float bv, int32_t bi) {
  return v > bv || (v == bv && i < bi);
}

__global__ void __launch_bounds__(kThreads) ArgmaxKernel(const float* __restrict__ logits, int32_t n_vocab,
                                                         int32_t* __restrict__ out) {
  __shared__ float sv[kThreads / 32];
  __shared__ int32_t si[kThreads / 32];
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * n_vocab;
  float bv = -INFINITY;
  int32_t bi = n_vocab;  // "none yet": loses every tie
  for (int32_t j = threadIdx.x; j < n_vocab; j += kThreads) {
    const float v = row[j];
    if (v == v && Better(v, j, bv, bi)) bv = v, bi = j;
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, bv, o);
    const int32_t i = __shfl_xor_sync(0xffffffffu, bi, o);
    if (Better(v, i, bv, bi)) bv = v, bi = i;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) sv[warp] = bv, si[warp] = bi;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w)
      if (Better(sv[w], si[w], bv, bi)) bv = sv[w], bi = si[w];
    out[blockIdx.x] = bi < n_vocab ? bi : 0;  // an all-NaN row gives token 0
  }
}

}  // namespace

cudaError_t LaunchArgmax(const float* logits, int32_t n_rows, int32_t n_vocab, int32_t* out, cudaStream_t stream) {
  if (n_rows < 0 || n_vocab <= 0) return cudaErrorInvalidValue;
  if (n_rows == 0) return cudaSuccess;
  ArgmaxKernel<<<n_rows, kThreads, 0, stream>>>(logits, n_vocab, out);
  return cudaGetLastError();
}

}  // namespace llm::cuda
