// Reasoning output through the public C API (issue 32), on a synthesized
// Qwen3-shaped model whose byte-level vocabulary has "<think>" and
// "</think>" as user-defined tokens (as Qwen3's are) and Qwen3's real chat
// template: the events' text / reasoning_text / part, thinking opened by the
// prompt, unterminated thinking, AUTO resolved from the template, a
// constraint that starts only after "</think>", and bad values refused.
//
// A random-weight model writes no "</think>" of its own: a logit bias on it
// makes greedy decoding write it at once (so the thinking is empty) and a
// constraint then decides the answer; the parser's handling of real
// thinking text is tested on recorded outputs in test_reasoning_parser.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <regex>
#include <string>
#include <unistd.h>
#include <vector>

#include "llm.h"
#include "support/test_paths.h"
#include "synth_model.h"

namespace llm::test {
namespace {

struct Out {
  std::string content, reasoning;
  std::vector<int32_t> parts;  // per TOKEN event
  std::vector<llm_token> tokens;
  int32_t final_part = -1;
  int32_t finish = LLM_FINISH_NONE;
};

class ReasoningApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const synth::SynthShape* shape = synth::FindSynthShape("tiny-qwen3");
    ASSERT_NE(shape, nullptr);
    synth::SynthOptions o;
    o.type = TensorType::F32;
    o.seed = 7;
    o.stddev = 0.25f;
    o.think_tokens = true;
    o.chat_template = ReadFile(RepoDir() + "/tests/data/chat/templates/qwen3.jinja");
    path_ = ::testing::TempDir() + "/llmrt_reasoning_" + std::to_string(::getpid()) + ".gguf";
    Status st = synth::WriteSynthModel(*shape, o, path_);
    ASSERT_TRUE(st.ok()) << st.message();
    llm_ctx_params p;
    llm_ctx_params_init(&p);
    p.model_path = path_.c_str();
    p.n_threads = 2;
    p.n_ctx = 512;
    ASSERT_EQ(llm_ctx_create(&p, &ctx_), LLM_OK) << llm_last_error();
    think_ = Token("<think>");
    close_ = Token("</think>");
  }
  static void TearDownTestSuite() {
    llm_ctx_destroy(ctx_);
    ctx_ = nullptr;
    std::remove(path_.c_str());
  }
  static llm_token Token(const char* text) {
    llm_token ids[8];
    int32_t n = 0;
    EXPECT_EQ(llm_tokenize(ctx_, text, std::strlen(text), LLM_TOKENIZE_PARSE_SPECIAL, ids, 8, &n), LLM_OK);
    EXPECT_EQ(n, 1) << text << " is not one token";
    return ids[0];
  }

  // Greedy; `prompt` ends the way the template's generation prompt does.
  static Out Run(const std::string& prompt, int32_t format, int32_t max_tokens, float close_bias = 0.0f,
                 int32_t constraint_kind = LLM_CONSTRAINT_NONE, const char* constraint = nullptr,
                 llm_token bias_token = -1) {
    llm_sampling_params sp;
    llm_sampling_params_init(&sp);
    sp.temperature = 0.0f;
    llm_logit_bias bias{bias_token >= 0 ? bias_token : close_, close_bias};
    if (close_bias != 0.0f) {
      sp.logit_bias = &bias;
      sp.n_logit_bias = 1;
    }
    llm_request r;
    llm_request_init(&r);
    r.prompt = prompt.c_str();
    r.tokenize_flags = LLM_TOKENIZE_PARSE_SPECIAL;
    r.max_tokens = max_tokens;
    r.sampling = &sp;
    r.reasoning_format = format;
    r.constraint_kind = constraint_kind;
    r.constraint = constraint;
    llm_request_id id = 0;
    Out out;
    EXPECT_EQ(llm_submit(ctx_, &r, &id), LLM_OK) << llm_last_error();
    if (id == 0) return out;
    for (int spins = 0; spins < 10000 && out.final_part < 0; ++spins) {
      llm_event ev[16];
      ev[0].struct_size = sizeof(llm_event);
      uint32_t n = 0;
      EXPECT_EQ(llm_poll(ctx_, ev, 16, &n, 100), LLM_OK);
      for (uint32_t i = 0; i < n; ++i) {
        EXPECT_NE(ev[i].reasoning_text, nullptr);
        out.content.append(ev[i].text, ev[i].text_len);
        out.reasoning.append(ev[i].reasoning_text, ev[i].reasoning_text_len);
        if (ev[i].type == LLM_EVENT_TOKEN) {
          out.parts.push_back(ev[i].part);
          out.tokens.push_back(ev[i].token);
        } else {
          out.final_part = ev[i].part;
          out.finish = ev[i].finish_reason;
        }
      }
    }
    return out;
  }

