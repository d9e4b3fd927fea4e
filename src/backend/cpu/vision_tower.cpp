#include "backend/cpu/vision_tower.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "backend/validate.h"

namespace llm::cpu {
namespace {

const float* F32(const WeightView& w) { return static_cast<const float*>(w.data); }

}  // namespace

VisionTower::VisionTower(const VisionConfig& c, const VisionWeights& w, const Kernels& k, ThreadPool& pool)
    : c_(c), w_(w), k_(k), pool_(pool), linear_(k, pool) {}

Status VisionTower::Check() const {
  const char* who = "CPU vision tower";
  const int64_t E = c_.n_embd, F = c_.n_ff;
  LLM_RETURN_IF_ERROR(CheckWeightMatrix(w_.patch_embd, E, 3LL * c_.patch_size * c_.patch_size, "patch_embd", who));
  LLM_RETURN_IF_ERROR(CheckWeightMatrix(w_.position_embd, n_rows(), E, "position_embd", who));
  if (static_cast<int64_t>(w_.layers.size()) != c_.n_layer || c_.n_layer_run < 1 || c_.n_layer_run > c_.n_layer)
    return InvalidArgument("CPU vision tower: wrong layer count");
  for (int32_t il = 0; il < c_.n_layer_run; ++il) {
    const VisionLayerWeights& L = w_.layers[il];
    LLM_RETURN_IF_ERROR(CheckWeightMatrix(L.wq, E, E, "attn_q", who));
    LLM_RETURN_IF_ERROR(CheckWeightMatrix(L.wk, E, E, "attn_k", who));
    LLM_RETURN_IF_ERROR(CheckWeightMatrix(L.wv, E, E, "attn_v", who));
    LLM_RETURN_IF_ERROR(CheckWeightMatrix(L.wo, E, E, "attn_out", who));
    LLM_RETURN_IF_ERROR(CheckWeightMatrix(L.w_up, F, E, "ffn_up", who));
    LLM_RETURN_IF_ERROR(CheckWeightMatrix(L.w_down, E, F, "ffn_down", who));
    for (const WeightView* v : {&L.ln1, &L.ln1_b, &L.ln2, &L.ln2_b, &L.bq, &L.bk, &L.bv, &L.bo, &L.b_down})
      if (v->empty() || v->type != TensorType::F32 || v->cols != E)
        return InvalidArgument("CPU vision tower: a norm or bias is missing or not F32 (" + std::to_string(E) + ")");
    if (L.b_up.empty() || L.b_up.type != TensorType::F32 || L.b_up.cols != F)
      return InvalidArgument("CPU vision tower: ffn_up's bias is missing or not F32");
  }
  // the optional parts: absent, or F32 of the tower's width
  for (const WeightView* v : {&w_.patch_bias, &w_.class_embd, &w_.pre_ln, &w_.pre_ln_b, &w_.post_ln, &w_.post_ln_b})
    if (!v->empty() && (v->type != TensorType::F32 || v->cols != E))
      return InvalidArgument("CPU vision tower: a norm or bias is not F32 (" + std::to_string(E) + ")");
  if (w_.pre_ln.empty() != w_.pre_ln_b.empty() || w_.post_ln.empty() != w_.post_ln_b.empty())
    return InvalidArgument("CPU vision tower: a LayerNorm without its weight or bias");
  if (c_.projector != ProjectorType::kMlp && (w_.patch_bias.empty() || w_.post_ln.empty()))
    return InvalidArgument("CPU vision tower: a SigLIP tower needs its patch bias and post-norm");
  return Status::Ok();
}

int64_t VisionTower::n_rows() const { return c_.n_patches() + (w_.class_embd.empty() ? 0 : 1); }

// patch (py, px) is row py * G + px; its column (ch, y, x) is
// ch·P·P + y·P + x, the layout of the convolution kernel's (E, 3, P, P).
void VisionTower::Patchify(const float* pixels) {
  const int64_t S = c_.image_size, P = c_.patch_size, G = c_.patches_per_side(), K = 3 * P * P;
  patches_.resize(static_cast<size_t>(G * G * K));
  for (int64_t py = 0; py < G; ++py)
    for (int64_t px = 0; px < G; ++px) {
      float* row = patches_.data() + (py * G + px) * K;
      for (int64_t ch = 0; ch < 3; ++ch)
        for (int64_t y = 0; y < P; ++y)
          for (int64_t x = 0; x < P; ++x) row[(ch * P + y) * P + x] = pixels[(ch * S + py * P + y) * S + px * P + x];
    }
}

void VisionTower::Run(const float* pixels, std::vector<float>* out) {
  const int64_t N = n_rows(), E = c_.n_embd, F = c_.n_ff, cls = N - c_.n_patches();
  std::vector<float>& x = *out;
  x.resize(static_cast<size_t>(N * E));
  h_.resize(N * E);
  q_.resize(N * E);
  kk_.resize(N * E);
  v_.resize(N * E);
  att_.resize(N * E);
  ff_.resize(N * F);
  ones_.assign(N * F, 1.0f);
  // ---- embeddings                                  x: (N, E)
  Patchify(pixels);
  linear_(w_.patch_embd, w_.patch_bias, patches_.data(), N - cls, x.data() + cls * E);
  if (cls) std::copy_n(F32(w_.class_embd), E, x.data());
  for (int64_t t = 0; t < N; ++t) {
    DequantizeRow(w_.position_embd, t, h_.data());
    for (int64_t i = 0; i < E; ++i) x[t * E + i] += h_[i];
  }
  if (!w_.pre_ln.empty()) LayerNormRows(x.data(), N, E, F32(w_.pre_ln), F32(w_.pre_ln_b), c_.eps, x.data());
  EncoderAttnShape shape;
  shape.n = N;
  shape.n_head = c_.n_head;
  shape.head_dim = c_.head_dim;
  shape.ld = E;
  shape.scale = 1.0f / std::sqrt(static_cast<float>(c_.head_dim));
  for (int32_t il = 0; il < c_.n_layer_run; ++il) {
    const VisionLayerWeights& L = w_.layers[il];
    // ---- attention block (pre-norm)
    LayerNormRows(x.data(), N, E, F32(L.ln1), F32(L.ln1_b), c_.eps, h_.data());
    linear_(L.wq, L.bq, h_.data(), N, q_.data());
    linear_(L.wk, L.bk, h_.data(), N, kk_.data());
    linear_(L.wv, L.bv, h_.data(), N, v_.data());
    EncoderAttention(k_, pool_, shape, q_.data(), kk_.data(), v_.data(), att_.data(), &attn_);
    linear_(L.wo, L.bo, att_.data(), N, x.data(), /*accumulate=*/true);   // x += att·Woᵀ + bo
    // ---- feed-forward block (pre-norm)
    LayerNormRows(x.data(), N, E, F32(L.ln2), F32(L.ln2_b), c_.eps, h_.data());
    linear_(L.w_up, L.b_up, h_.data(), N, ff_.data());                   // ff: (N, F)
    if (c_.act == VisionAct::kGelu) {
      k_.gelu_mul(ff_.data(), ones_.data(), N * F);
    } else {
      GeluQuick(ff_.data(), N * F);
    }
    linear_(L.w_down, L.b_down, ff_.data(), N, x.data(), /*accumulate=*/true);
  }
  if (!w_.post_ln.empty()) LayerNormRows(x.data(), N, E, F32(w_.post_ln), F32(w_.post_ln_b), c_.eps, x.data());
}

}  // namespace llm::cpu
