// The R8 weight packing (quant_pack.h): plain C++, run once per weight.
#include "backend/cpu/quant_pack.h"

#include <cstring>

#include "backend/cpu/kernels.h"

namespace llm::cpu {
namespace {

// Quant k (0..31) of a Q4_0/Q4_1 block: nibble k of 32, low nibbles first.
inline uint8_t Nibble(const uint8_t* qs, int k) { return k < 16 ? qs[k] & 0x0F : qs[k - 16] >> 4; }

// Row r's 32 unsigned 5-bit quants q of one block into a 5-bit packed
// block's nibbles qs and fifth bits qh (layout in quant_pack.h; qh starts
// zeroed).
inline void Interleave5(const uint8_t* q, int r, uint8_t* qs, uint8_t* qh) {
  for (int v = 0; v < 4; ++v)
    for (int i = 0; i < 4; ++i) {
      const uint8_t lo = q[4 * v + i], hi = q[4 * v + 16 + i];
      qs[32 * v + 4 * r + i] = static_cast<uint8_t>((lo & 0x0F) | ((hi & 0x0F) << 4));
      qh[4 * r + i] = static_cast<uint8_t>(qh[4 * r + i] | ((lo >> 4) << v) | ((hi >> 4) << (4 + v)));
    }
}

}  // namespace

bool CanPackR8(const WeightView& w) {
  const bool ok_type = w.type == TensorType::Q4_0 || w.type == TensorType::Q4_1 || w.type == TensorType::Q5_0 ||
                       w.type == TensorType::Q5_1 || w.type == TensorType::Q8_0 || w.type == TensorType::Q4_K ||
                       w.type == TensorType::Q5_K || w.type == TensorType::Q6_K ||
                       w.type == TensorType::IQ4_NL || w.type == TensorType::IQ4_XS || w.type == TensorType::MXFP4 ||
                       w.type == TensorType::Q2_K || w.type == TensorType::Q3_K;
  const bool k_quant = w.type == TensorType::Q4_K || w.type == TensorType::Q5_K || w.type == TensorType::Q6_K ||
                       w.type == TensorType::IQ4_XS || w.type == TensorType::Q2_K || w.type == TensorType::Q3_K;
  return ok_type && w.data != nullptr && w.rows > 0 && w.cols > 0 && w.cols % (k_quant ? 256 : 32) == 0;
}

bool PacksAsQ8(TensorType t) { return t == TensorType::Q8_0; }

size_t PackedBlockBytes(TensorType t) {
  return PacksAsQ8(t)               ? sizeof(PackedQ8)
         : t == TensorType::Q5_0 ? sizeof(PackedQ5_0)
         : t == TensorType::Q5_1 ? sizeof(PackedQ5_1)
         : t == TensorType::Q5_K ? sizeof(PackedQ5K) / 8
         : t == TensorType::Q4_K ? sizeof(PackedQ4K) / 8
         : t == TensorType::Q6_K ? sizeof(PackedQ6K) / 8
         : t == TensorType::IQ4_NL ? sizeof(PackedIQ4NL)
         : t == TensorType::IQ4_XS ? sizeof(PackedIQ4XS) / 8
         : t == TensorType::MXFP4 ? sizeof(PackedMXFP4)
         : t == TensorType::Q2_K ? sizeof(PackedQ2K) / 8
         : t == TensorType::Q3_K ? sizeof(PackedQ3K) / 8
         : t == TensorType::Q4_0 ? sizeof(PackedQ4_0)
                                 : sizeof(PackedQ4);
}

size_t PackedR8Bytes(const WeightView& w) {
  const int64_t groups = (w.rows + kPackRows - 1) / kPackRows, nb = w.cols / 32;
  return static_cast<size_t>(groups * nb) * PackedBlockBytes(w.type);
}

bool PackR8(const WeightView& w, uint8_t* out) { return PackR8Groups(w, out, 0, (w.rows + kPackRows - 1) / kPackRows); }

bool PackR8Groups(const WeightView& w, uint8_t* out, int64_t g_begin, int64_t g_end) {
  const int64_t nb = w.cols / 32;
  const auto* base = static_cast<const uint8_t*>(w.data);
  const size_t bb = PackedBlockBytes(w.type);
  std::memset(out + g_begin * nb * bb, 0, static_cast<size_t>((g_end - g_begin) * nb) * bb);
  for (int64_t g = g_begin; g < g_end; ++g) {
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t idx = g * nb + b;
      for (int r = 0; r < 8; ++r) {
        const int64_t row = g * kPackRows + r;
        if (row >= w.rows) continue;  // zero rows
        const uint8_t* src = base + row * static_cast<int64_t>(w.row_bytes);
        if (w.type == TensorType::IQ4_NL || w.type == TensorType::IQ4_XS || w.type == TensorType::MXFP4) {
          PackIQ4Block(w.type, src, b, r, out, idx);  // quant_pack_iq4.cpp
        } else if (w.type == TensorType::Q8_0) {
          const auto& blk = reinterpret_cast<const BlockQ8_0*>(src)[b];
          auto& p = reinterpret_cast<PackedQ8*>(out)[idx];
          p.d[r] = blk.d;
          for (int j = 0; j < 8; ++j)  // vector j: quants 4j .. 4j+3 of each row
            std::memcpy(&p.qs[32 * j + 4 * r], &blk.qs[4 * j], 4);
        } else if (w.type == TensorType::Q5_0 || w.type == TensorType::Q5_1) {
          // q in [0, 31]: Q5_0's d · (q - 16) is d · q + m with m = -16 · d
          uint8_t q[32];
          auto quants = [&](const auto& blk) {
            uint32_t qh;
            std::memcpy(&qh, blk.qh, 4);
            for (int k = 0; k < 32; ++k) q[k] = static_cast<uint8_t>(Nibble(blk.qs, k) | (((qh >> k) & 1u) << 4));
          };
          if (w.type == TensorType::Q5_0) {
            const auto& blk = reinterpret_cast<const BlockQ5_0*>(src)[b];
            auto& p = reinterpret_cast<PackedQ5_0*>(out)[idx];
            p.d[r] = blk.d;
            quants(blk);
            Interleave5(q, r, p.qs, p.qh);
          } else {
            const auto& blk = reinterpret_cast<const BlockQ5_1*>(src)[b];
            auto& p = reinterpret_cast<PackedQ5_1*>(out)[idx];
            p.d[r] = blk.d;
            p.m[r] = blk.m;
            quants(blk);
            Interleave5(q, r, p.qs, p.qh);
          }
        } else if (w.type == TensorType::Q5_K) {
          // sub-block j = b % 8 of super-block b / 8: nibbles as Q4_K's, the
          // fifth bit of weight l is bit j of qh[l] (tensor_type.h)
          const auto& blk = reinterpret_cast<const BlockQ5_K*>(src)[b / 8];
          auto& s = reinterpret_cast<PackedQ5K*>(out)[idx / 8];
          const int j = static_cast<int>(b % 8), c = j / 2;
          auto& p = s.sub[j];
          int sc = 0, mn = 0;
          KScaleMin(j, blk.scales, &sc, &mn);
          s.d[r] = blk.d;
          s.dmin[r] = blk.dmin;
          p.sc[r] = static_cast<uint8_t>(sc);
          p.m[r] = static_cast<uint8_t>(mn);
          uint8_t q[32];
          for (int l = 0; l < 32; ++l) {
            const uint8_t byte = blk.qs[32 * c + l];
            const int lo = j % 2 == 0 ? byte & 0x0F : byte >> 4;
            q[l] = static_cast<uint8_t>(lo | (((blk.qh[l] >> j) & 1) << 4));
          }
          Interleave5(q, r, p.qs, p.qh);
        } else if (w.type == TensorType::Q2_K) {  // sub-block b % 8 of super-block b / 8 (quant_pack_k23.h)
          PackQ2KSub(reinterpret_cast<const BlockQ2_K*>(src)[b / 8], static_cast<int>(b % 8), r,
                     &reinterpret_cast<PackedQ2K*>(out)[idx / 8]);
        } else if (w.type == TensorType::Q3_K) {
          PackQ3KSub(reinterpret_cast<const BlockQ3_K*>(src)[b / 8], static_cast<int>(b % 8), r,
                     &reinterpret_cast<PackedQ3K*>(out)[idx / 8]);
        } else if (w.type == TensorType::Q6_K) {
          // activation block b covers weights 32k .. 32k+32 of half h of
          // super-block b / 8 (k = b % 4, h = b / 4 % 2); layout in quant_pack.h
          const auto& blk = reinterpret_cast<const BlockQ6_K*>(src)[b / 8];
          auto& s = reinterpret_cast<PackedQ6K*>(out)[idx / 8];
          auto& p = s.sub[b % 8];
          const int h = static_cast<int>(b / 4 % 2), k = static_cast<int>(b % 4);
          int8_t q[32];
          UnpackQ6K(blk, h, k, q);
          auto quant = [&](int l) { return static_cast<uint8_t>(q[l] + 32); };  // in [0, 63]
          s.d[r] = blk.d;
          p.sc[0][r] = blk.scales[8 * h + 2 * k];
          p.sc[1][r] = blk.scales[8 * h + 2 * k + 1];
          for (int v = 0; v < 4; ++v)
            for (int i = 0; i < 4; ++i)
              p.ql[32 * v + 4 * r + i] = static_cast<uint8_t>((quant(4 * v + i) & 0x0F) | (quant(4 * v + 16 + i) << 4));
          for (int u = 0; u < 2; ++u)
            for (int i = 0; i < 4; ++i)
              p.qh[32 * u + 4 * r + i] =
                  static_cast<uint8_t>((quant(8 * u + i) >> 4) | ((quant(8 * u + 16 + i) >> 4) << 2) |
                                       ((quant(8 * u + 4 + i) >> 4) << 4) | ((quant(8 * u + 20 + i) >> 4) << 6));
        } else if (w.type == TensorType::Q4_K) {
          // sub-block b % 8 of super-block b / 8 (layout in tensor_type.h)
          // (nb is a multiple of 8: whole super-blocks, CanPackR8)
          const auto& blk = reinterpret_cast<const BlockQ4_K*>(src)[b / 8];
          auto& s = reinterpret_cast<PackedQ4K*>(out)[idx / 8];
          const int j = static_cast<int>(b % 8), c = j / 2;
          auto& p = s.sub[j];
          int sc = 0, mn = 0;
          KScaleMin(j, blk.scales, &sc, &mn);
          s.d[r] = blk.d;
          s.dmin[r] = blk.dmin;
          p.sc[r] = static_cast<uint8_t>(sc);
          p.m[r] = static_cast<uint8_t>(mn);
          auto quant = [&](int k) {
            const uint8_t byte = blk.qs[32 * c + k];
            return static_cast<uint8_t>(j % 2 == 0 ? byte & 0x0F : byte >> 4);
          };
          for (int v = 0; v < 4; ++v)
            for (int i = 0; i < 4; ++i)
              p.qs[32 * v + 4 * r + i] = static_cast<uint8_t>(quant(4 * v + i) | (quant(4 * v + 16 + i) << 4));
        } else {
          // vector v: low nibbles quants 4v .., high nibbles 4v + 16 ..
          auto interleave = [r](const uint8_t* qs, uint8_t* dst) {
            for (int v = 0; v < 4; ++v)
              for (int i = 0; i < 4; ++i) {
                const uint8_t lo = Nibble(qs, 4 * v + i), hi = Nibble(qs, 4 * v + 16 + i);
                dst[32 * v + 4 * r + i] = static_cast<uint8_t>(lo | (hi << 4));
              }
          };
          if (w.type == TensorType::Q4_1) {
            const auto& blk = reinterpret_cast<const BlockQ4_1*>(src)[b];
            auto& p = reinterpret_cast<PackedQ4*>(out)[idx];
            p.d[r] = blk.d;
            p.m[r] = blk.m;
            interleave(blk.qs, p.qs);
          } else {
            const auto& blk = reinterpret_cast<const BlockQ4_0*>(src)[b];
            auto& p = reinterpret_cast<PackedQ4_0*>(out)[idx];
            p.d[r] = blk.d;
            interleave(blk.qs, p.qs);
          }
        }
      }
    }
  }
  return true;
}

}  // namespace llm::cpu
