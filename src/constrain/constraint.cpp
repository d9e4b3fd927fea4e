#include "constrain/constraint.h"

#include <algorithm>
#include <bit>
#include <limits>

#include "constrain/choice.h"
#include "constrain/gbnf_parser.h"
#include "constrain/json_layout.h"
#include "constrain/json_object.h"
#include "constrain/regex_compiler.h"
#include "llm.h"

// The JSON-Schema compiler lives on its own branch (issue 20, `schema`);
// until it is merged JSON_SCHEMA is UNSUPPORTED.
#if __has_include("constrain/json_schema.h")
#include "constrain/json_schema.h"
#define LLM_HAVE_JSON_SCHEMA 1
#else
#define LLM_HAVE_JSON_SCHEMA 0
#endif

namespace llm::constrain {

StatusOr<std::shared_ptr<const ByteProgram>> CompileConstraint(int32_t kind, std::string_view text,
                                                                std::span<const std::string> choices,
                                                                int32_t whitespace) {
  if (whitespace != LLM_WHITESPACE_BOUNDED && whitespace != LLM_WHITESPACE_FREE)
    return InvalidArgument("constraint_whitespace " + std::to_string(whitespace) + " is not an LLM_WHITESPACE_* value");
  const bool free_ws = whitespace == LLM_WHITESPACE_FREE;
  // A JSON grammar with its `ws` rule freed when asked.
  auto json_gbnf = [&](std::string_view gbnf) -> StatusOr<Grammar> {
    if (!free_ws) return ParseGrammar(gbnf);
    auto freed = WithFreeWhitespace(gbnf);
    if (!freed.ok()) return freed.status();
    return ParseGrammar(*freed);
  };
  StatusOr<Grammar> g = InvalidArgument("constraint_kind " + std::to_string(kind) + " is not a constraint");
  switch (kind) {
    case LLM_CONSTRAINT_GRAMMAR: g = ParseGrammar(text); break;
    case LLM_CONSTRAINT_REGEX: g = CompileRegex(text); break;
    case LLM_CONSTRAINT_CHOICE: g = CompileChoices(choices); break;
    case LLM_CONSTRAINT_JSON_OBJECT:
      g = json_gbnf(JsonObjectGrammar());
      if (g.ok()) g->unique_keys = true;
      if (g.ok()) g->json_layout = !free_ws;
      break;
    case LLM_CONSTRAINT_JSON_SCHEMA: {
#if LLM_HAVE_JSON_SCHEMA
      bool free_keys = false;
      auto gbnf = JsonSchemaToGrammar(text, &free_keys);
      if (!gbnf.ok()) return gbnf.status();
      g = json_gbnf(*gbnf);
      // The grammar is ours: a limit it breaks is the schema's size (the
      // caller's to fix), anything else is our bug.
      if (!g.ok() && IsLimitExceeded(g.status()))
        return InvalidArgument("JSON Schema: too large to compile: " + LimitWhat(g.status()) +
                               "; long counted lengths (maxLength, maxItems) and many large subschemas add up");
      if (!g.ok()) return InternalError("the grammar compiled from the JSON schema does not parse: " + g.status().message());
      g->unique_keys = free_keys;
      g->json_layout = !free_ws;
#else
      return Unsupported("JSON_SCHEMA constraints are not available in this build");
#endif
      break;
    }
    default: break;
  }
  if (!g.ok()) return g.status();
  return LowerToBytes(*g);
}

StatusOr<std::shared_ptr<const ByteProgram>> ConstraintCache::Get(int32_t kind, std::string_view text,
                                                                  std::span<const std::string> choices,
                                                                  int32_t whitespace) {
  std::string key = std::to_string(kind) + ":" + std::to_string(whitespace) + ":";
  if (kind == LLM_CONSTRAINT_CHOICE) {
    for (const std::string& c : choices) key += std::to_string(c.size()) + ":" + c;
  } else if (kind != LLM_CONSTRAINT_JSON_OBJECT) {
    key += text;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      it->second.last_use = ++tick_;
      ++hits_;
      return it->second.program;
    }
  }
  // Compile outside the lock: a large grammar must not hold up other
  // submitters. Two threads compiling the same text both succeed; one wins.
  auto p = CompileConstraint(kind, text, choices, whitespace);
  if (!p.ok()) return p.status();
  std::lock_guard<std::mutex> lock(mu_);
  if (entries_.size() >= capacity_) {
    auto oldest = std::min_element(entries_.begin(), entries_.end(),
                                   [](const auto& a, const auto& b) { return a.second.last_use < b.second.last_use; });
    entries_.erase(oldest);
  }
  entries_[key] = Entry{*p, ++tick_};
  return *p;
}

