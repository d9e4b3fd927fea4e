#include "kvstate/kv_tiers.h"

#include <cstdio>

namespace llm::kvstate {

StatusOr<std::unique_ptr<KvTiers>> KvTiers::Create(const TierOptions& opt, Backend* backend, const Model* model) {
  if (!opt.enabled()) return std::unique_ptr<KvTiers>();
  const KvWireLayout wire = backend->kv_wire_layout();
  if (wire.n_layer == 0)
    return Unsupported("kv_host_bytes / kv_disk_dir: the KV tiers need a backend that reads and writes its KV "
                       "blocks (the CPU backend); this context's backend cannot yet (CUDA follows)");
  const uint64_t block = static_cast<uint64_t>(wire.block_bytes());
  if (opt.host_bytes > 0 && opt.host_bytes < block)
    return InvalidArgument("kv_host_bytes " + std::to_string(opt.host_bytes) + " holds no KV block (one block is " +
                           std::to_string(block) + " bytes)");
  if (!opt.disk_dir.empty() && opt.disk_bytes < block)
    return InvalidArgument("kv_disk_bytes " + std::to_string(opt.disk_bytes) + " holds no KV block (one block is " +
                           std::to_string(block) + " bytes)");
  return std::unique_ptr<KvTiers>(new KvTiers(opt, backend, model));
}

KvTiers::KvTiers(const TierOptions& opt, Backend* backend, const Model* model)
    : backend_(backend),
      geometry_(ContextGeometry(model->config, backend->kv_wire_layout())),
      host_(opt.host_bytes) {
  staged_.resize(static_cast<size_t>(geometry_.wire().block_bytes()));
  if (!opt.disk_dir.empty()) {
    disk_ = std::make_unique<DiskTier>(opt.disk_dir, opt.disk_bytes, &model->fingerprint, geometry_,
                                       [this](const std::string& w) { Warn(w); });
  }
}

void KvTiers::Warn(const std::string& w) {
  std::fprintf(stderr, "llmrt: warning: %s\n", w.c_str());
  std::lock_guard<std::mutex> lock(warn_mu_);
  if (warnings_.size() < 100) warnings_.push_back(w);
}

std::vector<std::string> KvTiers::warnings() const {
  std::lock_guard<std::mutex> lock(warn_mu_);
  return warnings_;
}

bool KvTiers::ReadBlock(const EvictedBlock& b, TierBlock* out) {
  out->hash = b.hash;
  out->parent = b.parent;
  out->salt = b.salt;
  out->tokens.assign(b.tokens.begin(), b.tokens.end());
  out->kv.resize(staged_.size());
  const Status st = backend_->ReadKvBlock(b.block, out->kv);
  if (!st.ok()) Warn("KV tiers: cannot read block " + std::to_string(b.block) + ": " + st.message());
  return st.ok();
}

void KvTiers::OnEvict(const EvictedBlock& b) {
  DiskTier* disk = disk_ && disk_->enabled() ? disk_.get() : nullptr;
  if (host_.enabled()) {
    if (host_.Touch(b.hash)) return;  // still held below (restored earlier): nothing to copy
  } else if (disk == nullptr) {
    return;
  } else if (disk->Contains(b.hash)) {
    disk->Touch(b.hash);
    return;
  }
  TierBlock t;
  if (!ReadBlock(b, &t)) return;
  n_.bytes_down += t.kv.size();
  if (!host_.enabled()) {
    disk->Put(t);
    return;
  }
  for (const TierBlock& out : host_.Put(std::move(t))) {
    if (disk != nullptr) disk->Put(out);
  }
}

bool KvTiers::Stage(BlockHash hash, BlockHash parent, uint64_t salt, std::span<const int32_t> tokens) {
  if (const TierBlock* b = host_.Find(hash, parent, tokens); b != nullptr && b->salt == salt) {
    std::copy(b->kv.begin(), b->kv.end(), staged_.begin());
    staged_from_disk_ = false;
    return true;
  }
  if (disk_ && disk_->Load(hash, parent, salt, tokens, &scratch_)) {
    staged_.swap(scratch_.kv);
    staged_from_disk_ = true;
    return true;
  }
  return false;
}

bool KvTiers::WriteStaged(int32_t block) {
  const Status st = backend_->WriteKvBlock(block, staged_);
  if (!st.ok()) {
    Warn("KV tiers: cannot write block " + std::to_string(block) + ": " + st.message());
    return false;
  }
  ++(staged_from_disk_ ? n_.disk_hit_blocks : n_.host_hit_blocks);
  n_.bytes_up += staged_.size();
  return true;
}

void KvTiers::Persist(const BlockPool& pool) {
  if (!disk_ || !disk_->enabled()) return;
  for (const TierBlock& b : host_.blocks()) disk_->Put(b);
  TierBlock t;
  for (int32_t b = 0; b < pool.n_blocks() && disk_->enabled(); ++b) {
    if (!pool.is_cached(b) || disk_->Contains(pool.hash_of(b))) continue;
    if (!ReadBlock({b, pool.hash_of(b), pool.cached_parent(b), pool.salt_of(b), pool.cached_tokens(b)}, &t)) continue;
    n_.bytes_down += t.kv.size();
    disk_->Put(t);
  }
}

TierCounters KvTiers::counters() const {
  TierCounters c = n_;
  c.host_bytes = host_.bytes();
  c.disk_bytes = disk_ ? disk_->bytes() : 0;
  c.files_refused = disk_ ? disk_->files_refused() : 0;
  c.disk_enabled = disk_ && disk_->enabled();
  return c;
}

}  // namespace llm::kvstate
