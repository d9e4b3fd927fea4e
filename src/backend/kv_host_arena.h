// KvHostArena: host memory for KV blocks taken out of a backend's pool (the
// host tier under the prefix cache, kvstate/kv_tiers.h): n_slots blocks in
// the wire layout of the pool's element type (kv_wire.h), and the copies
// between a pool block and a slot.
//
//   Backend::CreateKvHostArena (this file)   plain host memory, a slot
//                                            allocated when first used;
//                                            copies are ReadKvBlock /
//                                            WriteKvBlock, done on return
//   CUDA (cuda/cuda_kv_host.h)               page-locked memory
//                                            (cudaHostAlloc); copies queued
//                                            on a copy stream, ordered with
//                                            the compute stream by events
//
// The ordering every arena keeps: Save(block, slot) copies the block's K/V
// as the work queued before the call leaves them, and the block may be
// reused at once (work queued after the call sees the copy done); Restore
// likewise, into the block. Bytes(slot) waits for the slot's copies. A slot
// is reused only through these calls, so copies into and out of one slot
// happen in call order. Called on the thread that runs Forward, or while
// it is paused (Engine::RunPaused).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/backend.h"

namespace llm {

class KvHostArena {
 public:
  virtual ~KvHostArena() = default;
  virtual int32_t n_slots() const = 0;
  // True when the slots are page-locked (their copies are DMA transfers).
  virtual bool pinned() const { return false; }
  // Pool block -> slot / slot -> pool block. INVALID_ARGUMENT for an id out
  // of range (nothing copied); a backend error as the backend reports it.
  virtual Status Save(int32_t block, int32_t slot) = 0;
  virtual Status Restore(int32_t slot, int32_t block) = 0;
  // The slot's bytes (block_bytes of the wire layout) once its copies are done.
  virtual StatusOr<std::span<const uint8_t>> Bytes(int32_t slot) = 0;
};

// The plain arena over `backend`'s ReadKvBlock / WriteKvBlock (which must
// outlive it).
class PlainKvHostArena final : public KvHostArena {
 public:
  PlainKvHostArena(Backend* backend, int32_t n_slots);
  int32_t n_slots() const override { return static_cast<int32_t>(slots_.size()); }
  Status Save(int32_t block, int32_t slot) override;
  Status Restore(int32_t slot, int32_t block) override;
  StatusOr<std::span<const uint8_t>> Bytes(int32_t slot) override;

 private:
  Status Check(int32_t slot, const char* what) const;
  Backend* backend_;
  size_t block_bytes_;
  std::vector<std::vector<uint8_t>> slots_;  // each empty until first saved into
};

}  // namespace llm