size_t ConstraintCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

uint64_t ConstraintCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

std::shared_ptr<SharedMatcher> SharedMatcherPool::Get(const std::shared_ptr<const ByteProgram>& program) {
  // Forget entries no sequence uses any more.
  std::erase_if(live_, [](const auto& e) { return e.second.expired(); });
  std::shared_ptr<SharedMatcher> s = live_[program.get()].lock();
  if (s == nullptr || s->matcher.arena_size() > kMaxArenaNodes / 2) {
    s = std::make_shared<SharedMatcher>(program);
    live_[program.get()] = s;
  }
  // Keep the most recently used ones alive between requests: an application
  // sends the same schema again and again, and its structural states (keys,
  // punctuation) then cost a trie walk only the first time.
  std::erase(recent_, s);
  recent_.insert(recent_.begin(), s);
  if (recent_.size() > kKeptMatchers) recent_.pop_back();
  return s;
}

ConstraintState::ConstraintState(std::shared_ptr<const ByteProgram> program, std::shared_ptr<const TokenTrie> trie,
                                 int32_t n_prompt, int32_t max_tokens)
    : ConstraintState(std::make_shared<SharedMatcher>(std::move(program)), std::move(trie), n_prompt, max_tokens) {}

ConstraintState::ConstraintState(std::shared_ptr<SharedMatcher> shared, std::shared_ptr<const TokenTrie> trie,
                                 int32_t n_prompt, int32_t max_tokens)
    : trie_(std::move(trie)), shared_(std::move(shared)), n_prompt_(n_prompt), max_tokens_(max_tokens) {
  states_.push_back(shared_->matcher.Initial());
  if (shared_->matcher.program().unique_keys) keys_ = std::make_unique<JsonKeys>();
  if (shared_->matcher.program().json_layout) layout_ = std::make_unique<JsonLayout>();
  eog_only_.assign((static_cast<size_t>(trie_->n_vocab()) + 63) / 64, 0);
  for (int32_t t : trie_->eog()) eog_only_[static_cast<size_t>(t) >> 6] |= uint64_t{1} << (t & 63);
}

bool ConstraintState::AcceptToken(int32_t token) {
  if (token < 0 || token >= trie_->n_vocab() || !trie_->in_trie(token)) return false;
  const Matcher::StateId next = shared_->matcher.StepBytes(states_.back(), trie_->piece(token));
  if (next == Matcher::kDead) return false;
  if (layout_ && !layout_->Allows(trie_->piece(token))) return false;
  if (keys_ && !keys_->Accept(trie_->piece(token))) return false;
  if (layout_) layout_->Accept(trie_->piece(token));
  states_.push_back(next);
  tokens_.push_back(token);
  return true;
}

