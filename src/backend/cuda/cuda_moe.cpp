// Mixture-of-Experts layers on the GPU (Mixtral-style llama, qwen2moe,
// qwen3moe, gpt-oss), the CPU backend's MoeFeedForward (cpu/moe.cpp) on the
// device:
//
//   route    one block per token: F32 rmsnorm of x, router logits, softmax,
//            top-k, weights renormalised (qwen2moe: not) [shared-expert scale]
//            [gpt-oss: biased logits, top-k of them, softmax over the k]
//   group    one block: the n k picks sorted by expert, work items of <= tile rows
//   gate/up  one launch over every routed expert: gu[r] = xn[token(r)] · [Wg_e; Wu_e]ᵀ
//   act      h = silu(g) * u over the n k permuted rows
//            [gpt-oss: the clamped SwiGLU of g + bg_e, u + bu_e]
//   down     one launch: y[r] = h[r] · Wd_eᵀ
//   [shared  qwen2moe: the shared expert's dense FFN on every token]
//   combine  delta[t] = Σ_j w[t,j] · (y[slot(t,j)] [+ bd_e])  [+ s[t] · shared[t]]
//
// The experts' products read the weights in their file's block format (or
// BF16), each routed expert's once per work item: the GEMV (items of <= 8
// rows) where tokens per expert are few (decode, small batches), the tiled
// GEMM (items of 32 rows) above. Every launch's shape follows from the
// token count alone, so decode steps are captured in graphs like a dense
// model's.
#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cpu/kernels.h"  // DequantizeRow
#include "backend/cuda/cuda_backend.h"
#include "backend/validate.h"
#include "moe_matmul.cuh"
#include "moe_route.cuh"
#include "silu_mul.cuh"

namespace llm::cuda {
namespace {

// A (rows, cols) weight as F32 on the device (the router: llama.cpp's files
// keep it F32; a BF16 or quantized one is widened on the host).
Status UploadF32(const WeightView& w, int64_t rows, int64_t cols, DeviceBuffer* out, const std::string& name) {
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) cpu::DequantizeRow(w, r, v.data() + r * cols);
  LLM_RETURN_IF_ERROR(out->Allocate(v.size() * sizeof(float), name.c_str()));
  LLM_CUDA_TRY(cudaMemcpy(out->get(), v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice),
               ("upload " + name).c_str());
  return Status::Ok();
}

ExpertMatrix Stacked(std::initializer_list<const DeviceExperts*> parts) {
  ExpertMatrix m;
  m.n_parts = 0;
  for (const DeviceExperts* p : parts) {
    m.part[m.n_parts++] = p->stack();
    m.rows += p->stack().rows;
    m.cols = p->stack().cols;
  }
  return m;
}

}  // namespace

int64_t CudaBackend::FfnWidthOf(const ModelConfig& c) {
  int64_t w = c.n_ff;
  if (c.n_expert > 0) {
    w = std::max<int64_t>(w, static_cast<int64_t>(c.n_expert_used) * c.n_ff_exp);
    w = std::max<int64_t>(w, c.n_ff_shexp);
  }
  return w;
}

