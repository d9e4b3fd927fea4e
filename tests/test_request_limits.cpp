// llm-server's limits on client JSON (samples/server/request_limits.h): the
// depth scan that runs before anything walks a request, per field, and the
// body parser's duplicate-key refusal. Pure functions: no socket, no model.
#include <gtest/gtest.h>

#include <string>

#include "request_limits.h"

namespace server {
namespace {

std::string Objects(int depth) {
  std::string s;
  for (int i = 0; i < depth; ++i) s += "{\"a\":";
  return s + "1" + std::string(static_cast<size_t>(depth), '}');
}

std::string Arrays(int depth) { return std::string(static_cast<size_t>(depth), '[') + std::string(static_cast<size_t>(depth), ']'); }

TEST(RequestLimits, NestingDepthCountsContainersNotBracketsInStrings) {
  EXPECT_EQ(NestingDepth("1", 10), 0);
  EXPECT_EQ(NestingDepth("[]", 10), 1);
  EXPECT_EQ(NestingDepth(R"({"a":[1,{"b":[]}]})", 10), 4);
  EXPECT_EQ(NestingDepth(R"(["[[[{{{"])", 10), 1);
  EXPECT_EQ(NestingDepth(R"(["\"[[[", "\\", [1]])", 10), 2);  // escaped quote, escaped backslash
  EXPECT_EQ(NestingDepth(Arrays(1000000), 64), 65);          // stops counting past the limit
}

TEST(RequestLimits, EachFieldHasItsDepthLimit) {
  struct Case {
    const char* field;
    int limit;
  } cases[] = {{"response_format", kMaxSchemaDepth + 2}, {"functions", kMaxSchemaDepth + 2},
               {"tools", kMaxSchemaDepth + 3},           {"messages", kMaxValueDepth + 5},
               {"logit_bias", kMaxValueDepth},           {"x_unknown", kMaxValueDepth}};
  for (const Case& c : cases) {
    for (int d : {c.limit, c.limit + 1}) {
      for (const std::string& v : {Objects(d), Arrays(d)}) {
        const std::string body = std::string(R"({"model":"m",")") + c.field + "\":" + v + "}";
        std::string field;
        int limit = 0;
        const bool ok = BodyDepthOk(body, &field, &limit);
        EXPECT_EQ(ok, d <= c.limit) << c.field << " at depth " << d;
        if (!ok) {
          EXPECT_EQ(field, c.field);
          EXPECT_EQ(limit, c.limit);
        }
      }
    }
  }
  std::string field = "x";
  int limit = 0;
  EXPECT_TRUE(BodyDepthOk(Arrays(kMaxValueDepth), &field, &limit));
  EXPECT_FALSE(BodyDepthOk(Arrays(kMaxValueDepth + 1), &field, &limit));
  EXPECT_EQ(field, "") << "a body that is not an object";
  // A key's text inside another field's value is not that field.
  EXPECT_FALSE(BodyDepthOk(R"({"x":{"tools":)" + Arrays(100) + "}}", &field, &limit));
  EXPECT_EQ(field, "x");
}

TEST(RequestLimits, BodyParserRefusesDuplicateKeysAtAnyDepth) {
  nlohmann::json body;
  std::string param, code, message;
  EXPECT_TRUE(ParseRequestBody(R"({"a":1,"b":[{"k":1},{"k":2}],"c":{"k":1,"j":{"k":2}}})", &body, &param, &code,
                               &message))
      << message;
  EXPECT_FALSE(ParseRequestBody(R"({"max_tokens":1,"messages":[],"max_tokens":2})", &body, &param, &code, &message));
  EXPECT_EQ(code, "duplicate_key");
  EXPECT_EQ(param, "max_tokens");
  EXPECT_FALSE(
      ParseRequestBody(R"({"messages":[{"role":"user","role":"system"}]})", &body, &param, &code, &message));
  EXPECT_EQ(param, "messages");
  EXPECT_NE(message.find("\"role\""), std::string::npos) << message;
  EXPECT_FALSE(ParseRequestBody(R"({"messages":[)", &body, &param, &code, &message));
  EXPECT_EQ(code, "invalid_json");
  EXPECT_FALSE(ParseRequestBody(R"({"tools":)" + Arrays(100000) + "}", &body, &param, &code, &message));
  EXPECT_EQ(code, "nesting_too_deep");
  EXPECT_EQ(param, "tools");
}

TEST(RequestLimits, ParseBoundedRefusesDeeperText) {
  EXPECT_FALSE(ParseBounded(Objects(kMaxValueDepth), kMaxValueDepth).is_discarded());
  EXPECT_TRUE(ParseBounded(Objects(kMaxValueDepth + 1), kMaxValueDepth).is_discarded());
  EXPECT_TRUE(ParseBounded("{", kMaxValueDepth).is_discarded());
}

}  // namespace
}  // namespace server
