// CpuBackend::MoeFeedForward: a Mixture-of-Experts FFN (Mixtral-style
// `llama`, qwen3moe, qwen2moe, gpt-oss), as llama.cpp computes it:
//
//   p = softmax(xn · Wrouterᵀ)                     (n, n_expert)
//   chosen = the n_expert_used largest p per token; w = p[chosen] / Σ p[chosen]
//            (qwen2moe: w = p[chosen], not renormalised)
//   x += Σ_chosen w_e · down_e(silu(xn · gate_eᵀ) * (xn · up_eᵀ))
//   [qwen2moe: x += sigmoid(xn · g) · shared(xn), a shared expert every token runs]
//
// gpt-oss (expert_softmax_topk, expert_bias): the router's logits get its
// bias, the top n_expert_used logits are chosen and weighted by the softmax
// over those alone; each expert adds its biases to gate, up and down and
// uses the clamped SwiGLU (config.h, kSwigluOai):
//   l = xn · Wrouterᵀ + b ; chosen = top-k of l ; w = softmax(l[chosen])
//   x += Σ_chosen w_e · (swiglu_oai(xn·gate_eᵀ + bg_e, xn·up_eᵀ + bu_e) · down_eᵀ + bd_e)
//
// Tokens are grouped by expert, so a step reads each routed expert's weights
// once, whatever its batch, and an expert no token chose not at all:
//
//   picks (token, expert):  t0:{2,0}  t1:{2,3}  t2:{0,1}
//   expert 0: rows [t0, t2] -> gather xn rows, gate/up/down on 2 rows
//   expert 1: rows [t2]     ...            expert 2: rows [t0, t1] ...
//   expert 3: rows [t1]
//
// Each expert's matmuls run over the thread pool like the dense FFN's. A
// token's experts are added to x in expert order (llama.cpp adds them in
// the order chosen; the sums differ in rounding only).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_backend.h"

