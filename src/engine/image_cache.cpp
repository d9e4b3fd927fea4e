#include "engine/image_cache.h"

namespace llm {

ImageCache::Rows ImageCache::Find(uint64_t hash) {
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void ImageCache::Put(uint64_t hash, Rows rows) {
  if (capacity_ == 0) return;
  if (auto it = by_hash_.find(hash); it != by_hash_.end()) {
    it->second->second = std::move(rows);
    lru_.splice(lru_.begin(), lru_, it->second);
    return;
  }
  lru_.emplace_front(hash, std::move(rows));
  by_hash_[hash] = lru_.begin();
  while (static_cast<int32_t>(lru_.size()) > capacity_) {
    by_hash_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

}  // namespace llm
