// The packed-row tiles (quant_packed_x86.h) with AVX-512 VNNI on 256-bit
// vectors: each group of four byte products goes into its int32 lane in one
// vpdpbusd, where AVX2 needs a multiply-add to int16 pairs, a widening
// multiply-add and an add. avx2::QuantMatMulImpl calls vnni::PackedQuantMatMul
// for a packed weight when PackedVnniUsable() (the CPU has AVX512F, AVX512VL
// and AVX512_VNNI, and LLM_CPU_ISA does not cap the kernels below it). The
// outputs are bitwise those of the AVX2 tiles.
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backend/cpu/quant.h"
#include "backend/cpu/quant_pack.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512vnni"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512vl,avx512vnni")
#endif

namespace llm::cpu {
namespace vnni {

#define LLM_PACKED_VNNI 1
#include "backend/cpu/quant_packed_x86.h"

}  // namespace vnni
}  // namespace llm::cpu

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif  // x86-64
