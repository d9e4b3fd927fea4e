#include "device_util.cuh"
#include "softcap.cuh"

namespace llm::cuda {
namespace {

// The CPU backend's order (ClassifierRows): v * (1 / cap), tanh, * cap.
__global__ void SoftcapKernel(float* __restrict__ x, int64_t n, float cap, float inv_cap) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    x[i] = cap * tanhf(x[i] * inv_cap);
}

}  // namespace

cudaError_t LaunchSoftcap(float* x, int64_t n, float cap, cudaStream_t stream) {
  if (n < 0 || !(cap > 0.0f)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const int64_t blocks = (n + 255) / 256;
  LLM_LAUNCH(SoftcapKernel, static_cast<unsigned>(blocks < 65536 ? blocks : 65536), 256, 0, stream, x, n, cap,
             1.0f / cap);
  return cudaGetLastError();
}

}  // namespace llm::cuda
