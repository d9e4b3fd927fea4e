// ImageCache: encoded images (an image's soft-token rows) by the content
// hash of its preprocessed pixels, least recently used dropped first, so
// the same image in several requests (a chat that resends it every turn)
// is encoded once. Engine thread only.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

namespace llm {

class ImageCache {
 public:
  // (n_tokens, n_embd) floats; shared with the requests that read them, so
  // an entry dropped here lives on while a request still runs it.
  using Rows = std::shared_ptr<const std::vector<float>>;

  explicit ImageCache(int32_t capacity) : capacity_(capacity > 0 ? capacity : 0) {}

  // The rows of `hash`, made the most recently used; null when absent.
  Rows Find(uint64_t hash);
  // Keeps `rows` for `hash` (replacing an entry of that hash), dropping the
  // least recently used entry beyond the capacity. Capacity 0 keeps nothing.
  void Put(uint64_t hash, Rows rows);
  size_t size() const { return lru_.size(); }

 private:
  int32_t capacity_;
  std::list<std::pair<uint64_t, Rows>> lru_;  // most recently used first
  std::unordered_map<uint64_t, std::list<std::pair<uint64_t, Rows>>::iterator> by_hash_;
};

}  // namespace llm
