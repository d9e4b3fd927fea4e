// Building TokenizerData from a Hugging Face tokenizer.json (+
// tokenizer_config.json beside it). WordPiece and Unigram models are read by
// vocab_hf_models.cpp; GGUF vocabularies in model/vocab_gguf.cpp.
#include <algorithm>
#include <fstream>
#include <sstream>

#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_hf_models.h"
#include "tokenizer/vocab_rules.h"
#include "util/json.h"

namespace llm {
namespace {

StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError("cannot open " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return IoError("cannot read " + path);
  return ss.str();
}

// "bos_token": "<s>" or {"content": "<s>", ...}
std::string TokenText(const Json* j) {
  if (j == nullptr) return {};
  if (j->is_string()) return j->as_string();
  if (const Json* c = j->Find("content"); c && c->is_string()) return c->as_string();
  return {};
}

// The pre-tokenizer regexes we recognise, as written in tokenizer.json.
constexpr std::string_view kLlama3Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr std::string_view kQwen2Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// Finds the pre-tokenizer name from the "pre_tokenizer" object: a Split on a
// known regex followed by ByteLevel, or a lone ByteLevel with its GPT-2 regex.
StatusOr<std::string> DetectPre(const Json* pt) {
  if (pt == nullptr || !pt->is_object()) return Unsupported("tokenizer.json: no pre_tokenizer");
  std::vector<const Json*> steps;
  const Json* type = pt->Find("type");
  if (type && type->as_string() == "Sequence") {
    if (const Json* list = pt->Find("pretokenizers"); list && list->is_array()) {
      for (const Json& s : list->array()) steps.push_back(&s);
    }
  } else {
    steps.push_back(pt);
  }
  std::string pre;
  bool byte_level = false;
  for (const Json* s : steps) {
    const Json* t = s->Find("type");
    if (!t) continue;
    if (t->as_string() == "ByteLevel") {
      byte_level = true;
      const Json* use_regex = s->Find("use_regex");
      if (pre.empty() && (!use_regex || use_regex->as_bool())) pre = "gpt-2";
    } else if (t->as_string() == "Split") {
      const Json* pat = s->Find("pattern");
      const Json* rx = pat ? pat->Find("Regex") : nullptr;
      const std::string r = rx ? rx->as_string() : std::string();
      if (r == kLlama3Regex) pre = "llama-bpe";
      else if (r == kQwen2Regex) pre = "qwen2";
      else return Unsupported("tokenizer.json: unsupported pre-tokenizer regex");
    } else {
      return Unsupported("tokenizer.json: unsupported pre-tokenizer " + t->as_string());
    }
  }
  if (!byte_level || pre.empty()) return Unsupported("tokenizer.json: only byte-level BPE is supported");
  return pre;
}

}  // namespace

StatusOr<TokenizerData> TokenizerDataFromHfJson(const std::string& path) {
  LLM_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path));
  auto parsed = ParseJson(text);
  if (!parsed.ok()) return ModelFormatError(path + ": " + parsed.status().message());
  const Json& root = parsed.value();
  const Json* model = root.Find("model");
  if (!model || !model->is_object()) return ModelFormatError(path + ": no \"model\" object");
  const Json* mtype = model->Find("type");
  if (mtype && mtype->as_string() == "WordPiece") return TokenizerDataFromHfWordPiece(root, path);
  if (mtype && mtype->as_string() == "Unigram") return TokenizerDataFromHfUnigram(root, path);
  if (!mtype || mtype->as_string() != "BPE") {
    return Unsupported(path + ": only BPE, WordPiece and Unigram models are supported");
  }
  const Json* vocab = model->Find("vocab");
  const Json* merges = model->Find("merges");
  if (!vocab || !vocab->is_object() || !merges || !merges->is_array()) {
    return ModelFormatError(path + ": model.vocab / model.merges missing");
  }

  TokenizerData d;
  d.kind = TokenizerData::Kind::kBpe;
  d.add_space_prefix = false;
  LLM_ASSIGN_OR_RETURN(d.pre, DetectPre(root.Find("pre_tokenizer")));
  if (const Json* im = model->Find("ignore_merges")) d.ignore_merges = im->as_bool();
  if (const Json* norm = root.Find("normalizer"); norm && norm->is_object()) {
    const Json* t = norm->Find("type");
    if (t && t->as_string() == "NFC") d.normalize_nfc = true;
  }

  // Ids come from the vocab and added_tokens; gaps become unused tokens.
  constexpr int64_t kMaxVocab = 1 << 24;
  int64_t n = 0;
  int64_t n_entries = 0;
  auto check_id = [&](const Json& id) -> Status {
    ++n_entries;
    if (!id.is_int() || id.as_int() < 0 || id.as_int() >= kMaxVocab) {
      return ModelFormatError(path + ": bad token id");
    }
    n = std::max(n, id.as_int() + 1);
    return Status::Ok();
  };
  for (const auto& [tok, id] : vocab->object()) LLM_RETURN_IF_ERROR(check_id(id));
  const Json* added = root.Find("added_tokens");
  if (added && added->is_array()) {
    for (const Json& a : added->array()) {
      const Json* id = a.Find("id");
      if (!id) return ModelFormatError(path + ": added token without id");
      LLM_RETURN_IF_ERROR(check_id(*id));
    }
  }
  // Gaps between ids become unused tokens; a few are normal, millions from a
  // file of a few entries are not (each costs memory).
  if (n > n_entries + 65536) {
    return ModelFormatError(path + ": token ids reach " + std::to_string(n - 1) + " but only " +
                            std::to_string(n_entries) + " tokens are defined");
  }
  d.tokens.assign(n, std::string());
  d.token_types.assign(n, kTokenUnused);
  for (const auto& [tok, id] : vocab->object()) {
    d.tokens[id.as_int()] = tok;
    d.token_types[id.as_int()] = kTokenNormal;
  }
  if (added && added->is_array()) {
    for (const Json& a : added->array()) {
      const int64_t id = a.Find("id")->as_int();
      const Json* content = a.Find("content");
      if (!content || !content->is_string()) return ModelFormatError(path + ": added token without content");
      d.tokens[id] = content->as_string();
      const Json* special = a.Find("special");
      d.token_types[id] = (special && special->as_bool()) ? kTokenControl : kTokenUserDefined;
    }
  }

  d.merges.reserve(merges->size());
  for (const Json& m : merges->array()) {
    if (m.is_string()) {
      d.merges.push_back(m.as_string());
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      d.merges.push_back(m[0].as_string() + " " + m[1].as_string());
    } else {
      return ModelFormatError(path + ": malformed merge");
    }
  }

  // tokenizer_config.json beside it: special tokens and BOS policy.
  if (IsLlama3Pre(d.pre)) d.add_bos = true;  // as llama.cpp does for Llama 3
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  auto cfg_text = ReadWholeFile(dir + "/tokenizer_config.json");
  if (cfg_text.ok()) {
    auto cfg = ParseJson(cfg_text.value());
    if (!cfg.ok()) return ModelFormatError(dir + "/tokenizer_config.json: " + cfg.status().message());
    const Json& c = cfg.value();
    auto id_of = [&](const char* key) { return FindToken(d, TokenText(c.Find(key))); };
    if (std::string t = TokenText(c.Find("bos_token")); !t.empty()) d.bos = FindToken(d, t);
    if (std::string t = TokenText(c.Find("eos_token")); !t.empty()) d.eos = FindToken(d, t);
    if (std::string t = TokenText(c.Find("pad_token")); !t.empty()) d.pad = FindToken(d, t);
    if (std::string t = TokenText(c.Find("unk_token")); !t.empty()) d.unk = id_of("unk_token");
    if (const Json* b = c.Find("add_bos_token"); b && b->is_bool()) d.add_bos = b->as_bool();
    if (const Json* e = c.Find("add_eos_token"); e && e->is_bool()) d.add_eos = e->as_bool();
  }
  if (d.bos < 0) d.add_bos = false;
  if (d.eos < 0) d.add_eos = false;
  if (d.sep >= static_cast<int64_t>(d.tokens.size())) d.sep = -1;
  if (d.sep < 0) d.add_sep = false;
  CollectEog(&d);
  return d;
}

}  // namespace llm
