#include "openai_request.h"

#include "image_url.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string_view>

#include "../../src/core/defaults.h"
#include "request_limits.h"

namespace server {
namespace {

constexpr int kMaxChoices = 64;  // llm_request.n's limit, over all prompts together
constexpr size_t kMaxStops = 16;

bool Number(const json& body, const char* name, double lo, double hi, bool lo_open, double* out, ApiError* err) {
  const json* f = Field(body, name);
  if (f == nullptr) return true;
  if (!f->is_number()) return Bad(err, name, std::string(name) + " must be a number");
  double v = f->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi || (lo_open && v == lo)) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s must be in %c%g, %g] (got %g)", name, lo_open ? '(' : '[', lo, hi, v);
    return Bad(err, name, buf);
  }
  *out = v;
  return true;
}

bool Integer(const json& body, const char* name, int64_t lo, int64_t hi, int64_t* out, ApiError* err) {
  const json* f = Field(body, name);
  if (f == nullptr) return true;
  if (!f->is_number_integer()) return Bad(err, name, std::string(name) + " must be an integer");
  int64_t v = f->is_number_unsigned() && f->get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())
                  ? std::numeric_limits<int64_t>::max()
                  : f->get<int64_t>();
  if (v < lo || v > hi)
    return Bad(err, name,
               std::string(name) + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "] (got " +
                   std::to_string(v) + ")");
  *out = v;
  return true;
}

bool Bool(const json& body, const char* name, bool* out, ApiError* err) {
  const json* f = Field(body, name);
  if (f == nullptr) return true;
  if (!f->is_boolean()) return Bad(err, name, std::string(name) + " must be a boolean");
  *out = f->get<bool>();
  return true;
}

bool TokenListOrEmpty(const json& a, std::vector<llm_token>* out) {
  for (const json& t : a) {
    if (!t.is_number_integer()) return false;
    int64_t v = t.get<int64_t>();
    if (v < 0 || v > std::numeric_limits<llm_token>::max()) return false;
    out->push_back(static_cast<llm_token>(v));
  }
  return true;
}

bool SetConstraint(Generation* g, const char* param, int32_t kind, std::string text, ApiError* err) {
  if (g->constraint_kind != LLM_CONSTRAINT_NONE)
    return Bad(err, param, std::string(param) + " cannot be combined with " + g->constraint_param +
                               ": a request has at most one output constraint");
  g->constraint_kind = kind;
  g->constraint = std::move(text);
  g->constraint_param = param;
  return true;
}

// response_format (OpenAI) and the extensions regex / grammar / choice (with
// vLLM's guided_* names as aliases): what the output must match.
// `field` names the schema itself (in a shape error), `param` the request
// field a compile error names.
bool SchemaConstraint(Generation* g, const char* field, const char* param, const json& schema, ApiError* err) {
  if (!schema.is_object() && !schema.is_boolean())
    return Bad(err, field, std::string(field) + " must be a JSON Schema (an object or a boolean)");
  return SetConstraint(g, param, LLM_CONSTRAINT_JSON_SCHEMA, schema.dump(), err);
}

