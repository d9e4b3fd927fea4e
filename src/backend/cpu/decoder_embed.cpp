// Embeddings from a decoder (Qwen3-Embedding, Qwen3-Reranker: causal;
// EmbeddingGemma: bidirectional, ModelConfig::causal false): the sequences
// run as one prefill step over the block tables the engine gave them, and
// the step's final-normed rows are pooled here instead of going through the
// vocabulary head.
//
//   tokens of seq i ──layers (K/V into its blocks)──> final norm
//     none / mean : every row          -> copied / averaged (pooling.h)
//     cls / last  : the first / the last row
//     rank        : the last row · cls.output.weightᵀ (+ bias), softmax over
//                   the outputs for qwen3 ([yes, no] -> P(yes) first)
//   then, with n_dense (EmbeddingGemma's sentence-transformers Dense
//   modules), each pooled row -> ·dense_2ᵀ -> ·dense_3ᵀ (every token's row
//   for none, as llama.cpp)
//
// Every sequence runs whole in the step (n_past 0), which bidirectional
// attention needs: a token sees keys after it, stored in the same step.
//
// A token's arithmetic does not depend on the other sequences of the step
// (forward.cpp's rows, tokens and heads are independent), so a sequence's
// vector is bitwise the same alone and batched.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/matmul_rows.h"
#include "backend/pooling.h"

namespace llm::cpu {
namespace {

bool AllRows(Pooling p) { return p == Pooling::kNone || p == Pooling::kMean; }

}  // namespace

void CpuBackend::Project(const WeightView& w, const float* x, int64_t n, float* y) {
  std::vector<BlockQ8Act> xq;
  if (IsBlockQuantized(w.type)) {
    const int64_t nb = w.cols / 32;
    xq.resize(static_cast<size_t>(n * nb));
    for (int64_t t = 0; t < n; ++t) k_->quantize_act(x + t * w.cols, w.cols, xq.data() + t * nb);
  }
  auto rows = [&](int64_t lo, int64_t hi, int) {
    k_->matmul(DenseRowRange(w, x, xq.empty() ? nullptr : xq.data(), n, y, lo, hi));
  };
  if (Parallel(n * w.rows * w.cols)) {
    pool_.ParallelFor(w.rows, rows);
  } else {
    rows(0, w.rows, 0);
  }
}

Status CpuBackend::Encode(std::span<const EncodeSeq> seqs) {
  if (!cfg_.MakesEmbeddings())
    return Unsupported("the model '" + cfg_.arch + "' does not make embeddings (its file names no pooling)");
  if (first_layer_ > 0) return Unsupported("CPU backend: embeddings from a model split across backends");
  const int64_t E = cfg_.n_embd;
  std::vector<llm_token> tokens;
  std::vector<BatchSeq> bseqs(seqs.size());
  std::vector<int32_t> rows;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const EncodeSeq& s = seqs[i];
    const int64_t n = static_cast<int64_t>(s.tokens.size());
    if (n == 0 || s.out == nullptr) return InvalidArgument("CPU backend: an embedding sequence with no tokens or no output");
    if (s.pooling == Pooling::kRank && w_.cls_out.empty())
      return Unsupported("pooling 'rank' needs a classifier head, which the model '" + cfg_.arch + "' lacks");
    BatchSeq& b = bseqs[i];
    b.first = static_cast<int32_t>(tokens.size());
    b.n_tokens = static_cast<int32_t>(n);
    b.n_past = 0;
    b.block_table = s.block_table;
    if (AllRows(s.pooling)) {
      for (int32_t t = 0; t < n; ++t) rows.push_back(b.first + t);
    } else {  // one row: the first token's for CLS, the last's for last and rank
      rows.push_back(b.first + (s.pooling == Pooling::kCls ? 0 : static_cast<int32_t>(n - 1)));
    }
    tokens.insert(tokens.end(), s.tokens.begin(), s.tokens.end());
  }
  // ---- one prefill step: hidden (rows, n_embd), CheckBatch validating ids and tables
  std::vector<float> hidden(rows.size() * static_cast<size_t>(E));
  Batch batch;
  batch.tokens = tokens;
  batch.seqs = bseqs;
  batch.logit_rows = rows;
  hidden_out_ = hidden.data();
  const Status st = Forward(batch, nullptr);
  hidden_out_ = nullptr;
  LLM_RETURN_IF_ERROR(st);

  // ---- pool each sequence's rows
  std::vector<float> head;  // a cls.output row as F32
  const float* h = hidden.data();
  for (size_t i = 0; i < seqs.size(); ++i) {
    const EncodeSeq& s = seqs[i];
    const int64_t n = static_cast<int64_t>(s.tokens.size());
    const int64_t n_rows = AllRows(s.pooling) ? n : 1;
    if (s.pooling != Pooling::kRank) {
      PoolRows(h, n_rows, E, s.pooling == Pooling::kLast ? Pooling::kCls : s.pooling, s.out);  // (its one row)
    } else {
      const int32_t n_out = cfg_.n_cls_out;
      head.resize(static_cast<size_t>(E));
      for (int32_t j = 0; j < n_out; ++j) {
        DequantizeRow(w_.cls_out, j, head.data());
        double acc = 0.0;
        for (int64_t k = 0; k < E; ++k) acc += static_cast<double>(h[k]) * head[k];
        s.out[j] = static_cast<float>(acc);
      }
      if (!w_.cls_out_b.empty()) {
        head.resize(static_cast<size_t>(n_out));
        WeightView b = w_.cls_out_b;
        b.rows = 1;
        b.cols = n_out;
        DequantizeRow(b, 0, head.data());
        for (int32_t j = 0; j < n_out; ++j) s.out[j] += head[j];
      }
      if (cfg_.arch_kind == ModelArch::kQwen3) {  // softmax over the outputs
        const float mx = *std::max_element(s.out, s.out + n_out);
        double sum = 0.0;
        for (int32_t j = 0; j < n_out; ++j) sum += std::exp(static_cast<double>(s.out[j]) - mx);
        for (int32_t j = 0; j < n_out; ++j)
          s.out[j] = static_cast<float>(std::exp(static_cast<double>(s.out[j]) - mx) / sum);
      }
    }
    if (cfg_.n_dense > 0 && s.pooling != Pooling::kRank) {  // out (rows, E) -> dense_2 -> dense_3 -> out
      const int64_t out_rows = s.pooling == Pooling::kNone ? n : 1;
      std::vector<float> mid(static_cast<size_t>(out_rows * cfg_.n_dense));
      Project(w_.dense_2, s.out, out_rows, mid.data());
      Project(w_.dense_3, mid.data(), out_rows, s.out);
    }
    h += n_rows * E;
  }
  return Status::Ok();
}

}  // namespace llm::cpu
