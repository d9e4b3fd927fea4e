// EncoderMatMul (encoder_matmul.h). Only the functions inside the pragma
// are compiled for AVX-512F (+F16C); they run only after the CPU check, and
// they use no std:: templates (nothing the linker could share with code for
// older CPUs), as in kernels_avx2.cpp.
//
//            k →  (16 at a time)
//   W rows  r0 [w w w ... w]      acc[t][r] += x[t][k..k+16] * w[r][k..k+16]
//           r1 ...  (4 rows)
//   tokens  t0 [x x x ... x]      (6 tokens): 24 accumulators, 4 W + 1 X registers
#include "backend/cpu/encoder_matmul.h"

#include <cstdint>
#include <cstring>

#include "util/env.h"
#include "util/fp16.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define LLM_HAVE_AVX512_ENCODER 1

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,f16c,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,f16c,fma")
#endif

namespace llm::cpu {
namespace avx512_encoder {

using V16 = __m512;

struct LoadF32 {
  static V16 Load(const uint8_t* row, int64_t k) { return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + k); }
  static float Scalar(const uint8_t* row, int64_t k) { return reinterpret_cast<const float*>(row)[k]; }
};
struct LoadF16 {
  static V16 Load(const uint8_t* row, int64_t k) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(row) + k)));
  }
  static float Scalar(const uint8_t* row, int64_t k) {
    return _cvtsh_ss(reinterpret_cast<const uint16_t*>(row)[k]);
  }
};
struct LoadBF16 {
  static V16 Load(const uint8_t* row, int64_t k) {
    const __m512i h = _mm512_cvtepu16_epi32(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(row) + k)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
  }
  static float Scalar(const uint8_t* row, int64_t k) {
    const uint32_t bits = static_cast<uint32_t>(reinterpret_cast<const uint16_t*>(row)[k]) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
};

// The 16 lanes summed in a fixed order: halves, then quarters, ... (pairs
// i and i + 8, then i and i + 4, ...).
inline float HSum16(V16 a) {
  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1));  // AVX-512F only
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(a), hi);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float ScalarFma(float a, float b, float c) {
  return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}

template <class WL, int TT, int TR>
void Tile(const uint8_t* w, size_t row_bytes, const float* x, int64_t ld_x, int64_t K, float* y, int64_t ld_y,
          bool accumulate) {
  V16 acc[TT][TR];
  for (int t = 0; t < TT; ++t)
    for (int r = 0; r < TR; ++r) acc[t][r] = _mm512_setzero_ps();
  const int64_t K16 = K & ~int64_t{15};
  for (int64_t k = 0; k < K16; k += 16) {
    V16 wv[TR];
    for (int r = 0; r < TR; ++r) wv[r] = WL::Load(w + r * row_bytes, k);
    for (int t = 0; t < TT; ++t) {
      const V16 xv = _mm512_loadu_ps(x + t * ld_x + k);
      for (int r = 0; r < TR; ++r) acc[t][r] = _mm512_fmadd_ps(xv, wv[r], acc[t][r]);
    }
  }
  for (int t = 0; t < TT; ++t) {
    for (int r = 0; r < TR; ++r) {
      float s = HSum16(acc[t][r]);
      for (int64_t k = K16; k < K; ++k) s = ScalarFma(x[t * ld_x + k], WL::Scalar(w + r * row_bytes, k), s);
      float* dst = y + t * ld_y + r;
      *dst = accumulate ? *dst + s : s;
    }
  }
}

template <class WL, int TT>
void TileRows(int tr, const uint8_t* w, size_t rb, const float* x, int64_t ld_x, int64_t K, float* y, int64_t ld_y,
              bool acc) {
  switch (tr) {
    case 1: Tile<WL, TT, 1>(w, rb, x, ld_x, K, y, ld_y, acc); break;
    case 2: Tile<WL, TT, 2>(w, rb, x, ld_x, K, y, ld_y, acc); break;
    case 3: Tile<WL, TT, 3>(w, rb, x, ld_x, K, y, ld_y, acc); break;
    case 4: Tile<WL, TT, 4>(w, rb, x, ld_x, K, y, ld_y, acc); break;
    default: break;
  }
}

