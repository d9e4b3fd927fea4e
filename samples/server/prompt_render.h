// A chat request's messages (and tools) rendered into its prompt text with
// the model's chat template: shared by /v1/chat/completions and
// llama-server's /apply-template.
#pragma once

#include "../chat_prompt.h"
#include "openai_request.h"

namespace server {

// Fills g->prompts[0] (text and tokenize flags) from g's messages and tools.
// False with *err (400, param "messages") when the template fails.
bool RenderChatPrompt(const chat::Prompter& prompter, Generation* g, ApiError* err);

}  // namespace server
