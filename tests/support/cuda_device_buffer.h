// What the kernel-level CUDA tests (test_cuda_quant, test_cuda_moe) share:
// whether a device (a GPU or the emulator) is usable, CUDA_OK / LAUNCH_OK
// assertions naming the failed call, and Dev<T>, device memory poisoned with
// 0xFF bytes (NaN as f32 and bf16, -1 as int32) so that what a kernel fails
// to write shows. Header-only; include it after <gtest/gtest.h> and
// <cuda_runtime.h> in a build with CUDA support.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace llm::cuda {

inline bool DeviceUsable() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return n > 0;
}

#define SKIP_WITHOUT_DEVICE() \
  if (!::llm::cuda::DeviceUsable()) GTEST_SKIP() << "no usable CUDA device"

#define CUDA_OK(expr)                                                                                  \
  do {                                                                                                 \
    const cudaError_t e_ = (expr);                                                                     \
    ASSERT_EQ(e_, cudaSuccess) << #expr << ": " << cudaGetErrorName(e_) << " " << cudaGetErrorString(e_); \
  } while (0)

#define LAUNCH_OK(expr)               \
  do {                                \
    CUDA_OK(expr);                    \
    CUDA_OK(cudaDeviceSynchronize()); \
  } while (0)

template <typename T>
class Dev {
 public:
  explicit Dev(size_t n) : n_(n) {
    if (cudaMalloc(&p_, std::max<size_t>(n, 1) * sizeof(T)) != cudaSuccess) p_ = nullptr;
    if (p_ != nullptr) cudaMemset(p_, 0xFF, std::max<size_t>(n, 1) * sizeof(T));
  }
  ~Dev() { cudaFree(p_); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  T* get() const { return p_; }
  void Upload(const std::vector<T>& v) { cudaMemcpy(p_, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice); }
  std::vector<T> Download() const {
    std::vector<T> v(n_);
    cudaMemcpy(v.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost);
    return v;
  }

 private:
  T* p_ = nullptr;
  size_t n_;
};

}  // namespace llm::cuda
