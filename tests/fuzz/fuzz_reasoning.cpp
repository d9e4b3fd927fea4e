// Fuzzes the reasoning parser (engine/reasoning_parser.h): the first byte
// picks the format (DeepSeek or harmony) and whether the prompt opened the
// thinking, the second how the rest is cut into pieces. The split must not
// depend on where the pieces are cut (the text fed whole gives the same
// reasoning and content), and valid UTF-8 in gives valid UTF-8 out.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/reasoning_parser.h"
#include "fuzz/common.h"
#include "util/utf8.h"

using namespace llm;  // NOLINT

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const auto format = (data[0] & 1) ? ReasoningFormat::kHarmony : ReasoningFormat::kDeepSeek;
  const bool open = (data[0] & 2) != 0;
  const size_t step = 1 + data[1] % 16;
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);

  ReasoningParser whole(format, open);
  ReasoningOut a;
  whole.Push(text, &a);
  whole.Finish(&a);

  ReasoningParser pieces(format, open);
  ReasoningOut b;
  for (size_t at = 0; at < text.size(); at += step) pieces.Push(text.substr(at, step), &b);
  pieces.Finish(&b);
  LLM_FUZZ_CHECK(a.content == b.content, "content depends on where the text is cut");
  LLM_FUZZ_CHECK(a.reasoning == b.reasoning, "reasoning depends on where the text is cut");
  if (IsValidUtf8(text)) {
    LLM_FUZZ_CHECK(IsValidUtf8(a.content), "invalid UTF-8 content from valid text");
    LLM_FUZZ_CHECK(IsValidUtf8(a.reasoning), "invalid UTF-8 reasoning from valid text");
  }
  return 0;
}
