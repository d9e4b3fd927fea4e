#include "dequant.cuh"

#include <cmath>

#include "quant_blocks.cuh"

namespace llm::cuda {

int32_t QuantBlockElems(uint32_t type) {
  switch (type) {
    case kQuantQ4_0: case kQuantQ4_1: case kQuantQ5_0: case kQuantQ5_1: case kQuantQ8_0: case kQuantIQ4_NL:
    case kQuantMXFP4: return 32;
    case kQuantQ2_K: case kQuantQ3_K: case kQuantQ4_K: case kQuantQ5_K: case kQuantQ6_K: case kQuantIQ4_XS:
    case kQuantIQ2_XXS: case kQuantIQ2_XS: case kQuantIQ2_S: case kQuantIQ3_XXS: case kQuantIQ3_S:
    case kQuantTQ1_0: case kQuantTQ2_0: case kQuantIQ1_S: case kQuantIQ1_M:
      return 256;
    default: return 0;
  }
}

int32_t QuantBlockBytes(uint32_t type) {
  switch (type) {
    case kQuantQ4_0: return 18;
    case kQuantQ4_1: return 20;
    case kQuantQ5_0: return 22;
    case kQuantQ5_1: return 24;
    case kQuantQ8_0: return 34;
    case kQuantQ4_K: return 144;
    case kQuantQ5_K: return 176;
    case kQuantQ6_K: return 210;
    case kQuantQ2_K: return 84;
    case kQuantQ3_K: return 110;
    case kQuantIQ4_NL: return 18;
    case kQuantIQ4_XS: return 136;
    case kQuantMXFP4: return 17;
    case kQuantIQ2_XXS: return 66;
    case kQuantIQ2_XS: return 74;
    case kQuantIQ3_XXS: return 98;
    case kQuantIQ3_S: return 110;
    case kQuantIQ2_S: return 82;
    case kQuantIQ1_S: return 50;
    case kQuantIQ1_M: return 56;
    case kQuantTQ1_0: return 54;
    case kQuantTQ2_0: return 66;
    default: return 0;
  }
}

bool QuantTypeSupported(uint32_t type) { return QuantBlockElems(type) != 0; }

cudaError_t CheckQuantMatrix(const QuantMatrix& w) {
  if (w.n_parts < 1 || w.n_parts > kMaxQuantParts || w.cols <= 0 || w.rows <= 0) return cudaErrorInvalidValue;
  int64_t rows = 0;
  for (int p = 0; p < w.n_parts; ++p) {
    const QuantPart& q = w.part[p];
    const int32_t be = QuantBlockElems(q.type);
    if (be == 0 || q.data == nullptr || q.rows <= 0 || w.cols % be != 0 ||
        q.row_bytes != static_cast<int64_t>(w.cols / be) * QuantBlockBytes(q.type))
      return cudaErrorInvalidValue;
    rows += q.rows;
  }
  return rows == w.rows ? cudaSuccess : cudaErrorInvalidValue;
}

namespace {

constexpr int kThreads = 256;

// One thread per 32-weight chunk of the selected rows.
template <bool kLattice>
__global__ void DequantRowsKernel(QuantMatrix w, int32_t row0, int64_t n_chunks, bf16* __restrict__ out) {
  const int64_t per_row = w.cols / 32;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n_chunks;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / per_row, c = i % per_row;
    uint32_t type = 0;
    const uint8_t* row = dev::QuantRow(w, row0 + r, &type);
    float v[32];
    dev::DecodeChunk<kLattice>(type, row, c, v);
    bf16* dst = out + r * w.cols + c * 32;
    for (int k = 0; k < 32; ++k) dst[k] = __float2bfloat16_rn(v[k]);
  }
}

__global__ void QuantEmbeddingKernel(QuantMatrix w, const int32_t* __restrict__ tokens, float scale,
                                     float* __restrict__ out) {
  const int64_t t = blockIdx.x;
  const int32_t id = tokens[t];
  float* dst = out + t * w.cols;
  if (id < 0 || id >= w.rows) {
    for (int32_t i = threadIdx.x; i < w.cols; i += blockDim.x) dst[i] = NAN;
    return;
  }
  uint32_t type = 0;
  const uint8_t* row = dev::QuantRow(w, id, &type);
  for (int64_t c = threadIdx.x; c < w.cols / 32; c += blockDim.x) {
    float v[32];
    dev::DecodeChunk(type, row, c, v);
    for (int k = 0; k < 32; ++k) dst[c * 32 + k] = v[k] * scale;
  }
}

}  // namespace

cudaError_t LaunchDequantRows(const QuantMatrix& w, int32_t row0, int32_t n_rows, bf16* out, cudaStream_t stream) {
  if (CheckQuantMatrix(w) != cudaSuccess || row0 < 0 || n_rows < 0 || row0 + static_cast<int64_t>(n_rows) > w.rows ||
      (n_rows > 0 && out == nullptr))
    return cudaErrorInvalidValue;
  if (n_rows == 0) return cudaSuccess;
  const int64_t n_chunks = static_cast<int64_t>(n_rows) * (w.cols / 32);
  const int64_t blocks = (n_chunks + kThreads - 1) / kThreads;
  const unsigned grid = static_cast<unsigned>(blocks < 65536 ? blocks : 65536);
  if (dev::QuantMatrixHasLattice(w))  // in its own instantiation (quant_blocks.cuh)
    LLM_LAUNCH(DequantRowsKernel<true>, grid, kThreads, 0, stream, w, row0, n_chunks, out);
  else
    LLM_LAUNCH(DequantRowsKernel<false>, grid, kThreads, 0, stream, w, row0, n_chunks, out);
  return cudaGetLastError();
}

cudaError_t LaunchQuantEmbedding(const QuantMatrix& w, const int32_t* tokens, int32_t n_tok, float* out,
                                 cudaStream_t stream, float scale) {
  if (CheckQuantMatrix(w) != cudaSuccess || n_tok < 0 || !(scale > 0.0f)) return cudaErrorInvalidValue;
  if (n_tok == 0) return cudaSuccess;
  LLM_LAUNCH(QuantEmbeddingKernel, n_tok, 64, 0, stream, w, tokens, scale, out);
  return cudaGetLastError();
}

}  // namespace llm::cuda
