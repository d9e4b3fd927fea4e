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
//                                                     Q4_0: (block_size) rows of head_dim / 32
//                                                           GGUF Q4_0 blocks (18 bytes each)
//                                                     FP8:  (block_size) rows of head_dim / 32
//                                                           blocks of an F32 scale and 32
//                                                           E4M3 bytes (36 bytes each)
//
// K and V may be of different types (elem, elem_v): each tile is its side's.
// BF16 is the CUDA pool's type (kKvWireBf16: a wire value only, not an
// llm_ctx_params kv_type; the CUDA pool is this layout exactly).
// Q8_0 keeps one scale per head_dim row, as the CPU pool does: x = scale * q,
// scale = max|x| / 127 (QuantizeRowQ8 below, the one rule both use).
// Q4_0 (kKvWireQ4_0) is GGUF's Q4_0 block byte for byte: per 32 values an
// IEEE-half scale d, then 16 bytes whose low nibbles hold values 0..15 and
// high nibbles values 16..31, each stored as q + 8; x = d * q. The rounding
// is llama.cpp's (QuantizeBlockQ4 below; d = the signed value of largest
// magnitude / -8), so a row quantizes to the bytes llama.cpp's cache holds.
// Its rows are Hadamard-rotated K and V rows (backend/kv_rotation.h: the CPU
// pool's, and llama.cpp's for a quantized cache); elem 5, the unrotated Q4_0
// of one earlier build, is refused (kKvWireQ4_0Unrotated).
// FP8 E4M3 (kKvWireFp8, LLM_KV_FP8_E4M3: the CUDA pool's on sm_89+) keeps
// per 32 values an F32 scale s = max|x| / 448 (E4M3's largest finite
// value; finite values only, an infinite one saturates) and 32 E4M3 bytes
// (util/fp8.h: nearest even, saturating to +-448, NaN stored as 0); x = s *
// e4m3. Rows are not rotated (bench/results/2026-11-27-kv-fp8.md: E4M3's
// step is relative to each value, so a rotation raises the rows' error; it
// lowers K's score error on some models, a possible follow-up). A reader
// refuses a block whose scale
// is NaN, infinite or negative, or which holds the NaN code
// (CheckKvBlockValues, kvstate/kv_convert.h).
// Little-endian throughout.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "llm.h"
#include "util/fp16.h"
#include "util/fp8.h"

namespace llm {

// The wire's element types are LLM_KV_F32 / F16 / Q8_0 and these two (not
// llm_ctx_params values: LLM_KV_Q4_0 is wire kKvWireQ4_0).
inline constexpr int32_t kKvWireBf16 = 4;
inline constexpr int32_t kKvWireQ4_0 = 6;            // rows rotated (kv_rotation.h)
inline constexpr int32_t kKvWireQ4_0Unrotated = 5;   // refused: not what a Q4_0 pool holds
inline constexpr int64_t kQ4Block = 32;       // values per Q4_0 block
inline constexpr int64_t kQ4BlockBytes = 18;  // its F16 scale and 16 bytes of nibbles
inline constexpr int32_t kKvWireFp8 = 7;       // FP8 E4M3 blocks (LLM_KV_FP8_E4M3)
inline constexpr int64_t kFp8Block = 32;       // values per FP8 block
inline constexpr int64_t kFp8BlockBytes = 36;  // its F32 scale and 32 E4M3 bytes

struct KvWireLayout {
  int64_t n_layer = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  int64_t block_size = 0;
  int32_t elem = LLM_KV_F32;  // K's (and V's): LLM_KV_F32, LLM_KV_F16, LLM_KV_Q8_0, kKvWireBf16, kKvWireQ4_0
                              // or kKvWireFp8
  // V's element type when it differs from K's (llm_ctx_params.kv_type_v);
  // 0 (no wire type has that value): as elem. Elem(1) reads it.
  int32_t elem_v = 0;

