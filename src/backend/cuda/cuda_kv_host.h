// The CUDA backend's host arena for the host KV tier (backend/kv_host_arena.h):
// page-locked slots (PinnedBuffer: cudaMallocHost through the checked
// wrappers), each one pool block in the wire layout, which on CUDA is the
// pool's own (kernels/common.cuh KvPoolLayout), so a copy is one
// DMA transfer.
//
//   compute stream  ... step N ... ─rec(ev_compute)─► [wait ev_copied] step N+1 ...
//   copy stream          wait(ev_compute) ─► D2H / H2D ─► rec(ev_copied)
//
// Save and Restore queue their copy on the copy stream behind everything
// already queued on the compute stream and make the compute stream wait for
// it: neither the caller nor the copy waits for the host, and the copies of
// many blocks run back to back beside the compute queued before them. Only
// Bytes() (a slot read on the host, for the disk tier) waits, for the copy
// stream.
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_util.h"
#include "backend/kv_host_arena.h"
#include "common.cuh"

namespace llm::cuda {

class CudaKvHostArena final : public KvHostArena {
 public:
  // pool: the device pool (n_blocks blocks of block_bytes), written by work
  // on `compute`. The caller keeps both alive longer than the arena.
  static StatusOr<std::unique_ptr<KvHostArena>> Create(int device, cudaStream_t compute, void* pool, int32_t n_blocks,
                                                       size_t block_bytes, int32_t n_slots);
  ~CudaKvHostArena() override;

  int32_t n_slots() const override { return n_slots_; }
  bool pinned() const override { return true; }
  Status Save(int32_t block, int32_t slot) override;
  Status Restore(int32_t slot, int32_t block) override;
  StatusOr<std::span<const uint8_t>> Bytes(int32_t slot) override;

 private:
  CudaKvHostArena() = default;
  Status Copy(int32_t block, int32_t slot, bool to_host);

  int device_ = 0;
  cudaStream_t compute_ = nullptr;
  cudaStream_t copy_ = nullptr;
  cudaEvent_t ev_compute_ = nullptr, ev_copied_ = nullptr;
  uint8_t* pool_ = nullptr;
  int32_t n_blocks_ = 0;
  size_t block_bytes_ = 0;
  int32_t n_slots_ = 0;
  bool pending_ = false;  // copies queued since the copy stream was last waited for
  PinnedBuffer slots_;    // (n_slots, block_bytes)
};

}  // namespace llm::cuda
