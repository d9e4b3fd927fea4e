// Device-only helpers shared by the kernels (nvcc only).
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "common.cuh"

namespace llm::cuda::dev {

constexpr float kNegInf = -INFINITY;
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over a block of blockDim.x threads (a multiple of 32, at most 1024);
// every thread gets the total. `scratch` holds 32 floats of shared memory.
__device__ __forceinline__ float BlockSum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  v = WarpSum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < n_warps ? scratch[lane] : 0.0f;
  return WarpSum(v);
}

// Element offset of position `pos`'s row (kv head 0, dim 0) in a PagedKv
// layer view; kv head h adds h * block_size * head_dim.
__device__ __forceinline__ int64_t SlotOffset(const int32_t* table, int32_t pos, int32_t block_size,
                                              int64_t block_stride, int32_t head_dim) {
  const int32_t block = table[pos / block_size];
  return static_cast<int64_t>(block) * block_stride + static_cast<int64_t>(pos % block_size) * head_dim;
}

__device__ __forceinline__ uint32_t PackBf16x2(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x = lo: the lower address, the low 16 bits
  return *reinterpret_cast<uint32_t*>(&v);
}

}  // namespace llm::cuda::dev
