// Token-level sampling options (issue 20): logit_bias, stop_token_ids,
// min_tokens and top_logprobs — the rules themselves (sample/token_rules.h)
// and their contract through the C API on the built-in stories260K model.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <vector>

#include "llm.h"
#include "sample/sampler.h"
#include "sample/token_rules.h"
#include "support/api_helpers.h"

namespace llm::test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// ------------------------------------------------------------ TokenRules

TEST(TokenRules, RejectsBadValuesWithAMessage) {
  const int32_t eog[] = {2};
  auto make = [&](std::vector<std::pair<int32_t, float>> bias, std::vector<int32_t> stops = {}, int32_t min = 0) {
    return MakeTokenRules(bias, stops, min, /*max_tokens=*/10, /*n_prompt=*/3, /*n_vocab=*/8, eog, false);
  };
  EXPECT_TRUE(make({{1, 5.0f}, {7, -100.0f}, {3, -kInf}}).ok());
  for (auto bad : {std::vector<std::pair<int32_t, float>>{{-1, 1.0f}}, {{8, 1.0f}}, {{1, std::nanf("")}},
                   {{1, kInf}}, {{1, 100.5f}}, {{1, 1.0f}, {1, 2.0f}}}) {
    auto r = make(bad);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), LLM_ERR_INVALID_ARGUMENT);
    EXPECT_NE(r.status().message().find("logit_bias"), std::string::npos) << r.status().message();
  }
  EXPECT_FALSE(make({}, {8}).ok());
  EXPECT_FALSE(make({}, {-1}).ok());
  EXPECT_FALSE(make({}, {}, 11).ok()) << "min_tokens above max_tokens";
  EXPECT_FALSE(make({}, {}, -1).ok());
  EXPECT_TRUE(make({}, {}, 10).ok());
}

TEST(TokenRules, BiasAddsAndMinTokensMasksEndTokensUntilReached) {
  const int32_t eog[] = {2};
  const std::pair<int32_t, float> bias[] = {{1, 3.0f}, {4, -kInf}};
  const int32_t stops[] = {5};
  auto r = MakeTokenRules(bias, stops, /*min_tokens=*/2, 10, /*n_prompt=*/3, 8, eog, false);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->IsStopToken(5));
  EXPECT_FALSE(r->IsStopToken(2));
  for (size_t history : {3u, 4u, 5u}) {  // 0, 1, 2 tokens generated
    std::vector<float> l(8, 1.0f);
    r->Apply(l.data(), history);
    EXPECT_EQ(l[1], 4.0f);
    EXPECT_EQ(l[4], -kInf);
    const bool masked = history - 3 < 2;
    EXPECT_EQ(l[2] == -kInf, masked) << history;
    EXPECT_EQ(l[5] == -kInf, masked) << history;
    EXPECT_EQ(l[0], 1.0f);
  }
  // ignore_eos: EOG is an ordinary token, the stop token ids are still masked.
  auto r2 = MakeTokenRules({}, stops, 2, 10, 3, 8, eog, /*ignore_eos=*/true);
  ASSERT_TRUE(r2.ok());
  std::vector<float> l(8, 1.0f);
  r2->Apply(l.data(), 3);
  EXPECT_EQ(l[2], 1.0f);
  EXPECT_EQ(l[5], -kInf);
}

TEST(TopLogprobs, MostLikelyFirstTiesToLowerIdNanSkippedSameArithmeticAsTokenLogprob) {
  const float row[] = {1.0f, 3.0f, std::nanf(""), 3.0f, -kInf, 0.5f};
  std::vector<int32_t> scratch;
  std::vector<TopLogprob> top;
  TopLogprobs(row, 6, 4, &scratch, &top);
  ASSERT_EQ(top.size(), 4u);
  const int32_t want[] = {1, 3, 0, 5};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(top[i].token, want[i]);
    EXPECT_EQ(top[i].logprob, TokenLogprob(row, 6, want[i])) << "bit-identical to the event's logprob";
  }
  TopLogprobs(row, 6, 20, &scratch, &top);
  EXPECT_EQ(top.size(), 5u) << "k above the vocabulary: every non-NaN token";
  EXPECT_EQ(top.back().token, 4);
  EXPECT_EQ(top.back().logprob, -kInf);
}

// ------------------------------------------------------------ C API

struct Event {
  llm_token token;
  float logprob;
  std::vector<llm_top_logprob> top;
  int32_t n_top = -1;
};
struct Outcome {
  std::vector<Event> events;
  std::vector<llm_token> tokens;
  int32_t finish_reason = LLM_FINISH_NONE;
  std::string text;
};

