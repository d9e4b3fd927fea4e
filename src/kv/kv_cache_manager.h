// KvCacheManager: the sequence-level view of the paged KV pool. It attaches
// cached prefixes to new sequences, reserves the slots a step will write
// (copying a shared, partially filled block before it is written), records
// newly completed blocks in the prefix cache, forks sequences for parallel
// sampling and frees sequences. The scheduler is its only caller.
//
//   block table of a sequence (block_size 4), n_computed = 10:
//     logical  [ 0      | 1      | 2       ]
//     tokens   [ a b c d| e f g h| i j . . ]
//     hashes   [ h0     | h1     ]            h1 = H(h0, salt, e f g h)
//   Blocks 0 and 1 are full and findable by any sequence whose tokens start
//   "a b c d e f g h" (same salt). Block 2 is partial: it is written next,
//   so if another sequence shares it (a fork), it is copied first.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/sequence.h"
#include "kv/block_pool.h"

namespace llm {

struct KvCopy {
  int32_t src = 0;  // copy block src's K/V onto block dst before the step
  int32_t dst = 0;
};

class KvCacheManager {
 public:
  KvCacheManager(int32_t n_blocks, int32_t block_size, bool prefix_caching = true);

  BlockPool& pool() { return pool_; }
  const BlockPool& pool() const { return pool_; }
  int32_t block_size() const { return pool_.block_size(); }

  // For a sequence without blocks: maps the longest cached prefix of its
  // tokens onto the cached blocks (always leaving at least one token to
  // compute, whose logits the step needs) and sets n_computed to match.
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

  // Releases all of a sequence's blocks, tail first.
  void Free(Sequence* seq);

  // Counts one admission: `n_tokens` looked up, `n_hit` of them cached.
  void RecordQuery(int32_t n_tokens, int32_t n_hit) {
    queried_tokens_ += static_cast<uint64_t>(n_tokens);
    hit_tokens_ += static_cast<uint64_t>(n_hit);
  }
  // Prefix-cache effectiveness, in tokens, since creation.
  uint64_t queried_tokens() const { return queried_tokens_; }
  uint64_t hit_tokens() const { return hit_tokens_; }

 private:
  BlockPool pool_;
  bool prefix_caching_;
  uint64_t queried_tokens_ = 0;
  uint64_t hit_tokens_ = 0;
};

}  // namespace llm
