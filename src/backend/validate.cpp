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

}  // namespace llm
