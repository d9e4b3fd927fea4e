#include "routes.h"

#include <httplib.h>

#include <chrono>
#include <functional>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "client_socket.h"
#include "http_body.h"
#include "kv_transfer_params.h"
#include "metrics.h"
#include "messages_api.h"
#include "native_completion.h"
#include "responses_api.h"
#include "openai_request.h"
#include "openai_response.h"
#include "prompt_render.h"
#include "request_limits.h"

namespace server {
namespace {

using std::chrono::milliseconds;

// What a streaming response needs beyond the handler's return: the content
// provider and its releaser run later, on the same worker thread.
struct StreamState {
  std::shared_ptr<Job> job;
  std::unique_ptr<ResponseWriter> builder;
  bool started = false;
  bool ended = false;
  std::function<void()> on_end;  // once the whole answer is there (a slot's record)
};

json StatsJson(llm_ctx* ctx, const Engine& engine) {
  llm_stats s{};
  s.struct_size = sizeof s;
  if (llm_get_stats(ctx, &s) != LLM_OK) return json::object();
  return json{
      {"backend", s.backend == LLM_BACKEND_CUDA ? "cuda" : "cpu"},
      {"requests_submitted", s.requests_submitted},
      {"requests_finished", s.requests_finished},
      {"prompt_tokens", s.prompt_tokens},
      {"generated_tokens", s.generated_tokens},
      {"steps", s.steps},
      {"queue_depth", s.queue_depth},
      {"running", s.running},
      {"waiting", s.waiting},
      {"kv_blocks_total", s.kv_blocks_total},
      {"kv_blocks_used", s.kv_blocks_used},
      {"kv_blocks_free", s.kv_blocks_free},
      {"kv_blocks_cached", s.kv_blocks_cached},
      {"kv_utilization", s.kv_utilization},
      {"prefix_cache_queried_tokens", s.prefix_cache_queried_tokens},
      {"prefix_cache_hit_tokens", s.prefix_cache_hit_tokens},
      {"preemptions", s.preemptions},
      {"kv_tier_host_hit_tokens", s.kv_tier_host_hit_tokens},
      {"kv_tier_disk_hit_tokens", s.kv_tier_disk_hit_tokens},
      {"kv_tier_bytes_down", s.kv_tier_bytes_down},
      {"kv_tier_bytes_up", s.kv_tier_bytes_up},
      {"kv_tier_host_bytes", s.kv_tier_host_bytes},
      {"kv_tier_disk_bytes", s.kv_tier_disk_bytes},
      {"kv_tier_disk_on", s.kv_tier_disk_on},
      {"kv_imports_refused", s.kv_imports_refused},
      {"draft_tokens_proposed", s.draft_tokens_proposed},
      {"draft_tokens_accepted", s.draft_tokens_accepted},
      {"images_encoded", s.images_encoded},
      {"image_cache_hits", s.image_cache_hits},
      {"image_tokens", s.image_tokens},
      {"image_encode_seconds", s.image_encode_seconds},
      {"uptime_s", s.uptime_s},
      {"prompt_tokens_per_s", s.prompt_tokens_per_s},
      {"generated_tokens_per_s", s.generated_tokens_per_s},
      {"server",
       {{"http_requests", engine.http_requests.load()},
        {"active_streams", engine.active_streams.load()},
        {"live_requests", engine.live_requests()},
        {"cancelled_on_disconnect", engine.cancelled_on_disconnect.load()}}},
  };
}

// For a request without max_tokens: tokenizes `in` (unless it is token ids
// already) and sets *max_tokens to what the context leaves after it. A prompt
// that alone fills the context is the caller's mistake: 400.
bool FitToContext(llm_ctx* ctx, int32_t n_ctx, PromptInput* in, int32_t* max_tokens, ApiError* err) {
  if (!in->is_tokens) {
    std::vector<llm_token> ids(in->text.size() + 8);  // a token is at least one byte (+ BOS/EOS)
    int32_t n = 0;
    llm_status s = llm_tokenize(ctx, in->text.data(), in->text.size(), in->flags, ids.data(),
                                static_cast<int32_t>(ids.size()), &n);
    if (s == LLM_ERR_BUFFER_TOO_SMALL) {
      ids.resize(static_cast<size_t>(n));
      s = llm_tokenize(ctx, in->text.data(), in->text.size(), in->flags, ids.data(), n, &n);
    }
    if (s != LLM_OK) {
      *err = StatusError(s, llm_last_error());
      return false;
    }
    ids.resize(static_cast<size_t>(n));
    if (ids.empty()) {
      *err = StatusError(LLM_ERR_INVALID_ARGUMENT, "the prompt is empty (no tokens)");
      return false;
    }
    in->tokens = std::move(ids);
    in->is_tokens = true;
  }
  const int64_t n_prompt = static_cast<int64_t>(in->tokens.size());
  if (n_prompt >= n_ctx) {
    *err = StatusError(LLM_ERR_CONTEXT_OVERFLOW,
                       "the prompt (" + std::to_string(n_prompt) + " tokens) fills the context of " +
                           std::to_string(n_ctx) + " tokens and leaves no room for a reply");
    return false;
  }
  // The last generated token is never fed back, so n_prompt + max_tokens - 1
  // positions must fit: the engine stops with "length" at the context's end.
  *max_tokens = static_cast<int32_t>(n_ctx - n_prompt + 1);
  return true;
}

}  // namespace

void InstallAccessCheck(httplib::Server* svr, AccessPolicy policy) {
  // The answers to allowed origins carry the CORS headers (streams too: the
  // post-routing handler runs before a content provider writes anything).
  svr->set_post_routing_handler([policy](const httplib::Request& req, httplib::Response& res) {
    if (req.method == "OPTIONS" || !req.has_header("Origin")) return;
    for (const auto& [name, value] : CorsHeaders(policy, req.get_header_value("Origin"), false))
      res.set_header(name, value);
  });
  svr->set_pre_routing_handler([policy = std::move(policy)](const httplib::Request& req, httplib::Response& res) {
    const AccessDecision d =
        CheckAccess(policy, req.method, req.path, req.get_header_value("Host"), req.get_header_value("Origin"),
                    req.get_header_value("Authorization"), req.get_header_value("x-api-key"));
    if (d.http_status == 0 && req.method == "OPTIONS") {  // a CORS preflight, on any path
      for (const auto& [name, value] : CorsHeaders(policy, req.get_header_value("Origin"), true))
        res.set_header(name, value);
      res.status = 200;
      return httplib::Server::HandlerResponse::Handled;
    }
    if (d.http_status == 0) return httplib::Server::HandlerResponse::Unhandled;
    ApiError e;
    e.http_status = d.http_status;
    e.message = d.message;
    e.type = d.http_status == 401 ? "authentication_error" : "permission_error";
    e.code = d.http_status == 401 ? "invalid_api_key" : "host_not_allowed";
    if (d.http_status == 401) res.set_header("WWW-Authenticate", "Bearer");
    res.set_header("Connection", "close");  // the body, if any, is not read
    SendError(res, e);
    return httplib::Server::HandlerResponse::Handled;
  });
}

Routes::Routes(Engine* engine, const chat::Prompter* prompter, std::string model_name, bool log)
    : engine_(engine),
      prompter_(prompter),
      model_name_(std::move(model_name)),
      created_(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                   .count()),
      log_(log) {
  llm_model_info info{};
  info.struct_size = sizeof info;
  if (llm_model_get_info(engine_->ctx(), &info) == LLM_OK) n_ctx_ = info.n_ctx;
}

std::string Routes::TokenText(llm_token token) const {
  char buf[256];
  size_t n = 0;
  if (llm_detokenize(engine_->ctx(), &token, 1, 0, buf, sizeof buf, &n) != LLM_OK) return "";
  return std::string(buf, n);
}

bool Routes::TokenizeText(const std::string& text, bool add_special, std::vector<llm_token>* out) const {
  const uint32_t flags = add_special ? uint32_t{LLM_TOKENIZE_ADD_SPECIAL} : 0u;
  std::vector<llm_token> ids(text.size() + 8);  // a token is at least one byte (+ BOS/EOS)
  int32_t n = 0;
  if (llm_tokenize(engine_->ctx(), text.data(), text.size(), flags, ids.data(), static_cast<int32_t>(ids.size()), &n) !=
      LLM_OK)
    return false;
  out->insert(out->end(), ids.begin(), ids.begin() + n);
  return true;
}

bool Routes::TakeSlot(Generation* g, int32_t slot, ApiError* err) const {
  if (slots_ == nullptr) return true;  // no slot files: id_slot is only echoed
  if (slot >= total_slots_) {
    err->param = "id_slot";
    err->message = "id_slot must be from 0 to " + std::to_string(total_slots_ - 1) + " (--max-seqs)";
    return false;
  }
  if (g->prompts.size() != 1 || g->n != 1) {
    err->param = "id_slot";
    err->message = "a request with id_slot has one prompt and one sequence";
    return false;
  }
  // The conversation is recorded as ids: the prompt is tokenized here.
  PromptInput& in = g->prompts[0];
  if (!in.is_tokens) {
    std::vector<llm_token> ids(in.text.size() + 8);  // a token is at least one byte (+ BOS/EOS)
    int32_t n = 0;
    if (llm_status s = llm_tokenize(engine_->ctx(), in.text.data(), in.text.size(), in.flags, ids.data(),
                                    static_cast<int32_t>(ids.size()), &n);
        s != LLM_OK) {
      *err = StatusError(s, llm_last_error());
      err->param = "prompt";
      return false;
    }
    ids.resize(static_cast<size_t>(n));
    in.tokens = std::move(ids);
    in.is_tokens = true;
  }
  return true;
}

int32_t Routes::PromptTokenCount(const PromptInput& in) const {
  if (in.is_tokens) return static_cast<int32_t>(in.tokens.size());
  std::vector<llm_token> ids(in.text.size() + 8);  // a token is at least one byte (+ BOS/EOS)
  int32_t n = 0;
  if (llm_tokenize(engine_->ctx(), in.text.data(), in.text.size(), in.flags, ids.data(),
                   static_cast<int32_t>(ids.size()), &n) != LLM_OK)
    return 0;
  return n;
}

std::string Routes::PromptText(const PromptInput& in) const {
  std::vector<llm_token> ids = in.tokens;
  if (!in.is_tokens) {
    ids.resize(in.text.size() + 8);
    int32_t n = 0;
    if (llm_tokenize(engine_->ctx(), in.text.data(), in.text.size(), in.flags, ids.data(),
                     static_cast<int32_t>(ids.size()), &n) != LLM_OK)
      return in.text;
    ids.resize(static_cast<size_t>(n));
  }
  std::string out(ids.size() * 8 + 16, '\0');
  size_t n = 0;
  llm_status s = llm_detokenize(engine_->ctx(), ids.data(), static_cast<int32_t>(ids.size()),
                                LLM_DETOKENIZE_RENDER_SPECIAL, out.data(), out.size(), &n);
  if (s == LLM_ERR_BUFFER_TOO_SMALL) {
    out.resize(n);
    s = llm_detokenize(engine_->ctx(), ids.data(), static_cast<int32_t>(ids.size()), LLM_DETOKENIZE_RENDER_SPECIAL,
                       out.data(), out.size(), &n);
  }
  if (s != LLM_OK) return in.text;
  out.resize(n);
  return out;
}

void Routes::Generate(const httplib::Request& req, const httplib::ContentReader& reader, httplib::Response& res,
                      Api api) {
  const bool chat = api != Api::kCompletion && api != Api::kNative;
  ++engine_->http_requests;
  ApiError err;
  IdleTrim::Scope trim(&idle_trim_);
  json body;
  size_t body_bytes = 0;
  const bool read = ReadJsonBody(req, reader, res, &body, &body_bytes);
  trim.set_body_bytes(body_bytes);
  if (!read) return;
  Generation g;
  g.allow_remote_images = image_fetch_.enabled;
  NativeOptions native;
  try {
    bool ok = false;
    if (api == Api::kNative) {
      auto tokenize = [this](const std::string& text, bool add_special, std::vector<llm_token>* out) {
        return TokenizeText(text, add_special, out);
      };
      ok = ParseNativeCompletion(body, defaults_, tokenize, &g, &native, &err);
      for (size_t i = 0; ok && i < g.prompts.size(); ++i) native.prompt_texts.push_back(PromptText(g.prompts[i]));
    } else if (api == Api::kResponses || api == Api::kMessages) {
      // A chat completion underneath (chat_adapter.h).
      json as_chat;
      ok = (api == Api::kResponses ? ResponsesToChat(body, &as_chat, &err) : MessagesToChat(body, &as_chat, &err)) &&
           ParseChatRequest(as_chat, &g, &err);
      // Disaggregation (kv_transfer_params.h) is the request's own field.
      if (ok) ok = ParseKvTransferParams(body, &g, &err);
      if (ok) ApplyRequestDefaults(as_chat, defaults_, &g);
    } else {
      ok = chat ? ParseChatRequest(body, &g, &err) : ParseCompletionRequest(body, &g, &err);
      if (ok) ok = ParseKvTransferParams(body, &g, &err);
      if (ok) ApplyRequestDefaults(body, defaults_, &g);
    }
    if (ok && native.id_slot >= 0) ok = TakeSlot(&g, native.id_slot, &err);
    if (!ok) return SendError(res, err);
    // http(s) image URLs, fetched here on this request's HTTP worker (the
    // engine and the other requests go on), each a 400 when it fails.
    for (const Generation::RemoteImage& r : g.remote_images) {
      std::string problem;
      if (!FetchImage(r.url, image_fetch_, &g.images[r.index], &problem)) {
        Bad(&err, r.where, r.where + ": " + problem);
        return SendError(res, err);
      }
    }
  } catch (const json::exception& e) {
    // A field of a type the parser did not expect, missed by its checks:
    // still the request's fault, not the server's.
    err = ApiError();
    err.message = std::string("the request has a field of the wrong type (") + e.what() + ")";
    return SendError(res, err);
  }

  g.sampling.logit_bias = g.logit_bias.empty() ? nullptr : g.logit_bias.data();
  g.sampling.n_logit_bias = static_cast<int32_t>(g.logit_bias.size());
  std::vector<const char*> stops;
  for (const std::string& s : g.stop) stops.push_back(s.c_str());
  if (chat) {
    if (!RenderChatPrompt(*prompter_, &g, &err)) return SendError(res, err);
    for (const char* s : prompter_->stops()) stops.push_back(s);
  }

  std::vector<const char*> choices;
  for (const std::string& c : g.choices) choices.push_back(c.c_str());
  // A chat with pictures: the rendered text (its image markers) and the
  // pictures, in order, as llm_request.parts (llm.h).
  std::vector<llm_content_part> parts;
  if (!g.images.empty()) {
    llm_content_part text;
    llm_content_part_init(&text);
    text.text = g.prompts[0].text.c_str();
    parts.push_back(text);
    for (const std::string& bytes : g.images) {
      llm_content_part img;
      llm_content_part_init(&img);
      img.kind = LLM_CONTENT_IMAGE;
      img.data = bytes.data();
      img.n_data = bytes.size();
      parts.push_back(img);
    }
  }
  std::vector<llm_request> reqs(g.prompts.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    llm_request& r = reqs[i];
    llm_request_init(&r);
    const PromptInput& in = g.prompts[i];
    if (in.is_tokens) {
      r.prompt_tokens = in.tokens.data();
      r.n_prompt_tokens = static_cast<int32_t>(in.tokens.size());
    } else {
      r.prompt = in.text.c_str();
      r.tokenize_flags = in.flags;
    }
    r.max_tokens = g.max_tokens;
    if (g.max_tokens == 0) {
      // No max_tokens: until EOS or the end of the context (as OpenAI's and
      // llama.cpp's servers do). Only the prompt's length says how much
      // room that is, so it is tokenized here and submitted as those ids.
      if (!FitToContext(engine_->ctx(), n_ctx_, &g.prompts[i], &r.max_tokens, &err)) {
        err.param = chat ? "messages" : "prompt";
        return SendError(res, err);
      }
      r.prompt = nullptr;
      r.prompt_tokens = in.tokens.data();
      r.n_prompt_tokens = static_cast<int32_t>(in.tokens.size());
    }
    if (!parts.empty()) {
      // The library decodes and checks the pictures; without max_tokens
      // the room left is not known before their soft tokens are counted:
      // the context's length bounds it.
      r.prompt = nullptr;
      r.prompt_tokens = nullptr;
      r.n_prompt_tokens = 0;
      r.parts = parts.data();
      r.n_parts = static_cast<int32_t>(parts.size());
      r.tokenize_flags = in.flags;
    }
    r.sampling = &g.sampling;
    r.stop = stops.empty() ? nullptr : stops.data();
    r.n_stop = static_cast<int32_t>(stops.size());
    r.ignore_eos = g.ignore_eos ? 1 : 0;
    r.reasoning_format = g.chat && g.reasoning_format > 0 ? g.reasoning_format : LLM_REASONING_NONE;
    r.keep_kv = g.keep_kv || (native.id_slot >= 0 && slots_ != nullptr) ? 1 : 0;  // a slot's conversation stays for its save
    r.kv_produce = g.kv_produce ? 1 : 0;
    r.kv_transfer_desc = g.kv_transfer_desc.empty() ? nullptr : g.kv_transfer_desc.c_str();
    r.constraint_whitespace = g.whitespace_flexible ? LLM_WHITESPACE_FREE : LLM_WHITESPACE_BOUNDED;
    r.top_logprobs = g.top_logprobs;
    r.min_tokens = g.min_tokens;
    r.stop_token_ids = g.stop_token_ids.empty() ? nullptr : g.stop_token_ids.data();
    r.n_stop_token_ids = static_cast<int32_t>(g.stop_token_ids.size());
    r.priority = g.priority;
    r.constraint_kind = g.constraint_kind;
    r.constraint = g.constraint.empty() ? nullptr : g.constraint.c_str();
    r.choices = choices.empty() ? nullptr : choices.data();
    r.n_choices = static_cast<int32_t>(choices.size());
  }
  std::shared_ptr<Job> job;
  std::string message;
  if (llm_status s = engine_->Submit(reqs, g.n, &job, &message); s != LLM_OK) {
    err = StatusError(s, message);
    if (s == LLM_ERR_CONTEXT_OVERFLOW) err.param = chat ? "messages" : "prompt";
    // A constraint the engine refuses (an invalid schema, regex or grammar,
    // or none supported by this build) is the request's problem: 400.
    if (g.constraint_kind != LLM_CONSTRAINT_NONE && (s == LLM_ERR_INVALID_ARGUMENT || s == LLM_ERR_UNSUPPORTED)) {
      err.http_status = 400;
      err.type = "invalid_request_error";
      err.code = s == LLM_ERR_UNSUPPORTED ? "unsupported" : "";
      err.param = g.constraint_param;
    }
    // A picture the library refuses (corrupt, too large, a format it does
    // not decode, no --mmproj) or a backend that cannot take it.
    if (!g.images.empty() && (s == LLM_ERR_INVALID_ARGUMENT || s == LLM_ERR_UNSUPPORTED)) {
      err.http_status = 400;
      err.type = "invalid_request_error";
      err.code = s == LLM_ERR_UNSUPPORTED ? "unsupported" : "";
      err.param = "messages";
    }
    return SendError(res, err);
  }
  auto token_text = [this](llm_token t) { return TokenText(t); };
  std::unique_ptr<ResponseWriter> builder;
  if (api == Api::kNative)
    builder = std::make_unique<NativeCompletionWriter>(g, std::move(native), model_name_, token_text);
  else if (api == Api::kResponses)
    builder = std::make_unique<ResponsesWriter>(g, body, model_name_, token_text);
  else if (api == Api::kMessages)
    builder = std::make_unique<MessagesWriter>(g, model_name_, token_text, PromptTokenCount(g.prompts[0]));
  else
    builder = std::make_unique<ResponseBuilder>(g, model_name_, token_text);

  std::function<void()> record_slot;
  if (native.id_slot >= 0 && slots_ != nullptr) {
    record_slot = [this, slot = native.id_slot, prompt = g.prompts[0].tokens, job] {
      std::vector<llm_token> all = prompt;
      const std::vector<llm_token> out = job->Tokens(0);
      all.insert(all.end(), out.begin(), out.end());
      slots_->Set(slot, std::move(all));
    };
  }
  if (!g.stream) {
    // A client that goes away before the answer has its requests cancelled
    // (their KV blocks freed at the engine's next step), as a stream's does.
    std::vector<SeqEvent> events;
    while (!builder->done()) {
      events.clear();
      if (job->Wait(&events, milliseconds(200))) builder->Apply(events);
      if (!builder->done() && CurrentClientGone()) {
        if (job->Cancel(engine_->ctx())) {
          ++engine_->cancelled_on_disconnect;
          if (log_) std::fprintf(stderr, "llm-server: client went away; request cancelled\n");
        }
        return;
      }
    }
    if (record_slot) record_slot();
    if (builder->Failed(&err)) {
      // A constraint the matcher cannot follow to the end (too ambiguous)
      // is the request's parameter at fault.
      if (err.http_status == 400 && err.param.empty() && g.constraint_kind != LLM_CONSTRAINT_NONE)
        err.param = g.constraint_param;
      return SendError(res, err);
    }
    return SendJson(res, 200, builder->Body());
  }

  auto state = std::make_shared<StreamState>();
  state->job = std::move(job);
  state->builder = std::move(builder);
  state->on_end = std::move(record_slot);
  ++engine_->active_streams;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      // Called again and again until sink.done(); returning false (or a
      // failed write) ends the response and the connection.
      [state](size_t, httplib::DataSink& sink) {
        std::string out;
        if (!state->started) {
          state->started = true;
          out = state->builder->StreamStart();
        }
        std::vector<SeqEvent> events;
        if (state->job->Wait(&events, milliseconds(100))) out += state->builder->StreamEvents(events);
        const bool done = state->builder->done();
        if (done) out += state->builder->StreamEnd();
        if (!out.empty() && !sink.write(out.data(), out.size())) return false;
        if (done) {
          state->ended = true;
          if (state->on_end) state->on_end();
          sink.done();
        }
        return true;
      },
      // Runs when the response is destroyed, sent or not: a client that
      // went away mid-stream gets its requests cancelled, which frees
      // their KV blocks at the engine's next step.
      [this, state](bool) {
        --engine_->active_streams;
        if (!state->ended && state->job->Cancel(engine_->ctx())) {
          ++engine_->cancelled_on_disconnect;
          if (log_) std::fprintf(stderr, "llm-server: client went away; request cancelled\n");
        }
      });
}

