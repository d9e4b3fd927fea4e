#include <algorithm>

#include "attention_decode.cuh"
#include "device_util.cuh"
#include "kv_elem.cuh"

namespace llm::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxOutPerThread = 32;  // n_rep * head_dim <= 4096

struct Smem {
  // Offsets in bytes into the dynamic shared memory of one CTA.
  int32_t v, k, q, s, m, l, a, total;
};

// sV (kt, hd) bf16 | sK (kt, hd + 2) bf16 | sQ (n_rep, hd) f32 | sS (n_rep, kt) f32 | sM, sL, sA (n_rep) f32
// sK rows are padded by one 4-byte word: (hd + 2) / 2 words is odd for the
// head dims in use, so threads reading different keys at the same d hit
// different banks.
__host__ __device__ inline Smem SmemLayout(int32_t kt, int32_t hd, int32_t n_rep) {
  Smem s;
  s.v = 0;
  s.k = s.v + kt * hd * 2;
  s.q = s.k + kt * (hd + 2) * 2;
  s.s = s.q + n_rep * hd * 4;
  s.m = s.s + n_rep * kt * 4;
  s.l = s.m + n_rep * 4;
  s.a = s.l + n_rep * 4;
  s.total = s.a + n_rep * 4;
  return s;
}

__global__ void __launch_bounds__(kThreads) DecodeAttnKernel(DecodeAttnParams p, int32_t kt, float* ws_o,
                                                             float* ws_ml) {
  LLM_DYNAMIC_SMEM(unsigned char, smem);
  const int32_t hd = p.head_dim, n_rep = p.n_head / p.n_head_kv;
  const Smem L = SmemLayout(kt, hd, n_rep);
  bf16* sV = reinterpret_cast<bf16*>(smem + L.v);
  bf16* sK = reinterpret_cast<bf16*>(smem + L.k);
  float* sQ = reinterpret_cast<float*>(smem + L.q);
  float* sS = reinterpret_cast<float*>(smem + L.s);
  float* sM = reinterpret_cast<float*>(smem + L.m);
  float* sL = reinterpret_cast<float*>(smem + L.l);
  float* sA = reinterpret_cast<float*>(smem + L.a);

  const int32_t split = blockIdx.x, g = blockIdx.y, item = blockIdx.z;
  const int32_t t = p.items[item];
  const SeqDesc seq = p.seqs[p.tok_seq[t]];
  const int32_t* table = p.block_tables + seq.table_offset;
  const int32_t n_keys = p.tok_pos[t] + 1;
  // A sliding window drops the oldest keys: the splits divide [lo, n_keys).
  const int32_t lo = p.window > 0 && n_keys > p.window ? n_keys - p.window : 0;
  int32_t keys_per_split = p.keys_per_split;
  if (p.dynamic_split) {  // whole tiles, so every split but the last is full
    const int32_t tiles = (n_keys - lo + kt - 1) / kt;
    keys_per_split = (tiles + p.n_splits - 1) / p.n_splits * kt;
  }
  // 64-bit: split * keys_per_split may pass 2^31 for the empty trailing splits
  const int64_t key_begin64 = lo + static_cast<int64_t>(split) * keys_per_split;
  const int32_t key_begin = static_cast<int32_t>(min(key_begin64, static_cast<int64_t>(n_keys)));
  const int32_t key_end = static_cast<int32_t>(min(static_cast<int64_t>(n_keys), key_begin64 + keys_per_split));
  const int32_t tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

  if (key_begin >= key_end) {  // this split has no keys for this item (shorter than the longest)
    // A loop, not `tid < n_rep`: n_rep may exceed the CTA's threads (n_rep *
    // head_dim <= 4096 allows n_rep up to 2048 at head_dim 2), and every
    // head's statistics must be written or the combine reads stale ones.
    for (int32_t h = tid; p.n_splits > 1 && h < n_rep; h += kThreads) {
      const int64_t slot = (static_cast<int64_t>(item) * p.n_head + g * n_rep + h) * p.n_splits + split;
      ws_ml[slot * 2 + 0] = dev::kNegInf;
      ws_ml[slot * 2 + 1] = 0.0f;
    }
    return;
  }

  // Queries of the group, pre-scaled so that scores are in log2 units; with
  // a soft-cap the cap applies to the natural-unit score first.
  const bool capped = p.softcap > 0.0f;
  const float qscale = capped ? p.scale : p.scale * dev::kLog2e;
  const float inv_cap = capped ? 1.0f / p.softcap : 0.0f;
  for (int32_t i = tid; i < n_rep * hd; i += kThreads) {
    const int32_t h = i / hd, d = i % hd;
    sQ[i] = __bfloat162float(p.q[(static_cast<int64_t>(t) * p.n_head + g * n_rep + h) * hd + d]) * qscale;
  }
  for (int32_t h = tid; h < n_rep; h += kThreads) {
    sM[h] = dev::kNegInf;
    sL[h] = 0.0f;
  }
  float o[kMaxOutPerThread];
#pragma unroll
  for (int i = 0; i < kMaxOutPerThread; ++i) o[i] = 0.0f;
  const int32_t n_out = n_rep * hd;
  const bool vec = hd % 8 == 0;

  for (int32_t key0 = key_begin; key0 < key_end; key0 += kt) {
    __syncthreads();  // the previous tile's readers are done (and sQ/sM/sL are set on the first)
    // ---- K, V tile -> shared memory; keys past key_end read as zeros
    if (vec) {
      const int32_t chunks = hd / 8;
      for (int32_t c = tid; c < kt * chunks; c += kThreads) {
        const int32_t k = c / chunks, d0 = (c % chunks) * 8, key = key0 + k;
        uint4 kv = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
        if (key < key_end) {  // widened to bf16 from each side's type
          kv = dev::LoadKv8(dev::KPlane(p.kv), table, key, g, hd, d0);
          vv = dev::LoadKv8(dev::VPlane(p.kv), table, key, g, hd, d0);
        }
        uint32_t* kd = reinterpret_cast<uint32_t*>(sK + k * (hd + 2) + d0);
        kd[0] = kv.x;
        kd[1] = kv.y;
        kd[2] = kv.z;
        kd[3] = kv.w;
        *reinterpret_cast<uint4*>(sV + k * hd + d0) = vv;
      }
    } else {
      for (int32_t c = tid; c < kt * hd; c += kThreads) {
        const int32_t k = c / hd, d = c % hd, key = key0 + k;
        bf16 kv = __float2bfloat16_rn(0.0f), vv = kv;
        if (key < key_end) {
          kv = dev::LoadKv1(dev::KPlane(p.kv), table, key, g, hd, d);
          vv = dev::LoadKv1(dev::VPlane(p.kv), table, key, g, hd, d);
        }
        sK[k * (hd + 2) + d] = kv;
        sV[k * hd + d] = vv;
      }
    }
    __syncthreads();

    // ---- scores (log2 units), -inf past the last key
    for (int32_t i = tid; i < n_rep * kt; i += kThreads) {
      const int32_t h = i / kt, k = i % kt;
      float s = dev::kNegInf;
      if (key0 + k < key_end) {
        const float* q = sQ + h * hd;
        const __nv_bfloat162* kr = reinterpret_cast<const __nv_bfloat162*>(sK + k * (hd + 2));
        float acc = 0.0f;
        for (int32_t d = 0; d < hd / 2; ++d) {
          const float2 kf = __bfloat1622float2(kr[d]);
          acc = fmaf(q[2 * d], kf.x, acc);
          acc = fmaf(q[2 * d + 1], kf.y, acc);
        }
        s = capped ? p.softcap * tanhf(acc * inv_cap) * dev::kLog2e : acc;
      }
      sS[i] = s;
    }
    __syncthreads();

    // ---- online softmax, one warp per query head
    for (int32_t h = warp; h < n_rep; h += kWarps) {
      float* sr = sS + h * kt;
      float mx = dev::kNegInf;
      for (int32_t k = lane; k < kt; k += 32) mx = fmaxf(mx, sr[k]);
      mx = dev::WarpMax(mx);
      const float m_old = sM[h];
      const float m_new = fmaxf(m_old, mx);  // finite: key0 < key_end is a valid key
      float sum = 0.0f;
      for (int32_t k = lane; k < kt; k += 32) {
        const float e = exp2f(sr[k] - m_new);
        sr[k] = e;
        sum += e;
      }
      sum = dev::WarpSum(sum);
      __syncwarp();  // every lane has read sM[h] (m_old): a shuffle does not order memory
      if (lane == 0) {
        const float alpha = exp2f(m_old - m_new);  // 0 on the first tile
        sA[h] = alpha;
        sL[h] = sL[h] * alpha + sum;
        sM[h] = m_new;
      }
    }
    __syncthreads();

    // ---- o = o * alpha + P V
#pragma unroll
    for (int i = 0; i < kMaxOutPerThread; ++i) {
      const int32_t idx = tid + i * kThreads;
      if (idx < n_out) {
        const int32_t h = idx / hd, d = idx % hd;
        const float* pr = sS + h * kt;
        float acc = o[i] * sA[h];
        for (int32_t k = 0; k < kt; ++k) acc = fmaf(pr[k], __bfloat162float(sV[k * hd + d]), acc);
        o[i] = acc;
      }
    }
  }
  __syncthreads();

  // ---- write the output, or this split's partial result
#pragma unroll
  for (int i = 0; i < kMaxOutPerThread; ++i) {
    const int32_t idx = tid + i * kThreads;
    if (idx < n_out) {
      const int32_t h = idx / hd, d = idx % hd, hq = g * n_rep + h;
      if (p.n_splits == 1) {
        // With a sink: the max over scores and sink is the reference, the
        // sink's term joins the sum only.
        float l = sL[h], a = 1.0f;
        if (p.sinks != nullptr) {
          const float s2 = p.sinks[hq] * dev::kLog2e, m = fmaxf(sM[h], s2);
          a = exp2f(sM[h] - m);
          l = l * a + exp2f(s2 - m);
        }
        p.out[(static_cast<int64_t>(t) * p.n_head + hq) * hd + d] =
            __float2bfloat16_rn(l > 0.0f ? o[i] * a / l : 0.0f);
      } else {
        const int64_t slot = (static_cast<int64_t>(item) * p.n_head + hq) * p.n_splits + split;
        ws_o[slot * hd + d] = o[i];
      }
    }
  }
  // Every head's running max and sum, however many heads the group has
  // (n_rep > kThreads: each thread takes several, as for sM/sL above).
  for (int32_t h = tid; p.n_splits > 1 && h < n_rep; h += kThreads) {
    const int64_t slot = (static_cast<int64_t>(item) * p.n_head + g * n_rep + h) * p.n_splits + split;
    ws_ml[slot * 2 + 0] = sM[h];
    ws_ml[slot * 2 + 1] = sL[h];
  }
}

