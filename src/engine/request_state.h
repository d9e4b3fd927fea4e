// RequestSpec (a validated, tokenized request) and RequestState (the
// engine's record of one request in flight: its spec, its n sequences and
// their engine-side state).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/defaults.h"
#include "engine/sequence.h"
#include "llm.h"
#include "sample/sampler.h"

namespace llm {

using Clock = std::chrono::steady_clock;

struct RequestSpec {
  std::vector<int32_t> prompt;        // (n_prompt) token ids
  SamplingParams sampling;
  int32_t max_tokens = defaults::kMaxTokens;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  int32_t n = 1;
  int32_t priority = 0;
  bool prompt_logprobs = false;
  uint64_t cache_salt = 0;
  int32_t spec_mode = LLM_SPEC_OFF;   // resolved: OFF, NGRAM or DRAFT (never AUTO)
  int32_t spec_k = defaults::kSpecK;  // drafts per round, >= 1
  llm_event_callback callback = nullptr;
  void* user_data = nullptr;
};

struct RequestState {
  uint64_t id = 0;
  RequestSpec spec;
  Clock::time_point submit_time;
  std::vector<std::unique_ptr<Sequence>> seqs;  // (n)
  int32_t n_live = 0;
  bool forked = false;         // n > 1: the samples have split from sequence 0
  bool counted_queued = true;  // still counted in Engine::n_queued_
};

}  // namespace llm
