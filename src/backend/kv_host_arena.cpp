#include "backend/kv_host_arena.h"

#include <string>

namespace llm {

StatusOr<std::unique_ptr<KvHostArena>> Backend::CreateKvHostArena(int32_t n_slots) {
  if (kv_wire_layout().n_layer == 0) return Unsupported("this backend cannot copy its KV blocks to host memory");
  if (n_slots <= 0) return InvalidArgument("CreateKvHostArena: the arena needs at least one slot");
  return std::unique_ptr<KvHostArena>(new PlainKvHostArena(this, n_slots));
}

PlainKvHostArena::PlainKvHostArena(Backend* backend, int32_t n_slots)
    : backend_(backend),
      block_bytes_(static_cast<size_t>(backend->kv_wire_layout().block_bytes())),
      slots_(static_cast<size_t>(n_slots)) {}

Status PlainKvHostArena::Check(int32_t slot, const char* what) const {
  if (slot < 0 || slot >= n_slots())
    return InvalidArgument(std::string(what) + ": host slot " + std::to_string(slot) + " out of range");
  return Status::Ok();
}

Status PlainKvHostArena::Save(int32_t block, int32_t slot) {
  LLM_RETURN_IF_ERROR(Check(slot, "KvHostArena::Save"));
  std::vector<uint8_t>& s = slots_[static_cast<size_t>(slot)];
  s.resize(block_bytes_);
  return backend_->ReadKvBlock(block, s);
}

Status PlainKvHostArena::Restore(int32_t slot, int32_t block) {
  LLM_RETURN_IF_ERROR(Check(slot, "KvHostArena::Restore"));
  const std::vector<uint8_t>& s = slots_[static_cast<size_t>(slot)];
  if (s.size() != block_bytes_) return InvalidArgument("KvHostArena::Restore: host slot never saved into");
  return backend_->WriteKvBlock(block, s);
}

StatusOr<std::span<const uint8_t>> PlainKvHostArena::Bytes(int32_t slot) {
  LLM_RETURN_IF_ERROR(Check(slot, "KvHostArena::Bytes"));
  const std::vector<uint8_t>& s = slots_[static_cast<size_t>(slot)];
  if (s.size() != block_bytes_) return InvalidArgument("KvHostArena::Bytes: host slot never saved into");
  return std::span<const uint8_t>(s);
}

}  // namespace llm
