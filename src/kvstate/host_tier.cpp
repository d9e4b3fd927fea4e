#include "kvstate/host_tier.h"

#include <algorithm>

namespace llm::kvstate {

bool HostTier::Touch(BlockHash hash) {
  auto it = index_.find(hash);
  if (it == index_.end()) return false;
  lru_.splice(lru_.end(), lru_, it->second);
  return true;
}

std::vector<TierBlock> HostTier::Put(TierBlock block) {
  std::vector<TierBlock> out;
  if (block.bytes() > budget_) {
    out.push_back(std::move(block));
    return out;
  }
  if (auto it = index_.find(block.hash); it != index_.end()) {  // a newer copy replaces it
    bytes_ -= it->second->bytes();
    lru_.erase(it->second);
    index_.erase(it);
  }
  bytes_ += block.bytes();
  const BlockHash h = block.hash;
  lru_.push_back(std::move(block));
  index_[h] = std::prev(lru_.end());
  while (bytes_ > budget_) {
    TierBlock& old = lru_.front();
    bytes_ -= old.bytes();
    index_.erase(old.hash);
    out.push_back(std::move(old));
    lru_.pop_front();
  }
  return out;
}

const TierBlock* HostTier::Find(BlockHash hash, BlockHash parent, std::span<const int32_t> tokens) {
  auto it = index_.find(hash);
  if (it == index_.end()) return nullptr;
  const TierBlock& b = *it->second;
  if (b.parent != parent || !std::equal(tokens.begin(), tokens.end(), b.tokens.begin(), b.tokens.end()))
    return nullptr;  // a hash collision
  lru_.splice(lru_.end(), lru_, it->second);
  return &lru_.back();
}

}  // namespace llm::kvstate