// One CTA per (item, query head): out = sum_s 2^(m_s - M) o_s / sum_s 2^(m_s - M) l_s
// [+ 2^(sink - M) in the denominator, M also over the sink].
__global__ void DecodeCombineKernel(DecodeAttnParams p, const float* __restrict__ ws_o,
                                    const float* __restrict__ ws_ml) {
  const int32_t item = blockIdx.x / p.n_head, hq = blockIdx.x % p.n_head;
  const int32_t t = p.items[item];
  const int64_t base = (static_cast<int64_t>(item) * p.n_head + hq) * p.n_splits;
  float m = dev::kNegInf;
  for (int32_t s = 0; s < p.n_splits; ++s)
    if (ws_ml[(base + s) * 2 + 1] > 0.0f) m = fmaxf(m, ws_ml[(base + s) * 2]);
  const float s2 = p.sinks != nullptr ? p.sinks[hq] * dev::kLog2e : dev::kNegInf;
  m = fmaxf(m, s2);
  float l = p.sinks != nullptr ? exp2f(s2 - m) : 0.0f;
  for (int32_t s = 0; s < p.n_splits; ++s) {
    const float ls = ws_ml[(base + s) * 2 + 1];
    if (ls > 0.0f) l += ls * exp2f(ws_ml[(base + s) * 2] - m);
  }
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  for (int32_t d = threadIdx.x; d < p.head_dim; d += blockDim.x) {
    float acc = 0.0f;
    for (int32_t s = 0; s < p.n_splits; ++s) {
      const float ls = ws_ml[(base + s) * 2 + 1];
      if (ls > 0.0f) acc += ws_o[(base + s) * p.head_dim + d] * exp2f(ws_ml[(base + s) * 2] - m);  // skip empty splits
    }
    p.out[(static_cast<int64_t>(t) * p.n_head + hq) * p.head_dim + d] = __float2bfloat16_rn(acc * inv);
  }
}

}  // namespace

