// Constraints in the engine (issue 20): compiling a request's constraint,
// caching compiled programs by content, and the per-sequence state that
// masks the sampler's logits.
//
//   llm_submit ─► ConstraintCache::Get(kind, text, choices) ─► ByteProgram (shared, immutable)
//   engine: each sequence's Sampler holds a ConstraintState(program, trie):
//     Apply(logits, history): sync the matcher to history[n_prompt..] (roll
//     back to the common prefix, accept the rest), then -inf every token the
//     state's mask forbids.
//
// Syncing to the history the sampler already receives is what makes n > 1
// (forked samples), preemption (recompute), prefix caching and speculative
// verification (several positions in one step; rejected drafts) all work
// without the engine telling the constraint anything.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "constrain/budget.h"
#include "constrain/byte_program.h"
#include "constrain/json_keys.h"
#include "constrain/json_layout.h"
#include "constrain/mask_cache.h"
#include "constrain/matcher.h"
#include "constrain/token_trie.h"
#include "util/status.h"

namespace llm::constrain {

// kind: an llm_constraint_kind other than NONE. text: the schema, regex or
// grammar (ignored for JSON_OBJECT and CHOICE). Errors: INVALID_ARGUMENT with
// the position; UNSUPPORTED for JSON_SCHEMA when built without the schema
// compiler.
// whitespace: LLM_WHITESPACE_BOUNDED (JSON kinds: json_layout.h) or _FREE.
StatusOr<std::shared_ptr<const ByteProgram>> CompileConstraint(int32_t kind, std::string_view text,
                                                                std::span<const std::string> choices,
                                                                int32_t whitespace = 0);

// Compiled programs by content (kind + text + choices), for one context.
// Thread-safe (llm_submit runs on callers' threads). Bounded: the least
// recently used entry goes when full.
class ConstraintCache {
 public:
  ConstraintCache() = default;
  explicit ConstraintCache(size_t capacity) : capacity_(capacity) {}
  StatusOr<std::shared_ptr<const ByteProgram>> Get(int32_t kind, std::string_view text,
                                                   std::span<const std::string> choices, int32_t whitespace = 0);
  size_t size() const;
  uint64_t hits() const;

 private:
  mutable std::mutex mu_;
  size_t capacity_ = 64;
  uint64_t tick_ = 0, hits_ = 0;
  struct Entry {
    std::shared_ptr<const ByteProgram> program;
    uint64_t last_use;
  };
  std::unordered_map<std::string, Entry> entries_;
};

// What all sequences of one compiled constraint share (engine thread only):
// the matcher's state table and transitions, and the masks by state. A batch
// of sequences under the same constraint then walks the token trie once per
// state for all of them, not once per sequence.
struct SharedMatcher {
  explicit SharedMatcher(std::shared_ptr<const ByteProgram> p) : matcher(std::move(p)) {}
  Matcher matcher;  // used through its state-level interface; its own token history stays empty
  // The masks by state, made with the first user's trie (an engine has one
  // vocabulary); `trie` keeps it alive.
  std::shared_ptr<const TokenTrie> trie;
  std::unique_ptr<MaskCache> masks;
  Budget budget{matcher.program()};  // shortest completions by state (budget.h)
};

// The engine's SharedMatcher per program: one while any sequence uses it,
// and the kKeptMatchers most recently used kept after their last sequence
// ends (with their masks); a fresh one once an old one's arena has grown
// past half its limit (its current users keep it).
inline constexpr size_t kKeptMatchers = 8;
class SharedMatcherPool {
 public:
  std::shared_ptr<SharedMatcher> Get(const std::shared_ptr<const ByteProgram>& program);

 private:
  std::unordered_map<const ByteProgram*, std::weak_ptr<SharedMatcher>> live_;
  std::vector<std::shared_ptr<SharedMatcher>> recent_;  // most recent first
};

// One sequence's constraint: the matcher state after each of its generated
// tokens, over a SharedMatcher. Engine thread only.
class ConstraintState {
 public:
  // max_tokens: the tokens the sequence may generate (end token included);
  // the mask then keeps only tokens after which the output can still be
  // completed and ended in time (budget.h). kNoBudget: no such filter.
  static constexpr int32_t kNoBudget = INT32_MAX;
  ConstraintState(std::shared_ptr<SharedMatcher> shared, std::shared_ptr<const TokenTrie> trie, int32_t n_prompt,
                  int32_t max_tokens = kNoBudget);
  // A SharedMatcher of its own.
  ConstraintState(std::shared_ptr<const ByteProgram> program, std::shared_ptr<const TokenTrie> trie, int32_t n_prompt,
                  int32_t max_tokens = kNoBudget);

  // logits: (n_vocab) the position after `history` (prompt + generated);
  // every forbidden token gets -inf (ids beyond the tokenizer's vocabulary
  // too).
  void Apply(float* logits, int32_t n_vocab, std::span<const int32_t> history);
  // How many of `drafts` (proposed after `history`) the constraint allows in
  // a row; the matcher is left synced to `history`.
  size_t AllowedDrafts(std::span<const int32_t> history, std::span<const int32_t> drafts);
  // The allowed-token mask after `history`, (ceil(n_vocab / 64)) words.
  const std::vector<uint64_t>& Mask(std::span<const int32_t> history);
  // The output so far is a complete match.
  bool Complete(std::span<const int32_t> history);
  // No token can follow `history` and it is not a complete match either: the
  // matcher reached one of its limits (matcher.h: more parses at once than
  // kMaxStacksPerState, e.g. a very wide anyOf), or a token could not be
  // matched. Sampling would pick a token the constraint forbids, or end an
  // incomplete value: the caller ends the sequence with an error instead.
  bool DeadEnd(std::span<const int32_t> history);

  Matcher& matcher() { return shared_->matcher; }
  // The tokens of the shortest completion known from the current state
  // (budget.h: a real token path; Budget::kNever when there is none).
  int32_t ShortestTokens(std::span<const int32_t> history);

 private:
  void Sync(std::span<const int32_t> history);
  bool AcceptToken(int32_t token);
  void Truncate(size_t n_tokens);
  // `mask` less the tokens that would repeat a key (json_keys.h): mask
  // itself when none does, else filtered_.
  const std::vector<uint64_t>& WithoutRepeatedKeys(const std::vector<uint64_t>& mask);

  std::shared_ptr<const TokenTrie> trie_;
  std::shared_ptr<SharedMatcher> shared_;
  std::vector<Matcher::StateId> states_;  // (1 + tokens_) the state after each accepted token
  int32_t n_prompt_;
  int32_t max_tokens_;
  std::vector<uint64_t> budgeted_;
  std::vector<int32_t> tokens_;  // generated tokens the matcher has accepted (EOG excluded)
  // The first generated token the matcher could not accept (a stop token,
  // an EOG, or a token forced from outside): the state stays at tokens_ and
  // only EOG is allowed after it.
  bool stuck_ = false;
  int32_t stuck_token_ = -1;
  std::vector<uint64_t> eog_only_;
  // `mask` less the tokens whose blanks break the layout (json_layout.h).
  const std::vector<uint64_t>& WithinLayout(const std::vector<uint64_t>& mask);
  std::unique_ptr<JsonLayout> layout_;  // the program's json_layout
  std::vector<uint64_t> laid_out_;
  std::unique_ptr<JsonKeys> keys_;  // the program's unique_keys: the keys of each open object
  std::vector<uint64_t> filtered_;
};

}  // namespace llm::constrain
