#include "kvstate/kv_convert.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/kv_rotation.h"
#include "util/fp16.h"

namespace llm::kvstate {

void DecodeKvRow(const KvWireLayout& w, int64_t kv, const uint8_t* tile, int64_t p, float* out) {
  const int64_t hd = w.head_dim;
  const int32_t elem = w.Elem(kv);
  switch (elem) {
    case LLM_KV_F32:
      std::memcpy(out, tile + p * hd * 4, static_cast<size_t>(hd * 4));
      return;
    case LLM_KV_F16:
    case kKvWireBf16: {
      const bool bf = elem == kKvWireBf16;
      for (int64_t d = 0; d < hd; ++d) {
        uint16_t h;
        std::memcpy(&h, tile + (p * hd + d) * 2, 2);
        out[d] = bf ? Bf16ToF32(h) : F16ToF32(h);
      }
      return;
    }
    case kKvWireQ4_0: {
      for (int64_t b = 0; b < hd / kQ4Block; ++b) {
        const uint8_t* blk = tile + (p * (hd / kQ4Block) + b) * kQ4BlockBytes;
        uint16_t h;
        std::memcpy(&h, blk, 2);
        const float scale = F16ToF32(h);
        for (int64_t j = 0; j < 16; ++j) {
          out[b * kQ4Block + j] = scale * static_cast<float>((blk[2 + j] & 15) - 8);
          out[b * kQ4Block + j + 16] = scale * static_cast<float>((blk[2 + j] >> 4) - 8);
        }
      }
      return;
    }
    case kKvWireFp8: {
      for (int64_t b = 0; b < hd / kFp8Block; ++b) {
        const uint8_t* blk = tile + (p * (hd / kFp8Block) + b) * kFp8BlockBytes;
        float scale;
        std::memcpy(&scale, blk, 4);
        for (int64_t j = 0; j < kFp8Block; ++j) out[b * kFp8Block + j] = scale * E4M3ToF32(blk[4 + j]);
      }
      return;
    }
    default: {  // Q8_0
      float scale;
      std::memcpy(&scale, tile + p * 4, 4);
      const auto* q = reinterpret_cast<const int8_t*>(tile + 4 * w.block_size + p * hd);
      for (int64_t d = 0; d < hd; ++d) out[d] = scale * static_cast<float>(q[d]);
      return;
    }
  }
}

void EncodeKvRow(const KvWireLayout& w, int64_t kv, uint8_t* tile, int64_t p, const float* x) {
  const int64_t hd = w.head_dim;
  const int32_t elem = w.Elem(kv);
  switch (elem) {
    case LLM_KV_F32:
      std::memcpy(tile + p * hd * 4, x, static_cast<size_t>(hd * 4));
      return;
    case LLM_KV_F16:
    case kKvWireBf16: {
      const bool bf = elem == kKvWireBf16;
      for (int64_t d = 0; d < hd; ++d) {
        const uint16_t h = bf ? F32ToBf16(x[d]) : F32ToF16(x[d]);
        std::memcpy(tile + (p * hd + d) * 2, &h, 2);
      }
      return;
    }
    case kKvWireQ4_0: {
      for (int64_t b = 0; b < hd / kQ4Block; ++b) {
        uint8_t* blk = tile + (p * (hd / kQ4Block) + b) * kQ4BlockBytes;
        uint8_t q[kQ4Block];
        const uint16_t h = QuantizeBlockQ4(x + b * kQ4Block, q);
        std::memcpy(blk, &h, 2);
        for (int64_t j = 0; j < 16; ++j) blk[2 + j] = static_cast<uint8_t>(q[j] | q[j + 16] << 4);
      }
      return;
    }
    case kKvWireFp8: {
      for (int64_t b = 0; b < hd / kFp8Block; ++b)
        QuantizeBlockFp8(x + b * kFp8Block, tile + (p * (hd / kFp8Block) + b) * kFp8BlockBytes);
      return;
    }
    default: {  // Q8_0
      const float scale = QuantizeRowQ8(x, hd, reinterpret_cast<int8_t*>(tile + 4 * w.block_size + p * hd), 1);
      std::memcpy(tile + p * 4, &scale, 4);
      return;
    }
  }
}

int64_t KvRowRotation(const KvWireLayout& w, int64_t kv) {
  if (w.Elem(kv) != kKvWireQ4_0) return 0;
  return kv == 0 ? KvRotationK(w.head_dim) : KvRotationV(w.head_dim);
}

Status CheckKvBlockValues(const KvWireLayout& w, std::span<const uint8_t> kv) {
  for (int64_t side = 0; side < 2; ++side) {
    if (w.Elem(side) != kKvWireFp8) continue;
    const int64_t blocks = w.block_size * (w.head_dim / kFp8Block);
    for (int64_t l = 0; l < w.n_layer; ++l) {
      for (int64_t h = 0; h < w.n_head_kv; ++h) {
        const uint8_t* tile = kv.data() + w.TileOffset(l, side, h);
        for (int64_t b = 0; b < blocks; ++b) {
          const uint8_t* blk = tile + b * kFp8BlockBytes;
          float scale;
          std::memcpy(&scale, blk, 4);
          const char* what = !std::isfinite(scale) ? "a NaN or infinite scale" : scale < 0.0f ? "a negative scale" : nullptr;
          if (what == nullptr)
            for (int64_t j = 0; j < kFp8Block && what == nullptr; ++j)
              if ((blk[4 + j] & 0x7f) == 0x7f) what = "the E4M3 NaN code";
          if (what != nullptr)
            return KvCorrupt(std::string("FP8 E4M3 ") + (side == 0 ? "K" : "V") + " block holds " + what + " (layer " + std::to_string(l) + ", kv head " + std::to_string(h) + ", row " +
                             std::to_string(b / (w.head_dim / kFp8Block)) + "); a writer stores finite scales >= 0 "
                             "and no NaN");
        }
      }
    }
  }
  return Status::Ok();
}

void ConvertKvBlock(const KvWireLayout& from, std::span<const uint8_t> in, const KvWireLayout& to,
                    std::span<uint8_t> out) {
  std::vector<float> row(static_cast<size_t>(from.head_dim));
  for (int64_t l = 0; l < from.n_layer; ++l) {
    for (int64_t kv = 0; kv < 2; ++kv) {
      // H is its own inverse: un-rotate leaving a rotated type, rotate entering one
      const int64_t rot_from = KvRowRotation(from, kv), rot_to = KvRowRotation(to, kv);
      for (int64_t h = 0; h < from.n_head_kv; ++h) {
        const uint8_t* src = in.data() + from.TileOffset(l, kv, h);
        uint8_t* dst = out.data() + to.TileOffset(l, kv, h);
        for (int64_t p = 0; p < from.block_size; ++p) {
          DecodeKvRow(from, kv, src, p, row.data());
          if (rot_from != rot_to) {
            HadamardRotate(row.data(), from.head_dim, rot_from);
            HadamardRotate(row.data(), from.head_dim, rot_to);
          }
          EncodeKvRow(to, kv, dst, p, row.data());
        }
      }
    }
  }
}

}  // namespace llm::kvstate
