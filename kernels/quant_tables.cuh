// The codebooks of the non-linear GGUF weight types in constant memory, for
// quant_blocks.cuh: the same generated data as the CPU's constexpr copy
// (src/model/quant_tables.h), from src/model/quant_table_data.inc
// (tools/gen_quant_tables.py).
#pragma once

#include <cstdint>

#include "device_util.cuh"

namespace llm::cuda::dev {

#define LLM_QUANT_TABLE(type, name, count, ...) __constant__ type name[count] = {__VA_ARGS__};
#include "model/quant_table_data.inc"
#undef LLM_QUANT_TABLE

}  // namespace llm::cuda::dev
