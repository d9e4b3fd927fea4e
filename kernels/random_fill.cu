#include "device_util.cuh"
#include "random_fill.cuh"

namespace llm::cuda {
namespace {

// splitmix64's finaliser: a well-mixed 64-bit value per (seed, index).
__device__ __forceinline__ uint64_t Mix(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__global__ void RandomFillBf16Kernel(bf16* __restrict__ out, int64_t n, uint64_t seed, float scale) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint64_t h = Mix(seed, static_cast<uint64_t>(i));
    // four 16-bit uniforms in [0, 1): their sum has mean 2 and variance 4/12
    const float s = static_cast<float>(h & 0xFFFF) + static_cast<float>((h >> 16) & 0xFFFF) +
                    static_cast<float>((h >> 32) & 0xFFFF) + static_cast<float>(h >> 48);
    out[i] = __float2bfloat16_rn((s * (1.0f / 65536.0f) - 2.0f) * scale);
  }
}

__global__ void RandomFillBlocksKernel(uint8_t* __restrict__ out, int64_t total, int32_t block_bytes,
                                       uint64_t seed, int32_t at0, int32_t at1, uint16_t scale) {
  // one hash per 8 bytes, each byte either random or a scale byte
  const int64_t n_words = (total + 7) / 8;
  for (int64_t w = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; w < n_words;
       w += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint64_t h = Mix(seed, static_cast<uint64_t>(w));
    for (int b = 0; b < 8; ++b) {
      const int64_t at = w * 8 + b;
      if (at >= total) break;
      const int32_t in_block = static_cast<int32_t>(at % block_bytes);
      uint8_t v = static_cast<uint8_t>(h >> (8 * b));
      if (at0 >= 0 && in_block >= at0 && in_block < at0 + 2) v = static_cast<uint8_t>(scale >> (8 * (in_block - at0)));
      if (at1 >= 0 && in_block >= at1 && in_block < at1 + 2) v = static_cast<uint8_t>(scale >> (8 * (in_block - at1)));
      out[at] = v;
    }
  }
}

unsigned Grid(int64_t n) {
  const int64_t blocks = (n + 255) / 256;
  return static_cast<unsigned>(blocks < 65536 ? (blocks > 0 ? blocks : 1) : 65536);
}

}  // namespace

cudaError_t LaunchRandomFillBf16(bf16* out, int64_t n, uint64_t seed, float stddev, cudaStream_t stream) {
  if (n < 0 || out == nullptr) return n == 0 ? cudaSuccess : cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  // the sum of four uniforms has standard deviation sqrt(4/12) = 0.57735
  LLM_LAUNCH(RandomFillBf16Kernel, Grid(n), 256, 0, stream, out, n, seed, stddev * 1.7320508f);
  return cudaGetLastError();
}

cudaError_t LaunchRandomFillBlocks(uint8_t* out, int64_t n_blocks, int32_t block_bytes, uint64_t seed,
                                   int32_t scale_at0, int32_t scale_at1, uint16_t scale, cudaStream_t stream) {
  if (n_blocks < 0 || block_bytes <= 0 || scale_at0 + 2 > block_bytes || scale_at1 + 2 > block_bytes)
    return cudaErrorInvalidValue;
  const int64_t total = n_blocks * block_bytes;
  if (total == 0) return cudaSuccess;
  if (out == nullptr) return cudaErrorInvalidValue;
  LLM_LAUNCH(RandomFillBlocksKernel, Grid((total + 7) / 8), 256, 0, stream, out, total, block_bytes, seed, scale_at0,
             scale_at1, scale);
  return cudaGetLastError();
}

}  // namespace llm::cuda
