#include "chat/tool_calls.h"

#include <cmath>
#include <cstdio>

#include "util/utf8.h"

namespace llm {
namespace {

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kMistralCalls = "[TOOL_CALLS]";
constexpr std::string_view kMistralArgs = "[ARGS]";
constexpr std::string_view kMistralCallId = "[CALL_ID]";

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

size_t SkipSpace(std::string_view s, size_t pos) {
  while (pos < s.size() && IsSpace(s[pos])) ++pos;
  return pos;
}

Status At(size_t offset, const std::string& what) {
  return InvalidArgument("tool call at byte " + std::to_string(offset) + ": " + what);
}

// The end of the JSON object or array that starts at text[pos] ('{' or '['),
// found by balancing brackets outside strings, so a call can be cut out of
// the text around it before it is parsed. npos when it never closes.
size_t ValueEnd(std::string_view text, size_t pos) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = pos; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') ++depth;
    else if ((c == '}' || c == ']') && --depth == 0) return i + 1;
  }
  return std::string_view::npos;
}

// Parses the JSON value at text[pos] (an object or array), setting *end past it.
StatusOr<Json> ParseValueAt(std::string_view text, size_t pos, size_t* end) {
  if (pos >= text.size() || (text[pos] != '{' && text[pos] != '['))
    return At(pos, "expected a JSON object or array");
  const size_t e = ValueEnd(text, pos);
  if (e == std::string_view::npos) return At(pos, "the JSON is truncated (it never closes)");
  auto j = ParseJson(text.substr(pos, e - pos), kMaxToolCallDepth);
  if (!j.ok()) return At(pos, j.status().message());
  *end = e;
  return j;
}

// {"name": ..., "arguments"|"parameters": {...}} (arguments may be a string
// holding the object's JSON, as some models write it) -> a ToolCall.
StatusOr<ToolCall> CallFromJson(const Json& j, size_t offset) {
  if (!j.is_object()) return At(offset, "a call must be a JSON object");
  const Json* fn = j.Find("function");  // OpenAI's own {"function": {...}} shape
  const Json& call = fn != nullptr && fn->is_object() ? *fn : j;
  const Json* name = call.Find("name");
  if (name == nullptr || !name->is_string() || name->as_string().empty())
    return At(offset, "a call needs a non-empty string \"name\"");
  const Json* args = call.Find("arguments");
  if (args == nullptr) args = call.Find("parameters");
  ToolCall out;
  out.name = name->as_string();
  if (args == nullptr || args->is_null()) {
    out.arguments = Json::Object({});
  } else if (args->is_object()) {
    out.arguments = *args;
  } else if (args->is_string()) {
    auto inner = ParseJson(args->as_string(), kMaxToolCallDepth);
    if (!inner.ok() || !inner->is_object()) return At(offset, "\"arguments\" is a string that is not a JSON object");
    out.arguments = std::move(*inner);
  } else {
    return At(offset, "\"arguments\" must be a JSON object");
  }
  if (const Json* id = j.Find("id"); id != nullptr && id->is_string()) out.id = id->as_string();
  return out;
}

bool LooksLikeCall(const Json& j) {
  return j.is_object() && j.Find("name") != nullptr && j.Find("name")->is_string() &&
         (j.Find("arguments") != nullptr || j.Find("parameters") != nullptr);
}

Status AppendCalls(const Json& list, size_t offset, std::vector<ToolCall>* out) {
  if (!list.is_array()) return At(offset, "expected a list of calls");
  for (const Json& e : list.array()) {
    auto c = CallFromJson(e, offset);
    if (!c.ok()) return c.status();
    out->push_back(std::move(*c));
  }
  return Status::Ok();
}

StatusOr<ParsedReply> ParseHermes(std::string_view text) {
  ParsedReply r;
  size_t pos = 0;
  for (;;) {
    const size_t open = text.find(kHermesOpen, pos);
    r.content.append(text.substr(pos, open == std::string_view::npos ? std::string_view::npos : open - pos));
    if (open == std::string_view::npos) break;
    size_t end = 0;
    const size_t start = SkipSpace(text, open + kHermesOpen.size());
    auto j = ParseValueAt(text, start, &end);
    if (!j.ok()) return j.status();
    auto call = CallFromJson(*j, start);
    if (!call.ok()) return call.status();
    r.calls.push_back(std::move(*call));
    end = SkipSpace(text, end);
    // A reply cut at EOS right after the JSON has no closing tag: the call is whole.
    if (text.substr(end, kHermesClose.size()) == kHermesClose) end += kHermesClose.size();
    else if (end < text.size()) return At(end, "expected </tool_call> after the call");
    pos = end;
  }
  return r;
}