// Tokens tb .. te-1 against rows r .. r+tr-1 (read through WL from w): tiles of 6 tokens, then the rest.
template <class WL>
void SweepTokens(int tr, const uint8_t* w, size_t rb, const MatMulArgs& a, int64_t tb, int64_t te, int64_t r) {
  const int64_t K = a.w->cols;
  int64_t t = tb;
  for (; t + 6 <= te; t += 6)
    TileRows<WL, 6>(tr, w, rb, a.x + t * a.ld_x, a.ld_x, K, a.y + t * a.ld_y + r, a.ld_y, a.accumulate);
  const float* x = a.x + t * a.ld_x;
  float* y = a.y + t * a.ld_y + r;
  switch (te - t) {
    case 1: TileRows<WL, 1>(tr, w, rb, x, a.ld_x, K, y, a.ld_y, a.accumulate); break;
    case 2: TileRows<WL, 2>(tr, w, rb, x, a.ld_x, K, y, a.ld_y, a.accumulate); break;
    case 3: TileRows<WL, 3>(tr, w, rb, x, a.ld_x, K, y, a.ld_y, a.accumulate); break;
    case 4: TileRows<WL, 4>(tr, w, rb, x, a.ld_x, K, y, a.ld_y, a.accumulate); break;
    case 5: TileRows<WL, 5>(tr, w, rb, x, a.ld_x, K, y, a.ld_y, a.accumulate); break;
    default: break;
  }
}

// Blocks of 60 tokens keep X warm (L2) while the row tiles sweep it; the
// 4 rows of a tile stay in L1 across its 10 token tiles. (Widening F16 rows
// to F32 once per block instead of in every tile measured no faster.)
template <class WL>
void MatMul(const MatMulArgs& a) {
  const auto* base = static_cast<const uint8_t*>(a.w->data);
  const size_t rb = a.w->row_bytes;
  constexpr int64_t kTokBlock = 60;  // whole tiles of 6
  for (int64_t tb = 0; tb < a.n_tok; tb += kTokBlock) {
    const int64_t te = tb + kTokBlock < a.n_tok ? tb + kTokBlock : a.n_tok;
    for (int64_t r = a.row_begin; r < a.row_end; r += 4) {
      const int tr = static_cast<int>(a.row_end - r < 4 ? a.row_end - r : 4);
      SweepTokens<WL>(tr, base + r * rb, rb, a, tb, te, r);
    }
  }
}

void MatMulAny(const MatMulArgs& a) {
  switch (a.w->type) {
    case ::llm::TensorType::F16: MatMul<LoadF16>(a); break;
    case ::llm::TensorType::BF16: MatMul<LoadBF16>(a); break;
    default: MatMul<LoadF32>(a); break;
  }
}

}  // namespace avx512_encoder
}  // namespace llm::cpu

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif  // x86-64

namespace llm::cpu {

bool EncoderMatMulAvx512() {
#if defined(LLM_HAVE_AVX512_ENCODER)
  static const bool use = [] {
    const EnvOptions env = ReadEnv();
    if (env.cpu_isa_generic || env.cpu_isa_avx2) return false;
    __builtin_cpu_init();
    // Every AVX-512F CPU has F16C (clang before 15 cannot ask for "f16c" here).
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
  }();
  return use;
#else
  return false;
#endif
}

void EncoderMatMul(const Kernels& kernels, const MatMulArgs& a) {
#if defined(LLM_HAVE_AVX512_ENCODER)
  const TensorType t = a.w->type;
  if ((t == TensorType::F32 || t == TensorType::F16 || t == TensorType::BF16) && EncoderMatMulAvx512()) {
    avx512_encoder::MatMulAny(a);
    return;
  }
#endif
  kernels.matmul(a);
}

}  // namespace llm::cpu
