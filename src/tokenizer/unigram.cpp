#include "tokenizer/unigram.h"
namespace llm {
StatusOr<std::unique_ptr<Unigram>> Unigram::Create(const TokenizerData&, const int32_t*) {
  return Unsupported("tokenizer: Unigram is not supported yet");
}
void Unigram::Encode(std::string_view, std::vector<int32_t>*) const {}
}  // namespace llm
