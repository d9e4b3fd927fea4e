// The CUDA backend: the same batched forward as the CPU reference (backend.h)
// for every family the CPU runs but the encoders (CudaSupportsModel), with cuBLAS GEMMs (BF16 in, F32 accumulation and output) and
// the kernels of kernels/.
//
// Files: cuda_backend.cpp (creation, weight upload, KV pool, validation,
// block copies and swaps), cuda_forward.cpp (the forward pass), cuda_moe.cpp
// (Mixture-of-Experts layers: their upload and their FFN), cuda_moe_host.cpp
// (MoE layers whose experts stay in host memory: moe_host.h), cuda_util.{h,cpp}
// (errors as Status, RAII buffers), cuda_kv_io.cpp (KV blocks in and out
// for the KV stream format and tiers), cuda_kv_host.{h,cpp} (the host KV
// tier's page-locked arena).
//
// Precision: weights and the KV cache are BF16; the residual stream, GEMM
// outputs, norms, softmax and logits are F32. Activations entering a GEMM
// (normed rows, attention output, silu(gate)*up) are rounded to BF16.
//
// CUDA graphs (cuda_graphs.cpp): a decode step (every sequence one new
// token) is padded to a batch-size bucket and replayed from a graph captured
// the first time that bucket ran. Every kernel of the step reads its varying
// inputs (tokens, positions, sequence descriptors, block tables, logit rows)
// from one fixed device buffer (graph_meta_dev_), and the decode attention
// splits each sequence's keys on the device (dynamic_split), so the captured
// launches stay valid as sequences grow. Padding sequences write their K/V
// into a scratch block past the pool the engine sees.
//
// Environment (read at creation through util/env.h):
//   LLM_CUDA_GRAPHS=0        no graph capture: every step launches eagerly
//   LLM_CUDA_DEBUG=1         synchronise after every kernel and name the one that failed (implies no graphs)
//   LLM_CUDA_ATTENTION=decode  run every query through the decode kernel (no tensor-core prefill)
#pragma once

#include <cublas_v2.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "attention_prefill.cuh"
#include "backend/backend.h"
#include "backend/cpu/kernels.h"  // BlockQ8Act: the host way of host-resident experts
#include "backend/cuda/cuda_util.h"
#include "backend/cuda/cuda_weights.h"
#include "backend/cuda/moe_host.h"
#include "backend/moe_affinity.h"
#include "backend/validate.h"
#include "common.cuh"
#include "sample/sampler.h"
#include "sampling.cuh"

namespace llm::cuda {

// One logits row's sampling on the device (CudaBackend::ForwardSample).
struct DeviceSampling {
  SamplingParams params;              // validated (ValidateSamplingParams)
  std::span<const int32_t> history;   // prompt + generated so far
  uint64_t step = 0;                  // RNG counter, e.g. tokens generated so far
};

class CudaBackend final : public Backend {
 public:
  static StatusOr<std::unique_ptr<Backend>> Create(const ModelConfig& config, const ModelWeights& weights,
                                                   KvCacheSpec* kv, const CudaBackendOptions& options);
  // What Create with these arguments allocates on its device before the KV
  // pool, and one block of that pool (cuda_footprint.cpp; EstimateCudaFootprint
  // in backend.h says what for).
  static StatusOr<CudaFootprint> Footprint(const ModelConfig& config, const ModelWeights& weights,
                                           const KvCacheSpec& kv, const CudaBackendOptions& options);
  ~CudaBackend() override;

  int32_t kind() const override { return LLM_BACKEND_CUDA; }
  Status Forward(const Batch& batch, float* logits) override;
  // A backend with first_layer > 0: the step from the residual stream
  // entering first_layer, hidden (n_tok, n_embd) F32 on the host.
  Status ForwardFromHidden(const Batch& batch, const float* hidden, float* logits) override;
  Status CopyKvBlock(int32_t src, int32_t dst) override;
  int64_t kv_block_bytes() const override { return kv_.block_bytes(); }
  // The device pool is allocated whole at creation (BF16).
  BackendMemory memory() const override {
    BackendMemory m;
    m.kv_pool = m.kv_committed = kv_block_bytes() * (static_cast<int64_t>(n_blocks_) + 1);
    m.weights = weight_bytes_;
    return m;
  }
  std::vector<DeviceMemory> device_memory() const override;
  MoeOffloadStats moe_offload() const override { return moe_stats_; }
  Status ReserveSwapSpace(int32_t n_slots) override;
  Status SwapOutKvBlocks(std::span<const KvSwap> moves) override;
  Status SwapInKvBlocks(std::span<const KvSwap> moves) override;

