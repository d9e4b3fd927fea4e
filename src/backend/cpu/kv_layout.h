// Layout of the CPU backend's paged KV pool (F32).
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
//   K[layer][kv_head] of position p, dim d:
//     pool[block_table[p / bs] * block_floats + KOffset(layer, h) + d * bs + p % bs]
//   V[layer][kv_head] of position p, dim d:
//     pool[block_table[p / bs] * block_floats + VOffset(layer, h) + (p % bs) * head_dim + d]
#pragma once

#include <cstdint>

namespace llm::cpu {

struct KvLayout {
  int64_t n_layer = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  int64_t block_size = 0;

  int64_t tile_floats() const { return head_dim * block_size; }                // one (layer, K|V, head)
  int64_t block_floats() const { return n_layer * 2 * n_head_kv * tile_floats(); }
  int64_t KOffset(int64_t layer, int64_t h) const { return ((layer * 2 + 0) * n_head_kv + h) * tile_floats(); }
  int64_t VOffset(int64_t layer, int64_t h) const { return ((layer * 2 + 1) * n_head_kv + h) * tile_floats(); }
};

}  // namespace llm::cpu
