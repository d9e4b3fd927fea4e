#include "add_bias.cuh"
#include "device_util.cuh"

namespace llm::cuda {
namespace {

__global__ void AddBiasKernel(float* __restrict__ y, const float* __restrict__ b, int64_t n, int32_t n_cols) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] += b[i % n_cols];
}

}  // namespace

cudaError_t LaunchAddBias(float* y, const float* b, int32_t n_rows, int32_t n_cols, cudaStream_t stream) {
  if (n_rows < 0 || n_cols <= 0 || y == nullptr || b == nullptr) return cudaErrorInvalidValue;
  if (n_rows == 0) return cudaSuccess;
  const int64_t n = static_cast<int64_t>(n_rows) * n_cols;
  const int64_t blocks = (n + 255) / 256;
  LLM_LAUNCH(AddBiasKernel, static_cast<unsigned>(blocks < 65536 ? blocks : 65536), 256, 0, stream, y, b, n, n_cols);
  return cudaGetLastError();
}

}  // namespace llm::cuda
