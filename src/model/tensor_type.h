// Element types of weight tensors, with the numeric ids GGUF files use
// (ggml_type). Only the types the backends can read are named here.
#pragma once

#include <cstddef>
#include <cstdint>

namespace llm {

enum class TensorType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q8_0 = 8,
  BF16 = 30,
};

// Q8_0: blocks of 32 weights, one F16 scale d, value = d * q.
inline constexpr int kQ8_0BlockSize = 32;
struct BlockQ8_0 {
  uint16_t d;      // F16 scale
  int8_t qs[32];   // quants
};
static_assert(sizeof(BlockQ8_0) == 34);

}  // namespace llm
