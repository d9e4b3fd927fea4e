#include "openai_response.h"

#include "kv_transfer_params.h"

#include <algorithm>
#include <chrono>
#include <random>

namespace server {
namespace {

const char* FinishName(int32_t reason) {
  switch (reason) {
    case LLM_FINISH_STOP: return "stop";
    case LLM_FINISH_LENGTH: return "length";
    case LLM_FINISH_CANCELLED: return "cancelled";
    default: return "error";
  }
}

std::string Sse(const json& j) { return "data: " + Dump(j) + "\n\n"; }

std::string Fingerprint() { return std::string("llmrt-") + llm_version(); }

}  // namespace

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string NewId(const char* prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx%08llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng() & 0xffffffffu));
  return std::string(prefix) + buf;
}

ResponseBuilder::ResponseBuilder(const Generation& g, std::string model, TokenText token_text)
    : tools_(g.tools),
      chat_(g.chat),
      logprobs_(g.logprobs),
      include_usage_(g.include_usage),
      top_logprobs_(g.top_logprobs),
      n_(g.n),
      model_(std::move(model)),
      id_(NewId(g.chat ? "chatcmpl-" : "cmpl-")),
      created_(std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count()),
      token_text_(std::move(token_text)),
      choices_(g.prompts.size() * static_cast<size_t>(g.n)) {}

void ResponseBuilder::Record(const SeqEvent& e, Choice* c) {
  if (!e.final) {
    if (logprobs_) {
      std::string piece = token_text_(e.token);
      c->offsets.push_back(c->text_offset);
      c->text_offset += piece.size();
      std::vector<Alternative> top;
      for (const llm_top_logprob& t : e.top) top.push_back({token_text_(t.token), t.logprob});
      c->logprobs.push_back({std::move(piece), e.logprob, std::move(top)});
    }
    return;
  }
  if (!c->finished) ++finished_;
  c->finished = true;
  c->finish_reason = e.finish_reason;
  c->status = e.status;
  c->message = e.message;
  c->metrics = e.metrics;
  c->kv_transfer_desc = e.kv_transfer_desc;
  c->transferred_tokens = e.transferred_tokens;
}

void ResponseBuilder::Apply(const std::vector<SeqEvent>& events) {
  for (const SeqEvent& e : events) {
    if (e.choice < 0 || static_cast<size_t>(e.choice) >= choices_.size()) continue;
    Choice& c = choices_[static_cast<size_t>(e.choice)];
    c.text += e.text;
    c.reasoning += e.reasoning;
    Record(e, &c);
  }
}

bool ResponseBuilder::Failed(ApiError* err) const {
  for (const Choice& c : choices_) {
    if (!c.finished) continue;
    if (c.finish_reason == LLM_FINISH_ERROR) {
      *err = StatusError(c.status, c.message);
      return true;
    }
    if (c.finish_reason == LLM_FINISH_CANCELLED) {
      *err = StatusError(LLM_ERR_SHUTDOWN, "the request was cancelled: the server is shutting down");
      return true;
    }
  }
  return false;
}

json ResponseBuilder::Envelope(const char* object) const {
  json j = {{"id", id_}, {"object", object}, {"created", created_}, {"model", model_}};
  j["system_fingerprint"] = Fingerprint();
  return j;
}

json ResponseBuilder::Logprobs(const Choice& c) const {
  if (!logprobs_) return nullptr;
  auto bytes = [](const std::string& s) {
    json b = json::array();
    for (unsigned char x : s) b.push_back(static_cast<int>(x));
    return b;
  };
  if (chat_) {
    json content = json::array();
    for (const TokenLogprob& t : c.logprobs) {
      json top = json::array();
      for (const Alternative& a : t.top)
        top.push_back({{"token", a.token}, {"logprob", a.logprob}, {"bytes", bytes(a.token)}});
      content.push_back({{"token", t.token}, {"logprob", t.logprob}, {"bytes", bytes(t.token)}, {"top_logprobs", top}});
    }
    return json{{"content", content}};
  }
  json tokens = json::array(), lps = json::array(), offsets = json::array(), tops = json::array();
  for (size_t i = 0; i < c.logprobs.size(); ++i) {
    tokens.push_back(c.logprobs[i].token);
    lps.push_back(c.logprobs[i].logprob);
    offsets.push_back(c.offsets[i]);
    // {text: logprob}; alternatives whose text coincides keep the likelier.
    json top = json::object();
    for (const Alternative& a : c.logprobs[i].top)
      if (!top.contains(a.token)) top[a.token] = a.logprob;
    tops.push_back(std::move(top));
  }
  return json{{"tokens", tokens},
              {"token_logprobs", lps},
              {"top_logprobs", top_logprobs_ > 0 ? tops : json(nullptr)},
              {"text_offset", offsets}};
}

