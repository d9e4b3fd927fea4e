// The R8 packing of IQ4_NL, IQ4_XS and MXFP4 (layouts PackedIQ4NL,
// PackedIQ4XS, PackedMXFP4 in quant_pack.h): one block of one row at a time, called by PackR8Groups.
// The indices keep their 4 bits (the codebook lookup is the kernel's, one
// shuffle per vector; MXFP4's codes likewise), so the copy is the file's size (IQ4_XS: its 6-bit
// scales as bytes, +1.5%).
#include <cstring>

#include "backend/cpu/quant_pack.h"

namespace llm::cpu {
namespace {

// Row r's 32 indices of one block into the packed vectors: dst[32·v + 4·r
// + i] holds index 4v + i low and 4v + 16 + i high (v = 0..3). The file's
// byte k already holds index k low and k + 16 high, so vector v takes the
// row's bytes 4v .. 4v + 3 as they are.
void InterleaveIndices(const uint8_t* qs, int r, uint8_t* dst) {
  for (int v = 0; v < 4; ++v) std::memcpy(dst + 32 * v + 4 * r, qs + 4 * v, 4);
}

}  // namespace

void PackIQ4Block(TensorType t, const uint8_t* row, int64_t b, int r, uint8_t* out, int64_t idx) {
  if (t == TensorType::IQ4_NL) {
    const auto& blk = reinterpret_cast<const BlockIQ4_NL*>(row)[b];
    auto& p = reinterpret_cast<PackedIQ4NL*>(out)[idx];
    p.d[r] = blk.d;
    InterleaveIndices(blk.qs, r, p.qs);
  } else if (t == TensorType::MXFP4) {
    const auto& blk = reinterpret_cast<const BlockMXFP4*>(row)[b];
    auto& p = reinterpret_cast<PackedMXFP4*>(out)[idx];
    p.e[r] = blk.e;
    InterleaveIndices(blk.qs, r, p.qs);
  } else {
    // sub-block j = b % 8 of super-block b / 8 (whole super-blocks: CanPackR8)
    const auto& blk = reinterpret_cast<const BlockIQ4_XS*>(row)[b / 8];
    auto& s = reinterpret_cast<PackedIQ4XS*>(out)[idx / 8];
    const int j = static_cast<int>(b % 8);
    s.d[r] = blk.d;
    s.sub[j].sc[r] = static_cast<int8_t>(IQ4XSScale(blk, j));
    InterleaveIndices(blk.qs + 16 * j, r, s.sub[j].qs);
  }
}

}  // namespace llm::cpu
