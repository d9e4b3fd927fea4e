#include "tokenizer/charsmap.h"

#include <cstring>

#include "tokenizer/unicode.h"
#include "util/utf8.h"

namespace llm {
namespace {

// darts-clone's unit layout.
bool HasLeaf(uint32_t u) { return (u >> 8) & 1; }
uint32_t Value(uint32_t u) { return u & 0x7FFFFFFFu; }
uint32_t Label(uint32_t u) { return u & (0x80000000u | 0xFFu); }
uint32_t Offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }

uint32_t ReadU32(const char* p) {
  const auto* b = reinterpret_cast<const unsigned char*>(p);
  return uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 | uint32_t(b[3]) << 24;
}

constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

// ------------------------------------------------ grapheme clusters (UAX 29)
enum class Gcb { kOther, kCr, kLf, kControl, kExtend, kZwj, kRegional, kL, kV, kT, kLv, kLvt, kPictographic };

Gcb BreakClass(uint32_t cp) {
  if (cp == '\r') return Gcb::kCr;
  if (cp == '\n') return Gcb::kLf;
  if (cp == 0x200D) return Gcb::kZwj;
  if (cp == 0x200C || (cp >= 0x1F3FB && cp <= 0x1F3FF) || cp == 0xFF9E || cp == 0xFF9F ||
      (cp >= 0xE0020 && cp <= 0xE007F)) {
    return Gcb::kExtend;
  }
  if (cp >= 0x1F1E6 && cp <= 0x1F1FF) return Gcb::kRegional;
  if ((cp >= 0x1100 && cp <= 0x115F) || (cp >= 0xA960 && cp <= 0xA97C)) return Gcb::kL;
  if ((cp >= 0x1160 && cp <= 0x11A7) || (cp >= 0xD7B0 && cp <= 0xD7C6)) return Gcb::kV;
  if ((cp >= 0x11A8 && cp <= 0x11FF) || (cp >= 0xD7CB && cp <= 0xD7FB)) return Gcb::kT;
  if (cp >= 0xAC00 && cp <= 0xD7A3) return (cp - 0xAC00) % 28 == 0 ? Gcb::kLv : Gcb::kLvt;
  const UnicodeClass c = GetUnicodeClass(cp);
  if (c == UnicodeClass::kMark) return Gcb::kExtend;
  if (cp == 0x2028 || cp == 0x2029) return Gcb::kControl;
  if (c == UnicodeClass::kOther && IsUnicodeAssigned(cp) && !(cp >= 0xE000 && cp <= 0xF8FF) &&
      !(cp >= 0xF0000)) {
    return Gcb::kControl;  // Cc, Cf (private use is Other)
  }
  if ((cp >= 0x1F000 && cp <= 0x1FAFF) || (cp >= 0x2600 && cp <= 0x27BF) || cp == 0x00A9 || cp == 0x00AE ||
      cp == 0x203C || cp == 0x2049 || cp == 0x2122 || cp == 0x2139 || (cp >= 0x2194 && cp <= 0x21AA) ||
      cp == 0x231A || cp == 0x231B || cp == 0x2328 || cp == 0x23CF || (cp >= 0x23E9 && cp <= 0x23FA) ||
      cp == 0x24C2 || (cp >= 0x25AA && cp <= 0x25FE) || (cp >= 0x2934 && cp <= 0x2935) ||
      (cp >= 0x2B05 && cp <= 0x2B55) || cp == 0x3030 || cp == 0x303D || cp == 0x3297 || cp == 0x3299) {
    return Gcb::kPictographic;
  }
  return Gcb::kOther;
}

// Whether there is a cluster boundary between b (after a) and a; ri_run is
// the number of regional indicators just before b, pict_zwj whether a is a
// ZWJ that follows a pictograph (and its extends).
bool IsBreak(Gcb a, Gcb b, int ri_run, bool pict_zwj) {
  if (a == Gcb::kCr && b == Gcb::kLf) return false;
  if (a == Gcb::kCr || a == Gcb::kLf || a == Gcb::kControl) return true;
  if (b == Gcb::kCr || b == Gcb::kLf || b == Gcb::kControl) return true;
  if (a == Gcb::kL && (b == Gcb::kL || b == Gcb::kV || b == Gcb::kLv || b == Gcb::kLvt)) return false;
  if ((a == Gcb::kLv || a == Gcb::kV) && (b == Gcb::kV || b == Gcb::kT)) return false;
  if ((a == Gcb::kLvt || a == Gcb::kT) && b == Gcb::kT) return false;
  if (b == Gcb::kExtend || b == Gcb::kZwj) return false;
  if (pict_zwj && b == Gcb::kPictographic) return false;
  if (a == Gcb::kRegional && b == Gcb::kRegional) return ri_run % 2 == 0;
  return true;
}

}  // namespace

