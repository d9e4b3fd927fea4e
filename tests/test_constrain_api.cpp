// Constrained decoding through the public C API only (issue 20): GRAMMAR,
// REGEX, CHOICE and JSON_OBJECT requests on the built-in stories260K model,
// with n = 2, top_logprobs, and speculative decoding (n-gram and self-draft)
// giving the same greedy output as without it; invalid constraints rejected
// at llm_submit with the position in llm_last_error(). Outputs are checked
// with std::regex / a small JSON reader, not with the engine's own matcher.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "llm.h"
#include "support/api_helpers.h"
#include "support/test_paths.h"
#include "util/json.h"

namespace llm::test {
namespace {

llm_ctx* MakeCtx(int32_t self_draft_layers = 0) {
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  static const std::string path = ModelPathF32();
  p.model_path = path.c_str();
  p.n_threads = 2;
  p.self_draft_layers = self_draft_layers;
  llm_ctx* ctx = nullptr;
  EXPECT_EQ(llm_ctx_create(&p, &ctx), LLM_OK) << llm_last_error();
  return ctx;
}

struct Req {
  llm_request r;
  llm_sampling_params sp;
  Req(const char* prompt, int32_t kind, const char* constraint, float temperature = 0.0f, uint64_t seed = 1) {
    llm_sampling_params_init(&sp);
    sp.temperature = temperature;
    sp.seed = seed;
    llm_request_init(&r);
    r.prompt = prompt;
    r.max_tokens = 120;
    r.sampling = &sp;
    r.constraint_kind = kind;
    r.constraint = constraint;
  }
};

std::vector<SeqResult> Submit(llm_ctx* ctx, const llm_request& r) {
  llm_request_id id = 0;
  EXPECT_EQ(llm_submit(ctx, &r, &id), LLM_OK) << llm_last_error();
  if (id == 0) return {};
  return WaitFor(ctx, id, r.n);
}

bool FullMatch(const std::string& text, const char* ecmascript) {
  return std::regex_match(text, std::regex(ecmascript, std::regex::ECMAScript));
}

constexpr const char* kGrammar =
    "root ::= name \" said \" quote\n"
    "name ::= [A-Z] [a-z]{1,10}\n"
    "quote ::= \"\\\"\" [a-z ,]{1,40} [.!?] \"\\\"\"\n";
constexpr const char* kGrammarAsRegex = "[A-Z][a-z]{1,10} said \"[a-z ,]{1,40}[.!?]\"";

TEST(ConstrainApi, GrammarRegexChoiceAndJsonObjectOutputsMatch) {
  llm_ctx* ctx = MakeCtx();
  ASSERT_NE(ctx, nullptr);
  for (uint64_t seed : {1u, 2u, 3u}) {
    Req g("Once upon a time", LLM_CONSTRAINT_GRAMMAR, kGrammar, 1.0f, seed);
    auto out = Submit(ctx, g.r);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].finish_reason, LLM_FINISH_STOP) << out[0].text;
    EXPECT_TRUE(FullMatch(out[0].text, kGrammarAsRegex)) << out[0].text;

    const char* rx = "(Tom|Lily) (is|was) ([0-9]{1,3}|very [a-z]{2,12})\\.";
    Req x("Once upon a time", LLM_CONSTRAINT_REGEX, rx, 1.0f, seed);
    out = Submit(ctx, x.r);
    EXPECT_EQ(out[0].finish_reason, LLM_FINISH_STOP) << out[0].text;
    EXPECT_TRUE(FullMatch(out[0].text, rx)) << out[0].text;

    const char* choices[] = {"happy", "sad", "a little sleepy"};
    Req c("The girl was", LLM_CONSTRAINT_CHOICE, nullptr, 1.0f, seed);
    c.r.choices = choices;
    c.r.n_choices = 3;
    out = Submit(ctx, c.r);
    EXPECT_EQ(out[0].finish_reason, LLM_FINISH_STOP);
    EXPECT_TRUE(out[0].text == "happy" || out[0].text == "sad" || out[0].text == "a little sleepy") << out[0].text;
  }
  llm_ctx_destroy(ctx);
}

