#include "kvstate/kv_tiers.h"

#include <cstdio>

namespace llm::kvstate {

StatusOr<std::unique_ptr<KvTiers>> KvTiers::Create(const TierOptions& opt, Backend* backend, const Model* model) {
  if (!opt.enabled()) return std::unique_ptr<KvTiers>();
  const KvWireLayout wire = backend->kv_wire_layout();
  if (wire.n_layer == 0)
    return Unsupported("kv_host_bytes / kv_disk_dir: the KV tiers need a backend that reads and writes its KV "
                       "blocks (the CPU and CUDA backends; not a model split across both)");
  const uint64_t block = static_cast<uint64_t>(wire.block_bytes());
  if (opt.host_bytes > 0 && opt.host_bytes < block)
    return InvalidArgument("kv_host_bytes " + std::to_string(opt.host_bytes) + " holds no KV block (one block is " +
                           std::to_string(block) + " bytes)");
  if (!opt.disk_dir.empty() && opt.disk_bytes < block)
    return InvalidArgument("kv_disk_bytes " + std::to_string(opt.disk_bytes) + " holds no KV block (one block is " +
                           std::to_string(block) + " bytes)");
  std::unique_ptr<KvHostArena> arena;
  if (opt.host_bytes > 0) {
    const uint64_t slots = opt.host_bytes / block;
    if (slots > static_cast<uint64_t>(INT32_MAX))
      return InvalidArgument("kv_host_bytes " + std::to_string(opt.host_bytes) + " is more blocks than a context indexes");
    LLM_ASSIGN_OR_RETURN(arena, backend->CreateKvHostArena(static_cast<int32_t>(slots)));
  }
  return std::unique_ptr<KvTiers>(new KvTiers(opt, backend, model, std::move(arena)));
}

KvTiers::KvTiers(const TierOptions& opt, Backend* backend, const Model* model, std::unique_ptr<KvHostArena> arena)
    : backend_(backend),
      geometry_(ContextGeometry(model->config, backend->kv_wire_layout())),
      block_bytes_(static_cast<uint64_t>(geometry_.wire().block_bytes())),
      host_(arena ? arena->n_slots() : 0),
      arena_(std::move(arena)) {
  staged_.resize(static_cast<size_t>(block_bytes_));
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
  out->kv.resize(static_cast<size_t>(block_bytes_));
  const Status st = backend_->ReadKvBlock(b.block, out->kv);
  if (!st.ok()) Warn("KV tiers: cannot read block " + std::to_string(b.block) + ": " + st.message());
  return st.ok();
}

bool KvTiers::HostBlock(const HostEntry& e, TierBlock* out) {
  StatusOr<std::span<const uint8_t>> bytes = arena_->Bytes(e.slot);
  if (!bytes.ok()) {
    Warn("KV tiers: cannot read host slot " + std::to_string(e.slot) + ": " + bytes.status().message());
    return false;
  }
  out->hash = e.hash;
  out->parent = e.parent;
  out->salt = e.salt;
  out->tokens = e.tokens;
  out->kv.assign(bytes->begin(), bytes->end());
  return true;
}

void KvTiers::OnEvict(const EvictedBlock& b) {
  DiskTier* disk = disk_ && disk_->enabled() ? disk_.get() : nullptr;
  if (arena_) {
    if (host_.Touch(b.hash)) return;  // still held below (restored earlier): nothing to copy
    bool no_room = false;
    if (std::optional<HostEntry> out = host_.MakeRoom(&no_room); out && disk != nullptr) {
      TierBlock t;  // the block pushed out goes down to disk before its slot is reused
      if (disk->Contains(out->hash)) disk->Touch(out->hash);
      else if (HostBlock(*out, &t)) disk->Put(t);
    }
    if (!no_room) {
      const int32_t slot = host_.Insert(b.hash, b.parent, b.salt, b.tokens);
      const Status st = arena_->Save(b.block, slot);
      if (st.ok()) {
        n_.bytes_down += block_bytes_;
        return;
      }
      Warn("KV tiers: cannot copy block " + std::to_string(b.block) + " to host memory: " + st.message());
      host_.Forget(b.hash);
      return;
    }
    // Every host slot is pinned by a restore in progress: straight to disk.
  }
  if (disk == nullptr) return;
  if (disk->Contains(b.hash)) {
    disk->Touch(b.hash);
    return;
  }
  TierBlock t;
  if (!ReadBlock(b, &t)) return;
  n_.bytes_down += t.kv.size();
  disk->Put(t);
}

bool KvTiers::Stage(BlockHash hash, BlockHash parent, uint64_t salt, std::span<const int32_t> tokens) {
  staged_slot_ = -1;
  host_.Unpin();
  if (const HostEntry* e = host_.Find(hash, parent, tokens); e != nullptr && e->salt == salt) {
    staged_slot_ = e->slot;
    host_.Pin(hash);  // the allocation that follows may evict: this slot must stay
    return true;
  }
  if (disk_ && disk_->Load(hash, parent, salt, tokens, &scratch_)) {
    staged_.swap(scratch_.kv);
    return true;
  }
  return false;
}

bool KvTiers::WriteStaged(int32_t block) {
  const bool from_host = staged_slot_ >= 0;
  const Status st = from_host ? arena_->Restore(staged_slot_, block) : backend_->WriteKvBlock(block, staged_);
  staged_slot_ = -1;
  host_.Unpin();
  if (!st.ok()) {
    Warn("KV tiers: cannot write block " + std::to_string(block) + ": " + st.message());
    return false;
  }
  ++(from_host ? n_.host_hit_blocks : n_.disk_hit_blocks);
  n_.bytes_up += block_bytes_;
  return true;
}

void KvTiers::Persist(const BlockPool& pool) {
  if (!disk_ || !disk_->enabled()) return;
  TierBlock t;
  for (const HostEntry& e : host_.entries()) {
    if (!disk_->enabled()) return;
    if (!disk_->Contains(e.hash) && HostBlock(e, &t)) disk_->Put(t);
  }
  for (int32_t b = 0; b < pool.n_blocks() && disk_->enabled(); ++b) {
    if (!pool.is_cached(b) || disk_->Contains(pool.hash_of(b))) continue;
    if (!ReadBlock({b, pool.hash_of(b), pool.cached_parent(b), pool.salt_of(b), pool.cached_tokens(b)}, &t)) continue;
    n_.bytes_down += t.kv.size();
    disk_->Put(t);
  }
}

TierCounters KvTiers::counters() const {
  TierCounters c = n_;
  c.host_bytes = static_cast<uint64_t>(host_.size()) * block_bytes_;
  c.disk_bytes = disk_ ? disk_->bytes() : 0;
  c.files_refused = disk_ ? disk_->files_refused() : 0;
  c.disk_enabled = disk_ && disk_->enabled();
  return c;
}

}  // namespace llm::kvstate
