#include "device_util.cuh"
#include "sampling.cuh"

namespace llm::cuda {
namespace {

// ================================================================ argmax

constexpr int kThreads = 256;

__device__ __forceinline__ bool Better(float v, int32_t i, float bv, int32_t bi) {
  return v > bv || (v == bv && i < bi);
}

__global__ void __launch_bounds__(kThreads) ArgmaxKernel(const float* __restrict__ logits, int32_t n_vocab,
                                                         int32_t* __restrict__ out) {
  __shared__ float sv[kThreads / 32];
  __shared__ int32_t si[kThreads / 32];
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * n_vocab;
  float bv = -INFINITY;
  int32_t bi = n_vocab;  // "none yet": loses every tie
  for (int32_t j = threadIdx.x; j < n_vocab; j += kThreads) {
    const float v = row[j];
    if (v == v && Better(v, j, bv, bi)) bv = v, bi = j;
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, bv, o);
    const int32_t i = __shfl_xor_sync(0xffffffffu, bi, o);
    if (Better(v, i, bv, bi)) bv = v, bi = i;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) sv[warp] = bv, si[warp] = bi;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w)
      if (Better(sv[w], si[w], bv, bi)) bv = sv[w], bi = si[w];
    out[blockIdx.x] = bi < n_vocab ? bi : 0;  // an all-NaN row gives token 0
  }
}

// ================================================================ sampling
//
// One CTA of kSampleThreads per row. Every helper below is called by all
// threads of the CTA with block-uniform arguments (they synchronise inside),
// and returns a block-uniform result.

constexpr int kSampleThreads = 512;
constexpr int kSampleWarps = kSampleThreads / 32;
using u64 = unsigned long long;

struct SampleSmem {
  uint32_t hist[256];  // radix digit counts (top-k)
  u64 mass[256];       // radix digit masses (top-p)
  float f[kSampleWarps];
  int32_t i[kSampleWarps];
  uint32_t u32[kSampleWarps];
  u64 u64s[kSampleWarps];
  uint32_t sel_digit;  // broadcast slots written by thread 0
  uint32_t sel_rem;
  u64 sel_mrem;
  int32_t sel_ok;
  int32_t found;
  float raw;
};

// NaN counts as -inf (the host Sampler overwrites NaN with -inf); -0 as +0
// (equal floats must get equal keys, or ties would not fall to the lower id).
__device__ __forceinline__ float Clean(float v) { return v != v ? -INFINITY : (v == 0.0f ? 0.0f : v); }

// Order-preserving key of a non-NaN float: a > b  <=>  Key(a) > Key(b).
__device__ __forceinline__ uint32_t Key(float v) {
  const uint32_t b = __float_as_uint(v);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ float KeyValue(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7FFFFFFFu) : ~k);
}

// The host's weight: exp((l - max) / T) as float, in (0, 1] for l <= max; then
// 2^-40 fixed point (w * 2^40 is exact in float, the conversion rounds).
__device__ __forceinline__ float Weight(float l, float lmax, float inv_t) { return expf((l - lmax) * inv_t); }
__device__ __forceinline__ u64 Fixed(float w) { return __float2ull_rn(ldexpf(w, 40)); }

__device__ __forceinline__ float BlockMax(float v, SampleSmem& sm) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = dev::WarpMax(v);
  __syncthreads();  // sm.f may still be read by a previous call
  if (lane == 0) sm.f[warp] = v;
  __syncthreads();
  float r = -INFINITY;
  for (int w = 0; w < kSampleWarps; ++w) r = fmaxf(r, sm.f[w]);
  return r;
}

__device__ __forceinline__ float BlockSumF(float v, SampleSmem& sm) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = dev::WarpSum(v);
  __syncthreads();
  if (lane == 0) sm.f[warp] = v;
  __syncthreads();
  float r = 0.0f;
  for (int w = 0; w < kSampleWarps; ++w) r += sm.f[w];  // fixed order: deterministic
  return r;
}

__device__ __forceinline__ u64 BlockSumU64(u64 v, SampleSmem& sm) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if (lane == 0) sm.u64s[warp] = v;
  __syncthreads();
  u64 r = 0;
  for (int w = 0; w < kSampleWarps; ++w) r += sm.u64s[w];
  return r;
}

