// The codebooks of the non-linear GGUF weight types (model/tensor_type.h) as
// constexpr arrays: kIQ4NLValues, kE2M1Values, kIQ2Signs and the IQ1/IQ2/IQ3
// lattices. Their values are generated data (model/quant_table_data.inc,
// tools/gen_quant_tables.py), which the CUDA kernels' constant-memory copy
// (kernels/quant_tables.cuh) expands from the same file.
#pragma once

#include <cstdint>

namespace llm {

#define LLM_QUANT_TABLE(type, name, count, ...) inline constexpr type name[count] = {__VA_ARGS__};
#include "model/quant_table_data.inc"
#undef LLM_QUANT_TABLE

}  // namespace llm
