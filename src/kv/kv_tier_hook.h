// KvTierHook: what the prefix cache asks of the tiers below it (host
// memory, disk; kvstate/kv_tiers.h implements it). The kv layer knows only
// this interface, so it stays free of files, formats and backends.
//
//   BlockPool::Allocate reuses a cached free block  -> OnEvict (its K/V are
//                                                      still intact: copy them down)
//   KvCacheManager::AttachCachedPrefix misses       -> Stage (found below?)
//                                                      then WriteStaged into a
//                                                      freshly allocated block
//
// All calls come from whoever owns the pool at that moment (the engine
// thread, or a caller inside Engine::RunPaused), never concurrently.
#pragma once

#include <cstdint>
#include <span>

namespace llm {

using BlockHash = uint64_t;

struct EvictedBlock {
  int32_t block = -1;               // pool block id; its K/V still hold these tokens
  BlockHash hash = 0, parent = 0;   // salted chained hashes, as the pool keys them
  uint64_t salt = 0;
  std::span<const int32_t> tokens;  // (block_size)
};

class KvTierHook {
 public:
  virtual ~KvTierHook() = default;
  // A cached block is about to be reused for something else.
  virtual void OnEvict(const EvictedBlock& b) = 0;
  // Looks for the block (hash, parent, tokens) below the pool; true when it
  // was found, checked, and its K/V are staged for WriteStaged. Staging
  // survives OnEvict calls (the allocation that follows may evict).
  virtual bool Stage(BlockHash hash, BlockHash parent, uint64_t salt, std::span<const int32_t> tokens) = 0;
  // Writes the staged K/V into pool block `block`; false on a backend error.
  virtual bool WriteStaged(int32_t block) = 0;
};

}  // namespace llm
