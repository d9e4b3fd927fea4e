// The experts' products over the work items of a routed batch
// (moe_matmul.cuh). Blocks whose item is unused return before any barrier.
#include "moe_matmul.cuh"

#include "device_util.cuh"
#include "quant_blocks.cuh"

namespace llm::cuda {
namespace {

constexpr int kGemvWarps = 4;
constexpr int kGemmWRows = 64;     // weight rows per GEMM tile
constexpr int kGemmThreads = 256;  // 64 weight rows x 4 groups of 8 activation rows
constexpr int kGemmRowsPerThread = kMoeGemmTileRows / (kGemmThreads / kGemmWRows);

// Weights 32c .. 32c+32 of row r (of the stacked parts) of expert e.
template <bool kLattice>
__device__ __forceinline__ void ExpertChunk(const ExpertMatrix& w, int32_t e, int64_t r, int64_t c,
                                            float (&v)[32]) {
  const int part = r < w.part[0].rows ? 0 : 1;
  const ExpertStack& s = w.part[part];
  const uint8_t* row = s.experts[e] + (r - (part ? w.part[0].rows : 0)) * s.row_bytes;
  if (s.type == kExpertBf16) {
    const bf16* b = reinterpret_cast<const bf16*>(row) + c * 32;
#pragma unroll
    for (int i = 0; i < 32; ++i) v[i] = __bfloat162float(b[i]);
    return;
  }
  dev::DecodeChunk<kLattice>(s.type, row, c, v);
}

__device__ __forceinline__ int64_t SourceRow(const MoeMatmulParams& p, int32_t r) {
  return p.gather ? p.gather[r] / p.gather_div : r;
}

template <bool kLattice>
__global__ void __launch_bounds__(kGemvWarps * 32) MoeGemvKernel(MoeMatmulParams p) {
  __shared__ float partial[kGemvWarps][kMoeGemvMaxRows][32];
  const MoeWorkItem it = p.items[blockIdx.y];
  if (it.expert < 0) return;  // the whole block: no barrier is left waiting
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kGemvWarps + warp;
  const int32_t n = it.rows;
  float acc[kMoeGemvMaxRows];
#pragma unroll
  for (int j = 0; j < kMoeGemvMaxRows; ++j) acc[j] = 0.0f;
  if (row < p.w.rows) {
    const int64_t n_chunks = p.w.cols / 32;
    for (int64_t c = lane; c < n_chunks; c += 32) {
      float v[32];
      ExpertChunk<kLattice>(p.w, it.expert, row, c, v);
#pragma unroll
      for (int j = 0; j < kMoeGemvMaxRows; ++j) {
        if (j >= n) break;
        const bf16* xr = p.x + SourceRow(p, it.row0 + j) * p.w.cols + c * 32;
        float s = 0.0f;
        for (int k = 0; k < 32; ++k) s += v[k] * __bfloat162float(xr[k]);
        acc[j] += s;
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kMoeGemvMaxRows; ++j) partial[warp][j][lane] = acc[j];
  __syncthreads();
  const int t = threadIdx.x;
  if (t < kGemvWarps * kMoeGemvMaxRows) {
    const int wi = t / kMoeGemvMaxRows, j = t % kMoeGemvMaxRows;
    const int64_t r = static_cast<int64_t>(blockIdx.x) * kGemvWarps + wi;
    if (j < n && r < p.w.rows) {
      float s = 0.0f;
      for (int l = 0; l < 32; ++l) s += partial[wi][j][l];
      p.y[static_cast<int64_t>(it.row0 + j) * p.w.rows + r] = s;
    }
  }
}

template <bool kLattice>
__global__ void __launch_bounds__(kGemmThreads) MoeGemmKernel(MoeMatmulParams p) {
  __shared__ float ws[kGemmWRows][33];       // a 32-column chunk of 64 weight rows (+1: no bank conflicts)
  __shared__ float xs[kMoeGemmTileRows][33];  // the same columns of the tile's activation rows
  __shared__ int64_t src[kMoeGemmTileRows];
  const MoeWorkItem it = p.items[blockIdx.y];
  if (it.expert < 0) return;
  const int tid = threadIdx.x;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * kGemmWRows;
  if (tid < kMoeGemmTileRows) src[tid] = tid < it.rows ? SourceRow(p, it.row0 + tid) : -1;
  const int wr = tid % kGemmWRows, tg = tid / kGemmWRows;
  float acc[kGemmRowsPerThread];
#pragma unroll
  for (int j = 0; j < kGemmRowsPerThread; ++j) acc[j] = 0.0f;
  const int64_t n_chunks = p.w.cols / 32;
  for (int64_t c = 0; c < n_chunks; ++c) {
    __syncthreads();  // src written (first chunk); ws / xs no longer read (later chunks)
    if (tid < kGemmWRows) {
      float v[32];
      if (r0 + tid < p.w.rows) {
        ExpertChunk<kLattice>(p.w, it.expert, r0 + tid, c, v);
      } else {
#pragma unroll
        for (int i = 0; i < 32; ++i) v[i] = 0.0f;
      }
#pragma unroll
      for (int i = 0; i < 32; ++i) ws[tid][i] = v[i];
    }
    for (int i = tid; i < kMoeGemmTileRows * 32; i += kGemmThreads) {
      const int j = i >> 5, k = i & 31;
      xs[j][k] = src[j] >= 0 ? __bfloat162float(p.x[src[j] * p.w.cols + c * 32 + k]) : 0.0f;
    }
    __syncthreads();
    for (int k = 0; k < 32; ++k) {
      const float wv = ws[wr][k];
#pragma unroll
      for (int j = 0; j < kGemmRowsPerThread; ++j) acc[j] += wv * xs[tg * kGemmRowsPerThread + j][k];
    }
  }
  const int64_t r = r0 + wr;
  if (r >= p.w.rows) return;
#pragma unroll
  for (int j = 0; j < kGemmRowsPerThread; ++j) {
    const int32_t jj = tg * kGemmRowsPerThread + j;
    if (jj < it.rows) p.y[static_cast<int64_t>(it.row0 + jj) * p.w.rows + r] = acc[j];
  }
}

bool HasLattice(const ExpertMatrix& w) {
  for (int i = 0; i < w.n_parts; ++i)
    if (w.part[i].type != kExpertBf16 && dev::IsLatticeType(w.part[i].type)) return true;
  return false;
}

cudaError_t CheckParams(const MoeMatmulParams& p) {
  if (CheckExpertMatrix(p.w) != cudaSuccess || p.x == nullptr || p.y == nullptr || p.items == nullptr ||
      p.n_items < 0 || p.n_items > 65535 || p.gather_div < 1)
    return cudaErrorInvalidValue;
  return cudaSuccess;
}

}  // namespace

cudaError_t CheckExpertMatrix(const ExpertMatrix& m) {
  if (m.n_parts < 1 || m.n_parts > 2 || m.cols <= 0 || m.cols % 32 != 0) return cudaErrorInvalidValue;
  int64_t rows = 0;
  for (int i = 0; i < m.n_parts; ++i) {
    const ExpertStack& s = m.part[i];
    if (s.experts == nullptr || s.n_expert <= 0 || s.n_expert != m.part[0].n_expert || s.cols != m.cols ||
        s.rows <= 0)
      return cudaErrorInvalidValue;
    if (s.type == kExpertBf16) {
      if (s.row_bytes != static_cast<int64_t>(m.cols) * 2) return cudaErrorInvalidValue;
    } else {
      const int32_t be = QuantBlockElems(s.type);
      if (be == 0 || m.cols % be != 0 ||
          s.row_bytes != static_cast<int64_t>(m.cols / be) * QuantBlockBytes(s.type))
        return cudaErrorInvalidValue;
    }
    rows += s.rows;
  }
  return rows == m.rows ? cudaSuccess : cudaErrorInvalidValue;
}

cudaError_t LaunchMoeGemv(const MoeMatmulParams& p, cudaStream_t stream) {
  if (CheckParams(p) != cudaSuccess) return cudaErrorInvalidValue;
  if (p.n_items == 0) return cudaSuccess;
  const dim3 grid((p.w.rows + kGemvWarps - 1) / kGemvWarps, p.n_items);
  if (HasLattice(p.w))
    LLM_LAUNCH(MoeGemvKernel<true>, grid, kGemvWarps * 32, 0, stream, p);
  else
    LLM_LAUNCH(MoeGemvKernel<false>, grid, kGemvWarps * 32, 0, stream, p);
  return cudaGetLastError();
}

cudaError_t LaunchMoeGemm(const MoeMatmulParams& p, cudaStream_t stream) {
  if (CheckParams(p) != cudaSuccess) return cudaErrorInvalidValue;
  if (p.n_items == 0) return cudaSuccess;
  const dim3 grid((p.w.rows + kGemmWRows - 1) / kGemmWRows, p.n_items);
  if (HasLattice(p.w))
    LLM_LAUNCH(MoeGemmKernel<true>, grid, kGemmThreads, 0, stream, p);
  else
    LLM_LAUNCH(MoeGemmKernel<false>, grid, kGemmThreads, 0, stream, p);
  return cudaGetLastError();
}

}  // namespace llm::cuda
