// An exact matcher for context-free grammars over bytes (issue 20): the
// state is a set of stacks of grammar positions, as in a pushdown automaton
// run on all its nondeterministic branches at once (GBNF's approach). Left
// recursion is rejected at compile time (GrammarBuilder::Finish), so every
// stack's expansion terminates.
//
// Stacks are persistent linked lists of (position, parent) nodes, hash-consed
// in an arena, so equal stacks are equal ids, a state is a sorted vector of
// node ids, and states are interned into ids too. That gives:
//  - position-indexed history: the state after each accepted token is one
//    id; Rollback(n) just drops the last n ids, no recomputation;
//  - cheap caching: the allowed-token mask of a state (token_trie.h) is a
//    function of its id, and decoding revisits the same few states (inside
//    a JSON string, every character leads back to the same state).
//
// Not thread-safe: one Matcher per sequence, used by the engine thread.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "constrain/byte_program.h"
#include "util/status.h"

namespace llm::constrain {

// Bounds on matcher work per state and in total (hostile grammars such as
// deeply ambiguous ones can make the stack set explode); reaching them makes
// the bytes being matched fail, never a crash or an unbounded allocation.
inline constexpr size_t kMaxStacksPerState = 4096;
inline constexpr size_t kMaxArenaNodes = size_t{1} << 22;

class Matcher {
 public:
  using StateId = int32_t;
  static constexpr StateId kDead = -1;  // no stack left: nothing can follow

  explicit Matcher(std::shared_ptr<const ByteProgram> program);

  // ---- state-level interface (used by the mask walk and by tests)
  StateId Initial() const { return initial_; }
  // The state after one more byte, or kDead.
  StateId Step(StateId s, uint8_t byte);
  // s's row of next states by byte (s >= 0), for walks that step one state
  // by many bytes: an entry may be kUnknown (then call Step). Stays valid
  // while the matcher lives.
  static constexpr StateId kUnknown = -2;
  const StateId* Row(StateId s) {
    if (trans_[static_cast<size_t>(s)] == nullptr) Step(s, 0);
    return trans_[static_cast<size_t>(s)]->data();
  }
  // The state after `bytes`, or kDead.
  StateId StepBytes(StateId s, std::string_view bytes);
  // An empty stack is in the state: the bytes so far form a complete match.
  bool IsAccepting(StateId s) const;
  // Some byte can follow (a complete match may still be extendable).
  bool CanContinue(StateId s) const;
  // True when the whole of `text` matches the grammar.
  bool Matches(std::string_view text);

  // ---- token history: the state after each accepted token
  // Accepts one token's bytes; false (history unchanged) when they cannot
  // extend the output.
  bool Accept(std::string_view bytes);
  void Rollback(size_t n_tokens);  // n_tokens <= n_accepted()
  size_t n_accepted() const { return history_.size() - 1; }
  StateId Current() const { return history_.back(); }

  // Stacks in the arena (for limits and tests).
  size_t arena_size() const { return nodes_.size(); }
  // A Step() failed because of kMaxStacksPerState / kMaxArenaNodes rather
  // than the grammar: a highly ambiguous grammar (the stack set grows with
  // the number of parses) stopped matching early.
  bool limit_hit() const { return limit_hit_; }
  const ByteProgram& program() const { return *program_; }

  // ---- internals exposed to the mask walk (token_trie.cpp) and the mask cache
  // The stacks of a state: node ids whose top op is kBytes.
  std::span<const int32_t> Stacks(StateId s) const;
  // A stack node's op position and its parent node (-1: the root frame).
  int32_t NodePos(int32_t node) const { return nodes_[static_cast<size_t>(node)].pos; }
  int32_t NodeParent(int32_t node) const { return nodes_[static_cast<size_t>(node)].parent; }
  // The state whose stacks are s's with the position p of every node (the
  // parents' too) replaced by map(p), and s's accept flag; s itself when map
  // changes nothing, or when the arena is at its limit. `map` must send a
  // position to one with the same op (mask_cache.h: one copy of a counted
  // repetition to another).
  template <class Map>
  StateId MapPositions(StateId s, Map&& map);

 private:
  struct Node {
    int32_t pos;     // offset into program_->ops
    int32_t parent;  // node to continue with after this rule's alternative ends; -1 = root
  };
  int32_t MakeNode(int32_t pos, int32_t parent);
  // Adds the kBytes-topped stacks reachable from node without consuming
  // input; sets *accept when the empty stack is reachable.
  void Expand(int32_t pos, int32_t parent, std::vector<int32_t>* out, bool* accept);
  const std::vector<int32_t>& Successors(int32_t node);  // memoised: stacks after the node's byte
  StateId Intern(std::vector<int32_t>* stacks, bool accept);
  void FillRow(StateId s);  // the first step from s: every byte's next state

  std::shared_ptr<const ByteProgram> program_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> node_index_;
  std::vector<std::vector<int32_t>> succ_;   // (nodes) memoised successors
  std::vector<uint8_t> succ_done_;           // (nodes)
  std::vector<uint8_t> succ_accept_;         // (nodes) successors include the empty stack
  struct State {
    std::vector<int32_t> stacks;  // sorted node ids
    bool accept;
  };
  std::vector<State> states_;
  std::unordered_map<uint64_t, std::vector<StateId>> state_index_;  // hash -> candidates
  // (states) dense transitions, allocated on a state's first Step; kUnknown until computed.
  std::vector<std::unique_ptr<std::array<StateId, 256>>> trans_;
  std::vector<StateId> history_;                                    // (1 + accepted tokens)
  StateId initial_ = kDead;
  std::vector<int32_t> scratch_;
  std::vector<std::pair<int32_t, int32_t>> work_;  // Expand's worklist
  std::unordered_set<uint64_t> visited_;           // Expand's (pos, parent) seen
  std::vector<uint32_t> seen_;  // (nodes) generation stamps for dedupe
  uint32_t gen_ = 0;
  bool limit_hit_ = false;
};

template <class Map>
Matcher::StateId Matcher::MapPositions(StateId s, Map&& map) {
  if (s < 0 || nodes_.size() > kMaxArenaNodes) return s;
  std::vector<int32_t> out;
  std::vector<int32_t> chain;
  bool changed = false;
  for (int32_t node : states_[static_cast<size_t>(s)].stacks) {
    chain.clear();
    for (int32_t n = node; n >= 0; n = nodes_[static_cast<size_t>(n)].parent) chain.push_back(n);
    int32_t parent = -1;
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      const int32_t pos = nodes_[static_cast<size_t>(*it)].pos;
      const int32_t mapped = map(pos);
      changed |= mapped != pos;
      parent = MakeNode(mapped, parent);
    }
    out.push_back(parent);
  }
  if (!changed) return s;
  return Intern(&out, states_[static_cast<size_t>(s)].accept);
}

}  // namespace llm::constrain