class SamplingOptions : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    llm_ctx_params p;
    llm_ctx_params_init(&p);
    std::string path = ModelPathF32();
    p.model_path = path.c_str();
    p.n_threads = 2;
    p.n_ctx = 256;
    ASSERT_EQ(llm_ctx_create(&p, &ctx_), LLM_OK) << llm_last_error();
    llm_model_info info{};
    info.struct_size = sizeof info;
    ASSERT_EQ(llm_model_get_info(ctx_, &info), LLM_OK);
    n_vocab_ = info.n_vocab;
    eos_ = info.eos;
  }
  static void TearDownTestSuite() {
    llm_ctx_destroy(ctx_);
    ctx_ = nullptr;
  }

  static void Greedy(llm_sampling_params* sp) {
    llm_sampling_params_init(sp);
    sp->temperature = 0;
  }
  static llm_request Request(const llm_sampling_params* sp, int32_t max_tokens) {
    llm_request r;
    llm_request_init(&r);
    r.prompt = "Once upon a time";
    r.max_tokens = max_tokens;
    r.sampling = sp;
    return r;
  }
  // Submits and polls (with the full event size) until the final event.
  static Outcome Gen(const llm_request& r) {
    Outcome out;
    llm_request_id id = 0;
    EXPECT_EQ(llm_submit(ctx_, &r, &id), LLM_OK) << llm_last_error();
    if (id == 0) return out;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    llm_event ev[16];
    while (std::chrono::steady_clock::now() < deadline) {
      ev[0].struct_size = sizeof(llm_event);
      uint32_t n = 0;
      EXPECT_EQ(llm_poll(ctx_, ev, 16, &n, 100), LLM_OK);
      for (uint32_t i = 0; i < n; ++i) {
        if (ev[i].request_id != id) continue;
        if (ev[i].type == LLM_EVENT_FINAL) {
          out.text.append(ev[i].text, ev[i].text_len);
          out.finish_reason = ev[i].finish_reason;
          EXPECT_EQ(ev[i].top_logprobs, nullptr);
          return out;
        }
        Event e{ev[i].token, ev[i].logprob, {}, ev[i].n_top_logprobs};
        if (ev[i].top_logprobs != nullptr) e.top.assign(ev[i].top_logprobs, ev[i].top_logprobs + ev[i].n_top_logprobs);
        out.events.push_back(e);
        out.tokens.push_back(ev[i].token);
        out.text.append(ev[i].text, ev[i].text_len);
      }
    }
    ADD_FAILURE() << "no final event";
    return out;
  }
  static llm_status SubmitStatus(const llm_request& r) {
    llm_request_id id = 0;
    const llm_status s = llm_submit(ctx_, &r, &id);
    if (s == LLM_OK) {
      (void)Gen(r);  // drain it; should not happen in the tests that call this
    } else {
      EXPECT_EQ(id, 0u);
      EXPECT_STRNE(llm_last_error(), "");
    }
    return s;
  }

  static llm_ctx* ctx_;
  static int32_t n_vocab_, eos_;
};
llm_ctx* SamplingOptions::ctx_ = nullptr;
int32_t SamplingOptions::n_vocab_ = 0;
int32_t SamplingOptions::eos_ = -1;

TEST_F(SamplingOptions, LogitBiasBansAndForcesTokens) {
  llm_sampling_params sp;
  Greedy(&sp);
  const Outcome plain = Gen(Request(&sp, 12));
  ASSERT_EQ(plain.tokens.size(), 12u);

  // -inf on the greedy choice: never sampled, and the output changes.
  const llm_logit_bias ban[] = {{plain.tokens[0], -INFINITY}};
  sp.logit_bias = ban;
  sp.n_logit_bias = 1;
  const Outcome banned = Gen(Request(&sp, 12));
  ASSERT_EQ(banned.tokens.size(), 12u);
  EXPECT_EQ(std::count(banned.tokens.begin(), banned.tokens.end(), plain.tokens[0]), 0);
  EXPECT_NE(banned.tokens[0], plain.tokens[0]);
  // The logprob an event reports is the model's, not the biased one.
  EXPECT_LT(banned.events[0].logprob, 0.0f);
  EXPECT_GT(banned.events[0].logprob, -INFINITY);

  // +100 on one token: every token is that one (until max_tokens).
  const llm_token forced = plain.tokens[3] == eos_ ? plain.tokens[2] : plain.tokens[3];
  const llm_logit_bias force[] = {{forced, 100.0f}};
  sp.logit_bias = force;
  const Outcome all = Gen(Request(&sp, 6));
  EXPECT_EQ(all.tokens, std::vector<llm_token>(6, forced));

  // The same at temperature 1: a +100 bias leaves nothing else with mass.
  sp.temperature = 1.0f;
  sp.seed = 3;
  EXPECT_EQ(Gen(Request(&sp, 6)).tokens, std::vector<llm_token>(6, forced));
}

