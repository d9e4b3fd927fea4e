#include "kv/block_pool.h"

#include <algorithm>
#include <string>

namespace llm {

BlockPool::BlockPool(int32_t n_blocks, int32_t block_size)
    : block_size_(block_size), blocks_(n_blocks), tokens_(static_cast<size_t>(n_blocks) * block_size) {
  for (int32_t i = 0; i < n_blocks; ++i) PushBack(i);
}

void BlockPool::Unlink(int32_t b) {
  Block& x = blocks_[b];
  const int l = x.keep ? 1 : 0;
  if (x.prev >= 0) blocks_[x.prev].next = x.next; else head_[l] = x.next;
  if (x.next >= 0) blocks_[x.next].prev = x.prev; else tail_[l] = x.prev;
  x.prev = x.next = -1;
  --n_free_;
  n_protected_free_ -= l;
  if (x.cached) --n_cached_free_;
}

void BlockPool::PushBack(int32_t b) {
  Block& x = blocks_[b];
  const int l = x.keep ? 1 : 0;
  x.prev = tail_[l];
  x.next = -1;
  if (tail_[l] >= 0) blocks_[tail_[l]].next = b; else head_[l] = b;
  tail_[l] = b;
  ++n_free_;
  n_protected_free_ += l;
  if (x.cached) ++n_cached_free_;
}

void BlockPool::Evict(int32_t b) {
  Block& x = blocks_[b];
  if (!x.cached) return;
  auto it = by_hash_.find(x.hash);
  if (it != by_hash_.end() && it->second == b) by_hash_.erase(it);
  x.cached = false;
}

std::optional<int32_t> BlockPool::Allocate() {
  const int32_t b = head_[0] >= 0 ? head_[0] : head_[1];
  if (b < 0) return std::nullopt;
  Unlink(b);
  Block& x = blocks_[b];
  x.keep = false;
  if (hook_ != nullptr && x.cached && !x.pending)
    hook_->OnEvict({b, x.hash, x.parent, x.salt, cached_tokens(b)});
  Evict(b);
  blocks_[b].ref = 1;
  return b;
}

bool BlockPool::EnsureCapacity(std::vector<int32_t>* table, int64_t n_tokens) {
  const int32_t need = BlocksFor(n_tokens) - static_cast<int32_t>(table->size());
  if (need <= 0) return true;
  if (!CanAllocate(need)) return false;
  for (int32_t i = 0; i < need; ++i) table->push_back(*Allocate());
  return true;
}

void BlockPool::AddRef(int32_t block) { ++blocks_[block].ref; }

void BlockPool::Release(int32_t block, bool keep) {
  if (keep) blocks_[block].keep = true;
  if (--blocks_[block].ref == 0) PushBack(block);
}

void BlockPool::ReleaseAll(std::vector<int32_t>* table, bool keep) {
  for (auto it = table->rbegin(); it != table->rend(); ++it) Release(*it, keep);
  table->clear();
}

BlockHash BlockPool::HashBlock(BlockHash parent, uint64_t salt, std::span<const int32_t> tokens) {
  // 64-bit multiply-xorshift mixing over (parent, salt, tokens...).
  auto mix = [](uint64_t h, uint64_t v) {
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h *= 0xBF58476D1CE4E5B9ull;
    return h ^ (h >> 31);
  };
  uint64_t h = mix(0x243F6A8885A308D3ull, parent);
  h = mix(h, salt);
  for (int32_t t : tokens) h = mix(h, static_cast<uint32_t>(t));
  return h;
}

std::optional<int32_t> BlockPool::Lookup(BlockHash hash, BlockHash parent, std::span<const int32_t> tokens) const {
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return std::nullopt;
  const int32_t b = it->second;
  const Block& x = blocks_[b];
  if (x.parent != parent || static_cast<int32_t>(tokens.size()) != block_size_) return std::nullopt;
  const int32_t* stored = tokens_.data() + static_cast<size_t>(b) * block_size_;
  if (!std::equal(tokens.begin(), tokens.end(), stored)) return std::nullopt;  // a hash collision
  return b;
}

void BlockPool::Touch(int32_t block) {
  if (blocks_[block].ref == 0) Unlink(block);
  ++blocks_[block].ref;
}

void BlockPool::Register(int32_t block, BlockHash hash, BlockHash parent, uint64_t salt,
                         std::span<const int32_t> tokens) {
  Block& x = blocks_[block];
  if (x.cached || static_cast<int32_t>(tokens.size()) != block_size_) return;
  if (by_hash_.count(hash)) return;
  by_hash_[hash] = block;
  x.cached = true;
  x.hash = hash;
  x.parent = parent;
  x.salt = salt;
  std::copy(tokens.begin(), tokens.end(), tokens_.begin() + static_cast<size_t>(block) * block_size_);
}

void BlockPool::MarkPending(int32_t block) {
  if (!blocks_[block].pending) pending_.push_back(block);
  blocks_[block].pending = true;
}

void BlockPool::ClearPending() {
  for (int32_t b : pending_) blocks_[b].pending = false;
  pending_.clear();
}

std::span<const int32_t> BlockPool::cached_tokens(int32_t block) const {
  return {tokens_.data() + static_cast<size_t>(block) * block_size_, static_cast<size_t>(block_size_)};
}

bool BlockPool::CheckInvariants(std::string* why) const {
  int32_t free_seen = 0, cached_free = 0, protected_free = 0;
  for (int l = 0; l < 2; ++l) {
    int32_t prev = -1;
    for (int32_t b = head_[l]; b >= 0; b = blocks_[b].next) {
      if (blocks_[b].ref != 0) { *why = "block " + std::to_string(b) + " is on the free list but referenced"; return false; }
      if (blocks_[b].prev != prev) { *why = "free list links broken at " + std::to_string(b); return false; }
      if (++free_seen > n_blocks()) { *why = "free list has a cycle"; return false; }
      if (blocks_[b].keep != (l == 1)) { *why = "block " + std::to_string(b) + " is on the wrong free list"; return false; }
      if (blocks_[b].cached) ++cached_free;
      protected_free += l;
      prev = b;
    }
    if (prev != tail_[l]) { *why = "free list tail mismatch"; return false; }
  }
  if (free_seen != n_free_ || cached_free != n_cached_free_ || protected_free != n_protected_free_) {
    *why = "free counts drifted";
    return false;
  }
  int32_t n_zero = 0;
  for (const Block& x : blocks_) {
    if (x.ref < 0) { *why = "negative ref count"; return false; }
    n_zero += x.ref == 0;
  }
  if (n_zero != n_free_) { *why = "a block with no reference is not on the free list"; return false; }
  for (const auto& [h, b] : by_hash_) {
    if (!blocks_[b].cached || blocks_[b].hash != h) { *why = "hash map points at a block without that hash"; return false; }
    if (HashBlock(blocks_[b].parent, blocks_[b].salt, cached_tokens(b)) != h) {
      *why = "block " + std::to_string(b) + "'s hash does not match its tokens";
      return false;
    }
  }
  for (int32_t b = 0; b < n_blocks(); ++b) {
    if (blocks_[b].cached) {
      auto it = by_hash_.find(blocks_[b].hash);
      if (it == by_hash_.end() || it->second != b) { *why = "cached block missing from the hash map"; return false; }
    }
  }
  return true;
}

}  // namespace llm
