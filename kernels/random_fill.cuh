// Random inputs made on the device, for benchmarks (cuda-bench's kernel
// figures): gigabytes of keys, queries and weight blocks without a host loop
// or a host copy. Counter-based (a hash of seed and index), so a fill is the
// same on every device, in any launch shape, and on the emulator.
#pragma once

#include "common.cuh"

namespace llm::cuda {

// out: (n) bf16, roughly normal with mean 0 and standard deviation `stddev`
// (Irwin-Hall: the sum of four uniforms, centred and scaled).
cudaError_t LaunchRandomFillBf16(bf16* out, int64_t n, uint64_t seed, float stddev, cudaStream_t stream);

// out: (n_blocks, block_bytes) random bytes, except that each block holds the
// 16-bit `scale` at byte offsets scale_at0 and scale_at1 (a negative offset:
// none), so the F16 scales of GGUF blocks stay finite. Offsets + 2 <= block_bytes.
cudaError_t LaunchRandomFillBlocks(uint8_t* out, int64_t n_blocks, int32_t block_bytes, uint64_t seed,
                                   int32_t scale_at0, int32_t scale_at1, uint16_t scale, cudaStream_t stream);

}  // namespace llm::cuda
