// Fuzzes the chat-template engine: the input is a Jinja template (everything
// before the first NUL byte) and, after it, a conversation: NUL-separated
// role/content strings. Compile and render must end in a value or a status,
// within the render limits, never a crash, hang or unbounded allocation.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_template.h"
#include "fuzz/common.h"
#include "util/json.h"

using namespace llm;  // NOLINT

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nul = in.find('\0');
  std::string_view text = in.substr(0, nul);
  std::vector<ChatMessage> messages;
  if (nul != std::string_view::npos) {
    std::string_view rest = in.substr(nul + 1);
    std::vector<std::string> parts;
    while (!rest.empty() && parts.size() < 16) {
      const size_t cut = rest.find('\0');
      parts.emplace_back(rest.substr(0, cut));
      rest = cut == std::string_view::npos ? std::string_view() : rest.substr(cut + 1);
    }
    for (size_t i = 0; i + 1 < parts.size(); i += 2) messages.push_back({parts[i], parts[i + 1]});
  }
  // A conversation that is JSON ("[{...}]", after the NUL; a second NUL
  // separates a tools list) goes through ApplyJson, as
  // llm_chat_apply_template_json passes it.
  std::optional<Json> json_messages, json_tools;
  if (nul != std::string_view::npos && in.substr(nul + 1).starts_with("[")) {
    std::string_view rest = in.substr(nul + 1);
    const size_t cut = rest.find('\0');
    if (auto j = ParseJson(rest.substr(0, cut), 32); j.ok()) json_messages = std::move(*j);
    if (cut != std::string_view::npos)
      if (auto t = ParseJson(rest.substr(cut + 1), 32); t.ok()) json_tools = std::move(*t);
  }
  if (messages.empty()) {
    messages = {{"system", "Be brief."}, {"user", "Hello"}, {"assistant", "Hi!"}, {"user", "Tell a story"}};
  }
  auto tmpl = ChatTemplate::Create(text);
  if (!tmpl.ok()) {
    LLM_FUZZ_CHECK(!tmpl.status().message().empty(), "a compile error without a message");
    return 0;
  }
  for (bool gen : {false, true}) {
    ChatTemplateOptions opts;
    opts.add_generation_prompt = gen;
    opts.bos_token = "<s>";
    opts.eos_token = "</s>";
    auto out = (*tmpl)->Apply(messages, opts);
    if (!out.ok()) LLM_FUZZ_CHECK(!out.status().message().empty(), "a render error without a message");
    if (json_messages) {
      auto j = (*tmpl)->ApplyJson(*json_messages, json_tools ? &*json_tools : nullptr, opts);
      if (!j.ok()) LLM_FUZZ_CHECK(!j.status().message().empty(), "a JSON render error without a message");
    }
  }
  return 0;
}