  static int64_t ElemBytes(int32_t elem) {
    return elem == LLM_KV_F32 ? 4 : elem == LLM_KV_F16 || elem == kKvWireBf16 ? 2 : 1;
  }
  // The element type of K (kv = 0) or V (kv = 1).
  int32_t Elem(int64_t kv) const { return kv == 1 && elem_v != 0 ? elem_v : elem; }
  bool SameElems(const KvWireLayout& o) const { return Elem(0) == o.Elem(0) && Elem(1) == o.Elem(1); }
  // One (layer, K|V, kv head) tile of element type e.
  int64_t TileBytes(int32_t e) const {
    if (e == kKvWireQ4_0) return block_size * (head_dim / kQ4Block) * kQ4BlockBytes;
    if (e == kKvWireFp8) return block_size * (head_dim / kFp8Block) * kFp8BlockBytes;
    const int64_t values = block_size * head_dim * ElemBytes(e);
    return e == LLM_KV_Q8_0 ? 4 * block_size + values : values;
  }
  int64_t tile_bytes(int64_t kv) const { return TileBytes(Elem(kv)); }
  int64_t block_bytes() const { return n_layer * n_head_kv * (tile_bytes(0) + tile_bytes(1)); }
  // Tile of (layer, kv = 0 for K / 1 for V, head) from the block's start:
  // a layer's K tiles, then its V tiles, each of their side's size.
  int64_t TileOffset(int64_t layer, int64_t kv, int64_t head) const {
    const int64_t tk = tile_bytes(0), tv = tile_bytes(1);
    return layer * n_head_kv * (tk + tv) + kv * n_head_kv * tk + head * (kv == 0 ? tk : tv);
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

// Quantizes one block of 32 values as GGUF's Q4_0 (llama.cpp's reference
// rule): d = m / -8 where m is the value of largest magnitude (the first one
// on a tie), q = min(15, trunc(x / d + 8.5)) in 0..15 (value q - 8) written to
// q[0..32), computed with d in F32; returns d's IEEE-half bits (what the
// reader multiplies by). A NaN value stores q = 8 (zero).
inline uint16_t QuantizeBlockQ4(const float* x, uint8_t* q) {
  float amax = 0.0f, m = 0.0f;
  for (int64_t j = 0; j < kQ4Block; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      m = x[j];
    }
  }
  const float d = m / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int64_t j = 0; j < kQ4Block; ++j) {
    // the product rounded on its own, as the reference does: volatile keeps
    // a compiler from fusing it into the add (an FMA rounds once)
    volatile float prod = x[j] * id;
    const float v = prod + 8.5f;  // in [0.5, 16.5] for finite x; the cast is only defined in range
    q[j] = static_cast<uint8_t>(v >= 15.0f ? 15.0f : v >= 0.0f ? v : v == v ? 0.0f : 8.0f);
  }
  return F32ToF16(d);
}

// Quantizes one block of 32 values as FP8 E4M3 into blk[0 .. 36): the F32
// scale s = max|x| / 448 over the finite values, then F32ToE4M3(x * (1/s))
// (0 for an all-zero block). An infinite value saturates to +-448 * s,
// NaN is stored as 0; the scale is always finite and >= 0.
inline void QuantizeBlockFp8(const float* x, uint8_t* blk) {
  float amax = 0.0f;
  for (int64_t j = 0; j < kFp8Block; ++j)
    if (std::isfinite(x[j])) amax = std::max(amax, std::fabs(x[j]));
  const float scale = amax / kE4M3Max, inv = scale > 0.0f ? 1.0f / scale : 0.0f;
  std::memcpy(blk, &scale, 4);
  for (int64_t j = 0; j < kFp8Block; ++j) {
    const float prod = x[j] * inv;  // an infinity saturates (or, in a block of no finite value, is 0 * inf: 0)
    blk[4 + j] = F32ToE4M3(prod);
  }
}

}  // namespace llm
