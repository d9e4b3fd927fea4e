#include <gtest/gtest.h>

#include "util/utf8.h"

namespace llm {
namespace {

TEST(Utf8, Validity) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("hello"));
  EXPECT_TRUE(IsValidUtf8("\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"));
  EXPECT_TRUE(IsValidUtf8("\xF4\x8F\xBF\xBF"));   // U+10FFFF
  EXPECT_TRUE(IsValidUtf8("\xED\x9F\xBF"));       // U+D7FF
  EXPECT_TRUE(IsValidUtf8(std::string_view("\0", 1)));
  EXPECT_FALSE(IsValidUtf8("\x80"));              // lone continuation
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xC1\xBF"));          // overlong
  EXPECT_FALSE(IsValidUtf8("\xE0\x80\xAF"));      // overlong 3-byte
  EXPECT_FALSE(IsValidUtf8("\xF0\x80\x80\xAF"));  // overlong 4-byte
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // U+D800 surrogate
  EXPECT_FALSE(IsValidUtf8("\xED\xBF\xBF"));      // U+DFFF surrogate
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // U+110000
  EXPECT_FALSE(IsValidUtf8("\xF5\x80\x80\x80"));
  EXPECT_FALSE(IsValidUtf8("\xFF"));
  EXPECT_FALSE(IsValidUtf8("\xC3"));              // truncated
  EXPECT_FALSE(IsValidUtf8("\xE2\x82"));
  EXPECT_FALSE(IsValidUtf8("a\xE2\x82z"));
}

TEST(Utf8, DecodeEncodeRoundTrip) {
  const uint32_t cps[] = {0, 0x41, 0x7F, 0x80, 0x7FF, 0x800, 0xD7FF, 0xE000, 0xFFFD, 0xFFFF, 0x10000, 0x10FFFF};
  for (uint32_t cp : cps) {
    std::string s;
    EXPECT_TRUE(AppendUtf8(cp, &s));
    uint32_t got;
    size_t len;
    ASSERT_TRUE(DecodeUtf8(s, 0, &got, &len)) << cp;
    EXPECT_EQ(got, cp);
    EXPECT_EQ(len, s.size());
    EXPECT_TRUE(IsValidUtf8(s));
  }
  std::string s;
  EXPECT_FALSE(AppendUtf8(0xD800, &s));
  EXPECT_EQ(s, "\xEF\xBF\xBD");
  s.clear();
  EXPECT_FALSE(AppendUtf8(0x110000, &s));
  EXPECT_EQ(s, "\xEF\xBF\xBD");
  uint32_t cp;
  size_t len;
  EXPECT_FALSE(DecodeUtf8("\xE2\x82", 0, &cp, &len));
  EXPECT_EQ(len, 1u);
  EXPECT_EQ(cp, 0xFFFDu);
  EXPECT_FALSE(DecodeUtf8("", 0, &cp, &len));
}

TEST(Utf8, CompletePrefix) {
  EXPECT_EQ(Utf8CompletePrefix(""), 0u);
  EXPECT_EQ(Utf8CompletePrefix("abc"), 3u);
  EXPECT_EQ(Utf8CompletePrefix("a\xC3"), 1u);                  // é waiting for its 2nd byte
  EXPECT_EQ(Utf8CompletePrefix("a\xC3\xA9"), 3u);
  EXPECT_EQ(Utf8CompletePrefix("a\xE2\x82"), 1u);              // € waiting
  EXPECT_EQ(Utf8CompletePrefix("a\xE2"), 1u);
  EXPECT_EQ(Utf8CompletePrefix("a\xF0\x9F\x98"), 1u);          // emoji waiting
  EXPECT_EQ(Utf8CompletePrefix("\xF0\x9F\x98\x80"), 4u);
  // Invalid bytes are emitted, never held.
  EXPECT_EQ(Utf8CompletePrefix("a\x80"), 2u);
  EXPECT_EQ(Utf8CompletePrefix("a\xFF"), 2u);
  EXPECT_EQ(Utf8CompletePrefix("a\xC0"), 2u);
  EXPECT_EQ(Utf8CompletePrefix("a\xED\xA0"), 3u);              // would be a surrogate
  EXPECT_EQ(Utf8CompletePrefix("a\xF4\x90"), 3u);              // would exceed U+10FFFF
  EXPECT_EQ(Utf8CompletePrefix("\x80\x80\x80\x80"), 4u);
  // Streaming simulation: feeding byte by byte always yields valid whole characters.
  const std::string text = "h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80!";
  std::string pending, out;
  for (char c : text) {
    pending.push_back(c);
    size_t n = Utf8CompletePrefix(pending);
    EXPECT_TRUE(IsValidUtf8(std::string_view(pending).substr(0, n)));
    out += pending.substr(0, n);
    pending.erase(0, n);
  }
  EXPECT_TRUE(pending.empty());
  EXPECT_EQ(out, text);
}

}  // namespace
}  // namespace llm
