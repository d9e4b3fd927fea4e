// Budget-aware masks (issue 29, src/constrain/budget.h), without a model:
//  - Bytes(s) is the exact shortest completion in bytes (against a
//    breadth-first search over the matcher's byte transitions), and
//    Tokens(s) is the length of a real token path (it is walked and checked);
//  - random walks through random schemas, JSON_OBJECT and a recursive
//    grammar, over stories260K's vocabulary (byte-fallback tokens) and over
//    a small JSON-ish vocabulary with multi-byte tokens, always taking an
//    allowed token and avoiding the end token while anything else is
//    allowed (the walk a model that never wants to stop would take): with
//    max_tokens >= the shortest completion's tokens + 1, the mask is never
//    empty and every walk ends with the end token, within max_tokens, on
//    a complete value that parses; without the budget (the same walks,
//    kNoBudget) many of them would have been cut off.
#include <gtest/gtest.h>

#include <deque>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "constrain/budget.h"
#include "constrain/constraint.h"
#include "constrain/token_trie.h"
#include "llm.h"
#include "model/gguf.h"
#include "model/vocab_gguf.h"
#include "support/test_paths.h"
#include "tokenizer/tokenizer.h"
#include "util/json.h"

namespace llm::constrain {
namespace {

bool Bit(const std::vector<uint64_t>& m, int32_t t) { return (m[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1; }

// A random schema of the shapes real ones use (objects with required and
// optional properties, arrays with counts, strings with lengths and
// patterns, enums, numbers, anyOf, recursion, free objects).
std::string RandomSchema(std::mt19937& rng, int depth) {
  const int pick = static_cast<int>(rng() % (depth > 0 ? 10 : 5));
  switch (pick) {
    case 0: {
      const int lo = static_cast<int>(rng() % 6);
      return R"({"type":"string","minLength":)" + std::to_string(lo) + R"(,"maxLength":)" +
             std::to_string(lo + static_cast<int>(rng() % 20)) + "}";
    }
    case 1: return R"({"type":"integer","minimum":-5,"maximum":100000})";
    case 2: return R"({"enum":["red","green-blue",17,null,true]})";
    case 3: return R"({"type":"string","pattern":"^[a-c]{2,6}(x|yz)+$"})";
    case 4: return R"({"type":"number"})";
    case 5:
    case 6: {
      std::string props, req;
      const int n = 1 + static_cast<int>(rng() % 4);
      for (int i = 0; i < n; ++i) {
        const std::string k = "k" + std::to_string(i) + std::string(rng() % 6, 'x');
        props += (i ? "," : "") + ("\"" + k + "\":") + RandomSchema(rng, depth - 1);
        if (rng() % 2) req += (req.empty() ? "" : ",") + ("\"" + k + "\"");
      }
      return R"({"type":"object","properties":{)" + props + R"(},"required":[)" + req +
             R"(],"additionalProperties":false})";
    }
    case 7: {
      const int lo = static_cast<int>(rng() % 3);
      return R"({"type":"array","items":)" + RandomSchema(rng, depth - 1) + R"(,"minItems":)" + std::to_string(lo) +
             (rng() % 2 ? R"(,"maxItems":)" + std::to_string(lo + static_cast<int>(rng() % 6)) : std::string()) + "}";
    }
    case 8: return R"({"anyOf":[)" + RandomSchema(rng, depth - 1) + "," + RandomSchema(rng, depth - 1) + "]}";
    default:
      if (depth < 3) return rng() % 2 ? R"({"type":"object"})" : "{}";  // free keys; any value
      return R"({"$defs":{"t":{"type":"object","properties":{"v":{"type":"integer"},)"
                         R"("c":{"type":"array","items":{"$ref":"#/$defs/t"}}},"required":["v","c"],)"
                         R"("additionalProperties":false}},"$ref":"#/$defs/t"})";
  }
}

// A JSON-ish vocabulary: every printable byte and newline alone, and
// multi-byte pieces that merge structure the way BPE vocabularies do.
std::shared_ptr<const TokenTrie> JsonVocabulary() {
  std::vector<std::string> pieces = {"</s>"};
  for (int b = 0x20; b < 0x7F; ++b) pieces.push_back(std::string(1, static_cast<char>(b)));
  pieces.push_back("\n");
  for (const char* p : {"{\"", "\":", "\",", "\"}", "\"]", "},", "}}", "]}", "[{", "[[", "]]", "null", "true", "false",
                        "\": \"", "\":\"", "\": ", ", \"", "k0", "k1", "k2", "k3", "xx", "xxx", "abc", "yz", "red",
                        "green", "-blue", "\"c\":[", "\"v\":", "\n  ", "  ", "123", "00", "e+", "\\n", "\\\""})
    pieces.push_back(p);
  std::vector<uint8_t> excluded(pieces.size(), 0);
  excluded[0] = 1;
  return std::make_shared<TokenTrie>(pieces, excluded, std::vector<int32_t>{0});
}

// The shortest completion of the initial state by breadth-first search over
// byte transitions (the reference for Budget::Bytes).
int32_t BfsBytes(Matcher& m, Matcher::StateId s0, int32_t cap) {
  std::unordered_map<Matcher::StateId, int32_t> dist{{s0, 0}};
  std::deque<Matcher::StateId> q{s0};
  while (!q.empty()) {
    const Matcher::StateId s = q.front();
    q.pop_front();
    const int32_t d = dist[s];
    if (m.IsAccepting(s)) return d;
    if (d >= cap) continue;
    for (int b = 0; b < 256; ++b) {
      const Matcher::StateId t = m.Step(s, static_cast<uint8_t>(b));
      if (t != Matcher::kDead && dist.emplace(t, d + 1).second) q.push_back(t);
    }
  }
  return Budget::kNever;
}

struct WalkTotals {
  int walks = 0, cut_without_budget = 0;
  int bounded = 0, unbounded = 0;  // programs with a finite max_bytes() or not
};

// One walk: returns the tokens used (end token included), or -1 if cut at
// max_tokens with an incomplete value (only expected without a budget).
int Walk(const std::shared_ptr<const ByteProgram>& program, const std::shared_ptr<const TokenTrie>& trie,
         int32_t max_tokens, bool budget, uint32_t seed, std::string* out) {
  std::mt19937 rng(seed);
  ConstraintState cs(program, trie, 0, budget ? max_tokens : ConstraintState::kNoBudget);
  std::vector<int32_t> history;
  out->clear();
  while (static_cast<int32_t>(history.size()) < max_tokens) {
    const std::vector<uint64_t>& mask = cs.Mask(history);
    std::vector<int32_t> allowed;
    bool eog = false;
    for (int32_t t = 0; t < trie->n_vocab(); ++t) {
      if (!Bit(mask, t)) continue;
      if (trie->IsEog(t)) eog = true;
      else allowed.push_back(t);
    }
    EXPECT_TRUE(eog || !allowed.empty()) << "empty mask after [" << *out << "]";
    if (allowed.empty()) {
      EXPECT_TRUE(cs.Complete(history)) << "only the end token after an incomplete [" << *out << "]";
      return static_cast<int>(history.size()) + 1;
    }
    // Mostly grow: longer tokens and deeper values are what run a budget out.
    int32_t t = allowed[rng() % allowed.size()];
    for (int k = 0; k < 3; ++k) {
      const int32_t u = allowed[rng() % allowed.size()];
      if (trie->piece(u).size() > trie->piece(t).size() || trie->piece(u).find_first_of("{[") != std::string::npos) t = u;
    }
    history.push_back(t);
    *out += trie->piece(t);
  }
  return -1;
}

void CheckSchemaWalks(const std::string& what, const std::shared_ptr<const ByteProgram>& program,
                      const std::shared_ptr<const TokenTrie>& trie, uint32_t seed, WalkTotals* totals) {
  SCOPED_TRACE(what);
  auto shared = std::make_shared<SharedMatcher>(program);
  Matcher& m = shared->matcher;
  const int32_t bytes = shared->budget.Bytes(m, m.Initial());
  ASSERT_EQ(bytes, BfsBytes(m, m.Initial(), 4096)) << "Bytes(initial) against breadth-first search";
  // Tokens(initial) is the length of a real path: walk it.
  const int32_t t0 = shared->budget.Tokens(m, *trie, m.Initial());
  ASSERT_NE(t0, Budget::kNever);
  ASSERT_LE(t0, bytes) << "never more tokens than bytes with every byte a token";
  const std::string w = shared->budget.ShortestCompletion(m, m.Initial());
  ASSERT_EQ(static_cast<int32_t>(w.size()), bytes);
  ASSERT_TRUE(m.Matches(w)) << w;
  // max_bytes() bounds every state's shortest completion (a random byte
  // walk's states), and is finite exactly for grammars without recursion.
  const int32_t most = shared->budget.max_bytes();
  {
    std::mt19937 rng(seed);
    Matcher::StateId s = m.Initial();
    for (int k = 0; k < 300 && s >= 0; ++k) {
      ASSERT_TRUE(most == Budget::kNever || shared->budget.Bytes(m, s) <= most) << most;
      std::vector<uint8_t> live;
      for (int b = 0; b < 256; ++b)
        if (m.Step(s, static_cast<uint8_t>(b)) != Matcher::kDead) live.push_back(static_cast<uint8_t>(b));
      if (live.empty()) break;
      s = m.Step(s, live[rng() % live.size()]);
    }
    ++(most == Budget::kNever ? totals->unbounded : totals->bounded);
  }
  for (int32_t slack : {0, 1, 3, 9}) {
    const int32_t max_tokens = t0 + 1 + slack;
    for (int k = 0; k < 6; ++k) {
      std::string out;
      const uint32_t s = seed * 7919u + static_cast<uint32_t>(slack * 31 + k);
      const int used = Walk(program, trie, max_tokens, true, s, &out);
      ASSERT_GE(used, 1) << "cut off at max_tokens " << max_tokens << " (shortest " << t0 << "): [" << out << "]";
      ASSERT_LE(used, max_tokens);
      Matcher ref(program);
      ASSERT_TRUE(ref.Matches(out)) << out;
      ASSERT_TRUE(ParseJson(out).ok()) << out;
      ++totals->walks;
      std::string free_out;
      if (Walk(program, trie, max_tokens, false, s, &free_out) < 0) ++totals->cut_without_budget;
    }
  }
}

TEST(Budget, RandomSchemasEndCompleteWithinMaxTokens) {
  // stories260K's vocabulary (SentencePiece with byte-fallback tokens),
  // read from its GGUF without loading the model.
  auto file = GgufFile::Open(test::RepoDir() + "/models/stories260K-f32.gguf");
  ASSERT_TRUE(file.ok());
  auto data = TokenizerDataFromGguf(**file);
  ASSERT_TRUE(data.ok());
  auto tok = Tokenizer::Create(std::move(*data));
  ASSERT_TRUE(tok.ok());
  const std::vector<std::pair<std::string, std::shared_ptr<const TokenTrie>>> vocabs = {
      {"stories260K", TokenTrie::FromTokenizer(**tok)}, {"json-ish", JsonVocabulary()}};
  std::mt19937 rng(29);
  WalkTotals totals;
  int schemas = 0;
  for (int i = 0; i < 40; ++i) {
    const std::string schema = RandomSchema(rng, 3);
    auto program = CompileConstraint(LLM_CONSTRAINT_JSON_SCHEMA, schema, {});
    ASSERT_TRUE(program.ok()) << schema << ": " << program.status().message();
    ++schemas;
    for (const auto& [name, trie] : vocabs) CheckSchemaWalks(name + " " + schema, *program, trie, static_cast<uint32_t>(i), &totals);
  }
  auto object = CompileConstraint(LLM_CONSTRAINT_JSON_OBJECT, "", {});
  ASSERT_TRUE(object.ok());
  for (const auto& [name, trie] : vocabs) CheckSchemaWalks(name + " json_object", *object, trie, 1000, &totals);
  // Deep nesting that costs nothing to open and a lot to close.
  auto nest = CompileConstraint(LLM_CONSTRAINT_GRAMMAR, R"(root ::= "[" v "]"
v ::= "[" v "]" | "[[[" v "]]]" | "0")", {});
  ASSERT_TRUE(nest.ok());
  for (const auto& [name, trie] : vocabs) CheckSchemaWalks(name + " nesting grammar", *nest, trie, 2000, &totals);
  EXPECT_EQ(schemas, 40);
  EXPECT_GT(totals.bounded, 10);
  EXPECT_GT(totals.unbounded, 4) << "JSON_OBJECT, the nesting grammar and recursive schemas";
  // The walks really press on the budget: without it, many end cut off.
  EXPECT_GT(totals.cut_without_budget, totals.walks / 4) << totals.cut_without_budget << " of " << totals.walks;
  std::printf("budget walks: %d, cut off without the budget: %d\n", totals.walks, totals.cut_without_budget);
}

TEST(Budget, DraftsPastTheBudgetAreNotAllowed) {
  auto trie = JsonVocabulary();
  auto program = CompileConstraint(LLM_CONSTRAINT_GRAMMAR, R"(root ::= "[" v "]"
v ::= "[" v "]" | "0")", {});
  ASSERT_TRUE(program.ok());
  auto id = [&](const std::string& p) {
    for (int32_t t = 0; t < trie->n_vocab(); ++t)
      if (trie->in_trie(t) && trie->piece(t) == p) return t;
    return -1;
  };
  // "[" "0" "]" is 3 tokens + the end token: max_tokens 6 leaves room for
  // one more "[" (5 tokens + end), not for two.
  ConstraintState cs(*program, trie, 0, 6);
  const std::vector<int32_t> drafts = {id("["), id("["), id("[")};
  EXPECT_EQ(cs.AllowedDrafts({}, drafts), 2u);
  const std::vector<int32_t> two = {id("["), id("[")};
  const std::vector<uint64_t>& mask = cs.Mask(two);
  EXPECT_FALSE(Bit(mask, id("["))) << "a third '[' cannot close in time";
  EXPECT_TRUE(Bit(mask, id("0")));
  ConstraintState free_cs(*program, trie, 0);
  EXPECT_EQ(free_cs.AllowedDrafts({}, drafts), 3u);
}

}  // namespace
}  // namespace llm::constrain
