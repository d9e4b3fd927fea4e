#include "device_util.cuh"
#include "hadamard.cuh"
#include "kv_elem.cuh"

namespace llm::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;

// One warp per chunk of n values: widened into its slice of shared memory
// (kWarps x n F32), rotated there, rounded back.
__global__ void __launch_bounds__(kThreads) HadamardBf16Kernel(bf16* __restrict__ x, int64_t n_chunks, int32_t n) {
  LLM_DYNAMIC_SMEM(float, smem);
  const int32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float* row = smem + static_cast<int64_t>(warp) * n;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * kWarps + warp; c < n_chunks;
       c += static_cast<int64_t>(gridDim.x) * kWarps) {
    bf16* v = x + c * n;
    for (int32_t j = lane; j < n; j += 32) row[j] = __bfloat162float(v[j]);
    __syncwarp();
    dev::HadamardRowWarp(row, n, n, lane);  // ends with __syncwarp
    for (int32_t j = lane; j < n; j += 32) v[j] = __float2bfloat16_rn(row[j]);
    __syncwarp();  // the row's readers are done before the next chunk overwrites it
  }
}

}  // namespace

cudaError_t LaunchHadamardBf16(bf16* x, int64_t n_values, int32_t n, cudaStream_t stream) {
  if (n_values < 0 || n < 0 || n > 256 || (n & (n - 1)) != 0) return cudaErrorInvalidValue;
  if (n <= 1 || n_values == 0) return cudaSuccess;
  if (x == nullptr || n_values % n != 0) return cudaErrorInvalidValue;
  const int64_t chunks = n_values / n;
  const int64_t blocks = (chunks + kWarps - 1) / kWarps;
  LLM_LAUNCH(HadamardBf16Kernel, static_cast<unsigned>(blocks < 65536 ? blocks : 65536), kThreads,
             kWarps * n * sizeof(float), stream, x, chunks, n);
  return cudaGetLastError();
}

}  // namespace llm::cuda