// Inclusive prefix sum over the CTA in thread order; *total = the CTA's sum.
template <typename T>
__device__ __forceinline__ T BlockScan(T v, T* red, T* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const T y = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += y;
  }
  __syncthreads();  // red may still be read by a previous call
  if (lane == 31) red[warp] = v;
  __syncthreads();
  T off = 0, tot = 0;
  for (int w = 0; w < kSampleWarps; ++w) {
    if (w < warp) off += red[w];
    tot += red[w];
  }
  *total = tot;
  return v + off;
}

// The host Sampler's Argmax: the first maximum in id order, NaN never wins,
// and 0 when nothing beats -inf.
__device__ int32_t BlockArgmax(const float* row, int32_t n, SampleSmem& sm) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float bv = -INFINITY;
  int32_t bi = n;
  for (int32_t j = threadIdx.x; j < n; j += kSampleThreads) {
    const float v = row[j];
    if (v == v && Better(v, j, bv, bi)) bv = v, bi = j;
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, bv, o);
    const int32_t i = __shfl_xor_sync(0xffffffffu, bi, o);
    if (Better(v, i, bv, bi)) bv = v, bi = i;
  }
  __syncthreads();
  if (lane == 0) sm.f[warp] = bv, sm.i[warp] = bi;
  __syncthreads();
  bv = -INFINITY;
  bi = n;
  for (int w = 0; w < kSampleWarps; ++w)
    if (Better(sm.f[w], sm.i[w], bv, bi)) bv = sm.f[w], bi = sm.i[w];
  return (bv > -INFINITY && bi < n) ? bi : 0;
}

// The id of the nth (1-based) j in id order with pred(j), or -1.
template <typename Pred>
__device__ int32_t FindNth(int32_t n_vocab, uint32_t nth, Pred pred, SampleSmem& sm) {
  __syncthreads();  // sm.found may still be read by a previous call
  if (threadIdx.x == 0) sm.found = -1;
  uint32_t running = 0;
  for (int32_t j0 = 0; j0 < n_vocab; j0 += kSampleThreads) {
    const int32_t j = j0 + threadIdx.x;
    const uint32_t f = (j < n_vocab && pred(j)) ? 1u : 0u;
    uint32_t total;
    const uint32_t incl = BlockScan<uint32_t>(f, sm.u32, &total);  // syncs: orders the reset above first
    if (f && running + incl == nth) sm.found = j;
    running += total;
    if (running >= nth) break;  // block-uniform
  }
  __syncthreads();
  return sm.found;
}

