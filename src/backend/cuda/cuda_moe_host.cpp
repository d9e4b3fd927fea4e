// Mixture-of-Experts layers whose experts stay in host memory
// (CudaBackendOptions::n_cpu_moe; the scheme in moe_host.h). The router
// has run on the device (CudaBackend::MoeRoute); its picks come to the host,
// which then takes one of two ways for this layer and step:
//
//   copy  experts missing from the device cache -> slots (page-locked ->
//         device), the layer's tables -> those slots, then the same kernels
//         as a device layer: MoeExperts + MoeSharedAndCombine(k).
//   cpu   x rows (F32) -> host, rmsnorm, each chosen expert's gate/up/act/
//         down over its tokens with the CPU kernels [gpt-oss: biases, the
//         clamped SwiGLU], Σ w·y per token -> the
//         device as one row per token (slot t, weight 1), then
//         MoeSharedAndCombine(1) adds the shared expert as usual.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <tuple>

#include "backend/cuda/cuda_backend.h"
#include "backend/validate.h"

namespace llm::cuda {
namespace {

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int32_t CudaBackend::HostMoeLayers() const {
  if (cfg_.n_expert <= 0 || opt_.n_cpu_moe == 0) return 0;
  const int32_t n_layers = opt_.n_layers > 0 && opt_.n_layers < cfg_.n_layer ? opt_.n_layers : cfg_.n_layer;
  return opt_.n_cpu_moe < 0 ? n_layers : std::min(opt_.n_cpu_moe, n_layers);
}

Status CudaBackend::InitHostExperts(const ModelWeights& w) {
  const ModelConfig& c = cfg_;
  if (opt_.n_cpu_moe < -1) return InvalidArgument("n_cpu_moe " + std::to_string(opt_.n_cpu_moe) + " must be >= -1");
  if (opt_.moe_host_policy < 0 || opt_.moe_host_policy > 2)
    return InvalidArgument("moe_host_policy " + std::to_string(opt_.moe_host_policy) + " is not an LLM_MOE_HOST_* value");
  const int32_t n_layers = static_cast<int32_t>(layers_.size());
  const int32_t n_host = HostMoeLayers();
  if (n_host == 0) return Status::Ok();
  size_t slot_bytes = 0;
  for (int32_t l = 0; l < n_host; ++l) {
    auto h = std::make_unique<HostExpertLayer>();
    LLM_RETURN_IF_ERROR(h->Load(w.layers[l], c, /*keep_quantized=*/true, "blk." + std::to_string(l) + "."));
    slot_bytes = std::max(slot_bytes, h->expert_bytes());
    moe_stats_.host_bytes += static_cast<int64_t>(h->host_bytes());
    layers_[l].host = static_cast<int32_t>(host_experts_.size());
    host_experts_.push_back(std::move(h));
    std::vector<float> norm(static_cast<size_t>(c.n_embd));
    cpu::DequantizeRow(w.layers[l].ffn_norm, 0, norm.data());
    host_ffn_norm_.push_back(std::move(norm));
    HostExpertBias b;  // gpt-oss: the experts' biases, for the CPU way
    if (c.expert_bias) {
      const LayerWeights& L = w.layers[l];
      const std::string p = "blk." + std::to_string(l) + ".";
      for (auto [v, cols, out, name] : {std::tuple{&L.exp_gate_b, c.n_ff_exp, &b.gate, "ffn_gate_exps.bias"},
                                        std::tuple{&L.exp_up_b, c.n_ff_exp, &b.up, "ffn_up_exps.bias"},
                                        std::tuple{&L.exp_down_b, c.n_embd, &b.down, "ffn_down_exps.bias"}}) {
        LLM_RETURN_IF_ERROR(CheckWeightMatrix(*v, c.n_expert, cols, p + name, "CUDA backend"));
        out->resize(static_cast<size_t>(c.n_expert) * cols);
        for (int64_t e = 0; e < c.n_expert; ++e) cpu::DequantizeRow(*v, e, out->data() + e * cols);
      }
    }
    host_exp_bias_.push_back(std::move(b));
  }
  int64_t slots = c.n_expert;
  if (opt_.moe_cache_bytes > 0) {
    slots = opt_.moe_cache_bytes / static_cast<int64_t>(slot_bytes);
    if (slots < 1)
      return InvalidArgument("moe_cache_bytes " + std::to_string(opt_.moe_cache_bytes) +
                             " holds no expert (one is " + std::to_string(slot_bytes) + " bytes)");
    slots = std::min<int64_t>(slots, static_cast<int64_t>(n_host) * c.n_expert);
  }
  LLM_RETURN_IF_ERROR(expert_cache_.Init(static_cast<int32_t>(slots), slot_bytes, n_layers, c.n_expert));
  affinity_ = ExpertAffinity(n_host, c.n_expert);
  if (opt_.moe_prefetch && n_host > 1) {
    LLM_CUDA_TRY(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking), "create the expert prefetch stream");
    LLM_CUDA_TRY(cudaEventCreateWithFlags(&prefetch_done_, cudaEventDisableTiming), "create the prefetch event");
  }
  moe_stats_.host_layers = n_host;
  moe_stats_.cache_slots = static_cast<int32_t>(slots);
  moe_stats_.cache_bytes = static_cast<int64_t>(expert_cache_.device_bytes());
  return Status::Ok();
}

Status CudaBackend::MoeHostFeedForward(int l, int32_t nt) {
  const int32_t NE = cfg_.n_expert, K = cfg_.n_expert_used, n_picks = nt * K;
  try {
    moe_pick_host_.resize(static_cast<size_t>(n_picks));
  } catch (const std::bad_alloc&) {
    return OutOfMemory("CUDA backend: host buffer for expert picks");
  }
  LLM_CUDA_TRY(cudaMemcpyAsync(moe_pick_host_.data(), moe_pick_.get(), static_cast<size_t>(n_picks) * sizeof(int32_t),
                               cudaMemcpyDeviceToHost, stream_),
               "copy expert picks to the host");
  LLM_CUDA_TRY(cudaStreamSynchronize(stream_), "MoE router");
  std::vector<int32_t> experts;  // the step's distinct experts, ascending
  std::vector<char> seen(static_cast<size_t>(NE), 0);
  int64_t miss_bytes = 0;
  const HostExpertLayer& H = *host_experts_[layers_[l].host];
  for (int32_t e : moe_pick_host_) {
    if (e < 0 || e >= NE) return InternalError("CUDA backend: the router picked expert " + std::to_string(e));
    if (seen[e]) continue;
    seen[e] = 1;
    experts.push_back(e);
  }
  std::sort(experts.begin(), experts.end());
  for (int32_t e : experts)
    if (!expert_cache_.Holds(l, e)) miss_bytes += static_cast<int64_t>(H.expert_bytes());
  const bool fits = static_cast<int32_t>(experts.size()) <= expert_cache_.slots();
  moe_stats_.tokens += nt;
  LLM_RETURN_IF_ERROR(MoeHostObserve(l, nt));
  for (int32_t e : experts) {  // the prediction made while the previous layer ran
    if (moe_predicted_layer_ != l) break;
    ++moe_stats_.predicted_wanted;
    if (std::find(moe_predicted_.begin(), moe_predicted_.end(), e) != moe_predicted_.end()) ++moe_stats_.predicted_right;
    if (std::find(moe_prefetched_.begin(), moe_prefetched_.end(), e) != moe_prefetched_.end()) ++moe_stats_.prefetch_used;
  }
  moe_predicted_layer_ = -1;
  std::vector<int32_t> keep;  // the slots this layer's kernels read
  if (moe_cost_.Choose(opt_.moe_host_policy, fits, miss_bytes, n_picks) == MoeHostWay::kCopy) {
    ++moe_stats_.copy_steps;
    LLM_RETURN_IF_ERROR(MoeHostCopy(l, nt, experts));
    for (int32_t e : experts) keep.push_back(expert_cache_.Find(l, e));
  } else {
    ++moe_stats_.cpu_steps;
    LLM_RETURN_IF_ERROR(MoeHostCpu(l, nt));
  }
  return MoeHostPrefetch(l, nt, keep);
}

// Prefetches queued while the previous layer ran are complete before this
// layer reads the cache (the copies of one stream see each other; the
// device kernels on stream_ wait for them here). The affinity counts take
// this layer's picks, paired with the previous host layer's of the same
// tokens.
Status CudaBackend::MoeHostObserve(int l, int32_t nt) {
  if (prefetch_pending_) {
    LLM_CUDA_TRY(cudaEventSynchronize(prefetch_done_), "expert prefetch");
    prefetch_pending_ = false;
  }
  const int32_t h = layers_[l].host;
  affinity_.ObserveLayer(h, moe_pick_host_);
  if (moe_prev_layer_ == h - 1 && moe_prev_picks_.size() == moe_pick_host_.size())
    affinity_.ObservePair(h - 1, moe_prev_picks_, moe_pick_host_, cfg_.n_expert_used);
  moe_prev_picks_ = moe_pick_host_;
  moe_prev_layer_ = h;
  return Status::Ok();
}

// Layer l+1's predicted experts (as many as layer l used, within the slots
// layer l's kernels do not read) copied into the cache on copy_stream_.
Status CudaBackend::MoeHostPrefetch(int l, int32_t nt, const std::vector<int32_t>& keep) {
  const int32_t h = layers_[l].host;
  if (copy_stream_ == nullptr || l + 1 >= static_cast<int>(layers_.size()) || layers_[l + 1].host != h + 1)
    return Status::Ok();
  int32_t distinct = 0;
  {
    std::vector<char> seen(static_cast<size_t>(cfg_.n_expert), 0);
    for (int32_t e : moe_pick_host_) distinct += seen[e] ? 0 : (seen[e] = 1);
  }
  const int32_t room = expert_cache_.slots() - static_cast<int32_t>(keep.size());
  moe_predicted_ = affinity_.Predict(h, moe_pick_host_, cfg_.n_expert_used, std::min(distinct, std::max(room, 0)));
  moe_predicted_layer_ = l + 1;
  moe_prefetched_.clear();
  const HostExpertLayer& N = *host_experts_[h + 1];
  std::vector<int32_t> kept = keep;
  for (int32_t e : moe_predicted_) {
    if (expert_cache_.Holds(l + 1, e)) continue;
    const int32_t s = expert_cache_.Insert(l + 1, e, kept);
    if (s < 0) break;
    kept.push_back(s);
    size_t off = 0;
    for (int p = 0; p < kNumParts; ++p) {
      LLM_CUDA_TRY(cudaMemcpyAsync(expert_cache_.slot(s) + off, N.bytes_of(p, e), N.part_bytes(p),
                                   cudaMemcpyHostToDevice, copy_stream_),
                   "prefetch an expert");
      off += N.part_bytes(p);
    }
    moe_prefetched_.push_back(e);
    ++moe_stats_.prefetch_experts;
    moe_stats_.bytes_copied += static_cast<int64_t>(N.expert_bytes());
  }
  if (!moe_prefetched_.empty()) {
    LLM_CUDA_TRY(cudaEventRecord(prefetch_done_, copy_stream_), "expert prefetch");
    prefetch_pending_ = true;
  }
  (void)nt;
  return Status::Ok();
}

Status CudaBackend::MoeHostCopy(int l, int32_t nt, const std::vector<int32_t>& experts) {
  HostExpertLayer& H = *host_experts_[layers_[l].host];
  const auto t0 = std::chrono::steady_clock::now();
  // Hits first, so a miss never evicts an expert this step is about to use.
  std::vector<int32_t> kept, slot_of(experts.size(), -1);
  for (size_t i = 0; i < experts.size(); ++i) {
    slot_of[i] = expert_cache_.Find(l, experts[i]);
    if (slot_of[i] >= 0) {
      ++moe_stats_.cache_hits;
      kept.push_back(slot_of[i]);
    }
  }
  int64_t copied = 0;
  for (size_t i = 0; i < experts.size(); ++i) {
    const int32_t e = experts[i];
    int32_t s = slot_of[i];
    if (s < 0) {
      s = expert_cache_.Insert(l, e, kept);
      if (s < 0) return InternalError("CUDA backend: the expert cache has no free slot");
      kept.push_back(s);
      ++moe_stats_.cache_misses;
      size_t off = 0;
      for (int p = 0; p < kNumParts; ++p) {
        LLM_CUDA_TRY(cudaMemcpyAsync(expert_cache_.slot(s) + off, H.bytes_of(p, e), H.part_bytes(p),
                                     cudaMemcpyHostToDevice, stream_),
                     "copy an expert to the device cache");
        off += H.part_bytes(p);
      }
      copied += static_cast<int64_t>(H.expert_bytes());
    }
    size_t off = 0;
    for (int p = 0; p < kNumParts; ++p) {
      H.table_host(p)[e] = expert_cache_.slot(s) + off;
      off += H.part_bytes(p);
    }
  }
  // Experts no token chose keep a valid address (never read: no work item
  // names them), the first slot.
  for (int p = 0; p < kNumParts; ++p)
    for (int32_t e = 0; e < cfg_.n_expert; ++e)
      if (std::find(experts.begin(), experts.end(), e) == experts.end()) H.table_host(p)[e] = expert_cache_.slot(0);
  // The tables' page-locked staging is rewritten only by this layer's next
  // step, which first waits for the stream (the picks' copy).
  LLM_CUDA_TRY(cudaMemcpyAsync(H.table_dev(0), H.table_host(0), kNumParts * H.table_bytes(), cudaMemcpyHostToDevice,
                               stream_),
               "upload expert tables");
  if (copied > 0) {
    LLM_CUDA_TRY(cudaStreamSynchronize(stream_), "copy experts to the device cache");
    moe_cost_.NoteCopy(copied, Seconds(t0));
    moe_stats_.bytes_copied += copied;
  }
  ExpertMatrix gu, d;
  gu.n_parts = 2;
  gu.part[0] = H.stack(kPartGate);
  gu.part[1] = H.stack(kPartUp);
  gu.rows = gu.part[0].rows + gu.part[1].rows;
  gu.cols = gu.part[0].cols;
  d.n_parts = 1;
  d.part[0] = H.stack(kPartDown);
  d.rows = d.part[0].rows;
  d.cols = d.part[0].cols;
  LLM_RETURN_IF_ERROR(MoeExperts(l, nt, gu, d));
  return MoeSharedAndCombine(l, nt, cfg_.n_expert_used);
}

Status CudaBackend::MoeHostCpu(int l, int32_t nt) {
  const HostExpertLayer& H = *host_experts_[layers_[l].host];
  const int64_t E = cfg_.n_embd, FE = cfg_.n_ff_exp, K = cfg_.n_expert_used, NE = cfg_.n_expert;
  const int64_t n_picks = nt * K;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    moe_weight_host_.resize(static_cast<size_t>(n_picks));
    moe_x_host_.resize(static_cast<size_t>(nt * E));
    moe_out_host_.assign(static_cast<size_t>(nt * E), 0.0f);
    moe_rows_x_.resize(static_cast<size_t>(nt * E));
    moe_rows_g_.resize(static_cast<size_t>(nt * FE));
    moe_rows_u_.resize(static_cast<size_t>(nt * FE));
    moe_rows_y_.resize(static_cast<size_t>(nt * E));
    moe_rows_q_.resize(static_cast<size_t>(nt * std::max(E, FE) / 32 + 1));
    moe_ones_slots_.resize(static_cast<size_t>(2 * nt));
  } catch (const std::bad_alloc&) {
    return OutOfMemory("CUDA backend: host buffers for experts computed on the CPU");
  }
  float* pick_weight_dev = reinterpret_cast<float*>(moe_pick_.get<int32_t>() + n_picks);
  LLM_CUDA_TRY(cudaMemcpyAsync(moe_weight_host_.data(), pick_weight_dev, static_cast<size_t>(n_picks) * sizeof(float),
                               cudaMemcpyDeviceToHost, stream_),
               "copy expert weights to the host");
  LLM_CUDA_TRY(cudaMemcpyAsync(moe_x_host_.data(), x_.get(), static_cast<size_t>(nt * E) * sizeof(float),
                               cudaMemcpyDeviceToHost, stream_),
               "copy hidden states to the host");
  LLM_CUDA_TRY(cudaStreamSynchronize(stream_), "copy hidden states to the host");