bool ParseConstraint(const json& body, Generation* g, ApiError* err) {
  if (const json* rf = Field(body, "response_format")) {
    if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string())
      return Bad(err, "response_format", "response_format must be an object with a string \"type\"");
    const std::string type = (*rf)["type"].get<std::string>();
    if (type == "json_object") {
      // llama.cpp's extension: a "schema" beside the type holds the object to it
      if (const json* schema = Field(*rf, "schema")) {
        if (!SchemaConstraint(g, "response_format.schema", "response_format.schema", *schema, err)) return false;
      } else if (!SetConstraint(g, "response_format", LLM_CONSTRAINT_JSON_OBJECT, "", err)) {
        return false;
      }
    } else if (type == "json_schema") {
      const json* js = Field(*rf, "json_schema");
      const json* schema = nullptr;
      if (js != nullptr) {
        if (!js->is_object())
          return Bad(err, "response_format.json_schema", "response_format.json_schema must be an object");
        // OpenAI requires a name; llama.cpp and vLLM do not: checked when given
        if (const json* name = Field(*js, "name");
            name != nullptr && (!name->is_string() || name->get_ref<const std::string&>().size() > kMaxNameBytes))
          return Bad(err, "response_format.json_schema.name",
                     "response_format.json_schema.name must be a string of at most " + std::to_string(kMaxNameBytes) + " bytes");
        if (const json* strict = Field(*js, "strict"); strict != nullptr && !strict->is_boolean())
          return Bad(err, "response_format.json_schema.strict", "response_format.json_schema.strict must be a boolean");
        schema = Field(*js, "schema");
      } else {
        schema = Field(*rf, "schema");  // llama.cpp's shorter form
        if (schema == nullptr)
          return Bad(err, "response_format.json_schema", "response_format.json_schema must be an object");
      }
      // strict or not, the output is held to the schema: the constraint is exact.
      const json any = json::object();
      if (!SchemaConstraint(g, js != nullptr ? "response_format.json_schema.schema" : "response_format.schema",
                            "response_format", schema == nullptr ? any : *schema, err))
        return false;
    } else if (type != "text") {
      return Bad(err, "response_format.type", "response_format.type must be \"text\", \"json_object\" or \"json_schema\"");
    }
  }
  // llama.cpp's extension: the schema as a top-level field
  if (const json* schema = Field(body, "json_schema"); schema != nullptr && !schema->is_null())
    if (!SchemaConstraint(g, "json_schema", "json_schema", *schema, err)) return false;
  for (const char* name : {"regex", "guided_regex", "grammar", "guided_grammar"}) {
    const json* f = Field(body, name);
    if (f == nullptr) continue;
    if (!f->is_string() || f->get<std::string>().empty())
      return Bad(err, name, std::string(name) + " must be a non-empty string");
    const int32_t kind = std::string_view(name).ends_with("regex") ? LLM_CONSTRAINT_REGEX : LLM_CONSTRAINT_GRAMMAR;
    if (!SetConstraint(g, name, kind, f->get<std::string>(), err)) return false;
  }
  for (const char* name : {"choice", "guided_choice"}) {
    const json* f = Field(body, name);
    if (f == nullptr) continue;
    if (!f->is_array() || f->empty() || f->size() > 4096)
      return Bad(err, name, std::string(name) + " must be a list of 1 to 4096 strings");
    for (const json& c : *f) {
      if (!c.is_string()) return Bad(err, name, std::string(name) + " must be a list of strings");
      g->choices.push_back(c.get<std::string>());
    }
    if (!SetConstraint(g, name, LLM_CONSTRAINT_CHOICE, "", err)) return false;
  }
  return true;
}

