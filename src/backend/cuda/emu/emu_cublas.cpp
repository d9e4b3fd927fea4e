// EMULATE builds: cublasGemmEx on the CPU, in stream order (recorded while
// the handle's stream captures a graph). Operands are widened to f32 and
// accumulated in f32, as the tensor cores do for BF16 with COMPUTE_32F (the
// summation order differs, which BF16 tolerances absorb). beta == 0 does not
// read C, as cuBLAS: C may hold anything (the emulator's NaN poison).
#include <algorithm>
#include <vector>

#include "cublas_v2.h"
#include "emu_internal.h"

struct cublasContext {
  cudaStream_t stream = nullptr;
};

namespace {

float Load(const void* p, cudaDataType_t t, int64_t i) {
  if (t == CUDA_R_32F) return static_cast<const float*>(p)[i];
  const uint32_t u = static_cast<uint32_t>(static_cast<const uint16_t*>(p)[i]) << 16;  // bf16
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// op(X) of a column-major X with leading dimension ld, as `rows` rows of
// `depth` contiguous floats: row r is op(X)'s row r (for A) or column r (for B).
void Widen(const void* x, cudaDataType_t t, int ld, bool transposed_access, int64_t r0, int64_t rows, int64_t depth,
           float* out) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t p = 0; p < depth; ++p)
      out[r * depth + p] = Load(x, t, transposed_access ? (r0 + r) * ld + p : p * ld + (r0 + r));
}

float Dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t p = 0;
  for (; p + 8 <= n; p += 8)
    for (int u = 0; u < 8; ++u) acc[u] += a[p + u] * b[p + u];
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; p < n; ++p) s += a[p] * b[p];
  return s;
}

}  // namespace

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void*, size_t) {
  return handle == nullptr ? CUBLAS_STATUS_NOT_INITIALIZED : CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusName(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}
const char* cublasGetStatusString(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid value was used as an argument";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported (emulator)";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    default: return "cuBLAS error (emulator)";
  }
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType_t Atype, int lda, const void* B,
                            cudaDataType_t Btype, int ldb, const void* beta, void* C, cudaDataType_t Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (m < 0 || n < 0 || k < 0 || alpha == nullptr || beta == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (transa == CUBLAS_OP_C || transb == CUBLAS_OP_C) return CUBLAS_STATUS_NOT_SUPPORTED;
  const auto ok_type = [](cudaDataType_t t) { return t == CUDA_R_16BF || t == CUDA_R_32F; };
  if (!ok_type(Atype) || !ok_type(Btype) || Ctype != CUDA_R_32F ||
      (computeType != CUBLAS_COMPUTE_32F && computeType != CUBLAS_COMPUTE_32F_FAST_TF32))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  // Leading dimensions as cuBLAS checks them.
  if (lda < std::max(1, transa == CUBLAS_OP_N ? m : k) || ldb < std::max(1, transb == CUBLAS_OP_N ? k : n) ||
      ldc < std::max(1, m))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  // Operands in another device's memory: a GPU faults on the first access.
  for (const void* p : {A, B, static_cast<const void*>(C)})
    if (llm::emu::ForeignDevicePointer(p) != nullptr) {
      llm::emu::Submit(handle->stream, [] { return cudaErrorIllegalAddress; });
      return CUBLAS_STATUS_EXECUTION_FAILED;
    }
  const float a = *static_cast<const float*>(alpha), b = *static_cast<const float*>(beta);
  const cudaError_t e = llm::emu::Submit(handle->stream, [=]() {
    // op(A) rows and op(B) columns as contiguous f32 rows of k, in blocks of A rows.
    std::vector<float> bw(static_cast<size_t>(n) * k), aw;
    Widen(B, Btype, ldb, transb == CUBLAS_OP_N, 0, n, k, bw.data());
    constexpr int64_t kRows = 64;
    aw.resize(static_cast<size_t>(std::min<int64_t>(kRows, m)) * k);
    float* c = static_cast<float*>(C);
    for (int64_t i0 = 0; i0 < m; i0 += kRows) {
      const int64_t rows = std::min<int64_t>(kRows, m - i0);
      Widen(A, Atype, lda, transa == CUBLAS_OP_T, i0, rows, k, aw.data());
      for (int64_t j = 0; j < n; ++j)
        for (int64_t r = 0; r < rows; ++r) {
          float& dst = c[j * ldc + i0 + r];
          const float v = a * Dot(aw.data() + r * k, bw.data() + j * k, k);
          dst = b == 0.0f ? v : v + b * dst;
        }
    }
    return cudaSuccess;
  });
  return e == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}
