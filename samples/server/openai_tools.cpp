#include "openai_tools.h"

#include <vector>

#include "llm.h"
#include "openai_request.h"
#include "openai_response.h"
#include "request_limits.h"

namespace server {
namespace {

// OpenAI's rule for function names.
bool ValidName(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
      return false;
  return true;
}

// One function definition ({"name", "description"?, "parameters"?}).
bool ParseFunction(const json& f, const std::string& where, std::vector<json>* out, ApiError* err) {
  if (!f.is_object()) return Bad(err, where, where + " must be an object");
  auto name = f.find("name");
  if (name == f.end() || !name->is_string() || !ValidName(name->get<std::string>()))
    return Bad(err, where + ".name", where + ".name must be 1 to 64 letters, digits, '_' or '-'");
  json tool = {{"name", *name}};
  if (auto d = f.find("description"); d != f.end() && !d->is_null()) {
    if (!d->is_string()) return Bad(err, where + ".description", where + ".description must be a string");
    tool["description"] = *d;
  }
  if (auto p = f.find("parameters"); p != f.end() && !p->is_null()) {
    if (!p->is_object()) return Bad(err, where + ".parameters", where + ".parameters must be a JSON Schema object");
    tool["parameters"] = *p;
  }
  for (const json& t : *out)
    if (t["name"] == tool["name"]) return Bad(err, where + ".name", "two tools are named " + name->dump());
  out->push_back(std::move(tool));
  return true;
}

std::string Join(const std::vector<std::string>& parts) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
  return out;
}

bool HasTool(const ToolSpec& spec, const std::string& name) {
  for (const json& t : spec.tools)
    if (t["name"] == name) return true;
  return false;
}

// {"name": const, "arguments": the tool's parameters}; the parameters'
// $defs / definitions move to the root so their "#/$defs/..." refs resolve.
json CallSchema(const json& tool, json* defs) {
  json params = tool.contains("parameters") ? tool["parameters"] : json{{"type", "object"}};
  for (const char* key : {"$defs", "definitions"}) {
    if (auto d = params.find(key); d != params.end() && d->is_object()) {
      for (auto it = d->begin(); it != d->end(); ++it) (*defs)[key][it.key()] = it.value();
      params.erase(key);
    }
  }
  params.erase("$schema");
  return json{{"type", "object"},
              {"properties", {{"name", {{"const", tool["name"]}}}, {"arguments", params}}},
              {"required", {"name", "arguments"}},
              {"additionalProperties", false}};
}

}  // namespace

bool ParseTools(const json& body, ToolSpec* spec, ApiError* err) {
  if (auto t = body.find("tools"); t != body.end() && !t->is_null()) {
    if (!t->is_array()) return Bad(err, "tools", "tools must be a list");
    for (size_t i = 0; i < t->size(); ++i) {
      const json& e = (*t)[i];
      const std::string where = "tools[" + std::to_string(i) + "]";
      if (!e.is_object() || !e.contains("type") || e["type"] != "function" || !e.contains("function"))
        return Bad(err, where, where + " must be {\"type\": \"function\", \"function\": {...}}");
      if (!ParseFunction(e["function"], where + ".function", &spec->tools, err)) return false;
    }
  }
  if (auto f = body.find("functions"); f != body.end() && !f->is_null()) {  // deprecated form
    if (!f->is_array()) return Bad(err, "functions", "functions must be a list");
    for (size_t i = 0; i < f->size(); ++i)
      if (!ParseFunction((*f)[i], "functions[" + std::to_string(i) + "]", &spec->tools, err)) return false;
  }
  spec->choice = spec->tools.empty() ? ToolSpec::Choice::kNone : ToolSpec::Choice::kAuto;
  const char* choice_param = body.contains("tool_choice") ? "tool_choice" : "function_call";
  if (auto c = body.find(choice_param); c != body.end() && !c->is_null()) {
    if (spec->tools.empty())
      return Bad(err, choice_param, std::string(choice_param) + " is only allowed when tools are given");
    if (c->is_string()) {
      const std::string s = c->get<std::string>();
      if (s == "none") spec->choice = ToolSpec::Choice::kNone;
      else if (s == "auto") spec->choice = ToolSpec::Choice::kAuto;
      else if (s == "required") spec->choice = ToolSpec::Choice::kRequired;
      else return Bad(err, choice_param, std::string(choice_param) + " must be \"none\", \"auto\", \"required\" or a function");
    } else if (c->is_object()) {
      // {"type": "function", "function": {"name": ...}}, or the old {"name": ...}.
      const json& f = c->contains("function") ? (*c)["function"] : *c;
      if (!f.is_object() || !f.contains("name") || !f["name"].is_string())
        return Bad(err, choice_param, std::string(choice_param) + " must name a function: {\"type\": \"function\", \"function\": {\"name\": ...}}");
      spec->named = f["name"].get<std::string>();
      if (!HasTool(*spec, spec->named))
        return Bad(err, choice_param, std::string(choice_param) + " names \"" + spec->named + "\", which is not among the tools");
      spec->choice = ToolSpec::Choice::kNamed;
    } else {
      return Bad(err, choice_param, std::string(choice_param) + " must be a string or an object");
    }
  }
  if (auto p = body.find("parallel_tool_calls"); p != body.end() && !p->is_null()) {
    if (!p->is_boolean()) return Bad(err, "parallel_tool_calls", "parallel_tool_calls must be a boolean");
    spec->parallel = p->get<bool>();
  }
  return true;
}

