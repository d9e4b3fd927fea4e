// KvTiers: the host-memory and disk tiers under the prefix cache (the
// KvTierHook the pool calls; kv/kv_tier_hook.h).
//
//   pool ──evict──► host tier (LRU, kv_host_bytes) ──push out──► disk tier (LRU, kv_disk_bytes) ──► deleted
//        ◄─restore──┴──────────────── a prefix-cache miss looks down both ◄──┘
//
// Without a host tier, evicted blocks go straight to disk. The tiers are
// inclusive: a block restored into the pool stays below too, so evicting
// it again copies nothing. Blocks travel in the wire layout of the pool's
// element type (backend/kv_wire.h). The host tier's K/V lie in the
// backend's host arena (backend/kv_host_arena.h): on CUDA page-locked
// memory whose copies are queued on a copy stream, so an eviction or a
// restore does not wait for its copy (the next step's kernels do); disk
// files are tier files (tier_file.h), checked on load. At destroy
// (Persist) the pool's cached blocks and the host tier go to disk, so a
// restarted context finds them.
//
// Threads: called by whoever owns the pool (the engine thread, or a caller
// in Engine::RunPaused); counters() is read on that thread too.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/kv_host_arena.h"
#include "kv/block_pool.h"
#include "kv/kv_tier_hook.h"
#include "kvstate/disk_tier.h"
#include "kvstate/host_tier.h"
#include "model/model.h"

namespace llm::kvstate {

struct TierOptions {
  uint64_t host_bytes = 0;  // 0: no host tier
  std::string disk_dir;     // empty: no disk tier
  uint64_t disk_bytes = 0;  // with disk_dir: the budget (> 0)
  bool enabled() const { return host_bytes > 0 || !disk_dir.empty(); }
};

struct TierCounters {
  uint64_t host_hit_blocks = 0;  // blocks restored from host memory
  uint64_t disk_hit_blocks = 0;  // ... from disk
  uint64_t bytes_down = 0;       // K/V bytes copied out of the pool into a tier
  uint64_t bytes_up = 0;         // ... and back into the pool
  uint64_t host_bytes = 0;       // held now
  uint64_t disk_bytes = 0;
  uint64_t files_refused = 0;    // disk files of another model, or corrupt
  bool disk_enabled = false;     // false once a disk error turned it off
};

class KvTiers final : public KvTierHook {
 public:
  // nullptr when `opt` asks for no tier. UNSUPPORTED for a backend that
  // cannot read and write its KV blocks; INVALID_ARGUMENT for a budget
  // that holds no block; OUT_OF_MEMORY when the host arena cannot be
  // allocated. A disk tier that cannot work is not an error: it is off,
  // with a warning.
  static StatusOr<std::unique_ptr<KvTiers>> Create(const TierOptions& opt, Backend* backend, const Model* model);

  void OnEvict(const EvictedBlock& b) override;
  bool Stage(BlockHash hash, BlockHash parent, uint64_t salt, std::span<const int32_t> tokens) override;
  bool WriteStaged(int32_t block) override;

  // Writes the host tier and then the pool's cached blocks to the disk tier
  // (if there is one); the pool is not changed.
  void Persist(const BlockPool& pool);

  TierCounters counters() const;
  // Every warning so far (also written to stderr), the first 100.
  std::vector<std::string> warnings() const;

 private:
  KvTiers(const TierOptions& opt, Backend* backend, const Model* model, std::unique_ptr<KvHostArena> arena);
  void Warn(const std::string& w);
  // A copy of pool block `b` as a tier block; false on a backend error.
  bool ReadBlock(const EvictedBlock& b, TierBlock* out);
  // A host entry's block for the disk tier (waits for its copy); false on an error.
  bool HostBlock(const HostEntry& e, TierBlock* out);

  Backend* backend_;
  KvGeometry geometry_;
  uint64_t block_bytes_ = 0;
  HostTier host_;
  std::unique_ptr<KvHostArena> arena_;  // null without a host tier
  std::unique_ptr<DiskTier> disk_;
  // What Stage found, for WriteStaged: a host slot (pinned in host_), or
  // K/V read from disk.
  int32_t staged_slot_ = -1;
  std::vector<uint8_t> staged_;        // (block_bytes) from disk
  TierBlock scratch_;                  // a disk tier read
  TierCounters n_;
  mutable std::mutex warn_mu_;
  std::vector<std::string> warnings_;
};

}  // namespace llm::kvstate