json ResponseBuilder::Usage() const {
  int64_t prompt = 0, cached = 0, completion = 0, transferred = 0;
  for (size_t i = 0; i < choices_.size(); ++i) {
    const llm_metrics& m = choices_[i].metrics;
    if (i % static_cast<size_t>(n_) == 0) {  // the samples of one prompt share it
      prompt += m.prompt_tokens;
      cached += m.cached_prompt_tokens;
      transferred += choices_[i].transferred_tokens;
    }
    completion += m.generated_tokens;
  }
  return json{{"prompt_tokens", prompt},
              {"completion_tokens", completion},
              {"total_tokens", prompt + completion},
              {"prompt_tokens_details", {{"cached_tokens", cached}, {"transferred_tokens", transferred}}}};
}

json ResponseBuilder::Body() const {
  json j = Envelope(chat_ ? "chat.completion" : "text_completion");
  json choices = json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    const Choice& c = choices_[i];
    json choice = {{"index", i}};
    const char* finish = FinishName(c.finish_reason);
    if (chat_ && tools_.active())
      choice["message"] = ToolMessage(c, &finish);
    else if (chat_)
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
    // The thinking beside the answer, as llama-server and vLLM return it.
    if (chat_ && !c.reasoning.empty()) choice["message"]["reasoning_content"] = c.reasoning;
    else
      choice["text"] = c.text;
    choice["logprobs"] = Logprobs(c);
    choice["finish_reason"] = finish;
    choices.push_back(std::move(choice));
  }
  j["choices"] = std::move(choices);
  j["usage"] = Usage();
  // Disaggregation (kv_transfer_params.h): what the decode server needs.
  if (!choices_.empty() && !choices_[0].kv_transfer_desc.empty())
    j["kv_transfer_params"] = KvTransferParamsJson(choices_[0].kv_transfer_desc);
  return j;
}

