// Embedding requests in the engine (LLM_TASK_EMBED): checked at Submit,
// queued by Admit (no Sequence: nothing for the scheduler or the KV pool),
// run by RunEmbeddings once per loop iteration before the generation step.
//
//   embed_queue_: [ r1 r2 r3 r4 ... ]   priority, then arrival
//                   \_______/  one Backend::Encode call: whole prompts
//                   <= max_batch_tokens tokens (always at least one request)
//
// Each request's output is pooled by the backend, then truncated to its
// `dimensions` and L2-normalised here (FinishRows), and delivered as its
// final event (or into llm_embed's sink).
#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "backend/pooling.h"
#include "engine/engine.h"

namespace llm {
namespace {

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

const char* PoolingName(Pooling p) {
  switch (p) {
    case Pooling::kNone: return "none";
    case Pooling::kMean: return "mean";
    case Pooling::kCls: return "cls";
    case Pooling::kLast: return "last";
    case Pooling::kRank: return "rank";
  }
  return "?";
}

}  // namespace

Status Engine::CheckEmbed(const RequestSpec& spec) const {
  const ModelConfig& c = model_->config;
  if (!c.MakesEmbeddings())
    return Unsupported("the model '" + c.arch + "' does not make embeddings (it is not an embedding model)");
  const int64_t n = static_cast<int64_t>(spec.prompt.size());
  if (n > config_.n_ctx)
    return Status(LLM_ERR_CONTEXT_OVERFLOW, "the input (" + std::to_string(n) + " tokens) is longer than the context of " +
                                                std::to_string(config_.n_ctx) + " tokens (set truncate to cut it)");
  const int64_t size = PooledSize(c, spec.pooling, n);
  if (size <= 0)
    return Unsupported(std::string("pooling '") + PoolingName(spec.pooling) + "' needs a classifier head, which the model '" +
                       c.arch + "' lacks");
  if (spec.dimensions < 0 || (spec.dimensions > 0 && spec.pooling == Pooling::kRank))
    return InvalidArgument("dimensions " + std::to_string(spec.dimensions) + " does not apply to rank pooling");
  const int64_t row = spec.pooling == Pooling::kNone ? c.n_embd : size;
  if (spec.dimensions > row)
    return InvalidArgument("dimensions " + std::to_string(spec.dimensions) + " is larger than the model's " +
                           std::to_string(row) + " values per vector");
  if (!c.is_encoder && kv_.pool().BlocksFor(n) > kv_.pool().n_blocks())
    return Status(LLM_ERR_CONTEXT_OVERFLOW, "the input (" + std::to_string(n) + " tokens) needs more KV blocks than the pool's " +
                                                std::to_string(kv_.pool().n_blocks()));
  if (spec.sink != nullptr && spec.pooling == Pooling::kNone)
    return InvalidArgument("a blocking embed cannot use pooling none (one vector per token)");
  return Status::Ok();
}

int32_t Engine::EmbedRowSize(const RequestSpec& spec) const {
  if (spec.dimensions > 0) return spec.dimensions;
  return static_cast<int32_t>(PooledSize(model_->config, spec.pooling == Pooling::kNone ? Pooling::kMean : spec.pooling, 1));
}

void Engine::RunEmbeddings() {
  std::stable_sort(embed_queue_.begin(), embed_queue_.end(),
                   [](const RequestState* a, const RequestState* b) { return a->spec.priority > b->spec.priority; });
  // ---- take whole requests up to the step's token budget (a decoder's
  // also up to the KV blocks free now: they wait for generation to free some)
  const ModelConfig& c = model_->config;
  BlockPool& blocks = kv_.pool();
  std::vector<RequestState*> run;
  int64_t tokens = 0;
  int32_t n_blocks = 0;
  size_t taken = 0;
  for (; taken < embed_queue_.size(); ++taken) {
    RequestState* r = embed_queue_[taken];
    const int64_t n = static_cast<int64_t>(r->spec.prompt.size());
    const int32_t need = c.is_encoder ? 0 : blocks.BlocksFor(n);
    if (!run.empty() && (tokens + n > config_.max_batch_tokens || static_cast<int32_t>(run.size()) >= config_.max_seqs))
      break;
    if (!blocks.CanAllocate(n_blocks + need)) break;
    run.push_back(r);
    tokens += n;
    n_blocks += need;
  }
  if (run.empty()) return;  // a decoder's first request waits for blocks
  embed_queue_.erase(embed_queue_.begin(), embed_queue_.begin() + static_cast<std::ptrdiff_t>(taken));
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (RequestState* r : run) {
      if (r->counted_queued) {
        r->counted_queued = false;
        --n_queued_;
      }
    }
  }

