#include "device_util.cuh"
#include "kv_elem.cuh"
#include "rope_kv.cuh"

namespace llm::cuda {
namespace {

__global__ void RopeAnglesKernel(const int32_t* __restrict__ pos, int32_t n_pairs, const double* __restrict__ inv_freq,
                                 double magnitude, float* __restrict__ cos_sin) {
  const int64_t t = blockIdx.x;
  for (int32_t i = threadIdx.x; i < n_pairs; i += blockDim.x) {
    double s, c;
    sincos(static_cast<double>(pos[t]) * inv_freq[i], &s, &c);
    cos_sin[(t * n_pairs + i) * 2 + 0] = static_cast<float>(c * magnitude);
    cos_sin[(t * n_pairs + i) * 2 + 1] = static_cast<float>(s * magnitude);
  }
}

// Element indices (a, b) of pair item `i` of a head, i < head_dim / 2, and
// whether it rotates. Items past the rotated pairs copy the remaining dims
// two at a time.
__device__ __forceinline__ bool PairOf(int32_t i, int32_t n_pairs, int32_t neox, int32_t* a, int32_t* b) {
  if (!neox) {
    *a = 2 * i;
    *b = 2 * i + 1;
    return i < n_pairs;
  }
  if (i < n_pairs) {
    *a = i;
    *b = i + n_pairs;
    return true;
  }
  *a = 2 * n_pairs + 2 * (i - n_pairs);
  *b = *a + 1;
  return false;
}

// Value e of q | k | v row `src` with the bias added (Qwen2), before any norm.
__device__ __forceinline__ float Biased(const float* src, const float* bias, int64_t e) {
  return bias ? src[e] + bias[e] : src[e];
}

// One block per token. With q/k norms, first one thread per q and k head
// finds its 1 / rms (sInv: (n_head + n_head_kv) F32 dynamic shared memory).
// Items: (n_head + n_head_kv) heads x head_dim/2 pairs of q and k, then
// n_head_kv x head_dim values of v. Each side is stored in its own type
// (K: kv.elem, V: kv.ElemV()). A BF16/F16 side takes each value as it is
// made; for a Q8_0, FP8 or Q4_0 side the rows gather in sRow (2 n_head_kv
// rows of head_dim F32 after sInv: K, then V) and then one warp per row
// quantizes it (the row's scale needs all of it). A Q4_0 K also gathers the
// query rows (n_head more, after V); a Q4_0 side's rows are first rotated
// by its Hadamard size (rot_k: q and k, rot_v: v; kv_rotation.h), one warp
// per row, so the pool holds H k / H v and the attention reads H q.
__global__ void RopeStoreKvKernel(RopeKvParams p) {
  LLM_DYNAMIC_SMEM(float, sInv);
  const int32_t t = blockIdx.x;
  const int32_t hd = p.head_dim, half = hd / 2;
  const int64_t row = static_cast<int64_t>(p.n_head + 2 * p.n_head_kv) * hd;
  const float* src = p.qkv + t * row;
  const float* cs = p.cos_sin + static_cast<int64_t>(t) * p.n_pairs * 2;
  const SeqDesc s = p.seqs[p.tok_seq[t]];
  const int32_t pos = p.tok_pos[t];
  const int32_t block = p.block_tables[s.table_offset + pos / p.kv.block_size];
  const int32_t r = pos % p.kv.block_size;  // row in the block's tiles
  const int32_t ek = p.kv.elem, ev = p.kv.ElemV();
  const bool qk4 = ek == kKvQ4, v4 = ev == kKvQ4;  // rotated sides (a Q4_0 K rotates the query too)
  const bool gk = qk4 || ek == kKvQ8 || ek == kKvFp8, gv = v4 || ev == kKvQ8 || ev == kKvFp8;  // gathered sides
  float* sRow = sInv + (p.q_norm ? p.n_head + p.n_head_kv : 0);  // quantized sides: K rows, then V rows
  float* sQ = sRow + 2 * static_cast<int64_t>(p.n_head_kv) * hd;  // Q4_0 K: (n_head, hd) query rows

  const bool norm = p.q_norm != nullptr;
  if (norm) {
    for (int32_t h = threadIdx.x; h < p.n_head + p.n_head_kv; h += blockDim.x) {
      float ss = 0.0f;
      for (int32_t d = 0; d < hd; ++d) {
        const float v = Biased(src, p.bias, static_cast<int64_t>(h) * hd + d);
        ss += v * v;
      }
      sInv[h] = rsqrtf(ss / static_cast<float>(hd) + p.eps);
    }
    __syncthreads();
  }
  const int32_t n_rot = (p.n_head + p.n_head_kv) * half;
  for (int32_t j = threadIdx.x; j < n_rot; j += blockDim.x) {
    const int32_t h = j / half, i = j % half;
    int32_t a, b;
    const bool rot = PairOf(i, p.n_pairs, p.neox, &a, &b);
    const int64_t e = static_cast<int64_t>(h) * hd;  // q heads, then k heads (contiguous)
    float x0 = Biased(src, p.bias, e + a), x1 = Biased(src, p.bias, e + b);
    if (norm) {
      const float* w = h < p.n_head ? p.q_norm : p.k_norm;
      x0 *= sInv[h] * w[a];
      x1 *= sInv[h] * w[b];
    }
    if (rot) {
      const float c = cs[2 * i], sn = cs[2 * i + 1];
      const float y0 = x0 * c - x1 * sn, y1 = x0 * sn + x1 * c;
      x0 = y0;
      x1 = y1;
    }
    if (h < p.n_head && qk4) {
      sQ[h * hd + a] = x0;
      sQ[h * hd + b] = x1;
    } else if (h < p.n_head) {
      bf16* q = p.q_out + (static_cast<int64_t>(t) * p.n_head + h) * hd;
      q[a] = __float2bfloat16_rn(x0);
      q[b] = __float2bfloat16_rn(x1);
    } else if (gk) {
      sRow[(h - p.n_head) * hd + a] = x0;
      sRow[(h - p.n_head) * hd + b] = x1;
    } else {
      unsigned char* tile = dev::KvTileW(p.kv, 0, block, h - p.n_head);
      dev::StoreKvHalf(ek, tile, r, hd, a, x0);
      dev::StoreKvHalf(ek, tile, r, hd, b, x1);
    }
  }
  const float* v = src + static_cast<int64_t>(p.n_head + p.n_head_kv) * hd;
  const float* vb = p.bias ? p.bias + static_cast<int64_t>(p.n_head + p.n_head_kv) * hd : nullptr;
  for (int32_t j = threadIdx.x; j < p.n_head_kv * hd; j += blockDim.x) {
    const int32_t h = j / hd, d = j % hd;
    if (gv) sRow[(p.n_head_kv + h) * hd + d] = Biased(v, vb, j);
    else dev::StoreKvHalf(ev, dev::KvTileW(p.kv, 1, block, h), r, hd, d, Biased(v, vb, j));
  }
  if (!gk && !gv) return;
  __syncthreads();
  const int32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  if (qk4 || v4) {
    // rows of sRow: K (n_head_kv), V (n_head_kv), then Q (n_head, a Q4_0 K's
    // only); a side of another type has rotation 0 (HadamardRowWarp: none)
    for (int32_t i = warp; i < 2 * p.n_head_kv + (qk4 ? p.n_head : 0); i += n_warps) {
      const bool is_v = i >= p.n_head_kv && i < 2 * p.n_head_kv;
      dev::HadamardRowWarp(sRow + static_cast<int64_t>(i) * hd, hd, is_v ? p.rot_v : p.rot_k, lane);
    }
    __syncthreads();
    bf16* q = p.q_out + static_cast<int64_t>(t) * p.n_head * hd;
    for (int32_t i = threadIdx.x; qk4 && i < p.n_head * hd; i += blockDim.x) q[i] = __float2bfloat16_rn(sQ[i]);
  }
  for (int32_t kr = warp; kr < 2 * p.n_head_kv; kr += n_warps) {
    const int32_t side = kr < p.n_head_kv ? 0 : 1, h = kr % p.n_head_kv, e = side == 0 ? ek : ev;
    if (!(side == 0 ? gk : gv)) continue;  // a BF16/F16 side is stored already
    unsigned char* tile = dev::KvTileW(p.kv, side, block, h);
    if (e == kKvQ4) dev::StoreKvRowQ4(tile, r, hd, sRow + static_cast<int64_t>(kr) * hd, lane);
    else if (e == kKvFp8) dev::StoreKvRowFp8(tile, r, hd, sRow + static_cast<int64_t>(kr) * hd, lane);
    else dev::StoreKvRowQ8(tile, p.kv.block_size, r, hd, sRow + static_cast<int64_t>(kr) * hd, lane);
  }
}

// n is a valid Hadamard size for rows of head_dim: 0 (none) or a power of
// two in 2 .. 256 dividing head_dim (HadamardRowWarp's range).
bool RotationFits(int32_t n, int32_t head_dim) {
  return n == 0 || (n >= 2 && n <= 256 && (n & (n - 1)) == 0 && head_dim % n == 0);
}

}  // namespace

cudaError_t LaunchRopeAngles(const int32_t* pos, int32_t n_tok, const double* inv_freq, int32_t n_pairs,
                             float* cos_sin, cudaStream_t stream, double magnitude) {
  if (n_tok < 0 || n_pairs <= 0 || !(magnitude > 0.0)) return cudaErrorInvalidValue;
  if (n_tok == 0) return cudaSuccess;
  LLM_LAUNCH(RopeAnglesKernel, n_tok, 64, 0, stream, pos, n_pairs, inv_freq, magnitude, cos_sin);
  return cudaGetLastError();
}

cudaError_t LaunchRopeStoreKv(const RopeKvParams& p, cudaStream_t stream) {
  if (p.n_tok < 0 || p.n_head <= 0 || p.n_head_kv <= 0 || p.head_dim <= 0 || p.head_dim % 2 != 0 ||
      p.n_pairs <= 0 || 2 * p.n_pairs > p.head_dim || p.kv.block_size <= 0 || !KvElemFits(p.kv.elem, p.head_dim) ||
      !KvElemFits(p.kv.ElemV(), p.head_dim) || !p.kv.Aligned(p.head_dim) ||
      (p.q_norm == nullptr) != (p.k_norm == nullptr) || !(p.eps >= 0.0f))
    return cudaErrorInvalidValue;
  // rotations only on a side that is rotated (Q4_0), and sizes that tile a row
  if (!RotationFits(p.rot_k, p.head_dim) || !RotationFits(p.rot_v, p.head_dim) ||
      (p.kv.elem != kKvQ4 && p.rot_k != 0) || (p.kv.ElemV() != kKvQ4 && p.rot_v != 0))
    return cudaErrorInvalidValue;
  if (p.n_tok == 0) return cudaSuccess;
  // K and V rows when either side is quantized (rows of a BF16/F16 side stay
  // unused), and the query rows behind them with a Q4_0 K
  auto quantized = [](int32_t e) { return e == kKvQ8 || e == kKvFp8 || e == kKvQ4; };
  const size_t rows = (quantized(p.kv.elem) || quantized(p.kv.ElemV()) ? 2 * static_cast<size_t>(p.n_head_kv) : 0) +
                      (p.kv.elem == kKvQ4 ? static_cast<size_t>(p.n_head) : 0);
  const size_t smem =
      ((p.q_norm ? static_cast<size_t>(p.n_head + p.n_head_kv) : 0) + rows * p.head_dim) * sizeof(float);
  if (smem > 48 * 1024) {  // a Q4_0 pool's query rows (32 heads x 256 dims: 32 KiB and more)
    if (smem > 227 * 1024) return cudaErrorInvalidValue;
    const cudaError_t e =
        cudaFuncSetAttribute(RopeStoreKvKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (e != cudaSuccess) return e;
  }
  LLM_LAUNCH(RopeStoreKvKernel, p.n_tok, 128, smem, stream, p);
  return cudaGetLastError();
}

}  // namespace llm::cuda
