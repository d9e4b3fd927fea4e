#include "kv/block_pool.h"

namespace llm {

BlockPool::BlockPool(int32_t n_blocks, int32_t block_size) : block_size_(block_size), ref_(n_blocks, 0) {
  for (int32_t i = 0; i < n_blocks; ++i) free_.push_back(i);
}

std::optional<int32_t> BlockPool::Allocate() {
  if (free_.empty()) return std::nullopt;
  int32_t b = free_.front();
  free_.pop_front();
  ref_[b] = 1;
  return b;
}

bool BlockPool::EnsureCapacity(std::vector<int32_t>* table, int64_t n_tokens) {
  int32_t need = BlocksFor(n_tokens) - static_cast<int32_t>(table->size());
  if (need <= 0) return true;
  if (!CanAllocate(need)) return false;
  for (int32_t i = 0; i < need; ++i) table->push_back(*Allocate());
  return true;
}

void BlockPool::AddRef(int32_t block) { ++ref_[block]; }

void BlockPool::Release(int32_t block) {
  if (--ref_[block] == 0) free_.push_back(block);
}

void BlockPool::ReleaseAll(std::vector<int32_t>* table) {
  // Release in reverse so the tail of a sequence (least likely to be shared)
  // is reused first.
  for (auto it = table->rbegin(); it != table->rend(); ++it) Release(*it);
  table->clear();
}

}  // namespace llm
