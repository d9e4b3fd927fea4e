// Packing of Q2_K and Q3_K rows into their R8 layouts (quant_pack_k23.h).
#include "backend/cpu/quant_pack_k23.h"

namespace llm::cpu {
namespace {

// Row r's 32 unsigned quants u (< 8) of one sub-block: their low 2 bits into
// ql, four to a byte, and (qh != nullptr) their third bits into qh. Byte
// 4r + i of vector v holds quant K23Quant(v, i).
void Interleave2(const uint8_t* u, int r, uint8_t* ql, uint8_t* qh) {
  for (int v = 0; v < 8; ++v) {
    const int half = v / 4, k = v % 4;
    for (int i = 0; i < 4; ++i) {
      const uint8_t q = u[K23Quant(v, i)];
      uint8_t& lo = ql[32 * half + 4 * r + i];
      lo = static_cast<uint8_t>(lo | (q & 3) << (2 * k));
      if (qh != nullptr) qh[4 * r + i] = static_cast<uint8_t>(qh[4 * r + i] | (q >> 2) << v);
    }
  }
}

}  // namespace

void PackQ2KSub(const BlockQ2_K& blk, int j, int r, PackedQ2K* s) {
  PackedQ2KSub& p = s->sub[j];
  s->d[r] = blk.d;
  s->dmin[r] = blk.dmin;
  p.sc[2 * r] = blk.scales[2 * j];
  p.sc[2 * r + 1] = blk.scales[2 * j + 1];
  int8_t q[32];
  UnpackQ2K(blk, j, q);  // in [0, 3]
  uint8_t u[32];
  for (int l = 0; l < 32; ++l) u[l] = static_cast<uint8_t>(q[l]);
  Interleave2(u, r, p.ql, nullptr);
}

void PackQ3KSub(const BlockQ3_K& blk, int j, int r, PackedQ3K* s) {
  PackedQ3KSub& p = s->sub[j];
  s->d[r] = blk.d;
  p.sc[2 * r] = static_cast<int8_t>(Q3KScale(blk.scales, 2 * j));
  p.sc[2 * r + 1] = static_cast<int8_t>(Q3KScale(blk.scales, 2 * j + 1));
  int8_t q[32];
  UnpackQ3K(blk, j, q);  // in [-4, 3]
  uint8_t u[32];
  for (int l = 0; l < 32; ++l) u[l] = static_cast<uint8_t>(q[l] + 4);
  Interleave2(u, r, p.ql, p.qh);
}

}  // namespace llm::cpu
