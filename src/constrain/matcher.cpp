#include "constrain/matcher.h"

#include <algorithm>
#include <bit>

namespace llm::constrain {
namespace {

uint64_t NodeKey(int32_t pos, int32_t parent) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(pos)) << 32) | static_cast<uint32_t>(parent + 1);
}

uint64_t HashStacks(const std::vector<int32_t>& v, bool accept) {
  uint64_t h = accept ? 0x9E3779B97F4A7C15ull : 0x51ED270B27C3A1F5ull;
  for (int32_t x : v) {
    h ^= static_cast<uint64_t>(static_cast<uint32_t>(x)) + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  }
  return h;
}

}  // namespace

Matcher::Matcher(std::shared_ptr<const ByteProgram> program) : program_(std::move(program)) {
  std::vector<int32_t> stacks;
  bool accept = false;
  for (int32_t a : program_->rule_alts[static_cast<size_t>(program_->root)]) Expand(a, -1, &stacks, &accept);
  initial_ = Intern(&stacks, accept);
  history_.push_back(initial_);
}

int32_t Matcher::MakeNode(int32_t pos, int32_t parent) {
  auto [it, fresh] = node_index_.emplace(NodeKey(pos, parent), static_cast<int32_t>(nodes_.size()));
  if (fresh) {
    nodes_.push_back({pos, parent});
    succ_.emplace_back();
    succ_done_.push_back(0);
    succ_accept_.push_back(0);
  }
  return it->second;
}

// Follows rule references and alternative ends from (pos, parent) until
// every branch stands on a byte set (a stack for the state) or has emptied
// its stack (the input so far is a complete match). A reference whose next
// op ends the alternative continues straight into the parent (a tail call),
// so right recursion such as x ::= "a" x | "" keeps stacks the same depth.
// Left recursion is rejected at compile time, so this terminates; the
// visited set keeps ambiguous grammars from repeating work.
void Matcher::Expand(int32_t pos, int32_t parent, std::vector<int32_t>* out, bool* accept) {
  const std::vector<ByteOp>& ops = program_->ops;
  visited_.clear();
  work_.clear();
  work_.emplace_back(pos, parent);
  while (!work_.empty()) {
    auto [p, par] = work_.back();
    work_.pop_back();
    if (!visited_.insert(NodeKey(p, par)).second) continue;
    const ByteOp& op = ops[static_cast<size_t>(p)];
    switch (op.kind) {
      case ByteOp::kBytes:
        out->push_back(MakeNode(p, par));
        break;
      case ByteOp::kEnd:
        if (par < 0) {
          *accept = true;
        } else {
          const Node& n = nodes_[static_cast<size_t>(par)];
          work_.emplace_back(n.pos, n.parent);
        }
        break;
      case ByteOp::kRule: {
        const int32_t cont = ops[static_cast<size_t>(p) + 1].kind == ByteOp::kEnd ? par : MakeNode(p + 1, par);
        const auto& alts = program_->rule_alts[static_cast<size_t>(op.arg)];
        for (auto a = alts.rbegin(); a != alts.rend(); ++a) work_.emplace_back(*a, cont);
        break;
      }
    }
  }
}

const std::vector<int32_t>& Matcher::Successors(int32_t node) {
  if (!succ_done_[static_cast<size_t>(node)]) {
    const Node n = nodes_[static_cast<size_t>(node)];
    std::vector<int32_t> out;
    bool accept = false;
    Expand(n.pos + 1, n.parent, &out, &accept);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    succ_[static_cast<size_t>(node)] = std::move(out);
    succ_accept_[static_cast<size_t>(node)] = accept;
    succ_done_[static_cast<size_t>(node)] = 1;
  }
  return succ_[static_cast<size_t>(node)];
}

Matcher::StateId Matcher::Intern(std::vector<int32_t>* stacks, bool accept) {
  if (stacks->empty() && !accept) return kDead;
  std::sort(stacks->begin(), stacks->end());
  stacks->erase(std::unique(stacks->begin(), stacks->end()), stacks->end());
  const uint64_t h = HashStacks(*stacks, accept);
  auto& bucket = state_index_[h];
  for (StateId s : bucket) {
    if (states_[static_cast<size_t>(s)].accept == accept && states_[static_cast<size_t>(s)].stacks == *stacks) return s;
  }
  const StateId id = static_cast<StateId>(states_.size());
  states_.push_back({*stacks, accept});
  trans_.emplace_back();
  bucket.push_back(id);
  return id;
}

