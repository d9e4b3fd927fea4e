// What a generation's HTTP response is made of, whatever the API: events go
// in, a whole body or server-sent-event text comes out. OpenAI's chat and
// completions (openai_response.h) and llama.cpp's native /completion
// (native_completion.h) each implement it; routes.cpp drives any of them.
#pragma once

#include <string>
#include <vector>

#include "engine.h"
#include "openai_request.h"

namespace server {

class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;

  // Streaming: what precedes the first token, the text for a batch of
  // events, and what closes the stream.
  virtual std::string StreamStart() = 0;
  virtual std::string StreamEvents(const std::vector<SeqEvent>& events) = 0;
  virtual std::string StreamEnd() = 0;

  // Non-streaming: apply events, then render the whole response.
  virtual void Apply(const std::vector<SeqEvent>& events) = 0;
  virtual json Body() const = 0;

  // True when every sequence has its FINAL event.
  virtual bool done() const = 0;
  // The first failure among the FINAL events (an error, or a cancellation
  // the client did not ask for); false when all ended normally.
  virtual bool Failed(ApiError* err) const = 0;
};

}  // namespace server