// Fields both endpoints share: sampling, stop, n, stream, extensions.
bool ParseCommon(const json& body, Generation* g, ApiError* err) {
  if (!body.is_object()) return Bad(err, "", "the request body must be a JSON object");
  if (const json* m = Field(body, "model"); m != nullptr && (!m->is_string() || m->get_ref<const std::string&>().size() > kMaxNameBytes))
    return Bad(err, "model", "model must be a string of at most " + std::to_string(kMaxNameBytes) + " bytes");

  llm_sampling_params_init(&g->sampling);
  // OpenAI's defaults, not the library's: temperature 1, no nucleus cut, and
  // no top-k / min-p unless the request asks for them (extensions, as vLLM).
  double temperature = 1.0, top_p = 1.0, min_p = 0.0, rep = 1.0, freq = 0.0, pres = 0.0;
  int64_t top_k = 0, n = 1, priority = 0;
  if (!Number(body, "temperature", 0, 2, false, &temperature, err)) return false;
  if (!Number(body, "top_p", 0, 1, true, &top_p, err)) return false;
  if (!Number(body, "min_p", 0, 1, false, &min_p, err)) return false;
  if (!Number(body, "repetition_penalty", 0, 10, true, &rep, err)) return false;
  if (!Number(body, "frequency_penalty", -2, 2, false, &freq, err)) return false;
  if (!Number(body, "presence_penalty", -2, 2, false, &pres, err)) return false;
  if (!Integer(body, "top_k", -1, 1 << 20, &top_k, err)) return false;
  if (!Integer(body, "n", 1, kMaxChoices, &n, err)) return false;
  if (!Integer(body, "priority", -(1 << 30), 1 << 30, &priority, err)) return false;
  g->sampling.temperature = static_cast<float>(temperature);
  g->sampling.top_p = static_cast<float>(top_p);
  g->sampling.min_p = static_cast<float>(min_p);
  g->sampling.repetition_penalty = static_cast<float>(rep);
  g->sampling.frequency_penalty = static_cast<float>(freq);
  g->sampling.presence_penalty = static_cast<float>(pres);
  g->sampling.top_k = top_k < 0 ? 0 : static_cast<int32_t>(top_k);
  g->n = static_cast<int>(n);
  g->priority = static_cast<int32_t>(priority);

  g->sampling.seed = LLM_SEED_RANDOM;
  if (const json* s = Field(body, "seed")) {
    if (!s->is_number_integer()) return Bad(err, "seed", "seed must be an integer");
    g->sampling.seed = s->is_number_unsigned() ? s->get<uint64_t>() : static_cast<uint64_t>(s->get<int64_t>());
  }

  if (const json* s = Field(body, "stop")) {
    if (s->is_string()) {
      g->stop.push_back(s->get<std::string>());
    } else if (s->is_array()) {
      if (s->size() > kMaxStops) return Bad(err, "stop", "stop takes at most " + std::to_string(kMaxStops) + " strings");
      for (const json& e : *s) {
        if (!e.is_string()) return Bad(err, "stop", "stop must be a string or a list of strings");
        g->stop.push_back(e.get<std::string>());
      }
    } else {
      return Bad(err, "stop", "stop must be a string or a list of strings");
    }
    std::erase_if(g->stop, [](const std::string& x) { return x.empty(); });
  }

  if (!Bool(body, "stream", &g->stream, err)) return false;
  if (const json* so = Field(body, "stream_options")) {
    if (!so->is_object()) return Bad(err, "stream_options", "stream_options must be an object");
    if (!Bool(*so, "include_usage", &g->include_usage, err)) return false;
  }
  if (!Bool(body, "ignore_eos", &g->ignore_eos, err)) return false;
  if (!Bool(body, "keep_kv", &g->keep_kv, err)) return false;
  if (!Bool(body, "whitespace_flexible", &g->whitespace_flexible, err)) return false;

  // {"token id": bias in [-100, 100]}; ids outside the vocabulary are
  // reported by llm_submit.
  if (const json* lb = Field(body, "logit_bias")) {
    if (!lb->is_object()) return Bad(err, "logit_bias", "logit_bias must be an object mapping token ids to biases");
    for (auto it = lb->begin(); it != lb->end(); ++it) {
      const std::string& key = it.key();
      char* end = nullptr;
      const long long id = std::strtoll(key.c_str(), &end, 10);
      if (key.empty() || *end != '\0' || id < 0 || id > std::numeric_limits<llm_token>::max())
        return Bad(err, "logit_bias", "logit_bias keys must be token ids (got \"" + key + "\")");
      if (!it.value().is_number() || !(it.value().get<double>() >= -100.0 && it.value().get<double>() <= 100.0))
        return Bad(err, "logit_bias", "logit_bias[\"" + key + "\"] must be a number in [-100, 100]");
      g->logit_bias.push_back({static_cast<llm_token>(id), it.value().get<float>()});
    }
  }
  if (const json* st = Field(body, "stop_token_ids")) {
    if (!st->is_array() || st->size() > 1024 || !TokenListOrEmpty(*st, &g->stop_token_ids))
      return Bad(err, "stop_token_ids", "stop_token_ids must be a list of at most 1024 token ids");
  }
  int64_t min_tokens = 0;
  if (!Integer(body, "min_tokens", 0, std::numeric_limits<int32_t>::max(), &min_tokens, err)) return false;
  g->min_tokens = static_cast<int32_t>(min_tokens);
  return ParseConstraint(body, g, err);
}

bool MaxTokens(const json& body, const char* name, int32_t* out, ApiError* err) {
  int64_t v = 0;
  if (!Integer(body, name, 1, std::numeric_limits<int32_t>::max(), &v, err)) return false;
  if (v > 0) *out = static_cast<int32_t>(v);
  return true;
}

bool TokenList(const json& a, std::vector<llm_token>* out) {
  for (const json& t : a) {
    if (!t.is_number_integer()) return false;
    int64_t v = t.get<int64_t>();
    if (v < 0 || v > std::numeric_limits<llm_token>::max()) return false;
    out->push_back(static_cast<llm_token>(v));
  }
  return !out->empty();
}

}  // namespace

bool Bad(ApiError* err, const std::string& param, const std::string& message) {
  err->http_status = 400;
  err->type = "invalid_request_error";
  err->param = param;
  err->message = message;
  return false;
}

