/*
 * llm.hpp — header-only C++17 RAII wrappers over llm.h.
 *
 * Nothing here crosses the ABI: it is inline code over the C functions, so it
 * works with any library of the same major version. Failures throw
 * llm::Error (status + llm_last_error()); destructors never throw.
 *
 *   llm::Context ctx;                                  // built-in model
 *   llm::Request req("Once upon a time");
 *   req.max_tokens = 100;
 *   llm::generate(ctx, req, [](std::string_view piece) { std::cout << piece; });
 *
 * Threading is the C API's: a Context may be shared; poll() from one thread
 * at a time per request set (see llm.h), destroy only when no other call runs.
 */
#ifndef LLM_HPP
#define LLM_HPP

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "llm.h"

namespace llm {

/* A failed call: the status and the library's message. */
class Error : public std::runtime_error {
 public:
  Error(llm_status status, const std::string& message)
      : std::runtime_error(std::string(llm_status_str(status)) + (message.empty() ? "" : ": " + message)),
        status_(status) {}
  llm_status status() const noexcept { return status_; }

 private:
  llm_status status_;
};

/* Throws llm::Error for a failed status, with this thread's last message. */
inline void check(llm_status status) {
  if (status != LLM_OK) throw Error(status, llm_last_error());
}

/* Sampling parameters with the library's defaults. */
struct Sampling : llm_sampling_params {
  Sampling() { llm_sampling_params_init(this); }
  static Sampling greedy() {
    Sampling s;
    s.temperature = 0.0f;
    return s;
  }
};

/* A request with the library's defaults. The strings it points to must stay
 * alive until submit returns (the library copies them). */
struct Request : llm_request {
  Request() { llm_request_init(this); }
  explicit Request(const char* text) : Request() { prompt = text; }
};

/* One event as returned by poll: views into library memory, valid until the
 * next poll on the context. */
struct Event {
  const llm_event* raw;
  bool is_final() const noexcept { return raw->type == LLM_EVENT_FINAL; }
  llm_request_id request_id() const noexcept { return raw->request_id; }
  std::string_view text() const noexcept { return {raw->text, raw->text_len}; }
  llm_token token() const noexcept { return raw->token; }
  int32_t finish_reason() const noexcept { return raw->finish_reason; }
  const llm_metrics& metrics() const noexcept { return raw->metrics; }
};

/* Owns an llm_ctx. Move-only. */
class Context {
 public:
  /* The built-in model with default parameters. */
  Context() : Context(nullptr) {}

  /* params: NULL for all defaults. */
  explicit Context(const llm_ctx_params* params) { check(llm_ctx_create(params, &ctx_)); }

  /* Loads a GGUF file with otherwise default parameters. */
  static Context from_file(const std::string& path) {
    llm_ctx_params p;
    llm_ctx_params_init(&p);
    p.model_path = path.c_str();
    return Context(&p);
  }

  Context(Context&& o) noexcept : ctx_(std::exchange(o.ctx_, nullptr)), events_(std::move(o.events_)) {}
  Context& operator=(Context&& o) noexcept {
    if (this != &o) {
      llm_ctx_destroy(ctx_);
      ctx_ = std::exchange(o.ctx_, nullptr);
      events_ = std::move(o.events_);
    }
    return *this;
  }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context() { llm_ctx_destroy(ctx_); }

  llm_ctx* get() const noexcept { return ctx_; }

  llm_request_id submit(const llm_request& request) {
    llm_request_id id = 0;
    check(llm_submit(ctx_, &request, &id));
    return id;
  }

  /* Stops a request; an already finished one is not an error. */
  void cancel(llm_request_id id) {
    llm_status st = llm_cancel(ctx_, id);
    if (st != LLM_ERR_NOT_FOUND) check(st);
  }

  void wakeup() { check(llm_wakeup(ctx_)); }

