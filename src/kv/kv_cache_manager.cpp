#include "kv/kv_cache_manager.h"

#include <algorithm>

namespace llm {

namespace {
std::span<const int32_t> BlockTokens(const Sequence& s, int32_t i, int32_t bs) {
  return {s.tokens.data() + static_cast<size_t>(i) * bs, static_cast<size_t>(bs)};
}
}  // namespace

KvCacheManager::KvCacheManager(int32_t n_blocks, int32_t block_size, bool prefix_caching)
    : pool_(n_blocks, block_size), prefix_caching_(prefix_caching) {}

int32_t KvCacheManager::AttachCachedPrefix(Sequence* seq) {
  if (!seq->block_table.empty() || seq->n_computed != 0) return 0;
  const int32_t bs = pool_.block_size();
  const int32_t n_tokens = static_cast<int32_t>(seq->tokens.size());
  if (!prefix_caching_ || !seq->use_cached_prefix) return 0;
  const int32_t max_blocks = (n_tokens - 1) / bs;  // leave the last token to compute
  BlockHash parent = 0;
  for (int32_t i = 0; i < max_blocks; ++i) {
    auto toks = BlockTokens(*seq, i, bs);
    const BlockHash h = BlockPool::HashBlock(parent, seq->cache_salt, toks);
    auto b = pool_.Lookup(h, parent, toks);
    if (!b) break;
    pool_.Touch(*b);
    seq->block_table.push_back(*b);
    seq->block_hashes.push_back(h);
    parent = h;
  }
  seq->n_computed = static_cast<int32_t>(seq->block_table.size()) * bs;
  return seq->n_computed;
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
  if (!prefix_caching_) return;
  const int32_t bs = pool_.block_size();
  const int32_t n_full = seq->n_computed / bs;
  for (int32_t i = static_cast<int32_t>(seq->block_hashes.size()); i < n_full; ++i) {
    const BlockHash parent = i > 0 ? seq->block_hashes[i - 1] : 0;
    auto toks = BlockTokens(*seq, i, bs);
    const BlockHash h = BlockPool::HashBlock(parent, seq->cache_salt, toks);
    pool_.Register(seq->block_table[i], h, parent, seq->cache_salt, toks);
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
  pool_.ReleaseAll(&seq->block_table);
  seq->block_hashes.clear();
}

}  // namespace llm
