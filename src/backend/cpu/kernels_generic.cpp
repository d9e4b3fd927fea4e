// Portable kernels: the 8-lane vector is a plain array that the compiler may
// vectorise with whatever the baseline ISA offers (SSE2 on x86-64, NEON, ...).
#include <cmath>
#include <cstdint>
#include <cstring>

#include "backend/cpu/kernels.h"
#include "util/fp16.h"
#include "backend/cpu/quant.h"

namespace llm::cpu {
namespace generic {

struct V8 {
  float v[8];
};

#define LLM_V8_LANES(expr) \
  V8 r;                    \
  for (int i = 0; i < 8; ++i) r.v[i] = (expr); \
  return r

inline V8 Zero() { LLM_V8_LANES(0.0f); }
inline V8 Set1(float x) { LLM_V8_LANES(x); }
inline V8 LoadU(const float* p) { LLM_V8_LANES(p[i]); }
inline void StoreU(float* p, V8 a) { std::memcpy(p, a.v, sizeof a.v); }
inline V8 Add(V8 a, V8 b) { LLM_V8_LANES(a.v[i] + b.v[i]); }
inline V8 Sub(V8 a, V8 b) { LLM_V8_LANES(a.v[i] - b.v[i]); }
inline V8 Mul(V8 a, V8 b) { LLM_V8_LANES(a.v[i] * b.v[i]); }
inline V8 Div(V8 a, V8 b) { LLM_V8_LANES(a.v[i] / b.v[i]); }
inline V8 Min(V8 a, V8 b) { LLM_V8_LANES(a.v[i] < b.v[i] ? a.v[i] : b.v[i]); }
inline V8 Max(V8 a, V8 b) { LLM_V8_LANES(a.v[i] > b.v[i] ? a.v[i] : b.v[i]); }
// Unfused multiply-add: hardware FMA is not part of the baseline ISA.
inline V8 Fma(V8 a, V8 b, V8 c) { LLM_V8_LANES(a.v[i] * b.v[i] + c.v[i]); }
inline float ScalarFma(float a, float b, float c) { return a * b + c; }
inline V8 RoundInt(V8 a) { LLM_V8_LANES(std::nearbyint(a.v[i])); }
inline V8 Pow2(V8 n) {
  V8 r;
  for (int i = 0; i < 8; ++i) {
    const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n.v[i]) + 127) << 23;
    std::memcpy(&r.v[i], &bits, 4);
  }
  return r;
}
// Same pairing as the AVX2 version: (lo + hi) halves, then pairs, then the last two.
inline float HSum(V8 a) {
  const float s0 = a.v[0] + a.v[4], s1 = a.v[1] + a.v[5], s2 = a.v[2] + a.v[6], s3 = a.v[3] + a.v[7];
  return (s0 + s2) + (s1 + s3);
}
inline V8 LoadF16(const uint16_t* p) { LLM_V8_LANES(F16ToF32(p[i])); }
inline V8 LoadBF16(const uint16_t* p) { LLM_V8_LANES(BF16ToF32(p[i])); }
inline V8 LoadI8(const int8_t* p) { LLM_V8_LANES(static_cast<float>(p[i])); }
#if defined(__GNUC__) || defined(__clang__)
inline void Prefetch(const void* p) { __builtin_prefetch(p); }
#else
inline void Prefetch(const void*) {}
#endif

#undef LLM_V8_LANES

#include "backend/cpu/kernels_impl.h"

}  // namespace generic

const Kernels& GenericKernels() {
  static const Kernels k = {"generic", generic::MatMulImpl, generic::RmsNormImpl, generic::SiluMulImpl,
                            generic::AttentionImpl, generic::QuantizeActImpl, generic::GeluMulImpl};
  return k;
}

void DequantizeRow(const WeightView& w, int64_t row, float* out) {
  const auto* p = static_cast<const uint8_t*>(w.data) + row * w.row_bytes;
  switch (w.type) {
    case TensorType::F32:
      std::memcpy(out, p, w.cols * sizeof(float));
      break;
    case TensorType::F16: {
      const auto* h = reinterpret_cast<const uint16_t*>(p);
      for (int64_t i = 0; i < w.cols; ++i) out[i] = F16ToF32(h[i]);
      break;
    }
    case TensorType::BF16: {
      const auto* h = reinterpret_cast<const uint16_t*>(p);
      for (int64_t i = 0; i < w.cols; ++i) out[i] = BF16ToF32(h[i]);
      break;
    }
    default:
      DequantizeBlocks(w.type, p, w.cols, out);  // block-quantized
      break;
  }
}

}  // namespace llm::cpu
