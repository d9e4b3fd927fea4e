// Device-only helpers shared by the kernels: built by nvcc, or as host C++
// against the emulator (-DLLM_CUDA=EMULATE, src/backend/cuda/emu/). What the
// two need differently lives here, and only here: the launch, dynamic shared
// memory, and each inline-PTX instruction (with its emulated twin).
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "common.cuh"

// LLM_LAUNCH(kernel, grid, block, smem_bytes, stream, args...) instead of
// kernel<<<grid, block, smem_bytes, stream>>>(args...): the emulator has no
// <<<>>>, and runs (or, in a capturing stream, records) the launch itself.
#if defined(__CUDACC__)
#define LLM_LAUNCH(kernel, grid, block, smem, stream, ...) kernel<<<(grid), (block), (smem), (stream)>>>(__VA_ARGS__)
#else
#define LLM_LAUNCH(kernel, grid, block, smem, stream, ...) \
  ::llm::emu::Launch(#kernel, kernel, (grid), (block), (smem), (stream), __VA_ARGS__)
#endif

// The kernel's dynamic shared memory (the launch's smem_bytes) as `T* name`,
// 16-byte aligned: extern __shared__ under nvcc, the block's buffer emulated.
#if defined(__CUDACC__)
#define LLM_DYNAMIC_SMEM(T, name)                  \
  extern __shared__ __align__(16) T name##_arr_[]; \
  T* name = name##_arr_
#else
#define LLM_DYNAMIC_SMEM(T, name) T* name = reinterpret_cast<T*>(::llm::emu::DynamicSmem())
#endif

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

__device__ __forceinline__ uint32_t PackBf16x2(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x = lo: the lower address, the low 16 bits
  uint32_t r;
  memcpy(&r, &v, sizeof r);  // not a pointer cast: host compilers (the emulator) alias-analyse it
  return r;
}

// D = A B + D for one m16n8k16 tile, bf16 operands, f32 accumulators; the
// warp's 32 lanes call it together. Fragments (PTX ISA, "mma.m16n8k16"),
// g = lane / 4, c = lane % 4:
//   A (16x16, row): a[0] = (g, 2c..2c+1)  a[1] = (g+8, 2c..)  a[2] = (g, 2c+8..)  a[3] = (g+8, 2c+8..)
//   B (16x8, col):  b0 = (k 2c..2c+1, n g)  b1 = (k 2c+8.., n g)
//   C, D (16x8):    d[0..1] = (g, 2c..2c+1)   d[2..3] = (g+8, 2c..2c+1)
// Each 32-bit register holds two bf16, the lower index in the low half.
__device__ __forceinline__ void MmaBf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDACC__)
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  ::llm::emu::MmaM16N8K16Bf16(d, a, b0, b1);
#endif
}

}  // namespace llm::cuda::dev
