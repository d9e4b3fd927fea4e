#include "native_routes.h"

#include <limits>
#include <vector>

#include "http_body.h"
#include "messages_api.h"
#include "openai_response.h"
#include "prompt_render.h"

namespace server {
namespace {

bool Bad(httplib::Response& res, const std::string& param, const std::string& message) {
  ApiError e;
  e.param = param;
  e.message = message;
  SendError(res, e);
  return false;
}

// An optional boolean field; false (400 sent) when present and not boolean.
bool Flag(const json& body, const char* name, bool fallback, bool* out, httplib::Response& res) {
  *out = fallback;
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return true;
  if (!it->is_boolean()) return Bad(res, name, std::string(name) + " must be a boolean");
  *out = it->get<bool>();
  return true;
}

std::string Piece(llm_ctx* ctx, llm_token t) {
  char buf[256];
  size_t n = 0;
  if (llm_detokenize(ctx, &t, 1, LLM_DETOKENIZE_RENDER_SPECIAL, buf, sizeof buf, &n) != LLM_OK) return "";
  return std::string(buf, n);
}

void Tokenize(const NativeInfo& info, const json& body, httplib::Response& res) {
  auto c = body.find("content");
  if (c == body.end() || !c->is_string()) return (void)Bad(res, "content", "content must be a string");
  bool add_special = false, parse_special = true, with_pieces = false;
  if (!Flag(body, "add_special", false, &add_special, res) || !Flag(body, "parse_special", true, &parse_special, res) ||
      !Flag(body, "with_pieces", false, &with_pieces, res))
    return;
  const std::string& text = c->get_ref<const std::string&>();
  const uint32_t flags = (add_special ? uint32_t{LLM_TOKENIZE_ADD_SPECIAL} : 0u) | (parse_special ? uint32_t{LLM_TOKENIZE_PARSE_SPECIAL} : 0u);
  std::vector<llm_token> ids(text.size() + 8);
  int32_t n = 0;
  llm_status s = llm_tokenize(info.ctx, text.data(), text.size(), flags, ids.data(), static_cast<int32_t>(ids.size()), &n);
  if (s == LLM_ERR_BUFFER_TOO_SMALL) {
    ids.resize(static_cast<size_t>(n));
    s = llm_tokenize(info.ctx, text.data(), text.size(), flags, ids.data(), n, &n);
  }
  if (s != LLM_OK) {
    ApiError e = StatusError(s, llm_last_error());
    e.param = "content";
    return SendError(res, e);
  }
  ids.resize(static_cast<size_t>(n));
  json tokens = json::array();
  for (llm_token t : ids) {
    if (!with_pieces) {
      tokens.push_back(t);
      continue;
    }
    // A piece that is not whole UTF-8 (a byte token) is given as its bytes.
    const std::string p = Piece(info.ctx, t);
    json piece = json(p);
    try {
      (void)piece.dump();
    } catch (const json::exception&) {
      piece = json::array();
      for (unsigned char b : p) piece.push_back(b);
    }
    tokens.push_back({{"id", t}, {"piece", piece}});
  }
  SendJson(res, 200, {{"tokens", tokens}});
}

void Detokenize(const NativeInfo& info, const json& body, httplib::Response& res) {
  auto t = body.find("tokens");
  if (t == body.end() || !t->is_array()) return (void)Bad(res, "tokens", "tokens must be a list of token ids");
  std::vector<llm_token> ids;
  for (const json& v : *t) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > std::numeric_limits<llm_token>::max())
      return (void)Bad(res, "tokens", "tokens must be a list of token ids");
    ids.push_back(static_cast<llm_token>(v.get<int64_t>()));
  }
  std::string out(ids.size() * 16 + 16, '\0');
  size_t n = 0;
  llm_status s = llm_detokenize(info.ctx, ids.data(), static_cast<int32_t>(ids.size()), 0, out.data(), out.size(), &n);
  if (s == LLM_ERR_BUFFER_TOO_SMALL) {
    out.resize(n);
    s = llm_detokenize(info.ctx, ids.data(), static_cast<int32_t>(ids.size()), 0, out.data(), out.size(), &n);
  }
  if (s != LLM_OK) {
    ApiError e = StatusError(s, llm_last_error());
    e.param = "tokens";
    return SendError(res, e);
  }
  out.resize(n);
  SendJson(res, 200, {{"content", out}});
}

void ApplyTemplate(const NativeInfo& info, const json& body, httplib::Response& res) {
  Generation g;
  ApiError err;
  // The chat request's own parser, so that messages and tools are read
  // exactly as /v1/chat/completions reads them.
  json request = json::object();
  for (const char* key : {"messages", "tools", "tool_choice", "functions", "function_call"})
    if (auto it = body.find(key); it != body.end()) request[key] = *it;
  try {
    if (!ParseChatRequest(request, &g, &err)) return SendError(res, err);
  } catch (const json::exception& e) {
    return (void)Bad(res, "", std::string("the request has a field of the wrong type (") + e.what() + ")");
  }
  if (!RenderChatPrompt(*info.prompter, &g, &err)) return SendError(res, err);
  SendJson(res, 200, {{"prompt", g.prompts[0].text}});
}

