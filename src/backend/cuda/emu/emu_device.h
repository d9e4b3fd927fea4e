// EMULATE builds: the device-side language for kernels compiled as host C++.
// Included by the emulated cuda_runtime.h; the executor is emu_executor.cpp.
//
// Execution model: a launch runs its blocks one after another on the calling
// host thread; the threads of a block are fibers, each running until it
// reaches a block barrier or a warp collective, where it yields. So
//   - threadIdx/blockIdx/blockDim/gridDim are per-OS-thread variables the
//     executor sets before resuming each fiber;
//   - `__shared__ T x` is `static thread_local T x`: one block at a time runs
//     on an OS thread, so a function-static is per-block storage, shared by
//     the block's fibers and by no other running block;
//   - `extern __shared__` arrays are spelled LLM_DYNAMIC_SMEM (device_util.cuh)
//     and come from DynamicSmem(), a per-block buffer of the launch's size.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static thread_local
#define __constant__ static
#define __restrict__ __restrict

namespace llm::emu {

// constinit: no dynamic initialisation, so other TUs read them directly
// instead of through a TLS init wrapper (whose null check GCC 12 miscompiles
// under UBSan: a `je` reads the flags of the wrapper test after an `lea`).
extern thread_local constinit uint3 t_thread_idx, t_block_idx, t_block_dim, t_grid_dim;

// Collective kinds: every lane of a warp must reach the same kind at a
// rendezvous, or the launch fails ("divergent warp collective").
enum CollectiveOp : int { kOpShfl = 1, kOpVote, kOpSyncWarp, kOpMma, kOpMatch };

// Payload bytes per lane a warp collective may exchange.
constexpr size_t kLanePayload = 64;

struct WarpView {
  const unsigned char* lanes;  // lane i's payload at lanes + i * kLanePayload
  unsigned int active;         // lanes that took part (live lanes of the warp)
};

// `file`/`line`: the barrier's source site; threads waiting at different
// sites at once are a divergent barrier (undefined on a GPU): the launch fails.
void SyncThreads(const char* file, int line);
WarpView WarpExchange(CollectiveOp op, const void* payload, size_t bytes, unsigned int mask);
unsigned char* DynamicSmem();
[[noreturn]] void Trap(const char* why);
inline int LaneId() {
  return static_cast<int>((t_thread_idx.x + t_block_dim.x * (t_thread_idx.y + t_block_dim.y * t_thread_idx.z)) & 31u);
}

// mma.sync m16n8k16 bf16 -> f32 as a warp collective (emu_tensor_core.cpp).
void MmaM16N8K16Bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);

// cvt.rn.f16x2.e4m3x2 (emu_fp8.cpp): two E4M3 bytes (the low one first) as
// two IEEE halves (the first in the low 16 bits).
uint32_t CvtF16x2E4m3x2(uint16_t v);

// The launch: checks the configuration as a GPU would, then runs the blocks
// now, or records the launch (argument values copied now) while `stream`
// captures a graph. Errors go where a GPU puts them (cudaGetLastError).
// `foreign`: a pointer argument into another device's memory (the launch
// fails with cudaErrorIllegalAddress, as the kernel's first access would).
void LaunchKernel(const char* name, const void* func, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                  std::function<void()> body, const void* foreign = nullptr);

// p when it points into a device allocation of a device other than the
// current one (emu_runtime.cpp), else null.
const void* ForeignDevicePointer(const void* p);
template <typename T>
const void* ForeignArg(const T& v) {
  if constexpr (std::is_pointer_v<T>) {
    return ForeignDevicePointer((const void*)v);  // NOLINT: any pointee, const or not
  } else {
    return nullptr;
  }
}

// Pointers inside parameter structs are not looked into: only a kernel's
// direct pointer arguments are checked against the current device.
template <typename... P, typename... A>
void Launch(const char* name, void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
            A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "kernel launched with the wrong number of arguments");
  std::tuple<std::decay_t<P>...> values(static_cast<std::decay_t<P>>(std::forward<A>(args))...);
  const void* foreign = std::apply(
      [](const auto&... a) {
        const void* f = nullptr;
        ((f = f != nullptr ? f : ForeignArg(a)), ...);
        return f;
      },
      values);
  LaunchKernel(name, reinterpret_cast<const void*>(kernel), grid, block, smem, stream,
               [kernel, values]() { std::apply(kernel, values); }, foreign);
}

template <typename T>
T ShuffleFrom(const WarpView& v, int src) {
  T r;
  std::memcpy(&r, v.lanes + static_cast<size_t>(src) * kLanePayload, sizeof(T));
  return r;
}

}  // namespace llm::emu

#define threadIdx (::llm::emu::t_thread_idx)
#define blockIdx (::llm::emu::t_block_idx)
#define blockDim (::llm::emu::t_block_dim)
#define gridDim (::llm::emu::t_grid_dim)
constexpr int warpSize = 32;

