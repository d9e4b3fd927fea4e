// Engine events -> OpenAI response bodies and server-sent-event chunks.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine.h"
#include "openai_request.h"
#include "response_writer.h"

namespace server {

// Serializes with invalid UTF-8 replaced (token pieces of byte-level
// tokenizers can be partial characters), never throwing.
std::string Dump(const json& j);

// "chatcmpl-<24 hex digits>" and the like.
std::string NewId(const char* prefix);

// Accumulates the choices of one Generation from its events and renders
// them, as one body or as a stream of chunks. Not thread-safe: one handler
// owns it.
class ResponseBuilder : public ResponseWriter {
 public:
  using TokenText = std::function<std::string(llm_token)>;

  ResponseBuilder(const Generation& g, std::string model, TokenText token_text);

  // Streaming: the chunks before any token (chat: the assistant role of
  // every choice), the chunks for a batch of events, and the end (the usage
  // chunk when asked for, then "data: [DONE]"). Each returns SSE text.
  std::string StreamStart() override;
  std::string StreamEvents(const std::vector<SeqEvent>& events) override;
  std::string StreamEnd() override;

  // Non-streaming: apply events, then render the whole response.
  void Apply(const std::vector<SeqEvent>& events) override;
  json Body() const override;

  // True when every choice has its FINAL event.
  bool done() const override { return finished_ == choices_.size(); }
  // The first failure among the FINAL events (an error, or a cancellation
  // the client did not ask for); false when all ended normally.
  bool Failed(ApiError* err) const override;

 private:
  struct Alternative {
    std::string token;
    float logprob;
  };
  struct TokenLogprob {
    std::string token;
    float logprob;
    std::vector<Alternative> top;  // top_logprobs, most likely first
  };
  struct Choice {
    std::string text;
    std::string reasoning;  // the thinking (reasoning_format), apart from text
    std::vector<TokenLogprob> logprobs;  // all (non-streaming) or not yet sent (streaming)
    size_t text_offset = 0;              // completions' text_offset of the next token
    std::vector<size_t> offsets;         // beside logprobs
    bool finished = false;
    int32_t finish_reason = LLM_FINISH_NONE;
    llm_status status = LLM_OK;
    std::string message;
    llm_metrics metrics{};
    std::string kv_transfer_desc;  // a prefill server's descriptor (kv_transfer_params.h)
    int32_t transferred_tokens = 0;
  };

  void Record(const SeqEvent& e, Choice* c);
  json Envelope(const char* object) const;
  json Logprobs(const Choice& c) const;
  json Usage() const;
  json ChunkChoice(int index, const std::string& text, const Choice& c, bool with_logprobs, bool role,
                   const char* finish) const;

  // Tool mode (chat with tools, tool_choice not none): a choice's text is
  // held until its end and then sent as tool_calls or as content.
  json ToolMessage(const Choice& c, const char** finish) const;
  std::string StreamToolEnd(int index, const Choice& c);

  const ToolSpec tools_;
  const bool chat_, logprobs_, include_usage_;
  const int32_t top_logprobs_;
  const int n_;
  const std::string model_, id_;
  const int64_t created_;
  TokenText token_text_;
  std::vector<Choice> choices_;
  size_t finished_ = 0;
};

}  // namespace server
