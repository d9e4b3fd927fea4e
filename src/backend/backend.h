// The backend interface: one batched Llama forward pass over a paged KV pool.
//
// Why a whole-forward interface rather than per-op calls: the CPU backend fuses
// loops across ops and the CUDA backend captures a step as one CUDA graph; a
// per-op virtual interface would cost a dispatch per op per layer, which on the
// small models this runtime embeds is more than the math itself.
//
// A step's batch mixes sequences freely: a prefill chunk of one sequence, a
// single decode token of another, k+1 verify tokens of a third. Tokens of one
// sequence are contiguous in the batch.
//
//   tokens:     [ a0 a1 a2 a3 | b0 | c0 c1 ]        n_tokens = 7
//   seqs:       {first=0,n=4,n_past=0} {first=4,n=1,n_past=37} {first=5,n=2,n_past=9}
//   logit_rows: [3, 4, 5, 6]   -> logits (4, n_vocab), in this order
//
// Token i of a sequence sits at position n_past + i; its K/V go to block
// block_table[(n_past+i) / block_size], slot (n_past+i) % block_size, and it
// attends to positions 0 .. n_past+i of its own sequence.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/kv_wire.h"
#include "core/defaults.h"
#include "llm.h"
#include "model/config.h"
#include "model/weights.h"
#include "util/status.h"