__global__ void __launch_bounds__(kSampleThreads) SampleKernel(SampleArgs a) {
  __shared__ SampleSmem sm;
  const int32_t tid = threadIdx.x, V = a.n_vocab;
  const SampleRowParams P = a.params[blockIdx.x];
  float* row = a.logits + static_cast<int64_t>(blockIdx.x) * V;

  // ---- 1. log-sum-exp of the raw logits (for the logprob)
  float raw_m = -INFINITY, raw_s = 0.0f;
  if (a.logprobs != nullptr) {
    float m = -INFINITY;
    for (int32_t j = tid; j < V; j += kSampleThreads) m = fmaxf(m, row[j]);  // fmaxf skips NaN
    raw_m = BlockMax(m, sm);
    float s = 0.0f;
    if (isfinite(raw_m))
      for (int32_t j = tid; j < V; j += kSampleThreads) {
        const float v = row[j];
        if (v == v) s += expf(v - raw_m);
      }
    raw_s = BlockSumF(s, sm);  // its syncs order every read above before the writes below
  }

  // ---- 2. penalties, in place, as Sampler::ApplyPenalties (distinct ids: one writer per logit).
  // _rn intrinsics: no FMA contraction, the host's rounding step by step.
  for (int32_t i = tid; i < P.n_pen; i += kSampleThreads) {
    const int32_t tok = a.pen_tokens[P.pen_offset + i];
    if (tok < 0 || tok >= V) continue;
    float l = row[tok];
    a.pen_raw[P.pen_offset + i] = l;
    if (P.repetition_penalty != 1.0f)
      l = l > 0.0f ? __fdiv_rn(l, P.repetition_penalty) : __fmul_rn(l, P.repetition_penalty);
    const float count = static_cast<float>(a.pen_counts[P.pen_offset + i]);
    l = __fsub_rn(l, __fadd_rn(__fmul_rn(count, P.frequency_penalty), P.presence_penalty));
    row[tok] = l;
  }
  __syncthreads();

  // ---- 3. choose
  int32_t token = 0;
  const float inv_t = 1.0f / P.temperature;  // IEEE division, as the host
  if (P.temperature == 0.0f || P.top_k == 1 || !isfinite(inv_t)) {
    token = BlockArgmax(row, V, sm);
  } else {
    float m = -INFINITY;
    for (int32_t j = tid; j < V; j += kSampleThreads) m = fmaxf(m, Clean(row[j]));
    const float lmax = BlockMax(m, sm);
    if (!isfinite(lmax)) {  // all -inf, or +inf present: the host takes the argmax
      token = BlockArgmax(row, V, sm);
    } else {
      // -- top-k: the k-th of the (logit desc, id asc) order is (kkey, kid)
      const int32_t k = (P.top_k > 0 && P.top_k < V) ? P.top_k : 0;
      uint32_t kkey = 0;
      int32_t kid = V - 1;
      if (k > 0) {
        uint32_t prefix = 0, mask = 0, remaining = static_cast<uint32_t>(k);
        for (int shift = 24; shift >= 0; shift -= 8) {
          __syncthreads();  // the previous round's reads of hist (thread 0) are done
          for (int b = tid; b < 256; b += kSampleThreads) sm.hist[b] = 0;
          __syncthreads();
          for (int32_t j = tid; j < V; j += kSampleThreads) {
            const uint32_t key = Key(Clean(row[j]));
            if ((key & mask) == prefix) atomicAdd(&sm.hist[(key >> shift) & 255u], 1u);
          }
          __syncthreads();
          if (tid == 0) {
            uint32_t cum = 0, sel = 0, rem = 1;
            for (int b = 255; b >= 0; --b) {
              if (cum + sm.hist[b] >= remaining) {
                sel = static_cast<uint32_t>(b);
                rem = remaining - cum;  // >= 1
                break;
              }
              cum += sm.hist[b];
            }
            sm.sel_digit = sel;
            sm.sel_rem = rem;
          }
          __syncthreads();
          prefix |= sm.sel_digit << shift;
          mask |= 255u << shift;
          remaining = sm.sel_rem;
        }
        kkey = prefix;
        const uint32_t kk = kkey;
        const int32_t id = FindNth(V, remaining, [&](int32_t j) { return Key(Clean(row[j])) == kk; }, sm);
        kid = id >= 0 ? id : V - 1;
      }
      const uint32_t kk = kkey;
      const int32_t ki = kid;
      const bool all_k = k == 0;
      auto in_top_k = [=](int32_t j, uint32_t key) { return all_k || key > kk || (key == kk && j <= ki); };

      // -- z: the top-k set's mass
      u64 zl = 0;
      for (int32_t j = tid; j < V; j += kSampleThreads) {
        const float l = Clean(row[j]);
        if (in_top_k(j, Key(l))) zl += Fixed(Weight(l, lmax, inv_t));
      }
      const u64 z = BlockSumU64(zl, sm);

      // -- top-p: the shortest prefix whose mass reaches top_p * z ends at (pkey, pid)
      bool has_p = false;
      uint32_t pkey = 0;
      int32_t pid = V - 1;
      if (P.top_p < 1.0f && z > 0) {
        u64 target = static_cast<u64>(ceil(static_cast<double>(P.top_p) * static_cast<double>(z)));
        target = target < 1 ? 1 : (target > z ? z : target);
        uint32_t prefix = 0, mask = 0;
        u64 remaining = target;
        bool ok = true;
        for (int shift = 24; shift >= 0 && ok; shift -= 8) {
          __syncthreads();
          for (int b = tid; b < 256; b += kSampleThreads) sm.mass[b] = 0;
          __syncthreads();
          for (int32_t j = tid; j < V; j += kSampleThreads) {
            const float l = Clean(row[j]);
            const uint32_t key = Key(l);
            if ((key & mask) == prefix && in_top_k(j, key)) {
              const u64 w = Fixed(Weight(l, lmax, inv_t));
              if (w != 0) atomicAdd(&sm.mass[(key >> shift) & 255u], w);
            }
          }
          __syncthreads();
          if (tid == 0) {
            u64 cum = 0;
            uint32_t sel = 0;
            int32_t found = 0;
            u64 rem = 0;
            for (int b = 255; b >= 0; --b) {
              if (cum + sm.mass[b] >= remaining) {
                sel = static_cast<uint32_t>(b);
                rem = remaining - cum;  // >= 1
                found = 1;
                break;
              }
              cum += sm.mass[b];
            }
            sm.sel_digit = sel;
            sm.sel_mrem = rem;
            sm.sel_ok = found;
          }
          __syncthreads();
          ok = sm.sel_ok != 0;  // else integer sums disagree with z: cannot happen; keep everything
          prefix |= sm.sel_digit << shift;
          mask |= 255u << shift;
          remaining = sm.sel_mrem;
        }
        if (ok) {
          // Equal keys have equal weights: the cut falls after the c-th of them (id order).
          const u64 w = Fixed(Weight(KeyValue(prefix), lmax, inv_t));
          const u64 c = w > 0 ? (remaining + w - 1) / w : 1;
          const uint32_t pk = prefix;
          const int32_t id = FindNth(
              V, static_cast<uint32_t>(c),
              [&](int32_t j) {
                const uint32_t key = Key(Clean(row[j]));
                return key == pk && in_top_k(j, key);
              },
              sm);
          if (id >= 0) {
            has_p = true;
            pkey = prefix;
            pid = id;
          }
        }
      }
      const float min_p = P.min_p;
      auto weight_if_kept = [=](int32_t j) -> u64 {
        const float l = Clean(row[j]);
        const uint32_t key = Key(l);
        if (!in_top_k(j, key)) return 0;
        if (has_p && !(key > pkey || (key == pkey && j <= pid))) return 0;
        const float w = Weight(l, lmax, inv_t);
        return w >= min_p ? Fixed(w) : 0;  // min-p: p >= min_p * p_max is w >= min_p
      };

      // -- draw: inverse CDF in id order over the kept weights
      u64 tl = 0;
      for (int32_t j = tid; j < V; j += kSampleThreads) tl += weight_if_kept(j);
      const u64 total = BlockSumU64(tl, sm);
      if (total == 0) {
        token = BlockArgmax(row, V, sm);  // cannot happen: the best token has w = 1
      } else {
        const double u = SampleUniform(P.seed, P.step);
        u64 target = static_cast<u64>(u * static_cast<double>(total));
        if (target >= total) target = total - 1;
        __syncthreads();
        if (tid == 0) sm.found = -1;
        u64 running = 0;
        for (int32_t j0 = 0; j0 < V; j0 += kSampleThreads) {
          const int32_t j = j0 + tid;
          const u64 w = j < V ? weight_if_kept(j) : 0;
          u64 chunk;
          const u64 incl = BlockScan<u64>(w, sm.u64s, &chunk);
          // the one j whose interval [running + incl - w, running + incl) holds target
          if (w != 0 && running + incl > target && running + incl - w <= target) sm.found = j;
          running += chunk;
          if (running > target) break;  // block-uniform
        }
        __syncthreads();
        token = sm.found >= 0 ? sm.found : BlockArgmax(row, V, sm);
      }
    }
  }

  // ---- 4. outputs
  if (a.logprobs != nullptr) {
    __syncthreads();
    if (tid == 0) sm.raw = row[token];
    __syncthreads();
    for (int32_t i = tid; i < P.n_pen; i += kSampleThreads)  // penalised: its raw value was saved
      if (a.pen_tokens[P.pen_offset + i] == token) sm.raw = a.pen_raw[P.pen_offset + i];
    __syncthreads();
    if (tid == 0) {
      const float l = sm.raw;
      a.logprobs[blockIdx.x] = (isfinite(raw_m) && l == l)
                                   ? static_cast<float>(static_cast<double>(l) - raw_m - log(static_cast<double>(raw_s)))
                                   : -INFINITY;
    }
  }
  if (tid == 0) a.tokens[blockIdx.x] = token;
}

}  // namespace

cudaError_t LaunchArgmax(const float* logits, int32_t n_rows, int32_t n_vocab, int32_t* out, cudaStream_t stream) {
  if (n_rows < 0 || n_vocab <= 0) return cudaErrorInvalidValue;
  if (n_rows == 0) return cudaSuccess;
  LLM_LAUNCH(ArgmaxKernel, n_rows, kThreads, 0, stream, logits, n_vocab, out);
  return cudaGetLastError();
}

cudaError_t LaunchSample(const SampleArgs& a, cudaStream_t stream) {
  if (a.n_rows < 0 || a.n_vocab <= 0) return cudaErrorInvalidValue;
  if (a.n_rows == 0) return cudaSuccess;
  if (a.logits == nullptr || a.params == nullptr || a.tokens == nullptr || a.pen_tokens == nullptr ||
      a.pen_counts == nullptr || a.pen_raw == nullptr)
    return cudaErrorInvalidValue;
  LLM_LAUNCH(SampleKernel, a.n_rows, kSampleThreads, 0, stream, a);
  return cudaGetLastError();
}

}  // namespace llm::cuda
