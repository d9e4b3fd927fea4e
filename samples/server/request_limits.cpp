#include "request_limits.h"

#include <unordered_set>
#include <vector>

namespace server {
namespace {

// Walks `text` as JSON tokens as far as brackets and strings go, calling
// on_key(key) for each top-level key (a string at depth 1 followed by ':')
// and on_open(depth) for each opening bracket; stops when either returns
// false. Escapes are skipped, not decoded: a key written with escapes is
// not one of the named fields and gets the default limit.
template <typename OnKey, typename OnOpen>
void Scan(std::string_view s, OnKey on_key, OnOpen on_open) {
  int depth = 0;
  bool in_string = false, escaped = false;
  size_t string_start = 0;
  std::string_view last_string;  // the last string closed at depth 1
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
        if (depth == 1) last_string = s.substr(string_start, i - string_start);
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        string_start = i + 1;
        break;
      case ':':
        if (depth == 1 && !on_key(last_string)) return;
        break;
      case '{':
      case '[':
        if (!on_open(++depth)) return;
        break;
      case '}':
      case ']':
        --depth;  // below zero only in malformed text, which the parser rejects
        break;
      default:
        break;
    }
  }
}

}  // namespace

int FieldDepthLimit(std::string_view key) {
  if (key == "response_format" || key == "functions") return kMaxSchemaDepth + 2;
  if (key == "tools") return kMaxSchemaDepth + 3;
  if (key == "messages") return kMaxValueDepth + 5;
  return kMaxValueDepth;
}

int NestingDepth(std::string_view text, int limit) {
  int deepest = 0;
  Scan(
      text, [](std::string_view) { return true; },
      [&](int depth) {
        if (depth > deepest) deepest = depth;
        return deepest <= limit;
      });
  return deepest;
}

bool BodyDepthOk(std::string_view body, std::string* field, int* limit) {
  bool ok = true;
  const size_t first = body.find_first_not_of(" \t\r\n");
  const bool is_object = first < body.size() && body[first] == '{';
  std::string_view key;
  int key_limit = kMaxValueDepth;
  Scan(
      body,
      [&](std::string_view k) {
        key = k;
        key_limit = FieldDepthLimit(k);
        return true;
      },
      [&](int depth) {
        if (depth == 1) {
          key = {};
          key_limit = kMaxValueDepth;
          if (is_object) return true;
        }
        // Inside the body object the field's value starts at depth 2.
        const int field_depth = is_object ? depth - 1 : depth;
        if (field_depth <= key_limit) return true;
        ok = false;
        *field = std::string(is_object ? key : std::string_view());
        *limit = key_limit;
        return false;
      });
  return ok;
}

nlohmann::json ParseBounded(std::string_view text, int max_depth) {
  if (NestingDepth(text, max_depth) > max_depth) return nlohmann::json(nlohmann::json::value_t::discarded);
  return nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
}

bool ParseRequestBody(std::string_view text, nlohmann::json* body, std::string* param, std::string* code,
                      std::string* message) {
  using nlohmann::json;
  int limit = 0;
  if (!BodyDepthOk(text, param, &limit)) {
    *code = "nesting_too_deep";
    *message = (param->empty() ? std::string("the request body") : *param) + " nests deeper than " +
               std::to_string(limit) + " levels (the limit; a JSON Schema may nest " + std::to_string(kMaxSchemaDepth) +
               " levels, other values " + std::to_string(kMaxValueDepth) + ")";
    return false;
  }
  // The keys of each open object, innermost last.
  std::vector<std::unordered_set<std::string>> open;
  std::string duplicate;
  std::string top_key;  // the top-level field the duplicate is in
  std::string current_top;
  json::parser_callback_t on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        open.emplace_back();
        break;
      case json::parse_event_t::key: {
        const std::string& key = parsed.get_ref<const std::string&>();
        if (depth == 1) current_top = key;
        if (!open.empty() && !open.back().insert(key).second && duplicate.empty()) {
          duplicate = key;
          top_key = depth == 1 ? key : current_top;
        }
        break;
      }
      case json::parse_event_t::object_end:
        if (!open.empty()) open.pop_back();
        break;
      default:
        break;
    }
    return true;
  };
  *body = json::parse(text.begin(), text.end(), on_event, /*allow_exceptions=*/false);
  if (body->is_discarded()) {
    param->clear();
    *code = "invalid_json";
    *message = "the request body is not valid JSON";
    return false;
  }
  if (!duplicate.empty()) {
    *param = top_key;
    *code = "duplicate_key";
    json k = duplicate;
    *message = "the key " + k.dump(-1, ' ', false, json::error_handler_t::replace) + " appears twice in one object" +
               (top_key == duplicate ? std::string() : " (in " + top_key + ")");
    return false;
  }
  return true;
}

}  // namespace server
