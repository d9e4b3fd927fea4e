// Mixture-of-Experts routing on the device: the router and its top-k, the
// grouping of (token, expert) picks by expert, and the weighted combine of
// the experts' outputs. The experts' products are moe_matmul.cuh's.
//
//   route:   xn = rmsnorm(x) (F32, as the CPU backend's router sees it)
//            p = softmax(xn · Wrouterᵀ); the k largest (ties to the lower
//            expert); w = p / Σ p over the chosen (or p, not renormalised);
//            [qwen2moe: s = sigmoid(xn · g), the shared expert's scale]
//            [gpt-oss: l = xn · Wrouterᵀ + b; the k largest l; w = softmax
//            over those k (softmax_topk)]
//   group:   picks t*k + j sorted by expert into `order` (the permuted rows
//            the expert products run over), `slot` its inverse, and work
//            items (expert, first permuted row, rows <= tile) for them
//   combine: out[t] = Σ_j w[t,j] · (y[slot[t*k+j]] [+ bd[e(t,j)]])  [+ s[t] · shared[t]]
//
// Every launch's shape depends on n_tok, k and the expert count alone, never
// on the routing, so a decode step's graph replays it whatever the tokens
// choose. Host-includable.
#pragma once

#include <cstdint>

#include "common.cuh"

namespace llm::cuda {

// A slice of `rows` permuted rows [row0, row0 + rows) that chose `expert`;
// expert -1: an unused item (the item count is an upper bound).
struct MoeWorkItem {
  int32_t expert;
  int32_t row0;
  int32_t rows;
};

// Largest router the route kernel takes (its normed row and probabilities
// live in shared memory): n_embd + n_expert floats within 48 KiB.
constexpr int32_t kMoeMaxExperts = 1024;
bool MoeRouteShapeSupported(int32_t n_embd, int32_t n_expert, int32_t k);

struct MoeRouteParams {
  const float* x = nullptr;         // (n_tok, n_embd) residual stream (after the add)
  const float* norm = nullptr;      // (n_embd) ffn_norm
  float eps = 0.0f;
  const float* router = nullptr;    // (n_expert, n_embd) F32
  const float* shexp_gate = nullptr;  // (n_embd) or NULL: no shared expert
  int32_t n_tok = 0, n_embd = 0, n_expert = 0, k = 0;
  int32_t renorm = 1;               // chosen weights divided by their sum
  const float* router_bias = nullptr;  // (n_expert) added to the logits, or NULL (gpt-oss)
  // 1 (gpt-oss): the top k of the raw (biased) logits, weighted by the
  // softmax over those k alone; renorm is then ignored.
  int32_t softmax_topk = 0;
  int32_t* pick_expert = nullptr;   // (n_tok, k) out
  float* pick_weight = nullptr;     // (n_tok, k) out
  float* shexp_scale = nullptr;     // (n_tok) out, with shexp_gate
};
cudaError_t LaunchMoeRoute(const MoeRouteParams& p, cudaStream_t stream);

// Work items for n_picks picks over n_expert experts in tiles of `tile`
// rows: an upper bound, floor(n_picks / tile) + min(n_expert, n_picks).
__host__ __device__ inline int32_t MoeMaxWorkItems(int32_t n_picks, int32_t n_expert, int32_t tile) {
  return n_picks / tile + (n_expert < n_picks ? n_expert : n_picks);
}

struct MoeGroupParams {
  const int32_t* pick_expert = nullptr;  // (n_picks)
  int32_t n_picks = 0, n_expert = 0;
  int32_t tile = 8;                      // rows per work item
  int32_t* order = nullptr;              // (n_picks) out: permuted row -> pick index
  int32_t* slot = nullptr;               // (n_picks) out: pick index -> permuted row
  MoeWorkItem* items = nullptr;          // (MoeMaxWorkItems) out
};
// One block. Within an expert the picks' order is not fixed (atomics); each
// output row is computed alone, so the results are the same bits whatever it is.
cudaError_t LaunchMoeGroup(const MoeGroupParams& p, cudaStream_t stream);

struct MoeCombineParams {
  const float* y = nullptr;            // (n_tok * k, n_embd) the experts' outputs, permuted rows
  const int32_t* slot = nullptr;       // (n_tok * k)
  const float* pick_weight = nullptr;  // (n_tok * k)
  const float* shared = nullptr;       // (n_tok, n_embd) or NULL
  const float* shexp_scale = nullptr;  // (n_tok), with shared
  // (n_expert, n_embd) the experts' down biases (gpt-oss) and (n_tok * k)
  // the picks' experts, or both NULL
  const float* down_bias = nullptr;
  const int32_t* pick_expert = nullptr;
  int32_t n_tok = 0, n_embd = 0, k = 0;
  float* out = nullptr;                // (n_tok, n_embd) written
};
cudaError_t LaunchMoeCombine(const MoeCombineParams& p, cudaStream_t stream);

}  // namespace llm::cuda