  /* Drains events (waiting up to timeout_ms) and calls f(llm::Event) for
   * each one that has no callback of its own. Returns how many it saw. */
  template <class F>
  uint32_t poll(F&& f, int32_t timeout_ms = -1) {
    if (events_.empty()) events_.resize(64);
    events_[0].struct_size = sizeof(llm_event);
    uint32_t n = 0;
    check(llm_poll(ctx_, events_.data(), static_cast<uint32_t>(events_.size()), &n, timeout_ms));
    for (uint32_t i = 0; i < n; ++i) f(Event{&events_[i]});
    return n;
  }

  std::vector<llm_token> tokenize(std::string_view text, uint32_t flags = LLM_TOKENIZE_ADD_SPECIAL) const {
    std::vector<llm_token> out(text.size() + 8);
    int32_t n = 0;
    llm_status st = llm_tokenize(ctx_, text.data(), text.size(), flags, out.data(), static_cast<int32_t>(out.size()), &n);
    if (st == LLM_ERR_BUFFER_TOO_SMALL) {
      out.resize(static_cast<size_t>(n));
      st = llm_tokenize(ctx_, text.data(), text.size(), flags, out.data(), n, &n);
    }
    check(st);
    out.resize(static_cast<size_t>(n));
    return out;
  }

  std::string detokenize(const std::vector<llm_token>& tokens, uint32_t flags = 0) const {
    std::string out(tokens.size() * 8 + 16, '\0');
    size_t n = 0;
    llm_status st = llm_detokenize(ctx_, tokens.data(), static_cast<int32_t>(tokens.size()), flags, out.data(), out.size(), &n);
    if (st == LLM_ERR_BUFFER_TOO_SMALL) {
      out.resize(n);
      st = llm_detokenize(ctx_, tokens.data(), static_cast<int32_t>(tokens.size()), flags, out.data(), out.size(), &n);
    }
    check(st);
    out.resize(n);
    return out;
  }

  llm_model_info model_info() const {
    llm_model_info info{};
    info.struct_size = sizeof info;
    check(llm_model_get_info(ctx_, &info));
    return info;
  }

 private:
  llm_ctx* ctx_ = nullptr;
  std::vector<llm_event> events_;
};

/* What generate() returns for the request's first sequence. */
struct Result {
  std::string text;
  std::vector<llm_token> tokens;
  int32_t finish_reason = LLM_FINISH_NONE;
  llm_metrics metrics{};
};

/* Submits `request` (which must have no callback) and polls until its
 * sequences are final, calling on_text(std::string_view) with each piece of
 * sequence 0. Meant for a thread that owns the polling of `ctx`: events of
 * other requests seen meanwhile are dropped. Throws llm::Error if the
 * engine failed the request. */
template <class F>
Result generate(Context& ctx, const llm_request& request, F&& on_text) {
  llm_request_id id = ctx.submit(request);
  int32_t finals_left = request.n > 0 ? request.n : 1;
  Result r;
  llm_status failed = LLM_OK;
  std::string message;
  while (finals_left > 0) {
    ctx.poll([&](const Event& ev) {
      if (ev.request_id() != id) return;
      if (ev.raw->seq_index == 0) {
        if (!ev.text().empty()) on_text(ev.text());
        r.text.append(ev.text());
        if (!ev.is_final()) r.tokens.push_back(ev.token());
      }
      if (!ev.is_final()) return;
      --finals_left;
      if (ev.raw->seq_index == 0) {
        r.finish_reason = ev.finish_reason();
        r.metrics = ev.metrics();
      }
      if (ev.finish_reason() == LLM_FINISH_ERROR && failed == LLM_OK) {
        failed = ev.raw->status;
        message = ev.raw->message;
      }
    });
  }
  if (failed != LLM_OK) throw Error(failed, message);
  return r;
}

inline Result generate(Context& ctx, const llm_request& request) {
  return generate(ctx, request, [](std::string_view) {});
}

}  // namespace llm

#endif /* LLM_HPP */
