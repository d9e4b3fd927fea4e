// DiskTier: KV blocks below the host tier (or below the pool, without one),
// one tier file per block (tier_file.h) in one directory, named
// `<context key>-<block hash>.llmkv` (16 hex digits each): the context key
// hashes the model fingerprint and the KV geometry (element type
// included), the block hash is the pool's salted chained hash. Within a
// byte budget (this context's files), least recently used first out
// (deleted). It survives a restart: opening scans the directory, ordered by
// modification time. Contexts of several models may share a directory.
//
// Nothing here fails a request. At open, files of another context key are
// left alone (counted, one warning); a file with this key whose header
// does not check out is deleted with a warning; a file found corrupt at load is deleted
// and reads as a miss. A directory that cannot be created or written, or a
// write that fails (disk full, read-only), turns the tier off with a
// warning: the context goes on without it.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <span>
#include <string>
#include <unordered_map>

#include "kvstate/tier_file.h"

namespace llm::kvstate {

class DiskTier {
 public:
  using WarnFn = std::function<void(const std::string&)>;
  // `model` must outlive the tier. Scans (and creates) `dir`.
  DiskTier(std::string dir, uint64_t budget_bytes, const ModelFingerprint* model, KvGeometry geometry, WarnFn warn);

  bool enabled() const { return enabled_; }
  uint64_t bytes() const { return bytes_; }
  size_t size() const { return index_.size(); }
  uint64_t files_refused() const { return files_refused_; }  // foreign or corrupt, since open

  bool Contains(BlockHash hash) const { return index_.count(hash) != 0; }
  void Touch(BlockHash hash);
  // Writes the block's file (if it is not there yet) and deletes the least
  // recently used files over the budget.
  void Put(const TierBlock& block);
  // Reads and checks the block (hash, parent, salt, tokens) into *out; false
  // when absent or found bad (then forgotten, and deleted if corrupt).
  bool Load(BlockHash hash, BlockHash parent, uint64_t salt, std::span<const int32_t> tokens, TierBlock* out);

 private:
  struct Entry {
    uint64_t bytes = 0;
    std::list<BlockHash>::iterator lru;
  };
  std::string PathOf(BlockHash hash) const;
  void Scan();
  void Disable(const std::string& why);
  void Forget(BlockHash hash, bool remove_file);
  void Add(BlockHash hash, uint64_t bytes);

  std::string dir_;
  uint64_t key_ = 0;  // the context key (file names)
  uint64_t budget_;
  const ModelFingerprint* model_;
  KvGeometry geometry_;
  WarnFn warn_;
  bool enabled_ = false;
  uint64_t bytes_ = 0;
  uint64_t files_refused_ = 0;
  std::list<BlockHash> lru_;  // front: least recently used
  std::unordered_map<BlockHash, Entry> index_;
};

}  // namespace llm::kvstate
