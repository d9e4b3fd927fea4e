#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "support/test_paths.h"
#include "util/json.h"

namespace llm {
namespace {

TEST(Json, Scalars) {
  auto j = ParseJson(" [null, true, false, 0, -12, 3.5, 1e3, \"x\"] ");
  ASSERT_TRUE(j.ok()) << j.status().message();
  ASSERT_TRUE(j->is_array());
  ASSERT_EQ(j->size(), 8u);
  EXPECT_TRUE((*j)[0].is_null());
  EXPECT_TRUE((*j)[1].as_bool());
  EXPECT_FALSE((*j)[2].as_bool());
  EXPECT_TRUE((*j)[3].is_int());
  EXPECT_EQ((*j)[4].as_int(), -12);
  EXPECT_FALSE((*j)[5].is_int());
  EXPECT_DOUBLE_EQ((*j)[5].as_double(), 3.5);
  EXPECT_FALSE((*j)[6].is_int());
  EXPECT_DOUBLE_EQ((*j)[6].as_double(), 1000.0);
  EXPECT_EQ((*j)[7].as_string(), "x");
  EXPECT_TRUE((*j)[99].is_null());
}

TEST(Json, ExactInt64) {
  auto j = ParseJson("[9007199254740993, -9223372036854775808, 18446744073709551616]");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ((*j)[0].as_int(), 9007199254740993LL);  // not representable as double
  EXPECT_EQ((*j)[1].as_int(), INT64_MIN);
  EXPECT_FALSE((*j)[2].is_int());  // out of range: double only
  EXPECT_DOUBLE_EQ((*j)[2].as_double(), 18446744073709551616.0);
}

TEST(Json, OutOfRangeDoublesSaturate) {
  auto j = ParseJson("[1e400, -1e400, 1e-400, 0.5e-1]");
  ASSERT_TRUE(j.ok()) << j.status().message();
  EXPECT_TRUE(std::isinf((*j)[0].as_double()));
  EXPECT_LT((*j)[1].as_double(), 0.0);
  EXPECT_EQ((*j)[2].as_double(), 0.0);
  EXPECT_DOUBLE_EQ((*j)[3].as_double(), 0.05);
}

TEST(Json, ObjectsAndFind) {
  auto j = ParseJson(R"({"a": {"b": [1, 2]}, "c": "d", "e": {}})");
  ASSERT_TRUE(j.ok());
  ASSERT_TRUE(j->is_object());
  EXPECT_EQ(j->object().size(), 3u);
  const Json* a = j->Find("a");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(a->Find("b"), nullptr);
  EXPECT_EQ((*a->Find("b"))[1].as_int(), 2);
  EXPECT_EQ(j->Find("zz"), nullptr);
  EXPECT_EQ(j->Find("c")->as_string(), "d");
  EXPECT_TRUE(j->Find("e")->is_object());
}

TEST(Json, StringEscapes) {
  auto j = ParseJson(R"("a\"b\\c\/d\b\f\n\r\t\u0041\u00e9\u20ac\ud83d\ude00")");
  ASSERT_TRUE(j.ok()) << j.status().message();
  EXPECT_EQ(j->as_string(), "a\"b\\c/d\b\f\n\r\tA\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
  auto raw = ParseJson("\"\xE2\x96\x81the\"");  // raw UTF-8 passes through
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw->as_string(), "\xE2\x96\x81the");
}

TEST(Json, MalformedInputsFailCleanly) {
  const char* bad[] = {
      "",          "[",          "[1,]",        "{\"a\" 1}",   "{\"a\":1,}", "tru",
      "01",        "1.",         "-",           "1e",          "\"abc",      "\"\\x\"",
      "\"\\u12\"", "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"", "[1] x", "\"a\nb\"",
      "{1:2}",     "\xFF",       "\"\xC0\xAF\"", "nul",        "[1 2]",
  };
  for (const char* s : bad) {
    auto j = ParseJson(s);
    EXPECT_FALSE(j.ok()) << "accepted: " << s;
    if (!j.ok()) {
      EXPECT_EQ(j.status().code(), LLM_ERR_INVALID_ARGUMENT);
    }
  }
  auto j = ParseJson("[1, ?]");
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("byte 4"), std::string::npos) << j.status().message();
}

TEST(Json, DepthLimit) {
  std::string deep(100000, '[');
  auto j = ParseJson(deep);
  EXPECT_FALSE(j.ok());
  std::string ok_depth = std::string(100, '[') + std::string(100, ']');
  EXPECT_TRUE(ParseJson(ok_depth).ok());
  std::string too = std::string(600, '[') + std::string(600, ']');
  EXPECT_FALSE(ParseJson(too).ok());
}

// A real 11 MB tokenizer.json parses whole. Its speed is printed, not
// asserted: a timed unit test fails on a busy machine (the speed belongs in a
// benchmark).
TEST(Json, LargeTokenizerFile) {
  const std::string text = test::ReadFile(test::DataDir() + "/tokenizers/qwen3/tokenizer.json");
  ASSERT_FALSE(text.empty());
  double dt = 1e9;
  StatusOr<Json> j = Status(LLM_ERR_INTERNAL, "not run");
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    j = ParseJson(text);
    dt = std::min(dt, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  ASSERT_TRUE(j.ok()) << j.status().message();
  const Json* model = j->Find("model");
  ASSERT_NE(model, nullptr);
  ASSERT_NE(model->Find("vocab"), nullptr);
  EXPECT_EQ(model->Find("vocab")->object().size(), 151643u);
  std::printf("qwen3 tokenizer.json: %zu bytes parsed in %.3f s (best of 3)\n", text.size(), dt);
}

}  // namespace
}  // namespace llm