  static inline std::string path_;
  static inline llm_ctx* ctx_ = nullptr;
  static inline llm_token think_ = -1, close_ = -1;
};

const std::string kPrompt = "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n";

TEST_F(ReasoningApi, ThinkingOpenedByThePromptStaysReasoningToTheEnd) {
  // Qwen3-Thinking's and DeepSeek-R1's generation prompts end with "<think>\n".
  const Out whole = Run(kPrompt + "<think>\n", LLM_REASONING_NONE, 12);
  const Out split = Run(kPrompt + "<think>\n", LLM_REASONING_DEEPSEEK, 12);
  ASSERT_EQ(split.tokens, whole.tokens);  // the same generation, only split
  ASSERT_EQ(whole.tokens.size(), 12u);
  EXPECT_EQ(split.content, "");
  // The same text, less the blanks around the thinking (unless the random
  // model wrote a "</think>" itself, which these weights do not).
  ASSERT_EQ(whole.content.find("</think>"), std::string::npos);
  std::string trimmed = whole.content;
  trimmed.erase(0, trimmed.find_first_not_of(" \n\r\t"));
  trimmed.erase(trimmed.find_last_not_of(" \n\r\t") + 1);
  EXPECT_EQ(split.reasoning, trimmed);
  for (int32_t p : split.parts) EXPECT_EQ(p, LLM_PART_REASONING);
  EXPECT_EQ(split.final_part, LLM_PART_REASONING);
  EXPECT_EQ(split.finish, LLM_FINISH_LENGTH);
  for (int32_t p : whole.parts) EXPECT_EQ(p, LLM_PART_CONTENT);
}

TEST_F(ReasoningApi, ClosingTagStartsTheAnswer) {
  // "</think>" made certain: it closes the (empty) thinking at once; the
  // answer is everything after, "</think>" text included (a second one is
  // no tag: the thinking is over).
  const Out o = Run(kPrompt + "<think>\n", LLM_REASONING_DEEPSEEK, 4, 100.0f);
  ASSERT_EQ(o.tokens.size(), 4u);
  for (llm_token t : o.tokens) EXPECT_EQ(t, close_);
  EXPECT_EQ(o.reasoning, "");
  EXPECT_EQ(o.content, "</think></think></think>");
  EXPECT_EQ(o.parts, (std::vector<int32_t>{LLM_PART_REASONING, LLM_PART_CONTENT, LLM_PART_CONTENT, LLM_PART_CONTENT}));
  EXPECT_EQ(o.final_part, LLM_PART_CONTENT);
}

TEST_F(ReasoningApi, ConstraintStartsAfterTheThinking) {
  // Without the reasoning format the constraint masks the first token and
  // "</think>" cannot be written; with it, the thinking is free and the
  // answer alone matches the regex.
  const char* rx = "[a-z]{2,6}";
  const Out o = Run(kPrompt + "<think>\n", LLM_REASONING_DEEPSEEK, 16, 100.0f, LLM_CONSTRAINT_REGEX, rx);
  ASSERT_FALSE(o.tokens.empty());
  EXPECT_EQ(o.tokens[0], close_);
  EXPECT_EQ(o.reasoning, "");
  EXPECT_TRUE(std::regex_match(o.content, std::regex(rx))) << o.content;
  EXPECT_EQ(o.finish, LLM_FINISH_STOP);
  const Out plain = Run(kPrompt + "<think>\n", LLM_REASONING_NONE, 16, 100.0f, LLM_CONSTRAINT_REGEX, rx);
  ASSERT_FALSE(plain.tokens.empty());
  EXPECT_NE(plain.tokens[0], close_);
  EXPECT_TRUE(std::regex_match(plain.content, std::regex(rx))) << plain.content;
}