  // KV blocks in the wire layout (backend/kv_wire.h): BF16 tiles, which is
  // the pool's own layout, so a block is one copy (cuda_kv_io.cpp). Empty
  // for a partial backend (the stream needs every layer).
  KvWireLayout kv_wire_layout() const override;
  Status ReadKvBlock(int32_t block, std::span<uint8_t> out) override;
  Status WriteKvBlock(int32_t block, std::span<const uint8_t> in) override;
  // Page-locked, copies on a copy stream (cuda_kv_host.h).
  StatusOr<std::unique_ptr<KvHostArena>> CreateKvHostArena(int32_t n_slots) override;

  // Forward, then one token drawn per logit row on the device, so the
  // (n_logits, n_vocab) logits never travel to the host. sampling[i] belongs
  // to batch.logit_rows[i] (same length). The chain is the host Sampler's
  // (sample/sampler.h): penalties, then argmax when greedy, else top-k,
  // softmax(logits / T), top-p, min-p, draw; the surviving tokens and their
  // probabilities are the host's up to float rounding at a cut-off. The draw
  // is a counter-based function of (params.seed, step), not the host
  // Sampler's sequential stream: deterministic per request whatever its
  // batch position, but not the same tokens as host sampling.
  // tokens: (n_logits) out. logprobs: (n_logits) out or NULL: log p(token)
  // under the raw logits (TokenLogprob's definition).
  //
  // Not part of the Backend interface: the engine samples on the host, from
  // Forward's logits, because it needs them for what this does not do (prompt
  // logprobs, speculative verification, stop strings decided per token, and
  // the sampling options beside the sampler). This is the device half of a
  // decode-only fast path the engine may take later; test_cuda_backend
  // checks it against host sampling so it stays correct until then.
  Status ForwardSample(const Batch& batch, std::span<const DeviceSampling> sampling, int32_t* tokens,
                       float* logprobs);

  // Device memory holding the weights (matrices in their file's block
  // formats or BF16, norms F32); the dequantization scratch is not counted.
  int64_t weight_bytes() const { return weight_bytes_; }
  // Weight bytes one batch-1 decode step reads: every layer's matrices and
  // norms, the final norm, the classifier, one embedding row (the whole
  // table when it is the tied classifier). cuda-bench's bandwidth figure.
  int64_t decode_weight_bytes() const { return decode_weight_bytes_; }
  // True when every projection matrix stays block-quantized on the device.
  bool weights_quantized() const;
  // Runs only layers [0, opt_.n_layers) and hands out hidden states
  // (CudaBackendOptions::n_layers).
  bool partial() const { return opt_.n_layers < cfg_.n_layer; }
  // Starts at a later layer from hidden states (CudaBackendOptions::first_layer).
  bool from_hidden() const { return opt_.first_layer > 0; }
  int32_t device() const { return opt_.device; }

  // Counters for tests and benchmarks: steps replayed from a graph, graphs
  // captured, captures that failed (those buckets run eagerly).
  struct GraphStats {
    int64_t replays = 0, captures = 0, capture_failures = 0, eager_steps = 0;
  };
  const GraphStats& graph_stats() const { return graph_stats_; }

 private:
  CudaBackend(const ModelConfig& config, const CudaBackendOptions& options) : cfg_(config), opt_(options) {}

