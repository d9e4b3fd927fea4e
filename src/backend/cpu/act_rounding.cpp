// llama.cpp's activation roundings as BlockQ8Act (act_rounding.h).
#include "backend/cpu/act_rounding.h"

#include <algorithm>
#include <cmath>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "backend/cpu/kernels.h"
#include "backend/kv_rotation.h"
#include "util/fp16.h"

namespace llm::cpu {

ActRounding PeerActRounding(TensorType type) {
  switch (type) {
    case TensorType::Q4_0:
    case TensorType::Q5_0:
    case TensorType::Q8_0:
    case TensorType::IQ4_NL:
    case TensorType::MXFP4: return ActRounding::kQ8_0;
    case TensorType::Q4_1:
    case TensorType::Q5_1: return ActRounding::kQ8_1;
    case TensorType::Q2_K:
    case TensorType::Q3_K:
    case TensorType::Q4_K:
    case TensorType::Q5_K:
    case TensorType::Q6_K:
    case TensorType::IQ1_S:
    case TensorType::IQ1_M:
    case TensorType::IQ2_XXS:
    case TensorType::IQ2_XS:
    case TensorType::IQ2_S:
    case TensorType::IQ3_XXS:
    case TensorType::IQ3_S:
    case TensorType::IQ4_XS:
    case TensorType::TQ1_0:
    case TensorType::TQ2_0: return ActRounding::kQ8_K;
    default: return ActRounding::kOwn;
  }
}

namespace {

// d = max|x| / 127 as F16 (32 values), q = x · (127 / max|x|) to nearest
// even. Q8_1's sum is F16 too, made from the F32 d before its rounding.
void RoundBlock32F16Scale(const float* v, BlockQ8Act& q, bool q8_1) {
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(v[i]));
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  const float d = amax / 127.0f;
  q.d = F16ToF32(F32ToF16(d));
  int32_t sum = 0;
  for (int i = 0; i < 32; ++i) sum += q.qs[i] = static_cast<int8_t>(std::nearbyint(v[i] * id));
  q.s = q8_1 ? F16ToF32(F32ToF16(d * static_cast<float>(sum))) : q.d * static_cast<float>(sum);
}

}  // namespace

void QuantizeRowAsQ8_0(const float* x, int64_t n, BlockQ8Act* out) {
  for (int64_t b = 0; b < n / 32; ++b) RoundBlock32F16Scale(x + 32 * b, out[b], false);
}

void QuantizeRowAsQ8_1(const float* x, int64_t n, BlockQ8Act* out) {
  for (int64_t b = 0; b < n / 32; ++b) RoundBlock32F16Scale(x + 32 * b, out[b], true);
}

namespace {

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// QuantizeRowAsQ8_K 8 values at a time (it runs on the calling thread for
// every token of every matmul of the K and lattice types: scalar, with
// nearbyint a libm call in this baseline-x86-64 file, it was 5% of a 1B
// IQ3_XXS model's 128-token prefill on one thread). The same values: max|x|
// is order-free (a NaN |x|, maxps's first operand, is skipped like the scalar
// loop's failed compare), m the first value of that magnitude, the products
// the same F32 multiplies, roundps to nearest even as nearbyint, minps(r,
// 127) 127 for a NaN as std::min(127, r), the quants within int8.
__attribute__((target("avx2"))) void QuantizeRowAsQ8_KAvx2(const float* x, int64_t n, BlockQ8Act* out) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  for (int64_t b = 0; b < n / 256; ++b) {
    const float* v = x + 256 * b;
    BlockQ8Act* o = out + 8 * b;
    __m256 mx = _mm256_setzero_ps();
    for (int i = 0; i < 256; i += 8) mx = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(v + i), abs_mask), mx);
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
    const float amax = _mm_cvtss_f32(m4);
    float m = 0.0f;
    if (amax != 0.0f) {
      for (int i = 0; i < 256; ++i) {
        if (std::fabs(v[i]) == amax) {
          m = v[i];
          break;
        }
      }
    }
    const float iscale = amax != 0.0f ? -127.0f / m : 0.0f;
    const float d = amax != 0.0f ? 1.0f / iscale : 0.0f;
    const __m256 is = _mm256_set1_ps(iscale), c127 = _mm256_set1_ps(127.0f);
    for (int j = 0; j < 8; ++j) {
      __m256i q[4];
      for (int k = 0; k < 4; ++k) {
        const __m256 r = _mm256_round_ps(_mm256_mul_ps(is, _mm256_loadu_ps(v + 32 * j + 8 * k)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        q[k] = _mm256_cvtps_epi32(_mm256_min_ps(r, c127));
      }
      const __m256i s32 = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
      __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
      // int32 -> int8 (no saturation: within +-127); the packs interleave
      // the 128-bit lanes, the permute puts the 4-byte groups back in order
      const __m256i b8 = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o[j].qs),
                          _mm256_permutevar8x32_epi32(b8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
      o[j].d = d;
      o[j].s = d * static_cast<float>(_mm_cvtsi128_si32(s4));
    }
  }
}

// Whether the kernels' own dispatch picked the AVX2 set (the CPU has AVX2,
// FMA and F16C, and LLM_CPU_ISA does not cap it): the vector roundings
// here need no more, and give the same bits as the portable code.
bool SimdRounding() {
  static const bool simd = &BestKernels() != &GenericKernels();
  return simd;
}
#endif

}  // namespace

