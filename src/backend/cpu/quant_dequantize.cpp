// The reference dequantization of every block-quantized weight type
// (quant.h: DequantizeBlocks): plain scalar C++, the definition the CPU's
// and CUDA's kernels are tested against.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "backend/cpu/quant.h"
#include "backend/cpu/quant_unpack.h"

namespace llm::cpu {

using namespace unpack;  // NOLINT(google-build-using-namespace): this file's vocabulary

// ================================================================ dequantization

void DequantizeBlocks(TensorType type, const void* src, int64_t n, float* y) {
  const auto* p = static_cast<const uint8_t*>(src);
  int8_t q[32];
  switch (type) {
    case TensorType::Q8_0:
      for (int64_t i = 0; i < n / 32; ++i) {
        const auto& b = reinterpret_cast<const BlockQ8_0*>(p)[i];
        const float d = F16ToF32(b.d);
        for (int j = 0; j < 32; ++j) y[32 * i + j] = d * static_cast<float>(b.qs[j]);
      }
      break;
    case TensorType::Q4_0:
      for (int64_t i = 0; i < n / 32; ++i) {
        const auto& b = reinterpret_cast<const BlockQ4_0*>(p)[i];
        const float d = F16ToF32(b.d);
        UnpackQ4(b.qs, 8, q);
        for (int j = 0; j < 32; ++j) y[32 * i + j] = d * static_cast<float>(q[j]);
      }
      break;
    case TensorType::Q4_1:
      for (int64_t i = 0; i < n / 32; ++i) {
        const auto& b = reinterpret_cast<const BlockQ4_1*>(p)[i];
        const float d = F16ToF32(b.d), m = F16ToF32(b.m);
        UnpackQ4(b.qs, 0, q);
        for (int j = 0; j < 32; ++j) y[32 * i + j] = d * static_cast<float>(q[j]) + m;
      }
      break;
    case TensorType::Q5_0:
      for (int64_t i = 0; i < n / 32; ++i) {
        const auto& b = reinterpret_cast<const BlockQ5_0*>(p)[i];
        const float d = F16ToF32(b.d);
        UnpackQ5(b.qs, LoadU32(b.qh), 16, q);
        for (int j = 0; j < 32; ++j) y[32 * i + j] = d * static_cast<float>(q[j]);
      }
      break;
    case TensorType::Q5_1:
      for (int64_t i = 0; i < n / 32; ++i) {
        const auto& b = reinterpret_cast<const BlockQ5_1*>(p)[i];
        const float d = F16ToF32(b.d), m = F16ToF32(b.m);
        UnpackQ5(b.qs, LoadU32(b.qh), 0, q);
        for (int j = 0; j < 32; ++j) y[32 * i + j] = d * static_cast<float>(q[j]) + m;
      }
      break;
    case TensorType::Q4_K:
    case TensorType::Q5_K:
      for (int64_t i = 0; i < n / 256; ++i) {
        const bool q5 = type == TensorType::Q5_K;
        const uint8_t* blk = p + i * (q5 ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K));
        uint16_t dh, mh;
        std::memcpy(&dh, blk, 2);
        std::memcpy(&mh, blk + 2, 2);
        const float d = F16ToF32(dh), dmin = F16ToF32(mh);
        const uint8_t* scales = blk + 4;
        const uint8_t* qh = q5 ? blk + 16 : nullptr;
        const uint8_t* qs = blk + (q5 ? 48 : 16);
        for (int c = 0; c < 4; ++c) {
          int8_t hi[32];
          UnpackK(qs, qh, c, q, hi);
          for (int s = 0; s < 2; ++s) {
            int sc, m;
            KScaleMin(2 * c + s, scales, &sc, &m);
            const float ds = d * static_cast<float>(sc), dm = dmin * static_cast<float>(m);
            const int8_t* qq = s == 0 ? q : hi;
            float* out = y + 256 * i + 64 * c + 32 * s;
            for (int l = 0; l < 32; ++l) out[l] = ds * static_cast<float>(qq[l]) - dm;
          }
        }
      }
      break;
    case TensorType::Q6_K:
      for (int64_t i = 0; i < n / 256; ++i) {
        const auto& b = reinterpret_cast<const BlockQ6_K*>(p)[i];
        const float d = F16ToF32(b.d);
        for (int h = 0; h < 2; ++h) {
          for (int k = 0; k < 4; ++k) {
            UnpackQ6K(b, h, k, q);
            float* out = y + 256 * i + 128 * h + 32 * k;
            for (int l = 0; l < 32; ++l) {
              const float ds = d * static_cast<float>(b.scales[(128 * h + 32 * k + l) / 16]);
              out[l] = ds * static_cast<float>(q[l]);
            }
          }
        }
      }
      break;
    case TensorType::Q3_K:
      for (int64_t i = 0; i < n / 256; ++i) {
        const auto& b = reinterpret_cast<const BlockQ3_K*>(p)[i];
        const float d = F16ToF32(b.d);
        for (int j = 0; j < 8; ++j) {
          UnpackQ3K(b, j, q);
          for (int l = 0; l < 32; ++l) {
            const float dl = d * static_cast<float>(Q3KScale(b.scales, 2 * j + l / 16));
            y[256 * i + 32 * j + l] = dl * static_cast<float>(q[l]);
          }
        }
      }
      break;
    case TensorType::Q2_K:
      for (int64_t i = 0; i < n / 256; ++i) {
        const auto& b = reinterpret_cast<const BlockQ2_K*>(p)[i];
        const float d = F16ToF32(b.d), dmin = F16ToF32(b.dmin);
        for (int j = 0; j < 8; ++j) {
          UnpackQ2K(b, j, q);
          for (int l = 0; l < 32; ++l) {
            const uint8_t sm = b.scales[2 * j + l / 16];
            const float dl = d * static_cast<float>(sm & 0xF), ml = dmin * static_cast<float>(sm >> 4);
            y[256 * i + 32 * j + l] = dl * static_cast<float>(q[l]) - ml;
          }
        }
      }
      break;
    case TensorType::IQ4_NL:
      for (int64_t i = 0; i < n / 32; ++i) {
        const auto& b = reinterpret_cast<const BlockIQ4_NL*>(p)[i];
        const float d = F16ToF32(b.d);
        UnpackIQ4(b.qs, q);
        for (int j = 0; j < 32; ++j) y[32 * i + j] = d * static_cast<float>(q[j]);
      }
      break;
    case TensorType::MXFP4:
      for (int64_t i = 0; i < n / 32; ++i) {
        const auto& b = reinterpret_cast<const BlockMXFP4*>(p)[i];
        const float d = MXFP4Scale(b.e);
        UnpackIQ4(b.qs, q, kE2M1Values);
        for (int j = 0; j < 32; ++j) y[32 * i + j] = d * static_cast<float>(q[j]);
      }
      break;
    case TensorType::IQ4_XS:
      for (int64_t i = 0; i < n / 256; ++i) {
        const auto& b = reinterpret_cast<const BlockIQ4_XS*>(p)[i];
        const float d = F16ToF32(b.d);
        for (int j = 0; j < 8; ++j) {
          const float dl = d * static_cast<float>(IQ4XSScale(b, j));
          UnpackIQ4(b.qs + 16 * j, q);
          for (int l = 0; l < 32; ++l) y[256 * i + 32 * j + l] = dl * static_cast<float>(q[l]);
        }
      }
      break;
    case TensorType::IQ2_XXS:
    case TensorType::IQ2_XS:
    case TensorType::IQ2_S:
    case TensorType::IQ3_XXS:
    case TensorType::IQ3_S:
    case TensorType::IQ1_S:
    case TensorType::IQ1_M: {
      int64_t be = 0, bb = 0;
      TensorTypeLayout(type, &be, &bb);
      for (int64_t i = 0; i < n / 256; ++i) {
        const uint8_t* b = p + i * bb;
        const float d = F16ToF32(IQLatticeScaleBits(type, b));
        for (int j = 0; j < 8; ++j) {
          int mul[2];
          const float du = d * UnpackIQLattice(type, b, j, q, mul);  // exact: a power of two times an F16
          for (int l = 0; l < 32; ++l) y[256 * i + 32 * j + l] = du * static_cast<float>(mul[l / 16] * q[l]);
        }
      }
      break;
    }
    case TensorType::TQ1_0:
    case TensorType::TQ2_0: {
      int64_t be = 0, bb = 0;
      TensorTypeLayout(type, &be, &bb);
      for (int64_t i = 0; i < n / 256; ++i) {
        const uint8_t* b = p + i * bb;
        const float d = F16ToF32(static_cast<uint16_t>(b[TQScaleOffset(type)] | b[TQScaleOffset(type) + 1] << 8));
        for (int c = 0; c < 8; ++c) {
          UnpackTQ(type, b, c, q);
          for (int l = 0; l < 32; ++l) y[256 * i + 32 * c + l] = d * static_cast<float>(q[l]);
        }
      }
      break;
    }
    default:
      break;
  }
}

}  // namespace llm::cpu