// The number of tokens of a rendered or plain prompt; false (error sent) when
// the tokenizer refuses it.
bool CountPromptTokens(const NativeInfo& info, const PromptInput& p, int32_t* n, httplib::Response& res) {
  if (p.is_tokens) {
    *n = static_cast<int32_t>(p.tokens.size());
    return true;
  }
  std::vector<llm_token> ids(p.text.size() + 8);  // a token is at least one byte (+ BOS/EOS)
  const llm_status s =
      llm_tokenize(info.ctx, p.text.data(), p.text.size(), p.flags, ids.data(), static_cast<int32_t>(ids.size()), n);
  if (s == LLM_OK) return true;
  SendError(res, StatusError(s, llm_last_error()));
  return false;
}

// Anthropic's POST /v1/messages/count_tokens: the Messages request's prompt,
// rendered as /v1/messages renders it, counted.
void CountTokens(const NativeInfo& info, const json& body, httplib::Response& res) {
  if (!body.is_object()) return (void)Bad(res, "", "the request body must be a JSON object");
  json request = body;
  if (!request.contains("max_tokens")) request["max_tokens"] = 1;  // not part of a count request
  request.erase("stream");
  Generation g;
  ApiError err;
  json chat;
  try {
    if (!MessagesToChat(request, &chat, &err) || !ParseChatRequest(chat, &g, &err)) return SendError(res, err);
  } catch (const json::exception& e) {
    return (void)Bad(res, "", std::string("the request has a field of the wrong type (") + e.what() + ")");
  }
  if (!RenderChatPrompt(*info.prompter, &g, &err)) return SendError(res, err);
  int32_t n = 0;
  if (!CountPromptTokens(info, g.prompts[0], &n, res)) return;
  SendJson(res, 200, {{"input_tokens", n}});
}

}  // namespace

void RegisterNativeRoutes(httplib::Server* svr, NativeInfo info) {
  auto post = [svr](const char* path, void (*handler)(const NativeInfo&, const json&, httplib::Response&),
                    const NativeInfo& info) {
    svr->Post(path, [info, handler](const httplib::Request& req, httplib::Response& res,
                                    const httplib::ContentReader& reader) {
      json body;
      size_t bytes = 0;
      if (!ReadJsonBody(req, reader, res, &body, &bytes)) return;
      if (!body.is_object()) return (void)Bad(res, "", "the request body must be a JSON object");
      handler(info, body, res);
    });
  };
  post("/tokenize", Tokenize, info);
  post("/detokenize", Detokenize, info);
  post("/apply-template", ApplyTemplate, info);
  post("/v1/messages/count_tokens", CountTokens, info);
  svr->Get("/props", [info](const httplib::Request&, httplib::Response& res) {
    const RequestDefaults& d = info.defaults;
    json params = {{"n_predict", d.n_predict},
                   {"seed", d.seed ? json(*d.seed) : json(0xFFFFFFFFu)},
                   {"temperature", d.temperature ? *d.temperature : 0.8},
                   {"top_k", d.top_k ? *d.top_k : 40},
                   {"top_p", d.top_p ? *d.top_p : 0.95},
                   {"min_p", d.min_p ? *d.min_p : 0.05},
                   {"repeat_penalty", d.repeat_penalty ? *d.repeat_penalty : 1.0}};
    SendJson(res, 200,
             {{"default_generation_settings", {{"n_ctx", info.n_ctx}, {"model", info.model_name}, {"params", params}}},
              {"model_alias", info.model_name},
              {"model_path", info.model_path.empty() ? std::string("stories260K.gguf (built in)") : info.model_path},
              {"total_slots", info.total_slots},
              {"build_info", std::string("llmrt ") + llm_version()},
              {"modalities", {{"vision", false}, {"audio", false}}}});
  });
  svr->Get("/slots", [info](const httplib::Request&, httplib::Response& res) {
    if (!info.slots) {
      SendJson(res, 501, {{"error", {{"code", 501}, {"message", "This server does not support the slots endpoint (--no-slots)."},
                                      {"type", "not_supported_error"}}}});
      return;
    }
    llm_stats s{};
    s.struct_size = sizeof s;
    llm_get_stats(info.ctx, &s);
    json slots = json::array();
    for (int32_t i = 0; i < info.total_slots; ++i)
      slots.push_back({{"id", i}, {"id_task", -1}, {"n_ctx", info.n_ctx}, {"speculative", false},
                       {"is_processing", i < s.running}});
    SendJson(res, 200, slots);
  });
}

}  // namespace server
