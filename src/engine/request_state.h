// The engine's record of a request: RequestSpec (validated, tokenized), and
// RequestState (one request in flight: its spec and its n sequences, each an
// EngineSeq, the plain Sequence record the scheduler and the KV manager see
// plus what only the engine needs to sample and stream).
//
//   RequestState --owns--> EngineSeq [0 .. n)  = Sequence (core/) + SeqGen
//        ^                                                            |
//        +------------------------ SeqGen::req -----------------------+
//
// The scheduler hands back Sequence pointers; every one of them is an
// EngineSeq the engine made (Admit), so Gen() may downcast.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "constrain/constraint.h"
#include "core/defaults.h"
#include "core/sequence.h"
#include "llm.h"
#include "engine/embed_sink.h"
#include "engine/image_cache.h"
#include "engine/image_input.h"
#include "engine/reasoning_parser.h"
#include "engine/text_stream.h"
#include "model/config.h"
#include "sample/sampler.h"
#include "sample/token_rules.h"

namespace llm {

using Clock = std::chrono::steady_clock;

struct RequestSpec {
  std::vector<int32_t> prompt;        // (n_prompt) token ids
  // ---- images in the prompt (engine/image_input.h): given instead of
  // `prompt`, Engine::Submit lays the pieces out into `prompt` (an image's
  // positions hold negative placeholders) and `image_spans`.
  std::vector<PromptPiece> pieces;
  std::vector<ImageInput> images;     // dropped once encoded
  std::vector<ImageSpan> image_spans; // set by Submit, in position order
  std::vector<int32_t> span_image;    // (image_spans) index into images
  SamplingParams sampling;
  int32_t max_tokens = defaults::kMaxTokens;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  int32_t n = 1;
  int32_t priority = 0;
  bool prompt_logprobs = false;
  TokenRules rules;                   // logit bias, stop token ids, min_tokens (sample/token_rules.h)
  int32_t top_logprobs = 0;           // alternatives per token event, [0, 20]
  // The compiled output constraint (constrain/constraint.h), shared by every
  // request with the same one; null = none.
  std::shared_ptr<const constrain::ByteProgram> constraint;
  // Thinking kept apart from the answer (reasoning_parser.h): the resolved
  // format (never kAuto), and whether the prompt opened the thinking.
  ReasoningFormat reasoning = ReasoningFormat::kNone;
  bool reasoning_open = false;
  uint64_t cache_salt = 0;
  bool keep_kv = false;               // llm_request.keep_kv
  bool kv_produce = false;            // llm_request.kv_produce: publish the prompt's KV at the end
  int32_t transferred_tokens = 0;     // prompt tokens imported by a KV pull before submit
  llm_status kv_transfer_status = LLM_OK;  // that pull's outcome
  int32_t spec_mode = LLM_SPEC_OFF;   // resolved: OFF, NGRAM or DRAFT (never AUTO)
  int32_t spec_k = defaults::kSpecK;  // drafts per round, >= 1
  llm_event_callback callback = nullptr;
  void* user_data = nullptr;
  // ---- LLM_TASK_EMBED (engine/embed_step.cpp); the fields above that
  // concern generation are ignored
  int32_t task = LLM_TASK_GENERATE;
  Pooling pooling = Pooling::kMean;   // resolved: never "the model's"
  bool normalize = true;              // L2 after truncation (never for RANK)
  int32_t dimensions = 0;             // values kept per row; 0 = all
  // llm_embed: the vector goes to sink row sink_index, not to an event.
  std::shared_ptr<EmbedSink> sink;
  int32_t sink_index = 0;
};

struct RequestState;

// The engine-side state of a sequence: sampler, text stream, timings.
struct SeqGen {
  SeqGen(const SamplingParams& p, int32_t n_vocab, std::vector<std::string> stop, RequestState* r)
      : sampler(p, n_vocab), stream(std::move(stop)), req(r) {}
  Sampler sampler;
  TextStream stream;
  ReasoningParser reasoning;           // the request's reasoning format (kNone: all content)
  ReasoningOut split;                  // scratch: one event's text, split
  bool constraint_pending = false;     // the constraint waits for the answer to begin
  RequestState* req;                   // the request that owns this sequence
  bool scheduled = false;              // has run at least once
  Clock::time_point first_sched, first_token, last_token;
  std::vector<float> prompt_logprobs;  // (n_prompt - 1) once complete
  std::string piece;                   // scratch for one token's bytes
  std::vector<TopLogprob> top;         // the next token event's top_logprobs (request asked for them)
  std::vector<int32_t> top_scratch;    // (n_vocab) TopLogprobs' ids
  std::unique_ptr<constrain::ConstraintState> constraint;  // the request has a constraint; the sampler points at it
  int32_t draft_proposed = 0;          // speculative decoding, this sequence
  int32_t draft_accepted = 0;
};

struct EngineSeq final : Sequence {
  EngineSeq(const SamplingParams& p, int32_t n_vocab, std::vector<std::string> stop, RequestState* r)
      : gen(p, n_vocab, std::move(stop), r) {}
  SeqGen gen;
};

inline SeqGen& Gen(Sequence* s) { return static_cast<EngineSeq*>(s)->gen; }
inline const SeqGen& Gen(const Sequence& s) { return static_cast<const EngineSeq&>(s).gen; }

struct RequestState {
  uint64_t id = 0;
  RequestSpec spec;
  Clock::time_point submit_time;
  std::vector<std::unique_ptr<EngineSeq>> seqs;  // (n)
  int32_t n_live = 0;
  bool forked = false;         // n > 1: the samples have split from sequence 0
  // (spec.image_spans) each span's soft tokens (n, n_embd), once encoded
  std::vector<ImageCache::Rows> image_rows;
  bool counted_queued = true;  // still counted in Engine::n_queued_
};

}  // namespace llm