  // xn = rmsnorm(x) · ffn_norm, F32 as the router's (and the CPU backend's)
  const cpu::Kernels& k = cpu::BestKernels();
  const float* norm = host_ffn_norm_[layers_[l].host].data();
  for (int64_t t = 0; t < nt; ++t)
    k.rmsnorm(moe_x_host_.data() + t * E, norm, E, cfg_.rms_eps, moe_x_host_.data() + t * E);

  const bool gelu = cfg_.ffn_act == FfnActivation::kGeluTanh;
  const bool oai = cfg_.ffn_act == FfnActivation::kSwigluOai;
  const HostExpertBias& bias = host_exp_bias_[layers_[l].host];
  const bool biased = cfg_.expert_bias;
  auto matmul = [&](const WeightView& w, const float* x, int64_t n, float* y) {
    cpu::MatMulArgs a;
    a.w = &w;
    a.x = x;
    a.ld_x = w.cols;
    if (IsBlockQuantized(w.type)) {
      for (int64_t t = 0; t < n; ++t) k.quantize_act(x + t * w.cols, w.cols, moe_rows_q_.data() + t * (w.cols / 32));
      a.xq = moe_rows_q_.data();
      a.ld_xq = w.cols / 32;
    }
    a.n_tok = n;
    a.y = y;
    a.ld_y = w.rows;
    a.row_begin = 0;
    a.row_end = w.rows;
    k.matmul(a);
  };
  std::vector<int32_t> rows;  // pick indices t * K + j of one expert
  for (int32_t e = 0; e < NE; ++e) {
    rows.clear();
    for (int64_t i = 0; i < n_picks; ++i)
      if (moe_pick_host_[i] == e) rows.push_back(static_cast<int32_t>(i));
    if (rows.empty()) continue;
    const int64_t c = static_cast<int64_t>(rows.size());
    for (int64_t r = 0; r < c; ++r)
      std::memcpy(moe_rows_x_.data() + r * E, moe_x_host_.data() + (rows[r] / K) * E, E * sizeof(float));
    matmul(H.view(kPartGate, e), moe_rows_x_.data(), c, moe_rows_g_.data());
    matmul(H.view(kPartUp, e), moe_rows_x_.data(), c, moe_rows_u_.data());
    for (int64_t r = 0; r < c; ++r) {
      float* g = moe_rows_g_.data() + r * FE;
      const float* u = moe_rows_u_.data() + r * FE;
      if (oai) {  // gpt-oss: the CPU backend's BiasedExpertUp
        const float* bg = biased ? bias.gate.data() + static_cast<int64_t>(e) * FE : nullptr;
        const float* bu = biased ? bias.up.data() + static_cast<int64_t>(e) * FE : nullptr;
        for (int64_t f = 0; f < FE; ++f) {
          const float gv = std::min(g[f] + (bg ? bg[f] : 0.0f), kSwigluOaiLimit);
          const float uv = std::clamp(u[f] + (bu ? bu[f] : 0.0f), -kSwigluOaiLimit, kSwigluOaiLimit);
          g[f] = gv / (1.0f + std::exp(-kSwigluOaiAlpha * gv)) * (uv + 1.0f);
        }
      } else if (gelu) {
        k.gelu_mul(g, u, FE);
      } else {
        k.silu_mul(g, u, FE);
      }
    }
    matmul(H.view(kPartDown, e), moe_rows_g_.data(), c, moe_rows_y_.data());
    const float* bd = biased ? bias.down.data() + static_cast<int64_t>(e) * E : nullptr;
    for (int64_t r = 0; r < c; ++r) {
      const float w = moe_weight_host_[rows[r]];
      float* out = moe_out_host_.data() + (rows[r] / K) * E;
      const float* y = moe_rows_y_.data() + r * E;
      if (bd != nullptr) {
        for (int64_t i = 0; i < E; ++i) out[i] += w * (y[i] + bd[i]);
      } else {
        for (int64_t i = 0; i < E; ++i) out[i] += w * y[i];
      }
    }
  }
  for (int32_t t = 0; t < nt; ++t) {
    moe_ones_slots_[t] = t;
    const float one = 1.0f;
    std::memcpy(&moe_ones_slots_[nt + t], &one, sizeof(float));
  }
  moe_cost_.NoteCpu(n_picks, Seconds(t0));
  // Σ w·y as moe_y_'s first nt rows, slot t and weight 1 for token t (the
  // combine with k = 1); the staging is rewritten only after the next
  // host layer's wait for the stream.
  LLM_CUDA_TRY(cudaMemcpyAsync(moe_y_.get(), moe_out_host_.data(), static_cast<size_t>(nt * E) * sizeof(float),
                               cudaMemcpyHostToDevice, stream_),
               "upload expert outputs");
  LLM_CUDA_TRY(cudaMemcpyAsync(moe_order_.get<int32_t>() + n_picks, moe_ones_slots_.data(),
                               static_cast<size_t>(nt) * sizeof(int32_t), cudaMemcpyHostToDevice, stream_),
               "upload expert slots");
  LLM_CUDA_TRY(cudaMemcpyAsync(pick_weight_dev, moe_ones_slots_.data() + nt, static_cast<size_t>(nt) * sizeof(float),
                               cudaMemcpyHostToDevice, stream_),
               "upload expert weights");
  return MoeSharedAndCombine(l, nt, 1, /*host_summed=*/true);
}

}  // namespace llm::cuda