  // ---- one encoder call                       outs[i]: PooledSize floats
  std::vector<std::vector<float>> outs(run.size());
  std::vector<EncodeSeq> seqs(run.size());
  std::vector<std::vector<int32_t>> tables(run.size());  // a decoder's KV blocks, freed after the call
  for (size_t i = 0; i < run.size(); ++i) {
    const RequestSpec& s = run[i]->spec;
    outs[i].resize(static_cast<size_t>(PooledSize(c, s.pooling, static_cast<int64_t>(s.prompt.size()))));
    seqs[i].tokens = s.prompt;
    seqs[i].pooling = s.pooling;
    seqs[i].out = outs[i].data();
    if (!c.is_encoder && blocks.EnsureCapacity(&tables[i], static_cast<int64_t>(s.prompt.size())))
      seqs[i].block_table = tables[i];  // counted above, so never short; if it were, Encode refuses the empty table
  }
  const auto t0 = Clock::now();
  const Status st = backend_->Encode(seqs);
  for (std::vector<int32_t>& t : tables) blocks.ReleaseAll(&t);
  busy_ns_ += static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
  stats_.prompt_tokens += static_cast<uint64_t>(tokens);

  // ---- finish each: truncate, normalise, deliver
  for (size_t i = 0; i < run.size(); ++i) {
    RequestState* r = run[i];
    if (!st.ok()) {
      FinishEmbed(r, LLM_FINISH_ERROR, st.code(), st.message(), {}, 0, 0);
      continue;
    }
    const RequestSpec& s = r->spec;
    const int32_t rows = s.pooling == Pooling::kNone ? static_cast<int32_t>(s.prompt.size()) : 1;
    const int32_t dim = static_cast<int32_t>(outs[i].size()) / rows;
    const int32_t keep = s.dimensions > 0 ? s.dimensions : dim;
    FinishRows(outs[i].data(), rows, dim, keep, s.normalize && s.pooling != Pooling::kRank, outs[i].data());
    outs[i].resize(static_cast<size_t>(rows) * keep);
    FinishEmbed(r, LLM_FINISH_STOP, LLM_OK, "", std::move(outs[i]), keep, rows);
  }
}

void Engine::FinishEmbed(RequestState* r, int32_t reason, llm_status status, const std::string& message,
                         std::vector<float> vec, int32_t dim, int32_t rows) {
  const auto now = Clock::now();
  if (r->spec.sink != nullptr) {
    r->spec.sink->Deliver(r->spec.sink_index, reason == LLM_FINISH_CANCELLED ? LLM_ERR_SHUTDOWN : status,
                          reason == LLM_FINISH_CANCELLED ? "the embedding was cancelled" : message, vec.data(),
                          static_cast<int64_t>(vec.size()));
  } else {
    EventRecord ev;
    ev.type = LLM_EVENT_FINAL;
    ev.request_id = r->id;
    ev.finish_reason = reason;
    ev.status = status;
    ev.message = message;
    ev.metrics.prompt_tokens = static_cast<int32_t>(r->spec.prompt.size());
    ev.metrics.queue_ms = Ms(now - r->submit_time);
    ev.metrics.total_ms = ev.metrics.queue_ms;
    if (status == LLM_OK && dim > 0) {
      ev.embedding = std::move(vec);
      ev.embedding_dim = dim;
      ev.embedding_rows = rows;
    }
    ev.callback = r->spec.callback;
    ev.user_data = r->spec.user_data;
    pending_events_.push_back(std::move(ev));
  }
  const uint64_t id = r->id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    live_.erase(id);
    if (r->counted_queued) --n_queued_;
  }
  stats_.requests_finished++;
  requests_.erase(id);  // destroys r
}

}  // namespace llm