// Brings the matcher to history[n_prompt..]: roll back to the common prefix
// with what it has accepted, then accept the rest. Sampling and
// verification only ever extend the history by allowed tokens, so the
// rollback is the rare case (a rejected draft, a sibling's fork, a
// preempted sequence recomputing).
void ConstraintState::Sync(std::span<const int32_t> history) {
  const size_t start = std::min(history.size(), static_cast<size_t>(std::max(n_prompt_, 0)));
  const std::span<const int32_t> gen = history.subspan(start);
  size_t common = 0;
  while (common < tokens_.size() && common < gen.size() && tokens_[common] == gen[common]) ++common;
  if (common < tokens_.size()) {
    Truncate(common);
    stuck_ = false;
  }
  if (stuck_ && (gen.size() <= tokens_.size() || gen[tokens_.size()] != stuck_token_)) stuck_ = false;
  if (stuck_) return;
  for (size_t k = tokens_.size(); k < gen.size(); ++k) {
    if (!AcceptToken(gen[k])) {
      stuck_ = true;
      stuck_token_ = gen[k];
      return;
    }
  }
}

const std::vector<uint64_t>& ConstraintState::Mask(std::span<const int32_t> history) {
  Sync(history);
  if (stuck_) return eog_only_;
  if (shared_->masks == nullptr || shared_->trie != trie_) {
    shared_->trie = trie_;
    shared_->masks = std::make_unique<MaskCache>(*trie_);
  }
  const std::vector<uint64_t>* mask = &shared_->masks->Get(shared_->matcher, states_.back());
  if (max_tokens_ != kNoBudget) {
    const int32_t remaining = max_tokens_ - static_cast<int32_t>(tokens_.size());
    mask = &shared_->budget.Filter(shared_->matcher, *trie_, states_.back(), *mask, remaining, &budgeted_);
  }
  if (layout_) mask = &WithinLayout(*mask);
  return keys_ ? WithoutRepeatedKeys(*mask) : *mask;
}

// Only tokens with a blank byte can break the layout, and from inside a
// string only those that also close it (a '"'): the mask's words are
// intersected with those sets and the few tokens left are lexed.
const std::vector<uint64_t>& ConstraintState::WithinLayout(const std::vector<uint64_t>& mask) {
  const bool in_string = layout_->Current().mode != 0;
  const std::vector<uint64_t>& blank = trie_->blank_bits();
  const std::vector<uint64_t>& quoted = trie_->quoted_bits();
  bool copied = false;
  for (size_t w = 0; w < mask.size() && w < blank.size(); ++w) {
    uint64_t bits = mask[w] & blank[w];
    if (in_string) bits &= quoted[w];
    for (; bits != 0; bits &= bits - 1) {
      const int32_t t = static_cast<int32_t>(w * 64 + std::countr_zero(bits));
      if (layout_->Allows(trie_->piece(t))) continue;
      if (!copied) {
        laid_out_ = mask;
        copied = true;
      }
      laid_out_[w] &= ~(uint64_t{1} << (t & 63));
    }
  }
  return copied ? laid_out_ : mask;
}

int32_t ConstraintState::ShortestTokens(std::span<const int32_t> history) {
  Sync(history);
  if (stuck_) return Budget::kNever;
  return shared_->budget.Tokens(shared_->matcher, *trie_, states_.back());
}

void ConstraintState::Truncate(size_t n_tokens) {
  tokens_.resize(n_tokens);
  states_.resize(n_tokens + 1);
  if (keys_) keys_->Truncate(n_tokens);
  if (layout_) layout_->Truncate(n_tokens);
}

