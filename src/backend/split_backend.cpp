#include "backend/split_backend.h"

#include <new>
#include <string>

namespace llm {
namespace {

class SplitBackend final : public Backend {
 public:
  SplitBackend(std::vector<std::unique_ptr<Backend>> stages, int64_t n_embd)
      : stages_(std::move(stages)), n_embd_(n_embd) {}

  int32_t kind() const override { return LLM_BACKEND_CUDA; }

  // The first stage checks the batch first (every stage checks the same
  // limits: same n_blocks and block size), so a bad batch touches no pool.
  Status Forward(const Batch& batch, float* logits) override {
    if (!batch.embd.empty() || !batch.attn_end.empty() || !batch.mrope_pos.empty())
      return Unsupported("split backend: image inputs (embedding rows, bidirectional spans, M-RoPE positions) run on "
                         "the CPU backend only");
    // The one check the first stages cannot make for the last (they are
    // handed a hidden-state buffer, never NULL).
    if (!batch.logit_rows.empty() && logits == nullptr)
      return InvalidArgument("Forward: logits is NULL but " + std::to_string(batch.logit_rows.size()) +
                             " logit rows are wanted");
    const size_t n = batch.tokens.size() * static_cast<size_t>(n_embd_);
    try {
      for (std::vector<float>& h : hidden_)
        if (h.size() < n) h.resize(n);
    } catch (const std::bad_alloc&) {
      return OutOfMemory("split backend: host buffers for hidden states");
    }
    // hidden_[i % 2]: (n_tok, n_embd) the residual stream leaving stage i
    const size_t last = stages_.size() - 1;
    LLM_RETURN_IF_ERROR(stages_[0]->Forward(batch, hidden_[0].data()));
    for (size_t i = 1; i < last; ++i)
      LLM_RETURN_IF_ERROR(stages_[i]->ForwardFromHidden(batch, hidden_[(i - 1) % 2].data(), hidden_[i % 2].data()));
    return stages_[last]->ForwardFromHidden(batch, hidden_[(last - 1) % 2].data(), logits);
  }

  // A block's copy is all its parts' copies. Each stage checks the ids
  // against the same n_blocks, so a bad id fails in the first, copying nothing.
  Status CopyKvBlock(int32_t src, int32_t dst) override {
    for (auto& s : stages_) LLM_RETURN_IF_ERROR(s->CopyKvBlock(src, dst));
    return Status::Ok();
  }
  int64_t kv_block_bytes() const override {
    int64_t b = 0;
    for (const auto& s : stages_) b += s->kv_block_bytes();
    return b;
  }
  BackendMemory memory() const override {
    BackendMemory m;
    for (const auto& s : stages_) {
      const BackendMemory x = s->memory();
      m.kv_committed += x.kv_committed;
      m.kv_pool += x.kv_pool;
      m.weights += x.weights;
      m.scratch += x.scratch;
    }
    for (const std::vector<float>& h : hidden_) m.scratch += static_cast<int64_t>(h.capacity() * sizeof(float));
    return m;
  }
  std::vector<DeviceMemory> device_memory() const override {
    std::vector<DeviceMemory> d;
    for (const auto& s : stages_)
      for (const DeviceMemory& x : s->device_memory()) d.push_back(x);
    return d;
  }
  // Only the first stage may keep experts in host memory (n_cpu_moe is
  // refused with a layer split over several devices, context_builder.cpp).
  MoeOffloadStats moe_offload() const override { return stages_[0]->moe_offload(); }
  Status ReserveSwapSpace(int32_t n_slots) override {
    for (auto& s : stages_) LLM_RETURN_IF_ERROR(s->ReserveSwapSpace(n_slots));
    return Status::Ok();
  }
  Status SwapOutKvBlocks(std::span<const KvSwap> moves) override {
    for (auto& s : stages_) LLM_RETURN_IF_ERROR(s->SwapOutKvBlocks(moves));
    return Status::Ok();
  }
  Status SwapInKvBlocks(std::span<const KvSwap> moves) override {
    for (auto& s : stages_) LLM_RETURN_IF_ERROR(s->SwapInKvBlocks(moves));
    return Status::Ok();
  }

