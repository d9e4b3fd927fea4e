// Router + top-k (one block per token), grouping (one block), combine (one
// block per token). See moe_route.cuh.
//
// The router runs in F32 on the normed row recomputed from the residual
// stream, as the CPU backend's does, not on the BF16 row the expert GEMVs
// take: a near-tie between two experts' probabilities is decided on the
// values the oracle decides it on, so the two backends route the same.
#include "device_util.cuh"
#include "moe_route.cuh"

namespace llm::cuda {
namespace {

constexpr int kRouteThreads = 128;
constexpr int kGroupThreads = 256;
constexpr int kCombineThreads = 256;

// Dynamic shared memory: xs (n_embd) | p (n_expert) | scratch (32).
__global__ void __launch_bounds__(kRouteThreads) MoeRouteKernel(MoeRouteParams p) {
  LLM_DYNAMIC_SMEM(float, route_smem);
  float* xs = route_smem;
  float* prob = route_smem + p.n_embd;
  float* scratch = prob + p.n_expert;
  const int64_t t = blockIdx.x;
  const int32_t E = p.n_embd, NE = p.n_expert;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = kRouteThreads / 32;

  // ---- the normed row, F32 (AddRmsNorm's arithmetic)
  const float* xr = p.x + t * E;
  float ss = 0.0f;
  for (int32_t d = threadIdx.x; d < E; d += kRouteThreads) ss += xr[d] * xr[d];
  ss = dev::BlockSum(ss, scratch);
  const float inv = rsqrtf(ss / static_cast<float>(E) + p.eps);
  for (int32_t d = threadIdx.x; d < E; d += kRouteThreads) xs[d] = xr[d] * inv * p.norm[d];
  __syncthreads();

  // ---- router logits: one warp per expert
  for (int32_t e = warp; e < NE; e += n_warps) {
    const float* wr = p.router + static_cast<int64_t>(e) * E;
    float s = 0.0f;
    for (int32_t d = lane; d < E; d += 32) s += xs[d] * wr[d];
    s = dev::WarpSum(s);
    if (lane == 0) prob[e] = p.router_bias != nullptr ? s + p.router_bias[e] : s;
  }
  // ---- qwen2moe's shared-expert scale
  if (p.shexp_gate != nullptr) {
    float s = 0.0f;
    for (int32_t d = threadIdx.x; d < E; d += kRouteThreads) s += xs[d] * p.shexp_gate[d];
    s = dev::BlockSum(s, scratch);  // its barriers also order the logits above before warp 0 reads them
    if (threadIdx.x == 0) p.shexp_scale[t] = 1.0f / (1.0f + expf(-s));
  } else {
    __syncthreads();
  }
  if (warp != 0) return;

  // ---- softmax and top-k in warp 0; lane l owns experts l, l + 32, ...
  // softmax_topk: the top k of the logits themselves (taken ones marked
  // -inf), the softmax over the chosen after.
  const bool topk_first = p.softmax_topk != 0;
  const float taken = topk_first ? dev::kNegInf : -1.0f;
  if (!topk_first) {
    float m = dev::kNegInf;
    for (int32_t e = lane; e < NE; e += 32) m = fmaxf(m, prob[e]);
    m = dev::WarpMax(m);
    float sum = 0.0f;
    for (int32_t e = lane; e < NE; e += 32) {
      const float v = expf(prob[e] - m);
      prob[e] = v;
      sum += v;
    }
    sum = dev::WarpSum(sum);
    for (int32_t e = lane; e < NE; e += 32) prob[e] /= sum;
  }
  float chosen = 0.0f;
  int32_t* out_e = p.pick_expert + t * p.k;
  float* out_w = p.pick_weight + t * p.k;
  for (int32_t j = 0; j < p.k; ++j) {
    // The lane's best untaken expert (taken ones are marked -1; p >= 0).
    float bv = taken;
    int32_t be = 0x7fffffff;
    for (int32_t e = lane; e < NE; e += 32)
      if (prob[e] > bv) {
        bv = prob[e];
        be = e;
      }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int32_t oe = __shfl_xor_sync(0xffffffffu, be, o);
      if (ov > bv || (ov == bv && oe < be)) {
        bv = ov;
        be = oe;
      }
    }
    if (be >= NE) {  // nothing left above -1: the probabilities are NaN (NaN in x); stay in bounds, keep the NaN
      be = j;
      bv = NAN;
    }
    chosen += bv;
    if (lane == 0) {
      out_e[j] = be;
      out_w[j] = bv;
    }
    if (be % 32 == lane) prob[be] = taken;  // its owner marks it
    __syncwarp();
  }
  if (lane == 0 && topk_first) {  // the chosen logits' softmax; the first pick's is their max
    const float m0 = out_w[0];
    float sum = 0.0f;
    for (int32_t j = 0; j < p.k; ++j) sum += out_w[j] = expf(out_w[j] - m0);
    for (int32_t j = 0; j < p.k; ++j) out_w[j] /= sum;
  } else if (lane == 0 && p.renorm) {
    for (int32_t j = 0; j < p.k; ++j) out_w[j] /= chosen;
  }
}

// Dynamic shared memory: count (n_expert) | cursor (n_expert) | n_items (1).
__global__ void __launch_bounds__(kGroupThreads) MoeGroupKernel(MoeGroupParams p) {
  LLM_DYNAMIC_SMEM(int32_t, group_smem);
  int32_t* count = group_smem;
  int32_t* cursor = group_smem + p.n_expert;
  int32_t* n_items = cursor + p.n_expert;
  for (int32_t e = threadIdx.x; e < p.n_expert; e += kGroupThreads) count[e] = 0;
  __syncthreads();
  for (int32_t i = threadIdx.x; i < p.n_picks; i += kGroupThreads) {
    const int32_t e = p.pick_expert[i];
    if (e >= 0 && e < p.n_expert) atomicAdd(&count[e], 1);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t off = 0, item = 0;
    for (int32_t e = 0; e < p.n_expert; ++e) {
      cursor[e] = off;
      for (int32_t s = 0; s < count[e]; s += p.tile)
        p.items[item++] = MoeWorkItem{e, off + s, count[e] - s < p.tile ? count[e] - s : p.tile};
      off += count[e];
    }
    *n_items = item;
  }
  __syncthreads();
  const int32_t max_items = MoeMaxWorkItems(p.n_picks, p.n_expert, p.tile);
  for (int32_t i = *n_items + threadIdx.x; i < max_items; i += kGroupThreads) p.items[i] = MoeWorkItem{-1, 0, 0};
  for (int32_t i = threadIdx.x; i < p.n_picks; i += kGroupThreads) {
    const int32_t e = p.pick_expert[i];
    // An expert out of range (never from the route kernel) goes nowhere; its
    // slot points at row 0 so the combine reads in bounds.
    const int32_t at = e >= 0 && e < p.n_expert ? atomicAdd(&cursor[e], 1) : -1;
    if (at >= 0) p.order[at] = i;
    p.slot[i] = at >= 0 ? at : 0;
  }
}

__global__ void __launch_bounds__(kCombineThreads) MoeCombineKernel(MoeCombineParams p) {
  const int64_t t = blockIdx.x;
  const int32_t E = p.n_embd, K = p.k;
  const int32_t* slot = p.slot + t * K;
  const float* w = p.pick_weight + t * K;
  const float s = p.shared ? p.shexp_scale[t] : 0.0f;
  for (int32_t d = threadIdx.x; d < E; d += kCombineThreads) {
    float acc = 0.0f;
    if (p.down_bias != nullptr) {
      const int32_t* ex = p.pick_expert + t * K;
      for (int32_t j = 0; j < K; ++j)
        acc += w[j] * (p.y[static_cast<int64_t>(slot[j]) * E + d] + p.down_bias[static_cast<int64_t>(ex[j]) * E + d]);
    } else {
      for (int32_t j = 0; j < K; ++j) acc += w[j] * p.y[static_cast<int64_t>(slot[j]) * E + d];
    }
    if (p.shared) acc += s * p.shared[t * E + d];
    p.out[t * E + d] = acc;
  }
}

}  // namespace

