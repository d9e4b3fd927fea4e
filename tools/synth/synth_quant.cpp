#include "synth_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "util/fp16.h"

namespace llm::synth {
namespace {

void PutF16(char* p, float v) {
  const uint16_t h = F32ToF16(v);
  std::memcpy(p, &h, 2);
}

int Clamp(long v, int lo, int hi) { return static_cast<int>(std::min<long>(hi, std::max<long>(lo, v))); }

// value = d * 32 * q - dmin * 32 with every sub-block's scale and minimum 32:
// grid step stddev / 2, q = 7.5 the zero.
void EncodeQ4K(const float* x, float stddev, char* b) {
  const float step = stddev / 2.0f;
  PutF16(b, step / 32.0f);
  PutF16(b + 2, 7.5f * step / 32.0f);
  auto* sc = reinterpret_cast<uint8_t*>(b + 4);
  // 6-bit scale/min 32 (0b10'0000) for all 8 sub-blocks in the packing of
  // model/tensor_type.h: bytes 0..7 hold the low 6 bits and, in their top 2,
  // the high bits of sub-blocks 4..7; bytes 8..11 their low nibbles (0).
  for (int j = 0; j < 8; ++j) sc[j] = 32 | (2 << 6);
  for (int j = 8; j < 12; ++j) sc[j] = 0;
  auto* qs = reinterpret_cast<uint8_t*>(b + 16);
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) {
      const int lo = Clamp(std::lround(x[64 * c + l] / step + 7.5f), 0, 15);
      const int hi = Clamp(std::lround(x[64 * c + 32 + l] / step + 7.5f), 0, 15);
      qs[32 * c + l] = static_cast<uint8_t>(lo | hi << 4);
    }
}

// value = d * 16 * (q - 32): grid step stddev / 8.
void EncodeQ6K(const float* x, float stddev, char* b) {
  const float step = stddev / 8.0f;
  auto* ql = reinterpret_cast<uint8_t*>(b);
  auto* qh = reinterpret_cast<uint8_t*>(b + 128);
  std::memset(b, 0, 192);
  auto* scales = reinterpret_cast<int8_t*>(b + 192);
  for (int i = 0; i < 16; ++i) scales[i] = 16;
  PutF16(b + 208, step / 16.0f);
  for (int h = 0; h < 2; ++h)
    for (int k = 0; k < 4; ++k)
      for (int l = 0; l < 32; ++l) {
        const int q = Clamp(std::lround(x[128 * h + 32 * k + l] / step) + 32, 0, 63);
        uint8_t& low = ql[64 * h + l + (k & 1) * 32];
        low = static_cast<uint8_t>(low | (k < 2 ? (q & 0xF) : (q & 0xF) << 4));
        qh[32 * h + l] = static_cast<uint8_t>(qh[32 * h + l] | ((q >> 4) & 3) << (2 * k));
      }
}

void EncodeQ8_0(const float* x, char* b) {
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  PutF16(b, d);
  for (int i = 0; i < 32; ++i)
    b[2 + i] = static_cast<char>(d > 0.0f ? Clamp(std::lround(x[i] / d), -127, 127) : 0);
}

// The nearest of the 16 values d · kIQ4NLValues[k] to x.
int NearestIQ4(float x, float d) {
  int best = 0;
  float err = std::fabs(x - d * kIQ4NLValues[0]);
  for (int k = 1; k < 16; ++k) {
    const float e = std::fabs(x - d * kIQ4NLValues[k]);
    if (e < err) err = e, best = k;
  }
  return best;
}

// 32 weights as IQ4 indices under scale d, in the nibble order of Q4_0.
void PutIQ4(const float* x, float d, uint8_t* qs) {
  for (int j = 0; j < 16; ++j)
    qs[j] = static_cast<uint8_t>(NearestIQ4(x[j], d) | NearestIQ4(x[j + 16], d) << 4);
}

float AbsMax(const float* x, int n) {
  float m = 0.0f;
  for (int i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}

// d = max|x| / 127 (the largest value meets ±127 or 113).
void EncodeIQ4NL(const float* x, char* b) {
  const uint16_t dh = F32ToF16(AbsMax(x, 32) / 127.0f);
  std::memcpy(b, &dh, 2);
  PutIQ4(x, F16ToF32(dh), reinterpret_cast<uint8_t*>(b + 2));
}

// MXFP4 (gpt-oss's experts): the shared exponent puts the block's largest
// weight in E2M1's top octave, e = floor(log2 max|x|) - 2 + 127 (as OCP's
// microscaling rule and gpt-oss's checkpoints), and each weight takes the
// nearest E2M1 code (the largest ones clamp to ±6).
void EncodeMXFP4(const float* x, char* b) {
  const float amax = AbsMax(x, 32);
  const int e = amax > 0.0f ? Clamp(static_cast<int>(std::floor(std::log2(amax))) - 2 + 127, 1, 254) : 0;
  const float d = MXFP4Scale(static_cast<uint8_t>(e));  // the codebook holds the values doubled
  b[0] = static_cast<char>(e);
  auto nearest = [&](float v) {
    int best = 0;
    for (int c = 1; c < 16; ++c)
      if (std::fabs(d * kE2M1Values[c] - v) < std::fabs(d * kE2M1Values[best] - v)) best = c;
    return best;
  };
  for (int j = 0; j < 16; ++j)
    b[1 + j] = static_cast<char>(nearest(x[j]) | nearest(x[j + 16]) << 4);
}

// Sub-block j's scale max|x_j| / 127 as d · (ls_j - 32), ls_j in [32, 63].
void EncodeIQ4XS(const float* x, char* b) {
  float s[8], smax = 0.0f;
  for (int j = 0; j < 8; ++j) smax = std::max(smax, s[j] = AbsMax(x + 32 * j, 32) / 127.0f);
  const uint16_t dh = F32ToF16(smax / 31.0f);
  const float d = F16ToF32(dh);
  uint16_t sh = 0;
  auto* sl = reinterpret_cast<uint8_t*>(b + 4);
  std::memset(sl, 0, 4);
  for (int j = 0; j < 8; ++j) {
    const int ls = d > 0.0f ? Clamp(std::lround(s[j] / d), 0, 31) + 32 : 32;
    sl[j / 2] = static_cast<uint8_t>(sl[j / 2] | (ls & 0xF) << (4 * (j % 2)));
    sh = static_cast<uint16_t>(sh | (ls >> 4) << (2 * j));
    PutIQ4(x + 32 * j, d * static_cast<float>(ls - 32), reinterpret_cast<uint8_t*>(b + 8 + 16 * j));
  }
  std::memcpy(b, &dh, 2);
  std::memcpy(b + 2, &sh, 2);
}

// The 2-bit fields of 256 quants q (0..3) in Q3_K's / Q2_K's order: weight
// 32j + l (j = 4h + s) at bits 2s of byte 32h + l.
void Put2Bits(const int* q, uint8_t* qs) {
  std::memset(qs, 0, 64);
  for (int j = 0; j < 8; ++j)
    for (int l = 0; l < 32; ++l) qs[32 * (j / 4) + l] |= static_cast<uint8_t>((q[32 * j + l] & 3) << (2 * (j % 4)));
}

// Group g's scale max|x_g| / 4 as d · sc_g, sc_g in [0, 31] (stored + 32).
void EncodeQ3K(const float* x, char* b) {
  float s[16], smax = 0.0f;
  for (int g = 0; g < 16; ++g) smax = std::max(smax, s[g] = AbsMax(x + 16 * g, 16) / 4.0f);
  const uint16_t dh = F32ToF16(smax / 31.0f);
  const float d = F16ToF32(dh);
  auto* u = reinterpret_cast<uint8_t*>(b);
  std::memset(u, 0, 110);
  int q[256], low[256];
  for (int g = 0; g < 16; ++g) {
    const int sc = d > 0.0f ? Clamp(std::lround(s[g] / d), 0, 31) : 0;
    const float dl = d * static_cast<float>(sc);
    const int stored = sc + 32;
    u[96 + g % 8] = static_cast<uint8_t>(u[96 + g % 8] | (stored & 0xF) << (4 * (g / 8)));
    u[104 + g % 4] = static_cast<uint8_t>(u[104 + g % 4] | (stored >> 4) << (2 * (g / 4)));
    for (int l = 0; l < 16; ++l) {
      const int i = 16 * g + l;
      q[i] = dl > 0.0f ? Clamp(std::lround(x[i] / dl), -4, 3) : 0;
      low[i] = q[i] >= 0 ? q[i] : q[i] + 4;
      if (q[i] >= 0) u[i % 32] = static_cast<uint8_t>(u[i % 32] | 1 << (i / 32));  // the high bit: no -4
    }
  }
  Put2Bits(low, u + 32);
  std::memcpy(b + 108, &dh, 2);
}

// Group g: minimum max(0, -min x_g) = dmin · m_g and scale (max - min) / 3 =
// d · sc_g, both 4-bit; q = round((x + dmin · m_g) / (d · sc_g)) in [0, 3].
void EncodeQ2K(const float* x, char* b) {
  float sc[16], mn[16], scmax = 0.0f, mnmax = 0.0f;
  for (int g = 0; g < 16; ++g) {
    float lo = 0.0f, hi = 0.0f;
    for (int l = 0; l < 16; ++l) lo = std::min(lo, x[16 * g + l]), hi = std::max(hi, x[16 * g + l]);
    mn[g] = -lo;
    sc[g] = (hi - lo) / 3.0f;
    scmax = std::max(scmax, sc[g]);
    mnmax = std::max(mnmax, mn[g]);
  }
  const uint16_t dh = F32ToF16(scmax / 15.0f), mh = F32ToF16(mnmax / 15.0f);
  const float d = F16ToF32(dh), dmin = F16ToF32(mh);
  auto* u = reinterpret_cast<uint8_t*>(b);
  int q[256];
  for (int g = 0; g < 16; ++g) {
    const int isc = d > 0.0f ? Clamp(std::lround(sc[g] / d), 0, 15) : 0;
    const int imn = dmin > 0.0f ? Clamp(std::lround(mn[g] / dmin), 0, 15) : 0;
    u[g] = static_cast<uint8_t>(isc | imn << 4);
    const float dl = d * static_cast<float>(isc), ml = dmin * static_cast<float>(imn);
    for (int l = 0; l < 16; ++l) q[16 * g + l] = dl > 0.0f ? Clamp(std::lround((x[16 * g + l] + ml) / dl), 0, 3) : 0;
  }
  Put2Bits(q, u + 16);
  std::memcpy(b + 80, &dh, 2);
  std::memcpy(b + 82, &mh, 2);
}

// ---- the lattice types (IQ2_XXS, IQ2_XS, IQ3_XXS; model/tensor_type.h)
//
// A plain quantizer: d from the super-block's largest weight, each scale s
// from its group's largest, then per 8 weights (IQ3: per 4) the lattice
// point nearest to their magnitudes, and their signs, the smallest weight's
// flipped when the count of negatives is odd (the format keeps it even).

// Index of the point of `grid` (n points of `width` magnitudes, byte l of
// word k) nearest to a[0 .. width) / step.
template <class Word>
int NearestPoint(const Word* grid, int n, int width, const float* a, float step) {
  int best = 0;
  float best_err = INFINITY;
  for (int k = 0; k < n; ++k) {
    float err = 0;
    for (int l = 0; l < width; ++l) {
      const float e = a[l] - step * static_cast<float>((grid[k] >> (8 * l)) & 0xFF);
      err += e * e;
    }
    if (err < best_err) best_err = err, best = k;
  }
  return best;
}

// The 7-bit sign index of 8 weights (bit l: weight l negative), with the
// smallest one's sign flipped if needed to make the negatives even.
int SignIndex(const float* x) {
  int bits = 0, smallest = 0;
  for (int l = 0; l < 8; ++l) {
    if (x[l] < 0) bits |= 1 << l;
    if (std::fabs(x[l]) < std::fabs(x[smallest])) smallest = l;
  }
  if (__builtin_popcount(bits) & 1) bits ^= 1 << smallest;
  return bits & 127;
}

// One super-block: groups of `group` weights share a 4-bit scale s, the value
// is d * unit * (2s + 1) * magnitude; gmax the lattice's largest magnitude.
// Writes d and returns the scales (and the per-group steps d·unit·(2s+1)).
float LatticeScales(const float* x, int group, float unit, float gmax, int* s, float* step) {
  float amax = AbsMax(x, 256);
  const float d = amax / (unit * 31.0f * gmax);
  const float dh = F16ToF32(F32ToF16(d));
  for (int g = 0; g < 256 / group; ++g) {
    const float gm = AbsMax(x + group * g, group);
    s[g] = dh > 0 ? Clamp(std::lround((gm / (dh * unit * gmax) - 1.0f) / 2.0f), 0, 15) : 0;
    step[g] = dh * unit * static_cast<float>(2 * s[g] + 1);
  }
  return d;
}

// The signs of 8 weights as a byte (bit l: weight l negative).
int SignBits(const float* x) {
  int bits = 0;
  for (int l = 0; l < 8; ++l) bits |= (x[l] < 0) << l;
  return bits;
}

void EncodeIQ2(TensorType t, const float* x, char* b) {
  const bool xxs = t == TensorType::IQ2_XXS, s2 = t == TensorType::IQ2_S;
  int s[16];
  float step[16];
  PutF16(b, LatticeScales(x, xxs ? 32 : 16, kIQ2Unit, 43.0f, s, step));
  auto* q = reinterpret_cast<uint8_t*>(b + 2);
  for (int ib = 0; ib < 8; ++ib) {
    uint32_t aux = xxs ? static_cast<uint32_t>(s[ib]) << 28 : 0;
    for (int l = 0; l < 4; ++l) {
      const float* w = x + 32 * ib + 8 * l;
      float a[8];
      for (int k = 0; k < 8; ++k) a[k] = std::fabs(w[k]);
      if (s2) {  // IQ2_S: 10-bit index (low byte, 2 bits in qh), explicit sign byte
        const int idx = NearestPoint(kIQ2SGrid, 1024, 8, a, step[2 * ib + l / 2]);
        q[4 * ib + l] = static_cast<uint8_t>(idx);
        q[64 + ib] = static_cast<uint8_t>(q[64 + ib] | (idx >> 8) << (2 * l));
        q[32 + 4 * ib + l] = static_cast<uint8_t>(SignBits(w));
      } else if (!xxs) {  // IQ2_XS: u16 of 9-bit index | sign index << 9
        const int v = NearestPoint(kIQ2XSGrid, 512, 8, a, step[2 * ib + l / 2]) | SignIndex(w) << 9;
        q[8 * ib + 2 * l] = static_cast<uint8_t>(v), q[8 * ib + 2 * l + 1] = static_cast<uint8_t>(v >> 8);
      } else {
        q[8 * ib + l] = static_cast<uint8_t>(NearestPoint(kIQ2XXSGrid, 256, 8, a, step[ib]));
        aux |= static_cast<uint32_t>(SignIndex(w)) << (7 * l);
      }
    }
    if (xxs) {
      std::memcpy(q + 8 * ib + 4, &aux, 4);
    } else {
      q[(s2 ? 72 : 64) + ib] = static_cast<uint8_t>(s[2 * ib] | s[2 * ib + 1] << 4);  // scales
    }
  }
}

// IQ3_XXS (index bytes, sign indices and scale in a u32 per sub-block) and
// IQ3_S (9-bit indices, sign bytes, scale nibbles).
void EncodeIQ3(TensorType t, const float* x, char* b) {
  const bool xxs = t == TensorType::IQ3_XXS;
  int s[8];
  float step[8];
  PutF16(b, LatticeScales(x, 32, xxs ? kIQ3Unit : kIQ3SUnit, xxs ? 62.0f : 15.0f, s, step));
  auto* q = reinterpret_cast<uint8_t*>(b + 2);
  for (int ib = 0; ib < 8; ++ib) {
    uint32_t aux = static_cast<uint32_t>(s[ib]) << 28;
    for (int l = 0; l < 4; ++l) {
      const float* w = x + 32 * ib + 8 * l;
      float a[8];
      for (int k = 0; k < 8; ++k) a[k] = std::fabs(w[k]);
      for (int h = 0; h < 2; ++h) {
        const int k = 8 * ib + 2 * l + h;
        if (xxs) {
          q[k] = static_cast<uint8_t>(NearestPoint(kIQ3XXSGrid, 256, 4, a + 4 * h, step[ib]));
        } else {
          const int idx = NearestPoint(kIQ3SGrid, 512, 4, a + 4 * h, step[ib]);
          q[k] = static_cast<uint8_t>(idx);
          q[64 + ib] = static_cast<uint8_t>(q[64 + ib] | (idx >> 8) << (2 * l + h));
        }
      }
      if (xxs) {
        aux |= static_cast<uint32_t>(SignIndex(w)) << (7 * l);
      } else {
        q[72 + 4 * ib + l] = static_cast<uint8_t>(SignBits(w));
      }
    }
    if (xxs) {
      std::memcpy(q + 64 + 4 * ib, &aux, 4);
    } else if (ib % 2 == 1) {
      q[104 + ib / 2] = static_cast<uint8_t>(s[ib - 1] | s[ib] << 4);
    }
  }
}

bool UseMoreBits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

}  // namespace

size_t EncodedBytes(TensorType t, int64_t n) {
  int64_t be = 1, bb = 4;
  TensorTypeLayout(t, &be, &bb);
  return static_cast<size_t>(n / be * bb);
}

void EncodeQuant(TensorType t, const float* src, int64_t n, float stddev, char* dst) {
  switch (t) {
    case TensorType::F32:  // a mix's unquantized tensor (the MoE router)
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case TensorType::Q4_K:
      for (int64_t i = 0; i < n / 256; ++i) EncodeQ4K(src + 256 * i, stddev, dst + 144 * i);
      return;
    case TensorType::Q6_K:
      for (int64_t i = 0; i < n / 256; ++i) EncodeQ6K(src + 256 * i, stddev, dst + 210 * i);
      return;
    case TensorType::Q8_0:
      for (int64_t i = 0; i < n / 32; ++i) EncodeQ8_0(src + 32 * i, dst + 34 * i);
      return;
    case TensorType::Q3_K:
      for (int64_t i = 0; i < n / 256; ++i) EncodeQ3K(src + 256 * i, dst + 110 * i);
      return;
    case TensorType::Q2_K:
      for (int64_t i = 0; i < n / 256; ++i) EncodeQ2K(src + 256 * i, dst + 84 * i);
      return;
    case TensorType::IQ4_NL:
      for (int64_t i = 0; i < n / 32; ++i) EncodeIQ4NL(src + 32 * i, dst + 18 * i);
      return;
    case TensorType::MXFP4:
      for (int64_t i = 0; i < n / 32; ++i) EncodeMXFP4(src + 32 * i, dst + 17 * i);
      return;
    case TensorType::IQ4_XS:
      for (int64_t i = 0; i < n / 256; ++i) EncodeIQ4XS(src + 256 * i, dst + 136 * i);
      return;
    case TensorType::IQ2_XXS:
    case TensorType::IQ2_XS:
    case TensorType::IQ2_S:
    case TensorType::IQ3_XXS:
    case TensorType::IQ3_S: {
      const size_t bb = EncodedBytes(t, 256);
      std::memset(dst, 0, EncodedBytes(t, n));  // the bit fields are or-ed in
      for (int64_t i = 0; i < n / 256; ++i) {
        if (t == TensorType::IQ3_XXS || t == TensorType::IQ3_S) {
          EncodeIQ3(t, src + 256 * i, dst + bb * i);
        } else {
          EncodeIQ2(t, src + 256 * i, dst + bb * i);
        }
      }
      return;
    }
    default: {  // F16
      auto* d = reinterpret_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = F32ToF16(src[i]);
    }
  }
}

TensorType Q4KMType(const std::string& name, int layer, int n_layer, int64_t cols) {
  TensorType t = TensorType::Q4_K;
  if (name == "output.weight") {
    t = TensorType::Q6_K;
  } else if (name.find("ffn_gate_inp") != std::string::npos) {
    return TensorType::F32;  // the MoE router: llama.cpp's quantizer leaves it F32
  } else if (layer >= 0 && (name.find("attn_v.weight") != std::string::npos ||
                            name.find("ffn_down") != std::string::npos)) {  // ffn_down, _exps, _shexp
    t = UseMoreBits(layer, n_layer) ? TensorType::Q6_K : TensorType::Q4_K;
  }
  if (cols % 256 != 0) t = cols % 32 == 0 ? TensorType::Q8_0 : TensorType::F16;
  return t;
}

}  // namespace llm::synth

