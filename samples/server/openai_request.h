// OpenAI request bodies -> what llm_submit needs. Validation follows the
// OpenAI API reference; every problem is an ApiError naming the parameter.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../chat_prompt.h"
#include "llm.h"
#include "openai_tools.h"

namespace server {

using nlohmann::json;

// An error in OpenAI's shape: {"error": {"message", "type", "param", "code"}}.
struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // "" = null
  std::string code;   // "" = null
};

json ErrorBody(const ApiError& e);

// Sets *err to a 400 invalid_request_error naming `param` and returns false,
// so that a parser can `return Bad(...)`.
bool Bad(ApiError* err, const std::string& param, const std::string& message);

// body[name], or nullptr when it is absent or null (clients send null for
// "not given").
const json* Field(const json& body, const char* name);

// An llm_status from llm_submit or a FINAL event as an ApiError: 400 for the
// caller's mistakes, 503 for BUSY / SHUTDOWN, 500 otherwise.
ApiError StatusError(llm_status s, const std::string& message);

// One prompt of a request: text (tokenized with `flags`) or token ids.
struct PromptInput {
  std::string text;
  std::vector<llm_token> tokens;
  bool is_tokens = false;
  uint32_t flags = LLM_TOKENIZE_ADD_SPECIAL;
};

// A validated /v1/chat/completions or /v1/completions request.
struct Generation {
  bool chat = false;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;       // per-token logprobs of the sampled tokens
  int32_t top_logprobs = 0;    // ... and of the k most likely alternatives
  std::vector<llm_logit_bias> logit_bias;  // sampling.logit_bias points here
  std::vector<llm_token> stop_token_ids;   // extension (as vLLM)
  int32_t min_tokens = 0;                  // extension (as vLLM)
  int n = 1;
  int32_t max_tokens = 0;      // 0: until the context is full
  llm_sampling_params sampling{};
  std::vector<std::string> stop;
  bool ignore_eos = false;     // extension (as vLLM)
  bool keep_kv = false;        // extension: llm_request.keep_kv (the conversation's KV is evicted last)
  bool kv_produce = false;     // kv_transfer_params.do_remote_decode (kv_transfer_params.h)
  std::string kv_transfer_desc;  // kv_transfer_params.do_remote_prefill's llmrt_descriptor
  int32_t priority = 0;        // extension (as vLLM)
  // Constrained output (response_format, the regex / grammar / choice
  // extensions, or a forced tool call): llm_request's constraint fields.
  int32_t constraint_kind = LLM_CONSTRAINT_NONE;
  std::string constraint;               // schema JSON, regex or grammar text
  std::vector<std::string> choices;     // CHOICE
  std::string constraint_param;         // the parameter it came from, for errors
  bool whitespace_flexible = false;     // extension (llguidance's name): JSON constraints allow any whitespace
  ToolSpec tools;                       // chat: tools / tool_choice
  std::vector<chat::Message> messages;  // chat: rendered into prompts[0] later
  // chat: the messages in OpenAI's shape for templates that know tools
  // (content strings, tool_calls arguments as objects), and whether any
  // carries tool_calls or is a tool result.
  json raw_messages = json::array();
  // More chat template variables: the request's chat_template_kwargs over
  // the server's (--chat-template-kwargs) over date_string/datetime (today).
  json template_vars = json::object();
  bool tool_history = false;
  // chat: reasoning_format (llama-server's), an LLM_REASONING_* value;
  // -1 = not given (the server's --reasoning-format then).
  int32_t reasoning_format = -1;
  std::vector<PromptInput> prompts;     // choices are numbered prompt * n + sample
  // chat: the pictures of image_url parts (encoded bytes, in order), each
  // rendered as the template's image marker (image_url.h); set before
  // parsing: whether remote URLs are allowed (--allow-remote-images).
  std::vector<std::string> images;
  bool allow_remote_images = false;
  // chat: the image_url parts with http(s) URLs (allowed), whose images[]
  // entries are empty until the handler fetches them (image_fetch.h).
  struct RemoteImage {
    size_t index = 0;   // into images
    std::string url;
    std::string where;  // "messages[2].content", for the error's param
  };
  std::vector<RemoteImage> remote_images;
};

// "none", "deepseek", "harmony", "auto" -> LLM_REASONING_*; -1 for others.
int32_t ReasoningFormatByName(const std::string& name);

// Parse bodies of the two endpoints. False with *err on a bad request.
bool ParseChatRequest(const json& body, Generation* g, ApiError* err);
bool ParseCompletionRequest(const json& body, Generation* g, ApiError* err);

}  // namespace server
