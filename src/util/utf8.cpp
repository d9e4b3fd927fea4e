#include "util/utf8.h"

namespace llm {

size_t Utf8SequenceLength(unsigned char b) {
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 1;  // continuation byte, C0/C1 (always overlong) or F5..FF
}

namespace {

// Allowed range of the second byte given the lead byte (RFC 3629 table);
// this is what excludes overlongs, surrogates and > U+10FFFF.
inline void SecondByteRange(unsigned char lead, unsigned char* lo, unsigned char* hi) {
  *lo = 0x80;
  *hi = 0xBF;
  if (lead == 0xE0) *lo = 0xA0;
  else if (lead == 0xED) *hi = 0x9F;
  else if (lead == 0xF0) *lo = 0x90;
  else if (lead == 0xF4) *hi = 0x8F;
}

}  // namespace

bool DecodeUtf8(std::string_view s, size_t pos, uint32_t* cp, size_t* len) {
  *cp = 0xFFFD;
  *len = 1;
  if (pos >= s.size()) return false;
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + pos;
  const size_t avail = s.size() - pos;
  const unsigned char b0 = p[0];
  if (b0 < 0x80) {
    *cp = b0;
    return true;
  }
  const size_t n = Utf8SequenceLength(b0);
  if (n == 1 || avail < n) return false;
  unsigned char lo, hi;
  SecondByteRange(b0, &lo, &hi);
  if (p[1] < lo || p[1] > hi) return false;
  for (size_t i = 2; i < n; ++i) {
    if ((p[i] & 0xC0) != 0x80) return false;
  }
  uint32_t c;
  if (n == 2) c = (uint32_t(b0 & 0x1F) << 6) | (p[1] & 0x3F);
  else if (n == 3) c = (uint32_t(b0 & 0x0F) << 12) | (uint32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
  else
    c = (uint32_t(b0 & 0x07) << 18) | (uint32_t(p[1] & 0x3F) << 12) | (uint32_t(p[2] & 0x3F) << 6) |
        (p[3] & 0x3F);
  *cp = c;
  *len = n;
  return true;
}

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    // ASCII fast path: most text is ASCII.
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    uint32_t cp;
    size_t len;
    if (!DecodeUtf8(s, i, &cp, &len)) return false;
    i += len;
  }
  return true;
}

void AppendWtf8(uint32_t cp, std::string* out) {
  if (cp > 0x10FFFF) cp = 0xFFFD;
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool AppendUtf8(uint32_t cp, std::string* out) {
  const bool ok = !((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF);
  AppendWtf8(ok ? cp : 0xFFFD, out);
  return ok;
}

size_t Utf8CompletePrefix(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  // An incomplete sequence is at most 3 bytes long, so only the last 3 bytes
  // can start one. Find the last lead byte among them.
  const size_t lim = n < 3 ? n : 3;
  for (size_t back = 1; back <= lim; ++back) {
    const size_t start = n - back;
    const unsigned char b = p[start];
    if ((b & 0xC0) == 0x80) continue;  // continuation: keep looking left
    const size_t need = Utf8SequenceLength(b);
    if (need <= back) return n;  // complete (or a single/invalid byte)
    // Hold back only if the bytes so far could still form a valid character.
    if (back >= 2) {
      unsigned char lo, hi;
      SecondByteRange(b, &lo, &hi);
      if (p[start + 1] < lo || p[start + 1] > hi) return n;
    }
    return start;
  }
  return n;  // only continuation bytes at the end: invalid, nothing to wait for
}

}  // namespace llm
