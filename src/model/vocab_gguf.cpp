#include "model/vocab_gguf.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "tokenizer/vocab_rules.h"

namespace llm {
namespace {

// Memory a tokenizer costs beyond its text, per vocabulary entry (the token
// string, its score and type, the text -> id index, the decoded piece, the
// transient views) and per BPE merge (the string and the pair index). Used to
// refuse vocabularies a file is far too small to justify: loading may use at
// most about 2 x the file size + 64 MiB in all.
constexpr uint64_t kBytesPerToken = 160;
constexpr uint64_t kBytesPerMerge = 96;
constexpr uint64_t kTokenizerSlack = uint64_t{56} << 20;

Status CheckArrayLength(const GgufFile& f, std::string_view key, uint64_t n) {
  if (!f.Has(key)) return Status::Ok();
  const auto len = f.ArrayLength(key);
  if (!len) return ModelFormatError("tokenizer: " + std::string(key) + " is not an array");
  if (*len != n) {
    return ModelFormatError("tokenizer: " + std::string(key) + " has " + std::to_string(*len) +
                            " entries but there are " + std::to_string(n) + " tokens");
  }
  return Status::Ok();
}

// Optional integer key: keeps *out when the key is absent.
Status OptInt(const GgufFile& f, std::string_view key, int32_t* out) {
  if (!f.Has(key)) return Status::Ok();
  LLM_ASSIGN_OR_RETURN(int64_t v, f.GetInt(key));
  if (v < -1 || v > INT32_MAX) return ModelFormatError("tokenizer: " + std::string(key) + " out of range");
  *out = static_cast<int32_t>(v);
  return Status::Ok();
}
Status OptBool(const GgufFile& f, std::string_view key, bool* out) {
  if (!f.Has(key)) return Status::Ok();
  LLM_ASSIGN_OR_RETURN(bool v, f.GetBool(key));
  *out = v;
  return Status::Ok();
}

}  // namespace

StatusOr<TokenizerData> TokenizerDataFromGguf(const GgufFile& f) {
  TokenizerData d;
  LLM_ASSIGN_OR_RETURN(std::string_view model, f.GetString("tokenizer.ggml.model"));
  if (model == "llama") {
    d.kind = TokenizerData::Kind::kSpm;
    // llama.cpp's defaults for SentencePiece vocabularies.
    d.bos = 1;
    d.eos = 2;
    d.unk = 0;
    d.add_bos = true;
    d.add_space_prefix = true;
  } else if (model == "gpt2") {
    d.kind = TokenizerData::Kind::kBpe;
    d.add_space_prefix = false;
  } else if (model == "bert") {
    // llama.cpp's defaults: [CLS] text [SEP], BERT-base-uncased's ids. Its
    // GGUFs keep no normalizer flags; llama.cpp always lower-cases and
    // strips accents.
    d.kind = TokenizerData::Kind::kWordPiece;
    d.bos = 101;
    d.eos = 102;
    d.sep = 102;
    d.unk = 100;
    d.pad = 0;
    d.add_bos = true;
    d.add_eos = true;
    d.add_space_prefix = false;
  } else if (model == "t5") {
    // SentencePiece Unigram (T5, XLM-RoBERTa): llama.cpp's T5 defaults; an
    // XLM-RoBERTa file states its own bos/add_bos below.
    d.kind = TokenizerData::Kind::kUnigram;
    d.eos = 1;
    d.unk = 2;
    d.pad = 0;
    d.add_eos = true;
    d.add_space_prefix = true;
  } else {
    return Unsupported("tokenizer: model type '" + std::string(model) + "' is not supported");
  }

  // Sizes first, before anything is materialised.
  const auto n_tokens = f.ArrayLength("tokenizer.ggml.tokens");
  if (!n_tokens || f.ArrayElemType("tokenizer.ggml.tokens") != GgufType::kString) {
    return ModelFormatError("tokenizer: tokenizer.ggml.tokens is missing or not an array of strings");
  }
  LLM_RETURN_IF_ERROR(CheckArrayLength(f, "tokenizer.ggml.scores", *n_tokens));
  LLM_RETURN_IF_ERROR(CheckArrayLength(f, "tokenizer.ggml.token_type", *n_tokens));
  const uint64_t n_merges =
      d.kind == TokenizerData::Kind::kBpe ? f.ArrayLength("tokenizer.ggml.merges").value_or(0) : 0;
  const uint64_t need = *n_tokens * kBytesPerToken + n_merges * kBytesPerMerge;
  if (need > 2 * uint64_t{f.size()} + kTokenizerSlack) {
    return ModelFormatError("tokenizer: " + std::to_string(*n_tokens) + " tokens and " +
                            std::to_string(n_merges) + " merges would need about " +
                            std::to_string(need >> 20) + " MiB, far more than a " +
                            std::to_string(f.size() >> 20) + " MiB file justifies");
  }

  LLM_ASSIGN_OR_RETURN(auto tokens, f.GetStringArray("tokenizer.ggml.tokens"));
  d.tokens.assign(tokens.begin(), tokens.end());
  tokens = {};
  const size_t n = d.tokens.size();
  if (f.Has("tokenizer.ggml.scores")) {
    LLM_ASSIGN_OR_RETURN(d.scores, f.GetFloatArray("tokenizer.ggml.scores"));
    if (d.scores.size() != n) return ModelFormatError("tokenizer: scores length differs from tokens");
  }
  if (f.Has("tokenizer.ggml.token_type")) {
    LLM_ASSIGN_OR_RETURN(auto types, f.GetIntArray("tokenizer.ggml.token_type"));
    if (types.size() != n) return ModelFormatError("tokenizer: token_type length differs from tokens");
    d.token_types.reserve(n);
    for (int64_t t : types) {
      // Unknown type values are treated as normal tokens rather than rejected.
      d.token_types.push_back((t >= 1 && t <= 6) ? static_cast<int32_t>(t) : kTokenNormal);
    }
  }
  if (d.kind == TokenizerData::Kind::kBpe) {
    LLM_ASSIGN_OR_RETURN(auto merges, f.GetStringArray("tokenizer.ggml.merges"));
    d.merges.assign(merges.begin(), merges.end());
    if (f.Has("tokenizer.ggml.pre")) {
      LLM_ASSIGN_OR_RETURN(std::string_view pre, f.GetString("tokenizer.ggml.pre"));
      d.pre = std::string(pre);
    }
    if (IsLlama3Pre(d.pre)) {
      d.ignore_merges = true;
      d.add_bos = true;  // llama.cpp's default for Llama 3; the key below may override
    }
  } else {
    d.pre = "default";
  }

  if (d.kind == TokenizerData::Kind::kWordPiece) {
    // BERT's [CLS] and [SEP] are written under their own names.
    LLM_RETURN_IF_ERROR(OptInt(f, "tokenizer.ggml.cls_token_id", &d.bos));
    LLM_RETURN_IF_ERROR(OptInt(f, "tokenizer.ggml.seperator_token_id", &d.eos));
    LLM_RETURN_IF_ERROR(OptBool(f, "tokenizer.ggml.add_sep_token", &d.add_eos));
  }
  if (d.kind == TokenizerData::Kind::kUnigram) {
    if (f.Has("tokenizer.ggml.precompiled_charsmap")) {
      // An array of bytes (gguf-py writes uint8; int8 is accepted too).
      LLM_ASSIGN_OR_RETURN(auto bytes, f.GetIntArray("tokenizer.ggml.precompiled_charsmap"));
      d.precompiled_charsmap.reserve(bytes.size());
      for (int64_t b : bytes) {
        if (b < -128 || b > 255) return ModelFormatError("tokenizer: precompiled_charsmap is not bytes");
        d.precompiled_charsmap.push_back(static_cast<char>(static_cast<uint8_t>(b)));
      }
    }
    bool remove_extra = false;  // llama.cpp's default; converters write the model's own value
    LLM_RETURN_IF_ERROR(OptBool(f, "tokenizer.ggml.remove_extra_whitespaces", &remove_extra));
    d.spaces = remove_extra ? TokenizerData::Spaces::kStripCollapse : TokenizerData::Spaces::kKeep;
  }
  LLM_RETURN_IF_ERROR(OptInt(f, "tokenizer.ggml.bos_token_id", &d.bos));
  LLM_RETURN_IF_ERROR(OptInt(f, "tokenizer.ggml.eos_token_id", &d.eos));
  LLM_RETURN_IF_ERROR(OptInt(f, "tokenizer.ggml.unknown_token_id", &d.unk));
  LLM_RETURN_IF_ERROR(OptInt(f, "tokenizer.ggml.padding_token_id", &d.pad));
  LLM_RETURN_IF_ERROR(OptInt(f, "tokenizer.ggml.eot_token_id", &d.eot));
  LLM_RETURN_IF_ERROR(OptBool(f, "tokenizer.ggml.add_bos_token", &d.add_bos));
  LLM_RETURN_IF_ERROR(OptBool(f, "tokenizer.ggml.add_eos_token", &d.add_eos));
  LLM_RETURN_IF_ERROR(OptBool(f, "tokenizer.ggml.add_space_prefix", &d.add_space_prefix));
  // The pair separator, with llama.cpp's default: added for WordPiece.
  d.add_sep = d.kind == TokenizerData::Kind::kWordPiece;
  LLM_RETURN_IF_ERROR(OptInt(f, "tokenizer.ggml.seperator_token_id", &d.sep));
  LLM_RETURN_IF_ERROR(OptBool(f, "tokenizer.ggml.add_sep_token", &d.add_sep));
  // Ids beyond the vocabulary (seen in some conversions) mean "none".
  for (int32_t* id : {&d.bos, &d.eos, &d.unk, &d.pad, &d.eot, &d.sep}) {
    if (*id >= static_cast<int64_t>(n)) *id = -1;
  }
  if (d.kind == TokenizerData::Kind::kUnigram) {
    // SentencePiece falls back to bytes when the model has byte pieces.
    d.byte_fallback = std::find(d.token_types.begin(), d.token_types.end(), kTokenByte) != d.token_types.end();
  }
  if (d.bos < 0) d.add_bos = false;
  if (d.eos < 0) d.add_eos = false;
  if (d.sep < 0) d.add_sep = false;
  if (d.token_types.empty()) d.token_types.assign(n, kTokenNormal);
  CollectEog(&d);
  if (f.Has("tokenizer.ggml.eom_token_id")) {
    int32_t eom = -1;
    LLM_RETURN_IF_ERROR(OptInt(f, "tokenizer.ggml.eom_token_id", &eom));
    if (eom >= 0 && eom < static_cast<int64_t>(n)) d.eog.push_back(eom);
  }
  return d;
}

}  // namespace llm
