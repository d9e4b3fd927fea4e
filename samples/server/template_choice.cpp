#include "template_choice.h"

#include <filesystem>
#include <fstream>
#include <sstream>


namespace server {
namespace {

// The turn formats llama-server knows by name and models commonly need,
// written as Jinja.
const char* kChatml =
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}";

const char* kLlama3 =
    "{{- bos_token -}}"
    "{%- for message in messages -%}"
    "{{- '<|start_header_id|>' + message.role + '<|end_header_id|>\\n\\n' + message.content | trim + '<|eot_id|>' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}{%- endif -%}";

bool ReadFile(const std::string& path, std::string* text) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  *text = ss.str();
  return true;
}

}  // namespace

bool ResolveChatTemplate(const std::string& value, bool is_file, std::string* text, std::string* error) {
  std::error_code ec;
  if (is_file || std::filesystem::is_regular_file(value, ec)) {
    if (ReadFile(value, text)) return true;
    *error = "cannot read " + value;
    return false;
  }
  if (value == "chatml") {
    *text = kChatml;
  } else if (value == "llama3") {
    *text = kLlama3;
  } else {
    *text = value;  // the template itself
  }
  return true;
}

}  // namespace server
