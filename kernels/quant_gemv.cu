// Two kernels. The fast one, for Q4_K, Q5_K, Q6_K, Q8_0 and Q4_0 (what a
// K-quant or legacy file holds almost all its weights in): a template per
// type and per row count (1, 2, 4, 8), one launch per part of a fused matrix.
// One warp per weight row, four rows per CTA; the warp streams its row 64
// chunks (32 weights each) at a time: its lanes load the chunks' blocks with
// coalesced, aligned 16-byte loads into the warp's shared-memory stage, then
// the next tile's loads are issued, and lane l decodes chunks l and l + 32
// from the stage (quant_fast.cuh: 4-byte reads, no conversion instructions)
// and dots each with the n activation rows, which the CTA stages in shared
// memory 32 chunks at a time (coalesced, once for its four warps), into n
// accumulators in registers; one warp reduction per activation row at the
// end. Staging makes every type's loads 16-byte ones whatever its block size
// (Q6_K's 210 and Q8_0's 34 bytes leave blocks only 2-aligned) and keeps a
// warp's loads contiguous.
//
// The general one, for every other type (and matrices or activations not
// 16-byte aligned): lane l decodes chunks l, l + 32, ... of its row through
// DecodeChunk's switch over all types and dots each with the n activation
// rows; the 32 lanes' partial sums meet in shared memory after one barrier,
// and 32 threads add them up in a fixed order.
#include "quant_gemv.cuh"

#include "quant_blocks.cuh"
#include "quant_fast.cuh"

namespace llm::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kN = kQuantGemvMaxRows;

