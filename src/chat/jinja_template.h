// A compiled Jinja template: our own interpreter for the subset of Jinja that
// chat templates use, rendering byte for byte as Python's jinja2 does in the
// environment Hugging Face transformers uses for apply_chat_template
// (sandboxed, trim_blocks, lstrip_blocks, loopcontrols, json.dumps tojson).
//
//   auto t = Template::Compile(text);          // syntax errors here
//   Dict globals;  globals.Set("messages", ...);
//   auto out = (*t)->Render(globals);          // runtime errors here
//
// Compile once, render from any number of threads at once: Render is const
// and keeps all its state on its own stack.
//
// Hostile templates get an error, never a hang or a crash: parsing depth,
// evaluation steps, output size, macro recursion and the sizes builtins may
// build are all bounded (RenderLimits, jinja_builtins.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "chat/jinja_ast.h"
#include "chat/jinja_value.h"
#include "util/status.h"

namespace llm::jinja {

struct RenderLimits {
  uint64_t max_steps = 2'000'000;        // statements + expressions evaluated (Qwen3: ~70 per message)
  size_t max_output = 32u << 20;         // bytes of output (and of any {% set %} block)
  int max_call_depth = 32;               // nested macro calls
};

class Template {
 public:
  // Errors: INVALID_ARGUMENT ("template syntax error (line N): ...") and
  // INVALID_UTF8 when the text is not UTF-8.
  static StatusOr<std::unique_ptr<Template>> Compile(std::string_view source);

  // Renders with `globals` as the template's variables (messages, bos_token,
  // add_generation_prompt...). Errors: INVALID_ARGUMENT with "template
  // error: ..." or, from raise_exception(msg), exactly msg.
  StatusOr<std::string> Render(const Dict& globals, const RenderLimits& limits = {}) const;

 private:
  explicit Template(std::unique_ptr<TemplateAst> ast) : ast_(std::move(ast)) {}
  std::unique_ptr<TemplateAst> ast_;
};

}  // namespace llm::jinja
