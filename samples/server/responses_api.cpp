#include "responses_api.h"

#include <chrono>

namespace server {
namespace {

// The text of a content list ([{type: input_text|output_text|text, text}]) or string.
bool ContentText(const json& c, const std::string& where, std::string* out, ApiError* err) {
  if (c.is_string()) {
    *out = c.get<std::string>();
    return true;
  }
  if (!c.is_array()) return Bad(err, where, where + " must be a string or a list of content parts");
  for (const json& part : c) {
    const std::string type = part.is_object() ? part.value("type", "") : "";
    if ((type != "input_text" && type != "output_text" && type != "text") || !part.contains("text") ||
        !part["text"].is_string())
      return Bad(err, where, where + ": only text content parts are supported (got \"" + type + "\")");
    if (!out->empty()) *out += "\n";
    *out += part["text"].get<std::string>();
  }
  return true;
}

}  // namespace

bool ResponsesToChat(const json& body, json* chat, ApiError* err) {
  if (!body.is_object()) return Bad(err, "", "the request body must be a JSON object");
  if (body.contains("previous_response_id") && !body["previous_response_id"].is_null())
    return Bad(err, "previous_response_id", "previous_response_id is not supported: this server keeps no responses (send the whole conversation as input)");
  json messages = json::array();
  if (const auto it = body.find("instructions"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) return Bad(err, "instructions", "instructions must be a string");
    messages.push_back({{"role", "system"}, {"content", *it}});
  }
  const auto in = body.find("input");
  if (in == body.end() || in->is_null()) return Bad(err, "input", "input is required");
  if (in->is_string()) {
    messages.push_back({{"role", "user"}, {"content", *in}});
  } else if (in->is_array()) {
    for (size_t i = 0; i < in->size(); ++i) {
      const json& item = (*in)[i];
      const std::string where = "input[" + std::to_string(i) + "]";
      if (!item.is_object()) return Bad(err, where, where + " must be an object");
      const std::string type = item.value("type", item.contains("role") ? "message" : "");
      if (type == "message") {
        const std::string role = item.value("role", "");
        if (role != "user" && role != "assistant" && role != "system" && role != "developer")
          return Bad(err, where + ".role", where + ".role must be user, assistant, system or developer");
        std::string text;
        if (!ContentText(item.contains("content") ? item["content"] : json(""), where + ".content", &text, err)) return false;
        messages.push_back({{"role", role == "developer" ? "system" : role}, {"content", text}});
      } else if (type == "function_call") {
        if (!item.contains("name") || !item["name"].is_string() || !item.contains("call_id") || !item["call_id"].is_string())
          return Bad(err, where, where + ": a function_call needs name and call_id");
        json call = {{"id", item["call_id"]},
                     {"type", "function"},
                     {"function", {{"name", item["name"]}, {"arguments", item.value("arguments", "{}")}}}};
        // Calls in a row are one assistant turn.
        if (!messages.empty() && messages.back()["role"] == "assistant" && messages.back().contains("tool_calls"))
          messages.back()["tool_calls"].push_back(std::move(call));
        else
          messages.push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array({call})}});
      } else if (type == "function_call_output") {
        if (!item.contains("call_id") || !item["call_id"].is_string())
          return Bad(err, where, where + ": a function_call_output needs call_id");
        std::string out;
        if (!ContentText(item.contains("output") ? item["output"] : json(""), where + ".output", &out, err)) return false;
        messages.push_back({{"role", "tool"}, {"tool_call_id", item["call_id"]}, {"content", out}});
      } else {
        return Bad(err, where + ".type", where + ": input items of type \"" + type + "\" are not supported");
      }
    }
  } else {
    return Bad(err, "input", "input must be a string or a list of items");
  }
  json c = {{"messages", std::move(messages)}};
  for (const char* name : {"model", "temperature", "top_p", "stream", "parallel_tool_calls", "top_logprobs"})
    if (auto it = body.find(name); it != body.end() && !it->is_null()) c[name] = *it;
  if (auto it = body.find("max_output_tokens"); it != body.end() && !it->is_null()) c["max_tokens"] = *it;
  if (auto it = body.find("tools"); it != body.end() && !it->is_null()) {
    if (!it->is_array()) return Bad(err, "tools", "tools must be a list");
    json tools = json::array();
    for (const json& t : *it) {
      if (!t.is_object() || t.value("type", "") != "function")
        return Bad(err, "tools", "only function tools are supported (got \"" + (t.is_object() ? t.value("type", "") : "") + "\")");
      json f = {{"name", t.value("name", "")}};
      if (t.contains("description")) f["description"] = t["description"];
      if (t.contains("parameters")) f["parameters"] = t["parameters"];
      tools.push_back({{"type", "function"}, {"function", std::move(f)}});
    }
    c["tools"] = std::move(tools);
  }
  if (auto it = body.find("tool_choice"); it != body.end() && !it->is_null()) {
    if (it->is_object() && it->value("type", "") == "function")
      c["tool_choice"] = {{"type", "function"}, {"function", {{"name", it->value("name", "")}}}};
    else
      c["tool_choice"] = *it;
  }
  if (auto t = body.find("text"); t != body.end() && t->is_object() && t->contains("format")) {
    const json& f = (*t)["format"];
    const std::string type = f.is_object() ? f.value("type", "") : "";
    if (type == "json_schema") {
      json js = {{"name", f.value("name", "schema")}, {"schema", f.contains("schema") ? f["schema"] : json::object()}};
      if (f.contains("strict")) js["strict"] = f["strict"];
      c["response_format"] = {{"type", "json_schema"}, {"json_schema", std::move(js)}};
    } else if (type == "json_object" || type == "text") {
      c["response_format"] = {{"type", type}};
    } else {
      return Bad(err, "text.format", "text.format.type must be text, json_object or json_schema");
    }
  }
  *chat = std::move(c);
  return true;
}