// JSON_OBJECT on SmolLM2-135M-Instruct (a story model never closes its
// objects): at temperature 1, every sample ends with EOS and parses as a
// JSON object.
TEST(ConstrainApi, JsonObjectOnSmolLM2ParsesAndEndsWithEos) {
  const std::string path = RepoDir() + "/models/pypi/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not fetched (scripts/fetch-models.sh)";
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  p.model_path = path.c_str();
  p.n_threads = 2;
  llm_ctx* ctx = nullptr;
  ASSERT_EQ(llm_ctx_create(&p, &ctx), LLM_OK) << llm_last_error();
  const char* prompt =
      "<|im_start|>user\nDescribe a cat as a JSON object with its name, age and colour.<|im_end|>\n"
      "<|im_start|>assistant\n";
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  const uint64_t n_samples = 1;  // sanitizer builds decode SmolLM2 ~10x slower
#else
  const uint64_t n_samples = 3;
#endif
  for (uint64_t seed = 1; seed <= n_samples; ++seed) {
    Req j(prompt, LLM_CONSTRAINT_JSON_OBJECT, nullptr, seed == 1 ? 0.0f : 1.0f, seed);
    j.r.tokenize_flags = LLM_TOKENIZE_PARSE_SPECIAL;
    j.r.max_tokens = 400;
    auto out = Submit(ctx, j.r);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].finish_reason, LLM_FINISH_STOP) << out[0].text;
    auto doc = ParseJson(out[0].text);
    ASSERT_TRUE(doc.ok()) << out[0].text << ": " << doc.status().message();
    EXPECT_TRUE(doc->is_object()) << out[0].text;
  }
  llm_ctx_destroy(ctx);
}

TEST(ConstrainApi, ParallelSamplesAndTopLogprobs) {
  llm_ctx* ctx = MakeCtx();
  ASSERT_NE(ctx, nullptr);
  Req g("Once upon a time", LLM_CONSTRAINT_GRAMMAR, kGrammar, 1.0f, 7);
  g.r.n = 2;
  auto out = Submit(ctx, g.r);
  ASSERT_EQ(out.size(), 2u);
  for (const auto& s : out) {
    EXPECT_EQ(s.finish_reason, LLM_FINISH_STOP) << s.text;
    EXPECT_TRUE(FullMatch(s.text, kGrammarAsRegex)) << s.text;
  }
  EXPECT_NE(out[0].text, out[1].text) << "two samples at temperature 1";

  // top_logprobs report the model's distribution (before the mask), so the
  // sampled token need not be among them, but the events must carry k each.
  Req t("Once upon a time", LLM_CONSTRAINT_REGEX, "[A-Z][a-z]+ [a-z]+\\.", 0.0f);
  t.r.top_logprobs = 3;
  llm_request_id id = 0;
  ASSERT_EQ(llm_submit(ctx, &t.r, &id), LLM_OK) << llm_last_error();
  std::string text;
  int token_events = 0;
  bool done = false;
  for (int spins = 0; !done && spins < 500; ++spins) {
    llm_event ev[8];
    ev[0].struct_size = sizeof(llm_event);
    uint32_t got = 0;
    ASSERT_EQ(llm_poll(ctx, ev, 8, &got, 200), LLM_OK);
    for (uint32_t k = 0; k < got; ++k) {
      if (ev[k].request_id != id) continue;
      text.append(ev[k].text, ev[k].text_len);
      if (ev[k].type == LLM_EVENT_TOKEN) {
        ++token_events;
        ASSERT_NE(ev[k].top_logprobs, nullptr);
        EXPECT_LE(ev[k].top_logprobs[1].logprob, ev[k].top_logprobs[0].logprob);
      } else {
        done = true;
        EXPECT_EQ(ev[k].finish_reason, LLM_FINISH_STOP);
      }
    }
  }
  EXPECT_TRUE(done);
  EXPECT_GT(token_events, 2);
  EXPECT_TRUE(FullMatch(text, "[A-Z][a-z]+ [a-z]+\\.")) << text;
  llm_ctx_destroy(ctx);
}