namespace {

bool PrefixOfSome(const std::string& p, const std::vector<std::string>& keys) {
  return std::any_of(keys.begin(), keys.end(), [&](const std::string& k) { return k.compare(0, p.size(), p) == 0; });
}

// From matcher state s inside a key spelled `partial` so far (a prefix of
// some of `keys`), whether some continuation closes the key on a name not
// in `keys`. Only bytes that keep the key a prefix of an existing one need
// a look further: any other byte leaves every existing key behind, and the
// grammar (whose every prefix can be completed) then closes a new one.
bool CanFinishKey(Matcher& m, Matcher::StateId s, const std::string& partial, const std::vector<std::string>& keys) {
  for (int b = 0; b < 256; ++b) {
    const Matcher::StateId t = m.Step(s, static_cast<uint8_t>(b));
    if (t == Matcher::kDead) continue;
    if (b == '"') {
      if (std::find(keys.begin(), keys.end(), partial) == keys.end()) return true;
      continue;
    }
    if (b == '\\') {
      static const std::pair<char, char> kEscapes[] = {{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {'b', '\b'},
                                                       {'f', '\f'}, {'n', '\n'}, {'r', '\r'}, {'t', '\t'}};
      if (m.Step(t, 'u') != Matcher::kDead) return true;  // (\uXXXX: taken as a way out)
      for (auto [e, c] : kEscapes) {
        const Matcher::StateId t2 = m.Step(t, static_cast<uint8_t>(e));
        if (t2 == Matcher::kDead) continue;
        const std::string p = partial + c;
        if (!PrefixOfSome(p, keys) || CanFinishKey(m, t2, p, keys)) return true;
      }
      continue;
    }
    const std::string p = partial + static_cast<char>(b);
    if (!PrefixOfSome(p, keys) || CanFinishKey(m, t, p, keys)) return true;
  }
  return false;
}

// From matcher state s between an object's members (expecting a key after
// "{" or ",", or after a member's value), whether the object can go on
// without repeating a key: close, or open a key that can finish on a new
// name. Whitespace is stepped over (twice at most: the grammars' runs are
// one space, or a newline and indentation, which leads to the same place).
bool CanGoOn(Matcher& m, Matcher::StateId s, bool expect_key, const std::vector<std::string>& keys, int depth) {
  if (m.Step(s, '}') != Matcher::kDead) return true;
  if (expect_key) {
    const Matcher::StateId q = m.Step(s, '"');
    if (q != Matcher::kDead && (keys.empty() || CanFinishKey(m, q, "", keys))) return true;
  } else if (const Matcher::StateId c = m.Step(s, ','); c != Matcher::kDead && CanGoOn(m, c, true, keys, 0)) {
    return true;
  }
  if (depth < 2)
    for (uint8_t b : {' ', '\n', '\t', '\r'})
      if (const Matcher::StateId t = m.Step(s, b); t != Matcher::kDead && CanGoOn(m, t, expect_key, keys, depth + 1)) return true;
  return false;
}

}  // namespace

// A token is taken out when its bytes close a key the same open object
// already has, or leave a key that can only close on such a name (a dead
// end, where only EOS would be left). Only tokens with '"' bytes can do
// either from outside a key, and the trie lists them most quotes first:
// with no key in any open object, only those with enough quotes to write
// two keys are looked at. Inside a key, the other candidates are the
// tokens that spell on along an existing key (TokensAlong).
const std::vector<uint64_t>& ConstraintState::WithoutRepeatedKeys(const std::vector<uint64_t>& mask) {
  const int32_t need = keys_->MinQuotesForRepeat();
  const bool any = keys_->AnyOpenKeys();
  Matcher& m = shared_->matcher;
  bool copied = false;
  JsonKeys::KeyView v;
  auto forbidden = [&](int32_t t) {
    const std::string& piece = trie_->piece(t);
    if (!keys_->Peek(piece, &v)) return true;
    if (!any) return false;
    if (v.expect_key || v.after_member) {
      if (v.keys.empty()) return false;
      const Matcher::StateId s2 = m.StepBytes(states_.back(), piece);
      return s2 == Matcher::kDead || !CanGoOn(m, s2, v.expect_key, v.keys, 0);
    }
    if (!v.in_key || !v.exact || !PrefixOfSome(v.partial, v.keys)) return false;
    const Matcher::StateId s2 = m.StepBytes(states_.back(), piece);
    return s2 == Matcher::kDead || !CanFinishKey(m, s2, v.partial, v.keys);
  };
  auto forbid = [&](int32_t t) {
    const uint64_t bit = uint64_t{1} << (t & 63);
    if ((mask[static_cast<size_t>(t) >> 6] & bit) == 0 || !forbidden(t)) return;
    if (!copied) {
      filtered_ = mask;
      copied = true;
    }
    filtered_[static_cast<size_t>(t) >> 6] &= ~bit;
  };
  for (int32_t t : trie_->quoted()) {
    if (!any && trie_->quotes(t) < need) break;
    forbid(t);
  }
  if (any && !keys_->InString())
    for (int32_t t : trie_->commas()) forbid(t);  // a new member whose every key would repeat
  if (any && keys_->Peek("", &v) && v.in_key && v.exact) {
    const std::vector<std::string> keys = v.keys;
    const std::string partial = v.partial;
    for (const auto& k : keys)
      if (k.size() > partial.size() && k.compare(0, partial.size(), partial) == 0)
        trie_->TokensAlong(std::string_view(k).substr(partial.size()), [&](int32_t t) {
          if (trie_->quotes(t) == 0) forbid(t);  // (quoted ones were looked at above)
        });
  }
  if (!copied) return mask;
  // Every way on repeats a key (a dead end the token before could not see
  // coming: EOS was allowed only if it completed a value): as at any dead
  // end, EOG lets the sequence end.
  if (std::all_of(filtered_.begin(), filtered_.end(), [](uint64_t w) { return w == 0; })) {
    for (int32_t t : trie_->eog()) filtered_[static_cast<size_t>(t) >> 6] |= uint64_t{1} << (t & 63);
  }
  return filtered_;
}

void ConstraintState::Apply(float* logits, int32_t n_vocab, std::span<const int32_t> history) {
  const std::vector<uint64_t>& mask = Mask(history);
  const float ninf = -std::numeric_limits<float>::infinity();
  const int32_t n = std::min(n_vocab, trie_->n_vocab());
  // Visit only the forbidden tokens: inside a JSON string nearly every token
  // is allowed, and a pass testing every bit cost as much as the mask itself.
  for (int32_t w = 0; w * 64 < n; ++w) {
    uint64_t off = ~mask[static_cast<size_t>(w)];
    if (w * 64 + 64 > n) off &= (uint64_t{1} << (n - w * 64)) - 1;
    while (off != 0) {
      logits[w * 64 + std::countr_zero(off)] = ninf;
      off &= off - 1;
    }
  }
  for (int32_t t = n; t < n_vocab; ++t) logits[t] = ninf;
}

size_t ConstraintState::AllowedDrafts(std::span<const int32_t> history, std::span<const int32_t> drafts) {
  Sync(history);
  if (stuck_) return 0;
  size_t n = 0;
  for (int32_t d : drafts) {
    if (trie_->IsEog(d)) {
      if (shared_->matcher.IsAccepting(states_.back())) ++n;  // ends the sequence: nothing after it counts
      break;
    }
    if (max_tokens_ != kNoBudget &&
        !shared_->budget.Allows(shared_->matcher, *trie_, states_.back(), d, max_tokens_ - static_cast<int32_t>(tokens_.size())))
      break;  // (a token the budget-filtered mask would not have allowed)
    if (!AcceptToken(d)) break;
    ++n;
  }
  const size_t accepted = tokens_.size() - (history.size() - std::min(history.size(), static_cast<size_t>(std::max(n_prompt_, 0))));
  Truncate(tokens_.size() - accepted);
  return n;
}

bool ConstraintState::Complete(std::span<const int32_t> history) {
  Sync(history);
  return !stuck_ && shared_->matcher.IsAccepting(states_.back());
}

bool ConstraintState::DeadEnd(std::span<const int32_t> history) {
  Sync(history);
  if (stuck_) return true;
  if (shared_->matcher.IsAccepting(states_.back())) return false;
  // The mask lets end-of-generation through where nothing else is allowed
  // (so that a sampler always has a token): look past those.
  const std::vector<uint64_t>& mask = Mask(history);
  for (size_t w = 0; w < mask.size(); ++w)
    if ((mask[w] & ~eog_only_[w]) != 0) return false;
  return true;
}

}  // namespace llm::constrain
