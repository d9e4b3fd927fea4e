// AVX2 + FMA + F16C kernels. Only this file is compiled for those features
// (a target pragma, no build flag), and BestKernels() calls into it only after
// checking the CPU, so the library still runs on any x86-64.
//
// Every header is included before the pragma; the code inside the pragma lives
// in its own namespace and uses no std:: templates, so nothing compiled for
// AVX2 can be shared by the linker with code that runs on older CPUs.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "backend/cpu/kernels.h"
#include "util/fp16.h"
#include "backend/cpu/quant.h"
#include "util/env.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define LLM_HAVE_AVX2_KERNELS 1

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

namespace llm::cpu {
namespace avx2 {

using V8 = __m256;

inline V8 Zero() { return _mm256_setzero_ps(); }
inline V8 Set1(float x) { return _mm256_set1_ps(x); }
inline V8 LoadU(const float* p) { return _mm256_loadu_ps(p); }
inline void StoreU(float* p, V8 a) { _mm256_storeu_ps(p, a); }
inline V8 Add(V8 a, V8 b) { return _mm256_add_ps(a, b); }
inline V8 Sub(V8 a, V8 b) { return _mm256_sub_ps(a, b); }
inline V8 Mul(V8 a, V8 b) { return _mm256_mul_ps(a, b); }
inline V8 Div(V8 a, V8 b) { return _mm256_div_ps(a, b); }
inline V8 Min(V8 a, V8 b) { return _mm256_min_ps(a, b); }
inline V8 Max(V8 a, V8 b) { return _mm256_max_ps(a, b); }
inline V8 Fma(V8 a, V8 b, V8 c) { return _mm256_fmadd_ps(a, b, c); }
inline float ScalarFma(float a, float b, float c) {
  return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}
inline V8 RoundInt(V8 a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline V8 Pow2(V8 n) {
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_castsi256_ps(e);
}
inline float HSum(V8 a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));  // (0+4, 1+5, 2+6, 3+7)
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));                                         // (s0+s2, s1+s3, ..)
  s = _mm_add_ss(s, _mm_movehdup_ps(s));                                          // (s0+s2)+(s1+s3)
  return _mm_cvtss_f32(s);
}
inline V8 LoadF16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline V8 LoadI8(const int8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
inline void Prefetch(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0); }
inline V8 LoadBF16(const uint16_t* p) {
  const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
}

#include "backend/cpu/kernels_impl.h"

}  // namespace avx2
}  // namespace llm::cpu

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif  // x86-64

namespace llm::cpu {

const Kernels* Avx2KernelsIfBuilt() {
#if defined(LLM_HAVE_AVX2_KERNELS)
  static const Kernels k = {"avx2", avx2::MatMulImpl, avx2::RmsNormImpl, avx2::SiluMulImpl, avx2::AttentionImpl,
                           avx2::QuantizeActImpl, avx2::GeluMulImpl};
  return &k;
#else
  return nullptr;
#endif
}

#if defined(LLM_HAVE_AVX2_KERNELS)
// clang before 15 rejects __builtin_cpu_supports("f16c"): ask CPUID (leaf 1,
// ECX bit 29) there.
static bool CpuHasF16c() {
#if defined(__clang__) && __clang_major__ < 15
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
#else
  return __builtin_cpu_supports("f16c");
#endif
}
#endif

bool PackedVnniUsable() {
#if defined(LLM_HAVE_AVX2_KERNELS)
  const EnvOptions env = ReadEnv();
  if (env.cpu_isa_generic || env.cpu_isa_avx2) return false;
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

const Kernels& BestKernels() {
  if (ReadEnv().cpu_isa_generic) return GenericKernels();
#if defined(LLM_HAVE_AVX2_KERNELS)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && CpuHasF16c())
    return *Avx2KernelsIfBuilt();
#endif
  return GenericKernels();
}

}  // namespace llm::cpu
