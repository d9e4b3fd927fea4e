// The wire layout of one KV block: how a block's K and V leave a backend and
// come back (the KV stream format, src/kvstate/ and docs/KV_FORMAT.md). It is
// independent of any backend's internal layout (the CPU pool keeps K
// transposed, kv_layout.h), so a stream written by one backend reads into
// another, and the same bytes serve a future host or disk tier.
//
//   block ─┬─ layer 0 ─┬─ K ─┬─ kv head 0: tile      tile = rows for positions
//          │           │     └─ kv head 1 ...               0 .. block_size-1
//          │           └─ V ─┬─ kv head 0 ...        F32:  (block_size, head_dim) f32
//          ├─ layer 1 ...                             F16:  (block_size, head_dim) IEEE half
//                                                     Q8_0: (block_size) f32 scales, then
//                                                           (block_size, head_dim) int8
//
// BF16 is the CUDA pool's type (kKvWireBf16: a wire value only, not an
// llm_ctx_params kv_type; the CUDA pool is this layout exactly).
// Q8_0 keeps one scale per head_dim row, as the CPU pool does: x = scale * q,
// scale = max|x| / 127 (QuantizeRowQ8 below, the one rule both use).
// Little-endian throughout.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "llm.h"

namespace llm {

// The wire's element types are LLM_KV_F32 / F16 / Q8_0 and this one.
inline constexpr int32_t kKvWireBf16 = 4;

struct KvWireLayout {
  int64_t n_layer = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  int64_t block_size = 0;
  int32_t elem = LLM_KV_F32;  // LLM_KV_F32, LLM_KV_F16, LLM_KV_Q8_0 or kKvWireBf16

  static int64_t ElemBytes(int32_t elem) {
    return elem == LLM_KV_F32 ? 4 : elem == LLM_KV_F16 || elem == kKvWireBf16 ? 2 : 1;
  }
  // One (layer, K|V, kv head) tile.
  int64_t tile_bytes() const {
    const int64_t values = block_size * head_dim * ElemBytes(elem);
    return elem == LLM_KV_Q8_0 ? 4 * block_size + values : values;
  }
  int64_t block_bytes() const { return n_layer * 2 * n_head_kv * tile_bytes(); }
  // Tile of (layer, kv = 0 for K / 1 for V, head) from the block's start.
  int64_t TileOffset(int64_t layer, int64_t kv, int64_t head) const {
    return ((layer * 2 + kv) * n_head_kv + head) * tile_bytes();
  }
};

// Quantizes n values x[0..n) to int8 at out[0], out[stride], ...; returns the
// scale (max|x| / 127; 0 for an all-zero row). Clamped, and NaN stored as 0:
// the cast is only defined for values in range.
inline float QuantizeRowQ8(const float* x, int64_t n, int8_t* out, int64_t stride) {
  float amax = 0.0f;
  for (int64_t d = 0; d < n; ++d) amax = std::max(amax, std::fabs(x[d]));
  const float scale = amax / 127.0f, inv = scale > 0.0f ? 1.0f / scale : 0.0f;
  for (int64_t d = 0; d < n; ++d) {
    const float r = std::nearbyint(x[d] * inv);
    out[d * stride] = static_cast<int8_t>(r >= 127.0f ? 127.0f : r <= -127.0f ? -127.0f : r == r ? r : 0.0f);
  }
  return scale;
}

}  // namespace llm
