#include "request_defaults.h"

namespace server {
namespace {

bool Given(const json& body, const char* name) {
  auto it = body.find(name);
  return it != body.end() && !it->is_null();
}

}  // namespace

void ApplyRequestDefaults(const json& body, const RequestDefaults& d, Generation* g) {
  for (const auto& item : d.chat_template_kwargs.items())
    if (!g->template_vars.contains(item.key())) g->template_vars[item.key()] = item.value();
  if (g->chat && g->reasoning_format < 0) g->reasoning_format = d.reasoning_format;
  if (d.temperature && !Given(body, "temperature")) g->sampling.temperature = static_cast<float>(*d.temperature);
  if (d.top_p && !Given(body, "top_p")) g->sampling.top_p = static_cast<float>(*d.top_p);
  if (d.min_p && !Given(body, "min_p")) g->sampling.min_p = static_cast<float>(*d.min_p);
  if (d.top_k && !Given(body, "top_k")) g->sampling.top_k = static_cast<int32_t>(*d.top_k);
  if (d.repeat_penalty && !Given(body, "repetition_penalty") && !Given(body, "repeat_penalty"))
    g->sampling.repetition_penalty = static_cast<float>(*d.repeat_penalty);
  if (d.seed && !Given(body, "seed")) g->sampling.seed = *d.seed;
  if (d.n_predict > 0 && !Given(body, "max_tokens") && !Given(body, "max_completion_tokens") &&
      !Given(body, "n_predict"))
    g->max_tokens = d.n_predict;
}

}  // namespace server
