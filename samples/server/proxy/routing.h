// What the proxy sends where, in vLLM's kv_transfer_params convention
// (docs/DISAGG.md): the prefill server gets the request as one token, not
// streamed, with do_remote_decode; the decode server gets the client's
// request unchanged plus the kv_transfer_params the prefill answer carried.
// Four request shapes take this path: OpenAI's completions and chat
// completions, OpenAI's Responses API and Anthropic's Messages API (llm-server
// serves the last two as chat completions underneath, kv_transfer_params
// included); they differ in the name of their token limit.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace proxy {

using json = nlohmann::json;

enum class Api { kCompletion, kChat, kResponses, kMessages };

// The paths the proxy routes, each with its shape.
struct Route {
  const char* path;
  Api api;
};
inline constexpr Route kRoutes[] = {{"/v1/completions", Api::kCompletion},
                                    {"/v1/chat/completions", Api::kChat},
                                    {"/v1/responses", Api::kResponses},
                                    {"/v1/messages", Api::kMessages}};

// The prefill server's request (the client's, made into a one-token
// non-streaming prefill that keeps its KV for a decode server).
json PrefillBody(const json& request, Api api);
// The decode server's request; `prefill_answer` null (no usable prefill)
// gives the client's request as it was: the decode server computes the prompt.
json DecodeBody(const json& request, const json& prefill_answer);
// Whether a request can be split at all (one prompt, one sequence).
bool Splittable(const json& request);

}  // namespace proxy