ResponsesWriter::ResponsesWriter(const Generation& g, const json& request, std::string model,
                                 ResponseBuilder::TokenText token_text)
    : ChatAdapterWriter(g, std::move(model), std::move(token_text)),
      echo_({{"instructions", request.value("instructions", json(nullptr))},
             {"max_output_tokens", request.value("max_output_tokens", json(nullptr))},
             {"parallel_tool_calls", request.value("parallel_tool_calls", true)},
             {"temperature", request.value("temperature", json(1.0))},
             {"top_p", request.value("top_p", json(1.0))},
             {"tool_choice", request.value("tool_choice", json("auto"))},
             {"tools", request.value("tools", json::array())},
             {"text", request.value("text", json{{"format", {{"type", "text"}}}})},
             {"metadata", request.value("metadata", json::object())}}),
      id_(NewId("resp_")),
      message_id_(NewId("msg_")),
      reasoning_id_(NewId("rs_")),
      created_(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                   .count()) {}

json ResponsesWriter::Response(const char* status, json output, const json& usage, const char* incomplete) const {
  json r = echo_;
  r["id"] = id_;
  r["object"] = "response";
  r["created_at"] = created_;
  r["status"] = status;
  r["model"] = model_;
  r["output"] = std::move(output);
  r["error"] = nullptr;
  r["incomplete_details"] = incomplete ? json{{"reason", incomplete}} : json(nullptr);
  r["store"] = false;
  if (!usage.is_null()) {
    const int64_t in = usage.value("prompt_tokens", 0), out = usage.value("completion_tokens", 0);
    r["usage"] = {{"input_tokens", in},
                  {"input_tokens_details", {{"cached_tokens", usage["prompt_tokens_details"].value("cached_tokens", 0)}}},
                  {"output_tokens", out},
                  {"output_tokens_details", {{"reasoning_tokens", 0}}},
                  {"total_tokens", in + out}};
  } else {
    r["usage"] = nullptr;
  }
  return r;
}

