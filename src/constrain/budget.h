// Budget-aware masks (issue 29): how short a matcher state's completion can
// be, in bytes and in tokens, and the tokens that still let the output close
// within the tokens a request has left.
//
//   Bytes(s):  the shortest completion's length in bytes, exact for the
//              grammar: per op position the shortest string its
//              alternative's rest derives (a fixed point over the rules),
//              summed along each stack, least over the stacks.
//   Tokens(s): the length of a real token path from s to a complete match:
//              a shortest byte completion w, segmented into the fewest
//              vocabulary tokens (a DP over the trie). Every step of that
//              path is a token the matcher accepts, so Tokens(s) is an
//              upper bound on the true minimum, and it is consistent: the
//              path's first token t leads to a state with Tokens = Tokens(s)
//              - 1 (the rest of w is a shortest completion there, and its
//              segmentation the rest of the DP's).
//   Filter:    with R tokens left (this one included), a token t other than
//              end-of-generation is allowed iff Tokens(after t) + 2 <= R:
//              t, the completion, and the end token all fit. End tokens
//              stay as the mask has them (allowed exactly when complete).
//
// The guarantee: a request whose max_tokens >= Tokens(initial) + 1 keeps a
// non-empty mask at every step, and every sampled path ends with the end
// token within max_tokens (finish reason stop), because the path's first
// token always passes the filter and every allowed token keeps
// Tokens <= R - 2. Where a state has no token path (a vocabulary lacking
// some byte, or one longer than kMaxCompletionBytes) Tokens is kNever: the
// tokens leading there are taken out, unless nothing would be left, when the
// mask is left alone. The filter is skipped when the budget exceeds
// max_bytes() and the vocabulary has_every_byte(): no state then needs more
// tokens than bytes (unless its shortest completion runs through a control
// byte or a code point above U+3FFFF without a token of its own). The
// duplicate-key
// filter (json_keys.h) can forbid a shortest completion that writes a key
// twice (free keys under minProperties); the filter falls back to the
// unfiltered mask if nothing passes.
//
// One Budget per SharedMatcher (constraint.h): engine thread only.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "constrain/matcher.h"
#include "constrain/token_trie.h"

namespace llm::constrain {

class Budget {
 public:
  static constexpr int32_t kNever = INT32_MAX;  // no completion (or none through the vocabulary)

  explicit Budget(const ByteProgram& program);

  int32_t Bytes(Matcher& m, Matcher::StateId s);
  // A shortest completion of s (Bytes(s) bytes; empty when s is accepting
  // or has none).
  std::string ShortestCompletion(Matcher& m, Matcher::StateId s);
  int32_t Tokens(Matcher& m, const TokenTrie& trie, Matcher::StateId s);

  int32_t max_bytes() const { return max_bytes_; }
  // `mask` (s's allowed tokens) less the tokens that cannot close in time
  // with `remaining` tokens left: `mask` itself when none is taken out or
  // when nothing would be left, else *out.
  const std::vector<uint64_t>& Filter(Matcher& m, const TokenTrie& trie, Matcher::StateId s,
                                      const std::vector<uint64_t>& mask, int32_t remaining,
                                      std::vector<uint64_t>* out);
  // Whether token t (not an end token) may follow s with `remaining` left.
  bool Allows(Matcher& m, const TokenTrie& trie, Matcher::StateId s, int32_t t, int32_t remaining);

 private:
  int32_t NodeBytes(Matcher& m, int32_t node);
  // Tokens(after t) for every token of `mask`, kept for a few states.
  // (saturated at kNeedCap: a token there is checked on its own.)
  static constexpr uint16_t kNeedCap = 65535;
  const std::vector<uint16_t>& Needs(Matcher& m, const TokenTrie& trie, Matcher::StateId s,
                                     const std::vector<uint64_t>& mask);

  // The most bytes any state's shortest completion can need: finite for a
  // grammar without recursion (a longest path over the rule call graph),
  // else kNever. With every byte a token (Tokens <= Bytes), a budget above
  // it needs no filter at all.
  int32_t max_bytes_ = kNever;
  std::vector<int32_t> tail_;        // (ops) shortest bytes from this op to its alternative's end
  std::vector<int32_t> node_bytes_;  // (arena nodes) memo: tail + the parents' tails; -1 unknown
  std::vector<int32_t> bytes_;       // (states) memo; -1 unknown
  std::vector<int32_t> tokens_;      // (states) memo; -1 unknown
  std::vector<int32_t> max_need_;    // (states) the largest need over the state's mask; -1 unknown
  std::unordered_map<Matcher::StateId, std::vector<uint16_t>> needs_;  // few states (kKeptNeeds)
};

inline constexpr size_t kKeptNeeds = 64;  // x n_vocab x 2 bytes (6 MB for SmolLM2)
// Completions longer than this (a hostile schema's minItems x minLength) are
// not written out: Tokens is kNever there, as if none existed.
inline constexpr int32_t kMaxCompletionBytes = 1 << 16;

}  // namespace llm::constrain
