// The CUDA backend: the same batched Llama forward as the CPU reference
// (backend.h), with cuBLAS GEMMs (BF16 in, F32 accumulation and output) and
// the kernels of kernels/.
//
// Files: cuda_backend.cpp (creation, weight upload, KV pool, validation,
// block copies), cuda_forward.cpp (the forward pass), cuda_util.{h,cpp}
// (errors as Status, RAII buffers).
//
// Precision: weights and the KV cache are BF16; the residual stream, GEMM
// outputs, norms, softmax and logits are F32. Activations entering a GEMM
// (normed rows, attention output, silu(gate)*up) are rounded to BF16.
//
// Environment (debugging aids, read at creation):
//   LLM_CUDA_DEBUG=1         synchronise after every kernel and name the one that failed
//   LLM_CUDA_ATTENTION=decode  run every query through the decode kernel (no tensor-core prefill)
#pragma once

#include <cublas_v2.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "attention_prefill.cuh"
#include "backend/backend.h"
#include "backend/cuda/cuda_util.h"
#include "common.cuh"

namespace llm::cuda {

class CudaBackend final : public Backend {
 public:
  static StatusOr<std::unique_ptr<Backend>> Create(const ModelConfig& config, const ModelWeights& weights,
                                                   KvCacheSpec* kv, const CudaBackendOptions& options);
  ~CudaBackend() override;

  int32_t kind() const override { return LLM_BACKEND_CUDA; }
  Status Forward(const Batch& batch, float* logits) override;
  Status CopyKvBlock(int32_t src, int32_t dst) override;

 private:
  CudaBackend(const ModelConfig& config, const CudaBackendOptions& options) : cfg_(config), opt_(options) {}

  Status Init(const ModelWeights& weights, KvCacheSpec* kv);
  Status UploadWeights(const ModelWeights& w);
  Status AllocateKvPool(KvCacheSpec* kv);

  // Checks the batch against the model and the pool and builds this step's
  // metadata (meta_, offsets below) on the host.
  Status Validate(const Batch& batch, const float* logits);
  // Grows the activation buffers to n_tok tokens and n_out logit rows and
  // the metadata buffers to n_meta ints; no-op when large enough.
  Status Reserve(int64_t n_tok, int64_t n_out, int64_t n_meta);
  // y (n, rows) F32 = x (n, cols) bf16 · W (rows, cols) bf16 ᵀ
  Status Gemm(const bf16* w, int64_t rows, int64_t cols, const bf16* x, int64_t n, float* y, const char* what);
  // The launch's error, and with LLM_CUDA_DEBUG the kernel's.
  Status Launched(cudaError_t e, const char* what, int layer = -1);
  Status Attention(int layer, int64_t n_tok);

  // Query-token slots (tokens x splits) of the decode attention workspace.
  static constexpr int32_t kDecodeSlots = 2048;

  ModelConfig cfg_;
  CudaBackendOptions opt_;
  bool debug_ = false;
  bool force_decode_ = false;
  int n_sm_ = 1;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  DeviceBuffer cublas_ws_;

  // ---- weights, BF16 (norms F32)
  struct Layer {
    DeviceBuffer attn_norm;  // (n_embd) F32
    DeviceBuffer wqkv;       // (q_dim + 2 kv_dim, n_embd)  [Wq; Wk; Wv]
    DeviceBuffer wo;         // (n_embd, q_dim)
    DeviceBuffer ffn_norm;   // (n_embd) F32
    DeviceBuffer wgu;        // (2 n_ff, n_embd)            [W_gate; W_up]
    DeviceBuffer wd;         // (n_embd, n_ff)
  };
  std::vector<Layer> layers_;
  DeviceBuffer tok_embd_;    // (n_vocab, n_embd)
  DeviceBuffer output_;      // (n_vocab, n_embd); empty when tied to tok_embd_
  DeviceBuffer out_norm_;    // (n_embd) F32
  DeviceBuffer inv_freq_;    // (rope_dim / 2) F64
  const bf16* output_w_ = nullptr;

  // ---- paged KV pool (layout: kernels/common.cuh)
  KvPoolLayout kv_;
  int32_t n_blocks_ = 0;
  int64_t capacity_ = 0;     // n_blocks * block_size positions
  DeviceBuffer kv_pool_;

  // ---- activations, grown to the largest batch seen
  int64_t cap_tok_ = 0;
  int64_t cap_out_ = 0;
  DeviceBuffer x_;        // (n_tok, n_embd) F32        residual stream
  DeviceBuffer delta_;    // (n_tok, n_embd) F32        sub-block output, added by the next norm
  DeviceBuffer xn_;       // (max(n_tok, n_out), n_embd) bf16  normed rows
  DeviceBuffer qkv_;      // (n_tok, q_dim + 2 kv_dim) F32
  DeviceBuffer q_;        // (n_tok, q_dim) bf16        rotated queries
  DeviceBuffer att_;      // (n_tok, q_dim) bf16        attention output
  DeviceBuffer gu_;       // (n_tok, 2 n_ff) F32        gate | up
  DeviceBuffer h_;        // (n_tok, n_ff) bf16         silu(gate) * up
  DeviceBuffer cos_sin_;  // (n_tok, rope_dim) F32
  DeviceBuffer logits_;   // (n_out, n_vocab) F32
  DeviceBuffer dec_ws_;   // decode attention split workspace (kDecodeSlots)

  // ---- per-step metadata: built in meta_ (host), one copy to meta_dev_
  std::vector<int32_t> meta_;
  PinnedBuffer meta_pinned_;
  DeviceBuffer meta_dev_;
  struct Offsets {
    int64_t tokens, tok_seq, tok_pos, logit_rows, dec_items, seqs, work, tables, total;
  } off_{};
  int32_t n_seqs_ = 0, n_out_ = 0, n_dec_ = 0, n_work_ = 0, max_dec_keys_ = 0;
};

}  // namespace llm::cuda