// A state's first step fills its whole row: bytes that the same stacks
// accept lead to the same state, and a state has few distinct such sets
// (inside a JSON string: the string's characters, the quote, the
// backslash, the rest), so the row costs a handful of successor
// computations rather than 256. States with more than 64 stacks fill
// their row one byte at a time.
void Matcher::FillRow(StateId s) {
  const std::vector<int32_t>& stacks = states_[static_cast<size_t>(s)].stacks;
  if (stacks.size() > 64) return;
  std::array<uint64_t, 256> sig{};
  for (size_t i = 0; i < stacks.size(); ++i) {
    const ByteOp& op = program_->ops[static_cast<size_t>(nodes_[static_cast<size_t>(stacks[i])].pos)];
    const ByteSet& set = program_->sets[static_cast<size_t>(op.arg)];
    for (int w = 0; w < 4; ++w) {
      for (uint64_t bits = set.bits[static_cast<size_t>(w)]; bits != 0; bits &= bits - 1) {
        sig[static_cast<size_t>(w * 64 + std::countr_zero(bits))] |= uint64_t{1} << i;
      }
    }
  }
  std::vector<std::pair<uint64_t, StateId>> done;
  for (int b = 0; b < 256; ++b) {
    const uint64_t g = sig[static_cast<size_t>(b)];
    StateId r = kDead;
    if (g != 0) {
      auto it = std::find_if(done.begin(), done.end(), [&](const auto& e) { return e.first == g; });
      if (it != done.end()) {
        r = it->second;
      } else {
        const bool hit_before = limit_hit_;
        r = Step(s, static_cast<uint8_t>(b));  // computes this byte's slot
        // A byte that only reaches a limit stays unknown: limit_hit() is
        // for the bytes a caller steps, so it is computed (and flagged)
        // when one does.
        if (!hit_before && limit_hit_) {
          limit_hit_ = false;
          r = kUnknown;
        }
        done.emplace_back(g, r);
      }
    }
    (*trans_[static_cast<size_t>(s)])[static_cast<size_t>(b)] = r;
  }
}

Matcher::StateId Matcher::Step(StateId s, uint8_t byte) {
  if (s < 0) return kDead;
  if (trans_[static_cast<size_t>(s)] == nullptr) {
    trans_[static_cast<size_t>(s)] = std::make_unique<std::array<StateId, 256>>();
    trans_[static_cast<size_t>(s)]->fill(kUnknown);
    FillRow(s);
  }
  StateId& slot = (*trans_[static_cast<size_t>(s)])[byte];
  if (slot != kUnknown) return slot;
  std::vector<int32_t> next;
  bool accept = false;
  // Copy: Successors() may grow states_ indirectly through nodes_ only, but
  // keep the loop independent of any reallocation.
  const std::vector<int32_t> stacks = states_[static_cast<size_t>(s)].stacks;
  for (int32_t node : stacks) {
    const ByteOp& op = program_->ops[static_cast<size_t>(nodes_[static_cast<size_t>(node)].pos)];
    if (!program_->sets[static_cast<size_t>(op.arg)].Has(byte)) continue;
    const std::vector<int32_t>& succ = Successors(node);
    next.insert(next.end(), succ.begin(), succ.end());
    accept |= succ_accept_[static_cast<size_t>(node)] != 0;
  }
  StateId r;
  if (nodes_.size() > kMaxArenaNodes || next.size() > kMaxStacksPerState * 4) {
    r = kDead;  // the documented limit: an explosive grammar stops matching
    limit_hit_ = true;
  } else {
    std::sort(next.begin(), next.end());
    next.erase(std::unique(next.begin(), next.end()), next.end());
    if (next.size() > kMaxStacksPerState) {
      r = kDead;
      limit_hit_ = true;
    } else {
      r = Intern(&next, accept);
    }
  }
  // Re-fetch: Intern() may have grown trans_.
  (*trans_[static_cast<size_t>(s)])[byte] = r;
  return r;
}

Matcher::StateId Matcher::StepBytes(StateId s, std::string_view bytes) {
  for (char c : bytes) {
    s = Step(s, static_cast<uint8_t>(c));
    if (s < 0) return kDead;
  }
  return s;
}

bool Matcher::IsAccepting(StateId s) const { return s >= 0 && states_[static_cast<size_t>(s)].accept; }

bool Matcher::CanContinue(StateId s) const { return s >= 0 && !states_[static_cast<size_t>(s)].stacks.empty(); }

std::span<const int32_t> Matcher::Stacks(StateId s) const {
  if (s < 0) return {};
  return states_[static_cast<size_t>(s)].stacks;
}

bool Matcher::Matches(std::string_view text) { return IsAccepting(StepBytes(initial_, text)); }

bool Matcher::Accept(std::string_view bytes) {
  const StateId s = StepBytes(Current(), bytes);
  if (s < 0) return false;
  history_.push_back(s);
  return true;
}

void Matcher::Rollback(size_t n_tokens) {
  n_tokens = std::min(n_tokens, n_accepted());
  history_.resize(history_.size() - n_tokens);
}

}  // namespace llm::constrain
