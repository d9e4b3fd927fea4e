#pragma once
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace llm {
class Unigram {
 public:
  static StatusOr<std::unique_ptr<Unigram>> Create(const TokenizerData& d, const int32_t* byte_ids);
  void Encode(std::string_view text, std::vector<int32_t>* out) const;
};
}  // namespace llm