  Status Init(const ModelWeights& weights, KvCacheSpec* kv);
  Status UploadWeights(const ModelWeights& w);
  // ---- Mixture of Experts (cuda_moe.cpp)
  // A MoE layer's router (F32), experts and shared expert; the shapes checked.
  struct Layer;
  Status UploadMoeLayer(const LayerWeights& L, const std::string& p, bool experts_on_device, Layer* d);
  // delta (n_tok, n_embd) = the layer's MoE FFN of the normed rows xn_ (the
  // router renorms x_ itself, in F32).
  Status MoeFeedForward(int layer, int32_t n_tok);
  // Its parts: the router on the device (picks in moe_pick_), the routed
  // experts' products through the kernels' views w_gu / w_d (into moe_y_),
  // the shared expert and the combine into delta_ (k picks per token in
  // moe_y_).
  Status MoeRoute(int layer, int32_t n_tok);
  Status MoeExperts(int layer, int32_t n_tok, const ExpertMatrix& w_gu, const ExpertMatrix& w_d);
  // host_summed: moe_y_ holds one row per token, its experts' Σ w·y (biases in).
  Status MoeSharedAndCombine(int layer, int32_t n_tok, int32_t k, bool host_summed = false);
  // ---- experts in host memory (cuda_moe_host.cpp, moe_host.h)
  // Loads the host layers' experts and sizes the device expert cache.
  Status InitHostExperts(const ModelWeights& w);
  // MoE layers [0, this) keep their experts in host memory (n_cpu_moe).
  int32_t HostMoeLayers() const;
  // After MoeRoute: the layer's experts run on the CPU, or are copied into
  // the cache and run on the device (HostMoeCost's choice).
  Status MoeHostFeedForward(int layer, int32_t n_tok);
  Status MoeHostCopy(int layer, int32_t n_tok, const std::vector<int32_t>& experts);
  Status MoeHostCpu(int layer, int32_t n_tok);
  // Prefetch (moe_prefetch): affinity bookkeeping of layer l's picks
  // (moe_pick_host_) before its way runs, and after it the copies of layer
  // l+1's predicted experts on copy_stream_ (keep: layer l's slots).
  Status MoeHostObserve(int layer, int32_t n_tok);
  Status MoeHostPrefetch(int layer, int32_t n_tok, const std::vector<int32_t>& keep);
  // Gate/up and hidden widths per token the FFN buffers hold (dense, the
  // routed experts' k rows, the shared expert: the largest).
  int64_t FfnWidth() const { return FfnWidthOf(cfg_); }
  static int64_t FfnWidthOf(const ModelConfig& c);
  // The activation buffers Reserve holds for n_tok tokens and n_out logit
  // rows, bytes each (Footprint counts them the same way).
  struct ActivationSizes {
    size_t x = 0, delta = 0, qkv = 0, q = 0, att = 0, gu = 0, h = 0;
    size_t moe_pick = 0, moe_order = 0, moe_items = 0, moe_y = 0, moe_shared = 0;
    size_t cos_sin = 0, cos_sin_local = 0, logits = 0, xn = 0;
    size_t total() const;
  };
  static ActivationSizes SizeActivations(const ModelConfig& c, int64_t n_tok, int64_t n_out);
  // The pool's element type (kernels/common.cuh) for llm_ctx_params.kv_type.
  static StatusOr<int32_t> KvElemOf(int32_t kv_type);
  Status AllocateKvPool(KvCacheSpec* kv);

  // The shared batch check (backend/validate.h), then this step's metadata
  // (meta_, offsets below) on the host. need_logits: n_out > 0 requires a
  // host logits pointer.
  Status Validate(const Batch& batch, const float* logits, bool need_logits = true);
  Status LayOutMetadata(const Batch& batch, const BatchExtent& extent);
  // Grows the activation buffers to n_tok tokens and n_out logit rows and
  // the metadata buffers to n_meta ints; no-op when large enough.
  Status Reserve(int64_t n_tok, int64_t n_out, int64_t n_meta);
  // y (n, rows) F32 = x (n, cols) bf16 · W (rows, cols) bf16 ᵀ; y's row
  // stride ldy (0: rows).
  Status Gemm(const bf16* w, int64_t rows, int64_t cols, const bf16* x, int64_t n, float* y, const char* what,
              int64_t ldy = 0);
  // y (n, w.rows) F32 = x (n, w.cols) bf16 · Wᵀ for any weight: BF16 through
  // Gemm; quantized through the GEMV kernel for n <= kQuantGemvMaxRows
  // (decode), else dequantized a row chunk at a time into dequant_scratch_
  // and multiplied by Gemm (prefill, large decode batches).
  Status MatMul(const DeviceMatrix& w, const bf16* x, int64_t n, float* y, const char* what, int layer = -1);
  // The launch's error, and with LLM_CUDA_DEBUG the kernel's.
  Status Launched(cudaError_t e, const char* what, int layer = -1);