 private:
  // In layer order: the first embeds, the last ends in the classifier.
  std::vector<std::unique_ptr<Backend>> stages_;
  int64_t n_embd_;
  std::vector<float> hidden_[2];  // (n_tok, n_embd) the residual stream between stages, alternating
};

}  // namespace

StatusOr<std::unique_ptr<Backend>> CreateSplitBackend(const ModelConfig& config, const ModelWeights& weights,
                                                      KvCacheSpec* kv, const CudaBackendOptions& options,
                                                      const LayerPlacement& placement, int n_threads) {
  if (kv == nullptr) return InvalidArgument("split backend: KvCacheSpec is NULL");
  const int32_t ngl = placement.gpu_layers();
  if (placement.shares.empty() || ngl > config.n_layer)
    return InvalidArgument("split backend: " + std::to_string(ngl) + " device layers for a model of " +
                           std::to_string(config.n_layer));
  for (const DeviceShare& s : placement.shares)
    if (s.n_layers <= 0) return InvalidArgument("split backend: a device share without layers");
  if (placement.shares.size() == 1 && ngl == config.n_layer) {  // one device, the whole model
    CudaBackendOptions o = options;
    o.device = placement.shares[0].device;
    return CreateCudaBackend(config, weights, kv, o);
  }
  // Each device pool is sized in turn (fit_kv_blocks: as many blocks as fit
  // there, at most kv->n_blocks so far); a device that fits fewer lowers the
  // count for the rest, and the ones made earlier with more are made again
  // with exactly that many, so every pool has the same block count.
  std::vector<std::unique_ptr<Backend>> stages;
  std::vector<int32_t> made_with;
  CudaBackendOptions o = options;
  int32_t first = 0;
  for (const DeviceShare& s : placement.shares) {
    o.device = s.device;
    o.first_layer = first;
    o.n_layers = first + s.n_layers;
    LLM_ASSIGN_OR_RETURN(std::unique_ptr<Backend> b, CreateCudaBackend(config, weights, kv, o));
    stages.push_back(std::move(b));
    made_with.push_back(kv->n_blocks);
    first += s.n_layers;
  }
  first = 0;
  for (size_t i = 0; i < stages.size(); ++i) {
    const DeviceShare& s = placement.shares[i];
    if (made_with[i] != kv->n_blocks) {
      stages[i].reset();  // its memory back before the smaller pool is made
      o.device = s.device;
      o.first_layer = first;
      o.n_layers = first + s.n_layers;
      o.fit_kv_blocks = false;
      KvCacheSpec exact = *kv;
      LLM_ASSIGN_OR_RETURN(stages[i], CreateCudaBackend(config, weights, &exact, o));
    }
    first += s.n_layers;
  }
  if (ngl < config.n_layer) {
    LLM_ASSIGN_OR_RETURN(std::unique_ptr<Backend> cpu, CreateCpuBackend(config, weights, *kv, n_threads, ngl));
    stages.push_back(std::move(cpu));
  }
  return std::unique_ptr<Backend>(new SplitBackend(std::move(stages), config.n_embd));
}

StatusOr<std::unique_ptr<Backend>> CreateSplitBackend(const ModelConfig& config, const ModelWeights& weights,
                                                      KvCacheSpec* kv, const CudaBackendOptions& options,
                                                      int32_t n_gpu_layers, int n_threads) {
  if (n_gpu_layers <= 0 || n_gpu_layers >= config.n_layer)
    return InvalidArgument("split backend: n_gpu_layers " + std::to_string(n_gpu_layers) + " outside [1, " +
                           std::to_string(config.n_layer - 1) + "]");
  LayerPlacement p;
  p.shares.push_back(DeviceShare{options.device, n_gpu_layers});
  return CreateSplitBackend(config, weights, kv, options, p, n_threads);
}

}  // namespace llm
