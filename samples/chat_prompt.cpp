#include "chat_prompt.h"

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <system_error>

namespace chat {
namespace {

namespace fs = std::filesystem;

const char* kFallbackTemplate =
    "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}";

const char* kFallbackStop = "\nuser:";

}  // namespace

std::string FindDefaultModel() {
  std::error_code ec;
  std::vector<fs::path> roots = {fs::current_path(ec)};
  // The executable normally lives in <repo>/<build dir>/bin.
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path dir = exe.parent_path(); !dir.empty() && roots.size() < 5; dir = dir.parent_path()) {
      roots.push_back(dir);
      if (dir == dir.parent_path()) break;
    }
  }
  for (const fs::path& root : roots) {
    fs::path p = root / kDefaultChatModel;
    if (fs::is_regular_file(p, ec)) return p.lexically_normal().string();
  }
  return "";
}

std::string ModelName(const std::string& path) {
  if (path.empty()) return "stories260K";
  return fs::path(path).stem().string();
}

bool Prompter::Init(llm_ctx* ctx, const std::string& template_text, std::string* error) {
  ctx_ = ctx;
  template_ = template_text;
  Message probe{"user", "hi"};
  llm_chat_message m{probe.role.c_str(), probe.content.c_str()};
  size_t need = 0;
  llm_status s = llm_chat_apply_template(ctx, template_.empty() ? nullptr : template_.c_str(), &m, 1, 1, nullptr, 0,
                                         &need);
  if (s == LLM_ERR_UNSUPPORTED && template_.empty()) {
    fallback_ = true;
    template_ = kFallbackTemplate;
    stops_.push_back(kFallbackStop);
  } else if (s != LLM_OK && s != LLM_ERR_BUFFER_TOO_SMALL) {
    *error = std::string("chat template: ") + llm_status_str(s) + ": " + llm_last_error();
    return false;
  }

  if (!fallback_) {
    int32_t f = LLM_TOOL_FORMAT_GENERIC;
    if (llm_chat_tool_format(ctx, template_.empty() ? nullptr : template_.c_str(), &f) == LLM_OK) tool_format_ = f;
  }
  llm_model_info info{};
  info.struct_size = sizeof info;
  if (llm_model_get_info(ctx, &info) == LLM_OK && info.bos >= 0) {
    char buf[64];
    size_t n = 0;
    if (llm_detokenize(ctx, &info.bos, 1, LLM_DETOKENIZE_RENDER_SPECIAL, buf, sizeof buf, &n) == LLM_OK)
      bos_text_.assign(buf, n);
  }
  return true;
}

namespace {

// A string as a JSON string literal.
std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace

std::string TodayVarsJson() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char date[32], datetime[32];
  std::strftime(date, sizeof date, "%d %b %Y", &tm);
  std::strftime(datetime, sizeof datetime, "%b %d %Y", &tm);
  return std::string("{\"date_string\":") + JsonString(date) + ",\"datetime\":" + JsonString(datetime) + "}";
}

llm_status Prompter::Render(const std::vector<Message>& messages, std::string* prompt, uint32_t* tokenize_flags,
                            std::string* error, const std::string* vars_json) const {
  const std::string today = vars_json == nullptr ? TodayVarsJson() : std::string();
  if (vars_json == nullptr) vars_json = &today;
  if (!fallback_) {
    // The same conversation as JSON, so that the variables go with it.
    std::string json = "[";
    for (const Message& m : messages) {
      if (json.size() > 1) json += ",";
      json += "{\"role\":" + JsonString(m.role) + ",\"content\":" + JsonString(m.content) + "}";
    }
    json += "]";
    return RenderJson(json, nullptr, prompt, tokenize_flags, error, vars_json);
  }
  std::vector<llm_chat_message> msgs;
  msgs.reserve(messages.size());
  for (const Message& m : messages) msgs.push_back({m.role.c_str(), m.content.c_str()});
  const char* tmpl = template_.empty() ? nullptr : template_.c_str();
  size_t n = 0;
  prompt->assign(1024, '\0');
  llm_status s = llm_chat_apply_template(ctx_, tmpl, msgs.data(), msgs.size(), 1, prompt->data(), prompt->size(), &n);
  if (s == LLM_ERR_BUFFER_TOO_SMALL) {
    prompt->assign(n, '\0');
    s = llm_chat_apply_template(ctx_, tmpl, msgs.data(), msgs.size(), 1, prompt->data(), prompt->size(), &n);
  }
  if (s != LLM_OK) {
    *error = llm_last_error();
    prompt->clear();
    return s;
  }
  prompt->resize(n);
  *tokenize_flags = Flags(*prompt);
  return LLM_OK;
}

llm_status Prompter::RenderJson(const std::string& messages_json, const std::string* tools_json, std::string* prompt,
                                uint32_t* tokenize_flags, std::string* error, const std::string* vars_json) const {
  const char* tmpl = template_.empty() ? nullptr : template_.c_str();
  const char* tools = tools_json ? tools_json->c_str() : nullptr;
  const std::string today = vars_json == nullptr ? TodayVarsJson() : std::string();
  const char* vars = vars_json ? vars_json->c_str() : today.c_str();
  size_t n = 0;
  prompt->assign(4096, '\0');
  llm_status s = llm_chat_apply_template_vars(ctx_, tmpl, messages_json.c_str(), tools, vars, 1, prompt->data(),
                                              prompt->size(), &n);
  if (s == LLM_ERR_BUFFER_TOO_SMALL) {
    prompt->assign(n, '\0');
    s = llm_chat_apply_template_vars(ctx_, tmpl, messages_json.c_str(), tools, vars, 1, prompt->data(),
                                     prompt->size(), &n);
  }
  if (s != LLM_OK) {
    *error = llm_last_error();
    prompt->clear();
    return s;
  }
  prompt->resize(n);
  *tokenize_flags = Flags(*prompt);
  return LLM_OK;
}

uint32_t Prompter::Flags(const std::string& prompt) const {
  const bool has_bos = !bos_text_.empty() && prompt.compare(0, bos_text_.size(), bos_text_) == 0;
  return LLM_TOKENIZE_PARSE_SPECIAL | (has_bos ? 0u : uint32_t{LLM_TOKENIZE_ADD_SPECIAL});
}

}  // namespace chat