namespace llm {

class KvHostArena;  // backend/kv_host_arena.h

struct KvCacheSpec {
  int32_t block_size = defaults::kKvBlockSize;  // tokens per block
  int32_t n_blocks = 0;     // blocks in the pool (per layer, K and V each)
  int32_t n_ctx = 0;        // a sequence's longest context; LongRoPE picks its factors by it
                            // (0: the model's training context)
  // LLM_KV_*: the pool's (K's) element type: on the CPU F32, F16, Q8_0,
  // Q4_0 or AUTO (= F16), on CUDA F16, Q8_0, Q4_0, FP8 E4M3 or AUTO (= BF16). The backend-level default
  // stays F32, the CPU reference's exact format (the CUDA backend takes it as
  // AUTO; contexts refuse an explicit F32 there); a context passes
  // llm_ctx_params.kv_type.
  int32_t kv_type = LLM_KV_F32;
  // V's type when it differs (llm_ctx_params.kv_type_v; both backends store
  // each side in its own type); LLM_KV_AUTO (0) = as kv_type.
  int32_t kv_type_v = LLM_KV_AUTO;
};

// V's LLM_KV_* type of a spec: kv_type_v, or kv_type where that is AUTO.
inline int32_t KvTypeV(const KvCacheSpec& kv) { return kv.kv_type_v != LLM_KV_AUTO ? kv.kv_type_v : kv.kv_type; }

// Host or device memory a backend holds, for llm_stats.
// Mixture-of-Experts layers whose experts live in host memory
// (CudaBackendOptions::n_cpu_moe), for llm_stats.moe_*.
struct MoeOffloadStats {
  int32_t host_layers = 0, cache_slots = 0;
  int64_t cache_bytes = 0, host_bytes = 0;
  int64_t cpu_steps = 0, copy_steps = 0, bytes_copied = 0, cache_hits = 0, cache_misses = 0, tokens = 0;
  int64_t prefetch_experts = 0, prefetch_used = 0, predicted_wanted = 0, predicted_right = 0;
};

struct BackendMemory {
  int64_t kv_committed = 0;  // KV pool bytes committed (touched) so far
  int64_t kv_pool = 0;       // the whole pool, committed or not
  int64_t weights = 0;       // weight bytes the backend reads (views and own copies)
  int64_t scratch = 0;       // activation buffers and the swap space
};

// One device's share of a backend (llm_stats' per-device figures): what this
// backend holds there. A CPU backend has none.
struct DeviceMemory {
  int32_t device = 0;        // CUDA ordinal
  int32_t first_layer = 0;   // the layers [first_layer, end_layer) it runs
  int32_t end_layer = 0;
  int64_t weights = 0;       // weight bytes on the device
  int64_t kv_pool = 0;       // KV pool bytes on the device
  int64_t used = 0;          // the device's memory in use now (everyone's)
  int64_t total = 0;         // the device's memory
};

// One KV block's move between the pool and the host swap space (preemption
// by swapping): pool block `block` <-> host swap slot `slot`.
struct KvSwap {
  int32_t block = 0;
  int32_t slot = 0;
};

struct BatchSeq {
  int32_t first = 0;                  // index of its first token in Batch::tokens
  int32_t n_tokens = 0;               // tokens of this sequence in this step (>= 1)
  int32_t n_past = 0;                 // tokens already in the KV cache
  std::span<const int32_t> block_table;  // physical block ids; must cover n_past + n_tokens
};

// Images in the prompt (engine/image_input.h): a token may come as an
// embedding row instead of an id, and a span of tokens may attend both ways.
//
//   tokens:    [ t0  t1  i0  i1  i2  t2 ]       i* = an image's soft tokens
//   embd:      [ -   -   r0  r1  r2  -  ]       rows of n_embd floats (null: use token_embd)
//   attn_end:  [ 1   2   5   5   5   6  ]       position + 1 = causal
//
// A row is the model's input as it is: no input scale applies to it (Gemma's
// sqrt(n_embd) multiplies token_embd rows only, as llama.cpp's graph does).
// Token i at position p attends to positions [window start, attn_end[i]):
// the image tokens above see each other both ways (Gemma 3), so every
// position below attn_end[i] must be in the cache or in this batch.
struct Batch {
  std::span<const llm_token> tokens;     // (n_tokens) ids; ignored where embd[i] is set
  std::span<const BatchSeq> seqs;        // (n_seqs)
  std::span<const int32_t> logit_rows;   // (n_logits) token indices whose logits are wanted
  std::span<const float* const> embd = {};    // (n_tokens) or empty: token i's input row (n_embd), or null
  std::span<const int32_t> attn_end = {};     // (n_tokens) or empty (all causal): end of token i's keys
  // M-RoPE models (ModelConfig::mrope) only: (n_tokens, 3) the RoPE
  // positions (t, h, w) of each token, which differ from its slot
  // (n_past + i) after an image (engine/mrope_positions.h); empty: every
  // token's (p, p, p) at its slot. A backend without M-RoPE refuses it.
  std::span<const int32_t> mrope_pos = {};
};

// One sequence of an encoder step (Backend::Encode): the whole sequence at
// once (its attention sees every token of it, so it cannot be chunked), and
// where its pooled output goes: PooledSize(config, pooling, n) floats
// (backend/pooling.h).
struct EncodeSeq {
  std::span<const llm_token> tokens;  // (n) ids, 1 <= n <= n_ctx_train
  Pooling pooling = Pooling::kMean;
  float* out = nullptr;
  // A decoder embedding model's (ModelConfig::MakesEmbeddings without
  // is_encoder: Qwen3-Embedding): KV blocks of the pool covering its n
  // tokens, which the step writes and reads as a prefill would (the caller
  // allocates and frees them); empty for an encoder.
  std::span<const int32_t> block_table;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual int32_t kind() const = 0;  // LLM_BACKEND_CPU / LLM_BACKEND_CUDA

  // Runs the model on `batch`: stores every token's K/V in its slot of the
  // pool and writes logits (batch.logit_rows.size(), n_vocab) to `logits`
  // (host memory, row-major). Validates the batch (token ids, block ids,
  // table coverage) and returns INVALID_ARGUMENT rather than touching memory
  // out of range.
  virtual Status Forward(const Batch& batch, float* logits) = 0;

  // Copies one KV block (every layer, K and V) onto another: copy-on-write.
  virtual Status CopyKvBlock(int32_t src, int32_t dst) = 0;

