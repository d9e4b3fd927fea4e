// Built instead of the CUDA backend when the library has no CUDA support.
#include "backend/backend.h"

namespace llm {

int CudaDeviceCount() { return 0; }
int64_t CudaDeviceFreeBytes(int) { return 0; }
int64_t CudaDeviceTotalBytes(int) { return 0; }

StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const ModelConfig&, const ModelWeights&, KvCacheSpec*,
                                                     const CudaBackendOptions&) {
  return Unsupported("this build of llmrt has no CUDA backend (configure with -DLLM_CUDA=ON and the CUDA toolkit)");
}

StatusOr<CudaFootprint> EstimateCudaFootprint(const ModelConfig&, const ModelWeights&, const KvCacheSpec&,
                                              const CudaBackendOptions&) {
  return Unsupported("this build of llmrt has no CUDA backend");
}

}  // namespace llm
