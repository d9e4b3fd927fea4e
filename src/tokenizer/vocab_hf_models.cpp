#include "tokenizer/vocab_hf_models.h"

#include <cmath>
#include <string_view>
#include <vector>

#include "tokenizer/vocab_rules.h"

namespace llm {
namespace {

constexpr int64_t kMaxVocab = 1 << 24;
constexpr std::string_view kWordStart = "\xE2\x96\x81";  // "▁"

std::string Str(const Json* j) { return j && j->is_string() ? j->as_string() : std::string(); }
const char* TypeOf(const Json* j) {
  const Json* t = j && j->is_object() ? j->Find("type") : nullptr;
  return t && t->is_string() ? t->as_string().c_str() : "";
}

// A Sequence's members, or the one step itself; nothing for null.
std::vector<const Json*> Steps(const Json* j, const char* list_key) {
  std::vector<const Json*> out;
  if (!j || j->is_null()) return out;
  if (std::string_view(TypeOf(j)) == "Sequence") {
    if (const Json* l = j->Find(list_key); l && l->is_array()) {
      for (const Json& s : l->array()) out.push_back(&s);
    }
  } else {
    out.push_back(j);
  }
  return out;
}

// added_tokens: texts and types over the model's own tokens (ids may add
// to the vocabulary's end).
Status AddTokens(const Json& root, const std::string& path, TokenizerData* d) {
  const Json* added = root.Find("added_tokens");
  if (!added || !added->is_array()) return Status::Ok();
  for (const Json& a : added->array()) {
    const Json* id = a.Find("id");
    const Json* content = a.Find("content");
    if (!id || !id->is_int() || id->as_int() < 0 || id->as_int() >= kMaxVocab || !content ||
        !content->is_string()) {
      return ModelFormatError(path + ": malformed added token");
    }
    const size_t i = static_cast<size_t>(id->as_int());
    if (i > d->tokens.size() + 65536) return ModelFormatError(path + ": added token id far past the vocabulary");
    if (i >= d->tokens.size()) {
      d->tokens.resize(i + 1);
      d->token_types.resize(i + 1, kTokenUnused);
      if (!d->scores.empty()) d->scores.resize(i + 1, 0.0f);
    }
    d->tokens[i] = content->as_string();
    const Json* special = a.Find("special");
    d->token_types[i] = (special && special->as_bool()) ? kTokenControl : kTokenUserDefined;
  }
  return Status::Ok();
}

// [CLS]/<s> before and [SEP]/</s> after a single text, as the
// post-processor says.
Status ReadPostProcessor(const Json& root, const std::string& path, TokenizerData* d) {
  for (const Json* p : Steps(root.Find("post_processor"), "processors")) {
    const std::string_view type = TypeOf(p);
    if (type == "BertProcessing" || type == "RobertaProcessing") {
      const Json* cls = p->Find("cls");
      const Json* sep = p->Find("sep");
      if (!cls || !sep || cls->size() != 2 || sep->size() != 2 || !(*cls)[1].is_int() || !(*sep)[1].is_int()) {
        return ModelFormatError(path + ": malformed " + std::string(type));
      }
      const int64_t c = (*cls)[1].as_int(), e = (*sep)[1].as_int();
      if (c < 0 || c >= kMaxVocab || e < 0 || e >= kMaxVocab) return ModelFormatError(path + ": special id out of range");
      d->bos = static_cast<int32_t>(c);
      d->eos = static_cast<int32_t>(e);
      d->add_bos = d->add_eos = true;
      if (type == "RobertaProcessing") d->sep = d->eos, d->add_sep = true;  // a pair: <s> A </s></s> B </s>
    } else if (type == "TemplateProcessing") {
      const Json* single = p->Find("single");
      const Json* specials = p->Find("special_tokens");
      if (!single || !single->is_array()) return ModelFormatError(path + ": TemplateProcessing without single");
      auto special_id = [&](const Json& item) -> int32_t {
        const Json* st = item.Find("SpecialToken");
        const Json* name = st ? st->Find("id") : nullptr;
        if (!name || !specials) return -1;
        const Json* entry = specials->Find(name->as_string());
        const Json* ids = entry ? entry->Find("ids") : nullptr;
        if (!ids || !ids->is_array() || ids->size() != 1 || !(*ids)[0].is_int()) return -1;
        if ((*ids)[0].as_int() < 0 || (*ids)[0].as_int() >= kMaxVocab) return -1;
        return static_cast<int32_t>((*ids)[0].as_int());
      };
      bool seen_text = false;
      for (const Json& item : single->array()) {
        if (item.Find("Sequence")) {
          seen_text = true;
          continue;
        }
        const int32_t id = special_id(item);
        if (id < 0) return Unsupported(path + ": TemplateProcessing item not understood");
        bool* add = seen_text ? &d->add_eos : &d->add_bos;
        if (*add) return Unsupported(path + ": TemplateProcessing with more than one token at an end");
        *add = true;
        (seen_text ? d->eos : d->bos) = id;
      }
      // A pair template with two specials between A and B (A </s> </s> B):
      // the second is the separator a cross-encoder's pair carries.
      if (const Json* pair = p->Find("pair"); pair != nullptr && pair->is_array()) {
        std::vector<int32_t> middle;
        bool in_middle = false;
        for (const Json& item : pair->array()) {
          if (const Json* seq = item.Find("Sequence")) {
            const Json* which = seq->Find("id");
            if (which == nullptr || !which->is_string()) break;
            if (which->as_string() == "B") break;
            in_middle = which->as_string() == "A";
            continue;
          }
          if (in_middle) middle.push_back(special_id(item));
        }
        if (middle.size() == 2 && middle[1] >= 0) d->sep = middle[1], d->add_sep = true;
      }
    } else if (type != "ByteLevel") {
      return Unsupported(path + ": unsupported post_processor " + std::string(type));
    }
  }
  return Status::Ok();
}

std::string Base64Decode(std::string_view in, bool* ok) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  *ok = true;
  for (char c : in) {
    if (c == '=') break;
    const int v = val(c);
    if (v < 0) {
      *ok = false;
      return {};
    }
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

}  // namespace

StatusOr<TokenizerData> TokenizerDataFromHfWordPiece(const Json& root, const std::string& path) {
  const Json& model = *root.Find("model");
  const Json* vocab = model.Find("vocab");
  if (!vocab || !vocab->is_object()) return ModelFormatError(path + ": model.vocab missing");
  TokenizerData d;
  d.kind = TokenizerData::Kind::kWordPiece;
  d.add_space_prefix = false;
  const Json* prefix = model.Find("continuing_subword_prefix");
  const std::string cont = prefix ? Str(prefix) : "##";
  if (const Json* m = model.Find("max_input_chars_per_word"); m && m->is_int()) {
    d.max_word_chars = static_cast<int32_t>(std::min<int64_t>(m->as_int(), INT32_MAX));
  }

  int64_t n = 0;
  for (const auto& [tok, id] : vocab->object()) {
    if (!id.is_int() || id.as_int() < 0 || id.as_int() >= kMaxVocab) return ModelFormatError(path + ": bad token id");
    n = std::max(n, id.as_int() + 1);
  }
  if (n > static_cast<int64_t>(vocab->size()) + 65536) return ModelFormatError(path + ": sparse token ids");
  d.tokens.assign(n, std::string());
  d.token_types.assign(n, kTokenUnused);
  // llama.cpp's form (see TokenizerData): "##ing" -> "ing", "the" -> "▁the".
  for (const auto& [tok, id] : vocab->object()) {
    std::string t;
    if (!cont.empty() && tok.size() > cont.size() && tok.compare(0, cont.size(), cont) == 0) {
      t = tok.substr(cont.size());
    } else if (tok.size() >= 2 && tok.front() == '[' && tok.back() == ']') {
      t = tok;
    } else {
      t = std::string(kWordStart) + tok;
    }
    d.tokens[id.as_int()] = std::move(t);
    d.token_types[id.as_int()] = kTokenNormal;
  }
  LLM_RETURN_IF_ERROR(AddTokens(root, path, &d));
  if (std::string unk = Str(model.Find("unk_token")); !unk.empty()) {
    d.unk = FindToken(d, unk);
    if (d.unk >= 0) d.token_types[d.unk] = kTokenUnknown;
  }

  bool normalizer = false;
  for (const Json* s : Steps(root.Find("normalizer"), "normalizers")) {
    if (std::string_view(TypeOf(s)) != "BertNormalizer") {
      return Unsupported(path + ": WordPiece with normalizer " + std::string(TypeOf(s)));
    }
    normalizer = true;
    auto flag = [&](const char* key, bool def) {
      const Json* v = s->Find(key);
      return v && v->is_bool() ? v->as_bool() : def;
    };
    d.clean_text = flag("clean_text", true);
    d.split_chinese = flag("handle_chinese_chars", true);
    d.lowercase = flag("lowercase", true);
    d.strip_accents = flag("strip_accents", d.lowercase);  // null: as lowercase
  }
  if (!normalizer) d.clean_text = d.split_chinese = d.lowercase = d.strip_accents = false;
  for (const Json* s : Steps(root.Find("pre_tokenizer"), "pretokenizers")) {
    if (std::string_view(TypeOf(s)) != "BertPreTokenizer") {
      return Unsupported(path + ": WordPiece with pre_tokenizer " + std::string(TypeOf(s)));
    }
  }
  LLM_RETURN_IF_ERROR(ReadPostProcessor(root, path, &d));
  CollectEog(&d);
  return d;
}

StatusOr<TokenizerData> TokenizerDataFromHfUnigram(const Json& root, const std::string& path) {
  const Json& model = *root.Find("model");
  const Json* vocab = model.Find("vocab");
  if (!vocab || !vocab->is_array() || vocab->size() == 0) return ModelFormatError(path + ": model.vocab missing");
  if (vocab->size() >= static_cast<size_t>(kMaxVocab)) return ModelFormatError(path + ": vocabulary too large");
  TokenizerData d;
  d.kind = TokenizerData::Kind::kUnigram;
  d.hf_rules = true;
  d.tokens.reserve(vocab->size());
  for (const Json& e : vocab->array()) {
    if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_number() || !std::isfinite(e[1].as_double())) {
      return ModelFormatError(path + ": malformed Unigram piece");
    }
    d.tokens.push_back(e[0].as_string());
    d.scores.push_back(static_cast<float>(e[1].as_double()));
    d.token_types.push_back(kTokenNormal);
  }
  if (const Json* u = model.Find("unk_id"); u && u->is_int()) {
    if (u->as_int() < 0 || u->as_int() >= static_cast<int64_t>(d.tokens.size())) {
      return ModelFormatError(path + ": unk_id out of range");
    }
    d.unk = static_cast<int32_t>(u->as_int());
  }
  if (const Json* b = model.Find("byte_fallback"); b && b->is_bool()) d.byte_fallback = b->as_bool();
  for (size_t i = 0; i < d.tokens.size(); ++i) {
    const std::string& t = d.tokens[i];
    if (d.byte_fallback && t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') d.token_types[i] = kTokenByte;
  }
  LLM_RETURN_IF_ERROR(AddTokens(root, path, &d));
  if (d.unk >= 0) d.token_types[d.unk] = kTokenUnknown;

  // Normalizer: the SentencePiece map and tokenizer.json's space rules.
  d.spaces = TokenizerData::Spaces::kKeep;
  for (const Json* s : Steps(root.Find("normalizer"), "normalizers")) {
    const std::string_view type = TypeOf(s);
    if (type == "Precompiled") {
      bool ok = false;
      d.precompiled_charsmap = Base64Decode(Str(s->Find("precompiled_charsmap")), &ok);
      if (!ok) return ModelFormatError(path + ": precompiled_charsmap is not base64");
      continue;
    }
    const Json* pat = type == "Replace" ? s->Find("pattern") : nullptr;
    const std::string content = type == "Replace" ? Str(s->Find("content")) : std::string();
    const std::string rx = pat ? Str(pat->Find("Regex")) : std::string();
    if (pat && (rx == " {2,}" || Str(pat->Find("String")) == "  ") && content == " ") {
      if (d.spaces == TokenizerData::Spaces::kKeep) d.spaces = TokenizerData::Spaces::kCollapse;
    } else if (pat && rx == "^ +| +$" && content.empty()) {
      d.spaces = TokenizerData::Spaces::kStripCollapse;  // with the collapse beside it
    } else {
      return Unsupported(path + ": Unigram with normalizer " + std::string(type));
    }
  }
  // Pre-tokenizer: Metaspace ("▁" for ' ', one in front).
  d.add_space_prefix = false;
  bool metaspace = false;
  for (const Json* s : Steps(root.Find("pre_tokenizer"), "pretokenizers")) {
    const std::string_view type = TypeOf(s);
    if (type == "Metaspace") {
      if (Str(s->Find("replacement")) != kWordStart) return Unsupported(path + ": Metaspace replacement other than U+2581");
      const std::string scheme = Str(s->Find("prepend_scheme"));
      const Json* old = s->Find("add_prefix_space");
      d.add_space_prefix = scheme.empty() ? (old && old->as_bool()) : scheme != "never";
      metaspace = true;
    } else if (type == "WhitespaceSplit") {
      d.spaces = TokenizerData::Spaces::kStripCollapse;
    } else {
      return Unsupported(path + ": Unigram with pre_tokenizer " + std::string(type));
    }
  }
  if (!metaspace) return Unsupported(path + ": Unigram without a Metaspace pre_tokenizer");
  LLM_RETURN_IF_ERROR(ReadPostProcessor(root, path, &d));
  CollectEog(&d);
  return d;
}

}  // namespace llm
