// The allowed-token masks of one compiled constraint's states (issue 20),
// cached, with states deep inside a long counted repetition folded together.
//
// Why folding: JSON-Schema strings, digit runs and whitespace are counted
// repetitions (char{0,N}), written out as N copies (grammar.h), so every
// character of a string is a new matcher state and a cache keyed by state
// alone never hits at batch 1: each token paid a walk of the whole token
// trie. But a state with k copies of X left behaves, for a token that can
// take at most L bytes from the repetition, exactly like one with any other
// k' > L left: the token cannot reach the end of the count either way. So:
//
//   state s ─fold─► s' (every copy with k copies left moved to the copy
//                       with S left; S = min(longest such run, R) + 1)
//   mask(s) = mask(s') for every token whose run of X's bytes is
//             < min(k, S), and the tokens with longer runs (at most
//             kMaxFixups per repetition for k >= S) are stepped through s
//             itself (a walk of the trie's subtrees that hold them). Copies
//             with k < S fold while that walk stays well under a whole one.
//
// Exact both ways (test_constrain checks every count of several repetitions
// token by token against brute force). A token's "run" is the length of its
// longest prefix made of bytes X can consume (RepeatChain::bytes), an upper
// bound on what it can take from the repetition.
//
// Engine thread only, like the matcher it reads.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "constrain/matcher.h"
#include "constrain/token_trie.h"

namespace llm::constrain {

// Tokens re-checked by stepping per folded repetition; R is chosen per byte
// set so that at most this many tokens have a longer run.
inline constexpr size_t kMaxFixups = 256;
// Masks kept per program before the cache starts afresh.
inline constexpr size_t kMaxCachedMasks = 256;

class MaskCache {
 public:
  // `trie` must outlive the cache; every call passes the matcher of the
  // program the cache belongs to.
  explicit MaskCache(const TokenTrie& trie) : trie_(trie) {}

  // The mask of state s, (ceil(n_vocab / 64)) words (TokenTrie::ComputeMask's
  // meaning). The reference stays valid until the next call.
  const std::vector<uint64_t>& Get(Matcher& m, Matcher::StateId s);

  struct Stats {
    uint64_t hits = 0;    // found by state
    uint64_t walks = 0;   // trie walks
    uint64_t folded = 0;  // answered from a folded state (plus fix-ups)
  };
  const Stats& stats() const { return stats_; }

 private:
  struct Fold {
    int32_t level = 0;             // S: copies left that states fold onto
    int32_t min_fold = 0;          // copies with at least this many left fold (<= level)
    std::shared_ptr<const TokenRuns> runs;  // over the repetition's bytes
  };
  void Index(const ByteProgram& p);
  const Fold& FoldFor(const ByteProgram& p, int32_t chain);
  Fold MakeFold(const ByteSet& bytes) const;
  void Walk(Matcher& m, Matcher::StateId s, std::vector<uint64_t>* mask);

  const TokenTrie& trie_;
  const ByteProgram* indexed_ = nullptr;
  std::vector<int32_t> op_chain_;  // (ops) the repetition an op is a copy of, or -1
  std::vector<int32_t> op_left_;   // (ops) copies left, the op's own included
  std::vector<Fold> folds_;        // (chains) made on first use (runs == nullptr until then)
  std::unordered_map<Matcher::StateId, std::vector<uint64_t>> masks_;
  Stats stats_;
};

}  // namespace llm::constrain