TEST_F(SamplingOptions, StopTokenIdsEndTheSequenceWithoutTheirText) {
  llm_sampling_params sp;
  Greedy(&sp);
  const Outcome plain = Gen(Request(&sp, 30));
  ASSERT_EQ(plain.tokens.size(), 30u);
  const llm_token stop = plain.tokens[6];
  const size_t first = static_cast<size_t>(std::find(plain.tokens.begin(), plain.tokens.end(), stop) - plain.tokens.begin());
  llm_request r = Request(&sp, 30);
  const llm_token ids[] = {stop};
  r.stop_token_ids = ids;
  r.n_stop_token_ids = 1;
  r.ignore_eos = 1;  // stop tokens end a sequence even then
  const Outcome cut = Gen(r);
  EXPECT_EQ(cut.finish_reason, LLM_FINISH_STOP);
  ASSERT_EQ(cut.tokens.size(), first + 1);
  EXPECT_EQ(cut.tokens.back(), stop);
  EXPECT_TRUE(std::equal(cut.tokens.begin(), cut.tokens.end(), plain.tokens.begin()));
  // The text is that of the tokens before the stop token.
  EXPECT_EQ(plain.text.rfind(cut.text, 0), 0u) << cut.text;
  EXPECT_LT(cut.text.size(), plain.text.size());
}

TEST_F(SamplingOptions, MinTokensMasksEosUntilReached) {
  llm_sampling_params sp;
  Greedy(&sp);
  const llm_logit_bias to_eos[] = {{eos_, 100.0f}};  // EOS as soon as it is allowed
  sp.logit_bias = to_eos;
  sp.n_logit_bias = 1;
  const Outcome at_once = Gen(Request(&sp, 20));
  EXPECT_EQ(at_once.tokens, std::vector<llm_token>{eos_});
  EXPECT_EQ(at_once.finish_reason, LLM_FINISH_STOP);
  llm_request r = Request(&sp, 20);
  r.min_tokens = 5;
  const Outcome late = Gen(r);
  ASSERT_EQ(late.tokens.size(), 6u) << "five tokens, then EOS";
  EXPECT_EQ(late.tokens.back(), eos_);
  EXPECT_EQ(std::count(late.tokens.begin(), late.tokens.end(), eos_), 1);
  EXPECT_EQ(late.finish_reason, LLM_FINISH_STOP);
  // With speculative (n-gram) decoding, which samples several positions per
  // step, the mask lifts at the same position.
  r.spec_mode = LLM_SPEC_NGRAM;
  EXPECT_EQ(Gen(r).tokens, late.tokens);
}

TEST_F(SamplingOptions, TopLogprobsListTheKMostLikely) {
  llm_sampling_params sp;
  Greedy(&sp);
  llm_request r = Request(&sp, 10);
  r.top_logprobs = 5;
  const Outcome run = Gen(r);
  ASSERT_EQ(run.events.size(), 10u);
  for (const Event& e : run.events) {
    ASSERT_EQ(e.n_top, 5);
    ASSERT_EQ(e.top.size(), 5u);
    EXPECT_EQ(e.top[0].token, e.token) << "greedy: the sampled token is the most likely";
    EXPECT_EQ(e.top[0].logprob, e.logprob);
    for (size_t i = 1; i < 5; ++i) {
      EXPECT_LE(e.top[i].logprob, e.top[i - 1].logprob);
      EXPECT_NE(e.top[i].token, e.top[i - 1].token);
    }
    double mass = 0;
    for (const llm_top_logprob& t : e.top) mass += std::exp(t.logprob);
    EXPECT_LE(mass, 1.0 + 1e-5);
  }
  // Without top_logprobs the field is NULL and 0.
  r.top_logprobs = 0;
  for (const Event& e : Gen(r).events) EXPECT_EQ(e.n_top, 0);
  // Speculative decoding reports them for every accepted token too.
  r.top_logprobs = 3;
  r.spec_mode = LLM_SPEC_NGRAM;
  const Outcome spec = Gen(r);
  ASSERT_EQ(spec.tokens, run.tokens);
  for (size_t i = 0; i < spec.events.size(); ++i) {
    ASSERT_EQ(spec.events[i].top.size(), 3u);
    for (size_t j = 0; j < 3; ++j) EXPECT_EQ(spec.events[i].top[j].token, run.events[i].top[j].token);
  }
}