// Llama 3.x: the JSON form ({"name", "parameters"}), optionally after
// <|python_tag|>, several separated by ';'. Without the tag, JSON that is not
// call-shaped is the model's answer, not an error.
StatusOr<ParsedReply> ParseLlama3(std::string_view text) {
  ParsedReply r;
  size_t start = 0;
  const size_t tag = text.find(kPythonTag);
  if (tag != std::string_view::npos) {
    r.content = std::string(text.substr(0, tag));
    start = tag + kPythonTag.size();
  } else {
    start = SkipSpace(text, 0);
    size_t end = 0;
    auto j = start < text.size() && text[start] == '{' ? ParseValueAt(text, start, &end) : StatusOr<Json>(At(0, ""));
    if (!j.ok() || !LooksLikeCall(*j)) {
      r.content = std::string(text);
      return r;
    }
  }
  size_t pos = SkipSpace(text, start);
  while (pos < text.size()) {
    size_t end = 0;
    auto j = ParseValueAt(text, pos, &end);
    if (!j.ok()) return j.status();
    auto call = CallFromJson(*j, pos);
    if (!call.ok()) return call.status();
    r.calls.push_back(std::move(*call));
    pos = SkipSpace(text, end);
    if (pos < text.size() && text[pos] == ';') pos = SkipSpace(text, pos + 1);
  }
  return r;
}

// Mistral: [TOOL_CALLS] then a JSON list of calls (v3 tokenizers), or one
// or more `name[ARGS]{...}` / `name[CALL_ID]id[ARGS]{...}` (v11 and later).
StatusOr<ParsedReply> ParseMistral(std::string_view text) {
  ParsedReply r;
  size_t pos = text.find(kMistralCalls);
  r.content = std::string(text.substr(0, pos));
  while (pos != std::string_view::npos) {
    pos = SkipSpace(text, pos + kMistralCalls.size());
    if (pos < text.size() && text[pos] == '[') {
      size_t end = 0;
      auto j = ParseValueAt(text, pos, &end);
      if (!j.ok()) return j.status();
      if (Status s = AppendCalls(*j, pos, &r.calls); !s.ok()) return s;
      pos = end;
    } else {
      const size_t args = text.find(kMistralArgs, pos);
      if (args == std::string_view::npos) return At(pos, "expected [ARGS] after the function name");
      std::string_view name = text.substr(pos, args - pos);
      ToolCall call;
      if (const size_t id = name.find(kMistralCallId); id != std::string_view::npos) {
        call.id = std::string(Trim(name.substr(id + kMistralCallId.size())));
        name = name.substr(0, id);
      }
      call.name = std::string(Trim(name));
      if (call.name.empty()) return At(pos, "a call needs a function name");
      size_t end = 0;
      const size_t at = SkipSpace(text, args + kMistralArgs.size());
      auto j = ParseValueAt(text, at, &end);
      if (!j.ok()) return j.status();
      if (!j->is_object()) return At(at, "the arguments must be a JSON object");
      call.arguments = std::move(*j);
      r.calls.push_back(std::move(call));
      pos = end;
    }
    pos = SkipSpace(text, pos);
    if (pos >= text.size()) break;
    if (text.substr(pos, kMistralCalls.size()) != kMistralCalls) return At(pos, "unexpected text after the calls");
  }
  return r;
}

// The generic form: the reply is one JSON value. JSON that is not
// call-shaped ({"response": "..."} is the answer itself) is content.
StatusOr<ParsedReply> ParseGeneric(std::string_view text) {
  ParsedReply r;
  const size_t start = SkipSpace(text, 0);
  if (start >= text.size() || (text[start] != '{' && text[start] != '[')) {
    r.content = std::string(text);
    return r;
  }
  size_t end = 0;
  auto j = ParseValueAt(text, start, &end);
  if (!j.ok()) {
    r.content = std::string(text);  // not JSON after all: prose that starts with a bracket
    return r;
  }
  if (SkipSpace(text, end) != text.size()) {
    r.content = std::string(text);
    return r;
  }
  const Json* list = j->is_object() ? j->Find("tool_calls") : nullptr;
  const Json* one = j->is_object() ? j->Find("tool_call") : nullptr;
  if (list != nullptr) {
    if (Status s = AppendCalls(*list, start, &r.calls); !s.ok()) return s;
    if (const Json* c = j->Find("content"); c != nullptr && c->is_string()) r.content = c->as_string();
  } else if (one != nullptr) {
    auto c = CallFromJson(*one, start);
    if (!c.ok()) return c.status();
    r.calls.push_back(std::move(*c));
  } else if (LooksLikeCall(*j)) {
    auto c = CallFromJson(*j, start);
    if (!c.ok()) return c.status();
    r.calls.push_back(std::move(*c));
  } else if (j->is_array() && !j->array().empty() && LooksLikeCall(j->array()[0])) {
    if (Status s = AppendCalls(*j, start, &r.calls); !s.ok()) return s;
  } else if (const Json* resp = j->is_object() && j->size() == 1 ? j->Find("response") : nullptr;
             resp != nullptr && resp->is_string()) {
    r.content = resp->as_string();
  } else {
    r.content = std::string(text);
  }
  return r;
}