const json* Field(const json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

json ErrorBody(const ApiError& e) {
  json err = {{"message", e.message}, {"type", e.type}, {"param", nullptr}, {"code", nullptr}};
  if (!e.param.empty()) err["param"] = e.param;
  if (!e.code.empty()) err["code"] = e.code;
  return json{{"error", err}};
}

ApiError StatusError(llm_status s, const std::string& message) {
  ApiError e;
  e.message = message.empty() ? llm_status_str(s) : message;
  switch (s) {
    case LLM_ERR_INVALID_ARGUMENT:
    case LLM_ERR_NULL_ARGUMENT:
    case LLM_ERR_INVALID_UTF8:
      e.http_status = 400;
      break;
    case LLM_ERR_CONTEXT_OVERFLOW:
      e.http_status = 400;
      e.code = "context_length_exceeded";
      break;
    case LLM_ERR_KV_MISMATCH:  // a KV file the client named: another model or geometry
    case LLM_ERR_KV_CORRUPT:   // ... or damaged bytes
      e.http_status = 400;
      e.code = llm_status_str(s);
      break;
    case LLM_ERR_BUSY:
      e.http_status = 503;
      e.type = "server_error";
      e.code = "server_busy";
      break;
    case LLM_ERR_SHUTDOWN:
      e.http_status = 503;
      e.type = "server_error";
      e.code = "shutting_down";
      break;
    default:
      e.http_status = 500;
      e.type = "server_error";
      e.code = llm_status_str(s);
      break;
  }
  return e;
}

int32_t ReasoningFormatByName(const std::string& name) {
  if (name == "none") return LLM_REASONING_NONE;
  if (name == "deepseek") return LLM_REASONING_DEEPSEEK;
  if (name == "harmony") return LLM_REASONING_HARMONY;
  if (name == "auto") return LLM_REASONING_AUTO;
  return -1;
}

bool ParseChatRequest(const json& body, Generation* g, ApiError* err) {
  g->chat = true;
  if (!ParseCommon(body, g, err)) return false;
  if (!MaxTokens(body, "max_tokens", &g->max_tokens, err)) return false;
  if (!MaxTokens(body, "max_completion_tokens", &g->max_tokens, err)) return false;  // the newer name wins
  if (!Bool(body, "logprobs", &g->logprobs, err)) return false;
  int64_t top_logprobs = 0;
  if (!Integer(body, "top_logprobs", 0, 20, &top_logprobs, err)) return false;
  if (top_logprobs > 0 && !g->logprobs)
    return Bad(err, "top_logprobs", "top_logprobs needs logprobs set to true");
  g->top_logprobs = static_cast<int32_t>(top_logprobs);
  if (!ParseTools(body, &g->tools, err)) return false;
  if (g->tools.forced()) {
    // The call is forced by a schema over the allowed tools' arguments.
    const char* param = body.contains("tool_choice") ? "tool_choice" : "function_call";
    if (!SetConstraint(g, param, LLM_CONSTRAINT_JSON_SCHEMA, ForcedCallSchema(g->tools).dump(), err)) return false;
  }

  if (const json* rf = Field(body, "reasoning_format")) {
    g->reasoning_format = rf->is_string() ? ReasoningFormatByName(rf->get<std::string>()) : -1;
    if (g->reasoning_format < 0)
      return Bad(err, "reasoning_format", "reasoning_format must be one of \"none\", \"deepseek\", \"harmony\", \"auto\"");
  }
  if (const json* kw = Field(body, "chat_template_kwargs")) {
    if (!kw->is_object()) return Bad(err, "chat_template_kwargs", "chat_template_kwargs must be an object");
    for (const auto& item : kw->items()) {
      const std::string& k = item.key();
      if (k == "messages" || k == "tools" || k == "add_generation_prompt" || k == "bos_token" || k == "eos_token")
        return Bad(err, "chat_template_kwargs", "chat_template_kwargs cannot set \"" + k + "\"");
      g->template_vars[k] = item.value();
    }
  }
  const json* msgs = Field(body, "messages");
  if (msgs == nullptr) return Bad(err, "messages", "messages is required");
  if (!msgs->is_array() || msgs->empty()) return Bad(err, "messages", "messages must be a non-empty list");
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return Bad(err, where, where + " must be an object");
    const json* role = Field(m, "role");
    if (role == nullptr || !role->is_string()) return Bad(err, where + ".role", where + ".role must be a string");
    chat::Message msg;
    msg.role = role->get<std::string>();
    if (msg.role == "developer") msg.role = "system";  // OpenAI's newer name for it
    if (msg.role == "function") msg.role = "tool";     // the deprecated name of a tool result
    json items = json::array();  // the content as the template's items, when it holds pictures
    const size_t images_before = g->images.size();
    if (const json* c = Field(m, "content")) {
      if (c->is_string()) {
        msg.content = c->get<std::string>();
      } else if (c->is_array()) {
        for (const json& part : *c) {
          const json* type = part.is_object() ? Field(part, "type") : nullptr;
          if (type != nullptr && *type == "image_url") {
            std::string bytes, remote, problem;
            if (!ImageUrlBytes(part, g->allow_remote_images, &bytes, &remote, &problem))
              return Bad(err, where + ".content", where + ".content: " + problem);
            if (!remote.empty()) g->remote_images.push_back({g->images.size(), std::move(remote), where + ".content"});
            g->images.push_back(std::move(bytes));
            if (g->images.size() > static_cast<size_t>(llm::defaults::kMaxImagesPerRequest))
              return Bad(err, where + ".content",
                         "a request may hold at most " + std::to_string(llm::defaults::kMaxImagesPerRequest) + " images");
            items.push_back({{"type", "image"}});
            continue;
          }
          const json* text = part.is_object() ? Field(part, "text") : nullptr;
          if (type == nullptr || *type != "text" || text == nullptr || !text->is_string())
            return Bad(err, where + ".content", "only text and image_url content parts are supported by this server");
          if (!msg.content.empty()) msg.content += "\n";
          msg.content += text->get<std::string>();
          items.push_back({{"type", "text"}, {"text", *text}});
        }
      } else {
        return Bad(err, where + ".content", where + ".content must be a string or a list of content parts");
      }
    }
    json raw = m;
    raw["role"] = msg.role;
    raw["content"] = msg.content;  // text parts joined; null as "" (templates test `in content`)
    if (g->images.size() > images_before) raw["content"] = std::move(items);  // the template places the pictures
    // An assistant's earlier calls, as the text the model wrote for them.
    if (const json* tc = Field(m, "tool_calls"); tc != nullptr && !tc->empty()) {
      std::string text, problem;
      if (!ToolCallsAsText(*tc, &text, &problem)) return Bad(err, where + ".tool_calls", where + ": " + problem);
      msg.content += msg.content.empty() ? text : "\n" + text;
      raw["tool_calls"] = ToolCallsForTemplate(*tc);
      g->tool_history = true;
    }
    if (msg.role == "tool") g->tool_history = true;
    g->raw_messages.push_back(std::move(raw));
    g->messages.push_back(std::move(msg));
  }
  g->prompts.resize(1);  // rendered by the handler
  return true;
}

