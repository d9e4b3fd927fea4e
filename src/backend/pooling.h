// Pooling: an embedding model's hidden states (n_tokens, n_embd) of one
// sequence to what a caller gets (config.h's Pooling), and the finishing
// steps a request may ask for (Matryoshka truncation, L2 normalisation).
// Shared by the backends (which pool) and the engine (which finishes).
#pragma once

#include <cstdint>

#include "model/config.h"

namespace llm {

// Floats one sequence of n_tokens pools to: n_tokens * n_embd for NONE,
// n_embd for MEAN / CLS / LAST, n_cls_out for RANK; 0 for RANK on a model
// without a classifier head.
int64_t PooledSize(const ModelConfig& config, Pooling pooling, int64_t n_tokens);

// hidden (n, dim) -> out: NONE copies every row, MEAN averages the rows
// (sum in order, times 1/n, as llama.cpp's mean matrix does), CLS takes row
// 0, LAST row n-1. RANK is the backend's (it needs the classifier head).
void PoolRows(const float* hidden, int64_t n, int64_t dim, Pooling pooling, float* out);

// Each of `rows` rows of `in` (rows, dim) keeps its first `keep` values
// (Matryoshka truncation; keep <= dim) and, with l2, is divided by its
// Euclidean norm (summed in double; a zero row stays zero):
// out (rows, keep). in and out may be the same buffer.
void FinishRows(const float* in, int64_t rows, int64_t dim, int64_t keep, bool l2, float* out);

}  // namespace llm
