#include "backend/validate.h"

#include <algorithm>
#include <limits>
#include <new>

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

StatusOr<BatchExtent> CheckBatch(const Batch& batch, bool has_logits_out, const BatchLimits& limits,
                                 std::vector<int32_t>* seq_of) {
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  const int64_t n_out = static_cast<int64_t>(batch.logit_rows.size());
  if (n > std::numeric_limits<int32_t>::max() / 4 || n_out > std::numeric_limits<int32_t>::max() / 4)
    return InvalidArgument("batch too large");
  if (!batch.embd.empty() && static_cast<int64_t>(batch.embd.size()) != n)
    return InvalidArgument("batch has " + std::to_string(batch.embd.size()) + " embedding-row slots for " +
                           std::to_string(n) + " tokens");
  if (!batch.attn_end.empty() && static_cast<int64_t>(batch.attn_end.size()) != n)
    return InvalidArgument("batch has " + std::to_string(batch.attn_end.size()) + " attention ends for " +
                           std::to_string(n) + " tokens");
  if (!batch.mrope_pos.empty() && static_cast<int64_t>(batch.mrope_pos.size()) != 3 * n)
    return InvalidArgument("batch has " + std::to_string(batch.mrope_pos.size()) + " M-RoPE positions for " +
                           std::to_string(n) + " tokens (3 each)");
  if (!batch.mrope_pos.empty() && !limits.mrope)
    return InvalidArgument("batch has M-RoPE positions but the model has no rope.dimension_sections");
  for (int32_t v : batch.mrope_pos)
    if (v < 0) return InvalidArgument("batch has a negative M-RoPE position (" + std::to_string(v) + ")");
  for (int64_t i = 0; i < n; ++i) {
    if (!batch.embd.empty() && batch.embd[i] != nullptr) continue;  // an embedding row: the id is not read
    const llm_token t = batch.tokens[i];
    if (t < 0 || t >= limits.n_vocab)
      return InvalidArgument("batch token " + std::to_string(i) + " has id " + std::to_string(t) + ", outside [0, " +
                             std::to_string(limits.n_vocab) + ")");
  }
  for (int64_t i = 0; i < n_out; ++i) {
    const int32_t r = batch.logit_rows[i];
    if (r < 0 || r >= n) return InvalidArgument("logit row " + std::to_string(r) + " is not a token of the batch");
  }
  if (n_out > 0 && !has_logits_out) return InvalidArgument("logits output is NULL");

  BatchExtent e;
  const int64_t bs = limits.block_size;
  for (size_t s = 0; s < batch.seqs.size(); ++s) {
    const BatchSeq& q = batch.seqs[s];
    if (q.n_tokens < 1 || q.first < 0 || q.n_past < 0 || static_cast<int64_t>(q.first) + q.n_tokens > n)
      return InvalidArgument("batch sequence " + std::to_string(s) + " has an invalid token range");
    const int64_t end = static_cast<int64_t>(q.n_past) + q.n_tokens;
    if (end > limits.capacity)
      return InvalidArgument("batch sequence " + std::to_string(s) + " reaches position " + std::to_string(end) +
                             ", beyond the KV pool's " + std::to_string(limits.capacity));
    const int64_t needed = (end + bs - 1) / bs;
    if (static_cast<int64_t>(q.block_table.size()) < needed)
      return InvalidArgument("batch sequence " + std::to_string(s) + " has a block table of " +
                             std::to_string(q.block_table.size()) + " blocks, needs " + std::to_string(needed));
    for (int64_t b = 0; b < needed; ++b)
      if (q.block_table[b] < 0 || q.block_table[b] >= limits.n_blocks)
        return InvalidArgument("batch sequence " + std::to_string(s) + " uses block id " +
                               std::to_string(q.block_table[b]) + ", outside [0, " + std::to_string(limits.n_blocks) +
                               ")");
    e.max_keys = std::max(e.max_keys, end);
    e.n_table_blocks += needed;
  }

  try {
    seq_of->assign(static_cast<size_t>(n), -1);
  } catch (const std::bad_alloc&) {
    return OutOfMemory("batch check: out of host memory");
  }
  for (size_t s = 0; s < batch.seqs.size(); ++s) {
    const BatchSeq& q = batch.seqs[s];
    for (int64_t t = q.first; t < static_cast<int64_t>(q.first) + q.n_tokens; ++t) {
      if ((*seq_of)[t] != -1) return InvalidArgument("batch token " + std::to_string(t) + " belongs to two sequences");
      (*seq_of)[t] = static_cast<int32_t>(s);
      // keys up to attn_end: at least its own position, at most what the
      // cache and this step hold of its sequence
      const int64_t pos = int64_t{q.n_past} + (t - q.first);
      if (!batch.attn_end.empty() &&
          (batch.attn_end[t] < pos + 1 || batch.attn_end[t] > int64_t{q.n_past} + q.n_tokens))
        return InvalidArgument("batch token " + std::to_string(t) + " at position " + std::to_string(pos) +
                               " attends up to " + std::to_string(batch.attn_end[t]) + ", outside [" +
                               std::to_string(pos + 1) + ", " + std::to_string(int64_t{q.n_past} + q.n_tokens) + "]");
    }
  }
  for (int64_t i = 0; i < n; ++i)
    if ((*seq_of)[i] == -1) return InvalidArgument("batch token " + std::to_string(i) + " belongs to no sequence");
  return e;
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
