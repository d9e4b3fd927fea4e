#include "tokenizer/vocab_rules.h"

namespace llm {

bool IsLlama3Pre(std::string_view pre) {
  return pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3" || pre == "dbrx" ||
         pre == "smaug-bpe";
}

int32_t FindToken(const TokenizerData& d, std::string_view text) {
  for (size_t i = d.tokens.size(); i-- > 0;) {
    if (d.tokens[i] == text) return static_cast<int32_t>(i);
  }
  return -1;
}

// End-of-generation tokens the vocabulary spells out (chat turn ends).
void CollectEog(TokenizerData* d) {
  auto add = [&](int32_t id) {
    if (id < 0) return;
    for (int32_t e : d->eog) {
      if (e == id) return;
    }
    d->eog.push_back(id);
  };
  add(d->eos);
  add(d->eot);
  static const char* kTexts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
                                 "<|endoftext|>", "<|eom_id|>", "<EOT>"};
  for (const char* t : kTexts) {
    const int32_t id = FindToken(*d, t);
    if (id >= 0 && d->token_types[id] == kTokenControl) add(id);
  }
  if (d->eot < 0) {
    for (const char* t : {"<|eot_id|>", "<|im_end|>", "<end_of_turn>", "<|end|>"}) {
      const int32_t id = FindToken(*d, t);
      if (id >= 0) {
        d->eot = id;
        break;
      }
    }
  }
}

}  // namespace llm
