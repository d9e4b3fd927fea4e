// Chat templates: our Jinja interpreter against Python's jinja2 (reference
// renderings in tests/data/chat/, made by tools/chat_reference.py), hostile
// templates, concurrent rendering, and llm_chat_apply_template.
#include <gtest/gtest.h>

#include <cstddef>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "chat/chat_template.h"
#include "chat/jinja_template.h"
#include "llm.h"
#include "support/api_helpers.h"
#include "support/test_paths.h"
#include "util/json.h"

namespace llm::test {
namespace {

using jinja::Dict;
using jinja::Template;
using jinja::Value;

Json LoadJson(const std::string& rel) {
  std::string text = ReadFile(RepoDir() + "/" + rel);
  EXPECT_FALSE(text.empty()) << rel;
  auto j = ParseJson(text);
  EXPECT_TRUE(j.ok()) << rel << ": " << j.status().message();
  return j.ok() ? *j : Json();
}

// Renders `text` with the members of `context` as globals.
StatusOr<std::string> RenderText(const std::string& text, const Json& context = Json::Object({}),
                                 const jinja::RenderLimits& limits = {}) {
  LLM_ASSIGN_OR_RETURN(std::unique_ptr<Template> t, Template::Compile(text));
  Dict globals;
  for (const auto& [k, v] : context.object()) globals.Set(k, Value::FromJson(v));
  return t->Render(globals, limits);
}

// ------------------------------------------------- the models' templates

// A case whose messages carry only role and content strings and that passes
// no tools goes through ChatTemplate::Apply (what llm_chat_apply_template
// uses) as well as through the interpreter with the whole JSON context.
bool IsPlainChat(const Json& c) {
  if (c.Find("tools") != nullptr) return false;
  for (const Json& m : c.Find("messages")->array())
    for (const auto& [k, v] : m.object())
      if ((k != "role" && k != "content") || !v.is_string()) return false;
  return true;
}

class ModelTemplate : public ::testing::TestWithParam<const char*> {};

TEST_P(ModelTemplate, MatchesJinja2) {
  const std::string name = GetParam();
  Json doc = LoadJson("tests/data/chat/" + name + ".json");
  std::string text = ReadFile(RepoDir() + "/" + doc.Find("template_file")->as_string());
  ASSERT_FALSE(text.empty());
  auto tmpl = ChatTemplate::Create(text);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().message();
  ChatTemplateOptions base;
  if (doc.Find("bos_token")->is_string()) base.bos_token = doc.Find("bos_token")->as_string();
  if (doc.Find("eos_token")->is_string()) base.eos_token = doc.Find("eos_token")->as_string();
  const Json* extra = doc.Find("globals");
  const bool has_extra = extra != nullptr && extra->size() > 0;
  const Json& cases = *doc.Find("cases");
  ASSERT_GE(cases.size(), 20u);
  // A template that writes strftime_now's day whatever the caller passes
  // (gpt-oss): the reference records the day jinja2 rendered, and that day
  // is replaced by today's, as strftime_now gives it here.
  std::string then_date, today;
  if (const Json* d = doc.Find("now_date")) {
    then_date = "Current date: " + d->as_string();
    char buf[16];
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    today = "Current date: " + std::string(buf, std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm));
  }
  for (const Json& c : cases.array()) {
    const bool agp = c.Find("add_generation_prompt")->as_bool();
    std::string label = name + "/" + c.Find("name")->as_string() + (agp ? "+gen" : "");
    // The interpreter with transformers' variables, tools and tool calls included.
    Dict globals;
    globals.Set("messages", Value::FromJson(*c.Find("messages")));
    const Json* tools = c.Find("tools");
    globals.Set("tools", tools != nullptr ? Value::FromJson(*tools) : Value::None());
    globals.Set("documents", Value::None());
    globals.Set("add_generation_prompt", Value::Bool(agp));
    if (base.bos_token) globals.Set("bos_token", Value::String(*base.bos_token));
    if (base.eos_token) globals.Set("eos_token", Value::String(*base.eos_token));
    if (extra != nullptr)
      for (const auto& [k, v] : extra->object()) globals.Set(k, Value::FromJson(v));
    const Json* case_globals = c.Find("globals");  // the template's own keyword arguments (gpt-oss)
    if (case_globals != nullptr)
      for (const auto& [k, v] : case_globals->object()) globals.Set(k, Value::FromJson(v));
    std::vector<StatusOr<std::string>> outs;
    outs.push_back((*tmpl)->jinja().Render(globals));
    if (IsPlainChat(c) && !has_extra && (case_globals == nullptr || case_globals->size() == 0)) {
      std::vector<ChatMessage> messages;
      for (const Json& m : c.Find("messages")->array())
        messages.push_back({m.Find("role")->as_string(), m.Find("content")->as_string()});
      ChatTemplateOptions opts = base;
      opts.add_generation_prompt = agp;
      outs.push_back((*tmpl)->Apply(messages, opts));
    }
    for (auto& out : outs) {
      if (const Json* err = c.Find("error")) {
        ASSERT_FALSE(out.ok()) << label;
        EXPECT_EQ(out.status().code(), LLM_ERR_INVALID_ARGUMENT) << label;
        EXPECT_EQ(out.status().message(), err->as_string()) << label;
      } else {
        ASSERT_TRUE(out.ok()) << label << ": " << out.status().message();
        std::string want = c.Find("expected")->as_string();
        if (!then_date.empty()) {
          const size_t at = want.find(then_date);
          ASSERT_NE(at, std::string::npos) << label << ": no " << then_date;
          want.replace(at, then_date.size(), today);
        }
        EXPECT_EQ(*out, want) << label;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, ModelTemplate,
                         ::testing::Values("llama3", "qwen3", "smollm2", "gemma3", "qwen25", "phi35", "gemma2",
                                           "mistral_nemo", "llama31", "llama32", "gpt_oss", "qwen3_no_thinking"));

// ------------------------------------------------- interpreter unit cases

TEST(Jinja, UnitCasesMatchJinja2) {
  Json doc = LoadJson("tests/data/chat/unit.json");
  const Json& cases = *doc.Find("cases");
  ASSERT_GE(cases.size(), 30u);
  for (const Json& c : cases.array()) {
    const std::string& text = c.Find("template")->as_string();
    auto out = RenderText(text, *c.Find("context"));
    if (const Json* err = c.Find("error")) {
      ASSERT_FALSE(out.ok()) << text;
      // Our errors say "template error: " first; the rest is jinja2's wording.
      std::string msg = out.status().message();
      if (msg.rfind("template error: ", 0) == 0) msg.erase(0, 16);
      EXPECT_EQ(msg, err->as_string()) << text;
    } else {
      ASSERT_TRUE(out.ok()) << text << "\n" << out.status().message();
      EXPECT_EQ(*out, c.Find("expected")->as_string()) << text;
    }
  }
}

TEST(Jinja, FloatRepr) {
  EXPECT_EQ(jinja::FloatRepr(1.0), "1.0");
  EXPECT_EQ(jinja::FloatRepr(-0.5), "-0.5");
  EXPECT_EQ(jinja::FloatRepr(1e16), "1e+16");
  EXPECT_EQ(jinja::FloatRepr(123456789012345.6), "123456789012345.6");
  EXPECT_EQ(jinja::FloatRepr(0.0001), "0.0001");
  EXPECT_EQ(jinja::FloatRepr(0.00001), "1e-05");
  EXPECT_EQ(jinja::FloatRepr(2.5e-300), "2.5e-300");
}

TEST(Jinja, ErrorsAreStatuses) {
  struct Case {
    const char* text;
    const char* needle;
  };
  const Case cases[] = {
      {"{{ x | no_such_filter }}", "no filter named 'no_such_filter'"},
      {"{% if x is no_such_test %}{% endif %}", "no test named 'no_such_test'"},
      {"{{ nope() }}", "'nope' is undefined"},
      {"{{ 'a' + 1 }}", "can only concatenate str"},
      {"{{ 1 / 0 }}", "division by zero"},
      {"{{ undefined_var.attr }}", "undefined"},
      {"{% set x.y = 1 %}", "non-namespace"},
      {"{% for a, b in [1] %}{% endfor %}", "unpack"},
      {"{{ 9223372036854775807 + 1 }}", "overflow"},
      {"{{ range(1000000) | length }}", "MAX_RANGE"},
      {"{{ [1] < 'a' }}", "not supported"},
  };
  for (const Case& c : cases) {
    auto out = RenderText(c.text);
    ASSERT_FALSE(out.ok()) << c.text;
    EXPECT_EQ(out.status().code(), LLM_ERR_INVALID_ARGUMENT) << c.text;
    EXPECT_NE(out.status().message().find(c.needle), std::string::npos) << c.text << ": " << out.status().message();
  }
}

TEST(Jinja, SyntaxErrors) {
  const char* const bad[] = {
      "{{ x ",            "{% if x %}",         "{% for x in y %}",   "{% if %}{% endif %}",
      "{{ 'abc }}",       "{# never closed",   "{% endif %}",        "{{ (1, 2 }}",
      "{{ [1, 2 }}",      "{{ } }}",            "{% unknown_tag %}",  "{{ x | }}",
      "{{ 1 + }}",        "{% set %}",          "{{ a.( }}",          "{% for in x %}{% endfor %}",
      "{% raw %}x{% endraw %}", "{{ x is }}",   "{{ @ }}",            "{% macro m( %}{% endmacro %}",
  };
  for (const char* text : bad) {
    auto t = Template::Compile(text);
    ASSERT_FALSE(t.ok()) << text;
    EXPECT_EQ(t.status().code(), LLM_ERR_INVALID_ARGUMENT) << text;
    EXPECT_NE(t.status().message().find("syntax error"), std::string::npos) << t.status().message();
  }
  EXPECT_EQ(Template::Compile("\xff{{ x }}").status().code(), LLM_ERR_INVALID_UTF8);
}

// ------------------------------------------------- hostile templates

TEST(Jinja, DeepNestingIsRejected) {
  std::string ifs, parens = "{{ ", nots = "{{ ", minus = "{{ ", lists = "{{ ";
  for (int i = 0; i < 5000; ++i) {
    ifs += "{% if true %}";
    parens += "(";
    nots += "not ";
    minus += "- ";
    lists += "[";
  }
  for (const std::string& t : {ifs, parens + "1", nots + "1 }}", minus + "1 }}", lists}) {
    auto r = Template::Compile(t);
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), LLM_ERR_INVALID_ARGUMENT);
  }
  // Within the limit, deep nesting works.
  std::string ok;
  for (int i = 0; i < 50; ++i) ok += "{% if true %}";
  ok += "x";
  for (int i = 0; i < 50; ++i) ok += "{% endif %}";
  auto out = RenderText(ok);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(*out, "x");
}

TEST(Jinja, HugeLoopsHitTheStepLimit) {
  const char* const loops[] = {
      "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
      "{% for a in range(100000) %}{% for b in range(100000) %}{{ a }}{% endfor %}{% endfor %}",
      "{% set ns = namespace(s='x') %}{% for a in range(100000) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
      "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
      "{% macro f() %}{{ f() }}{{ f() }}{% endmacro %}{{ f() }}",
      "{{ 'x' * 100000000 }}",
      "{{ ('x' * 1000000) * 1000 }}",
      "{{ range(99999) | join(',') | replace(',', range(99999) | join(',')) }}",
  };
  // The default limits stop all of these too (2M steps); a smaller budget
  // keeps the test fast under sanitizers.
  jinja::RenderLimits limits;
  EXPECT_EQ(limits.max_steps, 2000000u);
  limits.max_steps = 200000;
  for (const char* t : loops) {
    auto out = RenderText(t, Json::Object({}), limits);
    ASSERT_FALSE(out.ok()) << t;
    EXPECT_EQ(out.status().code(), LLM_ERR_INVALID_ARGUMENT) << t;
  }
  jinja::RenderLimits small;
  small.max_output = 1000;
  auto out = RenderText("{% for i in range(10000) %}abc{% endfor %}", Json::Object({}), small);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("too large"), std::string::npos);
}

TEST(Jinja, DeepValuesAndCyclesAreRejected) {
  const char* const bad[] = {
      "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l }}",
      "{% set ns = namespace(d={}) %}{% for i in range(100000) %}{% set ns.d = {'k': ns.d} %}{% endfor %}",
      "{% set x = namespace() %}{% for i in range(100000) %}{% set x = namespace(p=x) %}{% endfor %}",
      "{% set ns = namespace() %}{% set ns.me = ns %}",
      "{% set ns = namespace() %}{{ [ns] }}",
  };
  for (const char* t : bad) {
    auto out = RenderText(t);
    ASSERT_FALSE(out.ok()) << t;
    EXPECT_NE(out.status().message().find("namespace"), std::string::npos) << out.status().message();
  }
  // A loop that keeps its loop object does not leak it (checked under ASan).
  auto out = RenderText("{% set ns = namespace() %}{% for i in [1, 2] %}{% set ns.l = loop %}{% endfor %}"
                        "{{ ns.l.index }}{{ ns.l.cycle('a', 'b') }}");
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(*out, "2b");
}

// Mutated templates (truncated, bytes dropped or inserted) compile or fail
// cleanly, and render or fail cleanly: never a crash (run under ASan/UBSan).
TEST(Jinja, MutatedTemplatesFailCleanly) {
  const char kAlphabet[] = "{}%#-+()[]'\".|.,:=~ \n\\ax0";
  std::vector<ChatMessage> msgs = {{"system", "s"}, {"user", "u"}, {"assistant", "a"}, {"user", "v"}};
  ChatTemplateOptions opts;
  opts.add_generation_prompt = true;
  opts.bos_token = "<s>";
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  auto next = [&rng](size_t n) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return static_cast<size_t>(rng % n);
  };
  int rendered = 0;
  for (const char* name : {"llama3", "qwen3", "smollm2", "gemma3"}) {
    const std::string text = ReadFile(RepoDir() + "/tests/data/chat/templates/" + name + ".jinja");
    ASSERT_FALSE(text.empty());
    for (int i = 0; i < 300; ++i) {
      std::string m = text;
      for (int k = 0; k < 3; ++k) {
        size_t at = next(m.size() + 1);
        switch (next(3)) {
          case 0: m.resize(at); break;
          case 1: if (at < m.size()) m.erase(at, 1); break;
          default: m.insert(at, 1, kAlphabet[next(sizeof kAlphabet - 1)]); break;
        }
      }
      auto t = ChatTemplate::Create(m);
      if (!t.ok()) continue;
      auto out = (*t)->Apply(msgs, opts);
      rendered += out.ok();
    }
  }
  EXPECT_GT(rendered, 0);
}

