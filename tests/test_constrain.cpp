// The constraint engine (issue 20, src/constrain/): the GBNF dialect and its
// errors, the regex compiler against PyPI `regex` (tests/data/constrain/
// regex_vectors.txt, tools/gen_regex_vectors.py), random grammars against an
// independent reference recogniser, hostile inputs, rollback, and the
// token-level mask against a brute force over real vocabularies.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "constrain/byte_program.h"
#include "constrain/choice.h"
#include "constrain/constraint.h"
#include "constrain/gbnf_parser.h"
#include "constrain/json_object.h"
#include "constrain/mask_cache.h"
#include "constrain/matcher.h"
#include "constrain/regex_compiler.h"
#include "constrain/token_trie.h"
#include "llm.h"
#include "model/model.h"
#include "support/real_models.h"
#include "support/test_paths.h"
#include "tokenizer/tokenizer.h"

namespace llm::constrain {
namespace {

Matcher MakeMatcher(const StatusOr<Grammar>& g) {
  EXPECT_TRUE(g.ok()) << g.status().message();
  auto p = LowerToBytes(g.value());
  EXPECT_TRUE(p.ok()) << p.status().message();
  return Matcher(*p);
}

Matcher Gbnf(std::string_view text) { return MakeMatcher(ParseGrammar(text)); }

std::string ErrorOf(std::string_view grammar) {
  auto g = ParseGrammar(grammar);
  return g.ok() ? std::string("(parsed)") : g.status().message();
}

// ------------------------------------------------------------ the dialect

TEST(Gbnf, LiteralsClassesGroupsAndRepetition) {
  Matcher m = Gbnf(R"(
# a comment
root ::= greeting " " name ("!" | "?")?   # trailing comment
greeting ::= "hi" | "hello"
name ::= [A-Z] [a-z]{1,3}
)");
  EXPECT_TRUE(m.Matches("hi Bob"));
  EXPECT_TRUE(m.Matches("hello Anna!"));
  EXPECT_TRUE(m.Matches("hi Al?"));
  EXPECT_FALSE(m.Matches("hi Alfred"));
  EXPECT_FALSE(m.Matches("hi bob"));
  EXPECT_FALSE(m.Matches("hi B"));
  EXPECT_FALSE(m.Matches("hey Bob"));
}

TEST(Gbnf, MultiLineRulesEscapesNegationDotAndCounts) {
  Matcher m = Gbnf(
      "root ::=\n"
      "  \"\\x41\\u00e9\\n\" item\n"
      "  | \"[\" [^\\]\\\\]* \"]\"\n"
      "  | . . \"\\t\"\n"
      "item ::= \"x\"{2} \"y\"{1,} \"z\"{,2}\n");
  EXPECT_TRUE(m.Matches("A\xc3\xa9\nxxy"));
  EXPECT_TRUE(m.Matches("A\xc3\xa9\nxxyyyzz"));
  EXPECT_FALSE(m.Matches("A\xc3\xa9\nxxyzzz"));
  EXPECT_FALSE(m.Matches("A\xc3\xa9\nxy"));
  EXPECT_TRUE(m.Matches("[ab c]"));
  EXPECT_FALSE(m.Matches("[a]b]"));
  EXPECT_TRUE(m.Matches("\xe2\x82\xac\xf0\x9f\x98\x80\t")) << "'.' is one code point, any length in UTF-8";
  EXPECT_FALSE(m.Matches("\xe2\x82\t")) << "a truncated character is not a code point";
}

TEST(Gbnf, UnicodeClassesMatchCodePointsNotBytes) {
  Matcher m = Gbnf("root ::= [\xce\xb1-\xcf\x89]+ [^a-z\xc3\xa9]");  // Greek lower-case, then not [a-zé]
  EXPECT_TRUE(m.Matches("\xce\xb1\xce\xb2Z"));
  EXPECT_FALSE(m.Matches("\xce\xb1\xc3\xa9"));
  EXPECT_TRUE(m.Matches("\xcf\x89\xf0\x9f\x98\x80"));
  EXPECT_FALSE(m.Matches("\xce\xb1\xce"));
  // A prefix ending mid-character is alive; a wrong continuation byte is not.
  EXPECT_NE(m.StepBytes(m.Initial(), "\xce"), Matcher::kDead);
  EXPECT_EQ(m.StepBytes(m.Initial(), "\xce\x41"), Matcher::kDead);
}

TEST(Gbnf, ErrorsNameLineAndColumn) {
  EXPECT_NE(ErrorOf("root ::= \"abc").find("line 1:10"), std::string::npos) << ErrorOf("root ::= \"abc");
  EXPECT_NE(ErrorOf("root ::= a\na ::= [b-a]").find("line 2:9"), std::string::npos) << ErrorOf("root ::= a\na ::= [b-a]");
  EXPECT_NE(ErrorOf("root ::= x").find("'x' is used but never defined"), std::string::npos);
  EXPECT_NE(ErrorOf("a ::= \"x\"").find("no rule 'root'"), std::string::npos);
  EXPECT_NE(ErrorOf("root ::= \"a\"\nroot ::= \"b\"").find("defined twice"), std::string::npos);
  EXPECT_NE(ErrorOf("root ::= (\"a\"").find("line 1:10"), std::string::npos) << ErrorOf("root ::= (\"a\"");
  EXPECT_NE(ErrorOf("root ::= \"\\q\"").find("unknown escape"), std::string::npos);
  EXPECT_NE(ErrorOf("root := \"a\"").find("expected '::='"), std::string::npos);
  EXPECT_NE(ErrorOf("root ::= * \"a\"").find("follows nothing"), std::string::npos);
  EXPECT_NE(ErrorOf("root ::= \"a\"{3,2}").find("n < m"), std::string::npos);
  EXPECT_NE(ErrorOf("root ::= \"\xff\"").find("UTF-8"), std::string::npos);
}

// Helper rules (repetitions) never take the name of a rule defined further
// down: "a-1" below is the user's rule, not a's repetition (issue 29: the
// schema compiler names rules "x", "x-2", ... and real schemas made them meet).
TEST(Gbnf, HelperRulesNeverShadowLaterRules) {
  Matcher m = Gbnf("root ::= a b\na ::= \"x\"*\nb ::= a-1 a-2\na-1 ::= \"y\"\na-2 ::= \"z\"\n");
  EXPECT_TRUE(m.Matches("xxyz"));
  EXPECT_TRUE(m.Matches("yz"));
  EXPECT_FALSE(m.Matches("xx"));
}

TEST(Gbnf, LeftRecursionIsRejectedClearly) {
  const std::string e = ErrorOf("root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= [0-9]");
  EXPECT_NE(e.find("left-recursive"), std::string::npos) << e;
  EXPECT_NE(e.find("expr -> expr"), std::string::npos) << e;
  EXPECT_NE(ErrorOf("root ::= a \"x\"\na ::= \"\"? root").find("left-recursive"), std::string::npos)
      << "left recursion through a nullable prefix";
  EXPECT_NE(ErrorOf("root ::= (\"a\"?)*").find("empty string"), std::string::npos);
  // Right recursion is fine, and deep inputs do not deepen the stacks.
  Matcher m = Gbnf("root ::= \"(\" root \")\" | \"x\"");
  EXPECT_TRUE(m.Matches("((((x))))"));
  EXPECT_FALSE(m.Matches("((((x)))"));
}

TEST(Gbnf, HostileGrammarsHitLimitsNotTheMachine) {
  EXPECT_NE(ErrorOf("root ::= \"a\"{100000}").find("limit"), std::string::npos) << ErrorOf("root ::= \"a\"{100000}");
  std::string wide = "root ::= (";
  for (int i = 0; i < 600; ++i) wide += "\"a\" ";
  EXPECT_NE(ErrorOf(wide + "){1000}").find("too large"), std::string::npos) << ErrorOf(wide + "){1000}");
  // Nested counts stay compact (each level is one rule of references).
  Matcher nested = Gbnf("root ::= ((\"a\"{100}){100}){10}");
  EXPECT_TRUE(nested.Matches(std::string(100000, 'a')));
  EXPECT_FALSE(nested.Matches(std::string(99999, 'a')));
  EXPECT_NE(ErrorOf("root ::= " + std::string(5000, '(') + "\"a\"" + std::string(5000, ')')).find("nesting"),
            std::string::npos);
  std::string many = "root ::= r0\n";
  for (int i = 0; i < 30000; ++i) many += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + " \"a\"\n";
  EXPECT_NE(ErrorOf(many).find("rules"), std::string::npos) << ErrorOf(many).substr(0, 200);
  // A highly ambiguous grammar: the stack set stays bounded by dedupe.
  Matcher m = Gbnf("root ::= x*\nx ::= \"a\" | \"a\" \"a\" | \"a\" \"a\" \"a\" | \"a\"+");
  EXPECT_TRUE(m.Matches(std::string(2000, 'a')));
  EXPECT_LT(m.arena_size(), 1000u);
}

TEST(Gbnf, RollbackRestoresEarlierStatesExactly) {
  Matcher m = Gbnf("root ::= \"{\" (\"ab\" | \"ac\")* \"}\"");
  ASSERT_TRUE(m.Accept("{"));
  const Matcher::StateId after_brace = m.Current();
  ASSERT_TRUE(m.Accept("a"));
  ASSERT_TRUE(m.Accept("bac"));
  EXPECT_FALSE(m.Accept("x"));
  EXPECT_EQ(m.n_accepted(), 3u);
  m.Rollback(2);
  EXPECT_EQ(m.Current(), after_brace);
  ASSERT_TRUE(m.Accept("}"));
  EXPECT_TRUE(m.IsAccepting(m.Current()));
  EXPECT_FALSE(m.CanContinue(m.Current()));
}

TEST(Choice, ExactlyOneOfTheStrings) {
  const std::vector<std::string> c = {"yes", "no", "no way", "", "\xc3\xa9t\xc3\xa9"};
  Matcher m = MakeMatcher(CompileChoices(c));
  for (const auto& s : c) EXPECT_TRUE(m.Matches(s)) << s;
  EXPECT_FALSE(m.Matches("ye"));
  EXPECT_FALSE(m.Matches("no wa"));
  EXPECT_FALSE(m.Matches("yesno"));
  EXPECT_FALSE(CompileChoices({}).ok());
  const std::vector<std::string> bad = {"ok", "\xff"};
  auto r = CompileChoices(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("choices[1]"), std::string::npos);
}

TEST(JsonObject, AcceptsObjectsRejectsTheRest) {
  Matcher m = Gbnf(JsonObjectGrammar());
  for (const char* ok : {"{}", "{ }", "{\"a\":1}", "{\"a\": [1, 2.5e-3, -0, true, null, {\"b\": \"\\u00e9\\n\"}]}",
                         "{\"k\": \"\xe2\x82\xac\"}", "{\n  \"x\": {}\n}"}) {
    EXPECT_TRUE(m.Matches(ok)) << ok;
  }
  for (const char* bad : {"[]", "{", "{\"a\"}", "{\"a\":01}", "{\"a\":1,}", "{'a':1}", "{\"a\":\"\x01\"}", "{} ",
                          "{\"a\":tru}", "\"x\""}) {
    EXPECT_FALSE(m.Matches(bad)) << bad;
  }
}

// ------------------------------------------------------------ regex vs PyPI regex

std::vector<std::string> AllStrings(const std::string& alphabet, size_t max_len) {
  std::vector<std::string> out{""};
  size_t from = 0;
  for (size_t len = 1; len <= max_len; ++len) {
    const size_t to = out.size();
    for (size_t i = from; i < to; ++i)
      for (char c : alphabet) out.push_back(out[i] + c);
    from = to;
  }
  return out;
}

bool HexBit(const std::string& hex, size_t i) {
  const size_t digit = i / 4;
  if (digit >= hex.size()) return false;
  const char c = hex[hex.size() - 1 - digit];
  const int v = c <= '9' ? c - '0' : c - 'a' + 10;
  return (v >> (i % 4)) & 1;
}

TEST(Regex, MatchesExactlyWhatPyPiRegexFullmatches) {
  const std::string data = test::ReadFile(test::RepoDir() + "/tests/data/constrain/regex_vectors.txt");
  const std::vector<std::string> strings = AllStrings("abc1 ", 4);
  int n_regex = 0;
  size_t pos = 0;
  while (pos < data.size()) {
    size_t eol = data.find('\n', pos);
    if (eol == std::string::npos) eol = data.size();
    const std::string line = data.substr(pos, eol - pos);
    pos = eol + 1;
    const size_t tab = line.find('\t');
    ASSERT_NE(tab, std::string::npos);
    const std::string pattern = line.substr(0, tab), hex = line.substr(tab + 1);
    auto g = CompileRegex(pattern);
    ASSERT_TRUE(g.ok()) << pattern << ": " << g.status().message();
    Matcher m = MakeMatcher(g);
    for (size_t i = 0; i < strings.size(); ++i) {
      ASSERT_EQ(m.Matches(strings[i]), HexBit(hex, i)) << "regex /" << pattern << "/ on '" << strings[i] << "'";
    }
    ++n_regex;
  }
  EXPECT_GE(n_regex, 300);
}

TEST(Regex, UnicodeEscapesAndErrorsWithOffsets) {
  Matcher m = MakeMatcher(CompileRegex("\\d{3}-[\\u00e0-\\u00ff]+\\.\\x41?"));
  EXPECT_TRUE(m.Matches("123-\xc3\xa0\xc3\xbf."));
  EXPECT_TRUE(m.Matches("123-\xc3\xa0.A"));
  EXPECT_FALSE(m.Matches("123-a."));
  auto err = [](const char* p) {
    auto g = CompileRegex(p);
    return g.ok() ? std::string("(compiled)") : g.status().message();
  };
  EXPECT_NE(err("ab(c").find("offset 2"), std::string::npos) << err("ab(c");
  EXPECT_NE(err("a)").find("offset 1"), std::string::npos) << err("a)");
  EXPECT_NE(err("[a-").find("offset 0"), std::string::npos) << err("[a-");
  EXPECT_NE(err("(a)\\1").find("backreferences"), std::string::npos);
  EXPECT_NE(err("(?=a)").find("lookaround"), std::string::npos);
  EXPECT_NE(err("a**+").find("possessive"), std::string::npos) << err("a**+");
  EXPECT_NE(err("x{99999}").find("limit"), std::string::npos);
  EXPECT_NE(err("[z-a]").find("out of order"), std::string::npos);
  EXPECT_TRUE(CompileRegex("a{,").ok()) << "an incomplete brace is a literal, as in Python";
}

// ------------------------------------------------------------ random grammars vs a reference

// An independent recogniser over the code-point IR: the end positions a
// rule can reach from i, memoised; terminates because left recursion is
// rejected (every recursive call past the first consumed input).
class Reference {
 public:
  Reference(const Grammar& g, const std::string& s) : g_(g), s_(s) {}
  bool Matches() { return Ends(g_.root, 0).count(s_.size()) != 0; }

