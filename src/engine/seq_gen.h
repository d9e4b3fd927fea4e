// SeqGen: the engine-side state of a sequence — sampler, text stream, timings.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "engine/text_stream.h"
#include "sample/sampler.h"

namespace llm {

struct RequestState;

struct SeqGen {
  SeqGen(const SamplingParams& p, int32_t n_vocab, std::vector<std::string> stop, RequestState* r)
      : sampler(p, n_vocab), stream(std::move(stop)), req(r) {}
  Sampler sampler;
  TextStream stream;
  RequestState* req;
  bool scheduled = false;  // has run at least once
  std::chrono::steady_clock::time_point first_sched, first_token, last_token;
  std::vector<float> prompt_logprobs;  // (n_prompt - 1) once complete
  std::string piece;                   // scratch for one token's bytes
  std::vector<TopLogprob> top;         // the next token event's top_logprobs (request asked for them)
  std::vector<int32_t> top_scratch;    // (n_vocab) TopLogprobs' ids
  int32_t draft_proposed = 0;          // speculative decoding, this sequence
  int32_t draft_accepted = 0;
};

}  // namespace llm