namespace llm::cpu {

// hb = swiglu_oai(x·gate_eᵀ + bg_e, x·up_eᵀ + bu_e) over the c gathered rows
// of moe_x (gpt-oss's experts), with llama.cpp's clamps:
//   g = min(g, limit), u = clamp(u, -limit, limit), hb = g·sigmoid(alpha·g)·(u + 1)
void CpuBackend::BiasedExpertUp(int layer, int64_t e, int64_t c) {
  const LayerWeights& L = w_.layers[layer];
  const int64_t F = cfg_.n_ff_exp;
  const MatJob gate_up[2] = {{&L.exp_gate[e], ws_.hb.data(), false}, {&L.exp_up[e], ws_.hb2.data(), false}};
  MatMulJobs(gate_up, 2, ws_.moe_x.data(), c);  // hb, hb2: (c, F)
  const float* bg = norms_.exp_gate_b[layer].data() + e * F;
  const float* bu = norms_.exp_up_b[layer].data() + e * F;
  const float alpha = kSwigluOaiAlpha, limit = kSwigluOaiLimit;
  for (int64_t i = 0; i < c; ++i) {
    float* g = ws_.hb.data() + i * F;
    const float* u = ws_.hb2.data() + i * F;
    for (int64_t f = 0; f < F; ++f) {
      const float gv = std::min(g[f] + bg[f], limit);
      const float uv = std::clamp(u[f] + bu[f], -limit, limit);
      g[f] = gv / (1.0f + std::exp(-alpha * gv)) * (uv + 1.0f);
    }
  }
}

void CpuBackend::MoeFeedForward(int layer, const float* xn, int64_t n, float* x) {
  const LayerWeights& L = w_.layers[layer];
  const int64_t E = cfg_.n_embd, NE = cfg_.n_expert, K = cfg_.n_expert_used;

  // ---- router: logits (n, NE), softmax, top-K, renormalised weights
  const MatJob router = {&L.router, ws_.moe_logits.data(), false};
  MatMulJobs(&router, 1, xn, n);
  ws_.moe_count.assign(NE, 0);
  const bool biased = cfg_.expert_bias;
  for (int64_t t = 0; t < n; ++t) {
    float* p = ws_.moe_logits.data() + t * NE;
    if (biased)
      for (int64_t e = 0; e < NE; ++e) p[e] += norms_.router_b[layer][e];
    if (!cfg_.expert_softmax_topk) {  // probabilities over every expert, then the top k of them
      const float m = *std::max_element(p, p + NE);
      float sum = 0.0f;
      for (int64_t e = 0; e < NE; ++e) sum += p[e] = std::exp(p[e] - m);
      for (int64_t e = 0; e < NE; ++e) p[e] /= sum;
    }
    MoePick* pick = ws_.moe_pick.data() + t * K;
    float chosen = 0.0f;
    for (int64_t j = 0; j < K; ++j) {
      int64_t best = -1;  // the largest p not yet chosen; ties to the lower index
      for (int64_t e = 0; e < NE; ++e) {
        bool taken = false;
        for (int64_t i = 0; i < j; ++i) taken = taken || pick[i].expert == e;
        if (!taken && (best < 0 || p[e] > p[best])) best = e;
      }
      pick[j] = MoePick{static_cast<int32_t>(best), p[best]};
      chosen += p[best];
      ++ws_.moe_count[best];
    }
    if (cfg_.expert_softmax_topk) {  // the chosen logits' softmax (the max is the first pick's)
      const float m = pick[0].weight;
      float sum = 0.0f;
      for (int64_t j = 0; j < K; ++j) sum += pick[j].weight = std::exp(pick[j].weight - m);
      for (int64_t j = 0; j < K; ++j) pick[j].weight /= sum;
    } else if (cfg_.expert_weights_norm) {
      for (int64_t j = 0; j < K; ++j) pick[j].weight /= chosen;
    }
  }

  // ---- each routed expert once, over the tokens that chose it
  for (int64_t e = 0; e < NE; ++e) {
    if (ws_.moe_count[e] == 0) continue;
    ws_.moe_rows.clear();
    for (int64_t r = 0; r < n * K; ++r)
      if (ws_.moe_pick[r].expert == e) ws_.moe_rows.push_back(static_cast<int32_t>(r));
    const int64_t c = static_cast<int64_t>(ws_.moe_rows.size());
    for (int64_t i = 0; i < c; ++i)
      std::memcpy(ws_.moe_x.data() + i * E, xn + ws_.moe_rows[i] / K * E, E * sizeof(float));  // (c, E)
    if (biased) {
      BiasedExpertUp(layer, e, c);  // hb: (c, n_ff_exp)
    } else {
      FeedForwardUp(L.exp_gate[e], L.exp_up[e], ws_.moe_x.data(), c);  // hb: (c, n_ff_exp)
    }
    const MatJob down = {&L.exp_down[e], ws_.moe_y.data(), false};  // y: (c, E)
    MatMulJobs(&down, 1, ws_.hb.data(), c);
    if (biased)
      for (int64_t i = 0; i < c; ++i)
        for (int64_t d = 0; d < E; ++d) ws_.moe_y[i * E + d] += norms_.exp_down_b[layer][e * E + d];
    for (int64_t i = 0; i < c; ++i) {
      const float w = ws_.moe_pick[ws_.moe_rows[i]].weight;
      float* xr = x + ws_.moe_rows[i] / K * E;
      const float* yr = ws_.moe_y.data() + i * E;
      for (int64_t d = 0; d < E; ++d) xr[d] += w * yr[d];
    }
  }

  // ---- qwen2moe's shared expert: every token, scaled by sigmoid(xn · g)
  if (cfg_.n_ff_shexp > 0) {
    FeedForwardUp(L.shexp_gate, L.shexp_up, xn, n);  // hb: (n, n_ff_shexp)
    const MatJob down = {&L.shexp_down, ws_.moe_y.data(), false};
    MatMulJobs(&down, 1, ws_.hb.data(), n);  // y: (n, E)
    const float* g = norms_.shexp_gate[layer].data();
    for (int64_t t = 0; t < n; ++t) {
      float dot = 0.0f;
      for (int64_t d = 0; d < E; ++d) dot += xn[t * E + d] * g[d];
      const float s = 1.0f / (1.0f + std::exp(-dot));
      for (int64_t d = 0; d < E; ++d) x[t * E + d] += s * ws_.moe_y[t * E + d];
    }
  }
}

}  // namespace llm::cpu
