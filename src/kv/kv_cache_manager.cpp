#include "kv/kv_cache_manager.h"

#include <algorithm>

namespace llm {

namespace {
std::span<const int32_t> BlockTokens(const Sequence& s, int32_t i, int32_t bs) {
  return {s.tokens.data() + static_cast<size_t>(i) * bs, static_cast<size_t>(bs)};
}

// The salt block i is hashed and registered with: the sequence's, or, where
// image positions fall in the block, that mixed with each such image's
// content hash and where the block cuts it. So the chain carries every
// image's whole 64-bit hash in the blocks it touches (the placeholders in
// tokens[] only tell text from image), and a block is found again only by
// the same prefix with the same images at the same places.
//
//   positions  | t t t i0 | i1 i2 i3 i4 | i5 t t t |     (block size 4)
//   salt       | s^(h,0)  | s^(h,1)     | s^(h,5)  |
uint64_t BlockSalt(const Sequence& s, int32_t i, int32_t bs) {
  uint64_t salt = s.cache_salt;
  const int64_t b0 = int64_t{i} * bs, b1 = b0 + bs;
  for (const ImageSpan& im : s.image_spans) {
    if (im.first >= b1) break;
    if (int64_t{im.first} + im.n <= b0) continue;
    const uint64_t cut = static_cast<uint64_t>(std::max<int64_t>(b0 - im.first, 0));
    salt = BlockPool::HashBlock(salt ^ 0x1A7E5EEDull, im.hash, std::span<const int32_t>());
    salt = BlockPool::HashBlock(salt, cut, std::span<const int32_t>());
  }
  return salt;
}
}  // namespace

KvCacheManager::KvCacheManager(int32_t n_blocks, int32_t block_size, int32_t n_swap_slots)
    : pool_(n_blocks, block_size), n_swap_slots_(std::max(n_swap_slots, 0)) {
  // Popped from the back: slot 0 first, so consecutive swaps get runs of
  // consecutive slots (one copy each on the CUDA backend).
  for (int32_t i = n_swap_slots_ - 1; i >= 0; --i) swap_free_.push_back(i);
}

int32_t KvCacheManager::AttachCachedPrefix(Sequence* seq) {
  if (!seq->block_table.empty() || seq->n_computed != 0) return 0;
  const int32_t bs = pool_.block_size();
  const int32_t n_tokens = static_cast<int32_t>(seq->tokens.size());
  if (!seq->use_cached_prefix) return 0;
  const int32_t max_blocks = (n_tokens - 1) / bs;  // leave the last token to compute
  BlockHash parent = 0;
  for (int32_t i = 0; i < max_blocks; ++i) {
    auto toks = BlockTokens(*seq, i, bs);
    const uint64_t salt = BlockSalt(*seq, i, bs);
    const BlockHash h = BlockPool::HashBlock(parent, salt, toks);
    auto b = pool_.Lookup(h, parent, toks);
    if (b) {
      pool_.Touch(*b);
    } else {
      b = RestoreFromTier(h, parent, salt, toks);
      if (!b) break;
    }
    seq->block_table.push_back(*b);
    seq->block_hashes.push_back(h);
    parent = h;
  }
  seq->n_computed = static_cast<int32_t>(seq->block_table.size()) * bs;
  return seq->n_computed;
}

std::optional<int32_t> KvCacheManager::RestoreFromTier(BlockHash h, BlockHash parent, uint64_t salt,
                                                       std::span<const int32_t> toks) {
  KvTierHook* tier = pool_.tier_hook();
  if (tier == nullptr || !pool_.CanAllocate(1) || !tier->Stage(h, parent, salt, toks)) return std::nullopt;
  const int32_t b = *pool_.Allocate();  // ref 1, as Touch gives; may offer another block down
  if (!tier->WriteStaged(b)) {
    pool_.Release(b);
    return std::nullopt;
  }
  pool_.Register(b, h, parent, salt, toks);
  ++tier_restored_blocks_;
  return b;
}

bool KvCacheManager::AllocateSlots(Sequence* seq, int32_t n_new, int32_t n_lookahead, std::vector<KvCopy>* copies) {
  const int32_t bs = pool_.block_size();
  const int64_t end = int64_t{seq->n_computed} + n_new + n_lookahead;
  const int32_t grow = pool_.BlocksFor(end) - static_cast<int32_t>(seq->block_table.size());
  // The block the first new token is written into, if it already exists.
  const int32_t first_block = seq->n_computed / bs;
  const bool cow = seq->n_computed % bs != 0 && first_block < static_cast<int32_t>(seq->block_table.size()) &&
                   pool_.ref_count(seq->block_table[first_block]) > 1;
  if (!pool_.CanAllocate((grow > 0 ? grow : 0) + (cow ? 1 : 0))) return false;
  if (cow) {
    const int32_t old = seq->block_table[first_block];
    const int32_t fresh = *pool_.Allocate();
    copies->push_back({old, fresh});
    pool_.Release(old);
    seq->block_table[first_block] = fresh;
  }
  if (grow > 0) pool_.EnsureCapacity(&seq->block_table, end);
  return true;
}

void KvCacheManager::CommitComputed(Sequence* seq) {
  const int32_t bs = pool_.block_size();
  const int32_t n_full = seq->n_computed / bs;
  for (int32_t i = static_cast<int32_t>(seq->block_hashes.size()); i < n_full; ++i) {
    const BlockHash parent = i > 0 ? seq->block_hashes[i - 1] : 0;
    auto toks = BlockTokens(*seq, i, bs);
    const uint64_t salt = BlockSalt(*seq, i, bs);
    const BlockHash h = BlockPool::HashBlock(parent, salt, toks);
    pool_.Register(seq->block_table[i], h, parent, salt, toks);
    seq->block_hashes.push_back(h);
  }
}

void KvCacheManager::Fork(const Sequence& parent, Sequence* child) {
  // Only the blocks holding computed tokens: a block past them (a lookahead
  // slot's) would be shared empty, and written by both without a copy, since
  // copy-on-write only looks at a partially filled block.
  const size_t n = std::min(parent.block_table.size(), static_cast<size_t>(pool_.BlocksFor(parent.n_computed)));
  child->block_table.assign(parent.block_table.begin(), parent.block_table.begin() + static_cast<std::ptrdiff_t>(n));
  for (int32_t b : child->block_table) pool_.AddRef(b);
  child->block_hashes = parent.block_hashes;
  child->n_computed = parent.n_computed;
}

void KvCacheManager::Free(Sequence* seq) {
  pool_.ReleaseAll(&seq->block_table, seq->keep_kv);
  seq->block_hashes.clear();
  FreeSwapSlots(seq);
}

void KvCacheManager::FreeSwapSlots(Sequence* seq) {
  for (auto it = seq->swap_slots.rbegin(); it != seq->swap_slots.rend(); ++it) {
    if (*it >= 0) swap_free_.push_back(*it);
  }
  seq->swap_slots.clear();
  seq->swapped = false;
}

std::optional<int32_t> KvCacheManager::LookupCached(const Sequence& seq, int32_t i) const {
  if (i >= static_cast<int32_t>(seq.block_hashes.size())) return std::nullopt;
  const BlockHash parent = i > 0 ? seq.block_hashes[i - 1] : 0;
  return pool_.Lookup(seq.block_hashes[i], parent, BlockTokens(seq, i, pool_.block_size()));
}

bool KvCacheManager::SwapOut(Sequence* seq, std::vector<KvSwap>* outs) {
  const int32_t n_keep = pool_.BlocksFor(seq->n_computed);  // blocks past it hold nothing yet
  if (n_swap_slots_ == 0 || seq->swapped || n_keep == 0 || n_keep > static_cast<int32_t>(seq->block_table.size())) {
    return false;  // no swapping; or nothing to save
  }
  // A block is left to the prefix cache only when it is the canonical block
  // of its hash (so Lookup finds it) and someone else keeps it alive.
  auto left_in_cache = [&](int32_t i) {
    const int32_t b = seq->block_table[i];
    return i < static_cast<int32_t>(seq->block_hashes.size()) && pool_.ref_count(b) > 1 &&
           pool_.is_cached(b) && pool_.hash_of(b) == seq->block_hashes[i];
  };
  int32_t n_copy = 0;
  for (int32_t i = 0; i < n_keep; ++i) n_copy += !left_in_cache(i);
  if (n_copy > n_swap_free()) return false;
  seq->swap_slots.assign(n_keep, -1);
  for (int32_t i = 0; i < n_keep; ++i) {
    if (left_in_cache(i)) continue;
    const int32_t slot = swap_free_.back();
    swap_free_.pop_back();
    seq->swap_slots[i] = slot;
    outs->push_back({seq->block_table[i], slot});
  }
  swapped_out_blocks_ += static_cast<uint64_t>(n_copy);
  pool_.ReleaseAll(&seq->block_table);  // tail first, as Free does
  seq->swapped = true;
  return true;
}

KvCacheManager::SwapInResult KvCacheManager::SwapIn(Sequence* seq, int32_t n_new, std::vector<KvSwap>* ins) {
  const int32_t n = static_cast<int32_t>(seq->swap_slots.size());
  // Plan: the cached blocks to take back (a free one costs a free block, as
  // does every block to allocate), and whether anything was lost.
  int32_t need = 0;
  for (int32_t i = 0; i < n; ++i) {
    if (auto b = LookupCached(*seq, i)) {
      need += pool_.ref_count(*b) == 0;
    } else if (seq->swap_slots[i] < 0) {
      FreeSwapSlots(seq);
      seq->block_hashes.clear();
      seq->n_computed = 0;
      return SwapInResult::kLost;
    } else {
      ++need;
    }
  }
  const int64_t end = int64_t{seq->n_computed} + n_new;
  need += std::max(pool_.BlocksFor(end) - n, 0);
  if (!pool_.CanAllocate(need)) return SwapInResult::kNoRoom;
  // Cached blocks first: once taken they are off the free list, so the
  // allocations below cannot evict them.
  seq->block_table.assign(n, -1);
  for (int32_t i = 0; i < n; ++i) {
    if (auto b = LookupCached(*seq, i)) {
      pool_.Touch(*b);
      seq->block_table[i] = *b;
    }
  }
  for (int32_t i = 0; i < n; ++i) {
    if (seq->block_table[i] >= 0) continue;
    const int32_t b = *pool_.Allocate();
    seq->block_table[i] = b;
    ins->push_back({b, seq->swap_slots[i]});
    ++swapped_in_blocks_;
    if (i < static_cast<int32_t>(seq->block_hashes.size())) {
      // Findable again (unless another block took its hash meanwhile). The
      // copy runs before any step that could read it.
      const BlockHash parent = i > 0 ? seq->block_hashes[i - 1] : 0;
      pool_.Register(b, seq->block_hashes[i], parent, BlockSalt(*seq, i, pool_.block_size()),
                     BlockTokens(*seq, i, pool_.block_size()));
      pool_.MarkPending(b);  // its K/V arrive with the swap-in copy, before the step
    }
  }
  pool_.EnsureCapacity(&seq->block_table, end);
  // The slots are free for later swap-outs: those come in a later step's
  // plan, after this step's copies have read the slots.
  FreeSwapSlots(seq);
  return SwapInResult::kOk;
}

bool KvCacheManager::CheckSwapInvariants(const std::vector<const Sequence*>& swapped, std::string* why) const {
  std::vector<int32_t> owner(n_swap_slots_, 0);
  for (int32_t s : swap_free_) {
    if (s < 0 || s >= n_swap_slots_ || owner[s]++ != 0) {
      *why = "swap slot " + std::to_string(s) + " is out of range or free twice";
      return false;
    }
  }
  for (const Sequence* seq : swapped) {
    if (!seq->swapped || !seq->block_table.empty()) {
      *why = "a swapped-out sequence is not marked so or holds pool blocks";
      return false;
    }
    if (static_cast<int32_t>(seq->swap_slots.size()) != pool_.BlocksFor(seq->n_computed)) {
      *why = "a swapped-out sequence has the wrong number of swap entries";
      return false;
    }
    for (int32_t s : seq->swap_slots) {
      if (s < -1 || s >= n_swap_slots_ || (s >= 0 && owner[s]++ != 0)) {
        *why = "swap slot " + std::to_string(s) + " is out of range, or both free and held, or held twice";
        return false;
      }
    }
  }
  for (int32_t s = 0; s < n_swap_slots_; ++s) {
    if (owner[s] == 0) {
      *why = "swap slot " + std::to_string(s) + " is neither free nor held (leaked)";
      return false;
    }
  }
  return true;
}

}  // namespace llm
