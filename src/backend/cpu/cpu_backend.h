// The CPU backend: the reference implementation of Backend (backend.h).
//
// Files: cpu_backend.cpp (creation, batch validation, KV block copies and
// swaps), forward.cpp (the forward pass), moe.cpp (Mixture-of-Experts FFN),
// lanes.cpp (the lane scheduler: a step split by sequences over the
// threads), kernels*.{h,cpp} (matmul,
// attention, norms), rope.{h,cpp}, kv_layout.h (the paged pool's layout).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/kv_layout.h"
#include "backend/cpu/rope.h"
#include "util/large_alloc.h"
#include "util/thread_pool.h"

namespace llm::cpu {

class CpuBackend final : public Backend {
 public:
  static StatusOr<std::unique_ptr<Backend>> Create(const ModelConfig& config, const ModelWeights& weights,
                                                   const KvCacheSpec& kv, int n_threads, int32_t first_layer = 0);

  int32_t kind() const override { return LLM_BACKEND_CPU; }
  Status Forward(const Batch& batch, float* logits) override;
  // Layers [first_layer, n_layer) from hidden (n_tokens, n_embd): the
  // residual stream entering first_layer (partial offload, split_backend.h).
  Status ForwardFromHidden(const Batch& batch, const float* hidden, float* logits) override;
  Status CopyKvBlock(int32_t src, int32_t dst) override;
  // A decoder embedding model's vectors (decoder_embed.cpp): one prefill
  // of every sequence over its block table (causal, or bidirectional for
  // EmbeddingGemma), the final-normed states pooled (and a rank head or
  // the dense projections applied) per sequence.
  Status Encode(std::span<const EncodeSeq> seqs) override;
  int64_t kv_block_bytes() const override { return kv_.block_bytes(); }
  BackendMemory memory() const override;
  Status ReserveSwapSpace(int32_t n_slots) override;
  Status SwapOutKvBlocks(std::span<const KvSwap> moves) override;
  Status SwapInKvBlocks(std::span<const KvSwap> moves) override;
  KvWireLayout kv_wire_layout() const override;
  Status ReadKvBlock(int32_t block, std::span<uint8_t> out) override;
  Status WriteKvBlock(int32_t block, std::span<const uint8_t> in) override;

  const char* kernels_name() const { return k_->name; }

