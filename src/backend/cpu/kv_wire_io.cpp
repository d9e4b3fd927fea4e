// The CPU pool's blocks in the KV wire layout (backend/kv_wire.h): a plain
// re-indexing, no conversion (the wire layout takes the pool's element
// types, K's and V's).
//
//   pool K tile (head_dim, block_size), transposed   wire tile (block_size, head_dim)
//   pool V tile (block_size, head_dim)               wire tile (block_size, head_dim)
//   pool Q8_0 scales after the values                wire Q8_0 scales before the values
//   pool Q4_0 nibble pairs, scales after             wire GGUF Q4_0 blocks per row
#include <cstring>
#include <string>

#include "backend/cpu/cpu_backend.h"

namespace llm::cpu {

namespace {
// Moves one tile between the pool (`pool`, transposed when kColumn) and the
// wire (`wire`), in the direction kToWire says.
// Q4_0: the pool's nibble pairs (dims 2i, 2i+1 of a position; kv_layout.h)
// and the wire's GGUF blocks (value j with j + 16 in one byte) hold the
// same 4-bit values and F16 scales, re-indexed.
template <bool kToWire>
void MoveTileQ4(const KvLayout& kv, uint8_t* pool, uint8_t* wire, bool transposed) {
  const int64_t hd = kv.head_dim, bs = kv.block_size, nb = hd / kQ4Block;
  uint8_t* scales = pool + kv.ScalesOffset(KvElem::kQ4);
  auto pool_byte = [&](int64_t p, int64_t i) -> uint8_t& { return pool[transposed ? i * bs + p : p * (hd / 2) + i]; };
  for (int64_t p = 0; p < bs; ++p) {
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* blk = wire + (p * nb + b) * kQ4BlockBytes;
      uint8_t* sc = scales + 2 * (transposed ? b * bs + p : p * nb + b);
      if (kToWire) std::memcpy(blk, sc, 2);
      else std::memcpy(sc, blk, 2);
      uint8_t q[kQ4Block];
      if (kToWire) {
        for (int64_t j = 0; j < kQ4Block; j += 2) {
          const uint8_t v = pool_byte(p, (b * kQ4Block + j) / 2);
          q[j] = v & 15;
          q[j + 1] = v >> 4;
        }
        for (int64_t j = 0; j < 16; ++j) blk[2 + j] = static_cast<uint8_t>(q[j] | q[j + 16] << 4);
      } else {
        for (int64_t j = 0; j < 16; ++j) {
          q[j] = blk[2 + j] & 15;
          q[j + 16] = blk[2 + j] >> 4;
        }
        for (int64_t j = 0; j < kQ4Block; j += 2)
          pool_byte(p, (b * kQ4Block + j) / 2) = static_cast<uint8_t>(q[j] | q[j + 1] << 4);
      }
    }
  }
}

// transposed: a K tile (in K's element type), else a V tile (in V's).
template <bool kToWire>
void MoveTile(const KvLayout& kv, uint8_t* pool, uint8_t* wire, bool transposed) {
  const KvElem elem = transposed ? kv.elem_k : kv.elem_v;
  const int64_t hd = kv.head_dim, bs = kv.block_size, eb = KvLayout::ElemBytes(elem);
  if (elem == KvElem::kQ4) {
    MoveTileQ4<kToWire>(kv, pool, wire, transposed);
    return;
  }
  uint8_t* values = wire;
  if (elem == KvElem::kQ8) {
    uint8_t* scales = pool + kv.ScalesOffset(elem);
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

int32_t WireElem(KvElem e) {
  switch (e) {
    case KvElem::kF32: return LLM_KV_F32;
    case KvElem::kF16: return LLM_KV_F16;
    case KvElem::kQ8: return LLM_KV_Q8_0;
    case KvElem::kQ4: return kKvWireQ4_0;
  }
  return LLM_KV_F32;
}
}  // namespace

KvWireLayout CpuBackend::kv_wire_layout() const {
  if (first_layer_ != 0) return KvWireLayout{};  // partial offload: the stream needs every layer
  const int32_t ek = WireElem(kv_.elem_k), ev = WireElem(kv_.elem_v);
  return KvWireLayout{kv_.n_layer, kv_.n_head_kv, kv_.head_dim, kv_.block_size, ek, ev != ek ? ev : 0};
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
