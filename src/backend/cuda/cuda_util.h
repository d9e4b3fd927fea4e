// CUDA and cuBLAS errors as Status values, and RAII device/pinned buffers.
// Nothing here aborts: every failure becomes a Status naming the call.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <utility>

#include "util/status.h"

namespace llm::cuda {

// OUT_OF_MEMORY for allocation failures, BACKEND for everything else; the
// message names the operation and CUDA's own description.
Status CudaStatus(cudaError_t e, const char* what);
Status CublasStatus(cublasStatus_t e, const char* what);

#define LLM_CUDA_TRY(expr, what)                                          \
  do {                                                                    \
    const cudaError_t llm_cuda_e_ = (expr);                               \
    if (llm_cuda_e_ != cudaSuccess) return ::llm::cuda::CudaStatus(llm_cuda_e_, what); \
  } while (0)

#define LLM_CUBLAS_TRY(expr, what)                                        \
  do {                                                                    \
    const cublasStatus_t llm_cublas_e_ = (expr);                          \
    if (llm_cublas_e_ != CUBLAS_STATUS_SUCCESS) return ::llm::cuda::CublasStatus(llm_cublas_e_, what); \
  } while (0)

// Device memory of `bytes` bytes; freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { Reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      Reset();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // Frees the old memory first (contents are not kept). `what` names the
  // buffer in the error message.
  Status Allocate(size_t bytes, const char* what);
  void Reset();

  template <typename T = void>
  T* get() const { return static_cast<T*>(p_); }
  size_t bytes() const { return n_; }

 private:
  void* p_ = nullptr;
  size_t n_ = 0;
};

// Page-locked host memory (for asynchronous copies); freed on destruction.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer() { Reset(); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  Status Allocate(size_t bytes, const char* what);
  void Reset();

  template <typename T = void>
  T* get() const { return static_cast<T*>(p_); }
  size_t bytes() const { return n_; }

 private:
  void* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace llm::cuda
