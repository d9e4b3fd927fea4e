// What the proxy sends where, in vLLM's kv_transfer_params convention
// (docs/DISAGG.md): the prefill server gets the request as one token, not
// streamed, with do_remote_decode; the decode server gets the client's
// request unchanged plus the kv_transfer_params the prefill answer carried.
#pragma once

#include <nlohmann/json.hpp>

namespace proxy {

using json = nlohmann::json;

// The prefill server's request (the client's, made into a one-token
// non-streaming prefill that keeps its KV for a decode server).
json PrefillBody(const json& request);
// The decode server's request; `prefill_answer` null (no usable prefill)
// gives the client's request as it was: the decode server computes the prompt.
json DecodeBody(const json& request, const json& prefill_answer);
// Whether a request can be split at all (one prompt, one sequence).
bool Splittable(const json& request);

}  // namespace proxy
