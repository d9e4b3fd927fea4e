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

// Element types of the device KV pool (llm_ctx_params.kv_type; the values
// are the KV wire's, backend/kv_wire.h, so a pool block is a wire block).
inline constexpr int32_t kKvF16 = 2;   // IEEE half
inline constexpr int32_t kKvQ8 = 3;    // int8, one F32 scale per head_dim row (x = scale * q, scale = max|x| / 127)
inline constexpr int32_t kKvBf16 = 4;  // the default
// GGUF Q4_0 blocks of Hadamard-rotated rows (the CPU pool's and the wire's
// elem 6): per 32 values an IEEE-half scale d and 16 bytes whose low nibbles
// hold values 0..15 and high nibbles 16..31, each q + 8; x = d * (q - 8).
// head_dim a multiple of 32. The rows are H_n k and H_n v (n: kv_rotation.h,
// passed to the kernels as RopeKvParams::rot_k / rot_v), so the query is
// rotated as the key and each head's output rotated back (hadamard.cuh).
inline constexpr int32_t kKvQ4 = 6;
inline constexpr int32_t kQ4BlockBytes = 18;  // values per block: 32
// FP8 E4M3 blocks (the wire's elem 7; compute capability 8.9 or newer, the
// backend refuses it below): per 32 values an F32 scale s = max|x| / 448
// and 32 E4M3 bytes (nearest even, saturating, NaN stored as 0); x = s *
// e4m3. head_dim a multiple of 32; rows not rotated.
inline constexpr int32_t kKvFp8 = 7;
inline constexpr int32_t kFp8BlockBytes = 36;  // values per block: 32

// The device KV pool, one allocation of n_blocks blocks. A block holds
// block_size consecutive positions of one sequence for every layer, K and V,
// so copying a block (copy-on-write) is one memcpy:
//
//   pool ─┬─ block 0 ─┬─ layer 0 ─┬─ K: kv head 0 tile   tile = rows of positions 0 .. bs-1
//         │           │           │      kv head 1 ...    BF16, F16: (bs, head_dim) 2-byte values
//         │           │           └─ V: kv head 0 ...    Q8_0: (bs) F32 scales, then
//         │           │                  kv head 1 ...          (bs, head_dim) int8
//         │           │                                   Q4_0: (bs) rows of head_dim / 32
//         │           │                                         18-byte GGUF blocks
//         │           │                                   FP8:  (bs) rows of head_dim / 32
//         │           │                                         36-byte blocks (F32 scale, 32 E4M3)
//         │           ├─ layer 1 ...
//         ├─ block 1 ...
//
// K's tiles are of K's element type (elem) and V's of V's (elem_v; 0: as
// elem, llm_ctx_params.kv_type_v), each side's tile of its own size: the KV
// wire layout (backend/kv_wire.h) of that pair, so a block leaves and
// enters the device as it is. Token-major tiles keep one
// key's head_dim values adjacent (16-byte loads for any block size); the
// attention kernels widen a tile to bf16 in shared memory as they load it
// (kernels/kv_elem.cuh) and transpose V there where the tensor cores want it.
// Offsets are in bytes.
struct KvPoolLayout {
  int32_t n_layer = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;
  int32_t block_size = 0;
  int32_t elem = kKvBf16;  // K's (and V's unless elem_v says otherwise)
  int32_t elem_v = 0;      // V's; 0 = as elem

  // The element type of K (kv = 0) or V (kv = 1).
  int32_t Elem(int32_t kv) const { return kv == 1 && elem_v != 0 ? elem_v : elem; }
  // One (layer, K|V, head) tile of element type e.
  int64_t TileBytes(int32_t e) const {
    const int64_t values = static_cast<int64_t>(block_size) * head_dim;
    if (e == kKvQ4) return static_cast<int64_t>(block_size) * (head_dim / 32) * kQ4BlockBytes;
    if (e == kKvFp8) return static_cast<int64_t>(block_size) * (head_dim / 32) * kFp8BlockBytes;
    return e == kKvQ8 ? 4 * static_cast<int64_t>(block_size) + values : 2 * values;
  }
  int64_t tile_bytes(int32_t kv = 0) const { return TileBytes(Elem(kv)); }
  int64_t layer_bytes() const { return n_head_kv * (tile_bytes(0) + tile_bytes(1)); }
  int64_t block_bytes() const { return n_layer * layer_bytes(); }
  int64_t KOffset(int32_t layer) const { return layer * layer_bytes(); }
  int64_t VOffset(int32_t layer) const { return layer * layer_bytes() + n_head_kv * tile_bytes(0); }

