// Context builder: llm_ctx_params -> a running Engine. Every default (the
// table in core/defaults.h, the one llm.h documents) and every cross-field
// check is resolved here, once; then the program is assembled in order:
//
//   check params -> choose backend -> load model -> fit backend to the
//   model's architecture -> [n_gpu_layers auto: fit the layers to the
//   devices' free memory, auto_fit.h] -> engine config (KV sizing) ->
//   backend -> draft proposer -> swap space -> Engine::Create
//
// capi.cpp only converts the C structs in and the Status out.
#pragma once

#include <memory>

#include "engine/engine.h"
#include "llm.h"
#include "spec/verifier.h"
#include "util/status.h"

namespace llm {

// What the caller resolved outside the params struct.
struct ContextOverrides {
  // LLM_BACKEND_CPU / _CUDA replaces an AUTO backend (the LLM_BACKEND
  // environment switch, read by the C shim); AUTO: no override.
  int32_t backend = LLM_BACKEND_AUTO;
  // Tests only: a verifier that is wrong on purpose (spec/verifier.h).
  VerifyPolicy verify = VerifyPolicy::kExact;
};

// INVALID_ARGUMENT naming the first field out of range or in conflict.
// `p` is a full-size struct (older callers' structs padded with defaults).
Status CheckContextParams(const llm_ctx_params& p);

StatusOr<std::unique_ptr<Engine>> BuildEngine(const llm_ctx_params& p, const ContextOverrides& overrides);

}  // namespace llm
