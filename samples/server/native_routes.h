// llama.cpp's llama-server native endpoints, beside the OpenAI ones, for
// clients and launchers written against it:
//   POST /tokenize        {"content", "add_special"?, "parse_special"?, "with_pieces"?}
//                         -> {"tokens": [id...]} or [{"id", "piece"}...]
//   POST /detokenize      {"tokens": [id...]} -> {"content"}
//   POST /apply-template  {"messages", "tools"?} -> {"prompt"} (the chat template, as a
//                         chat completion would render it)
//   POST /v1/messages/count_tokens  Anthropic's: a Messages request -> {"input_tokens"}
//                         (its prompt rendered as /v1/messages renders it)
//   GET  /props           {"default_generation_settings": {"n_ctx", "params", ...},
//                         "model_alias", "model_path", "total_slots", "build_info", ...}
//   GET  /slots           one entry per sequence the engine runs at once: {"id", "n_ctx",
//                         "is_processing"} (sequences are not pinned to slots here: the
//                         first `running` entries are busy); 501 with --no-slots
// Bodies go through the same limits as every request (http_body.h).
#pragma once

#include <httplib.h>

#include <cstdint>
#include <string>

#include "../chat_prompt.h"
#include "request_defaults.h"
#include "llm.h"

namespace server {

struct NativeInfo {
  llm_ctx* ctx = nullptr;
  const chat::Prompter* prompter = nullptr;  // outlives the server
  std::string model_name;
  int32_t n_ctx = 0;
  int32_t total_slots = 0;  // sequences the engine runs at once (max_seqs)
  std::string model_path;   // "" for the built-in model
  bool slots = true;        // GET /slots answers (else 501)
  RequestDefaults defaults;  // the server's sampling flags, shown in /props
};

void RegisterNativeRoutes(httplib::Server* svr, NativeInfo info);

}  // namespace server
