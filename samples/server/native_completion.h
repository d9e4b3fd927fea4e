// llama.cpp's native /completion endpoint (llama-server's own API, which
// programs written against it call; also served as /completions): its
// request fields mapped onto a Generation, and its response shape — one
// object per prompt with content, tokens, stop_type, timings and
// generation_settings, streamed as "data:" lines ending with the one whose
// "stop" is true.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "request_defaults.h"
#include "response_writer.h"

namespace server {

// Request fields of the native API that shape its response.
struct NativeOptions {
  bool return_tokens = false;  // "tokens" in the non-streamed body
  std::vector<std::string> response_fields;  // only these ("a/b" = b inside a), when given
  int32_t n_probs = 0;         // completion_probabilities with this many alternatives
  int32_t n_predict = -1;      // as asked (-1: until the context ends)
  int32_t id_slot = -1;        // the slot whose conversation this becomes (slot_store.h); -1: none
  bool multi = false;          // "prompt" was a list of prompts: the body is a list
  json settings;               // generation_settings, echoed back
  std::vector<std::string> prompt_texts;  // each prompt's tokens as text, specials rendered ("prompt")
};

// Text to token ids with the model's tokenizer (add_special: BOS as the
// model says); false when the text cannot be tokenized (invalid UTF-8).
using Tokenize = std::function<bool(const std::string& text, bool add_special, std::vector<llm_token>* out)>;

// Parses a /completion body. Sampling defaults are llama.cpp's (temperature
// 0.8, top_k 40, top_p 0.95, min_p 0.05) unless the server's command line
// gave others (d); the request's own fields win. `tokenize` serves what
// llama.cpp tokenizes itself: logit_bias keyed by text, and a prompt mixing
// text with token ids.
bool ParseNativeCompletion(const json& body, const RequestDefaults& d, const Tokenize& tokenize, Generation* g,
                           NativeOptions* opt, ApiError* err);

class NativeCompletionWriter : public ResponseWriter {
 public:
  using TokenText = std::function<std::string(llm_token)>;

  NativeCompletionWriter(const Generation& g, NativeOptions opt, std::string model, TokenText token_text);

  std::string StreamStart() override { return ""; }
  std::string StreamEvents(const std::vector<SeqEvent>& events) override;
  std::string StreamEnd() override;
  void Apply(const std::vector<SeqEvent>& events) override;
  json Body() const override;
  bool done() const override { return finished_ == results_.size(); }
  bool Failed(ApiError* err) const override;

 private:
  struct Result {
    std::string content;
    std::vector<llm_token> tokens;
    json probs = json::array();  // completion_probabilities so far (not yet sent, when streaming)
    bool finished = false;
    int32_t finish_reason = LLM_FINISH_NONE;
    llm_status status = LLM_OK;
    std::string message;
    llm_metrics metrics{};
  };

  void Record(const SeqEvent& e, Result* r);
  json Final(size_t index, const Result& r) const;
  json Select(json result) const;  // response_fields
  json Probability(llm_token token, float logprob, const std::vector<llm_top_logprob>& top) const;

  NativeOptions opt_;
  std::vector<std::string> stops_;
  std::vector<std::string> prompts_;  // the prompts as text, for "prompt"
  std::string model_;
  TokenText token_text_;
  std::vector<Result> results_;
  size_t finished_ = 0;
};

}  // namespace server
