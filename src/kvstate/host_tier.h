// HostTier: KV blocks evicted from the pool, kept in host memory within a
// byte budget, least recently used first out. Keyed by the pool's salted
// chained hash; a lookup also checks parent and tokens (as the pool does),
// so a hash collision never returns another prefix's block.
//
//   lru_: front [ least recently put or found ... most recent ] back
//   Put() appends (or moves an existing block to the back); while over
//   budget the front goes out and is returned to the caller, who passes it
//   further down (the disk tier) or drops it.
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "kvstate/tier_file.h"

namespace llm::kvstate {

class HostTier {
 public:
  explicit HostTier(uint64_t budget_bytes) : budget_(budget_bytes) {}

  bool enabled() const { return budget_ > 0; }
  uint64_t bytes() const { return bytes_; }
  size_t size() const { return index_.size(); }

  // Marks a block held here as most recently used; false when absent.
  bool Touch(BlockHash hash);
  // Adds a block (one larger than the budget is returned at once); returns
  // the blocks pushed out, oldest first.
  std::vector<TierBlock> Put(TierBlock block);
  // The block (hash, parent, tokens), made most recently used; null when absent.
  const TierBlock* Find(BlockHash hash, BlockHash parent, std::span<const int32_t> tokens);
  // Every block, oldest first (for persisting at shutdown).
  const std::list<TierBlock>& blocks() const { return lru_; }

 private:
  uint64_t budget_;
  uint64_t bytes_ = 0;
  std::list<TierBlock> lru_;
  std::unordered_map<BlockHash, std::list<TierBlock>::iterator> index_;
};

}  // namespace llm::kvstate