StatusOr<CharsMap> CharsMap::Parse(std::string_view blob) {
  CharsMap m;
  if (blob.empty()) return m;
  if (blob.size() < 4) return ModelFormatError("precompiled_charsmap: shorter than its header");
  const uint32_t trie_bytes = ReadU32(blob.data());
  if (trie_bytes % 4 != 0 || trie_bytes == 0 || trie_bytes > blob.size() - 4) {
    return ModelFormatError("precompiled_charsmap: trie size " + std::to_string(trie_bytes) +
                            " does not fit a " + std::to_string(blob.size()) + "-byte map");
  }
  m.units_.resize(trie_bytes / 4);
  for (size_t i = 0; i < m.units_.size(); ++i) m.units_[i] = ReadU32(blob.data() + 4 + 4 * i);
  m.normalized_ = std::string(blob.substr(4 + trie_bytes));
  return m;
}

bool CharsMap::Match(std::string_view s, bool shortest, size_t* consumed, std::string_view* replacement) const {
  if (units_.empty()) return false;
  const size_t n = units_.size();
  size_t best_len = 0;
  uint32_t best_value = 0;
  size_t pos = Offset(units_[0]);
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == 0) break;  // keys never hold NUL
    pos ^= c;
    if (pos >= n) break;
    const uint32_t unit = units_[pos];
    if (Label(unit) != c) break;
    pos ^= Offset(unit);
    if (pos >= n) break;
    if (HasLeaf(unit)) {
      best_len = i + 1;
      best_value = Value(units_[pos]);
      if (shortest) break;
    }
  }
  if (best_len == 0 || best_value >= normalized_.size()) return false;
  const char* begin = normalized_.data() + best_value;
  const size_t max = normalized_.size() - best_value;
  const void* nul = std::memchr(begin, 0, max);
  *replacement = std::string_view(begin, nul ? static_cast<const char*>(nul) - begin : max);
  *consumed = best_len;
  return true;
}

std::string CharsMap::NormalizeLongest(std::string_view s) const {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t consumed;
    std::string_view rep;
    if (Match(s.substr(i), false, &consumed, &rep)) {
      out.append(rep);
      i += consumed;
      continue;
    }
    uint32_t cp;
    size_t len;
    if (DecodeUtf8(s, i, &cp, &len)) out.append(s.substr(i, len));
    else out.append(kReplacementChar);
    i += len;
  }
  return out;
}

std::string CharsMap::NormalizeGraphemes(std::string_view s) const {
  std::string out;
  out.reserve(s.size());
  // One code point at a time: its mapped prefix (a whole code point: keys
  // are whole characters) or itself.
  auto map_one = [&](std::string_view ch) {
    size_t consumed;
    std::string_view rep;
    if (Match(ch, true, &consumed, &rep)) out.append(rep);
    else out.append(ch);
  };
  size_t start = 0;
  Gcb prev = Gcb::kControl;
  int ri_run = 0;
  bool pict = false, pict_zwj = false;
  auto flush = [&](size_t end) {
    const std::string_view g = s.substr(start, end - start);
    size_t consumed;
    std::string_view rep;
    if (g.size() < 6 && Match(g, true, &consumed, &rep)) {
      out.append(rep);
    } else {
      for (size_t i = 0; i < g.size();) {
        const size_t len = std::min(Utf8SequenceLength(static_cast<unsigned char>(g[i])), g.size() - i);
        map_one(g.substr(i, len));
        i += len;
      }
    }
    start = end;
  };
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    size_t len;
    DecodeUtf8(s, i, &cp, &len);
    const Gcb cur = BreakClass(cp);
    if (i > 0 && IsBreak(prev, cur, ri_run, pict_zwj)) flush(i);
    // State for the rules that look further back (GB11, GB12/13).
    ri_run = cur == Gcb::kRegional ? ri_run + 1 : 0;
    pict_zwj = cur == Gcb::kZwj && pict;
    if (cur == Gcb::kPictographic) pict = true;
    else if (cur != Gcb::kExtend) pict = false;
    prev = cur;
    i += len;
  }
  if (start < s.size()) flush(s.size());
  return out;
}

}  // namespace llm