TEST_F(ReasoningApi, ThinkingClosedByThePromptIsAllAnswer) {
  // Qwen3 with enable_thinking false: the prompt holds the empty thinking,
  // so the constraint masks from the first token ("</think>", however
  // likely, is not written) and a "</think>" the model writes is answer.
  const std::string closed = kPrompt + "<think>\n\n</think>\n\n";
  const char* rx = "[a-z]{2,6}";
  const Out o = Run(closed, LLM_REASONING_DEEPSEEK, 16, 100.0f, LLM_CONSTRAINT_REGEX, rx);
  ASSERT_FALSE(o.tokens.empty());
  EXPECT_NE(o.tokens[0], close_);
  EXPECT_TRUE(std::regex_match(o.content, std::regex(rx))) << o.content;
  const Out free_ = Run(closed, LLM_REASONING_DEEPSEEK, 3, 100.0f);
  EXPECT_EQ(free_.content, "</think></think></think>");
  EXPECT_EQ(free_.reasoning, "");
}

TEST_F(ReasoningApi, ConstrainedOutputMayNotOpenItsOwnThinking) {
  // Qwen3's own template leaves the thinking to the model: under a
  // constraint the first token is masked as without a reasoning format, so
  // "<think>" (however likely) is not written and the answer matches.
  const char* rx = "[a-z]{2,6}";
  const Out o = Run(kPrompt, LLM_REASONING_DEEPSEEK, 16, 100.0f, LLM_CONSTRAINT_REGEX, rx, think_);
  ASSERT_FALSE(o.tokens.empty());
  EXPECT_NE(o.tokens[0], think_);
  EXPECT_TRUE(std::regex_match(o.content, std::regex(rx))) << o.content;
  EXPECT_EQ(o.finish, LLM_FINISH_STOP);
  // Unconstrained, it thinks.
  const Out t = Run(kPrompt, LLM_REASONING_DEEPSEEK, 3, 100.0f, LLM_CONSTRAINT_NONE, nullptr, think_);
  EXPECT_EQ(t.content, "");
  EXPECT_EQ(t.reasoning, "<think><think>");
}

TEST_F(ReasoningApi, AutoFollowsTheTemplate) {
  // The model's template is Qwen3's (it writes <think>): AUTO is DEEPSEEK.
  const Out a = Run(kPrompt + "<think>\n", LLM_REASONING_AUTO, 6);
  const Out d = Run(kPrompt + "<think>\n", LLM_REASONING_DEEPSEEK, 6);
  EXPECT_EQ(a.reasoning, d.reasoning);
  EXPECT_EQ(a.content, d.content);
  EXPECT_FALSE(a.reasoning.empty());
  // Without "<think>" in the prompt nor in the output: all answer.
  const Out c = Run(kPrompt, LLM_REASONING_AUTO, 6);
  const Out n = Run(kPrompt, LLM_REASONING_NONE, 6);
  EXPECT_EQ(c.reasoning, "");
  EXPECT_EQ(c.content, n.content);
}

TEST_F(ReasoningApi, BadValuesAreRefused) {
  llm_request r;
  llm_request_init(&r);
  r.prompt = "hi";
  llm_request_id id = 0;
  r.reasoning_format = 4;
  EXPECT_EQ(llm_submit(ctx_, &r, &id), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(llm_last_error()).find("reasoning_format"), std::string::npos);
  r.reasoning_format = -1;
  EXPECT_EQ(llm_submit(ctx_, &r, &id), LLM_ERR_INVALID_ARGUMENT);
  r.reasoning_format = LLM_REASONING_NONE;
  r.reserved5 = 1;
  EXPECT_EQ(llm_submit(ctx_, &r, &id), LLM_ERR_INVALID_ARGUMENT);
}