Status CudaBackend::UploadMoeLayer(const LayerWeights& L, const std::string& p, bool experts_on_device, Layer* d) {
  const ModelConfig& c = cfg_;
  const int64_t E = c.n_embd, NE = c.n_expert, FE = c.n_ff_exp;
  LLM_RETURN_IF_ERROR(CheckWeightMatrix(L.router, NE, E, p + "ffn_gate_inp", "CUDA backend"));
  for (const auto* v : {&L.exp_gate, &L.exp_up, &L.exp_down})
    if (static_cast<int64_t>(v->size()) != NE)
      return InvalidArgument("CUDA backend: " + p + " has " + std::to_string(v->size()) + " experts, the config " +
                             std::to_string(NE));
  for (int64_t e = 0; e < NE; ++e) {
    const std::string x = p + "expert " + std::to_string(e) + " ";
    LLM_RETURN_IF_ERROR(CheckWeightMatrix(L.exp_gate[e], FE, E, x + "ffn_gate_exps", "CUDA backend"));
    LLM_RETURN_IF_ERROR(CheckWeightMatrix(L.exp_up[e], FE, E, x + "ffn_up_exps", "CUDA backend"));
    LLM_RETURN_IF_ERROR(CheckWeightMatrix(L.exp_down[e], E, FE, x + "ffn_down_exps", "CUDA backend"));
  }
  LLM_RETURN_IF_ERROR(UploadF32(L.router, NE, E, &d->router, p + "ffn_gate_inp"));
  if (c.expert_bias) {  // gpt-oss: the router's and every expert's biases, F32 (also for experts on the host:
                        // the copy way runs these kernels)
    WeightView rb = L.router_b;
    if (rb.empty() || rb.rows * rb.cols != NE || (rb.rows != 1 && rb.cols != 1))
      return InvalidArgument("CUDA backend: " + p + "ffn_gate_inp.bias missing or not of size " + std::to_string(NE));
    rb.rows = 1;
    rb.cols = NE;
    LLM_RETURN_IF_ERROR(CheckWeightMatrix(rb, 1, NE, p + "ffn_gate_inp.bias", "CUDA backend"));
    LLM_RETURN_IF_ERROR(UploadF32(rb, 1, NE, &d->router_b, p + "ffn_gate_inp.bias"));
    for (auto [w, cols, out, name] : {std::tuple{&L.exp_gate_b, FE, &d->exp_bg, "ffn_gate_exps.bias"},
                                      std::tuple{&L.exp_up_b, FE, &d->exp_bu, "ffn_up_exps.bias"},
                                      std::tuple{&L.exp_down_b, E, &d->exp_bd, "ffn_down_exps.bias"}}) {
      LLM_RETURN_IF_ERROR(CheckWeightMatrix(*w, NE, cols, p + name, "CUDA backend"));
      LLM_RETURN_IF_ERROR(UploadF32(*w, NE, cols, out, p + name));
    }
  }
  if (experts_on_device) {  // else they stay in host memory (cuda_moe_host.cpp)
    LLM_RETURN_IF_ERROR(d->exp_gate.Upload(L.exp_gate, p + "ffn_gate_exps"));
    LLM_RETURN_IF_ERROR(d->exp_up.Upload(L.exp_up, p + "ffn_up_exps"));
    LLM_RETURN_IF_ERROR(d->exp_down.Upload(L.exp_down, p + "ffn_down_exps"));
    d->exp_gu = Stacked({&d->exp_gate, &d->exp_up});
    d->exp_d = Stacked({&d->exp_down});
    if (CheckExpertMatrix(d->exp_gu) != cudaSuccess || CheckExpertMatrix(d->exp_d) != cudaSuccess)
      return InternalError("CUDA backend: " + p + " experts malformed on the device");
  }
  if (c.n_ff_shexp > 0) {
    const int64_t FS = c.n_ff_shexp;
    const WeightView& g = L.shexp_gate_inp;
    if (g.empty() || g.rows * g.cols != E || (g.rows != 1 && g.cols != 1))
      return InvalidArgument("CUDA backend: " + p + "ffn_gate_inp_shexp missing or not of size " + std::to_string(E));
    WeightView row = g;
    row.rows = 1;
    row.cols = E;
    LLM_RETURN_IF_ERROR(UploadF32(row, 1, E, &d->shexp_gate_inp, p + "ffn_gate_inp_shexp"));
    LLM_RETURN_IF_ERROR(CheckWeightMatrix(L.shexp_gate, FS, E, p + "ffn_gate_shexp", "CUDA backend"));
    LLM_RETURN_IF_ERROR(CheckWeightMatrix(L.shexp_up, FS, E, p + "ffn_up_shexp", "CUDA backend"));
    LLM_RETURN_IF_ERROR(CheckWeightMatrix(L.shexp_down, E, FS, p + "ffn_down_shexp", "CUDA backend"));
    LLM_RETURN_IF_ERROR(d->shexp_gu.Upload({&L.shexp_gate, &L.shexp_up}, p + "ffn_gate_up_shexp"));
    LLM_RETURN_IF_ERROR(d->shexp_d.Upload({&L.shexp_down}, p + "ffn_down_shexp"));
  }
  return Status::Ok();
}