#define __syncthreads() ::llm::emu::SyncThreads(__FILE__, __LINE__)
inline void __syncwarp(unsigned int mask = 0xffffffffu) {
  ::llm::emu::WarpExchange(::llm::emu::kOpSyncWarp, nullptr, 0, mask);
}
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __trap() { ::llm::emu::Trap("__trap()"); }

// ---- warp shuffles: `width` segments as on the GPU; an out-of-segment
// source gives the caller's own value.
template <typename T>
T __shfl_sync(unsigned int mask, T v, int src_lane, int width = 32) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>);
  const auto w = ::llm::emu::WarpExchange(::llm::emu::kOpShfl, &v, sizeof(T), mask);
  const int lane = ::llm::emu::LaneId();
  return ::llm::emu::ShuffleFrom<T>(w, (lane & ~(width - 1)) + (src_lane & (width - 1)));
}
template <typename T>
T __shfl_xor_sync(unsigned int mask, T v, int lane_mask, int width = 32) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>);
  const auto w = ::llm::emu::WarpExchange(::llm::emu::kOpShfl, &v, sizeof(T), mask);
  const int lane = ::llm::emu::LaneId(), src = lane ^ lane_mask;
  return (src & ~(width - 1)) == (lane & ~(width - 1)) ? ::llm::emu::ShuffleFrom<T>(w, src) : v;
}
template <typename T>
T __shfl_down_sync(unsigned int mask, T v, unsigned int delta, int width = 32) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>);
  const auto w = ::llm::emu::WarpExchange(::llm::emu::kOpShfl, &v, sizeof(T), mask);
  const int lane = ::llm::emu::LaneId(), src = lane + static_cast<int>(delta);
  return (src & ~(width - 1)) == (lane & ~(width - 1)) ? ::llm::emu::ShuffleFrom<T>(w, src) : v;
}
template <typename T>
T __shfl_up_sync(unsigned int mask, T v, unsigned int delta, int width = 32) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>);
  const auto w = ::llm::emu::WarpExchange(::llm::emu::kOpShfl, &v, sizeof(T), mask);
  const int lane = ::llm::emu::LaneId(), src = lane - static_cast<int>(delta);
  return src >= (lane & ~(width - 1)) ? ::llm::emu::ShuffleFrom<T>(w, src) : v;
}

// ---- votes over the lanes that take part
inline unsigned int __ballot_sync(unsigned int mask, int pred) {
  const unsigned char p = pred != 0;
  const auto w = ::llm::emu::WarpExchange(::llm::emu::kOpVote, &p, 1, mask);
  unsigned int bits = 0;
  for (int i = 0; i < 32; ++i)
    if (((w.active >> i) & 1u) && w.lanes[static_cast<size_t>(i) * ::llm::emu::kLanePayload]) bits |= 1u << i;
  return bits & mask;
}
inline int __any_sync(unsigned int mask, int pred) { return __ballot_sync(mask, pred) != 0; }
inline int __all_sync(unsigned int mask, int pred) {
  const unsigned int b = __ballot_sync(mask, pred);
  return b == (mask & __ballot_sync(mask, 1));
}
inline unsigned int __activemask() { return __ballot_sync(0xffffffffu, 1); }

// ---- atomics (real atomics: a fiber never interleaves with another of its
// block mid-operation, but several host threads may run blocks one day)
template <typename T>
T atomicAdd(T* p, T v) {
  if constexpr (std::is_floating_point_v<T>) {
    T old = *p, next;
    do {
      next = old + v;
    } while (!__atomic_compare_exchange(p, &old, &next, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
    return old;
  } else {
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
  }
}
template <typename T>
T atomicSub(T* p, T v) {
  return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST);
}
template <typename T>
T atomicExch(T* p, T v) {
  return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST);
}
template <typename T>
T atomicCAS(T* p, T expected, T desired) {
  __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return expected;
}
template <typename T>
T atomicMax(T* p, T v) {
  T old = *p;
  while (old < v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
  }
  return old;
}
template <typename T>
T atomicMin(T* p, T v) {
  T old = *p;
  while (old > v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
  }
  return old;
}

// ---- integer min/max as the device's overloads
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned int min(unsigned int a, unsigned int b) { return a < b ? a : b; }
inline unsigned int max(unsigned int a, unsigned int b) { return a > b ? a : b; }
inline long min(long a, long b) { return a < b ? a : b; }
inline long max(long a, long b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }

// ---- float intrinsics. The _rn forms are single IEEE operations; the
// compiler must not contract them (the .cu files build with -ffp-contract=off).
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __powf(float a, float b) { return powf(a, b); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
inline unsigned int __float_as_uint(float f) {
  unsigned int u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float __uint_as_float(unsigned int u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline int __float_as_int(float f) { return static_cast<int>(__float_as_uint(f)); }
inline float __int_as_float(int i) { return __uint_as_float(static_cast<unsigned int>(i)); }
inline unsigned long long __float2ull_rn(float f) {
  return f <= 0.0f || f != f ? 0ull : static_cast<unsigned long long>(nearbyintf(f));
}
inline int __float2int_rn(float f) { return static_cast<int>(nearbyintf(f)); }
inline int __popc(unsigned int x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned int>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
