#include "backend/validate.h"

namespace llm {

Status CheckWeightMatrix(const WeightView& w, int64_t rows, int64_t cols, const std::string& name,
                         const char* backend) {
  const std::string who = backend;
  if (w.empty()) return InvalidArgument(who + ": missing weight " + name);
  if (w.rows != rows || w.cols != cols)
    return InvalidArgument(who + ": " + name + " has shape (" + std::to_string(w.rows) + ", " +
                           std::to_string(w.cols) + "), expected (" + std::to_string(rows) + ", " +
                           std::to_string(cols) + ")");
  int64_t block_elems = 0, block_bytes = 0;
  if (!TensorTypeLayout(w.type, &block_elems, &block_bytes))
    return Unsupported(who + ": unsupported weight type " + std::to_string(static_cast<uint32_t>(w.type)) + " for " +
                       name);
  if (cols % block_elems != 0)
    return Unsupported(who + ": " + name + " has rows of " + std::to_string(cols) +
                       " weights, not a whole number of its " + std::to_string(block_elems) + "-weight blocks");
  if (w.row_bytes < TensorRowBytes(w.type, cols)) return InvalidArgument(who + ": row_bytes too small for " + name);
  return Status::Ok();
}

Status CheckKvSwaps(std::span<const KvSwap> moves, int64_t n_blocks, int64_t n_slots, const char* what) {
  for (const KvSwap& m : moves) {
    if (m.block < 0 || m.block >= n_blocks)
      return InvalidArgument(std::string(what) + ": block id " + std::to_string(m.block) + " outside [0, " +
                             std::to_string(n_blocks) + ")");
    if (m.slot < 0 || m.slot >= n_slots)
      return InvalidArgument(std::string(what) + ": swap slot " + std::to_string(m.slot) + " outside [0, " +
                             std::to_string(n_slots) + ")");
  }
  return Status::Ok();
}

}  // namespace llm
