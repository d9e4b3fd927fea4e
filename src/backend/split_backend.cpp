#include "backend/split_backend.h"

#include <new>
#include <string>

namespace llm {
namespace {

class SplitBackend final : public Backend {
 public:
  SplitBackend(std::unique_ptr<Backend> gpu, std::unique_ptr<Backend> cpu, int64_t n_embd)
      : gpu_(std::move(gpu)), cpu_(std::move(cpu)), n_embd_(n_embd) {}

  int32_t kind() const override { return LLM_BACKEND_CUDA; }

  // The CUDA half checks the batch first (both halves check the same
  // limits: same n_blocks and block size), so a bad batch touches neither pool.
  Status Forward(const Batch& batch, float* logits) override {
    // The one check the CUDA half cannot make for the CPU half (it is handed
    // the hidden-state buffer, never NULL).
    if (!batch.logit_rows.empty() && logits == nullptr)
      return InvalidArgument("Forward: logits is NULL but " + std::to_string(batch.logit_rows.size()) +
                             " logit rows are wanted");
    const size_t n = batch.tokens.size() * static_cast<size_t>(n_embd_);
    try {
      if (hidden_.size() < n) hidden_.resize(n);
    } catch (const std::bad_alloc&) {
      return OutOfMemory("split backend: host buffer for hidden states");
    }
    LLM_RETURN_IF_ERROR(gpu_->Forward(batch, hidden_.data()));  // hidden: (n_tok, n_embd)
    return cpu_->ForwardFromHidden(batch, hidden_.data(), logits);
  }

  // A block's copy is both its parts' copies. Each half checks the ids
  // against the same n_blocks, so a bad id fails in the first, copying nothing.
  Status CopyKvBlock(int32_t src, int32_t dst) override {
    LLM_RETURN_IF_ERROR(gpu_->CopyKvBlock(src, dst));
    return cpu_->CopyKvBlock(src, dst);
  }
  int64_t kv_block_bytes() const override { return gpu_->kv_block_bytes() + cpu_->kv_block_bytes(); }
  BackendMemory memory() const override {
    const BackendMemory g = gpu_->memory(), c = cpu_->memory();
    return BackendMemory{g.kv_committed + c.kv_committed, g.kv_pool + c.kv_pool, g.weights + c.weights,
                         g.scratch + c.scratch + static_cast<int64_t>(hidden_.capacity() * sizeof(float))};
  }
  MoeOffloadStats moe_offload() const override { return gpu_->moe_offload(); }
  Status ReserveSwapSpace(int32_t n_slots) override {
    LLM_RETURN_IF_ERROR(gpu_->ReserveSwapSpace(n_slots));
    return cpu_->ReserveSwapSpace(n_slots);
  }
  Status SwapOutKvBlocks(std::span<const KvSwap> moves) override {
    LLM_RETURN_IF_ERROR(gpu_->SwapOutKvBlocks(moves));
    return cpu_->SwapOutKvBlocks(moves);
  }
  Status SwapInKvBlocks(std::span<const KvSwap> moves) override {
    LLM_RETURN_IF_ERROR(gpu_->SwapInKvBlocks(moves));
    return cpu_->SwapInKvBlocks(moves);
  }

 private:
  std::unique_ptr<Backend> gpu_;  // embedding + layers [0, N)
  std::unique_ptr<Backend> cpu_;  // layers [N, n_layer) + final norm + classifier
  int64_t n_embd_;
  std::vector<float> hidden_;     // (n_tok, n_embd) the residual stream between the halves
};

}  // namespace

StatusOr<std::unique_ptr<Backend>> CreateSplitBackend(const ModelConfig& config, const ModelWeights& weights,
                                                      KvCacheSpec* kv, const CudaBackendOptions& options,
                                                      int32_t n_gpu_layers, int n_threads) {
  if (kv == nullptr) return InvalidArgument("split backend: KvCacheSpec is NULL");
  if (n_gpu_layers <= 0 || n_gpu_layers >= config.n_layer)
    return InvalidArgument("split backend: n_gpu_layers " + std::to_string(n_gpu_layers) + " outside [1, " +
                           std::to_string(config.n_layer - 1) + "]");
  CudaBackendOptions o = options;
  o.n_layers = n_gpu_layers;
  LLM_ASSIGN_OR_RETURN(std::unique_ptr<Backend> gpu, CreateCudaBackend(config, weights, kv, o));
  LLM_ASSIGN_OR_RETURN(std::unique_ptr<Backend> cpu, CreateCpuBackend(config, weights, *kv, n_threads, n_gpu_layers));
  return std::unique_ptr<Backend>(new SplitBackend(std::move(gpu), std::move(cpu), config.n_embd));
}

}  // namespace llm