  struct Offsets {
    int64_t tokens, tok_seq, tok_pos, logit_rows, dec_items, seqs, work, tables, total;
  };
  // One step as the kernels see it: where its metadata lies on the device
  // and the shapes its launches take. Eager steps point into meta_dev_;
  // graph steps into graph_meta_dev_ with bucket-sized shapes.
  struct StepView {
    const int32_t* meta = nullptr;  // device
    Offsets off{};
    int32_t n_tok = 0, n_out = 0, n_dec = 0, n_work = 0;
    int32_t dec_splits = 1, dec_keys_per_split = 0, dec_dynamic = 0;
  };
  // The swap copies of `moves`, pool -> host (to_host) or host -> pool,
  // queued on stream_; runs of consecutive blocks and slots go as one copy.
  Status SwapKvBlocks(std::span<const KvSwap> moves, bool to_host);

  // Embedding through the classifier GEMM into logits_ (n_out rows); no host
  // copy, no synchronisation, no allocation: what a graph captures. With
  // n_out == 0 it stops after the last layer's K/V store.
  Status RunStep(const StepView& v);
  Status Attention(int layer, const StepView& v);
  PagedKv LayerKv(int layer);  // layer's view of the pool
  // The eager path: metadata upload (+ the hidden states entering
  // first_layer, when from_hidden()) + RunStep on meta_dev_.
  Status RunEager(const float* hidden = nullptr);

  // ---- CUDA graphs (cuda_graphs.cpp)
  Status InitGraphs();
  // Runs the validated decode step through its bucket's graph (capturing it
  // the first time). *handled false: the step is not one for graphs (or its
  // bucket's capture failed) and the caller runs it eagerly; nothing ran.
  Status RunDecodeGraph(bool* handled);
  Status CaptureBucket(size_t bucket, const StepView& v);
  void ClearGraphs();  // after any buffer a graph points into is reallocated
  void DestroyGraphs();
  // Returns st; on an error first waits for stream_, so no queued copy still
  // reads a pinned staging buffer the next step rewrites (cuda_forward.cpp).
  Status SettleOnError(Status st);
  // Logits rows 0..n_out_ of logits_ to the host, then wait for the stream.
  // A partial backend: the residual stream x_ + delta_ of all n_tok_ rows
  // (n_tok, n_embd) instead.
  Status FinishLogits(float* logits);
  // Device sampling of logits_ rows 0..n (sampling.cu), then wait.
  Status SampleOnDevice(std::span<const DeviceSampling> sampling, int32_t* tokens, float* logprobs);

  // Query-token slots (tokens x splits) of the decode attention workspace.
  static constexpr int32_t kDecodeSlots = 2048;
  // Bytes of cuBLAS workspace (set explicitly so that graph capture needs no
  // allocation inside cuBLAS).
  static constexpr size_t kCublasWorkspace = 32u << 20;

  ModelConfig cfg_;
  CudaBackendOptions opt_;
  bool debug_ = false;
  bool force_decode_ = false;
  int n_sm_ = 1;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  DeviceBuffer cublas_ws_;