int32_t DecodeKeyTile(int32_t head_dim) { return head_dim <= 128 ? 64 : 32; }

void PlanDecodeAttention(int32_t n_items, int32_t n_head_kv, int32_t head_dim, int32_t max_keys, int32_t n_sm,
                         int32_t max_slots, int32_t* n_splits, int32_t* keys_per_split) {
  const int32_t kt = DecodeKeyTile(head_dim);
  const int64_t ctas = static_cast<int64_t>(std::max(n_items, 1)) * std::max(n_head_kv, 1);
  int64_t splits = (2 * static_cast<int64_t>(std::max(n_sm, 1)) + ctas - 1) / ctas;
  const int64_t tiles = (std::max(max_keys, 1) + kt - 1) / kt;
  splits = std::min(splits, tiles);
  splits = std::min<int64_t>(splits, std::max(max_slots, 0) / std::max(n_items, 1));
  splits = std::max<int64_t>(splits, 1);
  const int64_t tiles_per_split = (tiles + splits - 1) / splits;
  *keys_per_split = static_cast<int32_t>(tiles_per_split * kt);
  *n_splits = static_cast<int32_t>((tiles + tiles_per_split - 1) / tiles_per_split);
}

size_t DecodeAttnWorkspaceBytes(int32_t max_slots, int32_t n_head, int32_t head_dim) {
  return static_cast<size_t>(std::max(max_slots, 0)) * n_head * (head_dim + 2) * sizeof(float);
}

