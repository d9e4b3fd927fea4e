// Chat templates built into the library for model formats whose GGUF files
// often come without tokenizer.chat_template.
//
// Why: the Gemma 3 GGUFs converted from the pretrained (non -it) checkpoints,
// like the 270M one scripts/fetch-models.sh fetches, carry no template, yet
// the model family has one fixed turn format. llama.cpp guesses ChatML for a
// model without a template, which is wrong for Gemma; keying the fallback on
// general.architecture gives the model its own format.
#pragma once

#include <optional>
#include <string_view>

namespace llm {

// The Jinja chat template for models of general.architecture `arch` that
// have none of their own; nullopt for architectures without a known format.
// "gemma3": Gemma 3's instruct template, as published in the chat_template of
// google/gemma-3-*-it tokenizer_config.json (the same text as
// tests/data/chat/templates/gemma3.jinja, which a test checks).
std::optional<std::string_view> BuiltinChatTemplate(std::string_view arch);

}  // namespace llm
