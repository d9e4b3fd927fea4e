#include "engine.h"

namespace server {

// user_data of one llm request.
struct Engine::Hook {
  Engine* engine;
  std::shared_ptr<Job> job;
  int choice_base;        // prompt index * n
  int finals_left;        // n, counted down by FINAL events
  llm_request_id id = 0;  // set after llm_submit (under Engine::mu_)
};

bool Job::Wait(std::vector<SeqEvent>* out, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return !pending_.empty(); });
  if (pending_.empty()) return false;
  for (SeqEvent& e : pending_) out->push_back(std::move(e));
  pending_.clear();
  return true;
}

bool Job::finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finals_left_ == 0;
}

std::vector<llm_token> Job::Tokens(int choice) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (choice < 0 || static_cast<size_t>(choice) >= tokens_.size()) return {};
  return tokens_[static_cast<size_t>(choice)];
}

bool Job::Cancel(llm_ctx* ctx) {
  std::vector<llm_request_id> ids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finals_left_ == 0) return false;
    ids = ids_;
  }
  for (llm_request_id id : ids) llm_cancel(ctx, id);  // NOT_FOUND: it finished meanwhile
  return true;
}

Engine::Engine(llm_ctx* ctx) : ctx_(ctx) { poller_ = std::thread([this] { PollLoop(); }); }

Engine::~Engine() { Shutdown(); }

int Engine::live_requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(hooks_.size());
}

void Engine::OnEvent(const llm_event* ev, void* user_data) {
  auto* hook = static_cast<Hook*>(user_data);
  SeqEvent e;
  e.choice = hook->choice_base + ev->seq_index;
  e.final = ev->type == LLM_EVENT_FINAL;
  e.token = ev->token;
  e.text.assign(ev->text, ev->text_len);
  if (ev->reasoning_text != nullptr) e.reasoning.assign(ev->reasoning_text, ev->reasoning_text_len);
  e.logprob = ev->logprob;
  if (ev->top_logprobs != nullptr) e.top.assign(ev->top_logprobs, ev->top_logprobs + ev->n_top_logprobs);
  if (e.final) {
    e.finish_reason = ev->finish_reason;
    e.status = ev->status;
    e.message = ev->message;
    e.metrics = ev->metrics;
    if (ev->kv_transfer_desc != nullptr) e.kv_transfer_desc = ev->kv_transfer_desc;
    e.transferred_tokens = ev->transferred_prompt_tokens;
  }
  Job& job = *hook->job;
  {
    std::lock_guard<std::mutex> lock(job.mu_);
    if (ev->type == LLM_EVENT_TOKEN && ev->token >= 0 && static_cast<size_t>(e.choice) < job.tokens_.size())
      job.tokens_[static_cast<size_t>(e.choice)].push_back(ev->token);
    job.pending_.push_back(std::move(e));
    if (ev->type == LLM_EVENT_FINAL) --job.finals_left_;
  }
  job.cv_.notify_all();
  if (ev->type == LLM_EVENT_FINAL && --hook->finals_left == 0) {
    Engine* engine = hook->engine;
    {
      std::lock_guard<std::mutex> lock(engine->mu_);
      engine->hooks_.erase(hook);
    }
    engine->drained_.notify_all();
    delete hook;
  }
}

void Engine::PollLoop() {
  while (!stop_poller_.load()) {
    uint32_t n = 0;
    llm_poll(ctx_, nullptr, 0, &n, 200);  // every request has a callback
  }
}

llm_status Engine::Submit(std::vector<llm_request>& reqs, int n, std::shared_ptr<Job>* out_job,
                          std::string* message) {
  auto job = std::make_shared<Job>();
  job->finals_left_ = static_cast<int>(reqs.size()) * n;
  job->tokens_.resize(reqs.size() * static_cast<size_t>(n));
  // The lock spans the shutdown check and the submissions, so BeginShutdown
  // sees (and cancels) every request that got in.
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_.load()) {
    *message = "the server is shutting down";
    return LLM_ERR_SHUTDOWN;
  }
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto* hook = new Hook{this, job, static_cast<int>(i) * n, n};
    reqs[i].callback = &Engine::OnEvent;
    reqs[i].user_data = hook;
    reqs[i].n = n;
    // Registered before llm_submit: its FINAL event may be polled before
    // llm_submit returns, and OnEvent then waits for mu_ to unregister it.
    hooks_.insert(hook);
    llm_request_id id = 0;
    llm_status s = llm_submit(ctx_, &reqs[i], &id);
    if (s != LLM_OK) {
      *message = llm_last_error();
      hooks_.erase(hook);
      delete hook;  // a rejected request produces no events
      for (llm_request_id done : job->ids_) llm_cancel(ctx_, done);
      return s;
    }
    hook->id = id;
    std::lock_guard<std::mutex> job_lock(job->mu_);
    job->ids_.push_back(id);
  }
  *out_job = std::move(job);
  return LLM_OK;
}

void Engine::BeginShutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  stopping_.store(true);
  for (Hook* h : hooks_) llm_cancel(ctx_, h->id);
}

void Engine::Shutdown() {
  if (ctx_ == nullptr) return;
  BeginShutdown();
  {
    std::unique_lock<std::mutex> lock(mu_);
    drained_.wait_for(lock, std::chrono::seconds(10), [&] { return hooks_.empty(); });
  }
  stop_poller_.store(true);
  llm_wakeup(ctx_);
  poller_.join();
  llm_ctx_destroy(ctx_);  // no callback runs after this
  ctx_ = nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  for (Hook* h : hooks_) delete h;
  hooks_.clear();
}

}  // namespace server