cudaError_t LaunchDecodeAttention(const DecodeAttnParams& p, void* workspace, size_t workspace_bytes,
                                  cudaStream_t stream) {
  if (p.n_items < 0 || p.n_head <= 0 || p.n_head_kv <= 0 || p.n_head % p.n_head_kv != 0 || p.head_dim <= 0 ||
      p.head_dim % 2 != 0 || p.head_dim > 256 || p.n_splits < 1 || p.kv.block_size <= 0 || p.window < 0 ||
      !(p.softcap >= 0.0f) || !KvElemFits(p.kv.elem, p.head_dim) || !KvElemFits(p.kv.ElemV(), p.head_dim) || !p.kv.Aligned(p.head_dim))
    return cudaErrorInvalidValue;
  const int32_t n_rep = p.n_head / p.n_head_kv, kt = DecodeKeyTile(p.head_dim);
  if (n_rep * p.head_dim > kMaxOutPerThread * kThreads) return cudaErrorInvalidValue;
  if (p.n_splits > 1 && !p.dynamic_split && (p.keys_per_split <= 0 || p.keys_per_split % kt != 0))
    return cudaErrorInvalidValue;
  if (p.n_items == 0) return cudaSuccess;
  if (p.n_items > 65535 || p.n_head_kv > 65535) return cudaErrorInvalidValue;
  DecodeAttnParams q = p;
  if (q.n_splits == 1 && !q.dynamic_split) q.keys_per_split = 1 << 30;
  float* ws_o = nullptr;
  float* ws_ml = nullptr;
  if (q.n_splits > 1) {
    const int64_t slots = static_cast<int64_t>(q.n_items) * q.n_splits;
    if (DecodeAttnWorkspaceBytes(static_cast<int32_t>(std::min<int64_t>(slots, INT32_MAX)), q.n_head, q.head_dim) >
            workspace_bytes ||
        workspace == nullptr)
      return cudaErrorInvalidValue;
    ws_o = static_cast<float*>(workspace);
    ws_ml = ws_o + slots * q.n_head * q.head_dim;
  }
  const Smem L = SmemLayout(kt, q.head_dim, n_rep);
  if (L.total > 48 * 1024) {
    cudaError_t e = cudaFuncSetAttribute(DecodeAttnKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, L.total);
    if (e != cudaSuccess) return e;
  }
  LLM_LAUNCH(DecodeAttnKernel, dim3(q.n_splits, q.n_head_kv, q.n_items), kThreads, L.total, stream, q, kt, ws_o, ws_ml);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess || q.n_splits == 1) return e;
  LLM_LAUNCH(DecodeCombineKernel, q.n_items * q.n_head, 128, 0, stream, q, ws_o, ws_ml);
  return cudaGetLastError();
}

}  // namespace llm::cuda
