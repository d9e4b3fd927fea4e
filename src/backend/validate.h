// Checks shared by the backends: one place decides what a usable weight
// matrix is, so the CPU and CUDA backends accept and reject the same models
// with the same status codes.
#pragma once

#include <cstdint>
#include <span>
#include <string>

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

// Every move of a swap names a pool block in [0, n_blocks) and a swap slot in
// [0, n_slots); else INVALID_ARGUMENT, prefixed with `what`, before anything
// is copied.
Status CheckKvSwaps(std::span<const KvSwap> moves, int64_t n_blocks, int64_t n_slots, const char* what);

}  // namespace llm
