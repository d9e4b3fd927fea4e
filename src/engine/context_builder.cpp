#include "engine/context_builder.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>
#include <optional>
#include <string>

#include "backend/layer_placement.h"
#include "backend/split_backend.h"
#include "core/defaults.h"
#include "engine/auto_fit.h"
#include "spec/draft_model_proposer.h"

namespace llm {

namespace {

template <typename T>
std::string Str(T v) {
  return std::to_string(v);
}

// AUTO: CUDA when this build has it and a device is usable, else the CPU;
// an override (the environment's LLM_BACKEND) replaces AUTO. An explicit
// CUDA request without a device fails here, before the model is loaded.
StatusOr<int32_t> ChooseBackend(int32_t requested, int32_t override_kind) {
  int32_t kind = requested;
  if (kind == LLM_BACKEND_AUTO) {
#if LLM_CUDA_EMULATED
    // The emulator's "device" is a test harness, far slower than the CPU
    // backend: it runs only when asked for (backend or LLM_BACKEND=cuda).
    const bool device = false;
#else
    const bool device = CudaDeviceCount() > 0;
#endif
    kind = override_kind != LLM_BACKEND_AUTO ? override_kind : device ? LLM_BACKEND_CUDA : LLM_BACKEND_CPU;
  }
  if (kind == LLM_BACKEND_CUDA && CudaDeviceCount() == 0) {
#if LLM_HAVE_CUDA
    return Unsupported("LLM_BACKEND_CUDA: no usable CUDA device (driver missing or no GPU)");
#else
    return Unsupported("this build has no CUDA backend");
#endif
  }
  return kind;
}

// The CUDA backend runs the decoder families (Llama, Mistral, Mixtral, Qwen2,
// Qwen2-MoE, Qwen3, Qwen3-MoE, Phi-3, Gemma 2, Gemma 3, gpt-oss); what it does not run
// (CudaSupportsModel says which feature: LongRoPE, encoders, embedding
// models, M-RoPE today) runs on the CPU backend when the
// caller left the choice to us (AUTO) and is refused for an explicit CUDA,
// with that reason in the message.
StatusOr<int32_t> FitBackendToModel(int32_t requested, int32_t kind, const ModelConfig& mc) {
  if (kind != LLM_BACKEND_CUDA) return kind;
  const Status st = CudaSupportsModel(mc);
  if (st.ok()) return kind;
  if (requested == LLM_BACKEND_CUDA) return Unsupported("LLM_BACKEND_CUDA: " + st.message() + " (CPU only)");
  return LLM_BACKEND_CPU;
}

// Images in the prompt (a projector file) run on the CPU backend only: the
// CUDA backend has no embedding-row input yet. When the caller left the
// choice to us, the context runs on the CPU with a message; an explicit
// CUDA request is refused before the model is loaded.
StatusOr<int32_t> FitBackendToImages(int32_t requested, int32_t kind, const char* mmproj_path) {
  if (kind != LLM_BACKEND_CUDA || mmproj_path == nullptr) return kind;
  if (requested == LLM_BACKEND_CUDA)
    return Unsupported("LLM_BACKEND_CUDA with an mmproj_path: images in the prompt run on the CPU backend only "
                       "(the CUDA backend has no embedding-row input yet); use LLM_BACKEND_AUTO or LLM_BACKEND_CPU");
  std::fprintf(stderr, "llmrt: images in the prompt (mmproj) run on the CPU backend only; the CPU backend runs the "
                       "model\n");
  return LLM_BACKEND_CPU;
}

// Zero fields take their defaults; the KV pool is sized for max_seqs
// full-length sequences, on the CPU within defaults::kCpuKvBytes.
// `draft` is the draft model's config when there is one (a loaded draft
// model or the self-draft's layer prefix), else null.
StatusOr<EngineConfig> ResolveEngineConfig(const llm_ctx_params& p, const ModelConfig& mc, int32_t backend_kind,
                                           const ModelConfig* draft) {
  EngineConfig ec;
  ec.n_ctx = p.n_ctx > 0 ? p.n_ctx : mc.n_ctx_train;
  // An encoder's absolute position embeddings end at n_ctx_train.
  if (mc.is_encoder && ec.n_ctx > mc.n_ctx_train)
    return InvalidArgument("n_ctx " + std::to_string(ec.n_ctx) + " is above the encoder model's " +
                           std::to_string(mc.n_ctx_train) + " positions");
  ec.block_size = p.kv_block_size > 0 ? p.kv_block_size : defaults::kKvBlockSize;
  ec.max_seqs = p.max_seqs > 0 ? p.max_seqs : defaults::kMaxSeqs;
  ec.max_batch_tokens = p.max_batch_tokens > 0 ? p.max_batch_tokens : defaults::kMaxBatchTokens;
  ec.max_queued = p.max_queued > 0 ? p.max_queued : defaults::kMaxQueued;
  const int64_t blocks_per_seq = (int64_t{ec.n_ctx} + ec.block_size - 1) / ec.block_size;
  int64_t n_blocks = p.n_kv_blocks > 0 ? p.n_kv_blocks : blocks_per_seq * ec.max_seqs;
  if (p.n_kv_blocks == 0 && backend_kind != LLM_BACKEND_CUDA) {
    // The CPU pool is committed at creation (backend.h); the CUDA backend
    // sizes its own pool to the device's memory.
    const int64_t budget = std::max<int64_t>(defaults::kCpuKvBytes / CpuKvBlockBytes(mc, ec.block_size, p.kv_type, 0, p.kv_type_v), 1);
    n_blocks = std::min(n_blocks, std::max(budget, blocks_per_seq));
  }
  if (p.n_kv_blocks == 0 && backend_kind == LLM_BACKEND_CUDA && draft != nullptr) {
    // A draft runs on the CPU backend, its pool addressed by the target's
    // block ids, so it holds as many blocks as the target's pool. Beside a
    // CUDA target the default pool is what fits on the GPU (tens of
    // thousands of blocks on an H100): in the draft's F32 blocks, tens of GiB
    // of host memory committed at creation. So the default block count is
    // also held to the draft's own budget (the CPU pool's default bytes, at
    // least one full-length sequence). An explicit n_kv_blocks is taken as given.
    const int64_t budget = std::max<int64_t>(defaults::kCpuKvBytes / CpuKvBlockBytes(*draft, ec.block_size, LLM_KV_AUTO), 1);
    n_blocks = std::min(n_blocks, std::max(budget, blocks_per_seq));
  }
  if (p.n_kv_blocks == 0 && backend_kind == LLM_BACKEND_CUDA && p.n_gpu_layers > 0 && p.n_gpu_layers < mc.n_layer) {
    // Partial offload: the upper layers' KV is a CPU pool with the device
    // pool's block count, so the default is held to the CPU pool's budget
    // for those layers too, as for a draft.
    const int64_t budget =
        std::max<int64_t>(defaults::kCpuKvBytes / CpuKvBlockBytes(mc, ec.block_size, p.kv_type, p.n_gpu_layers, p.kv_type_v), 1);
    n_blocks = std::min(n_blocks, std::max(budget, blocks_per_seq));
  }
  if (n_blocks > defaults::kMaxKvBlocks) return InvalidArgument("KV pool too large");
  ec.n_blocks = static_cast<int32_t>(n_blocks);
  const bool has_draft = p.draft_model_path != nullptr || p.self_draft_layers > 0;
  ec.spec_mode = p.spec_mode != LLM_SPEC_AUTO ? p.spec_mode : has_draft ? LLM_SPEC_DRAFT : LLM_SPEC_OFF;
  ec.spec_k = p.spec_k > 0 ? p.spec_k : defaults::kSpecK;
  return ec;
}

// The devices the first ngl layers run on (layer_placement.h): main_gpu
// alone, or every device in proportion to tensor_split (all 0: to each
// device's free memory).
StatusOr<LayerPlacement> PlaceDeviceLayers(const llm_ctx_params& p, int32_t ngl) {
  const int n_dev = CudaDeviceCount();
  bool any_share = false;
  for (int i = 0; i < LLM_MAX_DEVICES; ++i) {
    if (p.tensor_split[i] == 0.0f) continue;
    any_share = true;
    if (i >= n_dev)
      return InvalidArgument("tensor_split gives device " + Str(i) + " a share but " + Str(n_dev) +
                             " CUDA device(s) are present");
  }
  std::vector<int32_t> devices;
  std::vector<float> shares;
  if (p.main_gpu >= 0) {
    if (p.main_gpu >= n_dev)
      return InvalidArgument("main_gpu " + Str(p.main_gpu) + ": " + Str(n_dev) + " CUDA device(s) are present");
    if (any_share) return InvalidArgument("tensor_split and main_gpu >= 0 are exclusive");
    devices.push_back(p.main_gpu);
    shares.push_back(1.0f);
  } else {
    for (int i = 0; i < n_dev && i < LLM_MAX_DEVICES; ++i) {
      devices.push_back(i);
      shares.push_back(any_share ? p.tensor_split[i] : static_cast<float>(CudaDeviceFreeBytes(i)));
    }
  }
  return SplitLayers(ngl, devices, shares);
}

// The CUDA backend's options for these params and engine config.
CudaBackendOptions CudaOptions(const llm_ctx_params& p, const EngineConfig& ec) {
  CudaBackendOptions co;
  co.fit_kv_blocks = p.n_kv_blocks == 0;
  co.max_batch_tokens = ec.max_batch_tokens;
  co.max_seqs = ec.max_seqs;
  co.max_seq_len = ec.n_ctx;
  co.gpu_memory_fraction = p.gpu_memory_fraction > 0.0f ? p.gpu_memory_fraction : defaults::kGpuMemoryFraction;
  co.n_cpu_moe = p.n_cpu_moe;
  co.moe_host_policy = p.moe_host_policy;
  co.moe_prefetch = p.moe_prefetch >= 0;
  co.moe_cache_bytes = static_cast<int64_t>(std::min<uint64_t>(p.moe_cache_bytes, uint64_t{1} << 62));
  return co;
}

// n_gpu_layers = LLM_GPU_LAYERS_AUTO on the CUDA backend (engine/auto_fit.h):
// the params with the fit's choice written in (a layer count, n_cpu_moe, the
// split), and the choice on stderr. Not one layer fits: the CPU backend
// (*kind) when the caller left the backend to us, else OUT_OF_MEMORY.
StatusOr<llm_ctx_params> ResolveAutoLayers(const llm_ctx_params& p, const Model& model, int32_t* kind,
                                           const ModelConfig* draft) {
  llm_ctx_params all = p;
  all.n_gpu_layers = LLM_GPU_LAYERS_ALL;  // the KV pool asked for with every layer on the device
  LLM_ASSIGN_OR_RETURN(const EngineConfig ec, ResolveEngineConfig(all, model.config, *kind, draft));
  const KvCacheSpec kv{ec.block_size, ec.n_blocks, ec.n_ctx, p.kv_type, p.kv_type_v};
  LLM_ASSIGN_OR_RETURN(AutoFit fit, FitLayersToDevices(all, model, kv, CudaOptions(all, ec)));
  if (fit.gpu_layers == 0) {
    if (p.backend == LLM_BACKEND_CUDA) return OutOfMemory(fit.summary);
    std::fprintf(stderr, "llmrt: %s; the CPU backend runs the model\n", fit.summary.c_str());
    *kind = LLM_BACKEND_CPU;
    return p;
  }
  std::fprintf(stderr, "%s\n", fit.summary.c_str());
  return fit.params;
}

// The target's backend. The GPU pool is real memory: without an explicit
// n_kv_blocks it gets as many blocks as fit (up to the CPU default), and
// the engine follows (ec->n_blocks).
StatusOr<std::unique_ptr<Backend>> CreateBackend(const llm_ctx_params& p, int32_t kind, const Model& model,
                                                 EngineConfig* ec) {
  KvCacheSpec kv{ec->block_size, ec->n_blocks, ec->n_ctx, p.kv_type, p.kv_type_v};
  if (kind != LLM_BACKEND_CUDA) return CreateCpuBackend(model.config, model.weights, kv, p.n_threads);
  // The CUDA pool stores K and V each in its own type (kernels/common.cuh
  // KvPoolLayout), F32 on neither side.
  if (p.kv_type == LLM_KV_F32 || p.kv_type_v == LLM_KV_F32)
    return Unsupported(std::string(p.kv_type == LLM_KV_F32 ? "kv_type" : "kv_type_v") +
                       " F32: the CUDA backend keeps its KV cache in BF16 (AUTO), F16, Q8_0, Q4_0 or FP8 E4M3 "
                       "(the CPU backend has F32)");
  const CudaBackendOptions co = CudaOptions(p, *ec);
  // n_gpu_layers in (0, n_layer): partial offload, the upper layers on the
  // CPU backend (split_backend.h); the device pool holds only the lower
  // layers' KV, so fit_kv_blocks counts only them. 0 never gets here
  // (BuildEngine chose the CPU backend); -1 or >= n_layer: all on the GPU.
  const int32_t n_layer = model.config.n_layer;
  const int32_t ngl = p.n_gpu_layers > 0 && p.n_gpu_layers < n_layer ? p.n_gpu_layers : n_layer;
  LLM_ASSIGN_OR_RETURN(const LayerPlacement placement, PlaceDeviceLayers(p, ngl));
  // Host experts (cuda/moe_host.h) live in one device's backend, counted
  // from layer 0: with the layers split over several devices, refused.
  if (p.n_cpu_moe != 0 && model.config.n_expert > 0 && placement.shares.size() > 1)
    return Unsupported("n_cpu_moe " + Str(p.n_cpu_moe) + " with the layers split over " +
                       Str(placement.shares.size()) +
                       " CUDA devices is not supported: set main_gpu to one device, or n_cpu_moe 0");
  auto backend = CreateSplitBackend(model.config, model.weights, &kv, co, placement, p.n_threads);
  ec->n_blocks = kv.n_blocks;
  return backend;
}

// The draft model named by draft_model_path, or null; loaded before the
// target's KV pool is sized, since a draft bounds it (ResolveEngineConfig).
StatusOr<std::unique_ptr<Model>> LoadDraftModel(const llm_ctx_params& p, const Model& target) {
  if (p.draft_model_path == nullptr) return std::unique_ptr<Model>();
  LLM_ASSIGN_OR_RETURN(std::unique_ptr<Model> draft, Model::Load(p.draft_model_path));
  LLM_RETURN_IF_ERROR(CheckSameVocabulary(target, *draft));
  return draft;
}

// The config the draft runs with: the draft model's, or the self-draft's
// layer prefix of the target; null without a draft.
std::optional<ModelConfig> DraftConfig(const llm_ctx_params& p, const Model& target, const Model* draft) {
  if (draft != nullptr) return draft->config;
  if (p.self_draft_layers == 0) return std::nullopt;
  ModelConfig dc = target.config;
  dc.n_layer = std::clamp(p.self_draft_layers, 1, target.config.n_layer);
  return dc;
}

// The draft proposer, if any: it runs on its own CPU backend and KV pool,
// addressed by the target's block ids (same KvCacheSpec).
StatusOr<std::unique_ptr<Proposer>> CreateDraft(const llm_ctx_params& p, const Model& target,
                                                std::unique_ptr<Model> draft, const KvCacheSpec& kv) {
  if (draft != nullptr) {
    LLM_ASSIGN_OR_RETURN(auto backend, CreateCpuBackend(draft->config, draft->weights, kv, p.n_threads));
    return std::unique_ptr<Proposer>(
        std::make_unique<DraftModelProposer>(std::move(backend), target.config.n_vocab, std::move(draft)));
  }
  if (p.self_draft_layers == 0) return std::unique_ptr<Proposer>();
  LLM_ASSIGN_OR_RETURN(LayerPrefixView view, MakeLayerPrefixView(target.config, target.weights, p.self_draft_layers));
  // The backend keeps its own copy of the views; the weights stay in the
  // target model, which the engine owns for as long as the proposer.
  LLM_ASSIGN_OR_RETURN(auto backend, CreateCpuBackend(view.config, view.weights, kv, p.n_threads));
  return std::unique_ptr<Proposer>(std::make_unique<DraftModelProposer>(std::move(backend), target.config.n_vocab, nullptr));
}

// The swap space in slots of `block_bytes` (0: preemption recomputes).
StatusOr<int32_t> SwapSlots(const llm_ctx_params& p, int32_t n_blocks, int64_t block_bytes) {
  if (p.preempt_mode == LLM_PREEMPT_RECOMPUTE) return 0;
  if (block_bytes <= 0) return InternalError("the backend reports a KV block of no bytes");
  const uint64_t block = static_cast<uint64_t>(block_bytes);
  uint64_t bytes = p.swap_space_bytes;
  if (bytes == 0) bytes = std::min(block * static_cast<uint64_t>(n_blocks), defaults::kMaxSwapBytes);
  const uint64_t slots = bytes / block;
  if (slots == 0) {
    return InvalidArgument("swap_space_bytes " + Str(bytes) + " holds no KV block (one block is " + Str(block) +
                           " bytes)");
  }
  if (slots > static_cast<uint64_t>(defaults::kMaxKvBlocks)) {
    return InvalidArgument("swap_space_bytes is too large (over 2^24 KV blocks)");
  }
  return static_cast<int32_t>(slots);
}

}  // namespace

Status CheckContextParams(const llm_ctx_params& p) {
  namespace d = defaults;
  if (p.backend < LLM_BACKEND_AUTO || p.backend > LLM_BACKEND_CUDA)
    return InvalidArgument("backend " + Str(p.backend) + " is not an LLM_BACKEND_* value");
  if (p.n_threads < 0 || p.n_threads > d::kMaxThreads)
    return InvalidArgument("n_threads must be in [0, " + Str(d::kMaxThreads) + "]");
  if (p.n_ctx < 0 || p.n_ctx > d::kMaxCtx) return InvalidArgument("n_ctx must be in [0, " + Str(d::kMaxCtx) + "]");
  if (p.kv_block_size < 0 || p.kv_block_size > d::kMaxKvBlockSize)
    return InvalidArgument("kv_block_size must be in [0, " + Str(d::kMaxKvBlockSize) + "]");
  if (p.n_kv_blocks < 0) return InvalidArgument("n_kv_blocks must be >= 0");
  if (p.max_seqs < 0 || p.max_seqs > d::kMaxMaxSeqs)
    return InvalidArgument("max_seqs must be in [0, " + Str(d::kMaxMaxSeqs) + "]");
  if (p.max_batch_tokens < 0 || p.max_batch_tokens > d::kMaxMaxBatchTokens)
    return InvalidArgument("max_batch_tokens must be in [0, " + Str(d::kMaxMaxBatchTokens) + "]");
  if (p.max_queued < 0) return InvalidArgument("max_queued must be >= 0");
  if (p.preempt_mode != LLM_PREEMPT_RECOMPUTE && p.preempt_mode != LLM_PREEMPT_SWAP)
    return InvalidArgument("preempt_mode " + Str(p.preempt_mode) + " is not an LLM_PREEMPT_* value");
  if (p.preempt_mode == LLM_PREEMPT_RECOMPUTE && p.swap_space_bytes != 0)
    return InvalidArgument("swap_space_bytes needs preempt_mode LLM_PREEMPT_SWAP");
  if (p.reserved1 != 0) return InvalidArgument("reserved1 must be 0");
  if (p.reserved2 != 0) return InvalidArgument("reserved2 must be 0");
  if (p.reserved4 != 0) return InvalidArgument("reserved4 must be 0");
  if (p.kv_disk_bytes != 0 && p.kv_disk_dir == nullptr)
    return InvalidArgument("kv_disk_bytes needs kv_disk_dir");
  if (p.kv_disk_dir != nullptr && p.kv_disk_dir[0] == '\0')
    return InvalidArgument("kv_disk_dir is empty (NULL for no disk tier)");
  if (p.n_gpu_layers < LLM_GPU_LAYERS_AUTO)
    return InvalidArgument("n_gpu_layers " + Str(p.n_gpu_layers) +
                           " must be >= 0, -1 for every layer or -2 (LLM_GPU_LAYERS_AUTO) to fit free memory");
  if (p.main_gpu < -1) return InvalidArgument("main_gpu " + Str(p.main_gpu) + " must be >= 0, or -1 for every device");
  for (float f : p.tensor_split)
    if (!(f >= 0.0f) || !std::isfinite(f))
      return InvalidArgument("tensor_split values must be finite and >= 0 (got " + Str(f) + ")");
  if (p.n_cpu_moe < -1)
    return InvalidArgument("n_cpu_moe " + Str(p.n_cpu_moe) + " must be >= 0, or -1 for every MoE layer");
  if (p.moe_host_policy < LLM_MOE_HOST_AUTO || p.moe_host_policy > LLM_MOE_HOST_COPY)
    return InvalidArgument("moe_host_policy " + Str(p.moe_host_policy) + " is not an LLM_MOE_HOST_* value");
  if (p.moe_prefetch < -1 || p.moe_prefetch > 1) return InvalidArgument("moe_prefetch must be -1, 0 or 1");
  if (p.reserved5 != 0) return InvalidArgument("reserved5 must be 0");
  if (p.kv_type < LLM_KV_AUTO || p.kv_type > LLM_KV_FP8_E4M3)
    return InvalidArgument("kv_type " + Str(p.kv_type) + " is not an LLM_KV_* value");
  if (p.kv_type_v < LLM_KV_AUTO || p.kv_type_v > LLM_KV_FP8_E4M3)
    return InvalidArgument("kv_type_v " + Str(p.kv_type_v) + " is not an LLM_KV_* value (0: as kv_type)");
  // Checked whatever the backend, so a bad value fails on a CPU-only machine
  // too rather than only once the program meets a GPU. !(a && b) rejects NaN.
  if (!(p.gpu_memory_fraction >= 0.0f && p.gpu_memory_fraction <= 1.0f))
    return InvalidArgument("gpu_memory_fraction must be in (0, 1], or 0 for the default 0.90 (got " +
                           Str(p.gpu_memory_fraction) + ")");
  if (p.self_draft_layers < 0) return InvalidArgument("self_draft_layers must be >= 0");
  if (p.self_draft_layers > 0 && p.draft_model_path != nullptr)
    return InvalidArgument("draft_model_path and self_draft_layers are exclusive");
  if (p.spec_mode < LLM_SPEC_AUTO || p.spec_mode > LLM_SPEC_DRAFT)
    return InvalidArgument("spec_mode " + Str(p.spec_mode) + " is not an LLM_SPEC_* value");
  if (p.spec_k < 0 || p.spec_k > d::kMaxSpecK) return InvalidArgument("spec_k must be in [0, " + Str(d::kMaxSpecK) + "]");
  if (p.spec_mode == LLM_SPEC_DRAFT && p.draft_model_path == nullptr && p.self_draft_layers == 0)
    return InvalidArgument("spec_mode DRAFT needs draft_model_path or self_draft_layers");
  return Status::Ok();
}

StatusOr<std::unique_ptr<Engine>> BuildEngine(const llm_ctx_params& p_in, const ContextOverrides& overrides) {
  LLM_RETURN_IF_ERROR(CheckContextParams(p_in));
  llm_ctx_params p = p_in;  // n_gpu_layers AUTO: with the fit's choice written in
  LLM_ASSIGN_OR_RETURN(int32_t kind, ChooseBackend(p.backend, overrides.backend));
  LLM_ASSIGN_OR_RETURN(kind, FitBackendToImages(p.backend, kind, p.mmproj_path));
  LLM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Load(p.model_path));
  LLM_ASSIGN_OR_RETURN(kind, FitBackendToModel(p.backend, kind, model->config));
  if (kind == LLM_BACKEND_CUDA && p_in.n_gpu_layers == 0) kind = LLM_BACKEND_CPU;  // no layer on the GPU
  LLM_ASSIGN_OR_RETURN(std::unique_ptr<Model> draft, LoadDraftModel(p, *model));
  const std::optional<ModelConfig> dc = DraftConfig(p, *model, draft.get());
  if (kind == LLM_BACKEND_CUDA && p_in.n_gpu_layers == LLM_GPU_LAYERS_AUTO) {
    LLM_ASSIGN_OR_RETURN(p, ResolveAutoLayers(p_in, *model, &kind, dc ? &*dc : nullptr));
  }
  LLM_ASSIGN_OR_RETURN(EngineConfig ec, ResolveEngineConfig(p, model->config, kind, dc ? &*dc : nullptr));
  LLM_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, CreateBackend(p, kind, *model, &ec));
  SpecSetup spec;
  spec.verify = overrides.verify;
  LLM_ASSIGN_OR_RETURN(spec.draft, CreateDraft(p, *model, std::move(draft),
                                                KvCacheSpec{ec.block_size, ec.n_blocks, ec.n_ctx, LLM_KV_AUTO}));
  // An encoder keeps no KV cache (Backend::Encode): nothing to swap, and no
  // tier below a cache it does not have.
  if (!model->config.is_encoder) {
    LLM_ASSIGN_OR_RETURN(ec.n_swap_slots, SwapSlots(p, ec.n_blocks, backend->kv_block_bytes()));
    ec.tiers.host_bytes = p.kv_host_bytes;
    if (p.kv_disk_dir != nullptr) {
      ec.tiers.disk_dir = p.kv_disk_dir;
      ec.tiers.disk_bytes = p.kv_disk_bytes != 0 ? p.kv_disk_bytes : defaults::kKvDiskBytes;
    }
  }
  return Engine::Create(std::move(model), std::move(backend), ec, std::move(spec));
}

}  // namespace llm
