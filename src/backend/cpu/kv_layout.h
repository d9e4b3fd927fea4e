// Layout of the CPU backend's paged KV pool, K and V each in one of four
// element types (llm_ctx_params.kv_type / kv_type_v): F32, F16, Q8_0 or Q4_0.
//
// One allocation of n_blocks blocks. A block holds block_size consecutive
// positions of one sequence for every layer, K and V, so CopyKvBlock is a
// single memcpy and a block's bytes are contiguous:
//
//   pool ─┬─ block 0 ─┬─ layer 0 ─┬─ K: kv head 0 (head_dim, block_size)  ← transposed
//         │           │           │      kv head 1 ...
//         │           │           └─ V: kv head 0 (block_size, head_dim)
//         │           │                  kv head 1 ...
//         │           ├─ layer 1 ...
//         ├─ block 1 ...
//
// K is stored transposed inside its tile (dimension-major: all block_size
// keys' dimension d are adjacent) so attention computes 8 keys' scores with
// head_dim vertical FMAs; V keeps one position's head_dim values adjacent so
// the weighted sum adds whole rows.
//
//   K[layer][kv_head] of position p, dim d (element index in its tile):
//     tile(block_table[p / bs], KOffset(layer, h)) [d * bs + p % bs]
//   V[layer][kv_head] of position p, dim d:
//     tile(block_table[p / bs], VOffset(layer, h)) [(p % bs) * head_dim + d]
//   where tile(b, off) = pool bytes + b * block_bytes() + off.
//
// Q8_0 stores int8 elements in the same places, followed inside each tile
// by block_size F32 scales, one per position: that position's head_dim row
// of K (or V) is scale * int8, scale = max|x| / 127. One scale per row (not
// per 32 elements as in GGUF's Q8_0) keeps K's transposed layout: a key's
// score is scale_j · Σ_d q_d · k8[d][j], so the scale multiplies the finished
// dot product once, and V's scale folds into the softmax weight.
//
//   Q8_0 tile: [ int8 (head_dim * block_size) | F32 scale (block_size) ]
//
// Q4_0 (head_dim a multiple of 32) quantizes each position's row in blocks
// of 32 dimensions by GGUF's Q4_0 rule (backend/kv_wire.h QuantizeBlockQ4:
// one IEEE-half scale per block, values q - 8 with q in 0..15). One byte
// holds dimensions 2i (low nibble) and 2i+1 (high nibble) of one position,
// so a position's bytes are its own (tokens are stored by parallel threads)
// and K keeps its transposed order by dimension pairs:
//
//   Q4_0 K tile: [ byte (head_dim / 2, block_size) | F16 scale (head_dim / 32, block_size) ]
//   Q4_0 V tile: [ byte (block_size, head_dim / 2) | F16 scale (block_size, head_dim / 32) ]
//
// 18 bytes per 32 values, as in GGUF; the attention kernel widens 8 keys (K)
// or one row (V) at a time to F32 in registers/L1, never the whole cache.
// A Q4_0 side holds Hadamard-rotated rows (backend/kv_rotation.h): forward.cpp
// rotates q and k before the store when K is Q4_0, v before the store and
// each head's attention output after when V is.
#pragma once

#include <cstdint>

#include "backend/kv_rotation.h"

namespace llm::cpu {

enum class KvElem : int32_t { kF32 = 0, kF16 = 1, kQ8 = 2, kQ4 = 3 };

// K and V may differ in type (llm_ctx_params.kv_type / kv_type_v): each
// side's tiles have their own size, so a layer's K tiles and V tiles are
// each n_head_kv tiles of their side's size:
//
//   layer l: [ K head 0 .. K head n-1 (k_tile_bytes each) | V head 0 .. V head n-1 (v_tile_bytes each) ]
struct KvLayout {
  int64_t n_layer = 0;    // layers the pool holds: first_layer .. first_layer + n_layer - 1
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  int64_t block_size = 0;
  KvElem elem_k = KvElem::kF32;
  KvElem elem_v = KvElem::kF32;
  // Partial offload: a backend running only the model's layers from this one
  // on keeps only theirs; the offsets take the model's (global) layer index.
  int64_t first_layer = 0;

  // bytes per element; Q4_0's are half a byte (TileBytes counts them)
  static int64_t ElemBytes(KvElem e) { return e == KvElem::kF32 ? 4 : e == KvElem::kF16 ? 2 : 1; }
  // bytes from a Q8_0 or Q4_0 tile's start to its scales (4-aligned)
  int64_t ScalesOffset(KvElem e) const {
    return e == KvElem::kQ4 ? (head_dim / 2 * block_size + 3) / 4 * 4 : (head_dim * block_size + 3) / 4 * 4;
  }
  // one (layer, K|V, head) tile of type e, padded to 4 bytes so every tile
  // (and a Q8_0 tile's scales) stays 4-aligned
  int64_t TileBytes(KvElem e) const {
    if (e == KvElem::kQ8) return ScalesOffset(e) + 4 * block_size;
    if (e == KvElem::kQ4) return ScalesOffset(e) + (head_dim / 32 * block_size * 2 + 3) / 4 * 4;
    return (head_dim * block_size * ElemBytes(e) + 3) / 4 * 4;
  }
  int64_t k_tile_bytes() const { return TileBytes(elem_k); }
  int64_t v_tile_bytes() const { return TileBytes(elem_v); }
  int64_t k_scales_offset() const { return ScalesOffset(elem_k); }
  int64_t v_scales_offset() const { return ScalesOffset(elem_v); }
  int64_t layer_bytes() const { return n_head_kv * (k_tile_bytes() + v_tile_bytes()); }
  int64_t block_bytes() const { return n_layer * layer_bytes(); }
  // Hadamard rotation sizes of K's and V's rows (0: stored as computed):
  // each side rotates when its own type is Q4_0
  int64_t k_rotation() const { return elem_k == KvElem::kQ4 ? KvRotationK(head_dim) : 0; }
  int64_t v_rotation() const { return elem_v == KvElem::kQ4 ? KvRotationV(head_dim) : 0; }
  int64_t KOffset(int64_t layer, int64_t h) const { return (layer - first_layer) * layer_bytes() + h * k_tile_bytes(); }
  int64_t VOffset(int64_t layer, int64_t h) const {
    return (layer - first_layer) * layer_bytes() + n_head_kv * k_tile_bytes() + h * v_tile_bytes();
  }
};

}  // namespace llm::cpu
