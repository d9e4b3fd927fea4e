// No repeated keys in constrained JSON (issue 29, src/constrain/json_keys.h):
// the key tracker on its own (escapes, depth, rollback), and the engine's
// masks (ConstraintState) against a brute force whose reference for
// "repeats a key" is an independent recursive-descent reading of the output
// with keys unescaped by util/json's parser: exact both ways, on random
// free-form object schemas and JSON_OBJECT, over a small vocabulary made to
// repeat keys often and over SmolLM2's.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "constrain/constraint.h"
#include "constrain/json_keys.h"
#include "constrain/token_trie.h"
#include "llm.h"
#include "support/json_layout_ref.h"
#include "support/real_models.h"
#include "tokenizer/tokenizer.h"
#include "util/json.h"

namespace llm::constrain {
namespace {

// ------------------------------------------------------------ the reference

// Reads a JSON text or a prefix of one; `repeat` is set when an object has
// two completed keys that unescape to the same string.
class RepeatFinder {
 public:
  explicit RepeatFinder(std::string_view s) : s_(s) {}
  bool Run() {
    Value();
    return repeat_;
  }
  // When the input ends inside a key: its raw text so far and the keys its
  // object has.
  bool in_key = false;
  bool between = false;  // in an object after "{", "," or a member: a key or "}" next
  std::string raw_key;
  std::vector<std::string> keys_before;

 private:
  bool End() const { return i_ >= s_.size(); }
  void Ws() {
    while (!End() && std::strchr(" \t\n\r", s_[i_]) != nullptr) ++i_;
  }
  // Each returns false when the input ends inside it.
  bool Value() {
    Ws();
    if (End()) return false;
    if (s_[i_] == '{') return Object();
    if (s_[i_] == '[') return Array();
    std::string raw;
    if (s_[i_] == '"') return String(&raw);
    while (!End() && std::strchr(",]} \t\n\r", s_[i_]) == nullptr) ++i_;
    return !End();
  }
  bool String(std::string* raw) {
    for (++i_; !End(); ++i_) {
      if (s_[i_] == '"') {
        ++i_;
        return true;
      }
      if (s_[i_] == '\\') *raw += s_[i_++];
      if (End()) return false;
      *raw += s_[i_];
    }
    return false;
  }
  bool Object() {
    ++i_;
    std::set<std::string> keys;
    for (;;) {
      Ws();
      if (End()) {
        between = true;
        keys_before.assign(keys.begin(), keys.end());
        return false;
      }
      if (s_[i_] == '}') {
        ++i_;
        return true;
      }
      if (s_[i_] == ',') ++i_;
      Ws();
      if (End()) {
        between = true;
        keys_before.assign(keys.begin(), keys.end());
        return false;
      }
      std::string raw;
      if (!String(&raw)) {
        in_key = true;
        raw_key = raw;
        keys_before.assign(keys.begin(), keys.end());
        return false;
      }
      auto key = ParseJson("\"" + raw + "\"");
      if (!keys.insert(key.ok() ? key->as_string() : raw).second) repeat_ = true;
      Ws();
      if (End()) return false;
      ++i_;  // ':'
      if (!Value()) return false;
    }
  }
  bool Array() {
    ++i_;
    for (;;) {
      Ws();
      if (End()) return false;
      if (s_[i_] == ']') {
        ++i_;
        return true;
      }
      if (s_[i_] == ',') ++i_;
      if (!Value()) return false;
    }
  }

