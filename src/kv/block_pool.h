// BlockPool: the bookkeeping of the paged KV memory. The memory itself lives
// in the backend; the pool hands out block ids and counts references to them.
//
// A block is free (on the free list) or referenced by one or more sequences
// (ref_count > 0). Sharing (parallel samples, prefix caching) raises the count;
// a block returns to the free list when its last user lets go of it.
// "No room" is an ordinary return value (std::nullopt / false), never an error.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <vector>

namespace llm {

class BlockPool {
 public:
  BlockPool(int32_t n_blocks, int32_t block_size);

  int32_t n_blocks() const { return static_cast<int32_t>(ref_.size()); }
  int32_t block_size() const { return block_size_; }
  int32_t n_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t n_used() const { return n_blocks() - n_free(); }

  // Blocks needed to hold `n_tokens` tokens.
  int32_t BlocksFor(int64_t n_tokens) const {
    return static_cast<int32_t>((n_tokens + block_size_ - 1) / block_size_);
  }

  bool CanAllocate(int32_t n) const { return n <= n_free(); }
  // Takes one free block (ref_count becomes 1), or nullopt when none is free.
  std::optional<int32_t> Allocate();
  // Grows `table` until it covers `n_tokens` tokens. All or nothing: returns
  // false and leaves `table` unchanged when the pool lacks the blocks.
  bool EnsureCapacity(std::vector<int32_t>* table, int64_t n_tokens);
  void AddRef(int32_t block);
  // Drops one reference; the block is free again when none is left.
  void Release(int32_t block);
  void ReleaseAll(std::vector<int32_t>* table);
  int32_t ref_count(int32_t block) const { return ref_[block]; }

 private:
  int32_t block_size_;
  std::vector<int32_t> ref_;   // (n_blocks) references per block
  std::deque<int32_t> free_;   // free block ids, oldest freed first
};

}  // namespace llm
