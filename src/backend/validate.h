// Checks shared by the backends: one place decides what a usable weight
// matrix is, so the CPU and CUDA backends accept and reject the same models
// with the same status codes.
#pragma once

#include <cstdint>
#include <string>

#include "model/weights.h"
#include "util/status.h"

namespace llm {

// `w` is a (rows, cols) matrix of a type the backends read (TensorTypeLayout
// knows it). `backend` prefixes the message ("CPU backend", "CUDA backend").
//   missing, wrong shape, row_bytes too small for its rows -> INVALID_ARGUMENT
//   unknown type, rows that are not whole quantization blocks -> UNSUPPORTED
Status CheckWeightMatrix(const WeightView& w, int64_t rows, int64_t cols, const std::string& name,
                         const char* backend);

}  // namespace llm
