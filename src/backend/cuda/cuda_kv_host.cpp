#include "backend/cuda/cuda_kv_host.h"

#include <string>

namespace llm::cuda {

StatusOr<std::unique_ptr<KvHostArena>> CudaKvHostArena::Create(int device, cudaStream_t compute, void* pool,
                                                               int32_t n_blocks, size_t block_bytes, int32_t n_slots) {
  if (n_slots <= 0) return InvalidArgument("CreateKvHostArena: the arena needs at least one slot");
  std::unique_ptr<CudaKvHostArena> a(new CudaKvHostArena());
  a->device_ = device;
  a->compute_ = compute;
  a->pool_ = static_cast<uint8_t*>(pool);
  a->n_blocks_ = n_blocks;
  a->block_bytes_ = block_bytes;
  LLM_CUDA_TRY(cudaSetDevice(device), "cudaSetDevice");
  LLM_RETURN_IF_ERROR(a->slots_.Allocate(static_cast<size_t>(n_slots) * block_bytes, "the host KV tier"));
  a->n_slots_ = n_slots;
  LLM_CUDA_TRY(cudaStreamCreateWithFlags(&a->copy_, cudaStreamNonBlocking), "host KV tier: cudaStreamCreate");
  LLM_CUDA_TRY(cudaEventCreateWithFlags(&a->ev_compute_, cudaEventDisableTiming), "host KV tier: cudaEventCreate");
  LLM_CUDA_TRY(cudaEventCreateWithFlags(&a->ev_copied_, cudaEventDisableTiming), "host KV tier: cudaEventCreate");
  return std::unique_ptr<KvHostArena>(std::move(a));
}

CudaKvHostArena::~CudaKvHostArena() {
  cudaSetDevice(device_);  // errors here are a context already lost; nothing to do
  if (copy_ != nullptr) {
    cudaStreamSynchronize(copy_);
    cudaStreamDestroy(copy_);
  }
  if (ev_compute_ != nullptr) cudaEventDestroy(ev_compute_);
  if (ev_copied_ != nullptr) cudaEventDestroy(ev_copied_);
}

Status CudaKvHostArena::Copy(int32_t block, int32_t slot, bool to_host) {
  const char* what = to_host ? "host KV tier: save" : "host KV tier: restore";
  if (block < 0 || block >= n_blocks_)
    return InvalidArgument(std::string(what) + ": block id " + std::to_string(block) + " out of range");
  if (slot < 0 || slot >= n_slots_)
    return InvalidArgument(std::string(what) + ": host slot " + std::to_string(slot) + " out of range");
  LLM_CUDA_TRY(cudaSetDevice(device_), "cudaSetDevice");
  uint8_t* dev = pool_ + static_cast<size_t>(block) * block_bytes_;
  uint8_t* host = slots_.get<uint8_t>() + static_cast<size_t>(slot) * block_bytes_;
  // Behind the compute queued so far (the step that last wrote the block,
  // or last read it) ...
  LLM_CUDA_TRY(cudaEventRecord(ev_compute_, compute_), what);
  LLM_CUDA_TRY(cudaStreamWaitEvent(copy_, ev_compute_, 0), what);
  if (to_host) {
    LLM_CUDA_TRY(cudaMemcpyAsync(host, dev, block_bytes_, cudaMemcpyDeviceToHost, copy_), what);
  } else {
    LLM_CUDA_TRY(cudaMemcpyAsync(dev, host, block_bytes_, cudaMemcpyHostToDevice, copy_), what);
  }
  // ... and before the compute queued next (which may reuse the block, or
  // read what was restored into it).
  LLM_CUDA_TRY(cudaEventRecord(ev_copied_, copy_), what);
  LLM_CUDA_TRY(cudaStreamWaitEvent(compute_, ev_copied_, 0), what);
  pending_ = true;
  return Status::Ok();
}

Status CudaKvHostArena::Save(int32_t block, int32_t slot) { return Copy(block, slot, /*to_host=*/true); }

Status CudaKvHostArena::Restore(int32_t slot, int32_t block) { return Copy(block, slot, /*to_host=*/false); }

StatusOr<std::span<const uint8_t>> CudaKvHostArena::Bytes(int32_t slot) {
  if (slot < 0 || slot >= n_slots_)
    return InvalidArgument("host KV tier: host slot " + std::to_string(slot) + " out of range");
  if (pending_) {
    LLM_CUDA_TRY(cudaSetDevice(device_), "cudaSetDevice");
    LLM_CUDA_TRY(cudaStreamSynchronize(copy_), "host KV tier: waiting for copies");
    pending_ = false;
  }
  return std::span<const uint8_t>(slots_.get<uint8_t>() + static_cast<size_t>(slot) * block_bytes_, block_bytes_);
}

}  // namespace llm::cuda
