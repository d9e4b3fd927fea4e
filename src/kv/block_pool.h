// BlockPool: the bookkeeping of the paged KV memory. The memory itself lives
// in the backend; the pool hands out block ids, counts references to them and
// remembers which full blocks hold which tokens (the prefix cache).
//
// Every block is in exactly one of three states:
//
//   used          ref_count > 0; in one or more block tables
//   free, cached  ref_count == 0; still holds a full block of known tokens,
//                 findable by hash; on the free list, evicted when popped
//   free          ref_count == 0; no hash; on the free list
//
//   free lists (LRU):  ordinary   front [ oldest freed ... newest freed ] back
//                      protected  front [ oldest freed ... newest freed ] back
//   Allocate() pops the ordinary front, or the protected front when the
//   ordinary list is empty (evicting its cache entry if it has one);
//   Release() of the last reference appends to the back of the block's
//   list. Sequences release their blocks tail first, so a sequence's tail
//   is evicted before its head. A block released with `keep` (a request
//   that keeps its KV, llm_request.keep_kv) is protected from then until it
//   is reused: it goes to the protected list whenever it becomes free.
//
// A full block's hash chains over the whole prefix: hash(parent hash, salt,
// token ids). Lookups check the stored tokens and parent hash, so a hash
// collision can never map a prefix onto the wrong block.
// "No room" is an ordinary return value (std::nullopt / false), never an error.
//
// Tiers: with a KvTierHook set, a cached block evicted by Allocate is first
// offered to it (OnEvict, while its K/V are intact), unless its content is
// still pending (registered before the copy that fills it has run:
// MarkPending, until ClearPending after the step's copies).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "kv/kv_tier_hook.h"

namespace llm {

class BlockPool {
 public:
  BlockPool(int32_t n_blocks, int32_t block_size);

  int32_t n_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t block_size() const { return block_size_; }
  int32_t n_free() const { return n_free_; }              // free, cached or not
  int32_t n_used() const { return n_blocks() - n_free_; }
  int32_t n_cached_free() const { return n_cached_free_; }

  int32_t BlocksFor(int64_t n_tokens) const {
    return static_cast<int32_t>((n_tokens + block_size_ - 1) / block_size_);
  }
  bool CanAllocate(int32_t n) const { return n <= n_free_; }

  // Takes the least recently freed block (ref_count becomes 1), dropping its
  // cache entry; nullopt when every block is in use.
  std::optional<int32_t> Allocate();
  // Grows `table` until it covers `n_tokens` tokens; all or nothing.
  bool EnsureCapacity(std::vector<int32_t>* table, int64_t n_tokens);
  void AddRef(int32_t block);
  // Drops one reference; the block goes to the back of its free list
  // (keeping its cache entry) when none is left; `keep` protects it.
  void Release(int32_t block, bool keep = false);
  // Releases a whole table, tail first, and clears it.
  void ReleaseAll(std::vector<int32_t>* table, bool keep = false);
  int32_t n_protected_free() const { return n_protected_free_; }
  int32_t ref_count(int32_t block) const { return blocks_[block].ref; }

  // ---- prefix cache
  static BlockHash HashBlock(BlockHash parent, uint64_t salt, std::span<const int32_t> tokens);
  // The cached block holding exactly `tokens` after `parent`, if any.
  std::optional<int32_t> Lookup(BlockHash hash, BlockHash parent, std::span<const int32_t> tokens) const;
  // Takes a reference to a block found by Lookup (removing it from the free
  // list if it was free).
  void Touch(int32_t block);
  // Records that used block `block` now holds the full `tokens`. If another
  // block already holds them, nothing changes (the first stays canonical).
  void Register(int32_t block, BlockHash hash, BlockHash parent, uint64_t salt, std::span<const int32_t> tokens);
  bool is_cached(int32_t block) const { return blocks_[block].cached; }
  BlockHash hash_of(int32_t block) const { return blocks_[block].hash; }
  // The tokens a cached block was registered with (for invariant checks).
  std::span<const int32_t> cached_tokens(int32_t block) const;
  BlockHash cached_parent(int32_t block) const { return blocks_[block].parent; }

  uint64_t salt_of(int32_t block) const { return blocks_[block].salt; }

  // ---- tiers (see the top of this file)
  void set_tier_hook(KvTierHook* hook) { hook_ = hook; }
  KvTierHook* tier_hook() const { return hook_; }
  void MarkPending(int32_t block);
  void ClearPending();

  // Checks every internal invariant; returns false (with a reason) if broken.
  bool CheckInvariants(std::string* why) const;

 private:
  struct Block {
    int32_t ref = 0;
    int32_t prev = -1, next = -1;  // free-list links (valid when ref == 0)
    bool cached = false;
    bool pending = false;  // registered, but the copy that fills it has not run
    bool keep = false;     // protected: on the protected free list when free
    BlockHash hash = 0, parent = 0;
    uint64_t salt = 0;
  };
  void Unlink(int32_t b);
  void PushBack(int32_t b);
  void Evict(int32_t b);

  int32_t block_size_;
  std::vector<Block> blocks_;
  std::vector<int32_t> tokens_;  // (n_blocks, block_size) tokens of cached blocks
  int32_t head_[2] = {-1, -1}, tail_[2] = {-1, -1};  // [0] ordinary, [1] protected
  int32_t n_free_ = 0;
  int32_t n_protected_free_ = 0;
  int32_t n_cached_free_ = 0;
  std::unordered_map<BlockHash, int32_t> by_hash_;
  KvTierHook* hook_ = nullptr;
  std::vector<int32_t> pending_;
};

}  // namespace llm
