// BERT on the CPU, one whole sequence per pass:
//
//   x = layernorm(tok_embd[t] + type_embd[0] + pos_embd[p])     x: (n, n_embd)
//   per layer:
//     q, k, v = x·Wᵀ + b                                        (n, n_embd) each
//     att[h]  = softmax(q[h]·k[h]ᵀ · scale) · v[h]              every token sees every token
//     x = layernorm(x + att·Woᵀ + bo)                           attn_output_norm
//     x = layernorm(x + gelu(x·Wupᵀ + bup)·Wdownᵀ + bdown)      layer_output_norm
//   out = pool(x)              [RANK: cls_out(tanh(cls(x[0])))]
//
// nomic-bert (config.rope_encoder): no pos_embd; q and k rotated (NEOX RoPE)
// at their positions 0..n-1 before the attention; the FFN is
// silu(x·Wgateᵀ) * (x·Wupᵀ), then ·Wdownᵀ; biases only where the file has them.
#include "backend/cpu/encoder.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "backend/cpu/encoder_attention.h"
#include "backend/cpu/encoder_matmul.h"
#include "backend/cpu/matmul_rows.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/rope.h"
#include "backend/pooling.h"
#include "backend/validate.h"
#include "util/thread_pool.h"

namespace llm::cpu {
namespace {

constexpr int64_t kParallelMacs = 16 * 1024;  // as forward.cpp: smaller loops stay on the caller

// A 1-D F32 tensor (a bias or a LayerNorm weight), or null when absent.
const float* Vec(const WeightView& w) { return static_cast<const float*>(w.data); }

class CpuEncoder final : public Backend {
 public:
  CpuEncoder(const ModelConfig& c, const ModelWeights& w, int n_threads, std::optional<Rope> rope)
      : cfg_(c), w_(w), k_(&BestKernels()), pool_(n_threads), rope_(std::move(rope)) {}

  int32_t kind() const override { return LLM_BACKEND_CPU; }
  Status Forward(const Batch&, float*) override {
    return Unsupported("the model '" + cfg_.arch + "' is an encoder: it makes embeddings, not tokens");
  }
  Status CopyKvBlock(int32_t, int32_t) override { return Status::Ok(); }
  int64_t kv_block_bytes() const override { return 0; }
  BackendMemory memory() const override {
    BackendMemory m;
    m.weights = weight_bytes_;
    m.scratch = static_cast<int64_t>(scratch_floats_ * sizeof(float));
    return m;
  }
  Status ReserveSwapSpace(int32_t) override { return Status::Ok(); }
  Status SwapOutKvBlocks(std::span<const KvSwap> moves) override {
    return moves.empty() ? Status::Ok() : Unsupported("an encoder has no KV cache to swap");
  }
  Status SwapInKvBlocks(std::span<const KvSwap> moves) override {
    return moves.empty() ? Status::Ok() : Unsupported("an encoder has no KV cache to swap");
  }
  Status Encode(std::span<const EncodeSeq> seqs) override;

  Status Check() const;
  int64_t weight_bytes_ = 0;

 private:
  // One sequence of n tokens: x (n, n_embd) after the last layer.
  void RunSequence(std::span<const llm_token> tokens);
  void Reserve(int64_t n);
  // y (n, w.rows) = x (n, w.cols) · wᵀ (+ b), rows split over the threads.
  void Linear(const WeightView& w, const WeightView& b, const float* x, int64_t n, float* y);
  // x (n, n_embd) = layernorm(x + y) * w + b row by row (y null: of x alone).
  void AddLayerNorm(float* x, const float* y, const WeightView& w, const WeightView& b, int64_t n);
  void Attention(int64_t n);  // att_ (n, q_dim) from q_, k_, v_
  bool Parallel(int64_t macs) const { return pool_.n_threads() > 1 && macs >= kParallelMacs; }

