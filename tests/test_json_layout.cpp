// Bounded whitespace in JSON outputs (issue 29, src/constrain/json_layout.h):
// the layouts real writers produce pass and the runaway ones do not; the
// engine's masks (ConstraintState) are exact against a brute force whose
// layout reference (support/json_layout_ref.h) reads the whole output on
// its own; LLM_WHITESPACE_FREE
// gives any JSON whitespace back.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "constrain/constraint.h"
#include "constrain/json_layout.h"
#include "constrain/token_trie.h"
#include "llm.h"
#include "support/json_layout_ref.h"

namespace llm::constrain {
namespace {

bool Bit(const std::vector<uint64_t>& m, int32_t t) { return (m[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1; }

using test::JsonLayoutOk;

TEST(JsonLayout, WritersLayoutsPassRunawayOnesDoNot) {
  auto schema = CompileConstraint(LLM_CONSTRAINT_JSON_OBJECT, "", {});
  ASSERT_TRUE(schema.ok());
  for (const char* good : {
           R"({"a":[1,{"b":null}],"c":"x  y\n"})",                        // compact; blanks inside strings are text
           R"({"a": [1, {"b": null}], "c": "x"})",                          // ", " and ": "
           "{\n  \"a\": [\n    1,\n    {\n      \"b\": null\n    }\n  ]\n}",  // indent=2
           "{\n    \"a\": [\n        1\n    ]\n}",                           // indent=4
           "{ \"a\" : 1 }"}) {
    EXPECT_TRUE(JsonLayoutOk(good)) << good;
    JsonLayout l;
    EXPECT_TRUE(l.Accept(good)) << good;
    Matcher m(*schema);
    EXPECT_TRUE(m.Matches(good)) << good;
  }
  for (const char* bad : {"{\t\"a\": 1}", "{\"a\":  1}", "{\r\n\"a\": 1}", "{\n\n\"a\": 1}", "{\n     \"a\": 1}",
                          "{\"a\": [\n          1]}", "{ \n\"a\": 1}"}) {
    EXPECT_FALSE(JsonLayoutOk(bad)) << bad;
    JsonLayout l;
    EXPECT_FALSE(l.Accept(bad)) << bad;
  }
}

TEST(JsonLayout, FreeWhitespaceGivesAnyBlanksBack) {
  const std::string text = "{\t\"a\" :\r\n      [ 1 ,\n\n\n 2 ]   }";
  for (int32_t kind : {LLM_CONSTRAINT_JSON_OBJECT, LLM_CONSTRAINT_JSON_SCHEMA}) {
    const std::string schema = R"({"type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}}}})";
    auto bounded = CompileConstraint(kind, schema, {}, LLM_WHITESPACE_BOUNDED);
    auto free_ws = CompileConstraint(kind, schema, {}, LLM_WHITESPACE_FREE);
    ASSERT_TRUE(bounded.ok() && free_ws.ok());
    EXPECT_TRUE((*bounded)->json_layout);
    EXPECT_FALSE((*free_ws)->json_layout);
    Matcher mb(*bounded), mf(*free_ws);
    EXPECT_FALSE(mb.Matches(text));
    EXPECT_TRUE(mf.Matches(text)) << kind;
    EXPECT_TRUE(mf.Matches(R"({"a":[1,2]})"));
  }
  auto bad = CompileConstraint(LLM_CONSTRAINT_JSON_OBJECT, "", {}, 7);
  EXPECT_EQ(bad.status().code(), LLM_ERR_INVALID_ARGUMENT);
  auto gbnf = CompileConstraint(LLM_CONSTRAINT_GRAMMAR, "root ::= \"a\" [ \\t]*", {});
  ASSERT_TRUE(gbnf.ok());
  EXPECT_FALSE((*gbnf)->json_layout) << "only JSON kinds have a layout";
  EXPECT_FALSE(WithFreeWhitespace("root ::= \"a\"\n").ok());
}

// A vocabulary rich in blanks: indentation of every width, tabs, CRs,
// blank lines, blanks after punctuation and quotes.
std::shared_ptr<const TokenTrie> BlankVocabulary() {
  std::vector<std::string> pieces = {"</s>"};
  for (int b = 0x20; b < 0x7F; ++b) pieces.push_back(std::string(1, static_cast<char>(b)));
  for (const char* p : {"\n", "\t", "\r\n", "\n\n", "  ", "   ", "    ", "\n  ", "\n    ", "\n      ", "\n        ",
                        "\n          ", "\n\t", ", ", ",\n", ",\n  ", ",\n    ", ": ", "\": ", "\",\n", "\" ", "{\n",
                        "[\n", "{\n  \"", "\n}", "\n]", " }", " ]", "a b", "\"a\"", "\"b\"", "1,", " 1", "null", "true"})
    pieces.push_back(p);
  std::vector<uint8_t> excluded(pieces.size(), 0);
  excluded[0] = 1;
  return std::make_shared<TokenTrie>(pieces, excluded, std::vector<int32_t>{0});
}

// Every token's bit against the brute force (the matcher alive after its
// bytes, and the layout reference on the whole output with it), on random
// walks; EOG iff complete.
TEST(JsonLayout, MasksExactAgainstBruteForce) {
  auto trie = BlankVocabulary();
  const std::string schema = R"({"type":"object","properties":{"a":{"type":"array","items":{"anyOf":[{"type":"integer"},
      {"type":"object","properties":{"b":{"type":"string","maxLength":5},"c":{"type":"array","items":{"type":"boolean"}}},"additionalProperties":false}]}},
      "d":{"type":"string"}},"required":["a"],"additionalProperties":false})";
  auto program = CompileConstraint(LLM_CONSTRAINT_JSON_SCHEMA, schema, {});
  ASSERT_TRUE(program.ok()) << program.status().message();
  ASSERT_TRUE((*program)->json_layout);
  std::mt19937 rng(7);
  int checked = 0, refused_by_layout = 0;
  for (int w = 0; w < 60; ++w) {
    ConstraintState cs(*program, trie, 0);
    Matcher ref(*program);
    std::vector<int32_t> history;
    std::string out;
    for (int step = 0; step < 60; ++step) {
      const std::vector<uint64_t> mask = cs.Mask(history);
      const Matcher::StateId s = ref.StepBytes(ref.Initial(), out);
      std::vector<int32_t> allowed;
      for (int32_t t = 1; t < trie->n_vocab(); ++t) {
        const bool alive = ref.StepBytes(s, trie->piece(t)) != Matcher::kDead;
        const bool expect = alive && JsonLayoutOk(out + trie->piece(t));
        refused_by_layout += alive && !expect;
        ASSERT_EQ(Bit(mask, t), expect) << "token [" << trie->piece(t) << "] after [" << out << "]";
        ++checked;
        if (expect) allowed.push_back(t);
      }
      ASSERT_EQ(Bit(mask, 0), ref.IsAccepting(s) || allowed.empty());
      if (allowed.empty() || (ref.IsAccepting(s) && rng() % 6 == 0)) break;
      // Lean on blank tokens so the walks test the layout.
      int32_t t = allowed[rng() % allowed.size()];
      for (int k = 0; k < 2 && trie->piece(t).find_first_of(" \n") == std::string::npos; ++k) t = allowed[rng() % allowed.size()];
      history.push_back(t);
      out += trie->piece(t);
    }
  }
  EXPECT_GT(refused_by_layout, 1000) << "the walks met the rule";
  std::printf("layout: %d token bits checked, %d refused by the layout alone\n", checked, refused_by_layout);
}

}  // namespace
}  // namespace llm::constrain