TEST(ConstrainApi, SpeculativeDecodingGivesTheSameGreedyOutput) {
  // Greedy + constraint, with and without drafts: the mask applies at every
  // verified position, and drafts the constraint forbids are cut before
  // verification, so the outputs are identical.
  const char* rx = "(Once upon a time, there was a [a-z]{1,12}\\. ){1,4}The end\\.";
  std::vector<std::string> base;
  {
    llm_ctx* ctx = MakeCtx();
    ASSERT_NE(ctx, nullptr);
    for (const char* c : {kGrammar, rx}) {
      Req r("Once upon a time", c == rx ? LLM_CONSTRAINT_REGEX : LLM_CONSTRAINT_GRAMMAR, c);
      r.r.spec_mode = LLM_SPEC_OFF;
      auto out = Submit(ctx, r.r);
      base.push_back(out[0].text);
      EXPECT_EQ(out[0].finish_reason, LLM_FINISH_STOP) << out[0].text;
    }
    llm_ctx_destroy(ctx);
  }
  for (int32_t mode : {LLM_SPEC_NGRAM, LLM_SPEC_DRAFT}) {
    llm_ctx* ctx = MakeCtx(mode == LLM_SPEC_DRAFT ? 2 : 0);
    ASSERT_NE(ctx, nullptr);
    int64_t proposed = 0;
    size_t i = 0;
    for (const char* c : {kGrammar, rx}) {
      Req r("Once upon a time", c == rx ? LLM_CONSTRAINT_REGEX : LLM_CONSTRAINT_GRAMMAR, c);
      r.r.spec_mode = mode;
      r.r.spec_k = 4;
      auto out = Submit(ctx, r.r);
      EXPECT_EQ(out[0].text, base[i++]) << "spec_mode " << mode;
      proposed += out[0].metrics.draft_tokens_proposed;
    }
    EXPECT_GT(proposed, 0) << "spec_mode " << mode << " never drafted: the test would prove nothing";
    llm_ctx_destroy(ctx);
  }
}

TEST(ConstrainApi, InvalidConstraintsAreRejectedAtSubmitWithThePosition) {
  llm_ctx* ctx = MakeCtx();
  ASSERT_NE(ctx, nullptr);
  auto submit = [&](int32_t kind, const char* text) {
    Req r("Hi", kind, text);
    llm_request_id id = 0;
    const llm_status s = llm_submit(ctx, &r.r, &id);
    return std::make_pair(s, std::string(llm_last_error()));
  };
  auto [s1, m1] = submit(LLM_CONSTRAINT_GRAMMAR, "root ::= \"a\"\nfoo ::= [z-a]");
  EXPECT_EQ(s1, LLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(m1.find("line 2:11"), std::string::npos) << m1;
  auto [s2, m2] = submit(LLM_CONSTRAINT_REGEX, "ab(c|d");
  EXPECT_EQ(s2, LLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(m2.find("offset 2"), std::string::npos) << m2;
  auto [s3, m3] = submit(LLM_CONSTRAINT_GRAMMAR, nullptr);
  EXPECT_EQ(s3, LLM_ERR_NULL_ARGUMENT) << m3;
  auto [s4, m4] = submit(99, "x");
  EXPECT_EQ(s4, LLM_ERR_INVALID_ARGUMENT) << m4;
  Req c("Hi", LLM_CONSTRAINT_CHOICE, nullptr);
  llm_request_id id = 0;
  EXPECT_EQ(llm_submit(ctx, &c.r, &id), LLM_ERR_INVALID_ARGUMENT) << "no choices";
  Req w("Hi", LLM_CONSTRAINT_JSON_OBJECT, nullptr);
  w.r.constraint_whitespace = 2;
  EXPECT_EQ(llm_submit(ctx, &w.r, &id), LLM_ERR_INVALID_ARGUMENT) << "constraint_whitespace 2";
  EXPECT_NE(std::string(llm_last_error()).find("constraint_whitespace"), std::string::npos) << llm_last_error();
  llm_ctx_destroy(ctx);
}

// Issue 29: a story model never closes a JSON value of its own accord; with
// max_tokens just above the shortest completion (a schema needing two
// strings of 3 to 6 characters and an array of at least 2 integers) the
// budget-aware mask still ends every sample with EOS on a valid value, in
// both whitespace modes, and the bounded one keeps its layout.
TEST(ConstrainApi, TightMaxTokensStillEndWithEosOnACompleteValue) {
  llm_ctx* ctx = MakeCtx();
  ASSERT_NE(ctx, nullptr);
  const char* schema = R"({"type":"object","properties":{"name":{"type":"string","minLength":3,"maxLength":6},
    "tags":{"type":"array","items":{"type":"integer"},"minItems":2},"note":{"type":"string","minLength":3}},
    "required":["name","tags","note"],"additionalProperties":false})";
  int stops = 0, samples = 0;
  for (int32_t ws : {LLM_WHITESPACE_BOUNDED, LLM_WHITESPACE_FREE})
    for (int32_t max_tokens : {39, 44, 56})  // the shortest completion is 38 of stories260K's tokens
      for (uint64_t seed : {1u, 2u, 3u}) {
        Req j("Once upon a time", LLM_CONSTRAINT_JSON_SCHEMA, schema, 1.0f, seed);
        j.r.max_tokens = max_tokens;
        j.r.constraint_whitespace = ws;
        auto out = Submit(ctx, j.r);
        ASSERT_EQ(out.size(), 1u);
        ++samples;
        stops += out[0].finish_reason == LLM_FINISH_STOP;
        EXPECT_EQ(out[0].finish_reason, LLM_FINISH_STOP) << max_tokens << ": " << out[0].text;
        auto doc = ParseJson(out[0].text);
        ASSERT_TRUE(doc.ok()) << out[0].text;
        EXPECT_TRUE(doc->Find("name") && doc->Find("tags") && doc->Find("note")) << out[0].text;
        if (ws == LLM_WHITESPACE_BOUNDED) EXPECT_EQ(out[0].text.find_first_of("\t\r"), std::string::npos) << out[0].text;
      }
  EXPECT_EQ(stops, samples);
  llm_ctx_destroy(ctx);
}

