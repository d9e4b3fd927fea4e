// Conversations with tools through the chat templates: `tools`, assistant
// turns with `tool_calls` and `role: tool` results rendered byte for byte as
// Python's jinja2 renders them (tests/data/chat/tools.json, made by
// tools/chat_tools_reference.py), through ChatTemplate::ApplyJson and the C
// API's llm_chat_apply_template_json.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "chat/chat_template.h"
#include "chat/tool_calls.h"
#include "llm.h"
#include "support/api_helpers.h"
#include "support/test_paths.h"
#include "util/json.h"

namespace llm::test {
namespace {

Json LoadJson(const std::string& rel) {
  std::string text = ReadFile(RepoDir() + "/" + rel);
  EXPECT_FALSE(text.empty()) << rel;
  auto j = ParseJson(text);
  EXPECT_TRUE(j.ok()) << rel << ": " << j.status().message();
  return j.ok() ? *j : Json();
}

// Python errors (a None used as a string) are not jinja2 TemplateErrors: our
// engine words them its own way, so only the failure is compared.
bool IsPythonError(const std::string& e) { return e.starts_with("TypeError: ") || e.starts_with("ValueError: "); }

TEST(ChatTools, MatchesJinja2) {
  const Json doc = LoadJson("tests/data/chat/tools.json");
  const Json& models = *doc.Find("models");
  const Json& cases = *doc.Find("cases");
  ASSERT_GE(cases.size(), 50u);
  int rendered = 0, qwen3_calls = 0;
  for (const Json& c : cases.array()) {
    const std::string model = c.Find("model")->as_string();
    const Json& m = *models.Find(model);
    auto tmpl = ChatTemplate::Create(ReadFile(RepoDir() + "/" + m.Find("template_file")->as_string()));
    ASSERT_TRUE(tmpl.ok()) << tmpl.status().message();
    ChatTemplateOptions opts;
    if (m.Find("bos_token")->is_string()) opts.bos_token = m.Find("bos_token")->as_string();
    if (m.Find("eos_token")->is_string()) opts.eos_token = m.Find("eos_token")->as_string();
    opts.add_generation_prompt = c.Find("add_generation_prompt")->as_bool();
    const Json* tools = c.Find("tools");
    const std::string label = model + "/" + c.Find("name")->as_string() + (opts.add_generation_prompt ? "+gen" : "");
    auto out = (*tmpl)->ApplyJson(*c.Find("messages"), tools->is_null() ? nullptr : tools, opts);
    if (const Json* err = c.Find("error")) {
      ASSERT_FALSE(out.ok()) << label << " rendered:\n" << *out;
      EXPECT_EQ(out.status().code(), LLM_ERR_INVALID_ARGUMENT) << label;
      if (!IsPythonError(err->as_string())) {
        EXPECT_EQ(out.status().message(), err->as_string()) << label;
      }
    } else {
      ASSERT_TRUE(out.ok()) << label << ": " << out.status().message();
      EXPECT_EQ(*out, c.Find("expected")->as_string()) << label;
      ++rendered;
      if (model == "qwen3" && out->find("<tool_call>\n{\"name\": \"add\"") != std::string::npos) ++qwen3_calls;
    }
  }
  EXPECT_GE(rendered, 40);
  EXPECT_GE(qwen3_calls, 4);  // the calls themselves were rendered, not only the tool list
}

// What Qwen3 renders for a call parses back to the same call.
TEST(ChatTools, RenderedCallsParseBack) {
  const std::string text = ReadFile(RepoDir() + "/tests/data/chat/templates/qwen3.jinja");
  auto tmpl = ChatTemplate::Create(text);
  ASSERT_TRUE(tmpl.ok());
  auto messages = ParseJson(R"([{"role": "user", "content": "Add"},
    {"role": "assistant", "content": "", "tool_calls": [
      {"type": "function", "function": {"name": "add", "arguments": {"a": 1, "b": [2, {"c": "é"}]}}}]}])");
  ASSERT_TRUE(messages.ok());
  auto out = (*tmpl)->ApplyJson(*messages, nullptr, {});
  ASSERT_TRUE(out.ok()) << out.status().message();
  const size_t at = out->find("<|im_start|>assistant\n");
  ASSERT_NE(at, std::string::npos);
  std::string reply = out->substr(at + std::string("<|im_start|>assistant\n").size());
  reply = reply.substr(0, reply.find("<|im_end|>"));
  auto parsed = ParseToolCalls(DetectToolFormat(text, "qwen3"), reply);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  ASSERT_EQ(parsed->calls.size(), 1u);
  EXPECT_EQ(parsed->calls[0].name, "add");
  EXPECT_EQ(JsonToText(parsed->calls[0].arguments), R"({"a":1,"b":[2,{"c":"é"}]})");
}

class ChatToolsApi : public ::testing::Test {
 protected:
  void SetUp() override {
    llm_ctx_params p;
    llm_ctx_params_init(&p);
    p.n_threads = 1;
    std::string path = ModelPathF32();
    p.model_path = path.c_str();
    ASSERT_EQ(llm_ctx_create(&p, &ctx_), LLM_OK) << llm_last_error();
  }
  void TearDown() override { llm_ctx_destroy(ctx_); }
  llm_ctx* ctx_ = nullptr;
};

TEST_F(ChatToolsApi, Qwen3ThroughTheCApi) {
  // Qwen3's template uses neither bos_token nor eos_token, so the context's
  // model (stories260K) does not change what it renders.
  const std::string tmpl = ReadFile(RepoDir() + "/tests/data/chat/templates/qwen3.jinja");
  const Json doc = LoadJson("tests/data/chat/tools.json");
  int checked = 0;
  for (const Json& c : doc.Find("cases")->array()) {
    if (c.Find("model")->as_string() != "qwen3" || c.Find("error") != nullptr) continue;
    const std::string messages = JsonToText(*c.Find("messages"));
    const std::string tools = JsonToText(*c.Find("tools"));
    const bool gen = c.Find("add_generation_prompt")->as_bool();
    size_t n = 0;
    ASSERT_EQ(llm_chat_apply_template_json(ctx_, tmpl.c_str(), messages.c_str(),
                                           c.Find("tools")->is_null() ? nullptr : tools.c_str(), gen, nullptr, 0, &n),
              c.Find("expected")->as_string().empty() ? LLM_OK : LLM_ERR_BUFFER_TOO_SMALL);
    std::string out(n, '\0');
    ASSERT_EQ(llm_chat_apply_template_json(ctx_, tmpl.c_str(), messages.c_str(),
                                           c.Find("tools")->is_null() ? nullptr : tools.c_str(), gen, out.data(),
                                           out.size(), &n),
              LLM_OK)
        << llm_last_error();
    EXPECT_EQ(out, c.Find("expected")->as_string()) << c.Find("name")->as_string();
    ++checked;
  }
  EXPECT_GE(checked, 8);
}

// llm_chat_apply_template_vars: more variables reach the template
// (chat_template_kwargs, date_string); the request's own ones cannot be
// replaced.
TEST_F(ChatToolsApi, TemplateVariables) {
  const char* tmpl =
      "{% if enable_thinking is defined and not enable_thinking %}<think></think>{% endif %}"
      "{{ date_string | default('no date') }}|{{ messages | length }}|{{ extra.k if extra is defined else '-' }}";
  const char* msgs = R"([{"role": "user", "content": "hi"}])";
  char buf[128];
  size_t n = 0;
  ASSERT_EQ(llm_chat_apply_template_vars(ctx_, tmpl, msgs, nullptr, nullptr, 0, buf, sizeof buf, &n), LLM_OK)
      << llm_last_error();
  EXPECT_EQ(std::string(buf, n), "no date|1|-");
  ASSERT_EQ(llm_chat_apply_template_vars(ctx_, tmpl, msgs, nullptr,
                                         R"({"enable_thinking": false, "date_string": "26 Nov 2026", "extra": {"k": [1]}})",
                                         0, buf, sizeof buf, &n),
            LLM_OK)
      << llm_last_error();
  EXPECT_EQ(std::string(buf, n), "<think></think>26 Nov 2026|1|[1]");
  ASSERT_EQ(llm_chat_apply_template_vars(ctx_, tmpl, msgs, nullptr, R"({"enable_thinking": true})", 0, buf,
                                         sizeof buf, &n),
            LLM_OK);
  EXPECT_EQ(std::string(buf, n), "no date|1|-");
  const std::pair<const char*, const char*> bad[] = {
      {R"({"messages": []})", "set by the request"}, {R"({"tools": null})", "set by the request"},
      {R"({"add_generation_prompt": true})", "set by the request"}, {R"({"bos_token": "x"})", "set by the request"},
      {"[1]", "vars_json must be a JSON object"}, {"7", "vars_json must be a JSON object"},
      {R"({"a": )", "vars_json: "}};
  for (const auto& b : bad) {
    EXPECT_EQ(llm_chat_apply_template_vars(ctx_, tmpl, msgs, nullptr, b.first, 0, buf, sizeof buf, &n),
              LLM_ERR_INVALID_ARGUMENT)
        << b.first;
    EXPECT_NE(std::string(llm_last_error()).find(b.second), std::string::npos) << llm_last_error();
  }
  EXPECT_EQ(llm_chat_apply_template_vars(ctx_, tmpl, msgs, nullptr, "{\"\xff\": 1}", 0, buf, sizeof buf, &n),
            LLM_ERR_INVALID_UTF8);
}

TEST_F(ChatToolsApi, Errors) {
  const char* tmpl = "{{ messages | length }}{{ tools | length if tools else 'none' }}";
  char buf[64];
  size_t n = 0;
  ASSERT_EQ(llm_chat_apply_template_json(ctx_, tmpl, R"([{"role": "user", "content": null}])", nullptr, 0, buf,
                                         sizeof buf, &n),
            LLM_OK)
      << llm_last_error();
  EXPECT_EQ(std::string(buf, n), "1none");
  ASSERT_EQ(llm_chat_apply_template_json(ctx_, tmpl, "[]", R"([{"type": "function"}, {}])", 0, buf, sizeof buf, &n),
            LLM_OK);
  EXPECT_EQ(std::string(buf, n), "02");

  EXPECT_EQ(llm_chat_apply_template_json(ctx_, tmpl, R"([{"role": "user", "content": "x"})", nullptr, 0, buf,
                                         sizeof buf, &n),
            LLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(llm_last_error()).find("messages_json"), std::string::npos) << llm_last_error();
  EXPECT_EQ(llm_chat_apply_template_json(ctx_, tmpl, R"([{"content": "no role"}])", nullptr, 0, buf, sizeof buf, &n),
            LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(llm_chat_apply_template_json(ctx_, tmpl, R"({"role": "user"})", nullptr, 0, buf, sizeof buf, &n),
            LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(llm_chat_apply_template_json(ctx_, tmpl, "[]", R"({"not": "a list"})", 0, buf, sizeof buf, &n),
            LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(llm_chat_apply_template_json(ctx_, tmpl, "[\"\xff\"]", nullptr, 0, buf, sizeof buf, &n),
            LLM_ERR_INVALID_UTF8);
  const std::string deep = "[" + std::string(100, '[') + std::string(100, ']') + "]";
  EXPECT_EQ(llm_chat_apply_template_json(ctx_, tmpl, deep.c_str(), nullptr, 0, buf, sizeof buf, &n),
            LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(llm_chat_apply_template_json(ctx_, tmpl, nullptr, nullptr, 0, buf, sizeof buf, &n), LLM_ERR_NULL_ARGUMENT);
  EXPECT_EQ(llm_chat_apply_template_json(ctx_, tmpl, "[]", nullptr, 2, buf, sizeof buf, &n), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(llm_chat_apply_template_json(ctx_, tmpl, "[]", nullptr, 0, buf, 1, &n), LLM_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(n, 5u);
  // stories260K has no template of its own.
  EXPECT_EQ(llm_chat_apply_template_json(ctx_, nullptr, "[]", nullptr, 0, buf, sizeof buf, &n), LLM_ERR_UNSUPPORTED);
}

}  // namespace
}  // namespace llm::test