void AppendString(std::string_view s, std::string* out) {
  out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          *out += buf;
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

void Append(const Json& j, std::string* out) {
  switch (j.type()) {
    case Json::Type::kNull: *out += "null"; break;
    case Json::Type::kBool: *out += j.as_bool() ? "true" : "false"; break;
    case Json::Type::kNumber: {
      if (j.is_int()) {
        *out += std::to_string(j.as_int());
      } else if (!std::isfinite(j.as_double())) {
        *out += "null";  // unreachable from parsed JSON; JSON has no inf/nan
      } else {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.17g", j.as_double());
        *out += buf;
      }
      break;
    }
    case Json::Type::kString: AppendString(j.as_string(), out); break;
    case Json::Type::kArray: {
      out->push_back('[');
      for (size_t i = 0; i < j.array().size(); ++i) {
        if (i) out->push_back(',');
        Append(j.array()[i], out);
      }
      out->push_back(']');
      break;
    }
    case Json::Type::kObject: {
      out->push_back('{');
      for (size_t i = 0; i < j.object().size(); ++i) {
        if (i) out->push_back(',');
        AppendString(j.object()[i].first, out);
        out->push_back(':');
        Append(j.object()[i].second, out);
      }
      out->push_back('}');
      break;
    }
  }
}

}  // namespace

StatusOr<ParsedReply> ParseToolCalls(ToolFormat format, std::string_view text) {
  if (!IsValidUtf8(text)) return Status(LLM_ERR_INVALID_UTF8, "the text is not valid UTF-8");
  if (format == ToolFormat::kAuto) {
    if (text.find(kHermesOpen) != std::string_view::npos) format = ToolFormat::kHermes;
    else if (text.find(kMistralCalls) != std::string_view::npos) format = ToolFormat::kMistral;
    else if (text.find(kPythonTag) != std::string_view::npos) format = ToolFormat::kLlama3;
    else format = ToolFormat::kGeneric;
  }
  auto parse = [&]() -> StatusOr<ParsedReply> {
    switch (format) {
      case ToolFormat::kHermes: return ParseHermes(text);
      case ToolFormat::kLlama3: return ParseLlama3(text);
      case ToolFormat::kMistral: return ParseMistral(text);
      case ToolFormat::kGeneric: return ParseGeneric(text);
      default: return InvalidArgument("unknown tool-call format " + std::to_string(static_cast<int32_t>(format)));
    }
  };
  StatusOr<ParsedReply> r = parse();
  if (r.ok() && !r->calls.empty()) r->content = std::string(Trim(r->content));
  return r;
}

ToolFormat DetectToolFormat(std::string_view chat_template, std::string_view arch) {
  if (chat_template.find(kHermesOpen) != std::string_view::npos) return ToolFormat::kHermes;
  if (chat_template.find(kMistralCalls) != std::string_view::npos) return ToolFormat::kMistral;
  if (chat_template.find(kPythonTag) != std::string_view::npos ||
      (chat_template.find("<|start_header_id|>") != std::string_view::npos &&
       chat_template.find("parameters") != std::string_view::npos))
    return ToolFormat::kLlama3;
  (void)arch;  // no architecture has a format of its own without its template saying so
  return ToolFormat::kGeneric;
}

std::string JsonToText(const Json& j) {
  std::string out;
  Append(j, &out);
  return out;
}

std::string ParsedReplyToJson(const ParsedReply& reply) {
  std::string out = "{\"content\":";
  AppendString(reply.content, &out);
  out += ",\"tool_calls\":[";
  for (size_t i = 0; i < reply.calls.size(); ++i) {
    const ToolCall& c = reply.calls[i];
    if (i) out.push_back(',');
    out += "{\"name\":";
    AppendString(c.name, &out);
    out += ",\"arguments\":";
    Append(c.arguments, &out);
    if (!c.id.empty()) {
      out += ",\"id\":";
      AppendString(c.id, &out);
    }
    out.push_back('}');
  }
  out += "]}";
  return out;
}

}  // namespace llm
