// Embedding requests through the C API: llm_request's embedding fields
// (ToEmbedSpec, from llm_submit) and the blocking llm_embed.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "capi/capi_util.h"
#include "engine/embed_sink.h"

namespace llm::capi {

llm_status ToEmbedSpec(int32_t task, int32_t pooling, int32_t normalize, int32_t dimensions, int32_t truncate,
                       const Engine& engine, RequestSpec* spec) {
  if (task != LLM_TASK_GENERATE && task != LLM_TASK_EMBED)
    return Fail(LLM_ERR_INVALID_ARGUMENT, "task " + std::to_string(task) + " is not an LLM_TASK_* value");
  spec->task = task;
  if (task == LLM_TASK_GENERATE) return LLM_OK;
  if (pooling < LLM_POOLING_MODEL || pooling > LLM_POOLING_RANK)
    return Fail(LLM_ERR_INVALID_ARGUMENT, "pooling " + std::to_string(pooling) + " is not an LLM_POOLING_* value");
  if (normalize != 0 && normalize != 1) return Fail(LLM_ERR_INVALID_ARGUMENT, "normalize must be 0 or 1");
  if (truncate != 0 && truncate != 1) return Fail(LLM_ERR_INVALID_ARGUMENT, "truncate must be 0 or 1");
  if (dimensions < 0) return Fail(LLM_ERR_INVALID_ARGUMENT, "dimensions must be >= 0");
  spec->pooling = pooling == LLM_POOLING_MODEL ? engine.model().config.pooling : static_cast<Pooling>(pooling);
  spec->normalize = normalize != 0;
  spec->dimensions = dimensions;
  const size_t n_ctx = static_cast<size_t>(engine.config().n_ctx);
  if (truncate == 1 && spec->prompt.size() > n_ctx) spec->prompt.resize(n_ctx);
  return LLM_OK;
}

}  // namespace llm::capi

using llm::capi::Fail;
using llm::capi::Guard;
using llm::capi::Ok;

LLM_API llm_status llm_embed_params_init(llm_embed_params* p) {
  LLM_CHECK_ARG(p);
  std::memset(p, 0, sizeof(*p));
  p->struct_size = sizeof(*p);
  p->pooling = LLM_POOLING_MODEL;
  p->normalize = 1;
  p->tokenize_flags = LLM_TOKENIZE_ADD_SPECIAL;
  return Ok();
}

namespace {

// Submits every spec into `sink`, waiting for room when the queue is full;
// on a refusal cancels what went in. Returns after every submitted request
// has been delivered.
llm_status RunAll(llm_ctx* ctx, std::vector<llm::RequestSpec>& specs, const std::shared_ptr<llm::EmbedSink>& sink) {
  llm::Engine& e = *ctx->engine;
  std::vector<uint64_t> ids;
  llm::Status refused;
  for (size_t i = 0; i < specs.size(); ++i) {
    auto id = e.Submit(specs[i]);
    if (!id.ok() && id.status().code() == LLM_ERR_BUSY && !ids.empty()) {
      // The queue is full: wait for one of ours to finish, then retry.
      std::unique_lock<std::mutex> lock(sink->mu);
      const int32_t done = sink->n_done;
      if (done < static_cast<int32_t>(ids.size())) {
        sink->cv.wait(lock, [&] { return sink->n_done > done; });
        --i;
        continue;
      }
    }
    if (!id.ok()) {
      refused = id.status();
      break;
    }
    ids.push_back(*id);
  }
  if (!refused.ok())
    for (uint64_t id : ids) (void)e.Cancel(id);  // NOT_FOUND: it finished meanwhile
  std::unique_lock<std::mutex> lock(sink->mu);
  sink->cv.wait(lock, [&] { return sink->n_done >= static_cast<int32_t>(ids.size()); });
  if (!refused.ok()) return Fail(refused);
  if (sink->status != LLM_OK) return Fail(sink->status, sink->message);
  return Ok();
}

}  // namespace