  // ---- weights: block-quantized in the file's bytes, else BF16 (cuda_weights.h); norms F32
  struct Layer {
    DeviceBuffer attn_norm;  // (n_embd) F32
    DeviceMatrix wqkv;       // (q_dim + 2 kv_dim, n_embd)  [Wq; Wk; Wv]
    DeviceMatrix wo;         // (n_embd, q_dim)
    DeviceBuffer ffn_norm;   // (n_embd) F32
    DeviceMatrix wgu;        // (2 n_ff, n_embd)            [W_gate; W_up]
    DeviceMatrix wd;         // (n_embd, n_ff)
    // Family extras (empty when the config does not use them):
    DeviceBuffer bias;       // (q_dim + 2 kv_dim) F32  [bq; bk; bv]           qkv_bias (Qwen2)
    DeviceBuffer q_norm;     // (head_dim) F32                                 qk_norm (Gemma 3, Qwen3)
    DeviceBuffer k_norm;     // (head_dim) F32
    DeviceBuffer post_attn;  // (n_embd) F32                                   post_norms (Gemma 2/3)
    DeviceBuffer post_ffn;   // (n_embd) F32
    DeviceBuffer sinks;      // (n_head) F32 attention-sink logits                attn_sinks (gpt-oss)
    DeviceBuffer bo;         // (n_embd) F32 attn_output.bias                      out_bias (gpt-oss)
    // Mixture of Experts (n_expert > 0; wgu and wd empty):
    DeviceBuffer router;        // (n_expert, n_embd) F32
    // expert_bias (gpt-oss): the router's (n_expert), the experts' gate and
    // up (n_expert, n_ff_exp) and down (n_expert, n_embd) biases, F32
    DeviceBuffer router_b, exp_bg, exp_bu, exp_bd;
    DeviceExperts exp_gate, exp_up, exp_down;  // n_expert x (n_ff_exp, n_embd), (n_embd, n_ff_exp)
    ExpertMatrix exp_gu{}, exp_d{};            // the kernels' views: [gate; up] and down
    DeviceBuffer shexp_gate_inp;  // (n_embd) F32                              qwen2moe's shared expert
    DeviceMatrix shexp_gu;        // (2 n_ff_shexp, n_embd)
    DeviceMatrix shexp_d;         // (n_embd, n_ff_shexp)
    int32_t host = -1;            // index into host_experts_ when its experts live in host memory
  };
  std::vector<Layer> layers_;
  DeviceMatrix tok_embd_;    // (n_vocab, n_embd)
  DeviceMatrix output_;      // (n_vocab, n_embd); empty when tied to tok_embd_
  DeviceBuffer out_norm_;    // (n_embd) F32
  DeviceBuffer inv_freq_;    // (rope_dim / 2) F64
  DeviceBuffer inv_freq_local_;  // (rope_dim / 2) F64: sliding-window layers' (rope_theta_swa, no scaling)
  double rope_mag_ = 1.0, rope_mag_local_ = 1.0;  // YaRN's cos/sin magnitude (model/rope_freq.h)
  const DeviceMatrix* output_w_ = nullptr;
  int64_t weight_bytes_ = 0, decode_weight_bytes_ = 0;
  // Quantized weights dequantized here, a row chunk at a time, for products
  // of more than kQuantGemvMaxRows rows (MatMul).
  static constexpr int64_t kDequantScratchElems = int64_t{32} << 20;  // 64 MiB of bf16
  DeviceBuffer dequant_scratch_;

  // ---- paged KV pool (layout: kernels/common.cuh)
  KvPoolLayout kv_;
  int32_t n_blocks_ = 0;     // blocks the engine may use; the pool holds one more
  int32_t scratch_block_ = 0;  // == n_blocks_: where graph padding writes its K/V
  int64_t capacity_ = 0;     // n_blocks * block_size positions
  DeviceBuffer kv_pool_;
  // Host swap space (preemption by swapping): page-locked, so the copies
  // are true DMA transfers queued on stream_ like every other step.
  int32_t n_swap_slots_ = 0;
  PinnedBuffer swap_host_;   // (n_swap_slots, block_bytes) pool blocks

  // ---- activations, grown to the largest batch seen
  int64_t cap_tok_ = 0;
  int64_t cap_out_ = 0;
  DeviceBuffer x_;        // (n_tok, n_embd) F32        residual stream
  DeviceBuffer delta_;    // (n_tok, n_embd) F32        sub-block output, added by the next norm
  DeviceBuffer xn_;       // (max(n_tok, n_out), n_embd) bf16  normed rows
  DeviceBuffer qkv_;      // (n_tok, q_dim + 2 kv_dim) F32
  DeviceBuffer q_;        // (n_tok, q_dim) bf16        rotated queries
  DeviceBuffer att_;      // (n_tok, q_dim) bf16        attention output
  DeviceBuffer gu_;       // (n_tok, 2 FfnWidth()) F32  gate | up
  DeviceBuffer h_;        // (n_tok, FfnWidth()) bf16   silu(gate) * up
  // Mixture of Experts (n_expert > 0), k = n_expert_used:
  DeviceBuffer moe_pick_;   // (n_tok k) int32 experts, (n_tok k) F32 weights, (n_tok) F32 shared scale
  DeviceBuffer moe_order_;  // (n_tok k) int32 permuted row -> pick, (n_tok k) pick -> permuted row
  DeviceBuffer moe_items_;  // MoeWorkItem, the bound for the smallest tile
  DeviceBuffer moe_y_;      // (n_tok k, n_embd) F32  the experts' outputs, permuted rows
  DeviceBuffer moe_shared_; // (n_tok, n_embd) F32    the shared expert's output
  DeviceBuffer cos_sin_;  // (n_tok, rope_dim) F32
  DeviceBuffer cos_sin_local_;  // (n_tok, rope_dim) F32, sliding_window > 0 only
  DeviceBuffer logits_;   // (n_out, n_vocab) F32
  DeviceBuffer dec_ws_;   // decode attention split workspace (kDecodeSlots)