  ModelConfig cfg_;
  ModelWeights w_;
  const Kernels* k_;
  ThreadPool pool_;
  std::optional<Rope> rope_;  // nomic-bert's rotation; none for bert
  // ---- activations, grown to the longest sequence seen
  int64_t cap_ = 0;
  size_t scratch_floats_ = 0;
  std::vector<float> x_, y_, q_, kk_, v_, att_, hb_, gate_, ones_, cos_sin_;
  EncoderAttnScratch attn_;
  std::vector<BlockQ8Act> xq_;
};

Status CpuEncoder::Check() const {
  const ModelConfig& c = cfg_;
  if (!c.is_encoder || c.causal) return InvalidArgument("CPU encoder: the model is not an encoder");
  if (c.n_embd <= 0 || c.n_layer <= 0 || c.n_head <= 0 || c.head_dim <= 0 || c.n_ff <= 0 || c.n_ctx_train <= 0)
    return InvalidArgument("CPU encoder: model dimensions must be positive");
  if (c.n_head_kv != c.n_head || c.q_dim() != c.n_embd)
    return Unsupported("CPU encoder: grouped-query attention or q_dim != n_embd");
  if (static_cast<int64_t>(w_.layers.size()) != c.n_layer) return InvalidArgument("CPU encoder: wrong layer count");
  const int64_t E = c.n_embd, F = c.n_ff;
  LLM_RETURN_IF_ERROR(CheckWeightMatrix(w_.token_embd, c.n_vocab, E, "token_embd", "CPU encoder"));
  if (!c.rope_encoder)
    LLM_RETURN_IF_ERROR(CheckWeightMatrix(w_.position_embd, c.n_ctx_train, E, "position_embd", "CPU encoder"));
  if (c.rope_encoder && !rope_) return InvalidArgument("CPU encoder: no RoPE table for a rotary encoder");
  for (const auto& L : w_.layers) {
    LLM_RETURN_IF_ERROR(CheckWeightMatrix(L.wq, E, E, "attn_q", "CPU encoder"));
    LLM_RETURN_IF_ERROR(CheckWeightMatrix(L.wk, E, E, "attn_k", "CPU encoder"));
    LLM_RETURN_IF_ERROR(CheckWeightMatrix(L.wv, E, E, "attn_v", "CPU encoder"));
    LLM_RETURN_IF_ERROR(CheckWeightMatrix(L.wo, E, E, "attn_output", "CPU encoder"));
    LLM_RETURN_IF_ERROR(CheckWeightMatrix(L.w_up, F, E, "ffn_up", "CPU encoder"));
    LLM_RETURN_IF_ERROR(CheckWeightMatrix(L.w_down, E, F, "ffn_down", "CPU encoder"));
    for (const WeightView* v : {&L.post_attn_norm, &L.post_attn_norm_b, &L.post_ffn_norm, &L.post_ffn_norm_b})
      if (v->empty() || v->type != TensorType::F32) return InvalidArgument("CPU encoder: a norm is missing");
    // bert: every linear layer has a bias; nomic-bert: only attn_output may.
    for (const WeightView* v : {&L.bq, &L.bk, &L.bv, &L.bo, &L.b_up, &L.b_down}) {
      const bool may_lack = c.rope_encoder && v == &L.bo, must_lack = c.rope_encoder && v != &L.bo;
      if (v->empty() ? !(may_lack || must_lack) : (must_lack || v->type != TensorType::F32))
        return InvalidArgument("CPU encoder: a bias is missing, unexpected or not F32");
    }
    if (c.rope_encoder) LLM_RETURN_IF_ERROR(CheckWeightMatrix(L.w_gate, F, E, "ffn_gate", "CPU encoder"));
  }
  return Status::Ok();
}

void CpuEncoder::Reserve(int64_t n) {
  if (n <= cap_) return;
  const int64_t E = cfg_.n_embd, F = cfg_.n_ff, T = pool_.n_threads();
  x_.resize(n * E);
  y_.resize(n * E);
  q_.resize(n * E);
  kk_.resize(n * E);
  v_.resize(n * E);
  att_.resize(n * E);
  hb_.resize(n * F);
  if (cfg_.rope_encoder) gate_.resize(n * F);
  if (rope_) cos_sin_.resize(static_cast<size_t>(n * rope_->n_pairs() * 2));
  ones_.assign(n * F, 1.0f);
  xq_.resize(n * (std::max(E, F) / 32 + 1));
  cap_ = n;
  // + the attention's K/V tiles (2 E (n + 8)) and per-thread scores and queries
  scratch_floats_ = static_cast<size_t>(n * (7 * E + (cfg_.rope_encoder ? 3 : 2) * F) + 2 * E * (n + 8) +
                                        T * (16 * n + 32 * cfg_.head_dim)) +
                    cos_sin_.size();
}

void CpuEncoder::Linear(const WeightView& w, const WeightView& b, const float* x, int64_t n, float* y) {
  const BlockQ8Act* xq = nullptr;
  if (IsBlockQuantized(w.type)) {
    const int64_t nb = w.cols / 32;
    for (int64_t t = 0; t < n; ++t) k_->quantize_act(x + t * w.cols, w.cols, xq_.data() + t * nb);
    xq = xq_.data();
  }
  auto rows = [&](int64_t lo, int64_t hi, int) {
    EncoderMatMul(*k_, DenseRowRange(w, x, xq, n, y, lo, hi));  // the AVX-512 tile where the CPU has it
    if (!b.empty())
      for (int64_t t = 0; t < n; ++t)
        for (int64_t r = lo; r < hi; ++r) y[t * w.rows + r] += Vec(b)[r];
  };
  if (Parallel(n * w.rows * w.cols)) {
    pool_.ParallelFor(w.rows, rows);
  } else {
    rows(0, w.rows, 0);
  }
}

// ggml_norm's arithmetic: mean and variance summed in double, then
// (x - mean) / sqrt(var + eps), times w, plus b.
void CpuEncoder::AddLayerNorm(float* x, const float* y, const WeightView& w, const WeightView& b, int64_t n) {
  const int64_t E = cfg_.n_embd;
  const float eps = cfg_.rms_eps;
  const float* g = Vec(w);
  const float* bias = Vec(b);
  for (int64_t t = 0; t < n; ++t) {
    float* r = x + t * E;
    if (y != nullptr)
      for (int64_t i = 0; i < E; ++i) r[i] += y[t * E + i];
    double sum = 0.0;
    for (int64_t i = 0; i < E; ++i) sum += r[i];
    const float mean = static_cast<float>(sum / static_cast<double>(E));
    double sum2 = 0.0;
    for (int64_t i = 0; i < E; ++i) {
      r[i] -= mean;
      sum2 += static_cast<double>(r[i]) * r[i];
    }
    const float scale = 1.0f / std::sqrt(static_cast<float>(sum2 / static_cast<double>(E)) + eps);
    for (int64_t i = 0; i < E; ++i) r[i] = r[i] * scale * g[i] + bias[i];
  }
}

// Every token against all n keys of the sequence, no mask
// (encoder_attention.h: the attention kernel over each head's K/V).
void CpuEncoder::Attention(int64_t n) {
  EncoderAttnShape shape;
  shape.n = n;
  shape.n_head = cfg_.n_head;
  shape.head_dim = cfg_.head_dim;
  shape.ld = cfg_.q_dim();
  shape.scale = cfg_.AttnScale();
  EncoderAttention(*k_, pool_, shape, q_.data(), kk_.data(), v_.data(), att_.data(), &attn_);
}

void CpuEncoder::RunSequence(std::span<const llm_token> tokens) {
  const int64_t n = static_cast<int64_t>(tokens.size()), E = cfg_.n_embd, F = cfg_.n_ff;
  Reserve(n);
  // ---- embeddings                                  x: (n, n_embd)
  std::vector<float>& x = x_;
  for (int64_t t = 0; t < n; ++t) {
    float* r = x.data() + t * E;
    DequantizeRow(w_.token_embd, tokens[t], r);
    if (!w_.token_types.empty()) {  // every token is of type 0 (one segment)
      DequantizeRow(w_.token_types, 0, y_.data());
      for (int64_t i = 0; i < E; ++i) r[i] += y_[i];
    }
    if (w_.position_embd.empty()) continue;  // nomic-bert: positions by RoPE
    DequantizeRow(w_.position_embd, t, y_.data());
    for (int64_t i = 0; i < E; ++i) r[i] += y_[i];
  }
  AddLayerNorm(x.data(), nullptr, w_.embd_norm, w_.embd_norm_b, n);
  // nomic-bert: token t of the sequence is at position t; its angles are
  // the same in every layer                          cos_sin: (n, n_pairs, 2)
  const int64_t cs_stride = rope_ ? 2 * rope_->n_pairs() : 0;
  for (int64_t t = 0; rope_ && t < n; ++t) rope_->Angles(t, cos_sin_.data() + t * cs_stride);

  for (const LayerWeights& L : w_.layers) {
    // ---- attention block
    Linear(L.wq, L.bq, x.data(), n, q_.data());
    Linear(L.wk, L.bk, x.data(), n, kk_.data());
    Linear(L.wv, L.bv, x.data(), n, v_.data());
    for (int64_t t = 0; rope_ && t < n; ++t) {  // nomic-bert: q and k rotated
      rope_->Apply(cos_sin_.data() + t * cs_stride, q_.data() + t * cfg_.q_dim(), cfg_.n_head, cfg_.head_dim);
      rope_->Apply(cos_sin_.data() + t * cs_stride, kk_.data() + t * cfg_.kv_dim(), cfg_.n_head_kv, cfg_.head_dim);
    }
    Attention(n);                                            // att: (n, n_embd)
    Linear(L.wo, L.bo, att_.data(), n, y_.data());           // y: (n, n_embd)
    AddLayerNorm(x.data(), y_.data(), L.post_attn_norm, L.post_attn_norm_b, n);
    // ---- feed-forward block
    Linear(L.w_up, L.b_up, x.data(), n, hb_.data());         // hb: (n, n_ff)
    float* act = hb_.data();
    if (cfg_.rope_encoder) {                                  // nomic-bert: SwiGLU
      Linear(L.w_gate, WeightView{}, x.data(), n, gate_.data());  // gate: (n, n_ff)
      k_->silu_mul(gate_.data(), hb_.data(), n * F);          // gate = silu(gate) * hb
      act = gate_.data();
    } else {
      k_->gelu_mul(hb_.data(), ones_.data(), n * F);
    }
    Linear(L.w_down, L.b_down, act, n, y_.data());           // y: (n, n_embd)
    AddLayerNorm(x.data(), y_.data(), L.post_ffn_norm, L.post_ffn_norm_b, n);
  }
}

Status CpuEncoder::Encode(std::span<const EncodeSeq> seqs) {
  for (const EncodeSeq& s : seqs) {  // check all before running any
    if (s.tokens.empty()) return InvalidArgument("CPU encoder: an empty sequence");
    if (static_cast<int64_t>(s.tokens.size()) > cfg_.n_ctx_train)
      return InvalidArgument("CPU encoder: a sequence of " + std::to_string(s.tokens.size()) +
                             " tokens is longer than the model's " + std::to_string(cfg_.n_ctx_train) + " positions");
    for (llm_token t : s.tokens)
      if (t < 0 || t >= cfg_.n_vocab) return InvalidArgument("CPU encoder: token id " + std::to_string(t) + " out of range");
    if (s.out == nullptr) return InvalidArgument("CPU encoder: no output buffer");
    if (s.pooling == Pooling::kRank && w_.cls_out.empty())
      return Unsupported("the model has no classifier head: rank pooling needs one");
  }
  const int64_t E = cfg_.n_embd;
  for (const EncodeSeq& s : seqs) {
    const int64_t n = static_cast<int64_t>(s.tokens.size());
    RunSequence(s.tokens);
    if (s.pooling != Pooling::kRank) {
      PoolRows(x_.data(), n, E, s.pooling, s.out);
      continue;
    }
    // ---- classifier head on the CLS row: [tanh(cls(x0))] -> cls_out
    const float* h = x_.data();
    if (!w_.cls.empty()) {
      Linear(w_.cls, w_.cls_b, x_.data(), 1, y_.data());
      for (int64_t i = 0; i < E; ++i) y_[i] = std::tanh(y_[i]);
      h = y_.data();
    }
    Linear(w_.cls_out, w_.cls_out_b, h, 1, att_.data());
    std::copy(att_.begin(), att_.begin() + cfg_.n_cls_out, s.out);
  }
  return Status::Ok();
}

int64_t Bytes(const WeightView& w) { return w.empty() ? 0 : w.rows * static_cast<int64_t>(w.row_bytes); }

}  // namespace

StatusOr<std::unique_ptr<Backend>> CreateCpuEncoder(const ModelConfig& config, const ModelWeights& weights,
                                                    int n_threads) {
  std::optional<Rope> rope;
  if (config.rope_encoder) {
    LLM_ASSIGN_OR_RETURN(Rope r, Rope::Create(config));
    rope = std::move(r);
  }
  auto enc = std::make_unique<CpuEncoder>(config, weights, n_threads, std::move(rope));
  LLM_RETURN_IF_ERROR(enc->Check());
  int64_t bytes = 0;
  for (const WeightView* v : {&weights.token_embd, &weights.position_embd, &weights.token_types, &weights.cls,
                              &weights.cls_out})
    bytes += Bytes(*v);
  for (const LayerWeights& L : weights.layers)
    for (const WeightView* v : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) bytes += Bytes(*v);
  enc->weight_bytes_ = bytes;
  return std::unique_ptr<Backend>(std::move(enc));
}

}  // namespace llm::cpu
