#include "kvstate/host_tier.h"

#include <algorithm>

namespace llm::kvstate {

HostTier::HostTier(int32_t n_slots) : n_slots_(std::max(n_slots, 0)) {
  for (int32_t s = n_slots_ - 1; s >= 0; --s) free_.push_back(s);
}

bool HostTier::Touch(BlockHash hash) {
  auto it = index_.find(hash);
  if (it == index_.end()) return false;
  lru_.splice(lru_.end(), lru_, it->second);
  return true;
}

std::optional<HostEntry> HostTier::MakeRoom(bool* no_room) {
  *no_room = false;
  if (!free_.empty()) return std::nullopt;
  for (auto it = lru_.begin(); it != lru_.end(); ++it) {
    if (has_pin_ && it->hash == pinned_) continue;
    HostEntry out = std::move(*it);
    index_.erase(out.hash);
    lru_.erase(it);
    free_.push_back(out.slot);
    return out;
  }
  *no_room = true;
  return std::nullopt;
}

int32_t HostTier::Insert(BlockHash hash, BlockHash parent, uint64_t salt, std::span<const int32_t> tokens) {
  const int32_t slot = free_.back();
  free_.pop_back();
  lru_.push_back(HostEntry{hash, parent, salt, {tokens.begin(), tokens.end()}, slot});
  index_[hash] = std::prev(lru_.end());
  return slot;
}

void HostTier::Forget(BlockHash hash) {
  auto it = index_.find(hash);
  if (it == index_.end()) return;
  free_.push_back(it->second->slot);
  lru_.erase(it->second);
  index_.erase(it);
}

const HostEntry* HostTier::Find(BlockHash hash, BlockHash parent, std::span<const int32_t> tokens) {
  auto it = index_.find(hash);
  if (it == index_.end()) return nullptr;
  const HostEntry& b = *it->second;
  if (b.parent != parent || !std::equal(tokens.begin(), tokens.end(), b.tokens.begin(), b.tokens.end()))
    return nullptr;  // a hash collision
  lru_.splice(lru_.end(), lru_, it->second);
  return &lru_.back();
}

}  // namespace llm::kvstate
