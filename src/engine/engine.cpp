#include "engine/engine.h"

#include "engine/constrained_drafts.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>


namespace llm {

namespace {
double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// A seed for LLM_SEED_RANDOM. random_device may throw where the OS offers no
// entropy source; the clock is then good enough.
uint64_t RandomSeed() {
  try {
    std::random_device rd;
    return (uint64_t{rd()} << 32) ^ rd();
  } catch (...) {
    return static_cast<uint64_t>(Clock::now().time_since_epoch().count()) * 0x9E3779B97F4A7C15ull;
  }
}

}  // namespace

// ------------------------------------------------------------ lifecycle

StatusOr<std::unique_ptr<Engine>> Engine::Create(std::unique_ptr<Model> model,
                                                 std::unique_ptr<Backend> backend,
                                                 const EngineConfig& config, SpecSetup spec) {
  if (config.n_ctx <= 0 || config.block_size <= 0 || config.n_blocks <= 0 || config.max_seqs <= 0 ||
      config.max_batch_tokens <= 0 || config.max_queued <= 0 || config.n_swap_slots < 0) {
    return InvalidArgument("engine configuration has a non-positive size");
  }
  if (config.n_swap_slots > 0) LLM_RETURN_IF_ERROR(backend->ReserveSwapSpace(config.n_swap_slots));
  std::unique_ptr<Engine> e(new Engine(std::move(model), std::move(backend), config, std::move(spec)));
  LLM_ASSIGN_OR_RETURN(e->tiers_, kvstate::KvTiers::Create(config.tiers, e->backend_.get(), e->model_.get()));
  e->kv_.set_tier(e->tiers_.get());
  e->FillTierStats(&e->stats_);  // what the directory scan found, before the first step
  e->published_ = e->stats_;
  e->thread_ = std::thread([p = e.get()] { p->Run(); });
  return e;
}

Engine::Engine(std::unique_ptr<Model> model, std::unique_ptr<Backend> backend, const EngineConfig& config,
               SpecSetup spec)
    : model_(std::move(model)),
      backend_(std::move(backend)),
      config_(config),
      start_time_(Clock::now()),
      kv_(config.n_blocks, config.block_size, config.n_swap_slots),
      scheduler_(SchedulerConfig{config.max_seqs, config.max_batch_tokens}, &kv_),
      spec_(model_->config.n_vocab, std::move(spec.draft), spec.verify),
      batch_(model_->config.n_vocab, model_->config.n_embd) {
  scratch_.resize(model_->config.n_vocab);
  batch_.set_mrope(model_->config.mrope());
  stats_.struct_size = sizeof(llm_stats);
  stats_.backend = backend_->kind();
  stats_.kv_blocks_total = config.n_blocks;
  stats_.kv_blocks_free = config.n_blocks;
  stats_.swap_blocks_total = config.n_swap_slots;
  const BackendMemory mem = backend_->memory();  // an idle context's, before any step
  stats_.kv_bytes = static_cast<uint64_t>(mem.kv_committed);
  stats_.kv_pool_bytes = static_cast<uint64_t>(mem.kv_pool);
  stats_.weight_bytes = static_cast<uint64_t>(mem.weights);
  stats_.scratch_bytes = static_cast<uint64_t>(mem.scratch);
  published_ = stats_;
  block_stamp_.assign(config.n_blocks, 0);
  block_fill_.assign(config.n_blocks, 0);
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  paused_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // The disk tier outlives the context: what the pool still caches goes
  // down to it, so the next context on that directory finds it.
  if (tiers_) tiers_->Persist(kv_.pool());
  kv_.set_tier(nullptr);
}

std::vector<std::string> Engine::TierWarnings() const {
  return tiers_ ? tiers_->warnings() : std::vector<std::string>{};
}

// ------------------------------------------------------------ caller side

StatusOr<uint64_t> Engine::Submit(RequestSpec spec) {
  if (!spec.pieces.empty() || !spec.images.empty()) LLM_RETURN_IF_ERROR(LayOutImages(&spec));
  const int32_t n_prompt = static_cast<int32_t>(spec.prompt.size());
  if (n_prompt == 0) return InvalidArgument("the prompt is empty (no tokens)");
  for (int32_t t : spec.prompt) {
    if (t < 0 && !spec.image_spans.empty()) continue;  // an image's placeholder (LayOutImages checked the rest)
    if (t < 0 || t >= model_->config.n_vocab) {
      return InvalidArgument("prompt token id " + std::to_string(t) + " is outside the vocabulary");
    }
  }
  if (spec.task == LLM_TASK_EMBED) {
    LLM_RETURN_IF_ERROR(CheckEmbed(spec));
  } else if (model_->config.is_encoder || !model_->config.causal) {
    return Unsupported("the model '" + model_->config.arch +
                       "' is an embedding model: it cannot generate text (submit LLM_TASK_EMBED)");
  } else {
    // A sequence never needs a slot for its last token (it is sampled, not
    // fed back), so it occupies prompt + max_tokens - 1 positions at most.
    const int64_t positions = int64_t{n_prompt} + spec.max_tokens - 1;
    if (positions > config_.n_ctx) {
      return Status(LLM_ERR_CONTEXT_OVERFLOW,
                    "prompt (" + std::to_string(n_prompt) + " tokens) + max_tokens (" + std::to_string(spec.max_tokens) +
                        ") exceeds the context of " + std::to_string(config_.n_ctx) + " tokens");
    }
    if (kv_.pool().BlocksFor(positions) > config_.n_blocks) {
      return Status(LLM_ERR_CONTEXT_OVERFLOW, "the request needs " + std::to_string(kv_.pool().BlocksFor(positions)) +
                                                  " KV blocks but the pool has " + std::to_string(config_.n_blocks));
    }
    if (spec.spec_mode == LLM_SPEC_DRAFT && !spec_.has_draft()) {
      return InvalidArgument("spec_mode DRAFT needs a context created with draft_model_path or self_draft_layers");
    }
    if (spec.spec_mode != LLM_SPEC_OFF && spec.spec_mode != LLM_SPEC_NGRAM && spec.spec_mode != LLM_SPEC_DRAFT) {
      return InvalidArgument("spec_mode " + std::to_string(spec.spec_mode) + " is not resolved");
    }
    if (spec.spec_k < 1) spec.spec_k = 1;
  }
  auto req = std::make_unique<RequestState>();
  req->spec = std::move(spec);
  req->submit_time = Clock::now();
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return Status(LLM_ERR_SHUTDOWN, "the context is shutting down");
    if (n_queued_ >= config_.max_queued) {
      return Status(LLM_ERR_BUSY, "request queue is full (" + std::to_string(config_.max_queued) +
                                      " waiting); poll and retry");
    }
    id = next_id_++;
    req->id = id;
    live_.insert(id);
    ++n_queued_;
    ++n_submitted_;
    inbox_.push_back(std::move(req));
  }
  cv_.notify_all();
  return id;
}