std::string ToolsSystemPrompt(const ToolSpec& spec) {
  std::string s = "You can call these tools (\"parameters\" is the JSON Schema of a tool's arguments):\n";
  for (const json& t : spec.tools)
    if (spec.choice != ToolSpec::Choice::kNamed || t["name"] == spec.named) s += Dump(t) + "\n";
  s += "To call a tool, reply with only a JSON object {\"name\": <tool name>, \"arguments\": <arguments object>}";
  if (spec.choice == ToolSpec::Choice::kAuto) {
    s += spec.parallel ? " (or a JSON list of such objects to call several), or answer normally without calling one."
                       : ", or answer normally without calling one.";
  } else if (spec.choice == ToolSpec::Choice::kNamed) {
    s += ". Call the tool \"" + spec.named + "\" now.";
  } else {
    s += ". Call one of the tools now.";
  }
  return s;
}

void AddToolsSystemPrompt(const ToolSpec& spec, std::vector<chat::Message>* messages) {
  const std::string prompt = ToolsSystemPrompt(spec);
  if (!messages->empty() && messages->front().role == "system")
    messages->front().content += (messages->front().content.empty() ? "" : "\n\n") + prompt;
  else
    messages->insert(messages->begin(), chat::Message{"system", prompt});
}

json ToolsForTemplate(const ToolSpec& spec) {
  json tools = json::array();
  for (const json& t : spec.tools)
    if (spec.choice != ToolSpec::Choice::kNamed || t["name"] == spec.named)
      tools.push_back({{"type", "function"}, {"function", t}});
  return tools;
}

json ToolCallsForTemplate(const json& tool_calls) {
  json out = json::array();
  for (const json& c : tool_calls) {
    json call = c;
    json& f = call["function"];
    if (auto a = f.find("arguments"); a != f.end() && a->is_string()) {
      json args = ParseBounded(a->get<std::string>(), kMaxValueDepth);
      if (!args.is_discarded()) f["arguments"] = std::move(args);
    }
    out.push_back(std::move(call));
  }
  return out;
}

json ForcedCallSchema(const ToolSpec& spec) {
  json defs = json::object();
  json options = json::array();
  for (const json& t : spec.tools)
    if (spec.choice != ToolSpec::Choice::kNamed || t["name"] == spec.named) options.push_back(CallSchema(t, &defs));
  json schema = options.size() == 1 ? options[0] : json{{"anyOf", options}};
  for (auto it = defs.begin(); it != defs.end(); ++it) schema[it.key()] = it.value();
  return schema;
}

bool ToolCallsAsText(const json& tool_calls, std::string* text, std::string* problem) {
  if (!tool_calls.is_array()) {
    *problem = "tool_calls must be a list";
    return false;
  }
  std::vector<std::string> calls;
  for (const json& c : tool_calls) {
    const json* f = c.is_object() && c.contains("function") ? &c["function"] : nullptr;
    if (f == nullptr || !f->is_object() || !f->contains("name") || !(*f)["name"].is_string()) {
      *problem = "each tool call needs function.name";
      return false;
    }
    json args = json::object();
    if (auto a = f->find("arguments"); a != f->end() && a->is_string()) {
      if (NestingDepth(a->get<std::string>(), kMaxValueDepth) > kMaxValueDepth) {
        *problem = "function.arguments nests deeper than " + std::to_string(kMaxValueDepth) + " levels (the limit)";
        return false;
      }
      args = ParseBounded(a->get<std::string>(), kMaxValueDepth);
      if (args.is_discarded()) args = *a;  // keep what the client sent, even if not JSON
    } else if (a != f->end() && a->is_object()) {
      args = *a;
    }
    // Written by hand: the name first, as models write it (json sorts keys).
    calls.push_back("{\"name\": " + Dump((*f)["name"]) + ", \"arguments\": " + Dump(args) + "}");
  }
  *text = calls.size() == 1 ? calls[0] : "[" + Join(calls) + "]";
  return true;
}

bool ExtractToolCalls(const ToolSpec& spec, const std::string& text, ReplyCalls* out) {
  out->content = text;
  out->calls.clear();
  if (!spec.active()) return false;
  const int32_t format = spec.forced() ? LLM_TOOL_FORMAT_GENERIC : LLM_TOOL_FORMAT_AUTO;
  std::string buf(text.size() * 2 + 256, '\0');
  size_t n = 0;
  llm_status s = llm_chat_parse_tool_calls(format, text.data(), text.size(), buf.data(), buf.size(), &n);
  if (s == LLM_ERR_BUFFER_TOO_SMALL) {
    buf.resize(n);
    s = llm_chat_parse_tool_calls(format, text.data(), text.size(), buf.data(), buf.size(), &n);
  }
  if (s != LLM_OK) return false;  // not a well-formed call: the reply is content
  const json parsed = json::parse(buf.substr(0, n), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.contains("tool_calls") || parsed["tool_calls"].empty()) return false;
  std::vector<json> calls;
  for (const json& c : parsed["tool_calls"]) {
    const std::string name = c["name"].get<std::string>();
    // A call of a tool the request did not offer is the model's invention.
    if (!HasTool(spec, name) || (spec.choice == ToolSpec::Choice::kNamed && name != spec.named)) return false;
    calls.push_back({{"id", NewId("call_")},
                     {"type", "function"},
                     {"function", {{"name", name}, {"arguments", Dump(c["arguments"])}}}});
    if (!spec.parallel) break;
  }
  out->calls = std::move(calls);
  out->content = parsed["content"].get<std::string>();
  return true;
}

}  // namespace server
