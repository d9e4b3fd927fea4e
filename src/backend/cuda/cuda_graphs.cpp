// CUDA graphs for decode steps (see cuda_backend.h).
//
// A decode step of n sequences runs as the graph of bucket B >= n (buckets
// 1, 2, 4, ..., max). Rows n..B-1 are padding: token 0 at position 0 of a
// one-sequence "context" whose single block is the scratch block past the
// engine's pool, so they write K/V nowhere the engine reads and attend only
// to themselves. Every row is independent in every kernel (GEMM rows, norms,
// attention items), so padding never changes a real row's numbers.
//
// The first step of a bucket runs eagerly (which also loads every kernel and
// lets cuBLAS pick its algorithms for this shape) and is then captured; later
// steps replay it. A failed capture or graph launch marks the bucket eager;
// only a failure of the eager launches is an error.
#include <algorithm>
#include <cstring>

#include "attention_decode.cuh"
#include "backend/cuda/cuda_backend.h"

namespace llm::cuda {

Status CudaBackend::InitGraphs() {
  const int64_t bs = kv_.block_size;
  int64_t max_len = opt_.max_seq_len > 0 ? opt_.max_seq_len : std::min<int64_t>(capacity_, 16384);
  max_len = std::max<int64_t>(1, std::min<int64_t>(max_len, capacity_));
  graph_max_keys_ = static_cast<int32_t>(max_len);
  const int64_t width = (max_len + bs - 1) / bs;  // table entries of the longest sequence
  const int64_t B = graphs_.back().size;
  //   per-row fields, seqs, every row's table (+1: a padding row's scratch entry)
  graph_meta_ints_ = (5 * B + 3) / 4 * 4 + 4 * B + B * (width + 1);
  LLM_RETURN_IF_ERROR(graph_meta_dev_.Allocate(static_cast<size_t>(graph_meta_ints_) * sizeof(int32_t),
                                               "graph step metadata"));
  LLM_RETURN_IF_ERROR(graph_meta_pinned_.Allocate(static_cast<size_t>(graph_meta_ints_) * sizeof(int32_t),
                                                  "graph step metadata (host)"));
  return Status::Ok();
}

void CudaBackend::ClearGraphs() {
  for (Graph& g : graphs_) {
    if (g.exec != nullptr) cudaGraphExecDestroy(g.exec);  // fails only with a lost context: nothing to do
    g.exec = nullptr;
  }
}

void CudaBackend::DestroyGraphs() {
  ClearGraphs();
  graphs_.clear();
}

Status CudaBackend::CaptureBucket(size_t bucket, const StepView& v) {
  // Relaxed: cuBLAS and the attention launcher (cudaFuncSetAttribute) make
  // calls a global-mode capture may refuse; nothing else in this process
  // needs protecting from them.
  LLM_CUDA_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed), "begin graph capture");
  const Status body = RunStep(v);
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream_, &graph);  // always: leaves capture mode
  if (!body.ok() || end != cudaSuccess) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();  // capture errors are not sticky; leave none for the next check
    return !body.ok() ? body : CudaStatus(end, "end graph capture");
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (inst != cudaSuccess) {
    cudaGetLastError();
    return CudaStatus(inst, "instantiate graph");
  }
  graphs_[bucket].exec = exec;
  ++graph_stats_.captures;
  return Status::Ok();
}

