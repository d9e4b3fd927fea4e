// OpenAI's Responses API (POST /v1/responses), what the openai package now
// recommends over chat completions: input items (messages, function calls
// and their outputs), instructions, function tools, text.format (JSON
// Schema), streamed as typed events (response.created ...
// response.output_text.delta ... response.completed). Served as a chat
// completion underneath; stateless (no store, no previous_response_id).
#pragma once

#include "chat_adapter.h"

namespace server {

// The chat completion request a Responses request means; false with *err
// for what it cannot mean here.
bool ResponsesToChat(const json& body, json* chat, ApiError* err);

class ResponsesWriter : public ChatAdapterWriter {
 public:
  ResponsesWriter(const Generation& g, const json& request, std::string model, ResponseBuilder::TokenText token_text);
  json Body() const override;

 protected:
  std::string Begin() override;
  std::string Text(const std::string& piece) override;
  std::string End(const json& chat_body) override;
  std::string Error(const ApiError& err) override;

 private:
  json Response(const char* status, json output, const json& usage, const char* incomplete) const;
  // with_reasoning: a "reasoning" item first when the model thought.
  json Output(const json& chat_body, bool* incomplete, bool with_reasoning) const;
  std::string Next(const std::string& type, json data);

  const json echo_;  // request fields the response echoes (tools, tool_choice, text, ...)
  const std::string id_, message_id_, reasoning_id_;
  const int64_t created_;
  int64_t seq_ = 0;
  std::string text_;  // streamed so far
  bool opened_ = false;
};

}  // namespace server
