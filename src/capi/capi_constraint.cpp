// The output constraint of llm_submit (issue 20): llm_request's
// constraint_kind / constraint / choices checked, compiled once per content
// (the context's ConstraintCache) and attached to the request.
#include <string>
#include <vector>

#include "capi/capi_util.h"
#include "constrain/choice.h"
#include "util/utf8.h"

namespace llm::capi {

llm_status ToConstraint(const llm_request& r, constrain::ConstraintCache& cache, RequestSpec* spec) {
  const int32_t kind = r.constraint_kind;
  if (r.constraint_whitespace != LLM_WHITESPACE_BOUNDED && r.constraint_whitespace != LLM_WHITESPACE_FREE)
    return Fail(LLM_ERR_INVALID_ARGUMENT,
                "constraint_whitespace " + std::to_string(r.constraint_whitespace) + " is not an LLM_WHITESPACE_* value");
  if (kind == LLM_CONSTRAINT_NONE) return LLM_OK;
  if (kind < LLM_CONSTRAINT_NONE || kind > LLM_CONSTRAINT_GRAMMAR)
    return Fail(LLM_ERR_INVALID_ARGUMENT, "constraint_kind " + std::to_string(kind) + " is not an LLM_CONSTRAINT_* value");
  std::string_view text;
  std::vector<std::string> choices;
  if (kind == LLM_CONSTRAINT_GRAMMAR || kind == LLM_CONSTRAINT_REGEX || kind == LLM_CONSTRAINT_JSON_SCHEMA) {
    if (r.constraint == nullptr) return Fail(LLM_ERR_NULL_ARGUMENT, "constraint is NULL but constraint_kind needs it");
    text = r.constraint;
    if (!IsValidUtf8(text)) return Fail(LLM_ERR_INVALID_UTF8, "constraint is not valid UTF-8");
  }
  if (kind == LLM_CONSTRAINT_CHOICE) {
    if (r.n_choices <= 0) return Fail(LLM_ERR_INVALID_ARGUMENT, "n_choices must be > 0 for a CHOICE constraint");
    if (r.choices == nullptr) return Fail(LLM_ERR_NULL_ARGUMENT, "choices is NULL but n_choices > 0");
    if (static_cast<size_t>(r.n_choices) > constrain::kMaxChoices)
      return Fail(LLM_ERR_INVALID_ARGUMENT, "n_choices must be at most " + std::to_string(constrain::kMaxChoices));
    for (int32_t i = 0; i < r.n_choices; ++i) {
      if (r.choices[i] == nullptr) return Fail(LLM_ERR_NULL_ARGUMENT, "choices[" + std::to_string(i) + "] is NULL");
      choices.emplace_back(r.choices[i]);
      if (!IsValidUtf8(choices.back()))
        return Fail(LLM_ERR_INVALID_UTF8, "choices[" + std::to_string(i) + "] is not valid UTF-8");
    }
  }
  const bool json = kind == LLM_CONSTRAINT_JSON_OBJECT || kind == LLM_CONSTRAINT_JSON_SCHEMA;
  auto program = cache.Get(kind, text, choices, json ? r.constraint_whitespace : LLM_WHITESPACE_BOUNDED);
  if (!program.ok()) return Fail(program.status());
  spec->constraint = std::move(*program);
  return LLM_OK;
}

}  // namespace llm::capi