namespace llm::synth {

TensorType LowBitType(const std::string& name, int64_t cols) {
  auto is = [&](const char* part) { return name.find(part) != std::string::npos; };
  TensorType t = TensorType::IQ4_XS;
  if (name == "output.weight") {
    t = TensorType::Q6_K;
  } else if (is("attn_v.weight")) {
    t = TensorType::IQ4_NL;
  } else if (is("attn_q.weight") || is("attn_k.weight")) {
    t = TensorType::Q3_K;
  } else if (is("ffn_gate.weight") || is("ffn_up.weight")) {
    t = TensorType::Q2_K;
  }
  if (cols % 256 != 0) t = cols % 32 == 0 ? TensorType::IQ4_NL : TensorType::F16;
  return t;
}

TensorType IQMixType(const std::string& name, int64_t cols) {
  auto is = [&](const char* part) { return name.find(part) != std::string::npos; };
  TensorType t = TensorType::IQ3_XXS;
  if (name == "output.weight") {
    t = TensorType::Q6_K;
  } else if (is("attn_v.weight")) {
    t = TensorType::IQ2_XS;
  } else if (is("attn_output.weight")) {
    t = TensorType::IQ3_S;
  } else if (is("ffn_down.weight")) {
    t = TensorType::IQ2_S;
  } else if (is("ffn_gate.weight") || is("ffn_up.weight")) {
    t = TensorType::IQ2_XXS;
  }
  if (cols % 256 != 0) t = cols % 32 == 0 ? TensorType::IQ4_NL : TensorType::F16;
  return t;
}

}  // namespace llm::synth