Status Engine::Cancel(uint64_t id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!live_.count(id)) return Status(LLM_ERR_NOT_FOUND, "no request in flight with id " + std::to_string(id));
    cancel_inbox_.push_back(id);
  }
  cv_.notify_all();
  return Status::Ok();
}

void Engine::GetStats(llm_stats* out) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    *out = published_;
    out->requests_submitted = n_submitted_;
    out->queue_depth = n_queued_;
  }
  out->uptime_s = std::chrono::duration<double>(Clock::now() - start_time_).count();
}

// ------------------------------------------------------------ engine thread

void Engine::Run() {
  std::vector<std::unique_ptr<RequestState>> inbox;
  std::vector<uint64_t> cancels;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] {
        return stop_ || pause_requested_ || !inbox_.empty() || !cancel_inbox_.empty() || !scheduler_.idle() ||
               !embed_queue_.empty();
      });
      if (pause_requested_ && !stop_) {  // RunPaused: wait here, between steps
        paused_ = true;
        paused_cv_.notify_all();
        cv_.wait(lock, [&] { return stop_ || !pause_requested_; });
        paused_ = false;
      }
      if (stop_) break;
      inbox.swap(inbox_);
      cancels.swap(cancel_inbox_);
    }
    for (auto& r : inbox) Admit(std::move(r));
    inbox.clear();
    for (uint64_t id : cancels) CancelRequest(id);
    cancels.clear();
    if (!embed_queue_.empty()) RunEmbeddings();
    if (!scheduler_.idle()) Step();
    Publish();  // before the events: a caller who sees a final event sees it counted
    events_.PushAll(&pending_events_);
  }
  // Shutdown: whatever is in flight ends as cancelled (nobody may poll it).
  std::vector<uint64_t> ids;
  for (auto& [id, r] : requests_) ids.push_back(id);
  for (uint64_t id : ids) CancelRequest(id);
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& r : inbox_) live_.erase(r->id);
  inbox_.clear();
}

Status Engine::RunPaused(const std::function<Status(KvCacheManager& kv, Backend& backend)>& fn) {
  if (pauser_.load() == std::this_thread::get_id())
    return InvalidArgument("a KV export or import of this context is already running on this thread "
                           "(called from its own callback)");
  std::lock_guard<std::mutex> turn(pause_turn_);
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (stop_) return Status(LLM_ERR_SHUTDOWN, "the context is shutting down");
    pause_requested_ = true;
    cv_.notify_all();
    paused_cv_.wait(lock, [&] { return paused_ || stop_; });
    if (!paused_) {
      pause_requested_ = false;
      return Status(LLM_ERR_SHUTDOWN, "the context is shutting down");
    }
  }
  // Resumes the engine however fn ends (an exception included: the C API's
  // Guard turns it into a status, and the engine must not stay parked).
  struct Resume {
    Engine* e;
    ~Resume() {
      e->pauser_.store(std::thread::id{});
      {
        std::lock_guard<std::mutex> lock(e->mu_);
        e->pause_requested_ = false;
      }
      e->cv_.notify_all();
    }
  } resume{this};
  pauser_.store(std::this_thread::get_id());
  return fn(kv_, *backend_);
}

