// The AVX2 + FMA RowMaxSumExp (sum_exp.h). Only this file is compiled for
// those features (a target pragma, as in backend/cpu/kernels_avx2.cpp), and
// it is called only after checking the CPU.
#include <cstdint>
#include <limits>

#include "sample/sum_exp.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define LLM_HAVE_AVX2_SUM_EXP 1

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif

namespace llm {
namespace {

// exp(x - m) for x <= m in float, about 1 ulp. d = x - m is rounded, so its
// rounding error e is recovered exactly (TwoSum) and added after the
// Cody-Waite reduction d = n ln2 + r, |r| <= ln2/2; then a degree-6
// polynomial for e^(r + e), scaled by 2^n (the CPU kernels' Exp). Without e a
// term at d = -10 would carry 10 times float's rounding error. Below -87 the
// result is 0 (the true value is under 2^-125, nothing next to the max's term
// of 1), and so is it for NaN; exp(0) is exactly 1.
inline __m256 ExpMinus(__m256 x, __m256 m) {
  __m256 d = _mm256_sub_ps(x, m);
  const __m256 bb = _mm256_sub_ps(d, x);
  const __m256 e = _mm256_sub_ps(_mm256_sub_ps(x, _mm256_sub_ps(d, bb)), _mm256_add_ps(m, bb));
  const __m256 keep = _mm256_cmp_ps(d, _mm256_set1_ps(-87.0f), _CMP_GE_OQ);  // false for NaN too
  d = _mm256_max_ps(d, _mm256_set1_ps(-87.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(d, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-0.693359375f), d);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(2.12194440e-4f), r);
  r = _mm256_add_ps(r, e);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i scale = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(scale)), keep);
}

// Adds the 8 floats of v to the 4 + 4 doubles of acc[0], acc[1] (two
// chains, so consecutive adds do not wait on each other).
inline void AddWide(__m256d* acc, __m256 v) {
  acc[0] = _mm256_add_pd(acc[0], _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
  acc[1] = _mm256_add_pd(acc[1], _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

// Values of v equal to m add 1 to their lane of *count, the others exp(v - m)
// to acc[0..1].
inline void AddTerms(__m256d* acc, __m256* count, __m256 v, __m256 m) {
  const __m256 is_max = _mm256_cmp_ps(v, m, _CMP_EQ_OQ);
  *count = _mm256_add_ps(*count, _mm256_and_ps(is_max, _mm256_set1_ps(1.0f)));
  AddWide(acc, _mm256_andnot_ps(is_max, ExpMinus(v, m)));
}

MaxSumExp RowMaxSumExpAvx2(const float* x, int64_t n) {
  const float kNegInf = -std::numeric_limits<float>::infinity();
  // ---- max; _mm256_max_ps(a, b) returns b when a is NaN, so NaN is skipped
  __m256 vm = _mm256_set1_ps(kNegInf);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) vm = _mm256_max_ps(_mm256_loadu_ps(x + i), vm);
  float lanes[8];
  _mm256_storeu_ps(lanes, vm);
  float m = kNegInf;
  for (float v : lanes) m = v > m ? v : m;
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  if (!(m > kNegInf && m < std::numeric_limits<float>::infinity())) return {m, 0.0, 0.0};

  // ---- Σ exp(x - m): values equal to m are counted (their term is 1), the
  // others summed
  const __m256 vmx = _mm256_set1_ps(m);
  __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
  __m256 count = _mm256_setzero_ps();  // exact: at most 2^24 per lane
  for (i = 0; i + 16 <= n; i += 16) {
    AddTerms(acc, &count, _mm256_loadu_ps(x + i), vmx);
    AddTerms(acc + 2, &count, _mm256_loadu_ps(x + i + 8), vmx);
  }
  if (i < n) {  // the tail through the same code; padding is NaN, which adds 0
    float a[16];
    for (int j = 0; j < 16; ++j) a[j] = i + j < n ? x[i + j] : std::numeric_limits<float>::quiet_NaN();
    AddTerms(acc, &count, _mm256_loadu_ps(a), vmx);
    AddTerms(acc + 2, &count, _mm256_loadu_ps(a + 8), vmx);
  }
  double d[4];
  _mm256_storeu_pd(d, _mm256_add_pd(_mm256_add_pd(acc[0], acc[1]), _mm256_add_pd(acc[2], acc[3])));
  _mm256_storeu_ps(lanes, count);
  double n_max = 0.0;
  for (float c : lanes) n_max += c;
  return {m, n_max, (d[0] + d[2]) + (d[1] + d[3])};
}

}  // namespace
}  // namespace llm

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif  // x86-64

namespace llm {

using RowMaxSumExpFn = MaxSumExp (*)(const float*, int64_t);

RowMaxSumExpFn RowMaxSumExpAvx2IfSupported() {
#if defined(LLM_HAVE_AVX2_SUM_EXP)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return &RowMaxSumExpAvx2;
#endif
  return nullptr;
}

}  // namespace llm