Status CudaBackend::MoeFeedForward(int l, int32_t nt) {
  LLM_RETURN_IF_ERROR(MoeRoute(l, nt));
  if (layers_[l].host >= 0) return MoeHostFeedForward(l, nt);  // experts in host memory (cuda_moe_host.cpp)
  LLM_RETURN_IF_ERROR(MoeExperts(l, nt, layers_[l].exp_gu, layers_[l].exp_d));
  return MoeSharedAndCombine(l, nt, cfg_.n_expert_used);
}

Status CudaBackend::MoeRoute(int l, int32_t nt) {
  const Layer& L = layers_[l];
  const int32_t E = cfg_.n_embd, NE = cfg_.n_expert, K = cfg_.n_expert_used;
  const int32_t n_picks = nt * K;
  const bool shared = cfg_.n_ff_shexp > 0;
  int32_t* pick_expert = moe_pick_.get<int32_t>();
  float* pick_weight = reinterpret_cast<float*>(pick_expert + n_picks);
  float* shexp_scale = pick_weight + n_picks;

  MoeRouteParams rp;
  rp.x = x_.get<float>();
  rp.norm = L.ffn_norm.get<float>();
  rp.eps = cfg_.rms_eps;
  rp.router = L.router.get<float>();
  rp.shexp_gate = shared ? L.shexp_gate_inp.get<float>() : nullptr;
  rp.n_tok = nt;
  rp.n_embd = E;
  rp.n_expert = NE;
  rp.k = K;
  rp.renorm = cfg_.expert_weights_norm ? 1 : 0;
  rp.router_bias = cfg_.expert_bias ? L.router_b.get<float>() : nullptr;
  rp.softmax_topk = cfg_.expert_softmax_topk ? 1 : 0;
  rp.pick_expert = pick_expert;
  rp.pick_weight = pick_weight;
  rp.shexp_scale = shared ? shexp_scale : nullptr;
  return Launched(LaunchMoeRoute(rp, stream_), "MoE router", l);
}