StatusOr<int32_t> Engine::ExportKv(std::span<const int32_t> tokens, uint64_t cache_salt,
                                   const kvstate::WriteFn& write) {
  int32_t n = 0;
  Status st = RunPaused([&](KvCacheManager& kv, Backend& backend) -> Status {
    const kvstate::KvTarget target{&kv.pool(), &backend, model_.get()};
    LLM_ASSIGN_OR_RETURN(n, kvstate::ExportKv(target, tokens, cache_salt, write));
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return n;
}

std::string Engine::PublishKv(const Sequence& seq) {
  if (!publish_kv_) return "";
  std::vector<uint8_t> stream;
  auto write = [&](const void* data, size_t n) -> Status {
    const auto* p = static_cast<const uint8_t*>(data);
    stream.insert(stream.end(), p, p + n);
    return Status::Ok();
  };
  const kvstate::KvTarget target{&kv_.pool(), backend_.get(), model_.get()};
  StatusOr<int32_t> n = kvstate::ExportKv(
      target, std::span<const int32_t>(seq.tokens.data(), static_cast<size_t>(seq.n_prompt)), seq.cache_salt, write);
  if (!n.ok()) {
    std::fprintf(stderr, "llmrt: KV producer: request %llu's KV was not published: %s\n",
                 static_cast<unsigned long long>(seq.request_id), n.status().message().c_str());
    return "";
  }
  if (*n == 0) return "";  // the prompt filled no block: nothing to hand over
  StatusOr<std::string> desc = publish_kv_(std::move(stream), *n);
  if (!desc.ok()) {
    std::fprintf(stderr, "llmrt: KV producer: %s\n", desc.status().message().c_str());
    return "";
  }
  return *desc;
}

kvstate::ImportResult Engine::ImportKv(uint64_t cache_salt, const kvstate::ReadFn& read) {
  kvstate::ImportResult r;
  Status st = RunPaused([&](KvCacheManager& kv, Backend& backend) -> Status {
    r = kvstate::ImportKv({&kv.pool(), &backend, model_.get()}, cache_salt, read);
    if (!r.status.ok() && r.n_tokens == 0) ++imports_refused_;
    return Status::Ok();
  });
  if (!st.ok()) r.status = st;
  return r;
}

void Engine::Admit(std::unique_ptr<RequestState> req) {
  RequestState* r = req.get();
  const RequestSpec& spec = r->spec;
  if (spec.task == LLM_TASK_EMBED) {  // no sequence: run whole by RunEmbeddings
    embed_queue_.push_back(r);
    requests_[r->id] = std::move(req);
    return;
  }
  uint64_t base_seed = spec.sampling.seed;
  if (base_seed == LLM_SEED_RANDOM) base_seed = RandomSeed();
  for (int32_t i = 0; i < spec.n; ++i) {
    SamplingParams sp = spec.sampling;
    sp.seed = base_seed + static_cast<uint64_t>(i);
    auto seq = std::make_unique<EngineSeq>(sp, model_->config.n_vocab, spec.stop, r);
    seq->request_id = r->id;
    seq->seq_index = i;
    seq->priority = spec.priority;
    seq->arrival = arrival_++;
    seq->tokens = spec.prompt;
    // Submit already bounds prompt + max_tokens by the context; cap anyway so
    // the reservation can never exceed what a sequence can hold.
    seq->tokens.reserve(std::min(spec.prompt.size() + static_cast<size_t>(spec.max_tokens),
                                 static_cast<size_t>(config_.n_ctx)) + 1);
    seq->n_prompt = static_cast<int32_t>(spec.prompt.size());
    seq->cache_salt = spec.cache_salt;
    seq->keep_kv = spec.keep_kv;
    seq->image_spans = spec.image_spans;
    seq->spec_mode = spec.spec_mode;
    seq->use_cached_prefix = !spec.prompt_logprobs;  // those need every prompt position's logits
    if (!spec.rules.empty()) seq->gen.sampler.set_rules(&spec.rules);
    if (spec.reasoning != ReasoningFormat::kNone)
      seq->gen.reasoning = ReasoningParser(spec.reasoning, spec.reasoning_open);
    // A constraint covers the answer only where the output begins with
    // thinking or markup: the prompt opened the thinking, or harmony's
    // headers. Otherwise it masks from the first token, as without a
    // reasoning format (a constrained output then opens no thinking of its
    // own unless the constraint allows "<think>").
    const bool answer_later = spec.reasoning == ReasoningFormat::kHarmony ||
                              (spec.reasoning == ReasoningFormat::kDeepSeek && spec.reasoning_open);
    if (spec.constraint != nullptr && answer_later) {
      seq->gen.constraint_pending = true;  // the answer only: EngageConstraint
    } else if (spec.constraint != nullptr) {
      if (token_trie_ == nullptr) token_trie_ = constrain::TokenTrie::FromTokenizer(*model_->tokenizer);
      seq->gen.constraint = std::make_unique<constrain::ConstraintState>(shared_matchers_.Get(spec.constraint),
                                                                         token_trie_, seq->n_prompt, spec.max_tokens);
      seq->gen.sampler.set_constraint(seq->gen.constraint.get());
    }
    // Parallel samples: only sequence 0 runs the prompt; the others fork
    // from it (sharing its blocks) when the prompt is done.
    if (i == 0) scheduler_.Add(seq.get());
    r->seqs.push_back(std::move(seq));
  }
  r->n_live = spec.n;
  requests_[r->id] = std::move(req);
  if (!r->spec.image_spans.empty()) {
    if (Status st = EncodeImages(r); !st.ok()) Finish(r->seqs[0].get(), LLM_FINISH_ERROR, st.code(), st.message());
  }
}

void Engine::CancelRequest(uint64_t id) {
  // Finish() can end several sequences (a parent takes its unforked samples
  // along) and erases the request with its last one: look it up every time.
  while (true) {
    auto it = requests_.find(id);
    if (it == requests_.end()) return;
    if (it->second->spec.task == LLM_TASK_EMBED) {
      RequestState* r = it->second.get();
      embed_queue_.erase(std::remove(embed_queue_.begin(), embed_queue_.end(), r), embed_queue_.end());
      FinishEmbed(r, LLM_FINISH_CANCELLED, LLM_OK, "", {}, 0, 0);
      return;
    }
    Sequence* live = nullptr;
    for (auto& s : it->second->seqs) {
      if (s->state != SeqState::kFinished) {
        live = s.get();
        break;
      }
    }
    if (live == nullptr) return;
    Finish(live, LLM_FINISH_CANCELLED, LLM_OK, "");
  }
}

void Engine::Finish(Sequence* seq, int32_t reason, llm_status status, const std::string& message) {
  SeqGen& g = Gen(seq);
  RequestState* r = g.req;
  if (seq->seq_index == 0 && !r->forked) {
    // Samples that never split from this sequence end with it (first, so
    // the request is erased with this, its last sequence).
    r->forked = true;
    for (size_t i = 1; i < r->seqs.size(); ++i) Finish(r->seqs[i].get(), reason, status, message);
  }
  const auto now = Clock::now();
  EventRecord ev;
  ev.type = LLM_EVENT_FINAL;
  ev.request_id = seq->request_id;
  ev.seq_index = seq->seq_index;
  ev.text = std::string(g.stream.Flush());
  if (r->spec.reasoning != ReasoningFormat::kNone) {
    ev.part = g.reasoning.in_reasoning() ? LLM_PART_REASONING : LLM_PART_CONTENT;
    g.split.clear();
    g.reasoning.Push(ev.text, &g.split);
    g.reasoning.Finish(&g.split);
    ev.text = std::move(g.split.content);
    ev.reasoning_text = std::move(g.split.reasoning);
  }
  ev.finish_reason = reason;
  ev.status = status;
  ev.message = message;
  llm_metrics& m = ev.metrics;
  m.prompt_tokens = seq->n_prompt;
  m.cached_prompt_tokens = std::max(0, seq->n_cached_prompt);
  m.preemptions = seq->n_preemptions;
  m.draft_tokens_proposed = g.draft_proposed;
  m.draft_tokens_accepted = g.draft_accepted;
  m.generated_tokens = seq->n_generated();
  m.queue_ms = g.scheduled ? Ms(g.first_sched - r->submit_time) : Ms(now - r->submit_time);
  m.ttft_ms = m.generated_tokens > 0 ? Ms(g.first_token - r->submit_time) : 0.0;
  m.tpot_ms = m.generated_tokens > 1 ? Ms(g.last_token - g.first_token) / (m.generated_tokens - 1) : 0.0;
  m.total_ms = Ms(now - r->submit_time);
  ev.transferred_prompt_tokens = std::min(r->spec.transferred_tokens, m.cached_prompt_tokens);
  ev.kv_transfer_status = r->spec.kv_transfer_status;
  if (r->spec.kv_produce && seq->seq_index == 0 && status == LLM_OK && reason != LLM_FINISH_CANCELLED) ev.kv_transfer_desc = PublishKv(*seq);
  if (r->spec.prompt_logprobs) {
    ev.has_prompt_logprobs = true;
    ev.prompt_logprobs = std::move(g.prompt_logprobs);
  }
  ev.callback = r->spec.callback;
  ev.user_data = r->spec.user_data;
  pending_events_.push_back(std::move(ev));

  scheduler_.Remove(seq);
  if (--r->n_live > 0) return;
  // Last sequence of the request: forget it.
  const uint64_t id = r->id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    live_.erase(id);
    if (r->counted_queued) --n_queued_;
  }
  stats_.requests_finished++;
  requests_.erase(id);  // destroys r and its sequences
}

void Engine::EmitToken(Sequence* seq, int32_t token, float logprob, std::string_view text) {
  EventRecord ev;
  ev.type = LLM_EVENT_TOKEN;
  ev.request_id = seq->request_id;
  ev.seq_index = seq->seq_index;
  ev.token = token;
  SeqGen& g = Gen(seq);
  if (g.req->spec.reasoning != ReasoningFormat::kNone) {
    // Markup that closes the thinking is the thinking's; what opens it too.
    const bool was = g.reasoning.in_reasoning();
    g.split.clear();
    g.reasoning.Push(text, &g.split);
    ev.part = was || g.reasoning.in_reasoning() ? LLM_PART_REASONING : LLM_PART_CONTENT;
    ev.text = std::move(g.split.content);
    ev.reasoning_text = std::move(g.split.reasoning);
  } else {
    ev.text = std::string(text);
  }
  ev.logprob = logprob;
  if (Gen(seq).req->spec.top_logprobs > 0) {
    ev.has_top_logprobs = true;
    for (const TopLogprob& t : Gen(seq).top) ev.top_logprobs.push_back({t.token, t.logprob});
  }
  ev.callback = Gen(seq).req->spec.callback;
  ev.user_data = Gen(seq).req->spec.user_data;
  pending_events_.push_back(std::move(ev));
}

// Samples the token after `seq`'s last one from its logits row, streams it,
// and ends the sequence when a stop condition holds.
void Engine::SampleNext(Sequence* seq, const float* logits) {
  SeqGen& g = Gen(seq);
  const int32_t n_vocab = model_->config.n_vocab;
  if (g.req->spec.top_logprobs > 0) TopLogprobs(logits, n_vocab, g.req->spec.top_logprobs, &g.top_scratch, &g.top);
  if (g.sampler.is_plain_argmax()) {
    // what Sample() would pick, with its logprob, in one pass and no copy
    const GreedyPick p = GreedyWithLogprob(logits, n_vocab);
    AppendToken(seq, p.token, p.logprob);
    return;
  }
  if (g.constraint != nullptr && g.constraint->DeadEnd(seq->tokens)) {
    // Nothing the constraint allows can follow: a token sampled now would
    // break it, and stopping would return an incomplete value as finished.
    Finish(seq, LLM_FINISH_ERROR, LLM_ERR_INVALID_ARGUMENT,
           "the output constraint can match no further token: its grammar is too ambiguous for the matcher "
           "(more than " + std::to_string(constrain::kMaxStacksPerState) +
               " parses at one point, e.g. a very wide anyOf); narrow the schema");
    return;
  }
  std::memcpy(scratch_.data(), logits, sizeof(float) * n_vocab);  // the sampler edits its copy
  const int32_t token = g.sampler.Sample(scratch_.data(), seq->tokens);
  AppendToken(seq, token, TokenLogprob(logits, n_vocab, token));
}

bool Engine::AppendToken(Sequence* seq, int32_t token, float logprob) {
  SeqGen& g = Gen(seq);
  const RequestSpec& spec = g.req->spec;
  const auto now = Clock::now();
  if (seq->n_generated() == 0) g.first_token = now;
  g.last_token = now;
  seq->tokens.push_back(token);
  stats_.generated_tokens++;

  const bool eog = (model_->tokenizer->IsEog(token) && !spec.ignore_eos) || spec.rules.IsStopToken(token);
  g.piece.clear();
  // Harmony's messages are told apart by special tokens: its parser sees them.
  if (!eog) model_->tokenizer->AppendPiece(token, /*render_special=*/spec.reasoning == ReasoningFormat::kHarmony, &g.piece);
  bool stopped = false;
  std::string_view text = g.stream.Push(g.piece, &stopped);
  EmitToken(seq, token, logprob, text);
  if (g.constraint_pending && g.reasoning.answer_started()) EngageConstraint(seq);

  if (eog || stopped) {
    Finish(seq, LLM_FINISH_STOP, LLM_OK, "");
    return true;
  }
  if (seq->n_generated() >= spec.max_tokens || static_cast<int32_t>(seq->tokens.size()) > config_.n_ctx) {
    Finish(seq, LLM_FINISH_LENGTH, LLM_OK, "");
    return true;
  }
  return false;
}

// The answer of a reasoning request has begun (after the thinking, or
// harmony's message header): its constraint masks from the next token on.
void Engine::EngageConstraint(Sequence* seq) {
  SeqGen& g = Gen(seq);
  const RequestSpec& spec = g.req->spec;
  g.constraint_pending = false;
  const int32_t start = static_cast<int32_t>(seq->tokens.size());
  if (token_trie_ == nullptr) token_trie_ = constrain::TokenTrie::FromTokenizer(*model_->tokenizer);
  g.constraint = std::make_unique<constrain::ConstraintState>(shared_matchers_.Get(spec.constraint), token_trie_,
                                                              start, spec.max_tokens - (start - seq->n_prompt));
  g.sampler.set_constraint(g.constraint.get());
}

// ------------------------------------------------------------ speculation

// Drafts worth verifying for a decoding sequence this step: no more than the
// tokens it may still generate minus the bonus token, and no position past
// the context.
int32_t Engine::WantedDrafts(const Sequence& seq) const {
  const RequestSpec& spec = Gen(seq).req->spec;
  if (spec.spec_mode == LLM_SPEC_OFF || seq.n_pending() != 1 || seq.n_generated() < 1) return 0;
  // Drafts accepted past the end of the thinking would escape the constraint.
  if (Gen(seq).constraint_pending) return 0;
  const int32_t remaining = spec.max_tokens - seq.n_generated();
  const int32_t room = config_.n_ctx - static_cast<int32_t>(seq.tokens.size());
  return std::max(0, std::min({spec.spec_k, remaining - 1, room}));
}

// Verifies `seq`'s drafts against the target's rows (spec/speculator.h) and
// emits the accepted run plus one correction or bonus token, truncated at the
// first stop condition. Only verified tokens count as computed, so only they
// reach the prefix cache; the KV slots of rejected drafts are overwritten
// later.
void Engine::VerifyDrafts(Sequence* seq, const float* rows) {
  SeqGen& g = Gen(seq);
  const Speculator::Verified v = spec_.Verify(seq, g.sampler, rows);
  g.draft_proposed += v.n_drafts;
  g.draft_accepted += v.accepted;
  stats_.draft_tokens_proposed += static_cast<uint64_t>(v.n_drafts);
  stats_.draft_tokens_accepted += static_cast<uint64_t>(v.accepted);
  stats_.spec_rounds++;
  const int32_t n_vocab = model_->config.n_vocab;
  for (int32_t j = 0; j <= v.accepted; ++j) {
    // Row j is the distribution token j was verified under.
    if (g.req->spec.top_logprobs > 0)
      TopLogprobs(rows + static_cast<size_t>(j) * n_vocab, n_vocab, g.req->spec.top_logprobs, &g.top_scratch, &g.top);
    if (AppendToken(seq, v.tokens[j], v.logprobs[j])) return;  // finished: freed
  }
  // The pending token was counted after the forward; the accepted drafts'
  // K/V (written this step) are now verified too, and may complete blocks
  // for the prefix cache.
  seq->n_computed += v.accepted;
  seq->draft_computed = std::min(seq->draft_computed, seq->n_computed);
  kv_.CommitComputed(seq);
}

// The prompt of a request with n > 1 samples has just been computed by its
// sequence 0: the other samples take shared references to its blocks and
// draw their first tokens from the same logits, each with its own sampler.
void Engine::ForkChildren(Sequence* parent, const float* logits) {
  RequestState* r = Gen(parent).req;
  r->forked = true;
  for (size_t i = 1; i < r->seqs.size(); ++i) {
    Sequence* c = r->seqs[i].get();
    if (c->state == SeqState::kFinished) continue;
    kv_.Fork(*parent, c);
    c->n_cached_prompt = parent->n_cached_prompt;
    Gen(c).scheduled = true;
    Gen(c).first_sched = Gen(parent).first_sched;
    Gen(c).prompt_logprobs = Gen(parent).prompt_logprobs;
    scheduler_.AddRunning(c);
    SampleNext(c, logits);
  }
}

// Hands the loop iteration's figures to GetStats, with the gauges read now
// (a cancel can free the last blocks without a step). It runs before the
// iteration's events reach the queue, so a caller who has polled a final
// event sees it counted.
void Engine::Publish() {
  llm_stats& s = stats_;
  s.running = scheduler_.n_running();
  s.waiting = scheduler_.n_waiting();
  s.kv_blocks_used = kv_.pool().n_used();
  s.kv_blocks_free = s.kv_blocks_total - s.kv_blocks_used;
  s.kv_blocks_cached = kv_.pool().n_cached_free();
  s.prefix_cache_queried_tokens = kv_.queried_tokens();
  s.prefix_cache_hit_tokens = kv_.hit_tokens();
  s.swap_blocks_used = kv_.n_swap_slots() - kv_.n_swap_free();
  s.swap_blocks_out = kv_.swapped_out_blocks();
  s.swap_blocks_in = kv_.swapped_in_blocks();
  FillTierStats(&s);
  const BackendMemory mem = backend_->memory();
  s.kv_bytes = static_cast<uint64_t>(mem.kv_committed);
  s.kv_pool_bytes = static_cast<uint64_t>(mem.kv_pool);
  s.weight_bytes = static_cast<uint64_t>(mem.weights);
  s.scratch_bytes = static_cast<uint64_t>(mem.scratch);
  const MoeOffloadStats moe = backend_->moe_offload();
  s.moe_host_layers = moe.host_layers;
  s.moe_cache_slots = moe.cache_slots;
  s.moe_cache_bytes = static_cast<uint64_t>(moe.cache_bytes);
  s.moe_host_bytes = static_cast<uint64_t>(moe.host_bytes);
  s.moe_cpu_steps = static_cast<uint64_t>(moe.cpu_steps);
  s.moe_copy_steps = static_cast<uint64_t>(moe.copy_steps);
  s.moe_bytes_copied = static_cast<uint64_t>(moe.bytes_copied);
  s.moe_cache_hits = static_cast<uint64_t>(moe.cache_hits);
  s.moe_cache_misses = static_cast<uint64_t>(moe.cache_misses);
  s.moe_tokens = static_cast<uint64_t>(moe.tokens);
  s.moe_prefetch_experts = static_cast<uint64_t>(moe.prefetch_experts);
  s.moe_prefetch_used = static_cast<uint64_t>(moe.prefetch_used);
  s.moe_predicted_wanted = static_cast<uint64_t>(moe.predicted_wanted);
  s.moe_predicted_right = static_cast<uint64_t>(moe.predicted_right);
  const ImageStats img = image_stats();
  s.images_encoded = img.encoded;
  s.image_cache_hits = img.cache_hits;
  s.image_tokens = img.tokens;
  s.image_encode_seconds = static_cast<double>(img.encode_ns) * 1e-9;
  const double busy_s = static_cast<double>(busy_ns_) * 1e-9;
  if (busy_s > 0) {
    s.prompt_tokens_per_s = static_cast<double>(s.prompt_tokens) / busy_s;
    s.generated_tokens_per_s = static_cast<double>(s.generated_tokens) / busy_s;
  }
  std::lock_guard<std::mutex> lock(mu_);
  published_ = s;
}

void Engine::FillTierStats(llm_stats* s) const {
  s->kv_imports_refused = imports_refused_;
  if (!tiers_) return;
  const kvstate::TierCounters t = tiers_->counters();
  const uint64_t bs = static_cast<uint64_t>(config_.block_size);
  s->kv_tier_host_hit_tokens = t.host_hit_blocks * bs;
  s->kv_tier_disk_hit_tokens = t.disk_hit_blocks * bs;
  s->kv_tier_bytes_down = t.bytes_down;
  s->kv_tier_bytes_up = t.bytes_up;
  s->kv_tier_host_bytes = t.host_bytes;
  s->kv_tier_disk_bytes = t.disk_bytes;
  s->kv_tier_files_refused = t.files_refused;
  s->kv_tier_disk_on = t.disk_enabled ? 1 : 0;
}

void Engine::RunSwapOuts(const SchedulerOutput& plan) {
  int32_t n_out = 0;
  for (const Sequence* s : plan.preempted) n_out += s->swapped;
  if (n_out == 0) return;
  const Status st = backend_->SwapOutKvBlocks(plan.swap_outs);
  if (st.ok()) {
    stats_.swap_outs += static_cast<uint64_t>(n_out);
    return;
  }
  for (Sequence* s : plan.preempted) {
    if (!s->swapped) continue;
    kv_.Free(s);  // its slots; it holds no block
    s->n_computed = 0;
  }
}

// After a step: of the slots in blocks that running sequences hold, how many
// hold computed tokens? A block shared by several sequences counts once.
void Engine::MeasureKvUtilization() {
  const int32_t bs = config_.block_size;
  ++step_no_;
  int64_t allocated = 0, filled = 0;
  for (const auto& [id, r] : requests_) {
    for (const auto& s : r->seqs) {
      if (s->state != SeqState::kRunning) continue;
      for (size_t i = 0; i < s->block_table.size(); ++i) {
        const int32_t b = s->block_table[i];
        const int32_t fill = std::clamp(s->n_computed - static_cast<int32_t>(i) * bs, 0, bs);
        if (block_stamp_[b] != step_no_) {
          block_stamp_[b] = step_no_;
          block_fill_[b] = fill;
          allocated += bs;
          filled += fill;
        } else if (fill > block_fill_[b]) {
          filled += fill - block_fill_[b];
          block_fill_[b] = fill;
        }
      }
    }
  }
  if (allocated == 0) return;
  slots_allocated_ += static_cast<double>(allocated);
  slots_filled_ += static_cast<double>(filled);
  stats_.kv_utilization = slots_filled_ / slots_allocated_;
}

// ------------------------------------------------------------ one step

// schedule -> build the batch -> forward -> verify/sample -> postprocess.
void Engine::Step() {
  const auto t0 = Clock::now();
  // ---- schedule
  AskForLookahead();
  SchedulerOutput plan = scheduler_.Schedule();
  stats_.preemptions += plan.preempted.size();
  RunSwapOuts(plan);  // before anything reuses the blocks they leave
  for (Sequence* s : plan.no_room) {
    Finish(s, LLM_FINISH_LENGTH, LLM_OK, "");  // out of the scheduler; Finish still reports it
  }
  if (plan.empty()) return FailUnschedulable(plan);
  MarkScheduled(plan, t0);

  // ---- build the batch: each chunk's pending tokens, then its drafts
  spec_.Propose(plan);
  TrimDraftsToConstraints(plan);
  const Batch batch = batch_.Build(plan);

  // ---- forward
  if (Status st = RunForward(plan, batch); !st.ok()) {
    for (const ScheduledChunk& c : plan.chunks) Finish(c.seq, LLM_FINISH_ERROR, st.code(), st.message());
    return;
  }
  CommitComputed(plan);

  // ---- verify/sample, postprocess
  Postprocess();
  stats_.steps++;
  MeasureKvUtilization();
  busy_ns_ +=
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
}

// Decoding sequences that speculate ask for lookahead slots (the scheduler
// grants them when the pool has room).
void Engine::AskForLookahead() {
  for (auto& [id, r] : requests_) {
    if (r->spec.spec_mode == LLM_SPEC_OFF) continue;
    for (auto& s : r->seqs) s->spec_k = s->state == SeqState::kRunning ? WantedDrafts(*s) : 0;
  }
}

// Nothing runs and nothing can be admitted: fail the head of the queue rather
// than spin (only reachable with a pool too small for one prompt).
void Engine::FailUnschedulable(const SchedulerOutput& plan) {
  if (scheduler_.idle() || scheduler_.n_running() != 0 || !plan.no_room.empty()) return;
  for (auto& [id, r] : requests_) {
    for (auto& s : r->seqs) {
      if (s->state == SeqState::kWaiting) {
        Finish(s.get(), LLM_FINISH_ERROR, LLM_ERR_CONTEXT_OVERFLOW, "the KV pool cannot hold this sequence");
        return;
      }
    }
  }
}

// First run of a sequence: its queueing time ends, and its request leaves the
// queue depth callers see.
void Engine::MarkScheduled(const SchedulerOutput& plan, Clock::time_point now) {
  for (const ScheduledChunk& c : plan.chunks) {
    SeqGen& g = Gen(c.seq);
    if (g.scheduled) continue;
    g.scheduled = true;
    g.first_sched = now;
    RequestState* r = g.req;
    if (r->counted_queued) {
      r->counted_queued = false;
      std::lock_guard<std::mutex> lock(mu_);
      --n_queued_;
    }
  }
}

Status Engine::RunForward(const SchedulerOutput& plan, const Batch& batch) {
  Status st = backend_->SwapInKvBlocks(plan.swap_ins);
  kv_.pool().ClearPending();  // swapped-in blocks hold their K/V now (a tier may copy them)
  if (st.ok()) stats_.swap_ins += plan.swapped_in.size();
  for (size_t i = 0; st.ok() && i < plan.copies.size(); ++i) {
    st = backend_->CopyKvBlock(plan.copies[i].src, plan.copies[i].dst);
  }
  if (st.ok()) st = backend_->Forward(batch, batch_.logits());
  return st;
}

// The chunks' tokens are in the cache now; full blocks enter the prefix cache.
void Engine::CommitComputed(const SchedulerOutput& plan) {
  for (const ScheduledChunk& c : plan.chunks) {
    const int32_t in_prompt = std::max(0, std::min(c.seq->n_prompt - c.seq->n_computed, c.n_tokens));
    stats_.prompt_tokens += static_cast<uint64_t>(in_prompt);
    c.seq->n_computed += c.n_tokens;
    kv_.CommitComputed(c.seq);
  }
}

void Engine::Postprocess() {
  const int32_t n_vocab = model_->config.n_vocab;
  const std::span<const LogitRow> rows = batch_.rows();
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].use != LogitRow::kPromptLogprob) continue;
    Sequence* s = rows[i].seq;
    Gen(s).prompt_logprobs.push_back(TokenLogprob(batch_.row(i), n_vocab, s->tokens[rows[i].pos + 1]));
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].use != LogitRow::kSample) continue;
    Sequence* s = rows[i].seq;
    const float* row = batch_.row(i);
    if (s->seq_index == 0 && !Gen(s).req->forked) ForkChildren(s, row);
    if (!s->drafts.empty()) {
      VerifyDrafts(s, row);  // its draft rows follow `row`
    } else {
      SampleNext(s, row);
    }
  }
}

}  // namespace llm
