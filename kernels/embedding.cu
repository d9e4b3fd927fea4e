#include "device_util.cuh"
#include "embedding.cuh"

#include <cmath>

namespace llm::cuda {
namespace {

__global__ void EmbeddingKernel(const bf16* __restrict__ table, int32_t n_vocab, int32_t n_embd,
                                const int32_t* __restrict__ tokens, float scale, float* __restrict__ out) {
  const int64_t t = blockIdx.x;
  const int32_t id = tokens[t];
  float* dst = out + t * n_embd;
  if (id < 0 || id >= n_vocab) {
    for (int32_t i = threadIdx.x; i < n_embd; i += blockDim.x) dst[i] = NAN;
    return;
  }
  const bf16* src = table + static_cast<int64_t>(id) * n_embd;
  for (int32_t i = threadIdx.x; i < n_embd; i += blockDim.x) dst[i] = __bfloat162float(src[i]) * scale;
}

}  // namespace

cudaError_t LaunchEmbedding(const bf16* table, int32_t n_vocab, int32_t n_embd, const int32_t* tokens,
                            int32_t n_tok, float* out, cudaStream_t stream, float scale) {
  if (n_tok < 0 || n_embd <= 0 || n_vocab <= 0 || !(scale > 0.0f)) return cudaErrorInvalidValue;
  if (n_tok == 0) return cudaSuccess;
  LLM_LAUNCH(EmbeddingKernel, n_tok, 256, 0, stream, table, n_vocab, n_embd, tokens, scale, out);
  return cudaGetLastError();
}

}  // namespace llm::cuda