json ResponsesWriter::Output(const json& chat_body, bool* incomplete, bool with_reasoning) const {
  json output = json::array();
  const json& choice = chat_body["choices"][0];
  *incomplete = choice["finish_reason"] == "length";
  const json& msg = choice["message"];
  if (msg.contains("reasoning_content") && with_reasoning)
    output.push_back({{"type", "reasoning"},
                      {"id", reasoning_id_},
                      {"summary", json::array()},
                      {"content", json::array({{{"type", "reasoning_text"}, {"text", msg["reasoning_content"]}}})}});
  if (msg.contains("content") && msg["content"].is_string() && !msg["content"].get_ref<const std::string&>().empty())
    output.push_back({{"type", "message"},
                      {"id", message_id_},
                      {"status", *incomplete ? "incomplete" : "completed"},
                      {"role", "assistant"},
                      {"content", json::array({{{"type", "output_text"}, {"text", msg["content"]}, {"annotations", json::array()}}})}});
  if (msg.contains("tool_calls"))
    for (const json& call : msg["tool_calls"])
      output.push_back({{"type", "function_call"},
                        {"id", NewId("fc_")},
                        {"call_id", call["id"]},
                        {"name", call["function"]["name"]},
                        {"arguments", call["function"]["arguments"]},
                        {"status", "completed"}});
  return output;
}

json ResponsesWriter::Body() const {
  const json chat = ChatBody();
  bool incomplete = false;
  json output = Output(chat, &incomplete, /*with_reasoning=*/true);
  json r = Response(incomplete ? "incomplete" : "completed", std::move(output), chat["usage"],
                    incomplete ? "max_output_tokens" : nullptr);
  if (chat.contains("kv_transfer_params")) r["kv_transfer_params"] = chat["kv_transfer_params"];  // a prefill's answer
  return r;
}

std::string ResponsesWriter::Next(const std::string& type, json data) {
  data["type"] = type;
  data["sequence_number"] = seq_++;
  return Event(type, data);
}

std::string ResponsesWriter::Begin() {
  const json r = Response("in_progress", json::array(), nullptr, nullptr);
  std::string out = Next("response.created", {{"response", r}});  // (two statements: numbered in order)
  return out + Next("response.in_progress", {{"response", r}});
}

std::string ResponsesWriter::Text(const std::string& piece) {
  std::string out;
  if (!opened_) {
    opened_ = true;
    out += Next("response.output_item.added",
                {{"output_index", 0},
                 {"item", {{"type", "message"}, {"id", message_id_}, {"status", "in_progress"}, {"role", "assistant"},
                           {"content", json::array()}}}});
    out += Next("response.content_part.added",
                {{"item_id", message_id_}, {"output_index", 0}, {"content_index", 0},
                 {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}}}});
  }
  text_ += piece;
  out += Next("response.output_text.delta", {{"item_id", message_id_}, {"output_index", 0}, {"content_index", 0},
                                             {"delta", piece}, {"logprobs", json::array()}});
  return out;
}

std::string ResponsesWriter::End(const json& chat_body) {
  bool incomplete = false;
  // The stream numbers the message item 0 from its first piece: the thinking
  // is in the non-streamed body only.
  json output = Output(chat_body, &incomplete, /*with_reasoning=*/false);
  std::string out;
  size_t index = 0;
  for (const json& item : output) {
    if (item["type"] == "message") {
      if (!opened_) out += Text("");  // opens the item (an empty piece)
      const json part = item["content"][0];
      out += Next("response.output_text.done", {{"item_id", message_id_}, {"output_index", index}, {"content_index", 0},
                                                {"text", part["text"]}, {"logprobs", json::array()}});
      out += Next("response.content_part.done",
                  {{"item_id", message_id_}, {"output_index", index}, {"content_index", 0}, {"part", part}});
    } else {
      json added = item;
      added["status"] = "in_progress";
      added["arguments"] = "";
      out += Next("response.output_item.added", {{"output_index", index}, {"item", added}});
      out += Next("response.function_call_arguments.delta",
                  {{"item_id", item["id"]}, {"output_index", index}, {"delta", item["arguments"]}});
      out += Next("response.function_call_arguments.done",
                  {{"item_id", item["id"]}, {"output_index", index}, {"arguments", item["arguments"]}});
    }
    out += Next("response.output_item.done", {{"output_index", index}, {"item", item}});
    ++index;
  }
  const json r = Response(incomplete ? "incomplete" : "completed", std::move(output), chat_body["usage"],
                          incomplete ? "max_output_tokens" : nullptr);
  return out + Next(incomplete ? "response.incomplete" : "response.completed", {{"response", r}});
}

std::string ResponsesWriter::Error(const ApiError& err) {
  return Next("error", {{"code", err.code.empty() ? json(nullptr) : json(err.code)}, {"message", err.message},
                        {"param", err.param.empty() ? json(nullptr) : json(err.param)}});
}

}  // namespace server
