// A JSON Schema read as the draft its "$schema" names (issue 29,
// src/constrain/schema_drafts.h). Each case is a difference between drafts
// the official suite's per-draft conformance test (test_json_schema.cpp,
// JsonSchemaSuite) only sees as valid instances rejected: here a valid
// instance the draft accepts must be accepted, and an invalid one refused.
#include <gtest/gtest.h>

#include <string>

#include "constrain/constraint.h"
#include "constrain/matcher.h"
#include "llm.h"

namespace llm {
namespace {

constexpr const char* k04 = R"("$schema":"http://json-schema.org/draft-04/schema#")";
constexpr const char* k06 = R"("$schema":"http://json-schema.org/draft-06/schema#")";
constexpr const char* k07 = R"("$schema":"http://json-schema.org/draft-07/schema#")";
constexpr const char* k2019 = R"("$schema":"https://json-schema.org/draft/2019-09/schema")";
constexpr const char* k2020 = R"("$schema":"https://json-schema.org/draft/2020-12/schema")";

// `schema_body` is an object's members without braces; `draft` its "$schema" member.
std::unique_ptr<constrain::Matcher> Compile(const std::string& draft, const std::string& schema_body) {
  const std::string text = "{" + draft + (schema_body.empty() ? "" : "," + schema_body) + "}";
  auto p = constrain::CompileConstraint(LLM_CONSTRAINT_JSON_SCHEMA, text, {});
  EXPECT_TRUE(p.ok()) << text << ": " << p.status().message();
  if (!p.ok()) return nullptr;
  return std::make_unique<constrain::Matcher>(*p);
}

TEST(SchemaDrafts, RefSiblingsAreIgnoredBeforeDraft2019) {
  const std::string body = R"("definitions":{"a":{"type":"array"}},"properties":{"p":{"$ref":"#/definitions/a","maxItems":1}})";
  for (const char* d : {k04, k06, k07}) {
    auto m = Compile(d, body);
    ASSERT_NE(m, nullptr);
    EXPECT_TRUE(m->Matches(R"({"p":[1,2,3]})")) << d;  // maxItems beside $ref: ignored
    EXPECT_FALSE(m->Matches(R"({"p":"x"})")) << d;
  }
  for (const char* d : {k2019, k2020}) {  // 2019-09 on: the siblings hold too
    auto m = Compile(d, body);
    ASSERT_NE(m, nullptr);
    EXPECT_FALSE(m->Matches(R"({"p":[1,2,3]})")) << d;
    EXPECT_TRUE(m->Matches(R"({"p":[1]})")) << d;
  }
}

TEST(SchemaDrafts, KeywordsALaterDraftAddedAreAnnotations) {
  auto m = Compile(k04, R"("type":"integer","const":1)");  // const: draft-06 on
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(m->Matches("2"));
  m = Compile(k06, R"("type":"integer","const":1)");
  ASSERT_NE(m, nullptr);
  EXPECT_FALSE(m->Matches("2"));
  EXPECT_TRUE(m->Matches("1"));
  m = Compile(k06, R"("type":"integer","if":{"minimum":5},"then":{"maximum":3})");  // if: draft-07 on
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(m->Matches("7"));
  m = Compile(k07, R"("type":"object","properties":{"a":{}},"dependentRequired":{"a":["b"]})");  // 2019-09 on
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(m->Matches(R"({"a":1})"));
  m = Compile(k07, R"("type":"array","prefixItems":[{"type":"string"}])");  // 2020-12
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(m->Matches("[1]"));
}

TEST(SchemaDrafts, DependenciesOnlyUpToDraft07) {
  const std::string body = R"("type":"object","properties":{"a":{},"b":{}},"dependencies":{"a":["b"]})";
  for (const char* d : {k04, k06, k07}) {
    auto m = Compile(d, body);
    ASSERT_NE(m, nullptr);
    EXPECT_FALSE(m->Matches(R"({"a":1})")) << d;
    EXPECT_TRUE(m->Matches(R"({"a":1,"b":2})")) << d;
  }
  for (const char* d : {k2019, k2020}) {
    auto m = Compile(d, body);
    ASSERT_NE(m, nullptr);
    EXPECT_TRUE(m->Matches(R"({"a":1})")) << d;
  }
  // No "$schema": the legacy form is read as its draft meant it.
  auto p = constrain::CompileConstraint(LLM_CONSTRAINT_JSON_SCHEMA, "{" + body + "}", {});
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_FALSE(constrain::Matcher(*p).Matches(R"({"a":1})"));
}

TEST(SchemaDrafts, ArrayItemsAndAdditionalItems) {
  const std::string body = R"("items":[{"type":"integer"},{"type":"string"}],"additionalItems":false)";
  for (const char* d : {k04, k07, k2019}) {
    auto m = Compile(d, body);
    ASSERT_NE(m, nullptr);
    EXPECT_TRUE(m->Matches(R"([1,"a"])")) << d;
    EXPECT_TRUE(m->Matches("[1]")) << d;  // a tuple may stop early
    EXPECT_TRUE(m->Matches("[]")) << d;
    EXPECT_FALSE(m->Matches(R"([1,"a",2])")) << d;
    EXPECT_FALSE(m->Matches(R"(["a"])")) << d;
  }
  // 2020-12: additionalItems is gone; items past prefixItems are free.
  auto m = Compile(k2020, R"("prefixItems":[{"type":"integer"}],"additionalItems":false)");
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(m->Matches(R"([1,"x"])"));
  EXPECT_FALSE(m->Matches(R"(["x"])"));
  // Array-form items with unevaluatedItems (2019-09): the tuple is evaluated.
  m = Compile(k2019, R"("items":[{"type":"string"}],"allOf":[{"items":[true,{"type":"number"}]}],"unevaluatedItems":false)");
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(m->Matches(R"(["a",1])"));
  EXPECT_FALSE(m->Matches(R"(["a",1,true])"));
}

TEST(SchemaDrafts, IdentifiersByDraft) {
  // draft-04 names a resource with "id"; later drafts with "$id" only.
  auto m = Compile(k04, R"("definitions":{"a":{"id":"http://x.test/a.json","type":"integer"}},"$ref":"http://x.test/a.json")");
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(m->Matches("1"));
  EXPECT_FALSE(m->Matches(R"("s")"));
  for (const char* d : {k06, k07, k2020}) {
    std::string text = "{";
    text += d;
    text += R"(,"definitions":{"a":{"id":"http://x.test/a.json","type":"integer"}},"$ref":"http://x.test/a.json"})";
    auto p = constrain::CompileConstraint(LLM_CONSTRAINT_JSON_SCHEMA, text, {});
    ASSERT_FALSE(p.ok()) << d;  // no resource has that $id: never fetched
    EXPECT_NE(p.status().message().find("$ref"), std::string::npos) << p.status().message();
  }
  // draft-07 ignores "$id" beside "$ref": it does not change the base URI.
  m = Compile(k07, R"("$id":"http://x.test/root.json","definitions":{"b":{"type":"string"}},)"
                   R"("properties":{"p":{"$id":"http://y.test/other.json","$ref":"#/definitions/b"}})");
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(m->Matches(R"({"p":"s"})"));
  EXPECT_FALSE(m->Matches(R"({"p":1})"));
}

TEST(SchemaDrafts, RecursiveRefIn2019) {
  // An integer, or a tree of strings whose nested values follow
  // $recursiveRef: with "$recursiveAnchor": true at the root too, the
  // outermost anchored resource (the root: integers allowed inside); without
  // it, the tree's own root (no integers inside).
  auto body = [](bool root_anchor) {
    return std::string(R"("$id":"http://x.test/root.json",)") + (root_anchor ? R"("$recursiveAnchor":true,)" : "") +
           R"("anyOf":[{"type":"integer"},{"$ref":"#/$defs/tree"}],)"
           R"("$defs":{"tree":{"$id":"tree.json","$recursiveAnchor":true,"anyOf":[{"type":"string"},)"
           R"({"type":"object","additionalProperties":{"$recursiveRef":"#"}}]}})";
  };
  auto m = Compile(k2019, body(true));
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(m->Matches(R"({"a":1})"));
  EXPECT_TRUE(m->Matches(R"({"a":{"b":2}})"));
  EXPECT_TRUE(m->Matches(R"({"a":"s"})"));
  EXPECT_FALSE(m->Matches(R"({"a":true})"));
  m = Compile(k2019, body(false));
  ASSERT_NE(m, nullptr);
  EXPECT_FALSE(m->Matches(R"({"a":1})"));
  EXPECT_FALSE(m->Matches(R"({"a":{"b":2}})"));
  EXPECT_TRUE(m->Matches(R"({"a":{"b":"s"}})"));
  EXPECT_TRUE(m->Matches("1"));
}

TEST(SchemaDrafts, Draft03IsRefusedNamingSchema) {
  auto p = constrain::CompileConstraint(
      LLM_CONSTRAINT_JSON_SCHEMA, R"({"$schema":"http://json-schema.org/draft-03/schema#","properties":{"a":{"required":true}}})", {});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), LLM_ERR_UNSUPPORTED);
  EXPECT_NE(p.status().message().find("$schema"), std::string::npos) << p.status().message();
  // An unknown (custom) metaschema reads as 2020-12.
  p = constrain::CompileConstraint(LLM_CONSTRAINT_JSON_SCHEMA,
                                   R"({"$schema":"https://example.test/my-dialect","type":"integer","const":3})", {});
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_FALSE(constrain::Matcher(*p).Matches("4"));
}

}  // namespace
}  // namespace llm
