#include "attention_prefill.cuh"
#include "device_util.cuh"
#include "kv_elem.cuh"

namespace llm::cuda {
namespace {

constexpr int kBM = kPrefillTileQ;  // queries per CTA: 4 warps x 16 rows
constexpr int kBN = 64;             // keys per tile
constexpr int kThreads = 128;

__device__ __forceinline__ uint32_t Ld32(const bf16* p) { return *reinterpret_cast<const uint32_t*>(p); }

template <int HD>
__global__ void __launch_bounds__(kThreads) PrefillAttnKernel(PrefillAttnParams p) {
  constexpr int KS = HD + 8;   // row stride of sQK (Q rows, then K rows): 16-byte rows, conflict-free fragments
  constexpr int VS = kBN + 8;  // row stride of sVt (V transposed: (HD, kBN))
  constexpr int CH = HD / 8;   // 16-byte chunks per row
  __shared__ __align__(16) bf16 sQK[kBM * KS];
  __shared__ __align__(16) bf16 sVt[HD * VS];

  const PrefillWork w = p.work[blockIdx.x];
  const int32_t hq = blockIdx.y;
  const int32_t g = hq / (p.n_head / p.n_head_kv);
  const SeqDesc s = p.seqs[w.seq];
  const int32_t* table = p.block_tables + s.table_offset;
  const int32_t n_q = min(kBM, s.n_tokens - w.q0);
  const int32_t kv_end = s.n_past + w.q0 + n_q;  // keys [0, kv_end)
  const int32_t tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gq = lane >> 2, c4 = lane & 3;

  // ---- Q tile -> registers (A fragments), via shared memory
  for (int32_t c = tid; c < kBM * CH; c += kThreads) {
    const int32_t r = c / CH, d0 = (c % CH) * 8;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (r < n_q)
      v = *reinterpret_cast<const uint4*>(p.q + (static_cast<int64_t>(s.first + w.q0 + r) * p.n_head + hq) * HD + d0);
    *reinterpret_cast<uint4*>(sQK + r * KS + d0) = v;
  }
  __syncthreads();
  uint32_t qf[HD / 16][4];
  const int32_t r0 = warp * 16 + gq, r1 = r0 + 8;  // this thread's two query rows in the tile
#pragma unroll
  for (int kc = 0; kc < HD / 16; ++kc) {
    qf[kc][0] = Ld32(sQK + r0 * KS + kc * 16 + 2 * c4);
    qf[kc][1] = Ld32(sQK + r1 * KS + kc * 16 + 2 * c4);
    qf[kc][2] = Ld32(sQK + r0 * KS + kc * 16 + 8 + 2 * c4);
    qf[kc][3] = Ld32(sQK + r1 * KS + kc * 16 + 8 + 2 * c4);
  }

  // Last key each row may see (causal); -1 for rows past the sequence's tokens.
  const int32_t lim0 = r0 < n_q ? s.n_past + w.q0 + r0 : -1;
  const int32_t lim1 = r1 < n_q ? s.n_past + w.q0 + r1 : -1;
  const int32_t warp_rows = min(16, n_q - warp * 16);  // rows of this warp inside the sequence (may be <= 0)
  const int32_t warp_lim = warp_rows > 0 ? s.n_past + w.q0 + warp * 16 + warp_rows - 1 : -1;
  // First key each row may see (sliding window; 0 without one). Rows past
  // the sequence see nothing either way (lim = -1).
  const int32_t win = p.window;
  const int32_t lo0 = win > 0 ? lim0 - win + 1 : 0, lo1 = win > 0 ? lim1 - win + 1 : 0;
  const int32_t warp_lo = win > 0 ? s.n_past + w.q0 + warp * 16 - win + 1 : 0;  // the warp's first row's
  const int32_t cta_lo = win > 0 ? max(0, s.n_past + w.q0 - win + 1) : 0;
  const bool capped = p.softcap > 0.0f;
  const float sl2 = p.scale * dev::kLog2e, inv_cap = capped ? 1.0f / p.softcap : 0.0f;

  float o[HD / 8][4];
#pragma unroll
  for (int i = 0; i < HD / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float m0 = dev::kNegInf, m1 = dev::kNegInf, l0 = 0.0f, l1 = 0.0f;

  for (int32_t kb = cta_lo / kBN * kBN; kb < kv_end; kb += kBN) {
    __syncthreads();  // Q fragments loaded / previous tile consumed
    // ---- K tile (key-major) and V tile (transposed) -> shared; keys >= kv_end are zeros
    for (int32_t c = tid; c < kBN * CH; c += kThreads) {
      const int32_t k = c / CH, d0 = (c % CH) * 8, key = kb + k;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (key < kv_end) v = dev::LoadKv8(dev::KPlane(p.kv), table, key, g, HD, d0);  // bf16 from K's type
      *reinterpret_cast<uint4*>(sQK + k * KS + d0) = v;
    }
    for (int32_t c = tid; c < kBN * CH; c += kThreads) {
      const int32_t k = c % kBN, d0 = (c / kBN) * 8, key = kb + k;  // consecutive threads: consecutive keys
      uint4 v = make_uint4(0, 0, 0, 0);
      if (key < kv_end) v = dev::LoadKv8(dev::VPlane(p.kv), table, key, g, HD, d0);  // from V's type
      const bf16* e = reinterpret_cast<const bf16*>(&v);
#pragma unroll
      for (int i = 0; i < 8; ++i) sVt[(d0 + i) * VS + k] = e[i];
    }
    __syncthreads();
    if (kb > warp_lim) continue;  // every key of this tile is in the future of this warp's rows
    if (kb + kBN <= warp_lo) continue;  // every key of this tile is before this warp's windows

    // ---- S = Q K^T (16 x 64 per warp)
    float sc[kBN / 8][4];
#pragma unroll
    for (int nt = 0; nt < kBN / 8; ++nt) {
      sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.0f;
#pragma unroll
      for (int kc = 0; kc < HD / 16; ++kc) {
        const bf16* kr = sQK + (nt * 8 + gq) * KS + kc * 16 + 2 * c4;
        dev::MmaBf16(sc[nt], qf[kc], Ld32(kr), Ld32(kr + 8));
      }
    }
    // ---- causal mask, scale to log2 units, row max
    float mx0 = dev::kNegInf, mx1 = dev::kNegInf;
#pragma unroll
    for (int nt = 0; nt < kBN / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int32_t key = kb + nt * 8 + 2 * c4 + (e & 1);
        const bool ok = key <= (e < 2 ? lim0 : lim1) && key >= (e < 2 ? lo0 : lo1);
        const float v = capped ? p.softcap * tanhf(sc[nt][e] * p.scale * inv_cap) * dev::kLog2e : sc[nt][e] * sl2;
        sc[nt][e] = ok ? v : dev::kNegInf;
      }
      mx0 = fmaxf(mx0, fmaxf(sc[nt][0], sc[nt][1]));
      mx1 = fmaxf(mx1, fmaxf(sc[nt][2], sc[nt][3]));
    }
    // a row's 64 scores live in the 4 threads of its quad
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
    // Rows with nothing visible yet keep a reference of 0: exp2(-inf - 0) = 0, no NaN.
    const float ref0 = mn0 == dev::kNegInf ? 0.0f : mn0, ref1 = mn1 == dev::kNegInf ? 0.0f : mn1;
    const float alpha0 = exp2f(m0 - ref0), alpha1 = exp2f(m1 - ref1);
    m0 = mn0;
    m1 = mn1;
    float sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
    for (int nt = 0; nt < kBN / 8; ++nt) {
      sc[nt][0] = exp2f(sc[nt][0] - ref0);
      sc[nt][1] = exp2f(sc[nt][1] - ref0);
      sc[nt][2] = exp2f(sc[nt][2] - ref1);
      sc[nt][3] = exp2f(sc[nt][3] - ref1);
      sum0 += sc[nt][0] + sc[nt][1];
      sum1 += sc[nt][2] + sc[nt][3];
    }
    l0 = l0 * alpha0 + sum0;  // per-thread partial sums; the quad is summed at the end
    l1 = l1 * alpha1 + sum1;
#pragma unroll
    for (int dt = 0; dt < HD / 8; ++dt) {
      o[dt][0] *= alpha0;
      o[dt][1] *= alpha0;
      o[dt][2] *= alpha1;
      o[dt][3] *= alpha1;
    }
    // ---- O += P V: the S accumulators of key tiles 2kk, 2kk+1 are P's A fragment
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) {
      const uint32_t a[4] = {dev::PackBf16x2(sc[2 * kk][0], sc[2 * kk][1]),
                             dev::PackBf16x2(sc[2 * kk][2], sc[2 * kk][3]),
                             dev::PackBf16x2(sc[2 * kk + 1][0], sc[2 * kk + 1][1]),
                             dev::PackBf16x2(sc[2 * kk + 1][2], sc[2 * kk + 1][3])};
#pragma unroll
      for (int dt = 0; dt < HD / 8; ++dt) {
        const bf16* vr = sVt + (dt * 8 + gq) * VS + kk * 16 + 2 * c4;
        dev::MmaBf16(o[dt], a, Ld32(vr), Ld32(vr + 8));
      }
    }
  }

