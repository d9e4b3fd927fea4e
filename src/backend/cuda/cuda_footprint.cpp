// A CUDA backend's device memory before it is made (backend.h,
// EstimateCudaFootprint): Init's allocations up to the KV pool, counted in
// Init's order with the size rules the allocations themselves use
// (DeviceMatrix/DeviceExperts::StoredBytes, SizeActivations, KvPoolLayout),
// so that n_gpu_layers = LLM_GPU_LAYERS_AUTO (engine/auto_fit.h) places
// exactly what loads. A change to what Init allocates before the KV pool
// belongs here too; test_cuda_auto_fit checks the figure against the
// emulator's accounting of a backend actually made.
#include <algorithm>
#include <string>
#include <vector>

#include "attention_decode.cuh"
#include "backend/cuda/cuda_backend.h"
#include "model/rope_freq.h"
#include "util/env.h"

namespace llm {

StatusOr<CudaFootprint> EstimateCudaFootprint(const ModelConfig& config, const ModelWeights& weights,
                                              const KvCacheSpec& kv, const CudaBackendOptions& options) {
  return cuda::CudaBackend::Footprint(config, weights, kv, options);
}

namespace cuda {

StatusOr<CudaFootprint> CudaBackend::Footprint(const ModelConfig& c, const ModelWeights& w, const KvCacheSpec& kv,
                                               const CudaBackendOptions& options) {
  if (static_cast<int64_t>(w.layers.size()) != c.n_layer || c.n_layer <= 0)
    return InvalidArgument("CUDA footprint: weights have the wrong layer count");
  const int32_t end = options.n_layers <= 0 || options.n_layers > c.n_layer ? c.n_layer : options.n_layers;
  const int32_t first = options.first_layer;
  if (first < 0 || first >= end) return InvalidArgument("CUDA footprint: first_layer outside the layers");
  const bool partial = end < c.n_layer, from_hidden = first > 0;
  const int64_t E = c.n_embd;
  int64_t bytes = static_cast<int64_t>(kCublasWorkspace);

  // ---- UploadWeights
  int64_t largest = 0, widest = 0;  // the dequantization scratch's sizing
  auto matrix = [&](std::initializer_list<const WeightView*> parts) {
    bytes += static_cast<int64_t>(DeviceMatrix::StoredBytes(parts));
    if (!DeviceMatrix::StaysQuantized(parts)) return;
    int64_t rows = 0;
    for (const WeightView* p : parts) rows += p->rows;
    const int64_t cols = (*parts.begin())->cols;
    largest = std::max(largest, rows * cols);
    widest = std::max(widest, cols);
  };
  const bool tied = w.output.empty() || w.output.data == w.token_embd.data;
  if (!from_hidden || (!partial && tied)) matrix({&w.token_embd});
  if (!partial && !tied) matrix({&w.output});
  if (!partial) bytes += E * 4;  // output_norm
  // Host experts (InitHostExperts): the first n_host layers.
  int32_t n_host = 0;
  if (c.n_expert > 0 && options.n_cpu_moe != 0) n_host = options.n_cpu_moe < 0 ? end : std::min(options.n_cpu_moe, end);
  size_t slot_bytes = 0;
  for (int32_t l = first; l < end; ++l) {
    const LayerWeights& L = w.layers[l];
    bytes += 2 * E * 4;  // attn_norm, ffn_norm
    matrix({&L.wq, &L.wk, &L.wv});
    matrix({&L.wo});
    if (c.n_expert > 0) {
      bytes += static_cast<int64_t>(c.n_expert) * E * 4;  // router, F32
      if (l >= n_host) {
        for (const auto* e : {&L.exp_gate, &L.exp_up, &L.exp_down})
          bytes += static_cast<int64_t>(DeviceExperts::StoredBytes(*e));
      } else {
        size_t one = 0;
        for (const auto* e : {&L.exp_gate, &L.exp_up, &L.exp_down}) one += DeviceExperts::ExpertBytes(*e);
        slot_bytes = std::max(slot_bytes, one);
        bytes += 3 * static_cast<int64_t>(c.n_expert) * static_cast<int64_t>(sizeof(const uint8_t*));  // device tables
      }
      if (c.n_ff_shexp > 0) {
        bytes += E * 4;  // ffn_gate_inp_shexp, F32
        matrix({&L.shexp_gate, &L.shexp_up});
        matrix({&L.shexp_down});
      }
    } else {
      matrix({&L.w_gate, &L.w_up});
      matrix({&L.w_down});
    }
    if (c.qkv_bias) bytes += (c.q_dim() + 2 * c.kv_dim()) * 4;
    if (c.qk_norm) bytes += 2 * static_cast<int64_t>(c.head_dim) * 4;
    if (c.post_norms) bytes += 2 * E * 4;
  }
  if (n_host > 0 && slot_bytes > 0) {  // the device expert cache
    int64_t slots = c.n_expert;
    if (options.moe_cache_bytes > 0)
      slots = std::min<int64_t>(options.moe_cache_bytes / static_cast<int64_t>(slot_bytes),
                                static_cast<int64_t>(n_host) * c.n_expert);
    bytes += std::max<int64_t>(slots, 0) * static_cast<int64_t>(slot_bytes);
  }
  if (largest > 0) bytes += std::max(widest, std::min(largest, kDequantScratchElems)) * 2;

  // ---- RoPE tables, the decode attention workspace
  LLM_ASSIGN_OR_RETURN(std::vector<float> factors, RopeFreqFactors(c, w.rope_freqs));
  LLM_ASSIGN_OR_RETURN(std::vector<double> inv_freq, RopeInvFreq(c, factors));
  bytes += static_cast<int64_t>(inv_freq.size() * sizeof(double));
  if (c.sliding_window > 0) {
    LLM_ASSIGN_OR_RETURN(std::vector<double> local, RopeInvFreq(c, factors, /*local=*/true));
    bytes += static_cast<int64_t>(local.size() * sizeof(double));
  }
  bytes += static_cast<int64_t>(DecodeAttnWorkspaceBytes(kDecodeSlots, c.n_head, c.head_dim));

  // ---- activations (Init's Reserve call)
  const EnvOptions env = ReadEnv();
  const bool graphs = options.cuda_graphs && !env.cuda_debug && !env.cuda_graphs_off && !partial && !from_hidden &&
                      n_host == 0;
  const int32_t mbt = std::max(options.max_batch_tokens, 1);
  const int32_t max_bucket = std::max(1, std::min(std::max(options.max_seqs, 1), mbt));
  const int32_t rows = graphs ? max_bucket : 0;
  const int64_t n_tok = std::max(mbt, rows);
  const int64_t n_out = partial ? 0 : std::max(std::min(mbt, 64), rows);
  bytes += static_cast<int64_t>(SizeActivations(c, n_tok, n_out).total());

  CudaFootprint f;
  f.before_kv = bytes;
  LLM_ASSIGN_OR_RETURN(const int32_t elem, KvElemOf(kv.kv_type));
  LLM_ASSIGN_OR_RETURN(const int32_t elem_v, KvElemOf(KvTypeV(kv)));  // a block's bytes: K's side + V's side
  f.kv_block = KvPoolLayout{end - first, c.n_head_kv, c.head_dim, kv.block_size, elem, elem_v}.block_bytes();
  return f;
}

}  // namespace cuda
}  // namespace llm