// A schema whose grammar breaks one of the grammar's limits is the caller's
// too-large input (INVALID_ARGUMENT naming the limit), never INTERNAL: the
// server turns INTERNAL into a 500 (issue 37).
TEST(ConstrainApi, SchemasPastTheGrammarLimitsAreInvalidArgumentsNamingTheLimit) {
  llm_ctx* ctx = MakeCtx();
  ASSERT_NE(ctx, nullptr);
  std::string big_enum = R"({"enum":[)";
  for (int i = 0; i < 100000; ++i) big_enum += (i ? ",\"value-" : "\"value-") + std::to_string(i) + "\"";
  big_enum += "]}";
  const std::pair<std::string, const char*> cases[] = {
      {R"({"type":"array","items":{"type":"integer"},"minItems":1000000})", "limit"},
      {big_enum, "grammar longer than"},
  };
  for (const auto& [schema, limit] : cases) {
    Req r("Hi", LLM_CONSTRAINT_JSON_SCHEMA, schema.c_str());
    llm_request_id id = 0;
    EXPECT_EQ(llm_submit(ctx, &r.r, &id), LLM_ERR_INVALID_ARGUMENT) << schema.substr(0, 80);
    const std::string m = llm_last_error();
    EXPECT_NE(m.find("limit"), std::string::npos) << m;
    EXPECT_NE(m.find(limit), std::string::npos) << m;
  }
  llm_ctx_destroy(ctx);
}

// A schema whose matching runs into the matcher's limit (an anyOf of 2000
// objects: 6000 parses after "{", kMaxStacksPerState is 4096) must not end
// as a "stop" with an empty or partial value: the sequence ends with an
// error that says why.
TEST(ConstrainApi, AConstraintAtTheMatcherLimitEndsWithAnErrorNotAStop) {
  llm_ctx* ctx = MakeCtx();
  ASSERT_NE(ctx, nullptr);
  std::string schema = R"({"anyOf":[)";
  for (int i = 0; i < 2000; ++i)
    schema += std::string(i ? "," : "") + R"({"type":"object","properties":{"k)" + std::to_string(i) +
              R"(":{"type":"integer"}},"required":["k)" + std::to_string(i) + R"("]})";
  schema += "]}";
  for (float temperature : {0.0f, 0.8f}) {
    Req r("Hi", LLM_CONSTRAINT_JSON_SCHEMA, schema.c_str(), temperature);
    auto out = Submit(ctx, r.r);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].finish_reason, LLM_FINISH_ERROR) << "text: '" << out[0].text << "'";
    EXPECT_EQ(out[0].status, LLM_ERR_INVALID_ARGUMENT);
    EXPECT_NE(out[0].message.find("too ambiguous"), std::string::npos) << out[0].message;
  }
  llm_ctx_destroy(ctx);
}

}  // namespace
}  // namespace llm::test
