// The base of the response shapes that are a chat completion underneath
// (OpenAI's Responses API, Anthropic's Messages API): their requests are
// translated into a chat completion request, and their responses are made
// from the chat completion's result (tool calls parsed as chat does) plus,
// while streaming, the text as it arrives. A subclass renders those.
#pragma once

#include <string>
#include <vector>

#include "openai_response.h"

namespace server {

class ChatAdapterWriter : public ResponseWriter {
 public:
  ChatAdapterWriter(const Generation& g, std::string model, ResponseBuilder::TokenText token_text)
      : chat_(g, model, std::move(token_text)), model_(std::move(model)), tools_(g.tools.active()) {}

  void Apply(const std::vector<SeqEvent>& events) override { chat_.Apply(events); }
  bool done() const override { return chat_.done(); }
  bool Failed(ApiError* err) const override { return chat_.Failed(err); }

  // Streaming, in terms of the subclass's events: Begin once, Reasoning for
  // each piece of the thinking, Text for each piece of the reply (never in
  // tool mode, where the reply is parsed at its end), End with the whole chat
  // completion body.
  std::string StreamStart() override { return Begin(); }
  std::string StreamEvents(const std::vector<SeqEvent>& events) override {
    chat_.Apply(events);
    std::string out;
    for (const SeqEvent& e : events) {
      if (e.choice != 0) continue;
      if (!e.reasoning.empty()) out += Reasoning(e.reasoning);
      if (!tools_ && !e.text.empty()) out += Text(e.text);
    }
    return out;
  }
  std::string StreamEnd() override {
    ApiError err;
    if (chat_.Failed(&err)) return Error(err);
    return End(chat_.Body());
  }

 protected:
  virtual std::string Begin() = 0;
  virtual std::string Text(const std::string& piece) = 0;
  // A piece of the model's thinking (reasoning_format), before its text;
  // a shape that does not stream thinking returns "".
  virtual std::string Reasoning(const std::string&) { return ""; }
  virtual std::string End(const json& chat_body) = 0;
  virtual std::string Error(const ApiError& err) = 0;

  json ChatBody() const { return chat_.Body(); }
  // "event: name" and its data, as both APIs stream.
  static std::string Event(const std::string& name, const json& data) {
    return "event: " + name + "\ndata: " + Dump(data) + "\n\n";
  }

  ResponseBuilder chat_;
  const std::string model_;
  const bool tools_;
};

}  // namespace server
