#include "messages_api.h"

namespace server {
namespace {

// A block list's text parts joined (tool_result content, system).
bool BlocksText(const json& c, const std::string& where, std::string* out, ApiError* err) {
  if (c.is_string()) {
    *out = c.get<std::string>();
    return true;
  }
  if (!c.is_array()) return Bad(err, where, where + " must be a string or a list of content blocks");
  for (const json& b : c) {
    if (!b.is_object() || b.value("type", "") != "text" || !b.contains("text") || !b["text"].is_string())
      return Bad(err, where, where + ": only text blocks are supported here");
    if (!out->empty()) *out += "\n";
    *out += b["text"].get<std::string>();
  }
  return true;
}

const char* StopReason(const json& choice) {
  const std::string f = choice.value("finish_reason", "stop");
  if (f == "length") return "max_tokens";
  if (f == "tool_calls") return "tool_use";
  return "end_turn";
}

}  // namespace

bool MessagesToChat(const json& body, json* chat, ApiError* err) {
  if (!body.is_object()) return Bad(err, "", "the request body must be a JSON object");
  json messages = json::array();
  if (auto s = body.find("system"); s != body.end() && !s->is_null()) {
    std::string text;
    if (!BlocksText(*s, "system", &text, err)) return false;
    messages.push_back({{"role", "system"}, {"content", text}});
  }
  const auto msgs = body.find("messages");
  if (msgs == body.end() || !msgs->is_array() || msgs->empty()) return Bad(err, "messages", "messages must be a non-empty list");
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return Bad(err, where, where + " must be an object");
    const std::string role = m.value("role", "");
    if (role != "user" && role != "assistant") return Bad(err, where + ".role", where + ".role must be user or assistant");
    const json content = m.contains("content") ? m["content"] : json("");
    if (content.is_string()) {
      messages.push_back({{"role", role}, {"content", content}});
      continue;
    }
    if (!content.is_array()) return Bad(err, where + ".content", where + ".content must be a string or a list of blocks");
    std::string text;
    json calls = json::array();
    for (size_t k = 0; k < content.size(); ++k) {
      const json& b = content[k];
      const std::string bw = where + ".content[" + std::to_string(k) + "]";
      const std::string type = b.is_object() ? b.value("type", "") : "";
      if (type == "text" && b.contains("text") && b["text"].is_string()) {
        if (!text.empty()) text += "\n";
        text += b["text"].get<std::string>();
      } else if (type == "tool_use" && role == "assistant") {
        if (!b.contains("id") || !b["id"].is_string() || !b.contains("name") || !b["name"].is_string())
          return Bad(err, bw, bw + ": a tool_use block needs id and name");
        calls.push_back({{"id", b["id"]},
                         {"type", "function"},
                         {"function", {{"name", b["name"]}, {"arguments", b.value("input", json::object()).dump()}}}});
      } else if (type == "tool_result" && role == "user") {
        if (!b.contains("tool_use_id") || !b["tool_use_id"].is_string())
          return Bad(err, bw, bw + ": a tool_result block needs tool_use_id");
        std::string out;
        if (b.contains("content") && !BlocksText(b["content"], bw + ".content", &out, err)) return false;
        if (b.value("is_error", false)) out = "Error: " + out;
        messages.push_back({{"role", "tool"}, {"tool_call_id", b["tool_use_id"]}, {"content", out}});
      } else if (type == "thinking" || type == "redacted_thinking") {
        continue;  // earlier reasoning of the model: not sent back to it
      } else {
        return Bad(err, bw, bw + ": content blocks of type \"" + type + "\" are not supported here");
      }
    }
    if (!calls.empty())
      messages.push_back({{"role", "assistant"}, {"content", text.empty() ? json(nullptr) : json(text)}, {"tool_calls", calls}});
    else if (!text.empty() || role == "assistant")
      messages.push_back({{"role", role}, {"content", text}});
  }
  json c = {{"messages", std::move(messages)}};
  const auto mt = body.find("max_tokens");
  if (mt == body.end() || !mt->is_number_integer()) return Bad(err, "max_tokens", "max_tokens is required (an integer)");
  c["max_tokens"] = *mt;
  for (const char* name : {"model", "temperature", "top_p", "top_k", "stream"})
    if (auto it = body.find(name); it != body.end() && !it->is_null()) c[name] = *it;
  if (auto it = body.find("stop_sequences"); it != body.end() && !it->is_null()) c["stop"] = *it;
  if (auto it = body.find("tools"); it != body.end() && !it->is_null()) {
    if (!it->is_array()) return Bad(err, "tools", "tools must be a list");
    json tools = json::array();
    for (const json& t : *it) {
      if (!t.is_object() || !t.contains("name") || (t.contains("type") && t["type"] != "custom"))
        return Bad(err, "tools", "only client tools with a name and an input_schema are supported");
      json f = {{"name", t["name"]}, {"parameters", t.value("input_schema", json{{"type", "object"}})}};
      if (t.contains("description")) f["description"] = t["description"];
      tools.push_back({{"type", "function"}, {"function", std::move(f)}});
    }
    c["tools"] = std::move(tools);
  }
  if (auto it = body.find("tool_choice"); it != body.end() && it->is_object()) {
    const std::string type = it->value("type", "auto");
    if (type == "auto" || type == "none") c["tool_choice"] = type;
    else if (type == "any") c["tool_choice"] = "required";
    else if (type == "tool") c["tool_choice"] = {{"type", "function"}, {"function", {{"name", it->value("name", "")}}}};
    else return Bad(err, "tool_choice", "tool_choice.type must be auto, any, tool or none");
    if (it->value("disable_parallel_tool_use", false)) c["parallel_tool_calls"] = false;
  }
  // Thinking: the model's own (reasoning_format "auto" splits it out as
  // thinking blocks); "disabled" turns it off where the template allows.
  if (auto it = body.find("thinking"); it != body.end() && !it->is_null()) {
    const std::string type = it->is_object() ? it->value("type", "") : "";
    if (type == "disabled")
      c["chat_template_kwargs"] = {{"enable_thinking", false}};
    else if (type == "enabled" || type == "adaptive")
      c["reasoning_format"] = "auto";
    else
      return Bad(err, "thinking", "thinking.type must be enabled, adaptive or disabled");
  }
  *chat = std::move(c);
  return true;
}