 private:
  // ---- state shared by a backend and its lanes: fixed once Create has
  // filled it (the KV pool's contents change, never its address)
  struct Norms {  // norm weights (and Qwen2's q/k/v biases) as F32, whatever their stored type
    std::vector<std::vector<float>> attn;       // (n_layer, n_embd)
    std::vector<std::vector<float>> ffn;        // (n_layer, n_embd)
    std::vector<float> out;                     // (n_embd)
    std::vector<std::vector<float>> q, k;       // (n_layer, head_dim) when cfg.qk_norm
    std::vector<std::vector<float>> post_attn;  // (n_layer, n_embd) when cfg.post_norms
    std::vector<std::vector<float>> post_ffn;   // (n_layer, n_embd) when cfg.post_norms
    std::vector<std::vector<float>> bq;         // (n_layer, q_dim) when cfg.qkv_bias
    std::vector<std::vector<float>> bk, bv;     // (n_layer, kv_dim) when cfg.qkv_bias
    std::vector<std::vector<float>> shexp_gate; // (n_layer, n_embd) when cfg.n_ff_shexp > 0
    std::vector<std::vector<float>> bo;         // (n_layer, n_embd) when cfg.out_bias
    std::vector<std::vector<float>> sinks;      // (n_layer, n_head) when cfg.attn_sinks
    // when cfg.expert_bias: (n_layer, n_expert), (n_layer, n_expert * n_ff_exp) x2, (n_layer, n_expert * n_embd)
    std::vector<std::vector<float>> router_b, exp_gate_b, exp_up_b, exp_down_b;
  };
  struct Shared {
    Shared(const ModelConfig& config, const ModelWeights& weights, Rope r, Rope r_local)
        : cfg(config), w(weights), k(&BestKernels()), rope(std::move(r)), rope_local(std::move(r_local)) {}
    ModelConfig cfg;
    ModelWeights w;  // views into the caller's weights (and into packed)
    LargeArray<uint8_t> packed;  // PackWeights' copies, one region (huge pages where the OS gives them)
    const Kernels* k;
    Rope rope;
    Rope rope_local;  // sliding-window layers' rotation (== rope unless the model has local layers)
    Norms norms;
    // ---- paged KV pool (layout: kv_layout.h)
    KvLayout kv;
    int32_t n_blocks = 0;
    int64_t capacity = 0;        // n_blocks * block_size positions
    LargeArray<uint8_t> kv_pool; // (n_blocks, block_bytes), reserved; committed by CommitKvBlocks
    // The pool commits in kCommitChunk steps as blocks are first written:
    // which chunks are touched, and their bytes. Only the backend (not a
    // lane) changes them, before a step's layers run.
    std::vector<uint8_t> chunk_committed;
    int64_t committed_bytes = 0;
    int64_t weight_bytes = 0;    // the tensors' own bytes plus `packed`
    int64_t packed_bytes = 0;
    int64_t released_bytes = 0;  // file bytes of packed matrices whose pages were dropped
    bool lanes_off = false;      // LLM_CPU_LANES=0 (for measurements): always the shared pass
    bool act_own = false;        // LLM_CPU_ACT=own: Kernels::quantize_act for every type, F32 inputs for
                                 // F16 / BF16 weights (act_rounding.h)
  };

  // ---- one backend's (or lane's) activations, grown to the largest batch
  // seen and reused every step
  struct MoePick {
    int32_t expert;
    float weight;
  };
  struct Workspace {
    int64_t cap_tok = 0;
    int64_t cap_keys = 0;
    std::vector<float> x;        // (n_tok, n_embd)   residual stream
    std::vector<float> xn;       // (n_tok, n_embd)   normed input of a sub-block
    std::vector<float> q;        // (n_tok, q_dim)    queries
    std::vector<float> k_new;    // (n_tok, kv_dim)   this step's keys
    std::vector<float> v_new;    // (n_tok, kv_dim)   this step's values
    std::vector<float> att;      // (n_tok, q_dim)    attention output
    std::vector<float> hb;       // (n_tok, n_ff)     act(gate) * up
    std::vector<float> hb2;      // (n_tok, n_ff)     up
    std::vector<float> cos_sin;  // (n_tok, rope_dim) rotation of each token's position
    std::vector<float> cos_sin_local;  // (n_tok, rope_dim) the same for local layers, if any
    std::vector<float> x_out;    // (n_tok, n_embd)   residual rows whose logits are wanted
    std::vector<float> att_out;  // (n_tok, q_dim)    their attention output
    std::vector<BlockQ8Act> xq;  // (n_tok, max(n_embd, q_dim, n_ff) / 32) matmul input quantized
    std::vector<float> xr;       // (n_tok, max(n_embd, q_dim, n_ff)) matmul input rounded to F16 / BF16;
                                 // grown by RoundDenseInput, so empty for models without such weights
    std::vector<int32_t> seq_of; // (n_tok)           batch sequence of each token
    std::vector<int64_t> pos;    // (n_tok)           position of each token
    std::vector<float> scores;   // (n_threads, n_head / n_head_kv, cap_keys) attention scratch
    // ---- Mixture of Experts (cfg.n_expert > 0)
    std::vector<float> moe_logits;   // (n_tok, n_expert) router logits
    std::vector<MoePick> moe_pick;   // (n_tok, n_expert_used) each token's experts and weights
    std::vector<float> moe_x;        // (n_tok, n_embd) one expert's tokens' inputs, gathered
    std::vector<float> moe_y;        // (n_tok, n_embd) their outputs
    std::vector<int32_t> moe_rows;   // tokens of one expert (pick indices t * n_expert_used + j)
    std::vector<int32_t> moe_count;  // (n_expert)
  };

