// The extern "C" surface: argument checks, struct-size handling, conversion
// of internal Status values into llm_status codes plus a thread-local message.
// No exception leaves this file.
#include <algorithm>
#include <thread>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "capi/capi_util.h"
#include "core/defaults.h"
#include "engine/context_builder.h"
#include "llm.h"
#include "util/env.h"
#include "util/utf8.h"

namespace {

using namespace llm::capi;  // NOLINT: the shims' own helpers

thread_local std::string t_last_error;

// LLM_BACKEND=cpu|cuda replaces an AUTO backend (test suites, A/B runs).
int32_t BackendFromEnvironment() {
  switch (llm::ReadEnv().backend) {
    case llm::EnvOptions::Backend::kCpu: return LLM_BACKEND_CPU;
    case llm::EnvOptions::Backend::kCuda: return LLM_BACKEND_CUDA;
    default: return LLM_BACKEND_AUTO;
  }
}

llm_status ToSamplingParams(const llm_sampling_params* in, llm::SamplingParams* out) {
  llm_sampling_params p;
  llm_sampling_params_init(&p);
  if (in != nullptr) {
    if (llm_status s = CopyIn(in, kSamplingV1, "llm_sampling_params", &p); s != LLM_OK) return s;
  }
  out->temperature = p.temperature;
  out->top_k = p.top_k;
  out->top_p = p.top_p;
  out->min_p = p.min_p;
  out->repetition_penalty = p.repetition_penalty;
  out->frequency_penalty = p.frequency_penalty;
  out->presence_penalty = p.presence_penalty;
  out->penalty_last_n = p.penalty_last_n;
  out->seed = p.seed;
  llm::Status st = llm::ValidateSamplingParams(*out);
  return st.ok() ? LLM_OK : Fail(st);
}

}  // namespace

namespace llm::capi {
llm_status Fail(llm_status code, std::string message) {
  t_last_error = std::move(message);
  return code;
}
llm_status Ok() {
  t_last_error.clear();
  return LLM_OK;
}
}  // namespace llm::capi

