#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <tuple>

#include "attention_decode.cuh"
#include "model/rope_freq.h"
#include "backend/validate.h"
#include "backend/cpu/kernels.h"  // DequantizeRow: the reference dequantization
#include "dequant.cuh"
#include "moe_route.cuh"
#include "util/env.h"
#include "util/fp16.h"

namespace llm {

int CudaDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

namespace {
// cudaMemGetInfo on `device`, the caller's current device kept; false on error.
bool DeviceMemInfo(int device, size_t* free_b, size_t* total_b) {
  int prev = 0;
  const bool ok = cudaGetDevice(&prev) == cudaSuccess && cudaSetDevice(device) == cudaSuccess &&
                  cudaMemGetInfo(free_b, total_b) == cudaSuccess;
  cudaGetLastError();
  cudaSetDevice(prev);
  return ok;
}
}  // namespace

int64_t CudaDeviceFreeBytes(int device) {
  size_t free_b = 0, total_b = 0;
  return DeviceMemInfo(device, &free_b, &total_b) ? static_cast<int64_t>(free_b) : 0;
}

int64_t CudaDeviceTotalBytes(int device) {
  size_t free_b = 0, total_b = 0;
  return DeviceMemInfo(device, &free_b, &total_b) ? static_cast<int64_t>(total_b) : 0;
}

StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const ModelConfig& config, const ModelWeights& weights,
                                                     KvCacheSpec* kv, const CudaBackendOptions& options) {
  return cuda::CudaBackend::Create(config, weights, kv, options);
}

