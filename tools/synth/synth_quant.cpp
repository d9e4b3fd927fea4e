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

bool UseMoreBits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

}  // namespace

size_t EncodedBytes(TensorType t, int64_t n) {
  int64_t be = 1, bb = 4;
  TensorTypeLayout(t, &be, &bb);
  return static_cast<size_t>(n / be * bb);
}

void EncodeQuant(TensorType t, const float* src, int64_t n, float stddev, char* dst) {
  switch (t) {
    case TensorType::Q4_K:
      for (int64_t i = 0; i < n / 256; ++i) EncodeQ4K(src + 256 * i, stddev, dst + 144 * i);
      return;
    case TensorType::Q6_K:
      for (int64_t i = 0; i < n / 256; ++i) EncodeQ6K(src + 256 * i, stddev, dst + 210 * i);
      return;
    case TensorType::Q8_0:
      for (int64_t i = 0; i < n / 32; ++i) EncodeQ8_0(src + 32 * i, dst + 34 * i);
      return;
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
  } else if (layer >= 0 && (name.find("attn_v.weight") != std::string::npos ||
                            name.find("ffn_down.weight") != std::string::npos)) {
    t = UseMoreBits(layer, n_layer) ? TensorType::Q6_K : TensorType::Q4_K;
  }
  if (cols % 256 != 0) t = cols % 32 == 0 ? TensorType::Q8_0 : TensorType::F16;
  return t;
}

}  // namespace llm::synth
