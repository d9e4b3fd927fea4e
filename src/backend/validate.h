// Checks shared by the backends: one place decides what a usable weight
// matrix and a runnable batch are, so the CPU and CUDA backends accept and
// reject the same models and batches with the same status codes and messages.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/weights.h"
#include "util/status.h"

namespace llm {

// `w` is a (rows, cols) matrix of a type the backends read (TensorTypeLayout
// knows it). `backend` prefixes the message ("CPU backend", "CUDA backend").
//   missing, wrong shape, row_bytes too small for its rows -> INVALID_ARGUMENT
//   unknown type, rows that are not whole quantization blocks -> UNSUPPORTED
Status CheckWeightMatrix(const WeightView& w, int64_t rows, int64_t cols, const std::string& name,
                         const char* backend);

// What a batch is checked against.
struct BatchLimits {
  int32_t n_vocab = 0;
  int64_t capacity = 0;    // positions one sequence may reach (the pool's)
  int64_t block_size = 0;
  int32_t n_blocks = 0;    // block ids are in [0, n_blocks)
  bool mrope = false;      // Batch::mrope_pos may be set (the model has M-RoPE and the backend runs it)
};

// What the check learns on the way, for the backend's own layout.
struct BatchExtent {
  int64_t max_keys = 0;        // the longest sequence's n_past + n_tokens
  int64_t n_table_blocks = 0;  // blocks the sequences' tables must cover, summed
};

// Whether `batch` may run, decided before any memory is touched: token ids in
// [0, n_vocab); logit rows name tokens of the batch, and a logits output
// exists when rows are asked for (`has_logits_out`); every sequence has a
// token range inside the batch, positions within the pool, and a block table
// that covers them with ids in range; every token belongs to exactly one
// sequence; embd and attn_end are empty or one per token, and each attn_end
// lies in [position + 1, its sequence's n_past + n_tokens] (a token given as
// an embedding row may carry any id). INVALID_ARGUMENT naming the first fault. `seq_of` (n_tokens) gets
// each token's sequence index.
StatusOr<BatchExtent> CheckBatch(const Batch& batch, bool has_logits_out, const BatchLimits& limits,
                                 std::vector<int32_t>* seq_of);

// Every move of a swap names a pool block in [0, n_blocks) and a swap slot in
// [0, n_slots); else INVALID_ARGUMENT, prefixed with `what`, before anything
// is copied.
Status CheckKvSwaps(std::span<const KvSwap> moves, int64_t n_blocks, int64_t n_slots, const char* what);

}  // namespace llm