namespace cuda {
namespace {

Status CheckMatrix(const WeightView& w, int64_t rows, int64_t cols, const std::string& name) {
  return CheckWeightMatrix(w, rows, cols, name, "CUDA backend");
}

// A norm weight (n) as F32 on the device.
Status UploadNorm(const WeightView& w, int64_t n, DeviceBuffer* out, const std::string& name) {
  if (w.empty() || w.rows * w.cols != n || (w.rows != 1 && w.cols != 1))
    return InvalidArgument("CUDA backend: norm weight " + name + " missing or not of size " + std::to_string(n));
  if (w.type != TensorType::F32 && w.type != TensorType::F16 && w.type != TensorType::BF16)
    return Unsupported("CUDA backend: norm weight " + name + " must be F32, F16 or BF16");
  WeightView row = w;
  row.rows = 1;
  row.cols = n;
  std::vector<float> v(static_cast<size_t>(n));
  cpu::DequantizeRow(row, 0, v.data());
  LLM_RETURN_IF_ERROR(out->Allocate(v.size() * sizeof(float), name.c_str()));
  LLM_CUDA_TRY(cudaMemcpy(out->get(), v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice), ("upload " + name).c_str());
  return Status::Ok();
}

// Qwen2's q, k and v biases, end to end as the fused QKV GEMM's output
// columns lie: (q_dim + 2 kv_dim) F32.
Status UploadBiases(const LayerWeights& L, int64_t q, int64_t kv, DeviceBuffer* out, const std::string& p) {
  std::vector<float> v(static_cast<size_t>(q + 2 * kv));
  int64_t at = 0;
  for (auto [w, n, name] : {std::tuple{&L.bq, q, "attn_q.bias"}, std::tuple{&L.bk, kv, "attn_k.bias"},
                            std::tuple{&L.bv, kv, "attn_v.bias"}}) {
    if (w->empty() || w->rows * w->cols != n || (w->rows != 1 && w->cols != 1))
      return InvalidArgument("CUDA backend: bias " + p + name + " missing or not of size " + std::to_string(n));
    if (w->type != TensorType::F32 && w->type != TensorType::F16 && w->type != TensorType::BF16)
      return Unsupported("CUDA backend: bias " + p + name + " must be F32, F16 or BF16");
    WeightView row = *w;
    row.rows = 1;
    row.cols = n;
    cpu::DequantizeRow(row, 0, v.data() + at);
    at += n;
  }
  LLM_RETURN_IF_ERROR(out->Allocate(v.size() * sizeof(float), (p + "attn_qkv.bias").c_str()));
  LLM_CUDA_TRY(cudaMemcpy(out->get(), v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice),
               ("upload " + p + "attn_qkv.bias").c_str());
  return Status::Ok();
}

}  // namespace

// The kernels' values are the KV wire's (kernels/common.cuh), so a pool
// block is a wire block.
static_assert(kKvF16 == LLM_KV_F16 && kKvQ8 == LLM_KV_Q8_0 && kKvBf16 == kKvWireBf16 && kKvQ4 == kKvWireQ4_0 &&
              kQ4BlockBytes == llm::kQ4BlockBytes && kKvFp8 == kKvWireFp8 && kFp8BlockBytes == llm::kFp8BlockBytes);
StatusOr<int32_t> CudaBackend::KvElemOf(int32_t kv_type) {
  switch (kv_type) {
    case LLM_KV_AUTO:
    case LLM_KV_F32: return kKvBf16;  // KvCacheSpec's default (contexts refuse an explicit F32 on CUDA)
    case LLM_KV_F16: return kKvF16;
    case LLM_KV_Q8_0: return kKvQ8;
    case LLM_KV_Q4_0: return kKvQ4;  // rotated rows, as the CPU pool's and the wire's (kv_rotation.h)
    case LLM_KV_FP8_E4M3: return kKvFp8;  // compute capability 8.9 or newer (Init checks)
    default: return InvalidArgument("CUDA backend: unknown kv_type " + std::to_string(kv_type));
  }
}

StatusOr<std::unique_ptr<Backend>> CudaBackend::Create(const ModelConfig& c, const ModelWeights& w, KvCacheSpec* kv,
                                                       const CudaBackendOptions& options) {
  if (kv == nullptr) return InvalidArgument("CUDA backend: KvCacheSpec is NULL");
  // The family list and the features it lacks, shared with the context
  // builder's fallback (cuda_model_support.cpp).
  if (Status st = CudaSupportsModel(c); !st.ok()) return st;
  if (c.sliding_window < 0 || c.swa_pattern < 0) return InvalidArgument("CUDA backend: negative sliding window");
  if (!(c.embd_scale > 0.0f) || !(c.final_logit_softcap >= 0.0f) || !(c.attn_logit_softcap >= 0.0f))
    return InvalidArgument("CUDA backend: invalid embedding scale or logit soft-cap");
  if (c.n_vocab <= 0 || c.n_embd <= 0 || c.n_layer <= 0 || c.n_head <= 0 || c.n_head_kv <= 0 || c.head_dim <= 0 ||
      c.n_ff <= 0)
    return InvalidArgument("CUDA backend: model dimensions must be positive");
  if (c.n_head % c.n_head_kv != 0) return InvalidArgument("CUDA backend: n_head must be a multiple of n_head_kv");
  if (c.head_dim % 2 != 0 || c.head_dim > 256) return Unsupported("CUDA backend: head_dim must be even and at most 256");
  if ((c.n_head / c.n_head_kv) * c.head_dim > 4096)
    return Unsupported("CUDA backend: (n_head / n_head_kv) * head_dim above 4096");
  if (!(c.rms_eps >= 0.0f)) return InvalidArgument("CUDA backend: negative rms_eps");
  if (c.n_expert > 0) {
    if (c.n_expert_used < 1 || c.n_expert_used > c.n_expert || c.n_ff_exp <= 0 || c.n_ff_shexp < 0)
      return InvalidArgument("CUDA backend: expert counts out of range");
    if (!MoeRouteShapeSupported(c.n_embd, c.n_expert, c.n_expert_used))
      return Unsupported("CUDA backend: a router of " + std::to_string(c.n_expert) + " experts over n_embd " +
                         std::to_string(c.n_embd) + " (at most " + std::to_string(kMoeMaxExperts) +
                         " experts, n_embd + n_expert within 48 KiB of F32)");
    if (c.n_embd % 32 != 0 || c.n_ff_exp % 32 != 0)
      return Unsupported("CUDA backend: expert widths must be multiples of 32 (n_embd " + std::to_string(c.n_embd) +
                         ", n_ff_exp " + std::to_string(c.n_ff_exp) + ")");
  }
  if (!(c.attn_scale >= 0.0f)) return InvalidArgument("CUDA backend: attn_scale must be >= 0 (0: 1/sqrt(head_dim))");
  // Each side by its own type (kv_type_v: V's, 0 = as K's).
  for (const int32_t t : {kv->kv_type, KvTypeV(*kv)})
    if ((t == LLM_KV_Q4_0 || t == LLM_KV_FP8_E4M3) && c.head_dim % 32 != 0)
      return Unsupported(std::string("CUDA backend: a ") + (t == LLM_KV_Q4_0 ? "Q4_0" : "FP8 E4M3") +
                         (t == kv->kv_type ? "" : " V") + " KV cache needs head_dim a multiple of 32 (its 32-value "
                         "blocks); head_dim " + std::to_string(c.head_dim));
  if (kv->block_size <= 0 || kv->n_blocks <= 0)
    return InvalidArgument("CUDA backend: KV block_size and n_blocks must be positive");
  if (static_cast<int64_t>(w.layers.size()) != c.n_layer)
    return InvalidArgument("CUDA backend: weights have the wrong layer count");
  if (!(options.gpu_memory_fraction > 0.0f && options.gpu_memory_fraction <= 1.0f))
    return InvalidArgument("CUDA backend: gpu_memory_fraction must be in (0, 1]");
  CudaBackendOptions opt = options;
  if (opt.n_layers <= 0 || opt.n_layers > c.n_layer) opt.n_layers = c.n_layer;
  if (opt.first_layer < 0 || opt.first_layer >= opt.n_layers)
    return InvalidArgument("CUDA backend: first_layer " + std::to_string(opt.first_layer) + " outside [0, " +
                           std::to_string(opt.n_layers) + ")");
  // Host experts count the model's first MoE layers from layer 0; a backend
  // that starts later (a layer split over devices) has none of its own.
  if (opt.first_layer > 0 && opt.n_cpu_moe != 0 && c.n_expert > 0)
    return Unsupported("CUDA backend: n_cpu_moe with layers from " + std::to_string(opt.first_layer) +
                       " (a layer split over several devices) is not supported");
  std::unique_ptr<CudaBackend> b(new CudaBackend(c, opt));
  LLM_RETURN_IF_ERROR(b->Init(w, kv));
  return std::unique_ptr<Backend>(std::move(b));
}

Status CudaBackend::Init(const ModelWeights& w, KvCacheSpec* kv) {
  const EnvOptions env = ReadEnv();
  debug_ = env.cuda_debug;
  force_decode_ = env.cuda_force_decode_attention;
  int n_dev = 0;
  LLM_CUDA_TRY(cudaGetDeviceCount(&n_dev), "cudaGetDeviceCount");
  if (opt_.device < 0 || opt_.device >= n_dev)
    return InvalidArgument("CUDA backend: device " + std::to_string(opt_.device) + " does not exist (" +
                           std::to_string(n_dev) + " present)");
  LLM_CUDA_TRY(cudaSetDevice(opt_.device), "cudaSetDevice");
  cudaDeviceProp prop{};
  LLM_CUDA_TRY(cudaGetDeviceProperties(&prop, opt_.device), "cudaGetDeviceProperties");
  if (prop.major < 8)
    return Unsupported(std::string("CUDA backend: ") + prop.name + " is compute capability " +
                       std::to_string(prop.major) + "." + std::to_string(prop.minor) + "; 8.0 or newer needed (bf16 tensor cores)");
  // FP8 E4M3 widens with cvt.rn.f16x2.e4m3x2, an sm_89 instruction (Ada, Hopper and newer).
  const bool fp8_k = kv->kv_type == LLM_KV_FP8_E4M3, fp8_v = KvTypeV(*kv) == LLM_KV_FP8_E4M3;
  if ((fp8_k || fp8_v) && (prop.major < 8 || (prop.major == 8 && prop.minor < 9)))
    return Unsupported(std::string("CUDA backend: ") + (fp8_k ? "kv_type" : "kv_type_v") +
                       " fp8_e4m3 needs compute capability 8.9 or newer (FP8 conversions); " + prop.name + " is " +
                       std::to_string(prop.major) + "." + std::to_string(prop.minor) +
                       " (F16, BF16, Q8_0 and Q4_0 caches run there)");
  n_sm_ = prop.multiProcessorCount;
  LLM_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  LLM_CUBLAS_TRY(cublasCreate(&cublas_), "cublasCreate");
  LLM_CUBLAS_TRY(cublasSetStream(cublas_, stream_), "cublasSetStream");
  LLM_RETURN_IF_ERROR(cublas_ws_.Allocate(kCublasWorkspace, "cuBLAS workspace"));
  LLM_CUBLAS_TRY(cublasSetWorkspace(cublas_, cublas_ws_.get(), cublas_ws_.bytes()), "cublasSetWorkspace");

  LLM_RETURN_IF_ERROR(UploadWeights(w));
  LLM_ASSIGN_OR_RETURN(std::vector<float> freq_factors, RopeFreqFactors(cfg_, w.rope_freqs));
  LLM_ASSIGN_OR_RETURN(std::vector<double> inv_freq, RopeInvFreq(cfg_, freq_factors));
  LLM_RETURN_IF_ERROR(inv_freq_.Allocate(inv_freq.size() * sizeof(double), "RoPE frequencies"));
  LLM_CUDA_TRY(cudaMemcpy(inv_freq_.get(), inv_freq.data(), inv_freq.size() * sizeof(double), cudaMemcpyHostToDevice),
               "upload RoPE frequencies");
  rope_mag_ = RopeMagnitude(cfg_);
  if (cfg_.sliding_window > 0) {  // local layers' rotation: the CPU backend's rope_local_
    // gpt-oss's local layers rotate as its global ones (swa_rope_global: YaRN on every layer)
    const bool own = !cfg_.swa_rope_global;
    LLM_ASSIGN_OR_RETURN(std::vector<double> local, RopeInvFreq(cfg_, freq_factors, /*local=*/own));
    LLM_RETURN_IF_ERROR(inv_freq_local_.Allocate(local.size() * sizeof(double), "local RoPE frequencies"));
    LLM_CUDA_TRY(cudaMemcpy(inv_freq_local_.get(), local.data(), local.size() * sizeof(double), cudaMemcpyHostToDevice),
                 "upload local RoPE frequencies");
    rope_mag_local_ = RopeMagnitude(cfg_, /*local=*/own);
  }
  LLM_RETURN_IF_ERROR(dec_ws_.Allocate(DecodeAttnWorkspaceBytes(kDecodeSlots, cfg_.n_head, cfg_.head_dim),
                                       "decode attention workspace"));
  // Graphs are off under LLM_CUDA_DEBUG (it synchronises after each launch,
  // which a capture forbids) and with LLM_CUDA_GRAPHS=0.
  // A backend for the lower layers of a split model runs eagerly (backend.h:
  // CudaBackendOptions::n_layers).
  // Host-resident experts (n_cpu_moe) read the routing on the host mid-step.
  graphs_on_ = opt_.cuda_graphs && !debug_ && !env.cuda_graphs_off && !partial() && !from_hidden() &&
               HostMoeLayers() == 0;
  const int32_t mbt = std::max(opt_.max_batch_tokens, 1);
  const int32_t max_bucket = std::max(1, std::min(std::max(opt_.max_seqs, 1), mbt));
  // Activations for the largest bucket too, before the KV pool takes the
  // rest: a graph must never see its buffers reallocated.
  const int32_t rows = graphs_on_ ? max_bucket : 0;
  LLM_RETURN_IF_ERROR(Reserve(std::max(mbt, rows), std::max(std::min(mbt, 64), rows), 0));
  LLM_RETURN_IF_ERROR(AllocateKvPool(kv));
  if (graphs_on_) {
    for (int32_t b = 1; b < max_bucket; b *= 2) graphs_.push_back(Graph{b});
    graphs_.push_back(Graph{max_bucket});
    LLM_RETURN_IF_ERROR(InitGraphs());
  }
  // The uploads above are cudaMemcpy calls from pageable memory on the legacy
  // default stream. Such a copy may return once its source is staged, before
  // the data has landed, and stream_ is non-blocking: nothing orders the first
  // step's kernels after the copies. Waiting for the whole device here does.
  LLM_CUDA_TRY(cudaDeviceSynchronize(), "finish the weight uploads");
  return Status::Ok();
}

Status CudaBackend::UploadWeights(const ModelWeights& w) {
  const ModelConfig& c = cfg_;
  const int64_t E = c.n_embd, Q = c.q_dim(), KV = c.kv_dim(), F = c.n_ff, V = c.n_vocab;
  LLM_RETURN_IF_ERROR(CheckMatrix(w.token_embd, V, E, "token_embd"));
  if (!w.output.empty() && !partial()) LLM_RETURN_IF_ERROR(CheckMatrix(w.output, V, E, "output"));
  // Layers [first, n_layers) run here; the rest are other backends'.
  const int first = opt_.first_layer, n_layers = opt_.n_layers;
  for (int l = first; l < n_layers; ++l) {
    const LayerWeights& L = w.layers[l];
    const std::string p = "blk." + std::to_string(l) + ".";
    LLM_RETURN_IF_ERROR(CheckMatrix(L.wq, Q, E, p + "attn_q"));
    LLM_RETURN_IF_ERROR(CheckMatrix(L.wk, KV, E, p + "attn_k"));
    LLM_RETURN_IF_ERROR(CheckMatrix(L.wv, KV, E, p + "attn_v"));
    LLM_RETURN_IF_ERROR(CheckMatrix(L.wo, E, Q, p + "attn_output"));
    if (c.n_expert > 0) continue;  // UploadMoeLayer checks the experts
    LLM_RETURN_IF_ERROR(CheckMatrix(L.w_gate, F, E, p + "ffn_gate"));
    LLM_RETURN_IF_ERROR(CheckMatrix(L.w_up, F, E, p + "ffn_up"));
    LLM_RETURN_IF_ERROR(CheckMatrix(L.w_down, E, F, p + "ffn_down"));
  }
  const bool tied = w.output.empty() || w.output.data == w.token_embd.data;
  // The table is the embedding (first backend) or the tied classifier (last).
  if (!from_hidden() || (!partial() && tied)) LLM_RETURN_IF_ERROR(tok_embd_.Upload({&w.token_embd}, "token_embd"));
  if (partial()) {
    output_w_ = nullptr;  // the classifier and the final norm run on the other backend
  } else if (tied) {
    output_w_ = &tok_embd_;  // tied embeddings
  } else {
    LLM_RETURN_IF_ERROR(output_.Upload({&w.output}, "output"));
    output_w_ = &output_;
  }
  if (!partial()) LLM_RETURN_IF_ERROR(UploadNorm(w.output_norm, E, &out_norm_, "output_norm"));
  layers_.resize(n_layers);  // indexed by the model's layer number; [0, first) stay empty
  for (int l = first; l < n_layers; ++l) {
    const LayerWeights& L = w.layers[l];
    Layer& d = layers_[l];
    const std::string p = "blk." + std::to_string(l) + ".";
    LLM_RETURN_IF_ERROR(UploadNorm(L.attn_norm, E, &d.attn_norm, p + "attn_norm"));
    LLM_RETURN_IF_ERROR(UploadNorm(L.ffn_norm, E, &d.ffn_norm, p + "ffn_norm"));
    LLM_RETURN_IF_ERROR(d.wqkv.Upload({&L.wq, &L.wk, &L.wv}, p + "attn_qkv"));
    LLM_RETURN_IF_ERROR(d.wo.Upload({&L.wo}, p + "attn_output"));
    if (c.n_expert > 0) {
      LLM_RETURN_IF_ERROR(UploadMoeLayer(L, p, /*experts_on_device=*/l >= HostMoeLayers(), &d));
    } else {
      LLM_RETURN_IF_ERROR(d.wgu.Upload({&L.w_gate, &L.w_up}, p + "ffn_gate_up"));
      LLM_RETURN_IF_ERROR(d.wd.Upload({&L.w_down}, p + "ffn_down"));
    }
    if (c.qkv_bias) LLM_RETURN_IF_ERROR(UploadBiases(L, Q, KV, &d.bias, p));
    if (c.qk_norm) {
      LLM_RETURN_IF_ERROR(UploadNorm(L.q_norm, c.head_dim, &d.q_norm, p + "attn_q_norm"));
      LLM_RETURN_IF_ERROR(UploadNorm(L.k_norm, c.head_dim, &d.k_norm, p + "attn_k_norm"));
    }
    if (c.attn_sinks) LLM_RETURN_IF_ERROR(UploadNorm(L.attn_sinks, c.n_head, &d.sinks, p + "attn_sinks"));
    if (c.out_bias) LLM_RETURN_IF_ERROR(UploadNorm(L.bo, E, &d.bo, p + "attn_output.bias"));
    if (c.post_norms) {
      LLM_RETURN_IF_ERROR(UploadNorm(L.post_attn_norm, E, &d.post_attn, p + "post_attention_norm"));
      LLM_RETURN_IF_ERROR(UploadNorm(L.post_ffn_norm, E, &d.post_ffn, p + "post_ffw_norm"));
    }
  }
  LLM_RETURN_IF_ERROR(InitHostExperts(w));
  // Device bytes of the weights (what stats report against the file's
  // tensor bytes; the expert cache counts, host copies do not), and the
  // dequantization scratch the prefill path needs: the largest quantized
  // matrix, capped (MatMul goes in row chunks).
  weight_bytes_ = tok_embd_.bytes() + output_.bytes() + out_norm_.bytes() + expert_cache_.device_bytes();
  int64_t largest = 0, widest = 0;
  auto note = [&](const DeviceMatrix& m) {
    if (!m.quantized()) return;
    largest = std::max(largest, m.rows() * m.cols());
    widest = std::max(widest, m.cols());
  };
  note(tok_embd_);
  note(output_);
  for (const Layer& d : layers_) {
    weight_bytes_ += d.attn_norm.bytes() + d.ffn_norm.bytes() + d.wqkv.bytes() + d.wo.bytes() + d.wgu.bytes() +
                     d.wd.bytes() + d.bias.bytes() + d.q_norm.bytes() + d.k_norm.bytes() + d.post_attn.bytes() +
                     d.post_ffn.bytes() + d.sinks.bytes() + d.bo.bytes() + d.router.bytes() + d.router_b.bytes() +
                     d.exp_bg.bytes() + d.exp_bu.bytes() + d.exp_bd.bytes() + d.exp_gate.bytes() + d.exp_up.bytes() +
                     d.exp_down.bytes() + d.shexp_gate_inp.bytes() + d.shexp_gu.bytes() + d.shexp_d.bytes();
    for (const DeviceMatrix* m : {&d.wqkv, &d.wo, &d.wgu, &d.wd, &d.shexp_gu, &d.shexp_d}) note(*m);
  }
  decode_weight_bytes_ = weight_bytes_;
  // A MoE layer's decode step reads the k experts its token chose, not all.
  for (const Layer& d : layers_)
    if (c.n_expert > 0)
      decode_weight_bytes_ -= static_cast<int64_t>(c.n_expert - c.n_expert_used) *
                              static_cast<int64_t>(d.exp_gate.expert_bytes() + d.exp_up.expert_bytes() +
                                                   d.exp_down.expert_bytes());
  if (output_w_ != &tok_embd_)
    decode_weight_bytes_ -= static_cast<int64_t>(tok_embd_.bytes()) - static_cast<int64_t>(tok_embd_.bytes()) / V;
  if (largest > 0) {
    const int64_t elems = std::max(widest, std::min(largest, kDequantScratchElems));
    LLM_RETURN_IF_ERROR(dequant_scratch_.Allocate(static_cast<size_t>(elems) * sizeof(bf16), "dequantization scratch"));
  }
  return Status::Ok();
}

bool CudaBackend::weights_quantized() const {
  if (layers_.empty()) return false;
  for (size_t l = static_cast<size_t>(opt_.first_layer); l < layers_.size(); ++l) {
    const Layer& d = layers_[l];
    if (!d.wqkv.quantized() || !d.wo.quantized()) return false;
    if (cfg_.n_expert > 0) {
      for (const DeviceExperts* e : {&d.exp_gate, &d.exp_up, &d.exp_down})
        if (e->stack().type == kExpertBf16) return false;
      if (cfg_.n_ff_shexp > 0 && (!d.shexp_gu.quantized() || !d.shexp_d.quantized())) return false;
    } else if (!d.wgu.quantized() || !d.wd.quantized()) {
      return false;
    }
  }
  return true;
}

Status CudaBackend::AllocateKvPool(KvCacheSpec* kv) {
  LLM_ASSIGN_OR_RETURN(const int32_t elem, KvElemOf(kv->kv_type));
  LLM_ASSIGN_OR_RETURN(const int32_t elem_v, KvElemOf(KvTypeV(*kv)));
  kv_ = KvPoolLayout{opt_.n_layers - opt_.first_layer, cfg_.n_head_kv, cfg_.head_dim, kv->block_size, elem,
                     elem_v != elem ? elem_v : 0};  // this backend's layers only, each side in its type
  if (!kv_.Aligned()) {
    static const char* const kNames[] = {"auto", "f32", "f16", "q8_0", "q4_0", "fp8_e4m3"};
    return Unsupported(std::string("CUDA backend: kv_type ") + kNames[kv->kv_type] + " with kv_type_v " +
                       kNames[KvTypeV(*kv)] + " at kv_block_size " + std::to_string(kv->block_size) +
                       " would start V's tiles (or the next layer's) off the alignment the attention kernels' "
                       "loads need; a kv_block_size that is a multiple of 8 always fits");
  }
  const int64_t block_bytes = kv_.block_bytes();
  size_t free_b = 0, total_b = 0;
  LLM_CUDA_TRY(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  // What this backend may still take: its share of the device, less what is
  // in use now (by it and by anyone else), less headroom for logits buffers
  // that grow later and for cuBLAS/driver allocations.
  const double used = static_cast<double>(total_b - free_b);
  const double headroom = static_cast<double>(defaults::kCudaHeadroomBytes);
  const double budget = static_cast<double>(total_b) * opt_.gpu_memory_fraction - used - headroom;
  // One block beyond the engine's pool is the scratch block graph padding
  // writes into; it comes out of the same budget.
  const int64_t fit =
      budget > 0 ? std::max<int64_t>(0, static_cast<int64_t>(budget / static_cast<double>(block_bytes)) - 1) : 0;
  int64_t n = kv->n_blocks;
  if (opt_.fit_kv_blocks) n = std::min<int64_t>(n, fit);
  const auto mib = [](double b) { return std::to_string(static_cast<int64_t>(b / (1 << 20))) + " MiB"; };
  if (n < std::max(opt_.min_kv_blocks, 1) || n > fit)
    return OutOfMemory("CUDA backend: the KV pool needs " + std::to_string(std::max<int64_t>(n, opt_.min_kv_blocks)) +
                       " blocks of " + mib(static_cast<double>(block_bytes)) + " but " + std::to_string(fit) +
                       " fit in gpu_memory_fraction " + std::to_string(opt_.gpu_memory_fraction) + " of " +
                       mib(static_cast<double>(total_b)) + " (" + mib(used) + " in use)");
  if ((n + 1) * kv->block_size > std::numeric_limits<int32_t>::max() || n >= std::numeric_limits<int32_t>::max())
    return InvalidArgument("CUDA backend: KV pool positions exceed 2^31");
  LLM_RETURN_IF_ERROR(kv_pool_.Allocate(static_cast<size_t>((n + 1) * block_bytes), "KV pool"));
  LLM_CUDA_TRY(cudaMemsetAsync(kv_pool_.get(), 0, kv_pool_.bytes(), stream_), "clear the KV pool");
  LLM_CUDA_TRY(cudaStreamSynchronize(stream_), "clear the KV pool");
  n_blocks_ = static_cast<int32_t>(n);
  scratch_block_ = n_blocks_;
  capacity_ = n * kv->block_size;
  kv->n_blocks = n_blocks_;
  return Status::Ok();
}

std::vector<DeviceMemory> CudaBackend::device_memory() const {
  DeviceMemory d;
  d.device = opt_.device;
  d.first_layer = opt_.first_layer;
  d.end_layer = opt_.n_layers;
  d.weights = weight_bytes_;
  d.kv_pool = static_cast<int64_t>(kv_pool_.bytes());
  size_t free_b = 0, total_b = 0;
  int prev = 0;
  if (cudaGetDevice(&prev) == cudaSuccess && cudaSetDevice(opt_.device) == cudaSuccess &&
      cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
    d.used = static_cast<int64_t>(total_b - free_b);
    d.total = static_cast<int64_t>(total_b);
  }
  cudaGetLastError();  // a failed query leaves used/total 0, not a sticky error
  cudaSetDevice(prev);
  return {d};
}

CudaBackend::~CudaBackend() {
  if (stream_ != nullptr) {
    cudaSetDevice(opt_.device);
    cudaStreamSynchronize(stream_);
  }
  if (copy_stream_ != nullptr) cudaStreamSynchronize(copy_stream_);
  DestroyGraphs();
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (prefetch_done_ != nullptr) cudaEventDestroy(prefetch_done_);
  if (copy_stream_ != nullptr) cudaStreamDestroy(copy_stream_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

CudaBackend::ActivationSizes CudaBackend::SizeActivations(const ModelConfig& c, int64_t n_tok, int64_t n_out) {
  const size_t t = static_cast<size_t>(n_tok), E = static_cast<size_t>(c.n_embd), Q = static_cast<size_t>(c.q_dim()),
               KV = static_cast<size_t>(c.kv_dim()), FW = static_cast<size_t>(FfnWidthOf(c));
  ActivationSizes a;
  a.x = a.delta = t * E * 4;
  a.qkv = t * (Q + 2 * KV) * 4;
  a.q = a.att = t * Q * 2;
  a.gu = t * 2 * FW * 4;
  a.h = t * FW * 2;
  if (c.n_expert > 0) {
    const size_t K = static_cast<size_t>(c.n_expert_used), NE = static_cast<size_t>(c.n_expert);
    a.moe_pick = t * (2 * K + 1) * 4;
    a.moe_order = t * 2 * K * 4;
    a.moe_items = (t * K + NE) * sizeof(MoeWorkItem);
    a.moe_y = t * K * E * 4;
    if (c.n_ff_shexp > 0) a.moe_shared = t * E * 4;
  }
  a.cos_sin = t * static_cast<size_t>(c.rope_dim) * 4;
  if (c.sliding_window > 0) a.cos_sin_local = a.cos_sin;
  a.logits = static_cast<size_t>(n_out) * static_cast<size_t>(c.n_vocab) * 4;
  a.xn = static_cast<size_t>(std::max(n_tok, n_out)) * E * 2;
  return a;
}

size_t CudaBackend::ActivationSizes::total() const {
  return x + delta + qkv + q + att + gu + h + moe_pick + moe_order + moe_items + moe_y + moe_shared + cos_sin +
         cos_sin_local + logits + xn;
}

Status CudaBackend::Reserve(int64_t n_tok, int64_t n_out, int64_t n_meta) {
  if (partial()) n_out = 0;  // no classifier here: no logits buffer (n_out x n_vocab) on a device too small already
  const int64_t new_tok = std::max(cap_tok_, n_tok), new_out = std::max(cap_out_, n_out);
  const ActivationSizes a = SizeActivations(cfg_, new_tok, new_out);
  const size_t xn_bytes = a.xn;
  if (new_tok > cap_tok_ || new_out > cap_out_ || xn_.bytes() < xn_bytes) {
    // Ordered after earlier work on the stream: the old buffers may still be read.
    LLM_CUDA_TRY(cudaStreamSynchronize(stream_), "synchronise before growing buffers");
    ClearGraphs();  // they point at the buffers about to move
  }
  if (new_tok > cap_tok_) {
    // Zero until every buffer has its new size: a failure half-way leaves a
    // capacity the next call re-allocates from scratch, never a stale one.
    cap_tok_ = 0;
    LLM_RETURN_IF_ERROR(x_.Allocate(a.x, "residual stream"));
    LLM_RETURN_IF_ERROR(delta_.Allocate(a.delta, "sub-block output"));
    LLM_RETURN_IF_ERROR(qkv_.Allocate(a.qkv, "qkv"));
    LLM_RETURN_IF_ERROR(q_.Allocate(a.q, "queries"));
    LLM_RETURN_IF_ERROR(att_.Allocate(a.att, "attention output"));
    LLM_RETURN_IF_ERROR(gu_.Allocate(a.gu, "gate/up"));
    LLM_RETURN_IF_ERROR(h_.Allocate(a.h, "ffn hidden"));
    if (cfg_.n_expert > 0) {
      LLM_RETURN_IF_ERROR(moe_pick_.Allocate(a.moe_pick, "expert picks"));
      LLM_RETURN_IF_ERROR(moe_order_.Allocate(a.moe_order, "expert order"));
      LLM_RETURN_IF_ERROR(moe_items_.Allocate(a.moe_items, "expert work items"));
      LLM_RETURN_IF_ERROR(moe_y_.Allocate(a.moe_y, "expert outputs"));
      if (cfg_.n_ff_shexp > 0) LLM_RETURN_IF_ERROR(moe_shared_.Allocate(a.moe_shared, "shared expert output"));
    }
    LLM_RETURN_IF_ERROR(cos_sin_.Allocate(a.cos_sin, "rope angles"));
    if (cfg_.sliding_window > 0) LLM_RETURN_IF_ERROR(cos_sin_local_.Allocate(a.cos_sin_local, "local rope angles"));
    cap_tok_ = new_tok;
  }
  if (new_out > cap_out_) {
    cap_out_ = 0;
    LLM_RETURN_IF_ERROR(logits_.Allocate(a.logits, "logits"));
    cap_out_ = new_out;
  }
  if (xn_.bytes() < xn_bytes) LLM_RETURN_IF_ERROR(xn_.Allocate(xn_bytes, "normed rows"));
  const size_t meta_bytes = static_cast<size_t>(n_meta) * sizeof(int32_t);
  if (meta_dev_.bytes() < meta_bytes || meta_pinned_.bytes() < meta_bytes) {  // graphs never read these
    LLM_CUDA_TRY(cudaStreamSynchronize(stream_), "synchronise before growing metadata");
    const size_t grown = std::max(meta_bytes, meta_dev_.bytes() * 2);
    LLM_RETURN_IF_ERROR(meta_dev_.Allocate(grown, "step metadata"));
    LLM_RETURN_IF_ERROR(meta_pinned_.Allocate(grown, "step metadata (host)"));
  }
  return Status::Ok();
}

Status CudaBackend::Validate(const Batch& batch, const float* logits, bool need_logits) {
  if (!batch.embd.empty() || !batch.attn_end.empty() || !batch.mrope_pos.empty())
    return Unsupported("CUDA backend: image inputs (embedding rows, bidirectional spans, M-RoPE positions) run on "
                       "the CPU backend only");
  const BatchLimits limits{cfg_.n_vocab, capacity_, kv_.block_size, n_blocks_};
  LLM_ASSIGN_OR_RETURN(const BatchExtent e, CheckBatch(batch, !need_logits || logits != nullptr, limits, &tok_seq_));
  return LayOutMetadata(batch, e);
}

Status CudaBackend::CopyKvBlock(int32_t src, int32_t dst) {
  if (src < 0 || src >= n_blocks_ || dst < 0 || dst >= n_blocks_)
    return InvalidArgument("CopyKvBlock: block id outside [0, " + std::to_string(n_blocks_) + ")");
  if (src == dst) return Status::Ok();
  LLM_CUDA_TRY(cudaSetDevice(opt_.device), "cudaSetDevice");
  const size_t bytes = static_cast<size_t>(kv_.block_bytes());
  LLM_CUDA_TRY(cudaMemcpyAsync(kv_pool_.get<uint8_t>() + static_cast<int64_t>(dst) * kv_.block_bytes(),
                               kv_pool_.get<uint8_t>() + static_cast<int64_t>(src) * kv_.block_bytes(), bytes,
                               cudaMemcpyDeviceToDevice, stream_),
               "CopyKvBlock");
  return Status::Ok();
}

Status CudaBackend::ReserveSwapSpace(int32_t n_slots) {
  if (n_slots < 0) return InvalidArgument("ReserveSwapSpace: negative slot count");
  LLM_CUDA_TRY(cudaSetDevice(opt_.device), "cudaSetDevice");
  LLM_CUDA_TRY(cudaStreamSynchronize(stream_), "ReserveSwapSpace: waiting for queued copies");
  n_swap_slots_ = 0;
  swap_host_.Reset();
  if (n_slots == 0) return Status::Ok();
  const size_t bytes = static_cast<size_t>(n_slots) * static_cast<size_t>(kv_block_bytes());
  LLM_RETURN_IF_ERROR(swap_host_.Allocate(bytes, "the KV swap space"));
  n_swap_slots_ = n_slots;
  return Status::Ok();
}

// No synchronisation: a later kernel or copy on stream_ that reuses a block
// or a slot runs after these copies; the host never reads the swap space.
Status CudaBackend::SwapKvBlocks(std::span<const KvSwap> moves, bool to_host) {
  const char* what = to_host ? "SwapOutKvBlocks" : "SwapInKvBlocks";
  LLM_RETURN_IF_ERROR(CheckKvSwaps(moves, n_blocks_, n_swap_slots_, what));
  if (moves.empty()) return Status::Ok();
  LLM_CUDA_TRY(cudaSetDevice(opt_.device), "cudaSetDevice");
  const int64_t stride = kv_.block_bytes();
  for (size_t i = 0; i < moves.size();) {
    size_t n = 1;  // moves[i .. i+n) are consecutive in both the pool and the swap space
    while (i + n < moves.size() && moves[i + n].block == moves[i].block + static_cast<int32_t>(n) &&
           moves[i + n].slot == moves[i].slot + static_cast<int32_t>(n))
      ++n;
    uint8_t* dev = kv_pool_.get<uint8_t>() + static_cast<int64_t>(moves[i].block) * stride;
    uint8_t* host = swap_host_.get<uint8_t>() + static_cast<int64_t>(moves[i].slot) * stride;
    const size_t bytes = n * static_cast<size_t>(stride);
    if (to_host) {
      LLM_CUDA_TRY(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, stream_), what);
    } else {
      LLM_CUDA_TRY(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, stream_), what);
    }
    i += n;
  }
  return Status::Ok();
}

Status CudaBackend::SwapOutKvBlocks(std::span<const KvSwap> moves) { return SwapKvBlocks(moves, /*to_host=*/true); }

Status CudaBackend::SwapInKvBlocks(std::span<const KvSwap> moves) { return SwapKvBlocks(moves, /*to_host=*/false); }

}  // namespace cuda
}  // namespace llm
