// KvCacheManager: the sequence-level view of the paged KV pool. It attaches
// cached prefixes to new sequences, reserves the slots a step will write
// (copying a shared, partially filled block before it is written), records
// newly completed blocks in the prefix cache, forks sequences for parallel
// sampling and frees sequences.
//
// Callers: the scheduler plans with it (attach, allocate, swap, free on
// preemption and removal); the engine, after a step, commits what the step
// computed (CommitComputed, also after verifying drafts), forks parallel
// samples once their prompt is done (Fork), drops the swap state of a
// sequence whose swap-out the backend failed (Free), and reads the pool's
// figures for llm_get_stats.
//
//   block table of a sequence (block_size 4), n_computed = 10:
//     logical  [ 0      | 1      | 2       ]
//     tokens   [ a b c d| e f g h| i j . . ]
//     hashes   [ h0     | h1     ]            h1 = H(h0, salt, e f g h)
//   Blocks 0 and 1 are full and findable by any sequence whose tokens start
//   "a b c d e f g h" (same salt). Block 2 is partial: it is written next,
//   so if another sequence shares it (a fork), it is copied first.
//
// Swapping (preemption by swapping instead of recompute): SwapOut moves a
// sequence's K/V to host swap slots and drops every pool reference it holds;
// SwapIn gives it blocks again and says which slots to copy back. The swap
// space is a fixed number of slots, one block each (the backend holds the
// memory; this class only hands out slot ids).
//
//   Shared blocks. A swapped-out sequence holds no pool block at all, so a
//   waiting sequence can never pin pool memory (and starve running ones or
//   deadlock with another swapped sequence). What happens to each logical
//   block i of its table at SwapOut:
//
//     full, the canonical prefix-cache     not copied: its reference is
//     block for its hash, and held by      dropped; SwapIn takes it back
//     another sequence too (ref > 1)       by hash (BlockPool::Lookup)
//     anything else (private; partial;     copied to a slot, then released
//     shared but not cached)
//
//   A shared cached block stays in the pool while its other holder runs,
//   and after that on the cached free list until evicted; copying it would
//   spend host memory and bandwidth on a block that is nearly always still
//   there. If it was evicted after all, its K/V are gone and SwapIn reports
//   kLost: the sequence recomputes (its slots freed), as if preempted by
//   recompute. Every full block with a hash, copied or not, is looked up
//   first at SwapIn, so a block still cached comes back shared, uncopied.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/sequence.h"
#include "kv/block_pool.h"

namespace llm {

struct KvCopy {
  int32_t src = 0;  // copy block src's K/V onto block dst before the step
  int32_t dst = 0;
};

class KvCacheManager {
 public:
  // n_swap_slots: blocks of host swap space; 0 = no swapping (SwapOut
  // always declines). Prefix caching is always on; a request that must not
  // start from cached blocks says so (Sequence::use_cached_prefix).
  KvCacheManager(int32_t n_blocks, int32_t block_size, int32_t n_swap_slots = 0);

  // Tiers under the prefix cache (kv_tier_hook.h); null: none. Not owned.
  void set_tier(KvTierHook* tier) { pool_.set_tier_hook(tier); }

  BlockPool& pool() { return pool_; }
  const BlockPool& pool() const { return pool_; }
  int32_t block_size() const { return pool_.block_size(); }

  // For a sequence without blocks: maps the longest cached prefix of its
  // tokens onto the cached blocks (always leaving at least one token to
  // compute, whose logits the step needs) and sets n_computed to match.
  // A block the pool lacks is looked up in the tiers, if any, and copied
  // back into a free block (which may evict another cached block down).
  // Returns the number of tokens served from the cache.
  int32_t AttachCachedPrefix(Sequence* seq);

  // Reserves slots for tokens [n_computed, n_computed + n_new + n_lookahead):
  // allocates blocks and, when the block that the first new token lands in is
  // shared, replaces it by a private copy (appended to *copies for the
  // backend). All or nothing: returns false, changing nothing, when the pool
  // lacks the blocks.
  bool AllocateSlots(Sequence* seq, int32_t n_new, int32_t n_lookahead, std::vector<KvCopy>* copies);