MessagesWriter::MessagesWriter(const Generation& g, std::string model, ResponseBuilder::TokenText token_text,
                               int32_t input_tokens)
    : ChatAdapterWriter(g, std::move(model), std::move(token_text)), id_(NewId("msg_")), input_tokens_(input_tokens) {}

json MessagesWriter::Message(const json& chat_body) const {
  const json& choice = chat_body["choices"][0];
  const json& msg = choice["message"];
  json content = json::array();
  if (msg.contains("reasoning_content"))
    content.push_back({{"type", "thinking"}, {"thinking", msg["reasoning_content"]}, {"signature", ""}});
  if (msg.contains("content") && msg["content"].is_string() && !msg["content"].get_ref<const std::string&>().empty())
    content.push_back({{"type", "text"}, {"text", msg["content"]}});
  if (msg.contains("tool_calls"))
    for (const json& call : msg["tool_calls"]) {
      json input = json::parse(call["function"]["arguments"].get<std::string>(), nullptr, false);
      content.push_back({{"type", "tool_use"}, {"id", "toolu_" + call["id"].get<std::string>()},
                         {"name", call["function"]["name"]}, {"input", input.is_discarded() ? json::object() : input}});
    }
  const json& u = chat_body["usage"];
  return {{"id", id_},
          {"type", "message"},
          {"role", "assistant"},
          {"model", model_},
          {"content", std::move(content)},
          {"stop_reason", StopReason(choice)},
          {"stop_sequence", nullptr},
          {"usage",
           {{"input_tokens", u.value("prompt_tokens", 0)},
            {"output_tokens", u.value("completion_tokens", 0)},
            {"cache_read_input_tokens", u["prompt_tokens_details"].value("cached_tokens", 0)}}}};
}

json MessagesWriter::Body() const {
  const json chat = ChatBody();
  json m = Message(chat);
  if (chat.contains("kv_transfer_params")) m["kv_transfer_params"] = chat["kv_transfer_params"];  // a prefill's answer
  return m;
}

std::string MessagesWriter::Begin() {
  return Event("message_start", {{"type", "message_start"},
                                 {"message", {{"id", id_}, {"type", "message"}, {"role", "assistant"}, {"model", model_},
                                              {"content", json::array()}, {"stop_reason", nullptr},
                                              {"stop_sequence", nullptr},
                                              {"usage", {{"input_tokens", input_tokens_}, {"output_tokens", 0}}}}}});
}