  // ---- per-step metadata: built in meta_ (host), one copy to meta_dev_
  std::vector<int32_t> meta_;
  std::vector<int32_t> tok_seq_;  // (n_tok) each token's sequence (the batch check's)
  PinnedBuffer meta_pinned_;
  DeviceBuffer meta_dev_;
  Offsets off_{};
  int32_t n_tok_ = 0, n_seqs_ = 0, n_out_ = 0, n_dec_ = 0, n_work_ = 0, max_dec_keys_ = 0, n_tables_ = 0;

  // ---- CUDA graphs: one per bucket, all reading graph_meta_dev_
  struct Graph {
    int32_t size = 0;                 // batch rows (sequences) of this bucket
    cudaGraphExec_t exec = nullptr;
    bool failed = false;              // capture failed once: eager from now on
  };
  bool graphs_on_ = false;
  std::vector<Graph> graphs_;         // ascending sizes
  int32_t graph_max_keys_ = 0;        // longest context a graph's decode attention is planned for
  int64_t graph_meta_ints_ = 0;
  PinnedBuffer graph_meta_pinned_;    // (graph_meta_ints_) host staging
  DeviceBuffer graph_meta_dev_;       // (graph_meta_ints_) what every graph reads
  GraphStats graph_stats_;

  // ---- device sampling (cuda_sampling.cpp): per-row parameters and penalty
  // lists, staged in reused buffers (grown, never shrunk)
  std::vector<SampleRowParams> samp_rows_;
  std::vector<int32_t> samp_pen_tok_, samp_pen_cnt_, samp_window_;
  PinnedBuffer samp_pinned_;
  DeviceBuffer samp_dev_;

  std::vector<float> delta_host_;  // (n_tok, n_embd) a partial backend's last sub-block output

  // ---- experts in host memory (n_cpu_moe): their layers, the device cache,
  // the cost model, and host staging of the CPU way
  std::vector<std::unique_ptr<HostExpertLayer>> host_experts_;
  std::vector<std::vector<float>> host_ffn_norm_;  // (n_embd) per host layer, F32
  // expert_bias: per host layer, the experts' gate, up (n_expert * n_ff_exp)
  // and down (n_expert * n_embd) biases, F32 (the CPU way's)
  struct HostExpertBias {
    std::vector<float> gate, up, down;
  };
  std::vector<HostExpertBias> host_exp_bias_;
  ExpertCache expert_cache_;
  HostMoeCost moe_cost_;
  MoeOffloadStats moe_stats_;
  std::vector<int32_t> moe_pick_host_;   // (n_tok k) experts
  std::vector<float> moe_weight_host_;   // (n_tok k) weights
  std::vector<float> moe_x_host_;        // (n_tok, n_embd) residual rows, then normed
  std::vector<float> moe_out_host_;      // (n_tok, n_embd) Σ w · expert(xn)
  std::vector<float> moe_rows_x_, moe_rows_g_, moe_rows_u_, moe_rows_y_;  // one expert's gathered rows
  std::vector<cpu::BlockQ8Act> moe_rows_q_;  // their Q8 blocks, quantized experts
  ExpertAffinity affinity_;              // over host layers (they are [0, n))
  std::vector<int32_t> moe_prev_picks_;  // the previous host layer's picks this step
  int32_t moe_prev_layer_ = -1;
  std::vector<int32_t> moe_predicted_;   // experts predicted for moe_predicted_layer_
  std::vector<int32_t> moe_prefetched_;  // ... of them copied by the prefetch
  int32_t moe_predicted_layer_ = -1;
  cudaStream_t copy_stream_ = nullptr;   // prefetch copies
  cudaEvent_t prefetch_done_ = nullptr;
  bool prefetch_pending_ = false;
  std::vector<int32_t> moe_ones_slots_;  // (n_tok) slots 0..n-1, then (n_tok) weights 1.0f as bits
};

}  // namespace llm::cuda