  CpuBackend(std::shared_ptr<Shared> shared, int n_threads);

  // pack_weights.cpp: the row-interleaved copies of the quantized matmul
  // weights (quant_pack.h), pointed to by w_'s views.
  Status PackWeights();

  // lanes.cpp: runs the batch as n_threads independent lanes, one per
  // thread, each the layers over its share of the sequences (no fork/join
  // inside), then the lanes' classifier rows in chunks any thread may take.
  // False when the batch does not split well.
  bool SplitBySequences(const Batch& batch, float* logits, Status* status);
  Status MakeLanes();
  // A lane's part of a step: checks and prepares its sub-batch (logits: where
  // its rows will go) and runs the layers; *xn: the normed rows whose logits are wanted (*n_rows of them),
  // *xq: the same quantized for the classifier (nullptr when it takes F32).
  Status LaneLayers(const Batch& batch, const float* logits, const float** xn, const BlockQ8Act** xq, int64_t* n_rows);
  // Every layer and the final norm over a checked, prepared batch: returns
  // xn_ holding the normed rows whose logits are wanted, (n_out, n_embd), or
  // nullptr when none are (the K/V are stored).
  const float* RunLayers(const Batch& batch);

  // Commits the pool chunks holding `blocks` that are not committed yet
  // (touching their pages on the thread pool).
  static constexpr int64_t kCommitChunk = int64_t{1} << 21;  // one huge page
  void CommitKvBlocks(std::span<const int32_t> blocks);
  // The blocks each sequence of a checked batch writes this step.
  void CommitBatchBlocks(const Batch& batch);

  // The shared batch check (backend/validate.h) against the model and the
  // pool; fills seq_of_; *max_keys: the most positions a sequence attends to.
  Status Check(const Batch& batch, const float* logits, int64_t* max_keys);
  // After Check: grows the buffers and fills pos_.
  Status Prepare(const Batch& batch, int64_t max_keys);
  // Grows the activation buffers to hold n_tok tokens and n_keys attended
  // positions; no-op when they are already large enough.
  Status Reserve(int64_t n_tok, int64_t n_keys);

  // forward.cpp
  void Embed(const Batch& batch);  // x: (n_tokens, n_embd), token_embd rows or the batch's embedding rows
  void RmsNormRows(const float* x, const float* w, int64_t n, float* out);
  // x += rmsnorm(y) * w row by row; y (n, n_embd) is normed in place (Gemma's
  // post-norms on a sub-block's output before the residual add).
  void AddNormedRows(float* y, const float* w, int64_t n, float* x);
  // logits (n_rows, n_vocab): vocabulary rows [row_begin, row_end) of the
  // classifier, soft-capped when the model says (forward.cpp).
  void ClassifierRows(const float* xn, const BlockQ8Act* xq, int64_t n_rows, float* logits, int64_t row_begin,
                      int64_t row_end) const;
  struct MatJob {
    const WeightView* w;
    float* y;         // (n, w->rows), leading dimension w->rows
    bool accumulate;  // y += x·Wᵀ
  };
  void MatMulJobs(const MatJob* jobs, int n_jobs, const float* x, int64_t n);
  // k_->matmul(a), or for an Encode step the embedding GEMM (encoder_matmul.h).
  void MatMul(const MatMulArgs& a) const;
  // x (n, k) -> xq_ when any of `ws` is block-quantized; the xq for MatMulArgs.
  const BlockQ8Act* QuantizeInput(const WeightView* const* ws, int n_ws, const float* x, int64_t n, int64_t k);
  // The x for MatMulArgs: x (n, k) itself, or its copy in ws_.xr rounded to
  // F16 / BF16 when every one of `ws` is F16 / BF16 (act_rounding.h).
  const float* RoundDenseInput(const WeightView* const* ws, int n_ws, const float* x, int64_t n, int64_t k);
  // hb = act(xn·gateᵀ) * (xn·upᵀ): (n, gate.rows), leading dimension gate.rows.
  void FeedForwardUp(const WeightView& gate, const WeightView& up, const float* xn, int64_t n);
  // moe.cpp: x += Σ_chosen w_e · down_e(act(xn·gate_eᵀ) * xn·up_eᵀ) for a
  // Mixture-of-Experts layer; tokens grouped by expert.
  void MoeFeedForward(int layer, const float* xn, int64_t n, float* x);
  // gpt-oss's expert e over the c rows gathered in moe_x: hb = its clamped
  // SwiGLU of the biased gate and up projections.
  void BiasedExpertUp(int layer, int64_t e, int64_t c);
  void RopeAndStoreKv(int layer, const Batch& batch, int64_t n);
  // One position's K (transposed: a column of its tile) or V (a row) into
  // the pool's element type.
  void StoreKvColumn(uint8_t* tile, int64_t slot, const float* k) const;
  void StoreKvRow(uint8_t* tile, int64_t slot, const float* v) const;
  void Attention(int layer, const Batch& batch, int64_t n);
  // decoder_embed.cpp: y (n, w.rows) = x (n, w.cols) · wᵀ, rows split over
  // the threads; each row's arithmetic independent of n and the split.
  void Project(const WeightView& w, const float* x, int64_t n, float* y);
  bool Parallel(int64_t macs) const;