Status CudaBackend::MoeExperts(int l, int32_t nt, const ExpertMatrix& w_gu, const ExpertMatrix& w_d) {
  const int32_t NE = cfg_.n_expert, K = cfg_.n_expert_used, FE = cfg_.n_ff_exp;
  const int32_t n_picks = nt * K;
  int32_t* pick_expert = moe_pick_.get<int32_t>();
  int32_t* order = moe_order_.get<int32_t>();
  int32_t* slot = order + n_picks;
  auto* items = moe_items_.get<MoeWorkItem>();

  // The GEMV where an expert's work items average a few rows (its weights
  // are streamed once per 8 rows, from registers), the tiled GEMM above
  // (once per 32 rows, through shared memory).
  const bool gemv = nt <= kMoeGemvMaxRows || n_picks <= 4 * NE;
  const int32_t tile = gemv ? kMoeGemvMaxRows : kMoeGemmTileRows;
  MoeGroupParams gp;
  gp.pick_expert = pick_expert;
  gp.n_picks = n_picks;
  gp.n_expert = NE;
  gp.tile = tile;
  gp.order = order;
  gp.slot = slot;
  gp.items = items;
  LLM_RETURN_IF_ERROR(Launched(LaunchMoeGroup(gp, stream_), "MoE grouping", l));

  MoeMatmulParams mp;
  mp.w = w_gu;
  mp.x = xn_.get<bf16>();
  mp.gather = order;
  mp.gather_div = K;
  mp.items = items;
  mp.n_items = MoeMaxWorkItems(n_picks, NE, tile);
  mp.y = gu_.get<float>();
  auto matmul = [&](const char* what) {
    return Launched(gemv ? LaunchMoeGemv(mp, stream_) : LaunchMoeGemm(mp, stream_), what, l);
  };
  LLM_RETURN_IF_ERROR(matmul(gemv ? "MoE gate/up GEMV" : "MoE gate/up GEMM"));
  if (cfg_.ffn_act == FfnActivation::kSwigluOai) {  // gpt-oss: biased gate/up, clamped SwiGLU
    const Layer& L = layers_[l];
    const bool b = cfg_.expert_bias;
    LLM_RETURN_IF_ERROR(Launched(LaunchSwigluOai(gu_.get<float>(), n_picks, FE, b ? L.exp_bg.get<float>() : nullptr,
                                                 b ? L.exp_bu.get<float>() : nullptr, b ? order : nullptr,
                                                 b ? pick_expert : nullptr, kSwigluOaiAlpha, kSwigluOaiLimit,
                                                 h_.get<bf16>(), stream_),
                                 "MoE clamped SwiGLU", l));
  } else {
    const bool gelu = cfg_.ffn_act == FfnActivation::kGeluTanh;
    LLM_RETURN_IF_ERROR(Launched(LaunchSiluMul(gu_.get<float>(), n_picks, FE, h_.get<bf16>(), stream_, gelu),
                                 "MoE act*up", l));
  }
  mp.w = w_d;
  mp.x = h_.get<bf16>();
  mp.gather = nullptr;
  mp.gather_div = 1;
  mp.y = moe_y_.get<float>();
  return matmul(gemv ? "MoE down GEMV" : "MoE down GEMM");
}

// k: picks per token in moe_y_ (n_expert_used; 1 when the host summed a
// token's experts into one row, weight 1 and slot t: cuda_moe_host.cpp,
// whose rows then hold the experts' down biases already).
Status CudaBackend::MoeSharedAndCombine(int l, int32_t nt, int32_t k, bool host_summed) {
  const Layer& L = layers_[l];
  const int32_t n_picks = nt * cfg_.n_expert_used;
  const bool shared = cfg_.n_ff_shexp > 0;
  const bool gelu = cfg_.ffn_act == FfnActivation::kGeluTanh;
  float* pick_weight = reinterpret_cast<float*>(moe_pick_.get<int32_t>() + n_picks);
  float* shexp_scale = pick_weight + n_picks;
  int32_t* slot = moe_order_.get<int32_t>() + n_picks;
  if (shared) {  // the expert outputs are in moe_y_: gu_ and h_ are free again
    const int32_t FS = cfg_.n_ff_shexp;
    LLM_RETURN_IF_ERROR(MatMul(L.shexp_gu, xn_.get<bf16>(), nt, gu_.get<float>(), "shared expert gate/up", l));
    LLM_RETURN_IF_ERROR(Launched(LaunchSiluMul(gu_.get<float>(), nt, FS, h_.get<bf16>(), stream_, gelu),
                                 "shared expert act*up", l));
    LLM_RETURN_IF_ERROR(MatMul(L.shexp_d, h_.get<bf16>(), nt, moe_shared_.get<float>(), "shared expert down", l));
  }

  MoeCombineParams cp;
  cp.y = moe_y_.get<float>();
  cp.slot = slot;
  cp.pick_weight = pick_weight;
  cp.shared = shared ? moe_shared_.get<float>() : nullptr;
  cp.shexp_scale = shared ? shexp_scale : nullptr;
  cp.n_tok = nt;
  cp.n_embd = cfg_.n_embd;
  cp.k = k;
  if (cfg_.expert_bias && !host_summed) {  // gpt-oss: each pick's down bias
    cp.down_bias = L.exp_bd.get<float>();
    cp.pick_expert = moe_pick_.get<int32_t>();
  }
  cp.out = delta_.get<float>();
  return Launched(LaunchMoeCombine(cp, stream_), "MoE combine", l);
}

}  // namespace llm::cuda