bool MoeRouteShapeSupported(int32_t n_embd, int32_t n_expert, int32_t k) {
  return n_embd > 0 && n_expert > 0 && n_expert <= kMoeMaxExperts && k >= 1 && k <= n_expert &&
         (static_cast<int64_t>(n_embd) + n_expert + 32) * 4 <= 48 * 1024;
}

cudaError_t LaunchMoeRoute(const MoeRouteParams& p, cudaStream_t stream) {
  if (!MoeRouteShapeSupported(p.n_embd, p.n_expert, p.k) || p.n_tok < 0 || p.x == nullptr || p.norm == nullptr ||
      p.router == nullptr || p.pick_expert == nullptr || p.pick_weight == nullptr ||
      (p.shexp_gate != nullptr && p.shexp_scale == nullptr))
    return cudaErrorInvalidValue;
  if (p.n_tok == 0) return cudaSuccess;
  const size_t smem = (static_cast<size_t>(p.n_embd) + p.n_expert + 32) * sizeof(float);
  LLM_LAUNCH(MoeRouteKernel, static_cast<unsigned>(p.n_tok), kRouteThreads, smem, stream, p);
  return cudaGetLastError();
}

cudaError_t LaunchMoeGroup(const MoeGroupParams& p, cudaStream_t stream) {
  if (p.n_picks < 0 || p.n_expert <= 0 || p.n_expert > kMoeMaxExperts || p.tile < 1 || p.pick_expert == nullptr ||
      p.order == nullptr || p.slot == nullptr || p.items == nullptr)
    return cudaErrorInvalidValue;
  if (p.n_picks == 0) return cudaSuccess;
  const size_t smem = (2 * static_cast<size_t>(p.n_expert) + 1) * sizeof(int32_t);
  LLM_LAUNCH(MoeGroupKernel, 1, kGroupThreads, smem, stream, p);
  return cudaGetLastError();
}

cudaError_t LaunchMoeCombine(const MoeCombineParams& p, cudaStream_t stream) {
  if (p.n_tok < 0 || p.n_embd <= 0 || p.k < 1 || p.y == nullptr || p.slot == nullptr || p.pick_weight == nullptr ||
      p.out == nullptr || (p.shared != nullptr && p.shexp_scale == nullptr) ||
      ((p.down_bias == nullptr) != (p.pick_expert == nullptr)))
    return cudaErrorInvalidValue;
  if (p.n_tok == 0) return cudaSuccess;
  LLM_LAUNCH(MoeCombineKernel, static_cast<unsigned>(p.n_tok), kCombineThreads, 0, stream, p);
  return cudaGetLastError();
}

}  // namespace llm::cuda
