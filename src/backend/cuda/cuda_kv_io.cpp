// The CUDA pool's blocks in the KV wire layout (backend/kv_wire.h): the
// pool keeps each block as (layer, K|V, kv head) tiles, K's of K's element
// type and V's of V's (BF16, F16, Q8_0, Q4_0 or FP8 E4M3; kernels/common.cuh
// KvPoolLayout), which is the wire layout of that pair byte for byte: a
// block is one copy.
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_kv_host.h"

namespace llm::cuda {

KvWireLayout CudaBackend::kv_wire_layout() const {
  if (partial() || from_hidden()) return KvWireLayout{};
  // K's type, and V's where it differs (the wire's elem_v, 0: as K's)
  return KvWireLayout{kv_.n_layer, kv_.n_head_kv, kv_.head_dim, kv_.block_size, kv_.elem,
                      kv_.Elem(1) != kv_.elem ? kv_.Elem(1) : 0};
}

// Both copies go on stream_ behind the steps queued so far and are waited
// for: the caller's buffer is pageable memory it may reuse on return.
Status CudaBackend::ReadKvBlock(int32_t block, std::span<uint8_t> out) {
  const KvWireLayout w = kv_wire_layout();
  if (w.n_layer == 0) return Unsupported("a CUDA backend holding only some layers cannot export its KV cache");
  if (block < 0 || block >= n_blocks_)
    return InvalidArgument("ReadKvBlock: block id " + std::to_string(block) + " out of range");
  if (static_cast<int64_t>(out.size()) != w.block_bytes() || w.block_bytes() != kv_block_bytes())
    return InvalidArgument("ReadKvBlock: wrong buffer size");
  LLM_CUDA_TRY(cudaSetDevice(opt_.device), "cudaSetDevice");
  const uint8_t* dev = kv_pool_.get<uint8_t>() + static_cast<size_t>(block) * out.size();
  LLM_CUDA_TRY(cudaMemcpyAsync(out.data(), dev, out.size(), cudaMemcpyDeviceToHost, stream_), "ReadKvBlock");
  LLM_CUDA_TRY(cudaStreamSynchronize(stream_), "ReadKvBlock");
  return Status::Ok();
}

Status CudaBackend::WriteKvBlock(int32_t block, std::span<const uint8_t> in) {
  const KvWireLayout w = kv_wire_layout();
  if (w.n_layer == 0) return Unsupported("a CUDA backend holding only some layers cannot import a KV cache");
  if (block < 0 || block >= n_blocks_)
    return InvalidArgument("WriteKvBlock: block id " + std::to_string(block) + " out of range");
  if (static_cast<int64_t>(in.size()) != w.block_bytes() || w.block_bytes() != kv_block_bytes())
    return InvalidArgument("WriteKvBlock: wrong buffer size");
  LLM_CUDA_TRY(cudaSetDevice(opt_.device), "cudaSetDevice");
  uint8_t* dev = kv_pool_.get<uint8_t>() + static_cast<size_t>(block) * in.size();
  LLM_CUDA_TRY(cudaMemcpyAsync(dev, in.data(), in.size(), cudaMemcpyHostToDevice, stream_), "WriteKvBlock");
  LLM_CUDA_TRY(cudaStreamSynchronize(stream_), "WriteKvBlock");
  return Status::Ok();
}

StatusOr<std::unique_ptr<KvHostArena>> CudaBackend::CreateKvHostArena(int32_t n_slots) {
  if (kv_wire_layout().n_layer == 0)
    return Unsupported("a CUDA backend holding only some layers cannot copy its KV blocks to host memory");
  return CudaKvHostArena::Create(opt_.device, stream_, kv_pool_.get(), n_blocks_,
                                 static_cast<size_t>(kv_block_bytes()), n_slots);
}

}  // namespace llm::cuda
