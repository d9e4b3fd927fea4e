// ReasoningParser: splits a sequence's streamed text into the model's
// thinking and its answer (issue 32), one piece at a time, as TextStream
// hands it out (after stop strings).
//
//   DeepSeek style (Qwen3, DeepSeek-R1 and their distills, QwQ):
//     "<think>\nLet me add.\n</think>\n\n4"      reasoning "Let me add."  content "4"
//     The thinking may be opened by the prompt itself (the template's
//     generation prompt ends with "<think>\n"): start_in_reasoning.
//   Harmony (gpt-oss), the special tokens rendered:
//     "<|channel|>analysis<|message|>Add.<|end|><|start|>assistant<|channel|>final<|message|>4"
//     analysis -> reasoning, final -> content, commentary to a recipient
//     "functions.NAME" (a tool call) -> content as <tool_call>{"name": "NAME",
//     "arguments": ARGS}</tool_call>, so the tool-call parsers read it;
//     commentary without a recipient (a preamble) -> content.
//
// A tag split across pieces is held back until the next piece decides it
// (only the longest suffix that could begin a tag). Thinking that never ends
// stays reasoning at Finish; a held partial tag is then emitted as the text it
// is. The whitespace around the thinking (after "<think>", before and after
// "</think>") is dropped. Text that does not start as the format says (no
// "<think>", no harmony header) is all content. Not thread-safe; one per
// sequence.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace llm {

// The values of llm.h's LLM_REASONING_* (AUTO is resolved before a parser
// is made: ResolveReasoningFormat).
enum class ReasoningFormat : int32_t { kNone = 0, kDeepSeek = 1, kHarmony = 2, kAuto = 3 };
inline constexpr int32_t kReasoningFormatCount = 4;

// What one Push or Finish decided, appended.
struct ReasoningOut {
  std::string content;
  std::string reasoning;
  void clear() {
    content.clear();
    reasoning.clear();
  }
};

// AUTO for a model with this chat template: HARMONY when the template writes
// harmony's channels, DEEPSEEK when it writes "<think>", else NONE (a model
// whose template knows no thinking keeps its output whole). Other values are
// returned as they are.
ReasoningFormat ResolveReasoningFormat(ReasoningFormat requested, std::string_view chat_template);

// True when the rendered prompt ends with "<think>" and optional whitespace:
// the template opened the thinking and the output starts inside it.
bool PromptOpensThinking(std::string_view prompt_tail);
// True when it ends with "</think>" and optional whitespace: the template
// wrote the (empty) thinking itself (Qwen3 with enable_thinking false), so
// the whole output is the answer.
bool PromptClosesThinking(std::string_view prompt_tail);

class ReasoningParser {
 public:
  ReasoningParser() = default;  // kNone: everything is content
  ReasoningParser(ReasoningFormat format, bool start_in_reasoning);

  // Appends to *out what `text` (and any held tail before it) decides.
  void Push(std::string_view text, ReasoningOut* out);
  // End of the output: emits what is held (an open tool call is closed).
  void Finish(ReasoningOut* out);

  // The part the text is in now: thinking (true) or the answer.
  bool in_reasoning() const;
  // The answer has begun: a "</think>" was seen, the output did not start
  // with thinking, or a harmony final/tool-call message began.
  bool answer_started() const { return answer_started_; }
  // The output began with thinking (the answer then starts after it).
  bool thought() const { return thought_; }
  ReasoningFormat format() const { return format_; }

 private:
  void PushDeepSeek(ReasoningOut* out);
  // final_piece: the thinking ends after `text` (its trailing blanks go).
  void EmitReasoning(std::string_view text, bool final_piece, ReasoningOut* out);
  void EmitContent(std::string_view text, ReasoningOut* out);
  void PushHarmony(ReasoningOut* out);
  void EmitHarmonyBody(std::string_view text, bool final_piece, ReasoningOut* out);
  void BeginHarmonyMessage(std::string_view header, ReasoningOut* out);
  void EndHarmonyMessage(ReasoningOut* out);

  enum class State : uint8_t {
    kStart,      // DeepSeek: before any output (a "<think>" may open)
    kReasoning,  // DeepSeek: inside the thinking
    kContent,    // the answer (DeepSeek), or plain text (harmony without markup)
    kHeader,     // harmony: a message header, up to <|message|>
    kBody,       // harmony: a message's body, up to <|end|> and the like
  };
  enum class Channel : uint8_t { kAnalysis, kFinal, kToolCall, kOther };

  ReasoningFormat format_ = ReasoningFormat::kNone;
  State state_ = State::kContent;
  Channel channel_ = Channel::kFinal;
  bool answer_started_ = true;
  bool strip_leading_ = false;  // drop whitespace before the next text of this part
  bool seen_markup_ = false;    // harmony: a header was parsed
  bool thought_ = false;
  bool reasoning_emitted_ = false;   // harmony: an analysis message had text
  bool separate_reasoning_ = false;  // harmony: the next analysis text follows another message's
  std::string held_;            // undecided tail
  std::string header_;          // harmony: the header so far
  std::string pending_ws_;      // reasoning: trailing whitespace, emitted if more text follows
};

}  // namespace llm
