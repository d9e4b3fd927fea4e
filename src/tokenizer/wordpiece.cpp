#include "tokenizer/wordpiece.h"

#include <algorithm>

#include "tokenizer/unicode.h"
#include "tokenizer/unicode_norm.h"
#include "util/utf8.h"

namespace llm {
namespace {

constexpr std::string_view kWordStart = "\xE2\x96\x81";  // U+2581 "▁"

// The CJK ideograph blocks BERT puts spaces around (its list, not the
// Unicode property: Hangul, kana and CJK punctuation are not in it).
bool IsChineseChar(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

// White_Space as Rust's char::is_whitespace has it (tokenizers' test): not
// U+001C..U+001F, which Python's isspace() and IsUnicodeWhitespace include.
bool IsBertWhitespace(uint32_t cp) {
  if (cp >= 0x1C && cp <= 0x1F) return false;
  return IsUnicodeWhitespace(cp);
}

// ASCII punctuation and symbols ($, +, <, ^, `, |, ~ too), and every P*.
bool IsBertPunctuation(uint32_t cp) {
  const UnicodeClass c = GetUnicodeClass(cp);
  return c == UnicodeClass::kPunctuation || (cp < 0x80 && c == UnicodeClass::kSymbol);
}

}  // namespace

WordPiece::WordPiece(const TokenizerData& d) : d_(d) {
  ids_.reserve(d.tokens.size());
  for (size_t i = 0; i < d.tokens.size(); ++i) {
    const int32_t t = d.token_types[i];
    if (d.tokens[i].empty() || (t != kTokenNormal && t != kTokenUserDefined)) continue;
    ids_[d.tokens[i]] = static_cast<int32_t>(i);  // later duplicates win, as in Tokenizer
    max_piece_bytes_ = std::max(max_piece_bytes_, d.tokens[i].size());
  }
}

int32_t WordPiece::Find(std::string_view piece) const {
  auto it = ids_.find(piece);
  return it == ids_.end() ? -1 : it->second;
}

std::vector<std::string> WordPiece::Words(std::string_view text) const {
  // Normalizer, in BertNormalizer's order: clean, CJK, accents, lowercase.
  std::vector<uint32_t> cps;
  cps.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    uint32_t cp;
    size_t len;
    DecodeUtf8(text, i, &cp, &len);
    i += len;
    if (d_.clean_text) {
      if (cp == 0 || cp == 0xFFFD) continue;
      if (cp == '\t' || cp == '\n' || cp == '\r') {
        cps.push_back(' ');
        continue;
      }
      // Cc, Cf, Co, Cs go; unassigned code points stay.
      if (GetUnicodeClass(cp) == UnicodeClass::kOther && IsUnicodeAssigned(cp)) continue;
      if (IsBertWhitespace(cp)) cp = ' ';
    }
    if (d_.split_chinese && IsChineseChar(cp)) {
      cps.insert(cps.end(), {' ', cp, ' '});
      continue;
    }
    cps.push_back(cp);
  }
  if (d_.strip_accents) {
    cps = ToNfd(cps);
    std::erase_if(cps, IsNonspacingMark);
  }

  // Pre-tokenizer: whitespace separates, punctuation stands alone.
  std::vector<std::string> words;
  std::string cur;
  auto flush = [&] {
    if (!cur.empty()) words.push_back(std::move(cur));
    cur.clear();
  };
  for (uint32_t cp : cps) {
    if (IsBertWhitespace(cp)) {
      flush();
      continue;
    }
    const bool punct = IsBertPunctuation(cp);
    if (punct) flush();
    if (d_.lowercase && cp == 0x130) {
      cur += "i\xCC\x87";  // İ: the one code point whose lowercase is two
    } else {
      AppendUtf8(d_.lowercase ? UnicodeToLower(cp) : cp, &cur);
    }
    if (punct) flush();
  }
  flush();
  return words;
}

void WordPiece::Encode(std::string_view text, std::vector<int32_t>* out) const {
  for (const std::string& w : Words(text)) EncodeWord(w, out);
}

// Greedy longest match from the left, by code points. A word with a gap
// that no piece covers becomes one [UNK], whatever was matched before it.
void WordPiece::EncodeWord(std::string_view word, std::vector<int32_t>* out) const {
  size_t n_chars = 0;
  for (unsigned char c : word) n_chars += (c & 0xC0) != 0x80;
  const size_t first = out->size();
  auto unknown = [&] {
    out->resize(first);
    if (d_.unk >= 0) out->push_back(d_.unk);
  };
  if (static_cast<int64_t>(n_chars) > d_.max_word_chars) return unknown();

  std::string key;
  for (size_t start = 0; start < word.size();) {
    const std::string_view prefix = start == 0 ? kWordStart : std::string_view();
    size_t end = std::min(word.size(), start + max_piece_bytes_);
    int32_t id = -1;
    for (; end > start; --end) {
      if (end < word.size() && (static_cast<unsigned char>(word[end]) & 0xC0) == 0x80) continue;
      key.assign(prefix);
      key.append(word.substr(start, end - start));
      id = Find(key);
      if (id >= 0) break;
    }
    if (id < 0) return unknown();
    out->push_back(id);
    start = end;
  }
}

}  // namespace llm
