#include "kvstate/disk_tier.h"

#include "model/fingerprint.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <system_error>
#include <utility>
#include <vector>

namespace llm::kvstate {

namespace fs = std::filesystem;

namespace {

constexpr const char* kSuffix = ".llmkv";

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

ReadFn FileReader(std::FILE* f) {
  return [f](void* buf, size_t n) -> StatusOr<size_t> {
    const size_t got = std::fread(buf, 1, n, f);
    if (got < n && std::ferror(f)) return IoError("read error");
    return got;
  };
}

bool ParseHex16(const std::string& s, size_t at, uint64_t* out) {
  uint64_t h = 0;
  for (size_t i = at; i < at + 16; ++i) {
    const char c = s[i];
    const int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (v < 0) return false;
    h = h << 4 | static_cast<uint64_t>(v);
  }
  *out = h;
  return true;
}

// "<16 hex key>-<16 hex hash>.llmkv" -> key and hash; false for any other name.
bool ParseName(const std::string& name, uint64_t* key, BlockHash* hash) {
  if (name.size() != 33 + 6 || name[16] != '-' || name.compare(33, 6, kSuffix) != 0) return false;
  return ParseHex16(name, 0, key) && ParseHex16(name, 17, hash);
}

// What must be equal for two contexts to share a block file.
uint64_t ContextKey(const ModelFingerprint& m, const KvGeometry& g) {
  uint64_t h = Hash64(m.arch.data(), m.arch.size());
  h = Hash64(&m.weights_hash, sizeof m.weights_hash, h);
  for (const FingerprintTensor& t : m.tensors) {
    h = Hash64(t.name.data(), t.name.size(), h);
    h = Hash64(&t.type, sizeof t.type, h);
    h = Hash64(t.dims.data(), t.dims.size() * sizeof(int64_t), h);
  }
  const int32_t f[6] = {g.n_layer, g.n_head_kv, g.head_dim, g.block_size, g.elem, static_cast<int32_t>(g.hash_fn)};
  h = Hash64(f, sizeof f, h);
  // V's type counts only when it differs, so a single-type context keeps
  // the key (and the files) it had before K and V could differ
  if (g.elem_v != 0 && g.elem_v != g.elem) h = Hash64(&g.elem_v, sizeof g.elem_v, h);
  return Hash64(g.window.data(), g.window.size() * sizeof(int32_t), h);
}

}  // namespace

DiskTier::DiskTier(std::string dir, uint64_t budget, const ModelFingerprint* model, KvGeometry geometry, WarnFn warn)
    : dir_(std::move(dir)), key_(ContextKey(*model, geometry)), budget_(budget), model_(model), geometry_(std::move(geometry)), warn_(std::move(warn)) {
  if (dir_.empty() || budget_ == 0) return;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) {
    Disable("cannot create the directory: " + ec.message());
    return;
  }
  // Can we write here? (A read-only directory degrades now, not at the
  // first eviction.)
  const std::string probe = (fs::path(dir_) / ".llmkv-probe").string();
  {
    File f(std::fopen(probe.c_str(), "wb"));
    if (!f || std::fputc(0, f.get()) == EOF) {
      Disable("the directory is not writable");
      return;
    }
  }
  fs::remove(probe, ec);
  enabled_ = true;
  Scan();
}

std::string DiskTier::PathOf(BlockHash hash) const {
  char name[48];
  std::snprintf(name, sizeof name, "%016" PRIx64 "-%016" PRIx64 "%s", key_, hash, kSuffix);
  return (fs::path(dir_) / name).string();
}

void DiskTier::Disable(const std::string& why) {
  if (warn_) warn_("KV disk tier '" + dir_ + "' is off: " + why + " (requests go on without it)");
  enabled_ = false;
  index_.clear();
  lru_.clear();
  bytes_ = 0;
}