bool ParseCompletionRequest(const json& body, Generation* g, ApiError* err) {
  g->chat = false;
  if (!ParseCommon(body, g, err)) return false;
  g->max_tokens = 16;  // OpenAI's default for this endpoint
  if (!MaxTokens(body, "max_tokens", &g->max_tokens, err)) return false;
  if (const json* lp = Field(body, "logprobs")) {
    if (!lp->is_number_integer() || lp->get<int64_t>() < 0 || lp->get<int64_t>() > 5)
      return Bad(err, "logprobs", "logprobs must be an integer in [0, 5]");
    g->logprobs = true;
    g->top_logprobs = static_cast<int32_t>(lp->get<int64_t>());
  }
  bool echo = false;
  if (!Bool(body, "echo", &echo, err)) return false;
  if (echo) return Bad(err, "echo", "echo is not supported by this server");
  if (const json* s = Field(body, "suffix"); s != nullptr && !(s->is_string() && s->get<std::string>().empty()))
    return Bad(err, "suffix", "suffix is not supported by this server");
  int64_t best_of = g->n;
  if (!Integer(body, "best_of", 1, kMaxChoices, &best_of, err)) return false;
  if (best_of != g->n) return Bad(err, "best_of", "best_of other than n is not supported by this server");

  // prompt: "text" | ["text", ...] | [id, ...] | [[id, ...], ...]
  const json* p = Field(body, "prompt");
  if (p == nullptr) return Bad(err, "prompt", "prompt is required");
  auto bad_prompt = [&] {
    return Bad(err, "prompt", "prompt must be a string, a list of strings, a list of token ids or a list of lists of token ids");
  };
  if (p->is_string()) {
    PromptInput in;
    in.text = p->get<std::string>();
    g->prompts.push_back(std::move(in));
  } else if (p->is_array() && !p->empty()) {
    if ((*p)[0].is_number_integer()) {
      PromptInput in;
      in.is_tokens = true;
      if (!TokenList(*p, &in.tokens)) return bad_prompt();
      g->prompts.push_back(std::move(in));
    } else {
      for (const json& e : *p) {
        PromptInput in;
        if (e.is_string()) {
          in.text = e.get<std::string>();
        } else if (e.is_array()) {
          in.is_tokens = true;
          if (!TokenList(e, &in.tokens)) return bad_prompt();
        } else {
          return bad_prompt();
        }
        g->prompts.push_back(std::move(in));
      }
    }
  } else {
    return bad_prompt();
  }
  for (const PromptInput& in : g->prompts)
    if (!in.is_tokens && in.text.empty()) return Bad(err, "prompt", "prompt must not be empty");
  if (g->prompts.size() * static_cast<size_t>(g->n) > kMaxChoices)
    return Bad(err, "n", "prompts x n must be at most " + std::to_string(kMaxChoices));
  return true;
}

}  // namespace server