  // After a step: enters the sequence's newly completed blocks into the
  // prefix cache. Only computed (verified) tokens ever become cached.
  void CommitComputed(Sequence* seq);

  // `child` shares every block of `parent` that holds computed tokens
  // (parallel sampling).
  void Fork(const Sequence& parent, Sequence* child);

  // Releases all of a sequence's blocks, tail first (to the protected end
  // of the eviction order if it keeps its KV), and its swap slots if it is
  // swapped out (then it is not any more).
  void Free(Sequence* seq);

  // ---- swapping (see the top of this file)
  // Swaps out a sequence that holds blocks: appends a (block, slot) copy for
  // every block to copy, to run before any of its blocks is reused, and
  // releases all its blocks; n_computed stays. Returns false, changing
  // nothing, when there is no swap space, its free slots are too few or
  // nothing is computed: the caller recomputes instead.
  bool SwapOut(Sequence* seq, std::vector<KvSwap>* outs);
  enum class SwapInResult {
    kOk,      // blocks restored (and grown for n_new tokens); copies appended
    kNoRoom,  // the pool lacks the blocks; nothing changed, try later
    kLost,    // a block it left in the cache was evicted: its swap state is
              // dropped and it must recompute (n_computed = 0)
  };
  // Brings a swapped-out sequence back with room for n_new more tokens:
  // cached blocks by hash, the others allocated and appended to *ins (slot
  // -> block copies to run before the step). All or nothing for kNoRoom.
  SwapInResult SwapIn(Sequence* seq, int32_t n_new, std::vector<KvSwap>* ins);
  int32_t n_swap_slots() const { return n_swap_slots_; }
  int32_t n_swap_free() const { return static_cast<int32_t>(swap_free_.size()); }

  // Counts one admission: `n_tokens` looked up, `n_hit` of them cached.
  void RecordQuery(int32_t n_tokens, int32_t n_hit) {
    queried_tokens_ += static_cast<uint64_t>(n_tokens);
    hit_tokens_ += static_cast<uint64_t>(n_hit);
  }
  // Prefix-cache effectiveness, in tokens, since creation.
  uint64_t queried_tokens() const { return queried_tokens_; }
  uint64_t hit_tokens() const { return hit_tokens_; }
  // Blocks copied to and from the swap space, since creation.
  uint64_t swapped_out_blocks() const { return swapped_out_blocks_; }
  uint64_t swapped_in_blocks() const { return swapped_in_blocks_; }
  // Blocks copied back from the tiers by AttachCachedPrefix, since creation.
  uint64_t tier_restored_blocks() const { return tier_restored_blocks_; }

  // Checks the swap space's bookkeeping against the swapped-out sequences
  // (every slot free or held by exactly one of them); false with a reason.
  bool CheckSwapInvariants(const std::vector<const Sequence*>& swapped, std::string* why) const;

 private:
  // Logical block i of `seq` as the prefix cache has it, if it does.
  std::optional<int32_t> LookupCached(const Sequence& seq, int32_t i) const;
  void FreeSwapSlots(Sequence* seq);
  // A free block filled from the tiers with (h, parent, toks), registered
  // and referenced once; nullopt when no tier has it or the pool is full.
  std::optional<int32_t> RestoreFromTier(BlockHash h, BlockHash parent, uint64_t salt, std::span<const int32_t> toks);

  BlockPool pool_;
  int32_t n_swap_slots_;
  std::vector<int32_t> swap_free_;  // free swap slot ids (a stack)
  uint64_t swapped_out_blocks_ = 0;
  uint64_t swapped_in_blocks_ = 0;
  uint64_t tier_restored_blocks_ = 0;
  uint64_t queried_tokens_ = 0;
  uint64_t hit_tokens_ = 0;
};

}  // namespace llm