json ResponseBuilder::ChunkChoice(int index, const std::string& text, const Choice& c, bool with_logprobs, bool role,
                                  const char* finish) const {
  json choice = {{"index", index}};
  if (chat_) {
    json delta = json::object();
    // The role's own chunk says content null (as llama-server; OpenAI's
    // clients take null or ""), so no content delta is ever empty.
    if (role) delta["role"] = "assistant";
    if (role && text.empty())
      delta["content"] = nullptr;
    else if (!text.empty() || finish == nullptr)
      delta["content"] = text;
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = with_logprobs ? Logprobs(c) : json(nullptr);
  choice["finish_reason"] = finish ? json(finish) : json(nullptr);
  return choice;
}

std::string ResponseBuilder::StreamStart() {
  if (!chat_) return "";
  std::string out;
  for (size_t i = 0; i < choices_.size(); ++i) {
    json j = Envelope("chat.completion.chunk");
    j["choices"] = json::array({ChunkChoice(static_cast<int>(i), "", choices_[i], false, true, nullptr)});
    out += Sse(j);
  }
  return out;
}

std::string ResponseBuilder::StreamEvents(const std::vector<SeqEvent>& events) {
  const char* object = chat_ ? "chat.completion.chunk" : "text_completion";
  std::string out;
  for (const SeqEvent& e : events) {
    if (e.choice < 0 || static_cast<size_t>(e.choice) >= choices_.size()) continue;
    Choice& c = choices_[static_cast<size_t>(e.choice)];
    Record(e, &c);
    if (chat_ && !e.reasoning.empty()) {
      // Thinking streams as it comes, even when the answer is held for tool calls.
      json j = Envelope(object);
      json choice = {{"index", e.choice}, {"delta", {{"reasoning_content", e.reasoning}}}, {"logprobs", nullptr},
                     {"finish_reason", nullptr}};
      j["choices"] = json::array({std::move(choice)});
      out += Sse(j);
    }
    if (chat_ && tools_.active()) {
      c.text += e.text;
      if (e.final) out += StreamToolEnd(e.choice, c);
      continue;
    }
    // Text (with the logprobs of the tokens that made it) as soon as there
    // is some; a token whose text is held back waits for the next chunk.
    if (!e.text.empty() || (e.final && !c.logprobs.empty())) {
      json j = Envelope(object);
      j["choices"] = json::array({ChunkChoice(e.choice, e.text, c, logprobs_, false, nullptr)});
      out += Sse(j);
      c.logprobs.clear();
      c.offsets.clear();
    }
    if (e.final) {
      if (e.finish_reason == LLM_FINISH_ERROR || e.finish_reason == LLM_FINISH_CANCELLED) {
        const ApiError err = e.finish_reason == LLM_FINISH_ERROR
                                 ? StatusError(e.status, e.message)
                                 : StatusError(LLM_ERR_SHUTDOWN, "the request was cancelled: the server is shutting down");
        out += Sse(ErrorBody(err));
        continue;
      }
      json j = Envelope(object);
      j["choices"] = json::array({ChunkChoice(e.choice, "", c, false, false, FinishName(e.finish_reason))});
      out += Sse(j);
    }
  }
  return out;
}

json ResponseBuilder::ToolMessage(const Choice& c, const char** finish) const {
  ReplyCalls rc;
  if (!ExtractToolCalls(tools_, c.text, &rc)) return json{{"role", "assistant"}, {"content", c.text}};
  *finish = "tool_calls";
  return json{{"role", "assistant"},
              {"content", rc.content.empty() ? json(nullptr) : json(rc.content)},
              {"tool_calls", rc.calls}};
}

// The end of a tool-mode choice as OpenAI streams it: content (if any), then
// per call a chunk with its index, id, type and name (arguments ""), then its
// arguments in pieces, then the finish reason.
std::string ResponseBuilder::StreamToolEnd(int index, const Choice& c) {
  const char* object = "chat.completion.chunk";
  std::string out;
  if (c.finish_reason == LLM_FINISH_ERROR || c.finish_reason == LLM_FINISH_CANCELLED) {
    const ApiError err = c.finish_reason == LLM_FINISH_ERROR
                             ? StatusError(c.status, c.message)
                             : StatusError(LLM_ERR_SHUTDOWN, "the request was cancelled: the server is shutting down");
    return Sse(ErrorBody(err));
  }
  auto delta_chunk = [&](json delta, bool with_logprobs) {
    json j = Envelope(object);
    json choice = {{"index", index}, {"delta", std::move(delta)}};
    choice["logprobs"] = with_logprobs ? Logprobs(c) : json(nullptr);
    choice["finish_reason"] = nullptr;
    j["choices"] = json::array({std::move(choice)});
    return Sse(j);
  };
  ReplyCalls rc;
  const bool calls = ExtractToolCalls(tools_, c.text, &rc);
  if (!rc.content.empty()) out += delta_chunk({{"content", rc.content}}, !calls);
  for (size_t i = 0; calls && i < rc.calls.size(); ++i) {
    const json& call = rc.calls[i];
    out += delta_chunk({{"tool_calls", json::array({{{"index", i},
                                                      {"id", call["id"]},
                                                      {"type", "function"},
                                                      {"function", {{"name", call["function"]["name"]}, {"arguments", ""}}}}})}},
                       false);
    // Pieces of about 32 bytes, cut at character boundaries.
    const std::string args = call["function"]["arguments"].get<std::string>();
    for (size_t at = 0; at < args.size();) {
      size_t end = std::min(args.size(), at + 32);
      while (end < args.size() && (static_cast<unsigned char>(args[end]) & 0xC0) == 0x80) ++end;
      out += delta_chunk({{"tool_calls", json::array({{{"index", i}, {"function", {{"arguments", args.substr(at, end - at)}}}}})}},
                         false);
      at = end;
    }
  }
  json j = Envelope(object);
  j["choices"] = json::array(
      {ChunkChoice(index, "", c, false, false, calls ? "tool_calls" : FinishName(c.finish_reason))});
  return out + Sse(j);
}

std::string ResponseBuilder::StreamEnd() {
  std::string out;
  if (include_usage_) {
    json j = Envelope(chat_ ? "chat.completion.chunk" : "text_completion");
    j["choices"] = json::array();
    j["usage"] = Usage();
    out += Sse(j);
  }
  return out + "data: [DONE]\n\n";
}

}  // namespace server