  std::string_view s_;
  size_t i_ = 0;
  bool repeat_ = false;
};

bool RepeatsAKey(std::string_view s) { return RepeatFinder(s).Run(); }

// A dead end by brute force: the output ends inside a key, and no byte
// sequence the grammar allows closes it on a name its object lacks.
bool DeadKey(Matcher& m, Matcher::StateId s, const std::string& out, int depth) {
  RepeatFinder f(out);
  f.Run();
  if (!(f.in_key || f.between) || depth > 24) return false;
  if (f.between && f.keys_before.empty()) return false;  // no key to repeat
  auto decoded = ParseJson("\"" + f.raw_key + "\"");
  if (f.in_key && decoded.ok()) {
    const std::string& p = decoded->as_string();
    if (std::none_of(f.keys_before.begin(), f.keys_before.end(), [&](const std::string& k) { return k.compare(0, p.size(), p) == 0; }))
      return false;  // no existing key starts so: whatever closes it is new
  }
  for (int b = 0; b < 256; ++b) {
    if (f.between && std::strchr(" \t\n\r", b) != nullptr && b != 0) continue;  // whitespace leads to the same place
    const Matcher::StateId t = m.Step(s, static_cast<uint8_t>(b));
    if (t == Matcher::kDead) continue;
    const std::string o2 = out + static_cast<char>(b);
    if (RepeatsAKey(o2)) continue;
    if (!DeadKey(m, t, o2, depth + 1)) return false;
  }
  return true;
}

// A parsed value with a repeated key at any depth.
bool HasRepeat(const Json& v) {
  if (v.is_array()) {
    for (const auto& e : v.array())
      if (HasRepeat(e)) return true;
  } else if (v.is_object()) {
    std::set<std::string> keys;
    for (const auto& [k, e] : v.object())
      if (!keys.insert(k).second || HasRepeat(e)) return true;
  }
  return false;
}

TEST(JsonKeys, ReferenceFindsRepeats) {
  EXPECT_FALSE(RepeatsAKey(R"({"a":1,"b":{"a":2},"c":[{"a":1,"b":2}]})"));
  EXPECT_TRUE(RepeatsAKey(R"({"a":1,"b":2,"a")"));
  EXPECT_TRUE(RepeatsAKey(R"([{"x":{"a\/b":1,"a/b")"));
  EXPECT_FALSE(RepeatsAKey(R"({"a":1,"a)"));
}

// ------------------------------------------------------------ the tracker

bool Feeds(const std::vector<std::string>& tokens) {
  JsonKeys k;
  for (const auto& t : tokens)
    if (!k.Accept(t)) return false;
  return true;
}

TEST(JsonKeys, RefusesTheByteThatClosesARepeatedKey) {
  EXPECT_TRUE(Feeds({R"({"a":1,"b":{"a":2,"b":[{"a":3}]},"c":"a"})"}));
  EXPECT_FALSE(Feeds({R"({"a":1,"b":2,"a")"}));
  EXPECT_TRUE(Feeds({R"({"a":1,"b":2,"a)"})) << "not closed yet: \"ab\" is still possible";
  EXPECT_FALSE(Feeds({R"({"x":{"k":1},"y":[1,{"k":2,"z":null,"k")"})) << "depth 3, after closed siblings";
  EXPECT_FALSE(Feeds({R"({"x":{"k":1},"x")"})) << "back in the outer object after an inner one closed";
  // Keys compare unescaped.
  EXPECT_FALSE(Feeds({R"({"a\/b":1,"a/b")"}));
  EXPECT_FALSE(Feeds({R"({"\u0061":1,"a")"}));
  EXPECT_FALSE(Feeds({"{\"\\ud83d\\ude00\":1,\"\xf0\x9f\x98\x80\""})) << "a surrogate pair is its code point";
  EXPECT_TRUE(Feeds({R"({"\ud83d":1,"\ud83d\ude00")"})) << "a lone high surrogate is not the pair";
  EXPECT_FALSE(Feeds({R"({"\"":1,"\u0022")"}));
  EXPECT_TRUE(Feeds({R"({"a":"\"a\"","b":"{\"a\":1,\"a\":2}"})"})) << "strings hold no keys";
  EXPECT_TRUE(Feeds({R"({"k":1} )"}));
}

TEST(JsonKeys, RefusalLeavesTheStateAndRollbackRestoresIt) {
  JsonKeys k;
  ASSERT_TRUE(k.Accept(R"({"a":1,)"));
  ASSERT_TRUE(k.Accept(R"("b":{"c":1},)"));
  EXPECT_EQ(k.MinQuotesForRepeat(), 2);
  EXPECT_FALSE(k.Accept(R"("b")"));
  EXPECT_FALSE(k.Allows(R"("a")"));
  EXPECT_TRUE(k.Allows(R"("c")")) << "c belongs to the closed inner object";
  EXPECT_EQ(k.n_accepted(), 2u);
  EXPECT_TRUE(k.Allows(R"("c)"));
  ASSERT_TRUE(k.Accept(R"("a)"));
  EXPECT_EQ(k.MinQuotesForRepeat(), 1);
  EXPECT_FALSE(k.Allows(R"(")"));
  k.Truncate(1);  // back to {"a":1,
  EXPECT_TRUE(k.Allows(R"("b")")) << "b was written after the state kept";
  EXPECT_FALSE(k.Allows(R"("a")"));
  k.Truncate(0);
  EXPECT_TRUE(k.Allows(R"({"a":1,"b":2})"));
  EXPECT_EQ(k.MinQuotesForRepeat(), 4) << "no key yet: a repeat needs two";
}

// ------------------------------------------------------------ masks vs brute force

bool Bit(const std::vector<uint64_t>& mask, int32_t t) { return (mask[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1; }

// A vocabulary that writes short keys from a tiny alphabet, so random walks
// repeat keys often: single bytes, escapes and pieces holding several keys.
std::shared_ptr<const TokenTrie> SmallVocab() {
  std::vector<std::string> pieces = {
      "{", "}", "[", "]", ":", ",", "\"", "a", "b", "1", " ", "\\", "/", "n", "u", "0", "6", "t", "r", "e", "l",
      "\"a\"", "\"b\"", "\"a", "b\"", "\":", "\",\"", "\"}", "\"},\"", ",\"a\":", ",\"b\":1", "\\/", "\\u0061",
      "\"a\":1,\"a\"", "{\"a\"", "}]", "\":{\"", "\"a\\/\"", "\"a/\"", "\\n", "true", "null", "\"]", "1}", "1,\"a\"",
      "\":\"a\",\"a\":\"", "},{\"b\":", "\"a\":1}", ""};
  std::vector<uint8_t> excluded(pieces.size(), 0);
  excluded.back() = 1;
  return std::make_shared<const TokenTrie>(pieces, excluded, std::vector<int32_t>{static_cast<int32_t>(pieces.size()) - 1});
}

struct WalkStats {
  int completed = 0;       // walks that ended on a complete value
  int refused = 0;         // tokens the key check took out of a mask
  int dead_ends = 0;       // tokens after which every way to close the key repeats one
};

// Random walks through `program` with a ConstraintState (the engine's
// path): at every step every token's bit is checked against the brute
// force (the matcher alive after its bytes, and no repeated key in the
// output with it: RepeatsAKey), EOG iff complete or nothing else is
// allowed; now and then the history is rolled back a few tokens. A
// complete output parses and repeats no key at any depth.
void WalkAndCheck(const std::shared_ptr<const TokenTrie>& trie, const std::shared_ptr<const ByteProgram>& program,
                  int walks, int steps, uint32_t seed, const std::string& prefer, WalkStats* stats) {
  std::mt19937 rng(seed);
  auto preferred = [&](int32_t t) {
    const std::string& p = trie->piece(t);
    return p.find_first_not_of(prefer) == std::string::npos;
  };
  for (int w = 0; w < walks; ++w) {
    ConstraintState cs(program, trie, 0);
    Matcher ref(program);
    std::vector<int32_t> history;
    std::vector<std::string> outputs = {""};
    for (int step = 0; step < steps; ++step) {
      const std::string& out = outputs.back();
      const std::vector<uint64_t> mask = cs.Mask(history);
      const Matcher::StateId s = ref.Current();
      std::vector<int32_t> allowed;
      RepeatFinder here(out);
      here.Run();
      for (int32_t t = 0; t < trie->n_vocab(); ++t) {
        if (trie->IsEog(t) || !trie->in_trie(t)) continue;
        const Matcher::StateId s2 = ref.StepBytes(s, trie->piece(t));
        if (s2 == Matcher::kDead) continue;
        // Blanks beyond the bounded layout (json_layout.h) are out before keys are looked at.
        if (program->json_layout && !test::JsonLayoutOk(out + trie->piece(t))) continue;
        const bool quoted = trie->piece(t).find('"') != std::string::npos;
        if (quoted && RepeatsAKey(out + trie->piece(t))) {
          ++stats->refused;
          continue;
        }
        const bool full = trie->n_vocab() < 1000;  // a small vocabulary: every token against the brute force
        if ((full || quoted || here.in_key || trie->piece(t).find(',') != std::string::npos) &&
            DeadKey(ref, s2, out + trie->piece(t), 0)) {
          ++stats->dead_ends;
          continue;
        }
        allowed.push_back(t);
      }
      size_t k = 0;
      for (int32_t t = 0; t < trie->n_vocab(); ++t) {
        bool expect = false;
        if (k < allowed.size() && allowed[k] == t) {
          expect = true;
          ++k;
        } else if (trie->IsEog(t)) {
          expect = ref.IsAccepting(s) || allowed.empty();
        }
        ASSERT_EQ(Bit(mask, t), expect) << "token '" << trie->piece(t) << "' after '" << out << "' (walk " << w
                                        << ", step " << step << ")";
      }
      if (ref.IsAccepting(s) && (allowed.empty() || rng() % 8 == 0)) break;
      if (allowed.empty()) break;
      if (history.size() > 2 && rng() % 10 == 0) {  // a rejected draft, a fork: roll back
        const size_t n = 1 + rng() % 2;
        history.resize(history.size() - n);
        outputs.resize(outputs.size() - n);
        ref.Rollback(n);
        continue;
      }
      std::vector<int32_t> pool;
      if (rng() % 4 != 0)
        for (int32_t t : allowed)
          if (preferred(t)) pool.push_back(t);
      if (pool.empty()) pool = allowed;
      const int32_t pick = pool[rng() % pool.size()];
      ASSERT_TRUE(ref.Accept(trie->piece(pick)));
      history.push_back(pick);
      outputs.push_back(out + trie->piece(pick));
    }
    if (cs.Complete(history)) {
      ++stats->completed;
      auto doc = ParseJson(outputs.back());
      ASSERT_TRUE(doc.ok()) << outputs.back();
      EXPECT_FALSE(HasRepeat(*doc)) << outputs.back();
    }
  }
}

std::shared_ptr<const ByteProgram> Compile(int kind, const std::string& text) {
  auto p = CompileConstraint(kind, text, {});
  EXPECT_TRUE(p.ok()) << text << ": " << p.status().message();
  return p.ok() ? *p : nullptr;
}

TEST(JsonKeysMask, ExactOnJsonObject) {
  auto trie = SmallVocab();
  auto program = Compile(LLM_CONSTRAINT_JSON_OBJECT, "");
  ASSERT_TRUE(program->unique_keys);
  WalkStats stats;
  WalkAndCheck(trie, program, 200, 60, 1, "{}[]:,\"ab1", &stats);
  EXPECT_GT(stats.refused, 100) << "the walks did try to repeat keys";
  EXPECT_GT(stats.completed, 20);
}

// Random schemas whose objects take free keys: additionalProperties
// schemas, {}, "type": "object", nested in each other, under properties
// and in arrays.
std::string RandomFreeSchema(std::mt19937& rng, int depth) {
  auto value = [&]() -> std::string {
    switch (depth > 0 ? rng() % 6 : rng() % 3) {
      case 0: return "true";
      case 1: return R"({"type":"integer"})";
      case 2: return R"({"type":"string","maxLength":3})";
      case 3: return "{}";
      default: return RandomFreeSchema(rng, depth - 1);
    }
  };
  switch (rng() % 8) {
    case 0: return R"({"type":"object"})";
    case 1: return R"({"type":"object","additionalProperties":)" + value() + "}";
    case 2: return R"({"properties":{"a":)" + value() + R"(},"additionalProperties":)" + value() + "}";
    case 3: return R"({"type":"object","properties":{"b":)" + value() + R"(},"required":["b"],"additionalProperties":)" + value() + "}";
    case 4: return R"({"type":"array","items":)" + RandomFreeSchema(rng, depth - 1 < 0 ? 0 : depth - 1) + ",\"maxItems\":3}";
    case 5: return R"({"additionalProperties":{"type":"object","additionalProperties":)" + value() + "}}";
    case 6: return R"({"type":"object","patternProperties":{"^a":)" + value() + R"(,"b":)" + value() + "}}";
    default: return R"({"type":"object","propertyNames":{"pattern":"^[ab1]+$"},"additionalProperties":)" + value() + "}";
  }
}

TEST(JsonKeysMask, RandomFreeFormSchemasNeverRepeatAKey) {
  auto trie = SmallVocab();
  std::mt19937 rng(29);
  WalkStats stats;
  int schemas = 0;
  for (int i = 0; i < 60; ++i) {
    const std::string schema = RandomFreeSchema(rng, 2);
    SCOPED_TRACE(schema);
    auto program = Compile(LLM_CONSTRAINT_JSON_SCHEMA, schema);
    ASSERT_NE(program, nullptr);
    EXPECT_TRUE(program->unique_keys);
    ++schemas;
    WalkAndCheck(trie, program, 6, 60, 100 + static_cast<uint32_t>(i), "{}[]:,\"ab1", &stats);
    if (HasFailure()) return;
  }
  EXPECT_GT(stats.refused, 100);
  EXPECT_GT(stats.completed, 40);
}

TEST(JsonKeysMask, FixedKeysNeedNoTracker) {
  auto program = Compile(LLM_CONSTRAINT_JSON_SCHEMA,
                         R"({"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":false})");
  EXPECT_FALSE(program->unique_keys);
  EXPECT_FALSE(Compile(LLM_CONSTRAINT_REGEX, "\\{\"a\":1,\"a\":1\\}")->unique_keys) << "a regex is taken literally";
  // Keys from patternProperties alone are free keys too.
  auto pattern_keys = Compile(LLM_CONSTRAINT_JSON_SCHEMA,
                              R"({"type":"object","patternProperties":{"^[ab]+$":{"type":"integer"}},"additionalProperties":false})");
  EXPECT_TRUE(pattern_keys->unique_keys);
  WalkStats stats;
  WalkAndCheck(SmallVocab(), pattern_keys, 100, 60, 3, "{}:,\"ab1", &stats);
  EXPECT_GT(stats.refused, 10);
}

// A finite key language (propertyNames enum, a closed set of pattern keys)
// runs out: once "a" and "b" are written, a third key would have to repeat
// one. The token that starts it is a dead end and is masked like a repeat;
// EOS only ever comes at the end (issue 29).
TEST(JsonKeysMask, KeysThatCanOnlyRepeatAreDeadEnds) {
  WalkStats stats;
  for (const char* schema : {R"({"type":"object","propertyNames":{"enum":["a","b"]}})",
                             R"({"type":"object","patternProperties":{"^(a|ab|b)$":{"type":"integer"}},"additionalProperties":false})"}) {
    SCOPED_TRACE(schema);
    WalkAndCheck(SmallVocab(), Compile(LLM_CONSTRAINT_JSON_SCHEMA, schema), 150, 60, 11, "{}:,\"ab1", &stats);
  }
  EXPECT_GT(stats.dead_ends, 10);
}

TEST(JsonKeysMask, ExactOnSmolLM2) {
  LLM_LOAD_REAL_MODEL_OR_SKIP(model, test::kSmolLM2);
  auto trie = TokenTrie::FromTokenizer(*model->tokenizer);
  WalkStats stats;
  WalkAndCheck(trie, Compile(LLM_CONSTRAINT_JSON_OBJECT, ""), 4, 60, 7, "{}:,\"a1", &stats);
  WalkAndCheck(trie,
               Compile(LLM_CONSTRAINT_JSON_SCHEMA,
                       R"({"type":"object","properties":{"id":{"type":"integer"}},"required":["id"],)"
                       R"("additionalProperties":{"type":"object","additionalProperties":{"type":"integer"}}})"),
               4, 60, 8, "{}:,\"a1", &stats);
  EXPECT_GT(stats.refused, 0);
}

}  // namespace
}  // namespace llm::constrain
