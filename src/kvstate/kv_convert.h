// Element-type conversion of KV blocks in the wire layout (backend/kv_wire.h),
// for an import into a pool of another type than the stream's:
//
//   F16 -> F32, Q8_0 -> F32,    exact (the values the source pool held)
//   BF16 -> F32
//   F32 -> F16, F32 -> BF16     round to nearest even (as the CPU pool / the
//                               CUDA pool stores)
//   F16 <-> BF16                via F32: the nearest value of the target type
//   any -> Q8_0                 per-row scale max|x| / 127 (QuantizeRowQ8, the
//                               CPU pool's own rule)
//   Q8_0 -> F16, Q8_0 -> BF16   via F32: the value nearest to scale * q
//   Q4_0 <-> any                via F32: GGUF's Q4_0 rule (QuantizeBlockQ4)
//                               over rotated rows: H applied leaving Q4_0
//                               and entering it (backend/kv_rotation.h)
//   FP8 E4M3 -> any             via F32, exact (scale * e4m3): a CUDA
//                               context's FP8 stream enters a CPU pool
//   any -> FP8 E4M3             per-32-value scale max|x| / 448, nearest
//                               even (QuantizeBlockFp8, the CUDA pool's rule)
#pragma once

#include <cstdint>
#include <span>

#include "backend/kv_wire.h"
#include "util/status.h"

namespace llm::kvstate {

// `from` and `to` differ only in their element types (K's, V's, or both);
// in and out have their block_bytes(). Each side converts on its own.
void ConvertKvBlock(const KvWireLayout& from, std::span<const uint8_t> in, const KvWireLayout& to,
                    std::span<uint8_t> out);

// KV_CORRUPT where a block's FP8 E4M3 tiles hold a scale that is NaN,
// infinite or negative, or the E4M3 NaN code (no writer stores them; a
// reader must not compute from them). Other types: every bit pattern reads.
Status CheckKvBlockValues(const KvWireLayout& w, std::span<const uint8_t> kv);

// The Hadamard rotation size of `w`'s K (kv 0) or V (kv 1) rows: 0 unless
// the type stores rotated rows (Q4_0).
int64_t KvRowRotation(const KvWireLayout& w, int64_t kv);

// Row `p` of a K (kv 0) or V (kv 1) tile of `w` as F32 (head_dim values),
// as stored in that side's element type (a Q4_0 row still rotated:
// KvRowRotation).
void DecodeKvRow(const KvWireLayout& w, int64_t kv, const uint8_t* tile, int64_t p, float* out);

// Stores x (head_dim values) as row `p` of a K (kv 0) or V (kv 1) tile of
// `w`, in that side's element type, rounded or quantized as the pools do.
void EncodeKvRow(const KvWireLayout& w, int64_t kv, uint8_t* tile, int64_t p, const float* x);

}  // namespace llm::kvstate
