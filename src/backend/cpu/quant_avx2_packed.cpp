// AVX2 kernels for weights packed 8 rows at a time (quant_pack.h): the
// packed tiles and their matmul, split from quant_avx2.cpp (the row-major
// formats, activations and the dispatch), which calls PackedQuantMatMul for
// a packed weight. Compiled for AVX2/FMA/F16C by the same target pragma.
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backend/cpu/quant.h"
#include "backend/cpu/quant_pack.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

namespace llm::cpu {
namespace avx2 {

#define LLM_PACKED_VNNI 0
#include "backend/cpu/quant_packed_x86.h"

}  // namespace avx2
}  // namespace llm::cpu

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif  // x86-64