  // ---- host swap space (preemption by swapping, kv_cache_manager.h)
  //
  //   pool (device)                     swap space (host)
  //   [ b0 | b1 | b2 | ... ]  SwapOut   [ s0 | s1 | ... | s(n_slots-1) ]
  //           block  ------------------>  slot
  //           block' <------------------  slot      SwapIn
  //
  // A slot holds one whole block (every layer, K and V) in the pool's own
  // format; a block may come back into a different pool block than it left.
  // Copies are ordered with Forward and CopyKvBlock as the calls are made
  // (the CUDA backend queues them on its stream), so a block swapped out
  // may be reused by the next call at once.

  // Bytes of one KV block, all layers' K and V (one swap slot).
  virtual int64_t kv_block_bytes() const = 0;
  // What the backend holds now. Called on the thread that runs Forward.
  virtual BackendMemory memory() const { return BackendMemory{}; }
  // Host-resident experts' counters (the CUDA backend; zero elsewhere).
  virtual MoeOffloadStats moe_offload() const { return MoeOffloadStats{}; }
  // Allocates a swap space of n_slots blocks (page-locked on CUDA), replacing
  // any earlier one; 0 frees it. OUT_OF_MEMORY when the host lacks it.
  virtual Status ReserveSwapSpace(int32_t n_slots) = 0;
  // Copies each moves[i].block into moves[i].slot / each slot back into its
  // block. INVALID_ARGUMENT, copying nothing, for an id out of range.
  virtual Status SwapOutKvBlocks(std::span<const KvSwap> moves) = 0;
  virtual Status SwapInKvBlocks(std::span<const KvSwap> moves) = 0;

  // ---- KV blocks in the wire layout (kv_wire.h): the KV stream format
  // (src/kvstate/, docs/KV_FORMAT.md) reads and writes pool blocks through
  // these. The layout is this backend's pool's, element type included
  // (BF16 on CUDA); n_layer == 0 when the backend cannot (the default;
  // partial offload). Called on the thread that runs Forward, or while it
  // is paused (Engine::RunPaused).
  virtual KvWireLayout kv_wire_layout() const { return KvWireLayout{}; }
  // Copies block `block`'s K and V into out (kv_wire_layout().block_bytes()
  // bytes) / from in into the block. INVALID_ARGUMENT for a block id out of
  // range or a wrong size; UNSUPPORTED where kv_wire_layout() is empty.
  virtual Status ReadKvBlock(int32_t block, std::span<uint8_t> out) {
    (void)block, (void)out;
    return Unsupported("this backend cannot export its KV cache yet");
  }
  virtual Status WriteKvBlock(int32_t block, std::span<const uint8_t> in) {
    (void)block, (void)in;
    return Unsupported("this backend cannot import a KV cache yet");
  }
  // Host memory for n_slots blocks of the host KV tier, and the copies
  // between it and the pool (backend/kv_host_arena.h). The default is plain
  // memory over ReadKvBlock / WriteKvBlock (kv_host_arena.cpp); CUDA's is
  // page-locked, its copies asynchronous. UNSUPPORTED where
  // kv_wire_layout() is empty; OUT_OF_MEMORY when the host lacks it.
  virtual StatusOr<std::unique_ptr<KvHostArena>> CreateKvHostArena(int32_t n_slots);

  // Embedding models (ModelConfig::MakesEmbeddings: encoders, and decoders
  // whose file names a pooling, run causally over their block tables):
  // each sequence's hidden states (a decoder's after its final norm),
  // pooled as it asks, into its `out`. A sequence's result depends on its
  // own tokens only (bitwise: not on the other sequences of the call, nor
  // the thread count). UNSUPPORTED on a backend or model without encoders;
  // INVALID_ARGUMENT for an id out of range or a sequence longer than the
  // model's positions.
  virtual Status Encode(std::span<const EncodeSeq> seqs) {
    (void)seqs;
    return Unsupported("this backend does not run encoder (embedding) models");
  }