void DiskTier::Scan() {
  struct Found {
    fs::file_time_type time;
    BlockHash hash;
    uint64_t bytes;
  };
  std::vector<Found> found;
  uint64_t foreign = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const std::string path = it->path().string();
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0 && name.find(kSuffix) != std::string::npos) {
      std::error_code rm;
      fs::remove(it->path(), rm);  // a write that a crash interrupted
      continue;
    }
    BlockHash h = 0;
    uint64_t key = 0;
    if (!ParseName(name, &key, &h)) continue;
    if (key != key_) {  // another model's or geometry's: not ours to delete
      ++foreign;
      ++files_refused_;
      continue;
    }
    File f(std::fopen(path.c_str(), "rb"));
    if (!f) continue;
    const Status st = CheckTierFileHeader(FileReader(f.get()), *model_, geometry_);
    f.reset();
    if (!st.ok()) {  // named for this context, but it is not what its name says
      ++files_refused_;
      if (warn_) warn_("KV disk tier: deleting " + path + ": " + st.message());
      std::error_code rm;
      fs::remove(it->path(), rm);
      continue;
    }
    std::error_code e1, e2;
    const uint64_t size = fs::file_size(it->path(), e1);
    const fs::file_time_type t = fs::last_write_time(it->path(), e2);
    if (!e1 && !e2) found.push_back({t, h, size});
  }
  if (foreign > 0 && warn_)
    warn_("KV disk tier '" + dir_ + "': leaving " + std::to_string(foreign) +
          " file(s) of another model or KV geometry alone");
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) { return a.time < b.time; });
  for (const Found& f : found) Add(f.hash, f.bytes);
  while (bytes_ > budget_ && !lru_.empty()) Forget(lru_.front(), true);
}

void DiskTier::Add(BlockHash hash, uint64_t bytes) {
  lru_.push_back(hash);
  index_[hash] = {bytes, std::prev(lru_.end())};
  bytes_ += bytes;
}

void DiskTier::Forget(BlockHash hash, bool remove_file) {
  auto it = index_.find(hash);
  if (it == index_.end()) return;
  bytes_ -= it->second.bytes;
  lru_.erase(it->second.lru);
  index_.erase(it);
  if (remove_file) {
    std::error_code ec;
    fs::remove(PathOf(hash), ec);
  }
}

void DiskTier::Touch(BlockHash hash) {
  auto it = index_.find(hash);
  if (it != index_.end()) lru_.splice(lru_.end(), lru_, it->second.lru);
}

void DiskTier::Put(const TierBlock& block) {
  if (!enabled_) return;
  if (Contains(block.hash)) {
    Touch(block.hash);
    return;
  }
  const std::string path = PathOf(block.hash);
  const std::string tmp = path + ".tmp";
  uint64_t written = 0;
  Status st;
  {
    File f(std::fopen(tmp.c_str(), "wb"));
    if (!f) {
      st = IoError("cannot create " + tmp);
    } else {
      st = WriteTierFile(
          [&](const void* data, size_t n) -> Status {
            if (std::fwrite(data, 1, n, f.get()) != n) return IoError("cannot write " + tmp + " (disk full?)");
            written += n;
            return Status::Ok();
          },
          *model_, geometry_, block);
      if (st.ok() && std::fflush(f.get()) != 0) st = IoError("cannot write " + tmp + " (disk full?)");
    }
  }
  std::error_code ec;
  if (st.ok()) {
    fs::rename(tmp, path, ec);
    if (ec) st = IoError("cannot rename " + tmp + ": " + ec.message());
  }
  if (!st.ok()) {
    fs::remove(tmp, ec);
    Disable(st.message());
    return;
  }
  Add(block.hash, written);
  while (bytes_ > budget_ && !lru_.empty()) Forget(lru_.front(), true);
}

bool DiskTier::Load(BlockHash hash, BlockHash parent, uint64_t salt, std::span<const int32_t> tokens, TierBlock* out) {
  if (!enabled_ || !Contains(hash)) return false;
  const std::string path = PathOf(hash);
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) {
    Forget(hash, false);  // gone (someone cleaned the directory)
    return false;
  }
  const Status st = ReadTierFile(FileReader(f.get()), *model_, geometry_, out);
  f.reset();
  if (!st.ok()) {
    ++files_refused_;
    if (warn_) warn_("KV disk tier: ignoring " + path + ": " + st.message());
    Forget(hash, true);  // named for this context, and not what its name says
    return false;
  }
  if (out->hash != hash) {  // renamed by someone: not the block its name says
    ++files_refused_;
    if (warn_) warn_("KV disk tier: deleting " + path + ": it holds another block than its name says");
    Forget(hash, true);
    return false;
  }
  if (out->parent != parent || out->salt != salt ||
      !std::equal(tokens.begin(), tokens.end(), out->tokens.begin(), out->tokens.end()))
    return false;  // a hash collision: another prefix's block
  Touch(hash);
  return true;
}

}  // namespace llm::kvstate
