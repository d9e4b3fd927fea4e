#include "tokenizer/pretokenize.h"

#include <string>

#include "tokenizer/unicode.h"
#include "util/utf8.h"

namespace llm {
namespace {

// ----------------------------------------------------------- predicates
inline bool Ws(uint32_t c) { return IsUnicodeWhitespace(c); }
inline bool L(uint32_t c) { return IsLetter(c); }
inline bool N(uint32_t c) { return IsNumber(c); }
inline bool P(uint32_t c) { return IsPunctuation(c); }
inline bool CrLf(uint32_t c) { return c == '\r' || c == '\n'; }
// [^\s\p{L}\p{N}]
inline bool NotWsLN(uint32_t c) { return !Ws(c) && !L(c) && !N(c); }

template <typename Pred>
inline size_t RunOf(const uint32_t* c, size_t pos, size_t end, Pred pred) {
  size_t q = pos;
  while (q < end && pred(c[q])) ++q;
  return q - pos;
}

struct Range {
  uint32_t first, last;
};
template <size_t K>
bool InRanges(const Range (&r)[K], uint32_t c) {
  for (const Range& x : r) {
    if (c >= x.first && c <= x.last) return true;
  }
  return false;
}

// ------------------------------------------------- shared sub-patterns
// 's|'t|'re|'ve|'m|'ll|'d, optionally ASCII case-insensitive (llama.cpp
// spells Llama 3's (?i:...) as '[sS]|'[tT]|...).
size_t Contraction(const uint32_t* c, size_t end, size_t p, bool any_case) {
  if (c[p] != '\'' || p + 1 >= end) return 0;
  auto lower = [&](size_t i) -> uint32_t {
    uint32_t v = c[i];
    return (any_case && v >= 'A' && v <= 'Z') ? v + 32 : v;
  };
  const uint32_t a = lower(p + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (p + 2 < end) {
    const uint32_t b = lower(p + 2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  }
  return 0;
}

// \s+(?!\S)|\s+ : a whitespace run, minus its last character when a
// non-space follows (that character then leads the next piece).
size_t TrailingSpaces(const uint32_t* c, size_t end, size_t p) {
  const size_t n = RunOf(c, p, end, Ws);
  if (n == 0) return 0;
  if (p + n == end || n == 1) return n;
  return n - 1;
}

// " ?X+" where X is a predicate.
template <typename Pred>
size_t OptSpaceRun(const uint32_t* c, size_t end, size_t p, Pred pred) {
  const size_t q = (c[p] == ' ') ? p + 1 : p;
  const size_t n = RunOf(c, q, end, pred);
  return n ? (q - p) + n : 0;
}

// "\s?X+"
template <typename Pred>
size_t OptWsRun(const uint32_t* c, size_t end, size_t p, Pred pred) {
  if (pred(c[p])) return RunOf(c, p, end, pred);
  if (Ws(c[p]) && p + 1 < end) {
    const size_t n = RunOf(c, p + 1, end, pred);
    return n ? 1 + n : 0;
  }
  return 0;
}

// ------------------------------------------------------------ matchers
// GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
size_t Gpt2(const uint32_t* c, size_t, size_t end, size_t p) {
  if (size_t n = Contraction(c, end, p, false)) return n;
  if (size_t n = OptSpaceRun(c, end, p, L)) return n;
  if (size_t n = OptSpaceRun(c, end, p, N)) return n;
  if (size_t n = OptSpaceRun(c, end, p, NotWsLN)) return n;
  return TrailingSpaces(c, end, p);
}

// Llama 3 / Qwen2:
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,D}
//   | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
template <size_t kMaxDigits>
size_t Llama3Like(const uint32_t* c, size_t, size_t end, size_t p) {
  if (size_t n = Contraction(c, end, p, true)) return n;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (L(c[p])) return RunOf(c, p, end, L);
  if (!CrLf(c[p]) && !N(c[p]) && p + 1 < end && L(c[p + 1])) return 1 + RunOf(c, p + 1, end, L);
  // \p{N}{1,D}
  if (N(c[p])) {
    size_t n = 1;
    while (n < kMaxDigits && p + n < end && N(c[p + n])) ++n;
    return n;
  }
  // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
  {
    const size_t q = (c[p] == ' ') ? p + 1 : p;
    const size_t n = RunOf(c, q, end, NotWsLN);
    if (n) return (q - p) + n + RunOf(c, q + n, end, CrLf);
  }
  // \s*[\r\n]+ : the whitespace run up to and including its last \r or \n.
  const size_t ws = RunOf(c, p, end, Ws);
  if (ws == 0) return 0;
  for (size_t k = p + ws; k > p; --k) {
    if (CrLf(c[k - 1])) return k - p;
  }
  return TrailingSpaces(c, end, p);
}

// Single-purpose patterns used by the older multi-regex lists.
size_t OneNumber(const uint32_t* c, size_t, size_t, size_t p) { return N(c[p]) ? 1 : 0; }
size_t Numbers(const uint32_t* c, size_t, size_t end, size_t p) { return RunOf(c, p, end, N); }
size_t ThreeAsciiDigits(const uint32_t* c, size_t, size_t end, size_t p) {
  auto d = [](uint32_t v) { return v >= '0' && v <= '9'; };
  return (p + 3 <= end && d(c[p]) && d(c[p + 1]) && d(c[p + 2])) ? 3 : 0;
}
size_t OneCrLf(const uint32_t* c, size_t, size_t, size_t p) { return CrLf(c[p]) ? 1 : 0; }

// [\p{P}\$\+<=>\^~\|]+ (default) and the same with ` (falcon).
inline bool PunctOrMathAscii(uint32_t v) {
  return P(v) || v == '$' || v == '+' || v == '<' || v == '=' || v == '>' || v == '^' || v == '~' ||
         v == '|';
}
size_t DefaultPunct(const uint32_t* c, size_t, size_t end, size_t p) {
  return RunOf(c, p, end, PunctOrMathAscii);
}
size_t FalconPunct(const uint32_t* c, size_t, size_t end, size_t p) {
  return RunOf(c, p, end, [](uint32_t v) { return PunctOrMathAscii(v) || v == '`'; });
}

size_t WsLetters(const uint32_t* c, size_t, size_t end, size_t p) { return OptWsRun(c, end, p, L); }
size_t WsPunct(const uint32_t* c, size_t, size_t end, size_t p) { return OptWsRun(c, end, p, P); }

// [一-龥ࠀ-一가-퟿]+ (CJK ideographs, U+0800..U+9FA5, Hangul and beyond)
constexpr Range kCjk[] = {{0x4E00, 0x9FA5}, {0x800, 0x4E00}, {0xAC00, 0xD7FF}};
size_t Cjk(const uint32_t* c, size_t, size_t end, size_t p) {
  return RunOf(c, p, end, [](uint32_t v) { return InRanges(kCjk, v); });
}

// DeepSeek LLM spells its letter and punctuation classes out as ranges.
constexpr Range kDeepseekLetters[] = {
    {0x41, 0x5A}, {0x61, 0x7A}, {0xB5, 0xB5}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x1BA},
    {0x1BC, 0x1BF}, {0x1C4, 0x293}, {0x295, 0x2AF}, {0x370, 0x373}, {0x376, 0x377},
    {0x37B, 0x37D}, {0x37F, 0x37F}, {0x386, 0x386}, {0x388, 0x38A}, {0x38C, 0x38C},
    {0x38E, 0x3A1}, {0x3A3, 0x3F5}, {0x3F7, 0x481}, {0x48A, 0x52F}, {0x531, 0x556},
    {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA}, {0x1CBD, 0x1CBF},
    {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15}, {0x1F18, 0x1F1D},
    {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59}, {0x1F5B, 0x1F5B},
    {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC}, {0x1FBE, 0x1FBE},
    {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB}, {0x1FE0, 0x1FEC},
    {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102}, {0x2107, 0x2107}, {0x210A, 0x2113},
    {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126}, {0x2128, 0x2128},
    {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F}, {0x2145, 0x2149},
    {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4}, {0x2CEB, 0x2CEE},
    {0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F}, {0xA771, 0xA787},
    {0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17}, {0xFF21, 0xFF3A},
    {0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};
constexpr Range kDeepseekPunct[] = {{0x21, 0x2F},     {0x3A, 0x7E},     {0xFF01, 0xFF0F},
                                    {0xFF1A, 0xFF5E}, {0x2018, 0x201F}, {0x3000, 0x3002}};
size_t DeepseekLetters(const uint32_t* c, size_t, size_t end, size_t p) {
  return OptWsRun(c, end, p, [](uint32_t v) { return InRanges(kDeepseekLetters, v); });
}
size_t DeepseekPunct(const uint32_t* c, size_t, size_t end, size_t p) {
  return OptWsRun(c, end, p, [](uint32_t v) { return InRanges(kDeepseekPunct, v); });
}
// \s+$. Only a run's first position can start the match (a later one
// reaches the same end), and checking only there keeps long runs linear.
size_t SpacesAtEnd(const uint32_t* c, size_t begin, size_t end, size_t p) {
  if (p > begin && Ws(c[p - 1])) return 0;
  const size_t n = RunOf(c, p, end, Ws);
  return (n && p + n == end) ? n : 0;
}

struct PreEntry {
  const char* name;
  std::vector<PreTokenizer::Matcher> passes;
};

const std::vector<PreEntry>& Registry() {
  static const std::vector<PreEntry> entries = [] {
    const PreTokenizer::Matcher gpt2 = Gpt2, llama3 = Llama3Like<3>, qwen2 = Llama3Like<1>;
    std::vector<PreEntry> e = {
        {"default", {DefaultPunct, gpt2, Numbers, ThreeAsciiDigits}},
        {"llama-bpe", {llama3}},
        {"llama3", {llama3}},
        {"llama-v3", {llama3}},
        {"dbrx", {llama3}},
        {"smaug-bpe", {llama3}},
        {"qwen2", {qwen2}},
        {"stablelm2", {qwen2}},
        {"deepseek-r1-qwen", {qwen2}},
        {"gpt-2", {gpt2}},
        {"gpt2", {gpt2}},
        {"mpt", {gpt2}},
        {"olmo", {gpt2}},
        {"jais", {gpt2}},
        {"starcoder", {OneNumber, gpt2}},
        {"refact", {OneNumber, gpt2}},
        {"command-r", {OneNumber, gpt2}},
        {"smollm", {OneNumber, gpt2}},
        {"codeshell", {OneNumber, gpt2}},
        {"falcon", {FalconPunct, gpt2, ThreeAsciiDigits}},
        {"deepseek-coder", {OneCrLf, WsLetters, WsPunct, Cjk, OneNumber}},
        {"deepseek-llm", {OneCrLf, DeepseekLetters, DeepseekPunct, SpacesAtEnd, Cjk, Numbers}},
    };
    return e;
  }();
  return entries;
}

}  // namespace

StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::Create(std::string_view pre) {
  for (const PreEntry& e : Registry()) {
    if (pre == e.name) {
      auto p = std::unique_ptr<PreTokenizer>(new PreTokenizer());
      p->passes_ = e.passes;
      return p;
    }
  }
  return Unsupported("tokenizer: unknown pre-tokenizer '" + std::string(pre) + "'");
}

void PreTokenizer::Split(std::string_view text, std::vector<std::string_view>* out) const {
  if (text.empty()) return;
  // Code points and the byte offset of each (plus one past the end).
  std::vector<uint32_t> cps;
  std::vector<size_t> offs;
  cps.reserve(text.size());
  offs.reserve(text.size() + 1);
  for (size_t i = 0; i < text.size();) {
    uint32_t cp;
    size_t len;
    DecodeUtf8(text, i, &cp, &len);  // invalid bytes become U+FFFD, one byte each
    cps.push_back(cp);
    offs.push_back(i);
    i += len;
  }
  offs.push_back(text.size());

  // Pieces as [begin, end) code point indices; each pass refines them.
  std::vector<std::pair<size_t, size_t>> pieces{{0, cps.size()}}, next;
  for (Matcher m : passes_) {
    next.clear();
    for (auto [b, e] : pieces) {
      size_t gap = b;  // start of the text no match has claimed yet
      size_t p = b;
      while (p < e) {
        const size_t n = m(cps.data(), b, e, p);
        if (n == 0) {
          ++p;
          continue;
        }
        if (gap < p) next.emplace_back(gap, p);
        next.emplace_back(p, p + n);
        p += n;
        gap = p;
      }
      if (gap < e) next.emplace_back(gap, e);
    }
    pieces.swap(next);
  }
  for (auto [b, e] : pieces) out->push_back(text.substr(offs[b], offs[e] - offs[b]));
}

}  // namespace llm
