#include "backend/cuda/cuda_util.h"

namespace llm::cuda {

Status CudaStatus(cudaError_t e, const char* what) {
  std::string m = std::string("CUDA: ") + what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
  if (e == cudaErrorMemoryAllocation) return OutOfMemory(std::move(m));
  return Status(LLM_ERR_BACKEND, std::move(m));
}

Status CublasStatus(cublasStatus_t e, const char* what) {
  std::string m = std::string("cuBLAS: ") + what + ": " + cublasGetStatusName(e) + " (" + cublasGetStatusString(e) + ")";
  if (e == CUBLAS_STATUS_ALLOC_FAILED) return OutOfMemory(std::move(m));
  return Status(LLM_ERR_BACKEND, std::move(m));
}

Status DeviceBuffer::Allocate(size_t bytes, const char* what) {
  Reset();
  if (bytes == 0) return Status::Ok();
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();  // cudaMalloc's failure is not sticky; clear it
    return CudaStatus(e, (std::string("cudaMalloc ") + std::to_string(bytes) + " bytes for " + what).c_str());
  }
  p_ = p;
  n_ = bytes;
  return Status::Ok();
}

void DeviceBuffer::Reset() {
  if (p_ != nullptr) cudaFree(p_);  // errors here are a context already lost; nothing to do
  p_ = nullptr;
  n_ = 0;
}

Status PinnedBuffer::Allocate(size_t bytes, const char* what) {
  Reset();
  if (bytes == 0) return Status::Ok();
  void* p = nullptr;
  const cudaError_t e = cudaMallocHost(&p, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return CudaStatus(e, (std::string("cudaMallocHost ") + std::to_string(bytes) + " bytes for " + what).c_str());
  }
  p_ = p;
  n_ = bytes;
  return Status::Ok();
}

void PinnedBuffer::Reset() {
  if (p_ != nullptr) cudaFreeHost(p_);
  p_ = nullptr;
  n_ = 0;
}

}  // namespace llm::cuda
