// Anthropic's Messages API (POST /v1/messages), what Anthropic's clients and
// the tools built on them call: a system prompt, messages of content blocks
// (text, tool_use, tool_result), tools with input_schema, tool_choice,
// stop_sequences, the model's thinking as "thinking" blocks (first;
// reasoning_format, with `thinking` {"type": "disabled"} turning it off where
// the template allows), streamed as its events (message_start,
// content_block_start/delta/stop, message_delta, message_stop). Served as a
// chat completion underneath.
#pragma once

#include "chat_adapter.h"

namespace server {

// The chat completion request a Messages request means; false with *err
// for what it cannot mean here.
bool MessagesToChat(const json& body, json* chat, ApiError* err);

class MessagesWriter : public ChatAdapterWriter {
 public:
  // `input_tokens`: the prompt's length, told in message_start (as Anthropic
  // does) before the final usage.
  MessagesWriter(const Generation& g, std::string model, ResponseBuilder::TokenText token_text, int32_t input_tokens);
  json Body() const override;

 protected:
  std::string Begin() override;
  std::string Text(const std::string& piece) override;
  std::string Reasoning(const std::string& piece) override;
  std::string End(const json& chat_body) override;
  std::string Error(const ApiError& err) override;

 private:
  json Message(const json& chat_body) const;

  const std::string id_;
  const int32_t input_tokens_;
  bool text_open_ = false;
  int text_index_ = 0;            // the text block's index: 1 after a streamed thinking block
  bool thinking_streamed_ = false;
  bool thinking_open_ = false;
};

}  // namespace server
