// HostTier: which KV blocks evicted from the pool the host-memory tier
// holds, and in which slot of the backend's host arena
// (backend/kv_host_arena.h: plain memory on the CPU, page-locked on CUDA)
// their K/V lie. A fixed number of slots (the byte budget / one block's
// bytes), least recently used first out. Keyed by the pool's salted chained
// hash; a lookup also checks parent and tokens (as the pool does), so a
// hash collision never returns another prefix's block.
//
//   lru_: front [ least recently put or found ... most recent ] back
//   Take() makes room: with no free slot the front goes out (its slot is
//   freed) and is returned, so the caller can read its bytes down to the
//   disk tier before the slot is reused; Insert() then takes a free slot.
//   One entry may be pinned (a block staged for a restore): it never goes
//   out.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/block_pool.h"

namespace llm::kvstate {

struct HostEntry {
  BlockHash hash = 0, parent = 0;  // salted, as the pool keys them
  uint64_t salt = 0;
  std::vector<int32_t> tokens;     // (block_size)
  int32_t slot = -1;               // its K/V in the host arena
};

class HostTier {
 public:
  explicit HostTier(int32_t n_slots);

  int32_t n_slots() const { return n_slots_; }
  size_t size() const { return index_.size(); }

  // Marks a block held here as most recently used; false when absent.
  bool Touch(BlockHash hash);
  // A free slot after making room: the entry pushed out for it, if one was
  // (its slot is the one now free). nullopt and *no_room when every entry
  // is pinned (nothing can go).
  std::optional<HostEntry> MakeRoom(bool* no_room);
  // Adds an entry (not held yet) in a free slot (MakeRoom first); returns the slot.
  int32_t Insert(BlockHash hash, BlockHash parent, uint64_t salt, std::span<const int32_t> tokens);
  // Drops an entry (its slot becomes free); no-op when absent.
  void Forget(BlockHash hash);
  // The block (hash, parent, tokens), made most recently used; null when absent.
  const HostEntry* Find(BlockHash hash, BlockHash parent, std::span<const int32_t> tokens);
  // Protects the entry of `hash` from MakeRoom until Unpin (one at a time).
  void Pin(BlockHash hash) { pinned_ = hash; has_pin_ = true; }
  void Unpin() { has_pin_ = false; }
  // Every entry, oldest first (for persisting at shutdown).
  const std::list<HostEntry>& entries() const { return lru_; }

 private:
  int32_t n_slots_;
  std::vector<int32_t> free_;  // free slots
  std::list<HostEntry> lru_;
  std::unordered_map<BlockHash, std::list<HostEntry>::iterator> index_;
  BlockHash pinned_ = 0;
  bool has_pin_ = false;
};

}  // namespace llm::kvstate