  std::shared_ptr<Shared> shared_;  // the lanes hold the same one
  // The shared state's fields under the names the forward pass uses.
  const ModelConfig& cfg_;
  ModelWeights& w_;
  const Kernels* const k_;
  const Rope& rope_;
  const Rope& rope_local_;
  const int64_t& first_layer_;  // the first layer this backend runs (kv_.first_layer)
  const Norms& norms_;
  const KvLayout& kv_;
  const int32_t& n_blocks_;
  const int64_t& capacity_;
  uint8_t* const pool_base_;  // the KV pool

  ThreadPool pool_;  // n_threads for a backend, 1 for a lane
  Workspace ws_;
  // This step's residual stream entering first_layer_, (n_tok, n_embd), when
  // it comes from another backend (ForwardFromHidden); nullptr: embed the tokens.
  const float* hidden_in_ = nullptr;
  // Where Forward writes the final-normed rows (logit_rows, n_embd) instead
  // of logits (Encode); nullptr: logits. Such a step runs as one shared pass.
  float* hidden_out_ = nullptr;

  // ---- the backend's own (not a lane's)
  // Single-threaded backends over the same Shared, one per thread
  // (SplitBySequences); made on first use.
  std::vector<std::unique_ptr<CpuBackend>> lanes_;
  // One lane's part of the current step (lanes.cpp): its sub-batch and,
  // once its layers are done (ready), its normed classifier rows and how far
  // its chunks have been taken. Kept across steps, so a step allocates
  // nothing once the vectors have grown.
  struct LaneStep {
    std::vector<BatchSeq> seqs;
    std::vector<int32_t> rows;
    Batch batch;
    float* logits = nullptr;
    Status st;
    const float* xn = nullptr;       // (n_rows, n_embd)
    const BlockQ8Act* xq = nullptr;  // xn quantized, when the classifier is
    int64_t n_rows = 0;
    std::atomic<bool> ready{false};
    std::atomic<int64_t> next_chunk{0};
  };
  std::vector<LaneStep> lane_steps_;  // (n_threads), with lanes_
  std::vector<int64_t> lane_cut_;     // (n_threads + 1) first sequence of each lane
  int32_t n_swap_slots_ = 0;
  LargeArray<uint8_t> swap_;   // (n_swap_slots, block_bytes) host swap space
  std::vector<int64_t> new_chunks_;  // CommitKvBlocks' scratch
};

}  // namespace llm::cpu
