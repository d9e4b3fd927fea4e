// Vocabulary conventions shared by the loaders that build TokenizerData
// (model/vocab_gguf.cpp from GGUF metadata, tokenizer/vocab_hf.cpp from a
// Hugging Face tokenizer.json), so both read a vocabulary the same way.
#pragma once

#include <cstdint>
#include <string_view>

#include "tokenizer/tokenizer.h"

namespace llm {

// Pre-tokenizer names llama.cpp treats as Llama 3's (ignore_merges, BOS added).
bool IsLlama3Pre(std::string_view pre);
// Id of the last token whose text is exactly `text`, or -1.
int32_t FindToken(const TokenizerData& d, std::string_view text);
// Fills d->eog with the end-of-generation tokens the vocabulary spells out
// (eos, eot, chat turn ends) and d->eot when the metadata named none.
void CollectEog(TokenizerData* d);

}  // namespace llm
