// ReasoningParser tests (issue 32): model outputs in the DeepSeek/Qwen3 and
// harmony (gpt-oss) shapes split into thinking and answer, fed whole, one
// byte at a time and cut at every point (a tag split across tokens must come
// out the same), with unterminated thinking, thinking opened by the prompt,
// and text that is not in the format.
//
// The outputs are written in the shapes the models produce: Qwen3's
// "<think>\n...\n</think>\n\n" (its chat template writes past turns the same
// way: tests/data/chat/qwen3.json, case "thinking"), and gpt-oss's harmony
// messages as OpenAI's harmony format defines them (analysis, final,
// commentary to=functions.NAME with <|constrain|>json, <|call|>; a real
// gpt-oss run writes the next message's <|channel|> straight after <|call|>,
// without <|start|>, which one case pins).
#include "engine/reasoning_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "chat/tool_calls.h"
#include "util/utf8.h"

namespace llm {
namespace {

struct Split {
  std::string reasoning, content;
};

Split Run(ReasoningFormat f, bool start_in_reasoning, const std::vector<std::string>& pieces) {
  ReasoningParser p(f, start_in_reasoning);
  ReasoningOut out;
  for (const std::string& s : pieces) p.Push(s, &out);
  p.Finish(&out);
  return {out.reasoning, out.content};
}

Split Whole(ReasoningFormat f, bool open, const std::string& text) { return Run(f, open, {text}); }

// Every way of cutting `text` in two, and byte by byte: the same split.
void ExpectSplitSafe(ReasoningFormat f, bool open, const std::string& text, const Split& want) {
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    const Split s = Run(f, open, {text.substr(0, cut), text.substr(cut)});
    EXPECT_EQ(s.reasoning, want.reasoning) << "cut at " << cut;
    EXPECT_EQ(s.content, want.content) << "cut at " << cut;
  }
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  const Split s = Run(f, open, bytes);
  EXPECT_EQ(s.reasoning, want.reasoning) << "byte by byte";
  EXPECT_EQ(s.content, want.content) << "byte by byte";
}

TEST(ReasoningParser, Qwen3Shape) {
  const std::string out = "<think>\nThe user asks 2+2. That is 4.\n</think>\n\nThe answer is **4**.";
  const Split want{"The user asks 2+2. That is 4.", "The answer is **4**."};
  EXPECT_EQ(Whole(ReasoningFormat::kDeepSeek, false, out).reasoning, want.reasoning);
  EXPECT_EQ(Whole(ReasoningFormat::kDeepSeek, false, out).content, want.content);
  ExpectSplitSafe(ReasoningFormat::kDeepSeek, false, out, want);
}

TEST(ReasoningParser, ThinkingOpenedByThePrompt) {
  // DeepSeek-R1's template (and Qwen3's with a forced think) ends the
  // generation prompt with "<think>\n": the output starts inside it.
  EXPECT_TRUE(PromptOpensThinking("<|im_start|>assistant\n<think>\n"));
  EXPECT_TRUE(PromptOpensThinking("<｜Assistant｜><think>"));
  EXPECT_FALSE(PromptOpensThinking("<|im_start|>assistant\n"));
  EXPECT_FALSE(PromptOpensThinking("<think>\n\n</think>\n\n"));  // enable_thinking false
  EXPECT_TRUE(PromptClosesThinking("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(PromptClosesThinking("<|im_start|>assistant\n<think>\n"));
  const std::string out = "Okay, 3 * 5 = 15.\n</think>\n\n15";
  ExpectSplitSafe(ReasoningFormat::kDeepSeek, true, out, {"Okay, 3 * 5 = 15.", "15"});
}

TEST(ReasoningParser, UnterminatedThinkingStaysReasoning) {
  // max_tokens ran out inside the thinking: nothing of it is the answer, and
  // a half-written "</thi" is the text it is.
  ExpectSplitSafe(ReasoningFormat::kDeepSeek, false, "<think>\nStill working on it", {"Still working on it", ""});
  ExpectSplitSafe(ReasoningFormat::kDeepSeek, false, "<think>\nHmm </thi", {"Hmm </thi", ""});
  ExpectSplitSafe(ReasoningFormat::kDeepSeek, true, "", {"", ""});
}

TEST(ReasoningParser, NoThinkingIsAllContent) {
  // A model that does not think, or enable_thinking: false (the empty block
  // is in the prompt, not the output).
  ExpectSplitSafe(ReasoningFormat::kDeepSeek, false, "Paris is the capital.", {"", "Paris is the capital."});
  ExpectSplitSafe(ReasoningFormat::kDeepSeek, false, "<b>bold</b> <thinking>", {"", "<b>bold</b> <thinking>"});
  ExpectSplitSafe(ReasoningFormat::kDeepSeek, false, "<thi", {"", "<thi"});
  // A "<think>" later in the answer is the answer's text.
  ExpectSplitSafe(ReasoningFormat::kDeepSeek, false, "Use <think> tags.", {"", "Use <think> tags."});
  // The empty block Qwen3 writes when told not to think in the prompt.
  ExpectSplitSafe(ReasoningFormat::kDeepSeek, false, "<think>\n\n</think>\n\nHi!", {"", "Hi!"});
  ExpectSplitSafe(ReasoningFormat::kNone, false, "<think>a</think>b", {"", "<think>a</think>b"});
}

TEST(ReasoningParser, WhitespaceInsideThinkingIsKept) {
  ExpectSplitSafe(ReasoningFormat::kDeepSeek, false, "<think>a\n\n b  \n</think>  c \n d",
                  {"a\n\n b", "c \n d"});
}

TEST(ReasoningParser, AnswerStartsAfterTheClosingTag) {
  ReasoningParser p(ReasoningFormat::kDeepSeek, false);
  ReasoningOut out;
  p.Push("<think>", &out);
  EXPECT_TRUE(p.in_reasoning());
  EXPECT_FALSE(p.answer_started());
  p.Push("x</think", &out);
  EXPECT_FALSE(p.answer_started());
  p.Push(">", &out);
  EXPECT_TRUE(p.answer_started());
  EXPECT_TRUE(p.thought());
  ReasoningParser q(ReasoningFormat::kDeepSeek, false);
  q.Push("{", &out);
  EXPECT_TRUE(q.answer_started());
  EXPECT_FALSE(q.thought());
}

TEST(ReasoningParser, HarmonyAnalysisAndFinal) {
  const std::string out =
      "<|channel|>analysis<|message|>User asks: \"What is 2 + 2?\" Simple arithmetic. Provide answer.<|end|>"
      "<|start|>assistant<|channel|>final<|message|>2 + 2 = 4.";
  ExpectSplitSafe(ReasoningFormat::kHarmony, false, out,
                  {"User asks: \"What is 2 + 2?\" Simple arithmetic. Provide answer.", "2 + 2 = 4."});
  // <|return|> rendered (as when it is not an end token) ends the message.
  ExpectSplitSafe(ReasoningFormat::kHarmony, false, out + "<|return|>",
                  {"User asks: \"What is 2 + 2?\" Simple arithmetic. Provide answer.", "2 + 2 = 4."});
}

TEST(ReasoningParser, HarmonyToolCallIsParsedAsACall) {
  const std::string out =
      "<|channel|>analysis<|message|>Need to use function get_weather.<|end|>"
      "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
      "{\"location\":\"San Francisco\"}<|call|>";
  const Split want{"Need to use function get_weather.",
                   "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"location\":\"San Francisco\"}}</tool_call>"};
  ExpectSplitSafe(ReasoningFormat::kHarmony, false, out, want);
  // <|call|> is an end token (not rendered): Finish closes the call.
  ExpectSplitSafe(ReasoningFormat::kHarmony, false, out.substr(0, out.size() - 8), want);
  // The recipient in the role part of the header, as the format allows.
  ExpectSplitSafe(ReasoningFormat::kHarmony, false,
                  "<|channel|>analysis<|message|>x<|end|><|start|>assistant to=functions.get_weather"
                  "<|channel|>commentary json<|message|>{\"location\":\"Tokyo\"}",
                  {"x", "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"location\":\"Tokyo\"}}</tool_call>"});
  // What the tool-call parser makes of it.
  auto parsed = ParseToolCalls(ToolFormat::kAuto, want.content);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  ASSERT_EQ(parsed->calls.size(), 1u);
  EXPECT_EQ(parsed->calls[0].name, "get_weather");
  EXPECT_EQ(JsonToText(parsed->calls[0].arguments), "{\"location\":\"San Francisco\"}");
}

TEST(ReasoningParser, HarmonyMessagesAfterACallWithoutStart) {
  // gpt-oss continuing after a tool result within one output: the next
  // header follows <|call|> directly.
  const std::string out =
      "<|channel|>analysis<|message|>Look it up.<|end|><|start|>assistant<|channel|>commentary "
      "to=functions.memory.read <|constrain|>json<|message|>{\"namespace\":\"a\"}<|call|>"
      "<|channel|>analysis<|message|>Got it.<|end|><|start|>assistant<|channel|>final<|message|>Done.";
  ExpectSplitSafe(ReasoningFormat::kHarmony, false, out,
                  {"Look it up.\n\nGot it.",
                   "<tool_call>{\"name\": \"memory.read\", \"arguments\": {\"namespace\":\"a\"}}</tool_call>Done."});
}

TEST(ReasoningParser, HarmonyEdges) {
  // A preamble on the commentary channel (no recipient) is answer text.
  ExpectSplitSafe(ReasoningFormat::kHarmony, false,
                  "<|channel|>commentary<|message|>Checking now.<|end|>", {"", "Checking now."});
  // Unterminated analysis (length): reasoning only.
  ExpectSplitSafe(ReasoningFormat::kHarmony, false, "<|channel|>analysis<|message|>We need to th",
                  {"We need to th", ""});
  // A model that writes no harmony markup: all content.
  ExpectSplitSafe(ReasoningFormat::kHarmony, false, "Hello there <|end|>", {"", "Hello there <|end|>"});
  // An unfinished header: markup, nothing to show.
  ExpectSplitSafe(ReasoningFormat::kHarmony, false, "<|channel|>analy", {"", ""});
  // Other <|...|> text in a body is the body's.
  ExpectSplitSafe(ReasoningFormat::kHarmony, false, "<|channel|>final<|message|>a <|x|> b<| c",
                  {"", "a <|x|> b<| c"});
  // A hostile recipient name is quoted as JSON.
  const Split s = Whole(ReasoningFormat::kHarmony, false,
                        "<|channel|>commentary to=functions.a\"\\\x01 json<|message|>{}<|call|>");
  EXPECT_EQ(s.content, "<tool_call>{\"name\": \"a\\\"\\\\\\u0001\", \"arguments\": {}}</tool_call>");
}

TEST(ReasoningParser, ResolveAuto) {
  EXPECT_EQ(ResolveReasoningFormat(ReasoningFormat::kAuto, "{{ '<|start|>assistant<|channel|>final' }}"),
            ReasoningFormat::kHarmony);
  EXPECT_EQ(ResolveReasoningFormat(ReasoningFormat::kAuto, "{{ '<think>' }}"), ReasoningFormat::kDeepSeek);
  EXPECT_EQ(ResolveReasoningFormat(ReasoningFormat::kAuto, ""), ReasoningFormat::kNone);
  EXPECT_EQ(ResolveReasoningFormat(ReasoningFormat::kAuto, "{{ '<|im_start|>assistant' }}"), ReasoningFormat::kNone);
  EXPECT_EQ(ResolveReasoningFormat(ReasoningFormat::kNone, "<|channel|>"), ReasoningFormat::kNone);
}

TEST(ReasoningParser, OutputStaysValidUtf8) {
  // Multi-byte characters around the tags, pieces cut only at characters
  // (as TextStream hands them out).
  const std::string out = "<think>é思考🙂</think>答え🙂";
  ReasoningParser p(ReasoningFormat::kDeepSeek, false);
  ReasoningOut acc;
  for (size_t i = 0; i < out.size();) {
    size_t n = 1;
    while (i + n < out.size() && (static_cast<unsigned char>(out[i + n]) & 0xC0) == 0x80) ++n;
    ReasoningOut step;
    p.Push(out.substr(i, n), &step);
    EXPECT_TRUE(IsValidUtf8(step.reasoning));
    EXPECT_TRUE(IsValidUtf8(step.content));
    acc.reasoning += step.reasoning;
    acc.content += step.content;
    i += n;
  }
  p.Finish(&acc);
  EXPECT_EQ(acc.reasoning, "é思考🙂");
  EXPECT_EQ(acc.content, "答え🙂");
}

}  // namespace
}  // namespace llm
