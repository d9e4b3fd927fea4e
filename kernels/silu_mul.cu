#include "device_util.cuh"
#include "silu_mul.cuh"

namespace llm::cuda {
namespace {

// gelu's tanh approximation as the CPU backend writes it: 0.5 (1 + tanh z) =
// 1 / (1 + e^(-2z)), z = sqrt(2/pi) g (1 + 0.044715 g²).
__device__ __forceinline__ float Act(float g, int32_t gelu) {
  if (!gelu) return g / (1.0f + expf(-g));
  const float z = 0.79788456080286535588f * g * (1.0f + 0.044715f * g * g);
  return g / (1.0f + expf(-2.0f * z));
}

__global__ void SiluMulKernel(const float* __restrict__ gate_up, int64_t n, int32_t n_ff, int32_t gelu,
                              bf16* __restrict__ out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / n_ff, f = i % n_ff;
    const float g = gate_up[t * 2 * n_ff + f];
    const float u = gate_up[t * 2 * n_ff + n_ff + f];
    out[i] = __float2bfloat16_rn(Act(g, gelu) * u);
  }
}

}  // namespace

cudaError_t LaunchSiluMul(const float* gate_up, int32_t n_tok, int32_t n_ff, bf16* out, cudaStream_t stream,
                          bool gelu) {
  if (n_tok < 0 || n_ff <= 0) return cudaErrorInvalidValue;
  if (n_tok == 0) return cudaSuccess;
  const int64_t n = static_cast<int64_t>(n_tok) * n_ff;
  const int64_t blocks = (n + 255) / 256;
  LLM_LAUNCH(SiluMulKernel, static_cast<unsigned>(blocks < 65536 ? blocks : 65536), 256, 0, stream, gate_up, n, n_ff, gelu ? 1 : 0, out);
  return cudaGetLastError();
}

}  // namespace llm::cuda
