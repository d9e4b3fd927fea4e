// llama-server's sampling flags (--temp, --top-k, --top-p, --min-p,
// --repeat-penalty, --seed, -n): the defaults of every request that does
// not set the field itself (-n: of max_tokens / n_predict).
// Applications that start a server as a subprocess pass them (the server
// test suites of llama.cpp pin --temp and --seed for reproducible output).
#pragma once

#include <cstdint>
#include <optional>

#include <nlohmann/json.hpp>

#include "openai_request.h"

namespace server {

struct RequestDefaults {
  std::optional<double> temperature, top_p, min_p, repeat_penalty;
  std::optional<int64_t> top_k;
  std::optional<uint64_t> seed;
  int32_t n_predict = -1;  // > 0: the max_tokens of a request that sets none
  json chat_template_kwargs = json::object();  // --chat-template-kwargs: under the request's own
  int32_t reasoning_format = LLM_REASONING_AUTO;  // --reasoning-format: chat requests that set none
};

// Sets, in a parsed request, the fields its body left out that the server's
// command line gave.
void ApplyRequestDefaults(const json& body, const RequestDefaults& d, Generation* g);

}  // namespace server