// Per 256 values: m = the value of largest magnitude (the first such),
// iscale = -127 / m, q = min(127, round(iscale · x)), d = 1 / iscale; the
// eight 32-value blocks share d.
void QuantizeRowAsQ8_K(const float* x, int64_t n, BlockQ8Act* out) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (SimdRounding()) {
    QuantizeRowAsQ8_KAvx2(x, n, out);
    return;
  }
#endif
  QuantizeRowAsQ8_KScalar(x, n, out);
}

void QuantizeRowAsQ8_KScalar(const float* x, int64_t n, BlockQ8Act* out) {
  for (int64_t b = 0; b < n / 256; ++b) {
    const float* v = x + 256 * b;
    BlockQ8Act* o = out + 8 * b;
    float amax = 0.0f, m = 0.0f;
    for (int i = 0; i < 256; ++i)
      if (std::fabs(v[i]) > amax) amax = std::fabs(v[i]), m = v[i];
    const float iscale = amax != 0.0f ? -127.0f / m : 0.0f;
    const float d = amax != 0.0f ? 1.0f / iscale : 0.0f;
    for (int j = 0; j < 8; ++j) {
      int32_t sum = 0;
      for (int i = 0; i < 32; ++i) {
        const float r = std::nearbyint(iscale * v[32 * j + i]);
        sum += o[j].qs[i] = static_cast<int8_t>(std::min(127.0f, r));
      }
      o[j].d = d;
      o[j].s = d * static_cast<float>(sum);
    }
  }
}

DenseActRounding PeerDenseActRounding(const WeightView* const* ws, int n_ws) {
  if (n_ws == 0) return DenseActRounding::kNone;
  const TensorType t = ws[0]->type;
  if (t != TensorType::F16 && t != TensorType::BF16) return DenseActRounding::kNone;
  for (int j = 1; j < n_ws; ++j)
    if (ws[j]->type != t) return DenseActRounding::kNone;
  return t == TensorType::F16 ? DenseActRounding::kF16 : DenseActRounding::kBF16;
}

namespace {

// This file is built for any x86-64, without F16C: the integer conversion
// takes about 5 ns a value, a few percent of a 1B model's prefill on one
// thread and more beside many threads' matmuls (it runs on the calling
// thread), so CPUs with F16C convert 8 at a time (the same nearest-even
// result, tests/test_act_rounding.cpp).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx,f16c"))) void RoundAsF16F16c(const float* x, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT)));
  for (; i < n; ++i) out[i] = F16ToF32Portable(F32ToF16Portable(x[i]));
}
#endif

}  // namespace

// ggml's conversions round to nearest even (F16C's vcvtps2ph with imm 0, or
// its integer code; GGML_FP32_TO_BF16 adds 0x7fff + the kept low bit), as
// F32ToF16 and F32ToBf16 do; values past F16's range become infinities in both.
void RoundDenseAct(DenseActRounding r, const float* x, int64_t n, float* out) {
  switch (r) {
    case DenseActRounding::kNone:
      for (int64_t i = 0; i < n; ++i) out[i] = x[i];
      return;
    case DenseActRounding::kF16:
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
      if (SimdRounding()) {
        RoundAsF16F16c(x, n, out);
        return;
      }
#endif
      for (int64_t i = 0; i < n; ++i) out[i] = F16ToF32(F32ToF16(x[i]));
      return;
    case DenseActRounding::kBF16:
      for (int64_t i = 0; i < n; ++i) out[i] = Bf16ToF32(F32ToBf16(x[i]));
      return;
  }
}

const float* RoundDenseInput(const WeightView* const* ws, int n_ws, const float* x, int64_t n, bool own,
                             std::vector<float>* scratch) {
  const DenseActRounding r = own ? DenseActRounding::kNone : PeerDenseActRounding(ws, n_ws);
  if (r == DenseActRounding::kNone) return x;
  if (scratch->size() < static_cast<size_t>(n)) scratch->resize(static_cast<size_t>(n));
  RoundDenseAct(r, x, n, scratch->data());
  return scratch->data();
}

QueryRounding PeerQueryRounding(TensorType k_type, int64_t head_dim, int64_t k_rotation, bool own) {
  QueryRounding r;
  r.q8_0 = !own && head_dim > 0 && head_dim % 32 == 0 && PeerActRounding(k_type) == ActRounding::kQ8_0;
  r.basis = r.q8_0 && k_rotation == 0 ? KvRotationK(head_dim) : 0;
  return r;
}

void RoundAsQ8_0InPlace(float* x, int64_t n) {
  BlockQ8Act b;
  for (int64_t i = 0; i + 32 <= n; i += 32) {
    QuantizeRowAsQ8_0(x + i, 32, &b);
    for (int j = 0; j < 32; ++j) x[i + j] = b.d * static_cast<float>(b.qs[j]);
  }
}

void RoundQueryAsQ8_0(float* q, int64_t n, int64_t basis) {
  HadamardRotate(q, n, basis);  // basis 0: nothing
  RoundAsQ8_0InPlace(q, n);
  HadamardRotate(q, n, basis);  // H · H = I
}

}  // namespace llm::cpu