  // Every tile of a pool whose base is 256-byte aligned (cudaMalloc) starts
  // on the alignment its type's accesses need (KvElemAlign). Always so with
  // one type; with two, K's plane can leave V's, or the next layer's K, off
  // it: Q8_0 K before F16 V with block_size 1 puts V at 36 * n_head_kv bytes.
  bool Aligned() const;
};

inline bool KvElemValid(int32_t elem) {
  return elem == kKvF16 || elem == kKvQ8 || elem == kKvBf16 || elem == kKvQ4 || elem == kKvFp8;
}
// elem is a pool type whose rows head_dim fills (Q4_0, FP8: whole 32-value blocks).
inline bool KvElemFits(int32_t elem, int32_t head_dim) {
  return KvElemValid(elem) && ((elem != kKvQ4 && elem != kKvFp8) || (head_dim > 0 && head_dim % 32 == 0));
}

// The alignment in bytes the kernels need where a tile of element type e
// starts: with head_dim a multiple of 8 they move 8 values at a time
// (BF16/F16: 16-byte accesses; Q8_0 and FP8: 4-byte words; Q4_0: 2-byte
// halves of its 18-byte blocks), otherwise element by element.
__host__ __device__ inline int64_t KvElemAlign(int32_t e, int32_t head_dim) {
  if (e == kKvQ4) return 2;
  if (e == kKvFp8) return 4;
  const bool wide = head_dim % 8 == 0;
  if (e == kKvQ8) return wide ? 4 : 1;
  return wide ? 16 : 2;
}

// One layer's view of the pool, as the attention and KV-store kernels take it.
//   row of position p, kv head h: k + block_table[p / bs] * block_stride + h * tile_bytes + row p % bs
//   (V: v, tile_bytes_v, elem_v; each 0 = as K's, so a one-type view sets K's only)
struct PagedKv {
  unsigned char* k = nullptr;  // pool + KOffset(layer)
  unsigned char* v = nullptr;  // pool + VOffset(layer)
  int64_t block_stride = 0;    // bytes per block
  int64_t tile_bytes = 0;      // bytes per (K, head) tile
  int64_t tile_bytes_v = 0;    // bytes per (V, head) tile; 0 = tile_bytes
  int32_t block_size = 0;      // tokens per block
  int32_t elem = kKvBf16;      // K's kKv*
  int32_t elem_v = 0;          // V's kKv*; 0 = elem

  __host__ __device__ int32_t ElemV() const { return elem_v != 0 ? elem_v : elem; }
  __host__ __device__ int64_t TileBytesV() const { return tile_bytes_v != 0 ? tile_bytes_v : tile_bytes; }
  // Both planes, their tiles and every block start where their types'
  // accesses need (KvElemAlign); the launchers refuse a view that does not.
  __host__ __device__ bool Aligned(int32_t head_dim) const {
    const int64_t ak = KvElemAlign(elem, head_dim), av = KvElemAlign(ElemV(), head_dim);
    return reinterpret_cast<uintptr_t>(k) % ak == 0 && reinterpret_cast<uintptr_t>(v) % av == 0 &&
           block_stride % (ak > av ? ak : av) == 0 && tile_bytes % ak == 0 && TileBytesV() % av == 0;
  }
};

inline bool KvPoolLayout::Aligned() const {
  const int64_t ak = KvElemAlign(Elem(0), head_dim), av = KvElemAlign(Elem(1), head_dim);
  return tile_bytes(0) % ak == 0 && tile_bytes(1) % av == 0 && n_head_kv * tile_bytes(0) % av == 0 &&
         layer_bytes() % (ak > av ? ak : av) == 0;
}

}  // namespace llm::cuda
