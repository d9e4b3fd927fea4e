#include "constrain/choice.h"

#include "util/utf8.h"

namespace llm::constrain {

StatusOr<Grammar> CompileChoices(std::span<const std::string> choices) {
  if (choices.empty()) return InvalidArgument("a CHOICE constraint needs at least one choice");
  if (choices.size() > kMaxChoices)
    return InvalidArgument("at most " + std::to_string(kMaxChoices) + " choices (got " +
                           std::to_string(choices.size()) + ")");
  GrammarBuilder b;
  LLM_ASSIGN_OR_RETURN(int32_t root, b.RuleId("root"));
  b.MarkDefined(root);
  for (size_t i = 0; i < choices.size(); ++i) {
    const std::string& c = choices[i];
    if (!IsValidUtf8(c)) return InvalidArgument("choices[" + std::to_string(i) + "] is not valid UTF-8");
    Alternative alt;
    for (size_t k = 0; k < c.size();) {
      uint32_t cp;
      size_t len;
      DecodeUtf8(c, k, &cp, &len);
      alt.push_back(Element::Char(cp));
      k += len;
    }
    auto s = b.AddAlt(root, std::move(alt));
    if (!s.ok()) return InvalidArgument("choices: " + s.message());
  }
  return b.Finish("root");
}

}  // namespace llm::constrain