LLM_API llm_status llm_embed(llm_ctx* ctx, const char* const* texts, const llm_token* const* tokens,
                             const int32_t* n_tokens, int32_t n_inputs, const llm_embed_params* params, float* out,
                             size_t out_capacity, int32_t* out_dim) {
  LLM_CHECK_ARG(ctx);
  LLM_CHECK_ARG(out_dim);
  *out_dim = 0;
  return Guard([&]() -> llm_status {
    llm_embed_params p;
    llm_embed_params_init(&p);
    if (params != nullptr) {
      if (llm_status s = llm::capi::CopyIn(params, sizeof(llm_embed_params), "llm_embed_params", &p); s != LLM_OK)
        return s;
    }
    if (p.reserved0 != 0) return Fail(LLM_ERR_INVALID_ARGUMENT, "reserved0 must be 0");
    if (p.tokenize_flags & ~uint32_t{LLM_TOKENIZE_ADD_SPECIAL | LLM_TOKENIZE_PARSE_SPECIAL})
      return Fail(LLM_ERR_INVALID_ARGUMENT, "unknown tokenize_flags bits");
    if (n_inputs < 1) return Fail(LLM_ERR_INVALID_ARGUMENT, "n_inputs must be >= 1");
    if (texts == nullptr && (tokens == nullptr || n_tokens == nullptr))
      return Fail(LLM_ERR_NULL_ARGUMENT, "texts is NULL and so is tokens or n_tokens");
    if (p.pooling == LLM_POOLING_NONE)
      return Fail(LLM_ERR_INVALID_ARGUMENT, "llm_embed cannot use LLM_POOLING_NONE (a vector per token): submit it");

    llm::Engine& e = *ctx->engine;
    const llm::Model& model = e.model();
    std::vector<llm::RequestSpec> specs(static_cast<size_t>(n_inputs));
    for (int32_t i = 0; i < n_inputs; ++i) {
      llm::RequestSpec& spec = specs[i];
      const std::string which = "input " + std::to_string(i);
      if (texts != nullptr) {
        if (texts[i] == nullptr) return Fail(LLM_ERR_NULL_ARGUMENT, "texts[" + std::to_string(i) + "] is NULL");
        if (texts[i][0] == '\0') return Fail(LLM_ERR_INVALID_ARGUMENT, which + " is an empty string");
        auto ids = model.tokenizer->Encode(texts[i], (p.tokenize_flags & LLM_TOKENIZE_ADD_SPECIAL) != 0,
                                           (p.tokenize_flags & LLM_TOKENIZE_PARSE_SPECIAL) != 0);
        if (!ids.ok()) return Fail(ids.status().code(), which + ": " + ids.status().message());
        spec.prompt = std::move(*ids);
      } else {
        if (tokens[i] == nullptr) return Fail(LLM_ERR_NULL_ARGUMENT, "tokens[" + std::to_string(i) + "] is NULL");
        if (n_tokens[i] <= 0) return Fail(LLM_ERR_INVALID_ARGUMENT, which + " has no tokens");
        spec.prompt.assign(tokens[i], tokens[i] + n_tokens[i]);
      }
      if (llm_status s = llm::capi::ToEmbedSpec(LLM_TASK_EMBED, p.pooling, p.normalize, p.dimensions, p.truncate, e, &spec);
          s != LLM_OK)
        return s;
      spec.priority = p.priority;
      if (llm::Status st = e.CheckEmbed(spec); !st.ok()) return Fail(st.code(), which + ": " + st.message());
    }
    const int32_t dim = e.EmbedRowSize(specs[0]);
    *out_dim = dim;
    const size_t need = static_cast<size_t>(n_inputs) * static_cast<size_t>(dim);
    if (out == nullptr || out_capacity < need)
      return Fail(LLM_ERR_BUFFER_TOO_SMALL, "out holds " + std::to_string(out_capacity) + " floats; " +
                                                std::to_string(n_inputs) + " inputs need " + std::to_string(need));
    auto sink = std::make_shared<llm::EmbedSink>();
    sink->out = out;
    sink->dim = dim;
    for (int32_t i = 0; i < n_inputs; ++i) {
      specs[i].sink = sink;
      specs[i].sink_index = i;
    }
    return RunAll(ctx, specs, sink);
  });
}