TEST_F(SamplingOptions, InvalidValuesAreRejectedAtSubmit) {
  llm_sampling_params sp;
  Greedy(&sp);
  auto bias_status = [&](llm_logit_bias b) {
    sp.logit_bias = &b;
    sp.n_logit_bias = 1;
    return SubmitStatus(Request(&sp, 4));
  };
  EXPECT_EQ(bias_status({1, NAN}), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(llm_last_error()).find("logit_bias[0].bias"), std::string::npos) << llm_last_error();
  EXPECT_EQ(bias_status({1, INFINITY}), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bias_status({1, 150.0f}), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bias_status({-1, 1.0f}), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bias_status({n_vocab_, 1.0f}), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(llm_last_error()).find("outside the vocabulary"), std::string::npos) << llm_last_error();
  const llm_logit_bias twice[] = {{1, 1.0f}, {1, 2.0f}};
  sp.logit_bias = twice;
  sp.n_logit_bias = 2;
  EXPECT_EQ(SubmitStatus(Request(&sp, 4)), LLM_ERR_INVALID_ARGUMENT);
  sp.logit_bias = nullptr;
  EXPECT_EQ(SubmitStatus(Request(&sp, 4)), LLM_ERR_NULL_ARGUMENT);
  sp.n_logit_bias = -1;
  EXPECT_EQ(SubmitStatus(Request(&sp, 4)), LLM_ERR_INVALID_ARGUMENT);
  Greedy(&sp);
  sp.reserved1 = 1;
  EXPECT_EQ(SubmitStatus(Request(&sp, 4)), LLM_ERR_INVALID_ARGUMENT);
  Greedy(&sp);

  llm_request r = Request(&sp, 4);
  r.top_logprobs = 21;
  EXPECT_EQ(SubmitStatus(r), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(llm_last_error()).find("top_logprobs"), std::string::npos);
  r.top_logprobs = -1;
  EXPECT_EQ(SubmitStatus(r), LLM_ERR_INVALID_ARGUMENT);
  r = Request(&sp, 4);
  r.min_tokens = 5;
  EXPECT_EQ(SubmitStatus(r), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(llm_last_error()).find("min_tokens"), std::string::npos);
  r = Request(&sp, 4);
  const llm_token bad[] = {n_vocab_};
  r.stop_token_ids = bad;
  r.n_stop_token_ids = 1;
  EXPECT_EQ(SubmitStatus(r), LLM_ERR_INVALID_ARGUMENT);
  r.stop_token_ids = nullptr;
  EXPECT_EQ(SubmitStatus(r), LLM_ERR_NULL_ARGUMENT);
  r = Request(&sp, 4);
  r.reserved1 = 7;
  EXPECT_EQ(SubmitStatus(r), LLM_ERR_INVALID_ARGUMENT);
}

TEST_F(SamplingOptions, OlderStructSizesIgnoreTheNewFields) {
  // A caller built against the 0.1 header: its structs end before the new
  // fields, whatever bytes follow them in memory.
  llm_sampling_params sp;
  Greedy(&sp);
  const Outcome plain = Gen(Request(&sp, 8));
  sp.struct_size = static_cast<uint32_t>(offsetof(llm_sampling_params, logit_bias));
  std::memset(reinterpret_cast<char*>(&sp) + sp.struct_size, 0xAB, sizeof sp - sp.struct_size);
  llm_request r = Request(&sp, 8);
  r.struct_size = static_cast<uint32_t>(offsetof(llm_request, stop_token_ids));
  std::memset(reinterpret_cast<char*>(&r) + r.struct_size, 0xCD, sizeof r - r.struct_size);
  const Outcome old = Gen(r);
  EXPECT_EQ(old.tokens, plain.tokens);

  // An old llm_event (no top_logprobs) is written with its own stride.
  r = Request(&sp, 3);
  r.top_logprobs = 2;
  sp.struct_size = sizeof sp;
  Greedy(&sp);
  r.sampling = &sp;
  llm_request_id id = 0;
  ASSERT_EQ(llm_submit(ctx_, &r, &id), LLM_OK);
  constexpr size_t kOld = offsetof(llm_event, top_logprobs);
  std::vector<unsigned char> buf(kOld * 8 + 64, 0xEE);
  auto* ev = reinterpret_cast<llm_event*>(buf.data());
  int finals = 0;
  for (int tries = 0; tries < 600 && finals == 0; ++tries) {
    ev->struct_size = kOld;
    uint32_t n = 0;
    ASSERT_EQ(llm_poll(ctx_, ev, 8, &n, 100), LLM_OK);
    for (uint32_t i = 0; i < n; ++i) {
      auto* e = reinterpret_cast<llm_event*>(buf.data() + i * kOld);
      EXPECT_EQ(e->struct_size, kOld);
      if (e->type == LLM_EVENT_FINAL && e->request_id == id) ++finals;
    }
    EXPECT_EQ(buf[kOld * 8], 0xEE) << "nothing written past the caller's array";
  }
  EXPECT_EQ(finals, 1);
}

}  // namespace
}  // namespace llm::test