  // ---- normalise and write this thread's rows
  l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
  l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
  float a0 = 1.0f, a1 = 1.0f;  // with a sink: its term joins the sum, the max also over it
  if (p.sinks != nullptr) {
    const float s2 = p.sinks[hq] * dev::kLog2e, mm0 = fmaxf(m0, s2), mm1 = fmaxf(m1, s2);
    a0 = exp2f(m0 - mm0);
    a1 = exp2f(m1 - mm1);
    l0 = l0 * a0 + exp2f(s2 - mm0);
    l1 = l1 * a1 + exp2f(s2 - mm1);
  }
  const float inv0 = l0 > 0.0f ? a0 / l0 : 0.0f, inv1 = l1 > 0.0f ? a1 / l1 : 0.0f;
  if (r0 < n_q) {
    bf16* dst = p.out + (static_cast<int64_t>(s.first + w.q0 + r0) * p.n_head + hq) * HD + 2 * c4;
#pragma unroll
    for (int dt = 0; dt < HD / 8; ++dt)
      *reinterpret_cast<uint32_t*>(dst + dt * 8) = dev::PackBf16x2(o[dt][0] * inv0, o[dt][1] * inv0);
  }
  if (r1 < n_q) {
    bf16* dst = p.out + (static_cast<int64_t>(s.first + w.q0 + r1) * p.n_head + hq) * HD + 2 * c4;
#pragma unroll
    for (int dt = 0; dt < HD / 8; ++dt)
      *reinterpret_cast<uint32_t*>(dst + dt * 8) = dev::PackBf16x2(o[dt][2] * inv1, o[dt][3] * inv1);
  }
}

}  // namespace

bool PrefillAttentionSupports(int32_t head_dim) { return head_dim == 64 || head_dim == 128; }

cudaError_t LaunchPrefillAttention(const PrefillAttnParams& p, cudaStream_t stream) {
  if (p.n_work < 0 || p.n_head <= 0 || p.n_head_kv <= 0 || p.n_head % p.n_head_kv != 0 || p.n_head > 65535 ||
      !PrefillAttentionSupports(p.head_dim) || p.kv.block_size <= 0 || p.window < 0 || !(p.softcap >= 0.0f) ||
      !KvElemFits(p.kv.elem, p.head_dim) || !KvElemFits(p.kv.ElemV(), p.head_dim) || !p.kv.Aligned(p.head_dim))
    return cudaErrorInvalidValue;
  if (p.n_work == 0) return cudaSuccess;
  const dim3 grid(p.n_work, p.n_head);
  if (p.head_dim == 64) {
    LLM_LAUNCH(PrefillAttnKernel<64>, grid, kThreads, 0, stream, p);
  } else {
    LLM_LAUNCH(PrefillAttnKernel<128>, grid, kThreads, 0, stream, p);
  }
  return cudaGetLastError();
}

}  // namespace llm::cuda