  // Per device: what this backend holds on each CUDA device it uses, in
  // layer order (empty for a CPU backend).
  virtual std::vector<DeviceMemory> device_memory() const { return {}; }

  // Partial offload (split_backend.h): Forward for a backend made for the
  // layers from first_layer > 0 on (CreateCpuBackend's, or a CUDA backend's
  // with CudaBackendOptions::first_layer), which reads the residual stream
  // entering that layer, hidden (n_tokens, n_embd), instead of embedding
  // batch.tokens; a backend that does not end the model writes the stream
  // leaving its last layer to `logits` (n_tokens, n_embd) instead.
  // UNSUPPORTED where the backend has no such mode.
  virtual Status ForwardFromHidden(const Batch& batch, const float* hidden, float* logits) {
    (void)batch, (void)hidden, (void)logits;
    return Unsupported("this backend does not start from hidden states");
  }
};

// The reference backend. `weights` must outlive the backend. n_threads <= 0
// means one per hardware core. The KV pool (kv.n_blocks blocks of
// CpuKvBlockBytes each) is reserved here as address space and committed as
// blocks are first written, in 2 MiB steps touched by the backend's threads
// before the step that needs them (so no layer of a step stops on a page
// fault, and an idle context with a long window holds little).
// kv.kv_type (K, and V unless kv.kv_type_v names another): F32, F16, Q8_0,
// Q4_0 or AUTO (= F16); INVALID_ARGUMENT otherwise.
// first_layer > 0 (partial offload, split_backend.h): the backend runs only
// layers [first_layer, n_layer) + the classifier, from the hidden states
// ForwardFromHidden is given; its pool and weight bytes hold those layers only.
StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(const ModelConfig& config,
                                                    const ModelWeights& weights,
                                                    const KvCacheSpec& kv, int n_threads,
                                                    int32_t first_layer = 0);
// Host memory of one CPU KV block of kv_type (LLM_KV_*; AUTO = F16): the K
// and V of layers [first_layer, n_layer); V in kv_type_v unless that is 0.
int64_t CpuKvBlockBytes(const ModelConfig& config, int32_t block_size, int32_t kv_type, int32_t first_layer = 0,
                        int32_t kv_type_v = LLM_KV_AUTO);

// ---------------------------------------------------------------- CUDA
//
// Declared in every build; without CUDA support (LLM_CUDA=OFF or no
// toolkit) CudaDeviceCount() is 0 and CreateCudaBackend returns UNSUPPORTED.

struct CudaBackendOptions {
  int32_t device = 0;                // CUDA device ordinal
  // Share of the device's total memory this backend may use for weights,
  // activations and the KV pool together (vLLM's gpu_memory_utilization).
  float gpu_memory_fraction = defaults::kGpuMemoryFraction;
  // true: kv->n_blocks is an upper bound and the pool gets as many blocks as
  // fit in gpu_memory_fraction (at least one sequence's worth is not
  // guaranteed: see min_kv_blocks); false: exactly kv->n_blocks or
  // OUT_OF_MEMORY.
  bool fit_kv_blocks = false;
  int32_t min_kv_blocks = 1;         // fewer than this fit: OUT_OF_MEMORY
  // Activation buffers are sized for this many tokens per step up front (a
  // larger batch grows them, outside any graph capture).
  int32_t max_batch_tokens = defaults::kMaxBatchTokens;
  // Decode steps (every sequence of the batch has exactly one new token) are
  // captured as CUDA graphs, one per batch-size bucket 1, 2, 4, ... up to
  // min(max_seqs, max_batch_tokens), the batch padded up to its bucket, and
  // replayed. false, or LLM_CUDA_GRAPHS=0 in the environment, launches every
  // step eagerly. A capture that fails falls back to eager launches.
  bool cuda_graphs = true;
  int32_t max_seqs = defaults::kMaxSeqs;
  // Longest sequence (prompt + output) the engine will run; sizes the block
  // tables the graphs read. 0 = min(KV pool, 16384) positions. A step whose
  // tables do not fit runs eagerly.
  int32_t max_seq_len = 0;
  // Partial offload (split_backend.h): the backend runs the embedding and
  // layers [0, n_layers) only, and Forward writes the residual stream
  // leaving layer n_layers-1, (n_tokens, n_embd) F32, where the logits would
  // go. Only those layers' weights are uploaded and the KV pool holds only
  // them (so fit_kv_blocks counts only them). Such a backend runs every step
  // eagerly (no CUDA graphs: the step ends in a host copy of all n_tokens
  // rows, which the decode graphs, made for logit rows, do not capture).
  // <= 0 or >= n_layer: the whole model.
  int32_t n_layers = 0;
  // Layer split across devices (split_backend.h): > 0, the backend runs
  // layers [first_layer, n_layers) only, from the residual stream entering
  // first_layer that ForwardFromHidden hands it (no embedding; Forward is
  // refused), its pool holding those layers' KV. Such a backend runs every
  // step eagerly. Must be below n_layers.
  int32_t first_layer = 0;
  // Mixture of Experts: the experts of the first n_cpu_moe MoE layers (-1:
  // all) stay in host memory (cuda/moe_host.h), run per step on the CPU or
  // copied into a device expert cache of moe_cache_bytes (0: one layer's
  // experts); moe_host_policy LLM_MOE_HOST_*. Such a backend runs eagerly
  // (a step reads the routing on the host mid-layer).
  int32_t n_cpu_moe = 0;
  int32_t moe_host_policy = 0;
  int64_t moe_cache_bytes = 0;
  // While host layer l runs, copy the experts host layer l+1 is predicted to
  // use (backend/moe_affinity.h) into the cache on a second stream.
  bool moe_prefetch = true;
};

// Usable CUDA devices (0 without CUDA support, without a driver, or on error).
int CudaDeviceCount();
// A device's free memory now, bytes (0 on error or without CUDA support).
int64_t CudaDeviceFreeBytes(int device);
// A device's total memory, bytes (0 on error or without CUDA support).
int64_t CudaDeviceTotalBytes(int device);

// Whether the CUDA backend runs this model: OK, or UNSUPPORTED saying which
// feature it lacks (today: Mixture-of-Experts layers). Every build answers,
// so the context builder can fall back to the CPU before loading anything
// onto a device; CreateCudaBackend refuses such a model with the same message.
Status CudaSupportsModel(const ModelConfig& config);

// A CUDA backend's device memory, known before it is made: what
// CreateCudaBackend(config, weights, kv, options) allocates on
// options.device before its KV pool (weights as the backend stores them,
// the device expert cache, cuBLAS and attention workspaces, dequantization
// scratch, activations for max_batch_tokens), and one block of that pool
// (its layers only). By the backend's own size rules (cuda/cuda_footprint.cpp),
// so a device holds the backend when before_kv + (n_blocks + 1) * kv_block
// is within its share (gpu_memory_fraction of the total, less what is in
// use, less defaults::kCudaHeadroomBytes). The input of n_gpu_layers =
// LLM_GPU_LAYERS_AUTO (engine/auto_fit.h). UNSUPPORTED without CUDA.
struct CudaFootprint {
  int64_t before_kv = 0;
  int64_t kv_block = 0;
};
StatusOr<CudaFootprint> EstimateCudaFootprint(const ModelConfig& config, const ModelWeights& weights,
                                              const KvCacheSpec& kv, const CudaBackendOptions& options);

// The CUDA backend: weights uploaded once as BF16 (block-quantized types are
// dequantized on the host at upload), KV pool in device memory (BF16), logits
// copied back to `logits` (host) by Forward. `kv` is in/out: on return
// kv->n_blocks is the pool's size. `weights` need not outlive the backend.
StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const ModelConfig& config, const ModelWeights& weights,
                                                     KvCacheSpec* kv, const CudaBackendOptions& options);

}  // namespace llm
