// The CPU pool's blocks in the KV wire layout (backend/kv_wire.h): a plain
// re-indexing, no conversion (the wire layout takes the pool's element type).
//
//   pool K tile (head_dim, block_size), transposed   wire tile (block_size, head_dim)
//   pool V tile (block_size, head_dim)               wire tile (block_size, head_dim)
//   pool Q8_0 scales after the values                wire Q8_0 scales before the values
#include <cstring>
#include <string>

#include "backend/cpu/cpu_backend.h"

namespace llm::cpu {

namespace {
// Moves one tile between the pool (`pool`, transposed when kColumn) and the
// wire (`wire`), in the direction kToWire says.
template <bool kToWire>
void MoveTile(const KvLayout& kv, uint8_t* pool, uint8_t* wire, bool transposed) {
  const int64_t hd = kv.head_dim, bs = kv.block_size, eb = kv.elem_bytes();
  uint8_t* values = wire;
  if (kv.elem == KvElem::kQ8) {
    uint8_t* scales = pool + kv.scales_offset();
    if (kToWire) std::memcpy(wire, scales, static_cast<size_t>(4 * bs));
    else std::memcpy(scales, wire, static_cast<size_t>(4 * bs));
    values = wire + 4 * bs;
  }
  if (!transposed) {
    if (kToWire) std::memcpy(values, pool, static_cast<size_t>(bs * hd * eb));
    else std::memcpy(pool, values, static_cast<size_t>(bs * hd * eb));
    return;
  }
  for (int64_t p = 0; p < bs; ++p) {
    for (int64_t d = 0; d < hd; ++d) {
      uint8_t* w = values + (p * hd + d) * eb;  // wire: row p, column d
      uint8_t* t = pool + (d * bs + p) * eb;    // pool: row d, column p
      if (kToWire) std::memcpy(w, t, static_cast<size_t>(eb));
      else std::memcpy(t, w, static_cast<size_t>(eb));
    }
  }
}

int32_t WireElem(KvElem e) { return e == KvElem::kF32 ? LLM_KV_F32 : e == KvElem::kF16 ? LLM_KV_F16 : LLM_KV_Q8_0; }
}  // namespace

KvWireLayout CpuBackend::kv_wire_layout() const {
  if (first_layer_ != 0) return KvWireLayout{};  // partial offload: the stream needs every layer
  return KvWireLayout{kv_.n_layer, kv_.n_head_kv, kv_.head_dim, kv_.block_size, WireElem(kv_.elem)};
}

Status CpuBackend::ReadKvBlock(int32_t block, std::span<uint8_t> out) {
  const KvWireLayout w = kv_wire_layout();
  if (w.n_layer == 0) return Unsupported("a CPU backend holding only some layers cannot export its KV cache");
  if (block < 0 || block >= n_blocks_) return InvalidArgument("ReadKvBlock: block id " + std::to_string(block) + " out of range");
  if (static_cast<int64_t>(out.size()) != w.block_bytes()) return InvalidArgument("ReadKvBlock: wrong buffer size");
  // A block never written may lie in an uncommitted chunk: commit it first
  // (reading it then gives zeros, never a fault).
  CommitKvBlocks(std::span<const int32_t>(&block, 1));
  uint8_t* base = pool_base_ + block * kv_.block_bytes();
  for (int64_t l = 0; l < kv_.n_layer; ++l) {
    for (int64_t h = 0; h < kv_.n_head_kv; ++h) {
      MoveTile<true>(kv_, base + kv_.KOffset(l, h), out.data() + w.TileOffset(l, 0, h), true);
      MoveTile<true>(kv_, base + kv_.VOffset(l, h), out.data() + w.TileOffset(l, 1, h), false);
    }
  }
  return Status::Ok();
}

Status CpuBackend::WriteKvBlock(int32_t block, std::span<const uint8_t> in) {
  const KvWireLayout w = kv_wire_layout();
  if (w.n_layer == 0) return Unsupported("a CPU backend holding only some layers cannot import a KV cache");
  if (block < 0 || block >= n_blocks_) return InvalidArgument("WriteKvBlock: block id " + std::to_string(block) + " out of range");
  if (static_cast<int64_t>(in.size()) != w.block_bytes()) return InvalidArgument("WriteKvBlock: wrong buffer size");
  CommitKvBlocks(std::span<const int32_t>(&block, 1));
  uint8_t* base = pool_base_ + block * kv_.block_bytes();
  // MoveTile<false> only reads the wire side.
  uint8_t* src = const_cast<uint8_t*>(in.data());
  for (int64_t l = 0; l < kv_.n_layer; ++l) {
    for (int64_t h = 0; h < kv_.n_head_kv; ++h) {
      MoveTile<false>(kv_, base + kv_.KOffset(l, h), src + w.TileOffset(l, 0, h), true);
      MoveTile<false>(kv_, base + kv_.VOffset(l, h), src + w.TileOffset(l, 1, h), false);
    }
  }
  return Status::Ok();
}

}  // namespace llm::cpu