std::string MessagesWriter::Reasoning(const std::string& piece) {
  if (text_open_) return "";  // thinking after the answer began: in the final message only
  std::string out;
  if (!thinking_open_) {
    thinking_open_ = thinking_streamed_ = true;
    text_index_ = 1;
    out += Event("content_block_start", {{"type", "content_block_start"}, {"index", 0},
                                         {"content_block", {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}}});
  }
  return out + Event("content_block_delta", {{"type", "content_block_delta"}, {"index", 0},
                                             {"delta", {{"type", "thinking_delta"}, {"thinking", piece}}}});
}

std::string MessagesWriter::Text(const std::string& piece) {
  std::string out;
  if (thinking_open_) {
    thinking_open_ = false;
    out += Event("content_block_delta", {{"type", "content_block_delta"}, {"index", 0},
                                         {"delta", {{"type", "signature_delta"}, {"signature", ""}}}});
    out += Event("content_block_stop", {{"type", "content_block_stop"}, {"index", 0}});
  }
  if (!text_open_) {
    text_open_ = true;
    out += Event("content_block_start", {{"type", "content_block_start"}, {"index", text_index_},
                                         {"content_block", {{"type", "text"}, {"text", ""}}}});
  }
  return out + Event("content_block_delta", {{"type", "content_block_delta"}, {"index", text_index_},
                                             {"delta", {{"type", "text_delta"}, {"text", piece}}}});
}

std::string MessagesWriter::End(const json& chat_body) {
  json m = Message(chat_body);
  std::string out;
  int index = 0;
  json blocks = json::array();
  for (const json& block : m["content"])
    if (block["type"] != "thinking" || (!thinking_streamed_ && !text_open_)) blocks.push_back(block);
  if (thinking_streamed_) {
    if (thinking_open_) {
      thinking_open_ = false;
      out += Event("content_block_delta", {{"type", "content_block_delta"}, {"index", 0},
                                           {"delta", {{"type", "signature_delta"}, {"signature", ""}}}});
      out += Event("content_block_stop", {{"type", "content_block_stop"}, {"index", 0}});
    }
    index = 1;
  }
  if (text_open_ && (blocks.empty() || blocks[0]["type"] != "text")) {
    out += Event("content_block_stop", {{"type", "content_block_stop"}, {"index", text_index_}});
    index = text_index_ + 1;  // the streamed text was all there was of it
  }
  for (const json& block : blocks) {
    if (block["type"] == "thinking") {
      out += Event("content_block_start", {{"type", "content_block_start"}, {"index", index},
                                           {"content_block", {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}}});
      out += Event("content_block_delta", {{"type", "content_block_delta"}, {"index", index},
                                           {"delta", {{"type", "thinking_delta"}, {"thinking", block["thinking"]}}}});
      out += Event("content_block_stop", {{"type", "content_block_stop"}, {"index", index}});
    } else if (block["type"] == "text") {
      if (!text_open_) {
        text_index_ = index;
        out += Text(block["text"].get<std::string>());
      }
      out += Event("content_block_stop", {{"type", "content_block_stop"}, {"index", index}});
    } else {
      json start = block;
      start["input"] = json::object();
      out += Event("content_block_start", {{"type", "content_block_start"}, {"index", index}, {"content_block", start}});
      out += Event("content_block_delta", {{"type", "content_block_delta"}, {"index", index},
                                           {"delta", {{"type", "input_json_delta"}, {"partial_json", block["input"].dump()}}}});
      out += Event("content_block_stop", {{"type", "content_block_stop"}, {"index", index}});
    }
    ++index;
  }
  out += Event("message_delta", {{"type", "message_delta"},
                                 {"delta", {{"stop_reason", m["stop_reason"]}, {"stop_sequence", nullptr}}},
                                 {"usage", {{"output_tokens", m["usage"]["output_tokens"]},
                                            {"input_tokens", m["usage"]["input_tokens"]}}}});
  return out + Event("message_stop", {{"type", "message_stop"}});
}

std::string MessagesWriter::Error(const ApiError& err) {
  return Event("error", {{"type", "error"}, {"error", {{"type", err.type}, {"message", err.message}}}});
}

}  // namespace server