template <bool kLattice>
__global__ void QuantGemvKernel(QuantMatrix w, const bf16* __restrict__ x, int32_t n, float* __restrict__ y) {
  __shared__ float partial[kWarps][kN][32];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  float acc[kN];
#pragma unroll
  for (int j = 0; j < kN; ++j) acc[j] = 0.0f;
  if (row < w.rows) {
    uint32_t type = 0;
    const uint8_t* wr = dev::QuantRow(w, row, &type);
    const int64_t n_chunks = w.cols / 32;
    for (int64_t c = lane; c < n_chunks; c += 32) {
      float v[32];
      dev::DecodeChunk<kLattice>(type, wr, c, v);
#pragma unroll
      for (int j = 0; j < kN; ++j) {
        if (j >= n) break;
        const bf16* xr = x + static_cast<int64_t>(j) * w.cols + c * 32;
        float s = 0.0f;
        for (int k = 0; k < 32; ++k) s += v[k] * __bfloat162float(xr[k]);
        acc[j] += s;
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kN; ++j) partial[warp][j][lane] = acc[j];
  __syncthreads();
  const int t = threadIdx.x;
  if (t < kWarps * kN) {
    const int wi = t / kN, j = t % kN;
    const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarps + wi;
    if (j < n && r < w.rows) {
      float s = 0.0f;
      for (int l = 0; l < 32; ++l) s += partial[wi][j][l];
      y[static_cast<int64_t>(j) * w.rows + r] = s;
    }
  }
}

// ---------------------------------------------------------------- fast path

constexpr int kTileChunks = 64;  // chunks a warp stages at once: 2 per lane

template <uint32_t kType>
struct FastTile {
  static constexpr int kCpb = dev::FastChunksPerBlock(kType);
  static constexpr int kBlocks = kTileChunks / kCpb;
  static constexpr int kBytes = kBlocks * dev::FastBlockBytes(kType);
  // 16-byte loads to cover a tile starting anywhere in its first 16 bytes, per lane
  static constexpr int kLoads = ((kBytes + 15) / 16 + 1 + 31) / 32;
};

// The 16 bytes at p (16-aligned): one load when they end inside the part,
// else the bytes before `end` and zeros (the last load of a part whose size
// is not a multiple of 16).
__device__ __forceinline__ uint4 LoadStage(const uint8_t* p, const uint8_t* end) {
  if (p + 16 <= end) return *reinterpret_cast<const uint4*>(p);
  uint8_t t[16];
  for (int i = 0; i < 16; ++i) t[i] = p + i < end ? p[i] : 0;
  uint4 r;
  memcpy(&r, t, 16);
  return r;
}

// The 32 weights v · the 32 bf16 activations at xp (16-aligned).
__device__ __forceinline__ float DotChunk(const float (&v)[32], const uint4* xp) {
  uint4 u[4];
#pragma unroll
  for (int q = 0; q < 4; ++q) u[q] = xp[q];
  float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const uint32_t w[4] = {u[q].x, u[q].y, u[q].z, u[q].w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {  // bf16 pair: the lower index in the low half
      s0 = fmaf(v[8 * q + 2 * k], dev::BitsAsFloat(w[k] << 16), s0);
      s1 = fmaf(v[8 * q + 2 * k + 1], dev::BitsAsFloat(w[k] & 0xFFFF0000u), s1);
    }
  }
  return s0 + s1;
}

// The activations of 32 chunks (1024 columns) for kN rows in shared memory:
// chunk k of row j at j * 32 * kXStride + k * kXStride bytes, 80 apart (64
// and 16 spare), so that 8 lanes reading 16 bytes each of their own chunks
// hit 8 different bank quads.
constexpr int kXStride = 80;

// y[j * ld_y + row0 + r] = x_j · row r of `part` (all of type kType) for j < n <= kN.
template <uint32_t kType, int kN>
__global__ void __launch_bounds__(kWarps * 32) FastGemvKernel(QuantPart part, int32_t cols, const bf16* __restrict__ x,
                                                               int32_t n, float* __restrict__ y, int32_t ld_y,
                                                               int32_t row0) {
  using T = FastTile<kType>;
  constexpr int kBlockBytes = dev::FastBlockBytes(kType);
  __shared__ uint4 stage[kWarps][T::kLoads * 32 + 1];  // + 16 spare bytes for SmemWord
  __shared__ uint4 xs[kN * 32 * kXStride / 16];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  const bool active = r < part.rows;  // a warp past the last row still stages activations
  const uint8_t* base = static_cast<const uint8_t*>(part.data);
  const uint8_t* row = base + (active ? r : 0) * part.row_bytes;
  const uint8_t* end = base + static_cast<int64_t>(part.rows) * part.row_bytes;
  const int64_t n_chunks = cols / 32, n_blocks = n_chunks / T::kCpb;
  float acc[kN];
#pragma unroll
  for (int j = 0; j < kN; ++j) acc[j] = 0.0f;
  // Tile t0's first 16-aligned address, its first block's offset from there,
  // and its 16-byte loads.
  auto tile = [&](int64_t t0, const uint8_t** a0, int* skew, int* n16) {
    const int64_t b0 = t0 / T::kCpb;
    const int64_t nb = n_blocks - b0 < T::kBlocks ? n_blocks - b0 : T::kBlocks;
    const uint8_t* lo = row + b0 * kBlockBytes;
    *a0 = reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(lo) & ~uintptr_t{15});
    *skew = static_cast<int>(lo - *a0);
    *n16 = active ? static_cast<int>((*skew + nb * kBlockBytes + 15) / 16) : 0;
  };
  // The next tile's loads are issued before this one is decoded, so they
  // are in flight while the warp computes.
  uint4 got[T::kLoads];
  const uint8_t* a0;
  int skew, n16;
  tile(0, &a0, &skew, &n16);
#pragma unroll
  for (int i = 0; i < T::kLoads; ++i)
    if (lane + 32 * i < n16) got[i] = LoadStage(a0 + 16 * (lane + 32 * i), end);
  for (int64_t t0 = 0; t0 < n_chunks; t0 += kTileChunks) {
    __syncwarp();  // the previous tile's reads are done
#pragma unroll
    for (int i = 0; i < T::kLoads; ++i)
      if (lane + 32 * i < n16) stage[warp][lane + 32 * i] = got[i];
    __syncwarp();
    const uint8_t* s = reinterpret_cast<const uint8_t*>(stage[warp]) + skew;
    if (t0 + kTileChunks < n_chunks) {
      tile(t0 + kTileChunks, &a0, &skew, &n16);
#pragma unroll
      for (int i = 0; i < T::kLoads; ++i)
        if (lane + 32 * i < n16) got[i] = LoadStage(a0 + 16 * (lane + 32 * i), end);
    }
#pragma unroll
    for (int h = 0; h < kTileChunks / 32; ++h) {
      // The activations of chunks t0 + 32h .. + 32, 16 bytes a thread per row:
      // coalesced, and read from global once per CTA rather than once per warp.
      const int64_t c0 = t0 + 32 * h;
      __syncthreads();  // the previous half's reads are done
      const int tk = threadIdx.x >> 2, tq = threadIdx.x & 3;  // chunk c0 + tk, its 16-byte quarter tq
#pragma unroll
      for (int j = 0; j < kN; ++j)
        if (j < n && c0 + tk < n_chunks)
          xs[(j * 32 * kXStride + tk * kXStride) / 16 + tq] =
              reinterpret_cast<const uint4*>(x + static_cast<int64_t>(j) * cols + (c0 + tk) * 32)[tq];
      __syncthreads();
      const int ci = lane + 32 * h;
      if (active && c0 + lane < n_chunks) {
        float v[32];
        dev::DecodeFast<kType>(s + (ci / T::kCpb) * kBlockBytes, ci % T::kCpb, v);
#pragma unroll
        for (int j = 0; j < kN; ++j)
          if (j < n) acc[j] += DotChunk(v, &xs[(j * 32 * kXStride + lane * kXStride) / 16]);
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kN; ++j) {
    const float s = dev::WarpSum(acc[j]);
    if (active && lane == 0 && j < n) y[static_cast<int64_t>(j) * ld_y + row0 + r] = s;
  }
}

template <uint32_t kType>
void LaunchFastPart(const QuantPart& p, int32_t cols, const bf16* x, int32_t n, float* y, int32_t ld_y, int32_t row0,
                    cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>((p.rows + kWarps - 1) / kWarps);
  // kN: n rounded up to 1, 2, 4 or 8 (the rows past n masked off)
  void (*FastGemv)(QuantPart, int32_t, const bf16*, int32_t, float*, int32_t, int32_t) =
      n == 1 ? FastGemvKernel<kType, 1> : n == 2 ? FastGemvKernel<kType, 2>
      : n <= 4 ? FastGemvKernel<kType, 4> : FastGemvKernel<kType, 8>;
  LLM_LAUNCH(FastGemv, blocks, kWarps * 32, 0, stream, p, cols, x, n, y, ld_y, row0);
}

// True when every part can take the fast kernel: a fast type, 16-aligned
// data, and 16-aligned activations.
bool FastEligible(const QuantMatrix& w, const bf16* x) {
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0) return false;
  for (int p = 0; p < w.n_parts; ++p)
    if (!dev::IsFastType(w.part[p].type) || reinterpret_cast<uintptr_t>(w.part[p].data) % 16 != 0) return false;
  return true;
}

}  // namespace

cudaError_t LaunchQuantGemv(const QuantMatrix& w, const bf16* x, int32_t n, float* y, cudaStream_t stream) {
  if (CheckQuantMatrix(w) != cudaSuccess || n < 1 || n > kN || x == nullptr || y == nullptr)
    return cudaErrorInvalidValue;
  const int64_t blocks = (static_cast<int64_t>(w.rows) + kWarps - 1) / kWarps;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  if (FastEligible(w, x)) {  // one launch per part, each writing its rows of y
    int32_t row0 = 0;
    for (int p = 0; p < w.n_parts; ++p) {
      const QuantPart& part = w.part[p];
      if (part.rows > 0) {
        switch (part.type) {
          case kQuantQ4_K: LaunchFastPart<kQuantQ4_K>(part, w.cols, x, n, y, w.rows, row0, stream); break;
          case kQuantQ5_K: LaunchFastPart<kQuantQ5_K>(part, w.cols, x, n, y, w.rows, row0, stream); break;
          case kQuantQ6_K: LaunchFastPart<kQuantQ6_K>(part, w.cols, x, n, y, w.rows, row0, stream); break;
          case kQuantQ8_0: LaunchFastPart<kQuantQ8_0>(part, w.cols, x, n, y, w.rows, row0, stream); break;
          default: LaunchFastPart<kQuantQ4_0>(part, w.cols, x, n, y, w.rows, row0, stream); break;
        }
        const cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return e;
      }
      row0 += part.rows;
    }
    return cudaSuccess;
  }
  // The lattice types' decoding in its own instantiation: the others keep
  // their register count (quant_blocks.cuh).
  if (dev::QuantMatrixHasLattice(w))
    LLM_LAUNCH(QuantGemvKernel<true>, static_cast<unsigned>(blocks), kWarps * 32, 0, stream, w, x, n, y);
  else
    LLM_LAUNCH(QuantGemvKernel<false>, static_cast<unsigned>(blocks), kWarps * 32, 0, stream, w, x, n, y);
  return cudaGetLastError();
}

}  // namespace llm::cuda