TEST(Jinja, ConcurrentRenders) {
  std::string text = ReadFile(RepoDir() + "/tests/data/chat/templates/qwen3.jinja");
  auto tmpl = ChatTemplate::Create(text);
  ASSERT_TRUE(tmpl.ok());
  std::vector<ChatMessage> msgs = {{"system", "s"}, {"user", "u"}, {"assistant", "<think>\nr\n</think>\n\na"}};
  ChatTemplateOptions opts;
  opts.add_generation_prompt = true;
  auto expected = (*tmpl)->Apply(msgs, opts);
  ASSERT_TRUE(expected.ok());
  std::vector<std::thread> threads;
  std::vector<int> mismatches(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        auto out = (*tmpl)->Apply(msgs, opts);
        if (!out.ok() || *out != *expected) ++mismatches[static_cast<size_t>(t)];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

// ------------------------------------------------- the C API

TEST(ChatAbi, MessageLayout) {
  static_assert(offsetof(llm_chat_message, role) == 0);
  static_assert(offsetof(llm_chat_message, content) == sizeof(void*));
  static_assert(sizeof(llm_chat_message) == 2 * sizeof(void*));
}

class ChatApi : public ::testing::Test {
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

TEST_F(ChatApi, ModelWithoutTemplateIsUnsupported) {
  llm_chat_message m = {"user", "hi"};
  size_t n = 0;
  EXPECT_EQ(llm_chat_apply_template(ctx_, nullptr, &m, 1, 1, nullptr, 0, &n), LLM_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(llm_last_error()).find("chat template"), std::string::npos);
}

TEST_F(ChatApi, ExplicitTemplate) {
  const char* tmpl =
      "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content | trim }}</{{ m.role }}>{% endfor %}"
      "{% if add_generation_prompt %}<assistant>{% endif %}";
  llm_chat_message msgs[] = {{"system", " Be brief. "}, {"user", "Héllo 🦙"}};
  size_t n = 0;
  ASSERT_EQ(llm_chat_apply_template(ctx_, tmpl, msgs, 2, 1, nullptr, 0, &n), LLM_ERR_BUFFER_TOO_SMALL);
  std::string out(n, '\0');
  size_t n2 = 0;
  ASSERT_EQ(llm_chat_apply_template(ctx_, tmpl, msgs, 2, 1, out.data(), out.size(), &n2), LLM_OK) << llm_last_error();
  EXPECT_EQ(n2, n);
  // The bundled model's BOS text is "<s>".
  EXPECT_EQ(out, "<s><system>Be brief.</system><user>Héllo 🦙</user><assistant>");
  ASSERT_EQ(llm_chat_apply_template(ctx_, tmpl, msgs, 2, 0, out.data(), out.size(), &n2), LLM_OK);
  EXPECT_EQ(std::string(out.data(), n2), "<s><system>Be brief.</system><user>Héllo 🦙</user>");
  // No messages at all is a valid (empty) conversation.
  ASSERT_EQ(llm_chat_apply_template(ctx_, "[{{ messages | length }}]", nullptr, 0, 0, out.data(), out.size(), &n2),
            LLM_OK);
  EXPECT_EQ(std::string(out.data(), n2), "[0]");
}

TEST_F(ChatApi, Errors) {
  llm_chat_message m = {"user", "hi"};
  char buf[64];
  size_t n = 0;
  EXPECT_EQ(llm_chat_apply_template(nullptr, "x", &m, 1, 0, buf, sizeof buf, &n), LLM_ERR_NULL_ARGUMENT);
  EXPECT_EQ(llm_chat_apply_template(ctx_, "x", &m, 1, 0, buf, sizeof buf, nullptr), LLM_ERR_NULL_ARGUMENT);
  EXPECT_EQ(llm_chat_apply_template(ctx_, "x", nullptr, 1, 0, buf, sizeof buf, &n), LLM_ERR_NULL_ARGUMENT);
  EXPECT_EQ(llm_chat_apply_template(ctx_, "x", &m, 1, 0, nullptr, 8, &n), LLM_ERR_NULL_ARGUMENT);
  llm_chat_message null_role = {nullptr, "hi"};
  EXPECT_EQ(llm_chat_apply_template(ctx_, "x", &null_role, 1, 0, buf, sizeof buf, &n), LLM_ERR_NULL_ARGUMENT);
  llm_chat_message bad_utf8 = {"user", "\xc3"};
  EXPECT_EQ(llm_chat_apply_template(ctx_, "x", &bad_utf8, 1, 0, buf, sizeof buf, &n), LLM_ERR_INVALID_UTF8);
  EXPECT_EQ(llm_chat_apply_template(ctx_, "\xff", &m, 1, 0, buf, sizeof buf, &n), LLM_ERR_INVALID_UTF8);
  EXPECT_EQ(llm_chat_apply_template(ctx_, "x", &m, 1, 2, buf, sizeof buf, &n), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(llm_chat_apply_template(ctx_, "{% if %}", &m, 1, 0, buf, sizeof buf, &n), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(llm_last_error()).find("syntax error"), std::string::npos);
  EXPECT_EQ(llm_chat_apply_template(ctx_, "{{ raise_exception('roles must alternate') }}", &m, 1, 0, buf, sizeof buf, &n),
            LLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(llm_last_error()).find("roles must alternate"), std::string::npos);
  EXPECT_EQ(llm_chat_apply_template(ctx_, "{{ range(1000000) | length }}", &m, 1, 0, buf, sizeof buf, &n),
            LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(llm_chat_apply_template(ctx_, "{{ 'x' * 1000000000 }}", &m, 1, 0, buf, sizeof buf, &n),
            LLM_ERR_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace llm::test