extern "C" {

// ------------------------------------------------------------ basics

LLM_API const char* llm_version(void) { return "0.1.0"; }
LLM_API uint32_t llm_version_number(void) { return LLM_VERSION_NUMBER; }

LLM_API const char* llm_status_str(llm_status status) {
  switch (status) {
    case LLM_OK: return "LLM_OK";
    case LLM_ERR_INVALID_ARGUMENT: return "LLM_ERR_INVALID_ARGUMENT";
    case LLM_ERR_NULL_ARGUMENT: return "LLM_ERR_NULL_ARGUMENT";
    case LLM_ERR_STRUCT_SIZE: return "LLM_ERR_STRUCT_SIZE";
    case LLM_ERR_IO: return "LLM_ERR_IO";
    case LLM_ERR_MODEL_FORMAT: return "LLM_ERR_MODEL_FORMAT";
    case LLM_ERR_UNSUPPORTED: return "LLM_ERR_UNSUPPORTED";
    case LLM_ERR_OUT_OF_MEMORY: return "LLM_ERR_OUT_OF_MEMORY";
    case LLM_ERR_BUSY: return "LLM_ERR_BUSY";
    case LLM_ERR_NOT_FOUND: return "LLM_ERR_NOT_FOUND";
    case LLM_ERR_CONTEXT_OVERFLOW: return "LLM_ERR_CONTEXT_OVERFLOW";
    case LLM_ERR_INVALID_UTF8: return "LLM_ERR_INVALID_UTF8";
    case LLM_ERR_BUFFER_TOO_SMALL: return "LLM_ERR_BUFFER_TOO_SMALL";
    case LLM_ERR_BACKEND: return "LLM_ERR_BACKEND";
    case LLM_ERR_SHUTDOWN: return "LLM_ERR_SHUTDOWN";
    case LLM_ERR_INTERNAL: return "LLM_ERR_INTERNAL";
    case LLM_ERR_KV_MISMATCH: return "LLM_ERR_KV_MISMATCH";
    case LLM_ERR_KV_CORRUPT: return "LLM_ERR_KV_CORRUPT";
    default: return "LLM_ERR_UNKNOWN";
  }
}

LLM_API const char* llm_last_error(void) { return t_last_error.c_str(); }

LLM_API llm_status llm_ctx_params_init(llm_ctx_params* p) {
  LLM_CHECK_ARG(p);
  std::memset(p, 0, sizeof(*p));
  p->struct_size = sizeof(*p);
  p->backend = LLM_BACKEND_AUTO;
  p->n_gpu_layers = -1;  // every layer on the GPU (when the backend is CUDA)
  p->main_gpu = -1;      // the layers split over every device
  return Ok();
}

LLM_API llm_status llm_sampling_params_init(llm_sampling_params* p) {
  LLM_CHECK_ARG(p);
  std::memset(p, 0, sizeof(*p));
  p->struct_size = sizeof(*p);
  p->temperature = 0.8f;
  p->top_k = 40;
  p->top_p = 0.95f;
  p->min_p = 0.05f;
  p->repetition_penalty = 1.0f;
  p->frequency_penalty = 0.0f;
  p->presence_penalty = 0.0f;
  p->penalty_last_n = 64;
  p->seed = LLM_SEED_RANDOM;
  return Ok();
}

LLM_API llm_status llm_request_init(llm_request* r) {
  LLM_CHECK_ARG(r);
  std::memset(r, 0, sizeof(*r));
  r->struct_size = sizeof(*r);
  r->tokenize_flags = LLM_TOKENIZE_ADD_SPECIAL;
  r->max_tokens = llm::defaults::kMaxTokens;
  r->n = 1;
  r->task = LLM_TASK_GENERATE;
  r->pooling = LLM_POOLING_MODEL;
  r->normalize = 1;
  return Ok();
}

// ------------------------------------------------------------ context

LLM_API llm_status llm_ctx_create(const llm_ctx_params* params, llm_ctx** out_ctx) {
  LLM_CHECK_ARG(out_ctx);
  *out_ctx = nullptr;
  return Guard([&]() -> llm_status {
    llm_ctx_params p;
    llm_ctx_params_init(&p);
    if (params != nullptr) {
      if (llm_status s = CopyIn(params, kCtxParamsV1, "llm_ctx_params", &p); s != LLM_OK) return s;
    }
    llm::ContextOverrides overrides;
    overrides.backend = BackendFromEnvironment();
    if (llm::Status s = llm::capi::CheckKvRole(p); !s.ok()) return Fail(s);
    if (p.reserved6 != 0) return Fail(LLM_ERR_INVALID_ARGUMENT, "reserved6 must be 0");
    auto engine = llm::BuildEngine(p, overrides);
    if (!engine.ok()) return Fail(engine.status());
    std::shared_ptr<const llm::VisionModel> vision;
    if (p.mmproj_path != nullptr) {
      auto v = llm::capi::OpenProjector(p.mmproj_path, (*engine)->model());
      if (!v.ok()) return Fail(v.status());
      vision = std::move(*v);
      // The engine encodes pictures on its thread with the tower on the CPU.
      const int threads = p.n_threads > 0 ? p.n_threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
      if (llm::Status s = (*engine)->AttachVision(vision, threads); !s.ok()) return Fail(s);
    }
    auto disagg = llm::capi::CreateDisagg(p, **engine);
    if (!disagg.ok()) return Fail(disagg.status());
    *out_ctx = new llm_ctx{std::move(*engine), {}, std::move(*disagg), std::move(vision)};
    return Ok();
  });
}

LLM_API void llm_ctx_destroy(llm_ctx* ctx) {
  if (ctx == nullptr) return;
  try {
    delete ctx;
  } catch (...) {
  }
}

// ------------------------------------------------------------ requests

LLM_API llm_status llm_submit(llm_ctx* ctx, const llm_request* request, llm_request_id* out_id) {
  LLM_CHECK_ARG(ctx);
  LLM_CHECK_ARG(request);
  LLM_CHECK_ARG(out_id);
  return Guard([&]() -> llm_status {
    llm_request r;
    llm_request_init(&r);
    if (llm_status s = CopyIn(request, kRequestV1, "llm_request", &r); s != LLM_OK) return s;
    if (r.reserved0 != 0) return Fail(LLM_ERR_INVALID_ARGUMENT, "reserved0 must be 0");
    if (r.max_tokens <= 0) return Fail(LLM_ERR_INVALID_ARGUMENT, "max_tokens must be > 0 (got " + std::to_string(r.max_tokens) + ")");
    if (r.n < 1 || r.n > llm::defaults::kMaxParallel)
      return Fail(LLM_ERR_INVALID_ARGUMENT, "n must be in [1, " + std::to_string(llm::defaults::kMaxParallel) + "]");
    if (r.ignore_eos != 0 && r.ignore_eos != 1) return Fail(LLM_ERR_INVALID_ARGUMENT, "ignore_eos must be 0 or 1");
    if (r.prompt_logprobs != 0 && r.prompt_logprobs != 1) return Fail(LLM_ERR_INVALID_ARGUMENT, "prompt_logprobs must be 0 or 1");
    if (r.tokenize_flags & ~uint32_t{LLM_TOKENIZE_ADD_SPECIAL | LLM_TOKENIZE_PARSE_SPECIAL})
      return Fail(LLM_ERR_INVALID_ARGUMENT, "unknown tokenize_flags bits");
    if (r.n_stop < 0 || r.n_stop > llm::defaults::kMaxStops)
      return Fail(LLM_ERR_INVALID_ARGUMENT, "n_stop must be in [0, " + std::to_string(llm::defaults::kMaxStops) + "]");
    if (r.n_stop > 0 && r.stop == nullptr) return Fail(LLM_ERR_NULL_ARGUMENT, "stop is NULL but n_stop > 0");
    if (r.spec_mode < LLM_SPEC_AUTO || r.spec_mode > LLM_SPEC_DRAFT)
      return Fail(LLM_ERR_INVALID_ARGUMENT, "spec_mode " + std::to_string(r.spec_mode) + " is not an LLM_SPEC_* value");
    if (r.spec_k < 0 || r.spec_k > llm::defaults::kMaxSpecK)
      return Fail(LLM_ERR_INVALID_ARGUMENT, "spec_k must be in [0, " + std::to_string(llm::defaults::kMaxSpecK) + "]");

    llm::RequestSpec spec;
    if (llm_status s = ToSamplingParams(r.sampling, &spec.sampling); s != LLM_OK) return s;
    for (int32_t i = 0; i < r.n_stop; ++i) {
      if (r.stop[i] == nullptr) return Fail(LLM_ERR_NULL_ARGUMENT, "stop[" + std::to_string(i) + "] is NULL");
      std::string_view sv(r.stop[i]);
      if (sv.empty()) return Fail(LLM_ERR_INVALID_ARGUMENT, "stop[" + std::to_string(i) + "] is empty");
      if (sv.size() > llm::defaults::kMaxStopBytes)
        return Fail(LLM_ERR_INVALID_ARGUMENT, "stop[" + std::to_string(i) + "] is longer than " +
                                                  std::to_string(llm::defaults::kMaxStopBytes) + " bytes (the limit)");
      if (!llm::IsValidUtf8(sv)) return Fail(LLM_ERR_INVALID_UTF8, "stop[" + std::to_string(i) + "] is not valid UTF-8");
      spec.stop.emplace_back(sv);
    }
    const llm::Model& model = ctx->engine->model();
    if (r.parts != nullptr || r.n_parts != 0) {
      if (r.prompt != nullptr || r.prompt_tokens != nullptr)
        return Fail(LLM_ERR_INVALID_ARGUMENT, "parts is exclusive with prompt and prompt_tokens: set one");
      if (r.parts == nullptr) return Fail(LLM_ERR_NULL_ARGUMENT, "parts is NULL but n_parts is not 0");
      // As for prompt below: text that cannot fit however it tokenizes is
      // refused before the tokenizer spends seconds on it.
      size_t text_bytes = 0;
      for (int32_t i = 0; i < r.n_parts; ++i)
        if (r.parts[i].struct_size == sizeof(llm_content_part) && r.parts[i].kind == LLM_CONTENT_TEXT &&
            r.parts[i].text != nullptr)
          text_bytes += std::strlen(r.parts[i].text);
      const size_t n_ctx = static_cast<size_t>(ctx->engine->config().n_ctx);
      if (text_bytes > 3 * model.tokenizer->max_token_bytes() * (n_ctx + 8))
        return Fail(LLM_ERR_CONTEXT_OVERFLOW, "the text parts (" + std::to_string(text_bytes) +
                                                  " bytes) are longer than the context of " + std::to_string(n_ctx) +
                                                  " tokens can hold");
      std::vector<llm::PromptPiece> pieces;
      std::vector<llm::ImageInput> images;
      if (llm_status s = llm::capi::ToPromptParts(r, *ctx, &pieces, &images); s != LLM_OK) return s;
      if (images.empty()) {
        for (const llm::PromptPiece& piece : pieces)
          spec.prompt.insert(spec.prompt.end(), piece.tokens.begin(), piece.tokens.end());
      } else {  // Engine::Submit lays the pieces out (engine/image_prompt.cpp)
        spec.pieces = std::move(pieces);
        spec.images = std::move(images);
      }
    } else if (r.prompt != nullptr) {
      // A text that cannot fit the context however it tokenizes is refused
      // before the tokenizer spends seconds on megabytes of it.
      const size_t n_ctx = static_cast<size_t>(ctx->engine->config().n_ctx);
      const size_t bound = 3 * model.tokenizer->max_token_bytes() * (n_ctx + 8);
      const size_t bytes = std::strlen(r.prompt);
      if (bytes > bound)
        return Fail(LLM_ERR_CONTEXT_OVERFLOW, "the prompt (" + std::to_string(bytes) + " bytes) is longer than the context of " +
                                                  std::to_string(n_ctx) + " tokens can hold (a token covers at most " +
                                                  std::to_string(model.tokenizer->max_token_bytes()) + " bytes of text)");
      auto ids = model.tokenizer->Encode(r.prompt, (r.tokenize_flags & LLM_TOKENIZE_ADD_SPECIAL) != 0,
                                         (r.tokenize_flags & LLM_TOKENIZE_PARSE_SPECIAL) != 0);
      if (!ids.ok()) return Fail(ids.status());
      spec.prompt = std::move(*ids);
    } else {
      if (r.prompt_tokens == nullptr) return Fail(LLM_ERR_NULL_ARGUMENT, "both prompt and prompt_tokens are NULL");
      if (r.n_prompt_tokens <= 0) return Fail(LLM_ERR_INVALID_ARGUMENT, "n_prompt_tokens must be > 0");
      spec.prompt.assign(r.prompt_tokens, r.prompt_tokens + r.n_prompt_tokens);
    }
    if (r.reserved2 != 0) return Fail(LLM_ERR_INVALID_ARGUMENT, "reserved2 must be 0");
    if (llm_status s = ToEmbedSpec(r.task, r.pooling, r.normalize, r.dimensions, r.truncate, *ctx->engine, &spec);
        s != LLM_OK)
      return s;
    spec.max_tokens = r.max_tokens;
    spec.ignore_eos = r.ignore_eos != 0;
    spec.n = r.n;
    spec.priority = r.priority;
    spec.prompt_logprobs = r.prompt_logprobs != 0;
    spec.cache_salt = r.cache_salt;
    if (r.keep_kv != 0 && r.keep_kv != 1) return Fail(LLM_ERR_INVALID_ARGUMENT, "keep_kv must be 0 or 1");
    if (r.reserved2 != 0) return Fail(LLM_ERR_INVALID_ARGUMENT, "reserved2 must be 0");
    spec.keep_kv = r.keep_kv == 1;
    if (llm_status s = ToTokenRules(r, r.sampling, *model.tokenizer, &spec); s != LLM_OK) return s;
    if (llm_status s = ToConstraint(r, ctx->constraints, &spec); s != LLM_OK) return s;
    if (llm_status s = ToReasoning(r, model, &spec); s != LLM_OK) return s;
    const llm::EngineConfig& ec = ctx->engine->config();
    spec.spec_mode = r.spec_mode != LLM_SPEC_AUTO ? r.spec_mode : ec.spec_mode;
    spec.spec_k = r.spec_k > 0 ? r.spec_k : ec.spec_k;
    spec.callback = r.callback;
    spec.user_data = r.user_data;
    // Last: a consumer's pull runs only for an otherwise valid request.
    if (llm_status s = llm::capi::ApplyKvTransfer(ctx->disagg.get(), *ctx->engine, r, &spec); s != LLM_OK) return s;
    auto id = ctx->engine->Submit(std::move(spec));
    if (!id.ok()) return Fail(id.status());
    *out_id = *id;
    return Ok();
  });
}

LLM_API llm_status llm_cancel(llm_ctx* ctx, llm_request_id id) {
  LLM_CHECK_ARG(ctx);
  return Guard([&]() -> llm_status {
    llm::Status s = ctx->engine->Cancel(id);
    return s.ok() ? Ok() : Fail(s);
  });
}

LLM_API llm_status llm_poll(llm_ctx* ctx, llm_event* events, uint32_t capacity, uint32_t* n_out, int32_t timeout_ms) {
  LLM_CHECK_ARG(ctx);
  LLM_CHECK_ARG(n_out);
  *n_out = 0;
  uint32_t stride = sizeof(llm_event);
  if (capacity > 0) {
    LLM_CHECK_ARG(events);
    stride = events[0].struct_size;
    if (stride < kEventV1 || stride > sizeof(llm_event)) {
      return Fail(LLM_ERR_STRUCT_SIZE, "events[0].struct_size is " + std::to_string(stride) +
                                           "; set it to sizeof(llm_event) before llm_poll");
    }
  }
  return Guard([&]() -> llm_status {
    llm::Status s = ctx->engine->Poll(events, capacity, stride, n_out, timeout_ms);
    return s.ok() ? Ok() : Fail(s);
  });
}

LLM_API llm_status llm_wakeup(llm_ctx* ctx) {
  LLM_CHECK_ARG(ctx);
  ctx->engine->Wakeup();
  return Ok();
}

// ------------------------------------------------------------ stats, model

LLM_API llm_status llm_get_stats(llm_ctx* ctx, llm_stats* out) {
  LLM_CHECK_ARG(ctx);
  LLM_CHECK_ARG(out);
  if (llm_status s = CheckOutSize(out, kStatsV1, "llm_stats"); s != LLM_OK) return s;
  return Guard([&]() -> llm_status {
    llm_stats full;
    ctx->engine->GetStats(&full);
    llm::capi::FillDisaggStats(ctx->disagg.get(), &full);
    const uint32_t size = out->struct_size;
    std::memcpy(out, &full, size);
    out->struct_size = size;
    return Ok();
  });
}

LLM_API llm_status llm_get_device_stats(llm_ctx* ctx, int32_t index, llm_device_stats* out) {
  LLM_CHECK_ARG(ctx);
  LLM_CHECK_ARG(out);
  if (llm_status s = CheckOutSize(out, sizeof(llm_device_stats), "llm_device_stats"); s != LLM_OK) return s;
  return Guard([&]() -> llm_status {
    const std::vector<llm::DeviceMemory> devices = ctx->engine->DeviceStats();
    llm_device_stats d{};
    d.struct_size = out->struct_size;
    d.n_devices = static_cast<int32_t>(devices.size());
    const bool found = index >= 0 && static_cast<size_t>(index) < devices.size();
    if (found) {
      const llm::DeviceMemory& m = devices[static_cast<size_t>(index)];
      d.device = m.device;
      d.first_layer = m.first_layer;
      d.end_layer = m.end_layer;
      d.weight_bytes = static_cast<uint64_t>(m.weights);
      d.kv_pool_bytes = static_cast<uint64_t>(m.kv_pool);
      d.used_bytes = static_cast<uint64_t>(m.used);
      d.total_bytes = static_cast<uint64_t>(m.total);
    }
    std::memcpy(out, &d, d.struct_size);
    if (!found)
      return Fail(LLM_ERR_NOT_FOUND, "device index " + std::to_string(index) + " outside [0, " +
                                         std::to_string(devices.size()) + ")");
    return Ok();
  });
}

LLM_API llm_status llm_model_get_info(llm_ctx* ctx, llm_model_info* out) {
  LLM_CHECK_ARG(ctx);
  LLM_CHECK_ARG(out);
  if (llm_status s = CheckOutSize(out, kModelInfoV1, "llm_model_info"); s != LLM_OK) return s;
  const llm::Model& m = ctx->engine->model();
  llm_model_info info{};
  info.struct_size = out->struct_size;
  info.n_vocab = m.config.n_vocab;
  info.n_ctx_train = m.config.n_ctx_train;
  info.n_ctx = ctx->engine->config().n_ctx;
  info.n_embd = m.config.n_embd;
  info.n_layer = m.config.n_layer;
  info.n_head = m.config.n_head;
  info.n_head_kv = m.config.n_head_kv;
  info.bos = m.tokenizer->bos();
  info.eos = m.tokenizer->eos();
  info.n_params = m.weights.n_params;
  info.arch = m.config.arch.c_str();
  info.name = m.config.name.c_str();
  std::memcpy(out, &info, out->struct_size);
  return Ok();
}

// ------------------------------------------------------------ tokenizer

LLM_API llm_status llm_tokenize(llm_ctx* ctx, const char* text, size_t text_len, uint32_t flags, llm_token* out,
                                int32_t capacity, int32_t* n_out) {
  LLM_CHECK_ARG(ctx);
  LLM_CHECK_ARG(n_out);
  if (text == nullptr && text_len > 0) return Fail(LLM_ERR_NULL_ARGUMENT, "text is NULL");
  if (capacity < 0) return Fail(LLM_ERR_INVALID_ARGUMENT, "capacity must be >= 0");
  if (capacity > 0 && out == nullptr) return Fail(LLM_ERR_NULL_ARGUMENT, "out is NULL but capacity > 0");
  if (flags & ~uint32_t{LLM_TOKENIZE_ADD_SPECIAL | LLM_TOKENIZE_PARSE_SPECIAL})
    return Fail(LLM_ERR_INVALID_ARGUMENT, "unknown flags");
  return Guard([&]() -> llm_status {
    auto ids = ctx->engine->model().tokenizer->Encode(std::string_view(text ? text : "", text_len),
                                                      (flags & LLM_TOKENIZE_ADD_SPECIAL) != 0,
                                                      (flags & LLM_TOKENIZE_PARSE_SPECIAL) != 0);
    if (!ids.ok()) return Fail(ids.status());
    if (ids->size() > static_cast<size_t>(INT32_MAX)) return Fail(LLM_ERR_INVALID_ARGUMENT, "text too long");
    *n_out = static_cast<int32_t>(ids->size());
    if (ids->size() > static_cast<size_t>(capacity)) {
      return Fail(LLM_ERR_BUFFER_TOO_SMALL, "need room for " + std::to_string(ids->size()) + " tokens");
    }
    std::copy(ids->begin(), ids->end(), out);
    return Ok();
  });
}

LLM_API llm_status llm_detokenize(llm_ctx* ctx, const llm_token* tokens, int32_t n_tokens, uint32_t flags, char* out,
                                  size_t capacity, size_t* n_out) {
  LLM_CHECK_ARG(ctx);
  LLM_CHECK_ARG(n_out);
  if (n_tokens < 0) return Fail(LLM_ERR_INVALID_ARGUMENT, "n_tokens must be >= 0");
  if (n_tokens > 0 && tokens == nullptr) return Fail(LLM_ERR_NULL_ARGUMENT, "tokens is NULL");
  if (capacity > 0 && out == nullptr) return Fail(LLM_ERR_NULL_ARGUMENT, "out is NULL but capacity > 0");
  if (flags & ~uint32_t{LLM_DETOKENIZE_RENDER_SPECIAL | LLM_DETOKENIZE_STRIP_LEADING_SPACE})
    return Fail(LLM_ERR_INVALID_ARGUMENT, "unknown flags");
  return Guard([&]() -> llm_status {
    const llm::Tokenizer& tok = *ctx->engine->model().tokenizer;
    for (int32_t i = 0; i < n_tokens; ++i) {
      if (tokens[i] < 0 || tokens[i] >= tok.n_vocab())
        return Fail(LLM_ERR_INVALID_ARGUMENT, "token " + std::to_string(tokens[i]) + " at index " + std::to_string(i) +
                                                  " is outside the vocabulary");
    }
    std::string s = tok.Decode(std::span<const int32_t>(tokens, static_cast<size_t>(n_tokens)),
                               (flags & LLM_DETOKENIZE_RENDER_SPECIAL) != 0,
                               (flags & LLM_DETOKENIZE_STRIP_LEADING_SPACE) != 0);
    *n_out = s.size();
    if (s.size() > capacity) return Fail(LLM_ERR_BUFFER_TOO_SMALL, "need room for " + std::to_string(s.size()) + " bytes");
    if (!s.empty()) std::memcpy(out, s.data(), s.size());
    return Ok();
  });
}

}  // extern "C"
