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

// gpt-oss's clamped SwiGLU over biased gate and up (the CPU backend's
// BiasedExpertUp): row r's biases are expert pick_expert[order[r]]'s.
__global__ void SwigluOaiKernel(const float* __restrict__ gate_up, int64_t n, int32_t n_ff,
                                const float* __restrict__ bias_gate, const float* __restrict__ bias_up,
                                const int32_t* __restrict__ order, const int32_t* __restrict__ pick_expert, float alpha,
                                float limit, bf16* __restrict__ out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / n_ff, f = i % n_ff;
    float g = gate_up[t * 2 * n_ff + f];
    float u = gate_up[t * 2 * n_ff + n_ff + f];
    if (bias_gate != nullptr) {
      const int64_t b = static_cast<int64_t>(pick_expert[order[t]]) * n_ff + f;
      g += bias_gate[b];
      u += bias_up[b];
    }
    g = fminf(g, limit);
    u = fminf(fmaxf(u, -limit), limit);
    out[i] = __float2bfloat16_rn(g / (1.0f + expf(-alpha * g)) * (u + 1.0f));
  }
}

}  // namespace

cudaError_t LaunchSwigluOai(const float* gate_up, int32_t n_rows, int32_t n_ff, const float* bias_gate,
                            const float* bias_up, const int32_t* order, const int32_t* pick_expert, float alpha,
                            float limit, bf16* out, cudaStream_t stream) {
  if (n_rows < 0 || n_ff <= 0 || gate_up == nullptr || out == nullptr || !(limit >= 0.0f) ||
      ((bias_gate == nullptr) != (bias_up == nullptr)) ||
      (bias_gate != nullptr && (order == nullptr || pick_expert == nullptr)))
    return cudaErrorInvalidValue;
  if (n_rows == 0) return cudaSuccess;
  const int64_t n = static_cast<int64_t>(n_rows) * n_ff;
  const int64_t blocks = (n + 255) / 256;
  LLM_LAUNCH(SwigluOaiKernel, static_cast<unsigned>(blocks < 65536 ? blocks : 65536), 256, 0, stream, gate_up, n,
             n_ff, bias_gate, bias_up, order, pick_expert, alpha, limit, out);
  return cudaGetLastError();
}

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
