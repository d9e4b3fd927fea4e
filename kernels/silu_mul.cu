#include "device_util.cuh"
#include "silu_mul.cuh"

namespace llm::cuda {
namespace {

__global__ void SiluMulKernel(const float* __restrict__ gate_up, int64_t n, int32_t n_ff, bf16* __restrict__ out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / n_ff, f = i % n_ff;
    const float g = gate_up[t * 2 * n_ff + f];
    const float u = gate_up[t * 2 * n_ff + n_ff + f];
    out[i] = __float2bfloat16_rn(g / (1.0f + expf(-g)) * u);
  }
}

}  // namespace

cudaError_t LaunchSiluMul(const float* gate_up, int32_t n_tok, int32_t n_ff, bf16* out, cudaStream_t stream) {
  if (n_tok < 0 || n_ff <= 0) return cudaErrorInvalidValue;
  if (n_tok == 0) return cudaSuccess;
  const int64_t n = static_cast<int64_t>(n_tok) * n_ff;
  const int64_t blocks = (n + 255) / 256;
  LLM_LAUNCH(SiluMulKernel, static_cast<unsigned>(blocks < 65536 ? blocks : 65536), 256, 0, stream, gate_up, n, n_ff, out);
  return cudaGetLastError();
}

}  // namespace llm::cuda