 private:
  const std::set<size_t>& Ends(int32_t rule, size_t i) {
    auto key = std::make_pair(rule, i);
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    std::set<size_t> out;
    for (const Alternative& a : g_.rules[static_cast<size_t>(rule)].alts) {
      std::set<size_t> cur{i};
      for (const Element& e : a) {
        std::set<size_t> next;
        for (size_t p : cur) {
          if (e.kind == Element::Kind::kChars) {
            if (p < s_.size()) {
              const uint32_t c = static_cast<unsigned char>(s_[p]);
              for (const CodeRange& r : e.ranges)
                if (c >= r.lo && c <= r.hi) next.insert(p + 1);
            }
          } else {
            const std::set<size_t>& sub = Ends(e.rule, p);
            next.insert(sub.begin(), sub.end());
          }
        }
        cur = std::move(next);
      }
      out.insert(cur.begin(), cur.end());
    }
    return memo_[key] = std::move(out);
  }
  const Grammar& g_;
  const std::string& s_;
  std::map<std::pair<int32_t, size_t>, std::set<size_t>> memo_;
};

std::string RandomExpr(std::mt19937& rng, int depth, int n_rules) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  std::string out;
  const int items = 1 + pick(3);
  for (int k = 0; k < items; ++k) {
    std::string item;
    switch (pick(depth < 2 ? 7 : 5)) {
      case 0: item = std::string("\"") + "abc"[pick(3)] + "\""; break;
      case 1: item = std::string("\"") + "abc"[pick(3)] + "abc"[pick(3)] + "\""; break;
      case 2: item = pick(2) ? "[a-b]" : "[^a]"; break;
      case 3: item = "r" + std::to_string(pick(n_rules)); break;
      case 4: item = pick(4) == 0 ? "\"\"" : "[bc]"; break;
      default: item = "(" + RandomExpr(rng, depth + 1, n_rules) + " | " + RandomExpr(rng, depth + 1, n_rules) + ")";
    }
    const char* quant[] = {"", "", "", "*", "+", "?", "{2}", "{0,2}", "{1,}"};
    out += item + quant[pick(9)] + " ";
  }
  return out;
}

TEST(RandomGrammars, MatcherAgreesWithTheReferenceOnEveryShortString) {
  std::mt19937 rng(20);
  const std::vector<std::string> strings = AllStrings("abc", 6);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  const int n_grammars = 60;
#else
  const int n_grammars = 300;
#endif
  int tested = 0, rejected = 0, n_over_limit = 0;
  for (int t = 0; tested < n_grammars; ++t) {
    const int n_rules = 1 + static_cast<int>(rng() % 4);
    std::string text = "root ::= r0\n";
    for (int r = 0; r < n_rules; ++r) {
      text += "r" + std::to_string(r) + " ::= " + RandomExpr(rng, 0, n_rules);
      if (rng() % 2) text += "| " + RandomExpr(rng, 0, n_rules);
      text += "\n";
    }
    auto g = ParseGrammar(text);
    if (!g.ok()) {
      ASSERT_NE(g.status().message().find("left-recursive"), std::string::npos) << text << g.status().message();
      ++rejected;
      continue;
    }
    Matcher m = MakeMatcher(g);
    bool over_limit = false;
    for (const std::string& s : strings) {
      Reference ref(*g, s);
      const bool got = m.Matches(s);
      if (m.limit_hit()) {
        // Exponentially ambiguous: the stack set outgrew kMaxStacksPerState
        // (a documented limit of the stack-set matcher). Rejecting is the
        // only allowed error.
        over_limit = true;
        ASSERT_TRUE(!got || ref.Matches());
        continue;
      }
      ASSERT_EQ(got, ref.Matches()) << "grammar:\n" << text << "string '" << s << "'";
    }
    n_over_limit += over_limit;
    ++tested;
  }
  EXPECT_GT(rejected, 0) << "the generator should also exercise left-recursion rejection";
  EXPECT_LT(n_over_limit, n_grammars / 20) << "few random grammars are ambiguous enough to hit the stack limit";
}

// ------------------------------------------------------------ token masks vs brute force

bool Bit(const std::vector<uint64_t>& mask, int32_t t) { return (mask[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1; }

// From random reachable states (a random walk that samples allowed tokens),
// every token is allowed iff its bytes keep the matcher alive, EOG iff the
// output is complete.
void CheckMasksByBruteForce(const Tokenizer& tok, const std::shared_ptr<const ByteProgram>& program, int walks,
                            int steps, uint32_t seed) {
  auto trie = TokenTrie::FromTokenizer(tok);
  std::mt19937 rng(seed);
  std::vector<uint64_t> mask;
  for (int w = 0; w < walks; ++w) {
    Matcher m(program);
    MaskCache cache(*trie);  // the engine's path: folded states, fix-ups
    for (int step = 0; step < steps; ++step) {
      const Matcher::StateId s = m.Current();
      trie->ComputeMask(m, s, &mask);
      ASSERT_TRUE(cache.Get(m, s) == mask) << "the mask cache differs from the trie walk at walk " << w << " step "
                                           << step;
      std::vector<int32_t> allowed;
      for (int32_t t = 0; t < tok.n_vocab(); ++t) {
        if (!trie->IsEog(t) && trie->in_trie(t) && m.StepBytes(s, trie->piece(t)) != Matcher::kDead) allowed.push_back(t);
      }
      for (int32_t t = 0, k = 0; t < tok.n_vocab(); ++t) {
        bool expect = false;
        if (k < static_cast<int32_t>(allowed.size()) && allowed[static_cast<size_t>(k)] == t) {
          expect = true;
          ++k;
        } else if (trie->IsEog(t)) {
          // Complete output; or a dead end, where EOG lets the sequence end.
          expect = m.IsAccepting(s) || allowed.empty();
        }
        ASSERT_EQ(Bit(mask, t), expect) << "token " << t << " '" << trie->piece(t) << "' at walk " << w << " step "
                                        << step;
      }
      if (!m.CanContinue(s)) {
        ASSERT_TRUE(allowed.empty());
        break;
      }
      ASSERT_FALSE(allowed.empty());
      ASSERT_TRUE(m.Accept(trie->piece(allowed[rng() % allowed.size()])));
    }
  }
}

std::shared_ptr<const ByteProgram> Compile(int kind, const char* text) {
  auto p = CompileConstraint(kind, text, {});
  EXPECT_TRUE(p.ok()) << p.status().message();
  return *p;
}

TEST(TokenMask, ExactOnStories260K) {
  auto model = Model::Load((test::RepoDir() + "/models/stories260K-f32.gguf").c_str());
  ASSERT_TRUE(model.ok()) << model.status().message();
  const Tokenizer& tok = *(*model)->tokenizer;
  CheckMasksByBruteForce(tok, Compile(LLM_CONSTRAINT_JSON_OBJECT, ""), 4, 40, 1);
  CheckMasksByBruteForce(tok, Compile(LLM_CONSTRAINT_REGEX, "(Once|One day), [a-z ]{3,20}\\.( [A-Z][a-z]+)*"), 4, 30, 2);
  CheckMasksByBruteForce(tok, Compile(LLM_CONSTRAINT_GRAMMAR, "root ::= \"\xc3\xa9t\xc3\xa9 \" [0-9]+ | \"x\""), 4, 10, 3);
}

TEST(TokenMask, ExactOnSmolLM2) {
  LLM_LOAD_REAL_MODEL_OR_SKIP(model, test::kSmolLM2);
  const Tokenizer& tok = *model->tokenizer;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  const int walks = 1;
#else
  const int walks = 3;
#endif
  CheckMasksByBruteForce(tok, Compile(LLM_CONSTRAINT_JSON_OBJECT, ""), walks, 25, 4);
  CheckMasksByBruteForce(tok, Compile(LLM_CONSTRAINT_REGEX, "[A-Z][a-z]+ (is|was) \\d{1,4}( years)?\\."), walks, 12, 5);
  // A JSON Schema (issue 20's benchmark case): strings in several fields,
  // numbers, arrays: states deep in nested rules.
  CheckMasksByBruteForce(tok,
                         Compile(LLM_CONSTRAINT_JSON_SCHEMA,
                                 R"({"type":"object","properties":{"name":{"type":"string"},"tags":{"type":"array",)"
                                 R"("items":{"type":"string"}},"n":{"type":"integer"},"x":{"type":"number"}},)"
                                 R"("required":["name","tags","n"]})"),
                         walks, 30, 6);
}

// The mask cache folds states deep inside a counted repetition onto one
// (mask_cache.h). Step through every count of repetitions whose bytes make
// up SmolLM2's longest tokens (runs of '#', '=', '-', spaces up to 81 bytes),
// one byte at a time, and compare each state's cached mask with the trie
// walk from that state, which TokenMask.ExactOnSmolLM2 checks by brute force.
std::string Repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

TEST(TokenMask, FoldedRepetitionsExactAtEveryCount) {
  LLM_LOAD_REAL_MODEL_OR_SKIP(model, test::kSmolLM2);
  auto trie = TokenTrie::FromTokenizer(*model->tokenizer);
  struct Case {
    int kind;
    const char* text;
    std::string walk;  // the bytes stepped through, one state after each
  };
  const std::vector<Case> cases = {
      {LLM_CONSTRAINT_REGEX, "[#=a-z -]{0,90}\\.", std::string(90, '#')},
      {LLM_CONSTRAINT_REGEX, "(ab){2,40}c", Repeat("ab", 40)},
      {LLM_CONSTRAINT_REGEX, "-{60}x", std::string(60, '-')},
      {LLM_CONSTRAINT_JSON_SCHEMA, R"({"type":"string","minLength":20,"maxLength":70})", "\"" + std::string(70, '=')},
      // Fewer required copies than the fold level: the copy folded onto is
      // the first required one, not one that does not exist.
      {LLM_CONSTRAINT_JSON_SCHEMA, R"({"type":"string","minLength":13,"maxLength":60})", "\"" + std::string(60, 'a')},
      {LLM_CONSTRAINT_REGEX, "[a-z#=]{11,12}[a-z#=]{14}\\.", std::string(26, '#')},
      {LLM_CONSTRAINT_JSON_SCHEMA,
       R"({"type":"object","properties":{"a":{"type":"array","items":{"type":"string","maxLength":50},"maxItems":4}},"required":["a"]})",
       "{\"a\":[\"" + std::string(50, ' ') + "\",\"" + std::string(45, '#')},
  };
  std::vector<uint64_t> walked;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    auto program = Compile(c.kind, c.text);
    ASSERT_NE(program, nullptr);
    ASSERT_FALSE(program->chains.empty());
    Matcher m(program);
    MaskCache cache(*trie);
    Matcher::StateId s = m.Initial();
    for (size_t i = 0; i <= c.walk.size(); ++i) {
      const std::vector<uint64_t> cached = cache.Get(m, s);
      trie->ComputeMask(m, s, &walked);
      ASSERT_TRUE(cached == walked) << "after " << i << " bytes";
      if (i == c.walk.size()) break;
      s = m.Step(s, static_cast<uint8_t>(c.walk[i]));
      ASSERT_NE(s, Matcher::kDead) << "byte " << i;
    }
    EXPECT_GT(cache.stats().folded, 0u) << "no state was folded: the test does not reach the folding path";
  }
}

// The same on a vocabulary of every string over {a, #, x} up to 4 bytes,
// where every run length is a token: the fold level sits at its floor and
// each boundary of the folding argument (a required count, an optional one,
// a state in the middle of a copy whose rest can match "") is met by some
// token that is allowed on one side of it and not on the other.
TEST(TokenMask, FoldedRepetitionsExactOnEveryShortToken) {
  std::vector<std::string> pieces;
  for (int len = 1; len <= 4; ++len) {
    int n = 1;
    for (int i = 0; i < len; ++i) n *= 3;
    for (int v = 0; v < n; ++v) {
      std::string p;
      for (int i = 0, x = v; i < len; ++i, x /= 3) p += "a#x"[x % 3];
      pieces.push_back(p);
    }
  }
  pieces.push_back("");  // the end-of-generation token
  const int32_t eog = static_cast<int32_t>(pieces.size()) - 1;
  std::vector<uint8_t> excluded(pieces.size(), 0);
  const TokenTrie trie(pieces, excluded, {eog});
  std::vector<uint64_t> walked;
  for (const char* re : {"(a#?){12}x", "(a#?){0,12}x", "(a#?){3,14}x", "(#?a){2,12}x", "[a#]{0,15}x"}) {
    SCOPED_TRACE(re);
    auto program = Compile(LLM_CONSTRAINT_REGEX, re);
    ASSERT_NE(program, nullptr);
    uint64_t folded = 0;
    for (const std::string walk : {"a#a#a#a#a#a#a#a#a#a#", "aaaaaaaaaaaaaa", "a#aa#aaa#aaaa#", "#a#a#a#a#a#a#a"}) {
      Matcher m(program);
      MaskCache cache(trie);
      Matcher::StateId s = m.Initial();
      for (size_t i = 0; i <= walk.size() && s != Matcher::kDead; ++i) {
        const std::vector<uint64_t> cached = cache.Get(m, s);
        trie.ComputeMask(m, s, &walked);
        ASSERT_TRUE(cached == walked) << "walk " << walk << " after " << i << " bytes";
        if (i < walk.size()) s = m.Step(s, static_cast<uint8_t>(walk[i]));
      }
      folded += cache.stats().folded;
    }
    EXPECT_GT(folded, 0u);
  }
}

// Every schema of the suite: random walks of allowed SmolLM2 tokens, the
// cached (folded) mask equal to the trie walk's at every step.
TEST(TokenMask, CacheEqualsWalkOnTheSchemaSuite) {
  LLM_LOAD_REAL_MODEL_OR_SKIP(model, test::kSmolLM2);
  auto trie = TokenTrie::FromTokenizer(*model->tokenizer);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  const int steps = 12, every = 4;  // a quarter of the schemas
#else
  const int steps = 48, every = 1;
#endif
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(test::RepoDir() + "/tests/data/json_schemas")) {
    if (e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 40u);
  std::mt19937 rng(9);
  std::vector<uint64_t> walked;
  for (size_t f = 0; f < files.size(); f += every) {
    SCOPED_TRACE(files[f].filename().string());
    std::ifstream in(files[f]);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto program = Compile(LLM_CONSTRAINT_JSON_SCHEMA, text.c_str());
    ASSERT_NE(program, nullptr);
    Matcher m(program);
    MaskCache cache(*trie);
    Matcher::StateId s = m.Initial();
    for (int step = 0; step < steps && m.CanContinue(s); ++step) {
      const std::vector<uint64_t> cached = cache.Get(m, s);
      trie->ComputeMask(m, s, &walked);
      ASSERT_TRUE(cached == walked) << "step " << step;
      std::vector<int32_t> allowed;
      for (int32_t t = 0; t < trie->n_vocab(); ++t) {
        if (Bit(walked, t) && !trie->IsEog(t)) allowed.push_back(t);
      }
      if (allowed.empty()) break;
      s = m.StepBytes(s, trie->piece(allowed[rng() % allowed.size()]));
      ASSERT_NE(s, Matcher::kDead);
    }
  }
}

TEST(ConstraintState, SyncsToHistoryRollsBackAndTrimsDrafts) {
  auto model = Model::Load((test::RepoDir() + "/models/stories260K-f32.gguf").c_str());
  ASSERT_TRUE(model.ok());
  const Tokenizer& tok = *(*model)->tokenizer;
  auto trie = TokenTrie::FromTokenizer(tok);
  auto program = Compile(LLM_CONSTRAINT_GRAMMAR, "root ::= \"ab\" \"c\"* \"d\"");
  // One token per byte (the vocabulary has byte tokens), so the test does not
  // depend on how the tokenizer would merge them.
  auto ids = [&](const char* s) {
    std::vector<int32_t> out;
    for (const char* c = s; *c; ++c) {
      int32_t id = -1;
      for (int32_t t = 0; t < tok.n_vocab() && id < 0; ++t)
        if (trie->in_trie(t) && trie->piece(t) == std::string(1, *c)) id = t;
      EXPECT_GE(id, 0) << *c;
      out.push_back(id);
    }
    return out;
  };
  std::vector<int32_t> history = {1, 2, 3};  // the prompt
  ConstraintState cs(program, trie, 3);
  EXPECT_FALSE(cs.Complete(history));
  std::vector<int32_t> abcc = ids("abcc");
  std::vector<int32_t> h2 = history;
  h2.insert(h2.end(), abcc.begin(), abcc.end());
  EXPECT_FALSE(cs.Complete(h2));
  std::vector<int32_t> h3 = h2;
  for (int32_t t : ids("d")) h3.push_back(t);
  EXPECT_TRUE(cs.Complete(h3));
  EXPECT_FALSE(cs.Complete(h2)) << "rolled back";
  // Drafts: "c" "c" "x": the first two are allowed, "x" is not.
  std::vector<int32_t> drafts = ids("c");
  std::vector<int32_t> more = ids("c");
  drafts.insert(drafts.end(), more.begin(), more.end());
  for (int32_t t : ids("x")) drafts.push_back(t);
  EXPECT_EQ(cs.AllowedDrafts(h2, drafts), 2u);
  EXPECT_FALSE(cs.Complete(h2)) << "drafts leave the state where it was";
  // A token outside the grammar in the history: only EOG after it.
  std::vector<int32_t> bad = history;
  for (int32_t t : ids("zz")) bad.push_back(t);
  const auto& mask = cs.Mask(bad);
  for (int32_t t = 0; t < tok.n_vocab(); ++t) EXPECT_EQ(Bit(mask, t), trie->IsEog(t)) << t;
}

TEST(ConstraintState, SequencesSharingAMatcherStayIndependent) {
  auto model = Model::Load((test::RepoDir() + "/models/stories260K-f32.gguf").c_str());
  ASSERT_TRUE(model.ok());
  auto trie = TokenTrie::FromTokenizer(*(*model)->tokenizer);
  const std::vector<std::string> choices = {"ab", "ba"};
  auto program = CompileConstraint(LLM_CONSTRAINT_CHOICE, "", choices).value();
  SharedMatcherPool pool;
  auto shared = pool.Get(program);
  EXPECT_EQ(pool.Get(program), shared) << "one SharedMatcher per live program";
  ConstraintState x(shared, trie, 0), y(shared, trie, 0);
  auto id_of = [&](char c) {
    for (int32_t t = 0; t < trie->n_vocab(); ++t)
      if (trie->in_trie(t) && trie->piece(t) == std::string(1, c)) return t;
    return -1;
  };
  const std::vector<int32_t> a = {id_of('a')}, b = {id_of('b')};
  const std::vector<uint64_t> ma = x.Mask(a), mb = y.Mask(b);
  EXPECT_TRUE(Bit(ma, id_of('b')) && !Bit(ma, id_of('a')));
  EXPECT_TRUE(Bit(mb, id_of('a')) && !Bit(mb, id_of('b')));
  EXPECT_EQ(x.Mask(a), ma) << "y's walk did not disturb x";
}

TEST(ConstraintCache, CompilesOnceByContent) {
  ConstraintCache cache(2);
  auto a = cache.Get(LLM_CONSTRAINT_REGEX, "a+", {});
  auto b = cache.Get(LLM_CONSTRAINT_REGEX, "a+", {});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->get(), b->get());
  EXPECT_EQ(cache.hits(), 1u);
  auto c = cache.Get(LLM_CONSTRAINT_GRAMMAR, "a+", {});
  EXPECT_FALSE(c.ok()) << "same text, other kind: compiled separately (and not a grammar)";
  const std::vector<std::string> ch = {"x", "y"};
  ASSERT_TRUE(cache.Get(LLM_CONSTRAINT_CHOICE, "", ch).ok());
  ASSERT_TRUE(cache.Get(LLM_CONSTRAINT_JSON_OBJECT, "", {}).ok());
  EXPECT_EQ(cache.size(), 2u) << "bounded";
}

}  // namespace
}  // namespace llm::constrain