// Layout of graph_meta_dev_ for a bucket of B rows (int32 units):
//
//   [tokens (B) | tok_seq (B) | tok_pos (B) | logit_rows (B) | dec_items (B) | pad to 4 |
//    seqs (B x SeqDesc) | tables: the step's block tables, then one scratch entry per padding row]
//
// Every offset depends on B alone, so the graph of B reads the same places at
// every replay; only the contents (and the tables' length) change.
Status CudaBackend::RunDecodeGraph(bool* handled) {
  *handled = false;
  if (!graphs_on_ || graphs_.empty()) return Status::Ok();
  const int32_t n = n_tok_;
  // A decode step: one token per sequence, all through the decode kernel.
  if (n < 1 || n_seqs_ != n || n_dec_ != n || n_work_ != 0 || n_out_ < 1) return Status::Ok();
  size_t bi = 0;
  while (bi < graphs_.size() && graphs_[bi].size < n) ++bi;
  if (bi == graphs_.size()) return Status::Ok();  // larger than the largest bucket
  Graph& g = graphs_[bi];
  const int32_t B = g.size;
  if (g.failed || n_out_ > B) return Status::Ok();

  Offsets o{};
  o.tokens = 0;
  o.tok_seq = B;
  o.tok_pos = 2 * int64_t{B};
  o.logit_rows = 3 * int64_t{B};
  o.dec_items = 4 * int64_t{B};
  o.seqs = (5 * int64_t{B} + 3) / 4 * 4;
  o.work = o.seqs + 4 * int64_t{B};
  o.tables = o.work;
  o.total = o.tables + n_tables_ + (B - n);
  if (o.total > graph_meta_ints_) return Status::Ok();  // tables longer than planned: eager

  // No-op after creation (sized for the largest bucket then); a growth here
  // drops the graphs, and this bucket captures again below.
  LLM_RETURN_IF_ERROR(Reserve(B, B, 0));

  // ---- the padded step's metadata, from the eager layout Validate built
  int32_t* m = graph_meta_pinned_.get<int32_t>();
  const int32_t* e = meta_.data();
  for (int32_t i = 0; i < B; ++i) {
    const bool real = i < n;
    m[o.tokens + i] = real ? e[off_.tokens + i] : 0;
    m[o.tok_seq + i] = real ? e[off_.tok_seq + i] : i;  // padding row i is padding sequence i
    m[o.tok_pos + i] = real ? e[off_.tok_pos + i] : 0;
    m[o.dec_items + i] = real ? e[off_.dec_items + i] : i;
    m[o.logit_rows + i] = i < n_out_ ? e[off_.logit_rows + i] : i;  // rows past n_out_ are computed, not copied
  }
  for (int64_t i = o.dec_items + B; i < o.seqs; ++i) m[i] = 0;
  std::memcpy(m + o.seqs, e + off_.seqs, static_cast<size_t>(n) * sizeof(SeqDesc));
  std::memcpy(m + o.tables, e + off_.tables, static_cast<size_t>(n_tables_) * sizeof(int32_t));
  for (int32_t i = n; i < B; ++i) {
    const SeqDesc pad{i, 1, 0, n_tables_ + (i - n)};
    std::memcpy(m + o.seqs + 4 * int64_t{i}, &pad, sizeof pad);
    m[o.tables + n_tables_ + (i - n)] = scratch_block_;
  }
  LLM_CUDA_TRY(cudaMemcpyAsync(graph_meta_dev_.get(), m, static_cast<size_t>(o.total) * sizeof(int32_t),
                               cudaMemcpyHostToDevice, stream_),
               "upload graph step metadata");

  StepView v;
  v.meta = graph_meta_dev_.get<int32_t>();
  v.off = o;
  v.n_tok = B;
  v.n_out = B;
  v.n_dec = B;
  v.n_work = 0;
  v.dec_dynamic = 1;
  PlanDecodeAttention(B, cfg_.n_head_kv, cfg_.head_dim, graph_max_keys_, n_sm_, kDecodeSlots, &v.dec_splits,
                      &v.dec_keys_per_split);

  if (g.exec != nullptr) {
    const cudaError_t err = cudaGraphLaunch(g.exec, stream_);
    if (err == cudaSuccess) {
      ++graph_stats_.replays;
      *handled = true;
      return Status::Ok();
    }
    // Nothing of the graph was queued: run the same launches eagerly below.
    cudaGetLastError();
    cudaGraphExecDestroy(g.exec);
    g.exec = nullptr;
    g.failed = true;
    ++graph_stats_.capture_failures;
  }

  // ---- eager: the bucket's first step (warm-up), or after a failed replay
  ++graph_stats_.eager_steps;
  LLM_RETURN_IF_ERROR(RunStep(v));
  *handled = true;
  if (g.exec == nullptr && !g.failed) {
    // Let the eager step finish first (its errors are the step's, not the
    // capture's), then record the same launches for the next step of this size.
    LLM_CUDA_TRY(cudaStreamSynchronize(stream_), "decode step");
    if (!CaptureBucket(bi, v).ok()) {
      g.failed = true;
      ++graph_stats_.capture_failures;
    }
  }
  return Status::Ok();
}

}  // namespace llm::cuda
