// llama.cpp's llama-server native endpoints, beside the OpenAI ones, for
// clients and launchers written against it:
//   POST /tokenize        {"content", "add_special"?, "parse_special"?, "with_pieces"?}
//                         -> {"tokens": [id...]} or [{"id", "piece"}...]
//   POST /detokenize      {"tokens": [id...]} -> {"content"}
//   POST /apply-template  {"messages", "tools"?} -> {"prompt"} (the chat template, as a
//                         chat completion would render it)
//   GET  /props           {"default_generation_settings": {"n_ctx", ...}, "model_alias",
//                         "total_slots", "build_info", ...}
// Bodies go through the same limits as every request (http_body.h).
#pragma once

#include <httplib.h>

#include <cstdint>
#include <string>

#include "../chat_prompt.h"
#include "llm.h"

namespace server {

struct NativeInfo {
  llm_ctx* ctx = nullptr;
  const chat::Prompter* prompter = nullptr;  // outlives the server
  std::string model_name;
  int32_t n_ctx = 0;
  int32_t total_slots = 0;  // sequences the engine runs at once (max_seqs)
};

void RegisterNativeRoutes(httplib::Server* svr, NativeInfo info);

}  // namespace server