// Harmony (gpt-oss): the special tokens are rendered for the parser, the
// answer begins after the final message's header, and a constraint starts
// there (not at the header's tokens). The model's vocabulary has harmony's
// control tokens; the prompt ends inside the final header and a bias makes
// <|message|> certain, as the header's last token.
TEST(ReasoningApiHarmony, ConstraintStartsAfterTheFinalHeader) {
  const synth::SynthShape* shape = synth::FindSynthShape("tiny-qwen3");
  ASSERT_NE(shape, nullptr);
  synth::SynthOptions o;
  o.type = TensorType::F32;
  o.seed = 7;
  o.stddev = 0.25f;
  o.harmony_tokens = true;
  const std::string path = ::testing::TempDir() + "/llmrt_harmony_" + std::to_string(::getpid()) + ".gguf";
  Status st = synth::WriteSynthModel(*shape, o, path);
  ASSERT_TRUE(st.ok()) << st.message();
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  p.model_path = path.c_str();
  p.n_threads = 2;
  p.n_ctx = 256;
  llm_ctx* ctx = nullptr;
  ASSERT_EQ(llm_ctx_create(&p, &ctx), LLM_OK) << llm_last_error();
  llm_token message = -1;
  int32_t n = 0;
  ASSERT_EQ(llm_tokenize(ctx, "<|message|>", 11, LLM_TOKENIZE_PARSE_SPECIAL, &message, 1, &n), LLM_OK);
  ASSERT_EQ(n, 1);
  llm_sampling_params sp;
  llm_sampling_params_init(&sp);
  sp.temperature = 0.0f;
  llm_logit_bias bias{message, 100.0f};
  sp.logit_bias = &bias;
  sp.n_logit_bias = 1;
  const char* rx = "[a-z]{2,6}";
  for (int32_t format : {LLM_REASONING_HARMONY, LLM_REASONING_NONE}) {
    llm_request r;
    llm_request_init(&r);
    r.prompt = "<|start|>user<|message|>Hi<|end|><|start|>assistant<|channel|>final";
    r.tokenize_flags = LLM_TOKENIZE_PARSE_SPECIAL;
    r.max_tokens = 12;
    r.sampling = &sp;
    r.reasoning_format = format;
    r.constraint_kind = LLM_CONSTRAINT_REGEX;
    r.constraint = rx;
    llm_request_id id = 0;
    ASSERT_EQ(llm_submit(ctx, &r, &id), LLM_OK) << llm_last_error();
    std::string content, reasoning;
    std::vector<llm_token> tokens;
    int32_t finish = LLM_FINISH_NONE;
    for (int spins = 0; spins < 10000 && finish == LLM_FINISH_NONE; ++spins) {
      llm_event ev[16];
      ev[0].struct_size = sizeof(llm_event);
      uint32_t got = 0;
      ASSERT_EQ(llm_poll(ctx, ev, 16, &got, 100), LLM_OK);
      for (uint32_t i = 0; i < got; ++i) {
        content.append(ev[i].text, ev[i].text_len);
        reasoning.append(ev[i].reasoning_text, ev[i].reasoning_text_len);
        if (ev[i].type == LLM_EVENT_TOKEN) tokens.push_back(ev[i].token);
        else finish = ev[i].finish_reason;
      }
    }
    ASSERT_FALSE(tokens.empty());
    EXPECT_TRUE(std::regex_match(content, std::regex(rx))) << format << ": " << content;
    EXPECT_EQ(reasoning, "");
    EXPECT_EQ(finish, LLM_FINISH_STOP);
    if (format == LLM_REASONING_HARMONY)
      EXPECT_EQ(tokens[0], message);  // the header's end, free; the answer after it constrained
    else
      EXPECT_NE(tokens[0], message);  // the whole output constrained
  }
  llm_ctx_destroy(ctx);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace llm::test