void Routes::Register(httplib::Server* svr) {
  auto model_json = [this] {
    json m{{"id", model_name_}, {"object", "model"}, {"created", created_}, {"owned_by", "llmrt"},
           {"max_model_len", n_ctx_}};
    if (!aliases_.empty()) m["aliases"] = aliases_;
    if (!tags_.empty()) m["tags"] = tags_;
    return m;
  };

  svr->Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (engine_->shutting_down())
      SendJson(res, 503, {{"status", "shutting down"}});
    else
      SendJson(res, 200, {{"status", "ok"}});
  });

  for (const char* path : {"/v1/models", "/models"}) {
    svr->Get(path, [model_json](const httplib::Request&, httplib::Response& res) {
      SendJson(res, 200, {{"object", "list"}, {"data", json::array({model_json()})}});
    });
  }

  svr->Get(R"(/v1/models/(.+))", [this, model_json](const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.matches[1];
    if (id == model_name_) return SendJson(res, 200, model_json());
    ApiError e;
    e.http_status = 404;
    e.message = "The model '" + id + "' does not exist";
    e.param = "model";
    e.code = "model_not_found";
    SendError(res, e);
  });

  svr->Get("/v1/stats", [this](const httplib::Request&, httplib::Response& res) {
    SendJson(res, 200, StatsJson(engine_->ctx(), *engine_));
  });

  svr->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    std::string text = PrometheusMetrics(*engine_, model_name_);
    if (text.empty()) {
      ApiError e = StatusError(LLM_ERR_INTERNAL, std::string("llm_get_stats: ") + llm_last_error());
      return SendError(res, e);
    }
    res.status = 200;
    res.set_content(text, kMetricsContentType);
  });

  auto post = [this, svr](const char* path, Api api) {
    svr->Post(path, [this, api](const httplib::Request& req, httplib::Response& res,
                                const httplib::ContentReader& reader) { Generate(req, reader, res, api); });
  };
  post("/v1/chat/completions", Api::kChat);
  post("/chat/completions", Api::kChat);
  post("/v1/completions", Api::kCompletion);
  post("/completion", Api::kNative);  // llama.cpp's native API
  post("/completions", Api::kNative);
  post("/v1/responses", Api::kResponses);  // OpenAI's Responses API
  post("/responses", Api::kResponses);
  post("/v1/messages", Api::kMessages);    // Anthropic's Messages API

  // Errors httplib produces itself (unknown path, bad method, body too
  // large) in OpenAI's shape too; ours already have a body.
  svr->set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    ApiError e;
    e.http_status = res.status;
    if (res.status == 404)
      e.message = "unknown endpoint: " + req.method + " " + req.path;
    else if (res.status == 413)
      e.message = "the request body is too large";
    else
      e.message = "HTTP error " + std::to_string(res.status);
    if (res.status >= 500) e.type = "server_error";
    SendError(res, e);
    return httplib::Server::HandlerResponse::Handled;
  }));
  svr->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    ApiError e;
    e.http_status = 500;
    e.type = "server_error";
    e.message = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& ex) {
      e.message = std::string("internal error: ") + ex.what();
    } catch (...) {
    }
    SendError(res, e);
  });
  if (log_) {
    svr->set_logger([](const httplib::Request& req, const httplib::Response& res) {
      std::fprintf(stderr, "llm-server: %s %s -> %d\n", req.method.c_str(), req.path.c_str(), res.status);
    });
  }
}

}  // namespace server
