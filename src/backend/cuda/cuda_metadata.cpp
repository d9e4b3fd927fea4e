// The CUDA backend's per-step batch metadata: a batch that passed the shared
// check (backend/validate.h) laid out as the kernels read it, one int32
// buffer built on the host and uploaded once per step (meta_, offsets in
// off_). The check decides what may run; this file only decides where each
// piece goes.
//
//   [tokens (n_tok) | tok_seq (n_tok) | tok_pos (n_tok) | logit_rows (n_out) | dec_items (n_dec) |
//    seqs (n_seqs x SeqDesc) | work (n_work x PrefillWork) | block tables (each sequence's needed blocks)]
#include <algorithm>
#include <cstring>
#include <new>

#include "backend/cuda/cuda_backend.h"

namespace llm::cuda {

Status CudaBackend::LayOutMetadata(const Batch& batch, const BatchExtent& extent) {
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  const int64_t n_out = static_cast<int64_t>(batch.logit_rows.size());
  const int64_t n_seqs = static_cast<int64_t>(batch.seqs.size());
  const int32_t bs = kv_.block_size;
  const int64_t n_tables = extent.n_table_blocks;
  int64_t n_work = 0;
  for (const BatchSeq& q : batch.seqs) n_work += (q.n_tokens + kPrefillTileQ - 1) / kPrefillTileQ;

  // ---- layout
  Offsets& o = off_;
  o.tokens = 0;
  o.tok_seq = o.tokens + n;
  o.tok_pos = o.tok_seq + n;
  o.logit_rows = o.tok_pos + n;
  o.dec_items = o.logit_rows + n_out;
  o.seqs = (o.dec_items + n + 3) / 4 * 4;  // 16-byte aligned SeqDesc
  o.work = o.seqs + n_seqs * 4;
  o.tables = o.work + n_work * 2;
  o.total = o.tables + n_tables;
  try {
    meta_.assign(static_cast<size_t>(o.total), 0);
  } catch (const std::bad_alloc&) {
    return OutOfMemory("CUDA backend: batch metadata");
  }
  int32_t* m = meta_.data();
  for (int64_t i = 0; i < n; ++i) m[o.tokens + i] = batch.tokens[i];
  for (int64_t i = 0; i < n; ++i) m[o.tok_seq + i] = tok_seq_[i];
  for (int64_t i = 0; i < n_out; ++i) m[o.logit_rows + i] = batch.logit_rows[i];

  const bool prefill_ok = PrefillAttentionSupports(cfg_.head_dim) && !force_decode_;
  constexpr int32_t kDecodeMaxTokens = 8;  // sequences with more tokens go through the prefill kernel
  int64_t table_pos = 0, n_dec = 0, w = 0;
  max_dec_keys_ = 0;
  for (int64_t s = 0; s < n_seqs; ++s) {
    const BatchSeq& q = batch.seqs[s];
    const int64_t needed = (static_cast<int64_t>(q.n_past) + q.n_tokens + bs - 1) / bs;
    SeqDesc d{q.first, q.n_tokens, q.n_past, static_cast<int32_t>(table_pos)};
    std::memcpy(m + o.seqs + s * 4, &d, sizeof d);
    std::memcpy(m + o.tables + table_pos, q.block_table.data(), static_cast<size_t>(needed) * sizeof(int32_t));
    table_pos += needed;
    for (int32_t i = 0; i < q.n_tokens; ++i) m[o.tok_pos + q.first + i] = q.n_past + i;
    if (prefill_ok && q.n_tokens > kDecodeMaxTokens) {
      for (int32_t q0 = 0; q0 < q.n_tokens; q0 += kPrefillTileQ) {
        m[o.work + 2 * w] = static_cast<int32_t>(s);
        m[o.work + 2 * w + 1] = q0;
        ++w;
      }
    } else {
      for (int32_t i = 0; i < q.n_tokens; ++i) m[o.dec_items + n_dec++] = q.first + i;
      max_dec_keys_ = std::max(max_dec_keys_, q.n_past + q.n_tokens);
    }
  }
  n_tok_ = static_cast<int32_t>(n);
  n_seqs_ = static_cast<int32_t>(n_seqs);
  n_out_ = static_cast<int32_t>(n_out);
  n_dec_ = static_cast<int32_t>(n_dec);
  n_work_ = static_cast<int32_t>(w);
  n_tables_ = static_cast<int32_t>(n_tables);
  return Status::Ok();
}

}  // namespace llm::cuda
