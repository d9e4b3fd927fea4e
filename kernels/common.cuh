// Types shared by the CUDA kernels and their host callers. Host-includable:
// a plain C++ compiler sees the launcher declarations of every kernel header,
// so nothing here may need nvcc.
//
// Conventions of every launcher in kernels/:
//   - takes a cudaStream_t and returns cudaError_t (the launch error; a fault
//     inside the kernel surfaces at the next synchronising call);
//   - allocates nothing: buffers, workspaces included, belong to the caller,
//     whose sizes are given by a *WorkspaceBytes() query where one is needed,
//     so a step can be captured in a CUDA graph;
//   - rejects shapes it does not implement with cudaErrorInvalidValue before
//     launching anything.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace llm::cuda {

using bf16 = __nv_bfloat16;

// One sequence of a step's batch (see backend.h's Batch), as the kernels see
// it. Token i of the sequence is batch row first + i at position n_past + i;
// its block table is block_tables[table_offset ...].
struct SeqDesc {
  int32_t first;
  int32_t n_tokens;
  int32_t n_past;
  int32_t table_offset;
};
static_assert(sizeof(SeqDesc) == 16);

// The device KV pool (bf16), one allocation of n_blocks blocks. A block holds
// block_size consecutive positions of one sequence for every layer, K and V,
// so copying a block (copy-on-write) is one memcpy:
//
//   pool ─┬─ block 0 ─┬─ layer 0 ─┬─ K: kv head 0 (block_size, head_dim)   token-major
//         │           │           │      kv head 1 ...
//         │           │           └─ V: kv head 0 (block_size, head_dim)
//         │           │                  kv head 1 ...
//         │           ├─ layer 1 ...
//         ├─ block 1 ...
//
// Token-major tiles keep one key's head_dim values adjacent (16-byte loads
// for any block size); the attention kernels transpose V in shared memory
// where the tensor cores want it.
//
//   K of position p, kv head h, dim d (layer base pointer k = pool + KOffset(layer)):
//     k[block_table[p / bs] * block_stride + (h * bs + p % bs) * head_dim + d]
struct KvPoolLayout {
  int32_t n_layer = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;
  int32_t block_size = 0;

  int64_t tile_elems() const { return static_cast<int64_t>(block_size) * head_dim; }   // one (layer, K|V, head)
  int64_t layer_elems() const { return 2 * n_head_kv * tile_elems(); }
  int64_t block_stride() const { return n_layer * layer_elems(); }                      // elements per block
  int64_t KOffset(int32_t layer) const { return layer * layer_elems(); }
  int64_t VOffset(int32_t layer) const { return layer * layer_elems() + n_head_kv * tile_elems(); }
};

// One layer's view of the pool, as the attention and KV-store kernels take it.
struct PagedKv {
  bf16* k = nullptr;          // pool + KOffset(layer)
  bf16* v = nullptr;          // pool + VOffset(layer)
  int64_t block_stride = 0;   // elements per block
  int32_t block_size = 0;     // tokens per block
};

}  // namespace llm::cuda
