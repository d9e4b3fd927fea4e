// Small helpers shared by the command-line tools (C API only).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "llm.h"

namespace cli {

// Prints "what: STATUS: message" to stderr and returns true when s != LLM_OK.
bool Failed(llm_status s, const char* what);

// Appends `s` to `out` as a JSON string literal.
void JsonString(const std::string& s, std::string* out);

// Parses a number option or exits with a usage message.
double NumberArg(const char* opt, const char* value);

// Parses a KV cache type option (f16, f32, q8_0: LLM_KV_*) or exits with a
// usage message.
int32_t KvTypeArg(const char* opt, const char* value);

// The KV cache types from -kv (`both`), -ctk (`k`) and -ctv (`v`), each 0
// when not given (llama.cpp's --cache-type-k/-v), into p->kv_type (K's:
// -ctk, else -kv; left as it is when neither is given) and p->kv_type_v
// (V's: -ctv, else -kv; 0, "as kv_type", when that is K's or neither is
// given). So -ctk alone sets both sides, as -kv does.
void ApplyKvTypes(int32_t both, int32_t k, int32_t v, llm_ctx_params* p);

// Parses llama.cpp's --tensor-split value, shares separated by ',' or '/'
// ("3,1"), into out[LLM_MAX_DEVICES] (the rest 0), or exits with a usage
// message (more than LLM_MAX_DEVICES shares, not a number, negative).
void TensorSplitArg(const char* opt, const char* value, float* out);

// Parses an -ngl value as llama.cpp does: "auto" (LLM_GPU_LAYERS_AUTO: as
// many layers as fit the GPUs' free memory), "all" (-1), or a count; exits
// with a usage message otherwise.
int32_t GpuLayersArg(const char* opt, const char* value);

// llama.cpp's --fit on|off: 1 or 0; exits with a usage message otherwise.
int FitArg(const char* opt, const char* value);

// n_gpu_layers after the command line: --fit on (fit 1) makes an -ngl left
// at its default (ngl_given false) LLM_GPU_LAYERS_AUTO; --fit off (0) turns
// an "auto" back into every layer; fit -1 (not given) changes nothing.
int32_t ApplyFit(int32_t n_gpu_layers, bool ngl_given, int fit);

std::vector<llm_token> Tokenize(llm_ctx* ctx, const std::string& text, uint32_t flags);

}  // namespace cli
