#include "device_util.cuh"
#include "rmsnorm.cuh"

namespace llm::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    AddRmsNormKernel(float* __restrict__ x, const float* __restrict__ delta, const float* __restrict__ weight,
                     const int32_t* __restrict__ rows, int32_t n_embd, float eps, bf16* __restrict__ out) {
  __shared__ float scratch[32];
  const int64_t i = blockIdx.x;
  const int64_t r = rows ? rows[i] : i;
  float* xr = x + r * n_embd;
  const float* dr = delta ? delta + r * n_embd : nullptr;
  const bool write_back = delta != nullptr && rows == nullptr;
  float ss = 0.0f;
  for (int32_t j = threadIdx.x; j < n_embd; j += kThreads) {
    float v = xr[j];
    if (dr) v += dr[j];
    if (write_back) xr[j] = v;  // each thread re-reads only what it wrote
    ss += v * v;
  }
  ss = dev::BlockSum(ss, scratch);
  const float inv = rsqrtf(ss / static_cast<float>(n_embd) + eps);
  bf16* o = out + i * n_embd;
  for (int32_t j = threadIdx.x; j < n_embd; j += kThreads) {
    float v = xr[j];
    if (dr && !write_back) v += dr[j];
    o[j] = __float2bfloat16_rn(v * inv * weight[j]);
  }
}

// One row per block, in place: y = y / sqrt(mean(y²) + eps) * weight. F32
// throughout: the normed sub-block output is added to the residual stream
// next, never rounded to BF16 first (the CPU backend's AddNormedRows).
__global__ void __launch_bounds__(kThreads)
    RmsNormInPlaceKernel(float* __restrict__ y, const float* __restrict__ weight, int32_t n_embd, float eps) {
  __shared__ float scratch[32];
  float* yr = y + static_cast<int64_t>(blockIdx.x) * n_embd;
  float ss = 0.0f;
  for (int32_t j = threadIdx.x; j < n_embd; j += kThreads) ss += yr[j] * yr[j];
  ss = dev::BlockSum(ss, scratch);
  const float inv = rsqrtf(ss / static_cast<float>(n_embd) + eps);
  for (int32_t j = threadIdx.x; j < n_embd; j += kThreads) yr[j] = yr[j] * inv * weight[j];
}

}  // namespace

cudaError_t LaunchRmsNormInPlace(float* y, const float* weight, int32_t n_rows, int32_t n_embd, float eps,
                                 cudaStream_t stream) {
  if (n_rows < 0 || n_embd <= 0 || !(eps >= 0.0f)) return cudaErrorInvalidValue;
  if (n_rows == 0) return cudaSuccess;
  LLM_LAUNCH(RmsNormInPlaceKernel, n_rows, kThreads, 0, stream, y, weight, n_embd, eps);
  return cudaGetLastError();
}

cudaError_t LaunchAddRmsNorm(float* x, const float* delta, const float* weight, const int32_t* rows,
                             int32_t n_rows, int32_t n_embd, float eps, bf16* out, cudaStream_t stream) {
  if (n_rows < 0 || n_embd <= 0 || !(eps >= 0.0f)) return cudaErrorInvalidValue;
  if (n_rows == 0) return cudaSuccess;
  LLM_LAUNCH(AddRmsNormKernel, n_rows, kThreads, 0, stream, x, delta, weight, rows, n_embd, eps, out);
  return cudaGetLastError();
}

}  // namespace llm::cuda
