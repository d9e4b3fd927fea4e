// Shared pieces of the extern "C" shims: the thread-local last error,
// status conversion, struct-size checks and the exception guard.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "constrain/constraint.h"
#include "capi/capi_disagg.h"
#include "engine/engine.h"
#include "engine/image_input.h"
#include "model/vision_weights.h"
#include "llm.h"

struct llm_ctx {
  std::unique_ptr<llm::Engine> engine;
  llm::constrain::ConstraintCache constraints;  // compiled constraints by content (capi_constraint.cpp)
  std::unique_ptr<llm::capi::DisaggState> disagg;  // null: no kv_role (capi_disagg.h)
  std::shared_ptr<const llm::VisionModel> vision;   // null: no mmproj_path (capi_parts.cpp)
  // The engine goes first: its thread may still publish into `disagg`.
  ~llm_ctx() { engine.reset(); }
};

namespace llm::capi {

llm_status Fail(llm_status code, std::string message);
inline llm_status Fail(const Status& s) { return Fail(s.code(), s.message()); }
llm_status Ok();

// The sizes of the first published version of each struct: anything smaller
// is not a struct this library ever defined.
inline constexpr uint32_t kCtxParamsV1 = offsetof(llm_ctx_params, draft_model_path);
inline constexpr uint32_t kSamplingV1 = offsetof(llm_sampling_params, logit_bias);
inline constexpr uint32_t kRequestV1 = offsetof(llm_request, cache_salt);
inline constexpr uint32_t kEventV1 = offsetof(llm_event, top_logprobs);
inline constexpr uint32_t kStatsV1 = offsetof(llm_stats, prefix_cache_queried_tokens);
inline constexpr uint32_t kModelInfoV1 = sizeof(llm_model_info);

// Copies a caller's struct of any known version over `*out` (which holds
// defaults), so fields an older caller lacks keep their defaults.
template <typename T>
llm_status CopyIn(const T* in, uint32_t v1_size, const char* what, T* out) {
  if (in->struct_size < v1_size || in->struct_size > sizeof(T)) {
    return Fail(LLM_ERR_STRUCT_SIZE, std::string(what) + ".struct_size is " + std::to_string(in->struct_size) +
                                         "; this library knows " + std::to_string(v1_size) + ".." +
                                         std::to_string(sizeof(T)));
  }
  std::memcpy(out, in, in->struct_size);
  out->struct_size = sizeof(T);
  return LLM_OK;
}

template <typename T>
llm_status CheckOutSize(const T* out, uint32_t v1_size, const char* what) {
  if (out->struct_size < v1_size || out->struct_size > sizeof(T)) {
    return Fail(LLM_ERR_STRUCT_SIZE, std::string(what) + ".struct_size is " + std::to_string(out->struct_size) +
                                         "; set it to sizeof(" + what + ")");
  }
  return LLM_OK;
}

// Checks the token-level options of request `r` (logit_bias in `sampling`,
// which may be NULL; stop_token_ids, min_tokens, top_logprobs) and stores
// them in *spec, whose prompt and ignore_eos are already set (capi_rules.cpp).
llm_status ToTokenRules(const llm_request& r, const llm_sampling_params* sampling, const Tokenizer& tok,
                        RequestSpec* spec);

// Checks request `r`'s constraint (constraint_kind, constraint, choices),
// compiles it through `cache` and stores it in *spec (capi_constraint.cpp).
llm_status ToConstraint(const llm_request& r, constrain::ConstraintCache& cache, RequestSpec* spec);
// llm_request.reasoning_format resolved against the model's template, and
// whether the prompt opened the thinking (capi_chat.cpp).
llm_status ToReasoning(const llm_request& r, const Model& model, RequestSpec* spec);

// Checks the embedding fields of a request (task, pooling, normalize,
// dimensions, truncate) and stores them in *spec, whose prompt is set (and
// is cut to n_ctx here when truncate is 1) (capi_embed.cpp).
llm_status ToEmbedSpec(int32_t task, int32_t pooling, int32_t normalize, int32_t dimensions, int32_t truncate,
                       const Engine& engine, RequestSpec* spec);

// Content parts (capi_parts.cpp). CheckPartHeader: a part's struct_size,
// kind and the pointers its kind needs, `at` naming it in messages.
llm_status CheckPartHeader(const llm_content_part& p, const std::string& at);
// llm_ctx_params.mmproj_path opened and checked against the text model:
// its output width is n_embd, its family the model's architecture.
StatusOr<std::shared_ptr<const VisionModel>> OpenProjector(const char* path, const Model& model);
// Request `r`'s parts as the prompt's pieces and pictures (each decoded and
// preprocessed for ctx.vision): every check llm.h names for parts.
llm_status ToPromptParts(const llm_request& r, const llm_ctx& ctx, std::vector<PromptPiece>* pieces,
                         std::vector<ImageInput>* images);

// Runs `body`, turning any escaping exception into a status.
template <typename F>
llm_status Guard(F&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return Fail(LLM_ERR_OUT_OF_MEMORY, "out of host memory");
  } catch (const std::exception& e) {
    return Fail(LLM_ERR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return Fail(LLM_ERR_INTERNAL, "internal error");
  }
}

}  // namespace llm::capi

#define LLM_CHECK_ARG(ptr)                                                                 \
  do {                                                                                     \
    if ((ptr) == nullptr) return ::llm::capi::Fail(LLM_ERR_NULL_ARGUMENT, #ptr " is NULL"); \
  } while (0)
