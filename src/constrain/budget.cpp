#include "constrain/budget.h"

#include <algorithm>
#include <bit>

namespace llm::constrain {
namespace {

int32_t SatAdd(int32_t a, int32_t b) {
  if (a == Budget::kNever || b == Budget::kNever) return Budget::kNever;
  const int64_t s = int64_t{a} + b;
  return s >= Budget::kNever ? Budget::kNever : static_cast<int32_t>(s);
}

// Work on the fixed point (passes x ops) before it is taken as it stands:
// every value is the length of a real derivation at every pass (they only
// shrink), so an unfinished one is still a sound, consistent upper bound.
constexpr int64_t kMaxFixedPointWork = int64_t{1} << 26;

}  // namespace

Budget::Budget(const ByteProgram& p) {
  const size_t n_rules = p.rule_alts.size();
  std::vector<int32_t> rule_min(n_rules, kNever);
  auto alt_len = [&](int32_t a) {
    int32_t len = 0;
    for (int32_t q = a; p.ops[static_cast<size_t>(q)].kind != ByteOp::kEnd && len != kNever; ++q) {
      const ByteOp& op = p.ops[static_cast<size_t>(q)];
      len = SatAdd(len, op.kind == ByteOp::kBytes ? 1 : rule_min[static_cast<size_t>(op.arg)]);
    }
    return len;
  };
  // Rules mostly refer to rules defined after them: the last first.
  const int64_t passes = std::max<int64_t>(2, kMaxFixedPointWork / static_cast<int64_t>(p.ops.size() + 1));
  for (int64_t pass = 0; pass < passes; ++pass) {
    bool changed = false;
    for (size_t r = n_rules; r-- > 0;) {
      int32_t best = rule_min[r];
      for (int32_t a : p.rule_alts[r]) best = std::min(best, alt_len(a));
      if (best < rule_min[r]) {
        rule_min[r] = best;
        changed = true;
      }
    }
    if (!changed) break;
  }
  // tail_[q]: the rest of q's alternative, from the end backwards.
  tail_.assign(p.ops.size(), kNever);
  for (size_t q = p.ops.size(); q-- > 0;) {
    const ByteOp& op = p.ops[q];
    if (op.kind == ByteOp::kEnd) {
      tail_[q] = 0;
    } else if (q + 1 < p.ops.size()) {
      tail_[q] = SatAdd(op.kind == ByteOp::kBytes ? 1 : rule_min[static_cast<size_t>(op.arg)], tail_[q + 1]);
    }
  }
  // max_bytes_: rules in post-order from the root (a rule met again while
  // on the path is recursion: no bound), then the longest continuation
  // above each rule, callers first.
  std::vector<uint8_t> mark(n_rules, 0);  // 1 on the path, 2 done
  std::vector<int32_t> order;
  std::vector<std::pair<int32_t, size_t>> stack;  // (rule, next call site)
  std::vector<std::vector<std::pair<int32_t, int32_t>>> calls(n_rules);  // (callee, tail after the call)
  for (size_t r = 0; r < n_rules; ++r)
    for (int32_t a : p.rule_alts[r])
      for (int32_t q = a; p.ops[static_cast<size_t>(q)].kind != ByteOp::kEnd; ++q)
        if (p.ops[static_cast<size_t>(q)].kind == ByteOp::kRule)
          calls[r].emplace_back(p.ops[static_cast<size_t>(q)].arg, tail_[static_cast<size_t>(q) + 1]);
  bool recursive = false;
  stack.emplace_back(p.root, 0);
  mark[static_cast<size_t>(p.root)] = 1;
  while (!stack.empty() && !recursive) {
    auto& [r, i] = stack.back();
    if (i == calls[static_cast<size_t>(r)].size()) {
      mark[static_cast<size_t>(r)] = 2;
      order.push_back(r);
      stack.pop_back();
      continue;
    }
    const int32_t callee = calls[static_cast<size_t>(r)][i++].first;
    if (mark[static_cast<size_t>(callee)] == 1) recursive = true;
    else if (mark[static_cast<size_t>(callee)] == 0) {
      mark[static_cast<size_t>(callee)] = 1;
      stack.emplace_back(callee, 0);
    }
  }
  if (recursive) return;
  std::vector<int32_t> above(n_rules, -1);  // longest continuation above a rule's frame; -1 unreached
  above[static_cast<size_t>(p.root)] = 0;
  int32_t most = 0;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {  // callers before callees
    const size_t r = static_cast<size_t>(*it);
    if (above[r] < 0) continue;
    for (int32_t a : p.rule_alts[r])
      if (tail_[static_cast<size_t>(a)] != kNever) most = std::max(most, SatAdd(tail_[static_cast<size_t>(a)], above[r]));
    for (auto [callee, after] : calls[r])
      if (after != kNever) above[static_cast<size_t>(callee)] = std::max(above[static_cast<size_t>(callee)], SatAdd(after, above[r]));
  }
  max_bytes_ = most;
}

int32_t Budget::NodeBytes(Matcher& m, int32_t node) {
  if (node_bytes_.size() <= static_cast<size_t>(node)) node_bytes_.resize(m.arena_size(), -1);
  if (node_bytes_[static_cast<size_t>(node)] >= 0) return node_bytes_[static_cast<size_t>(node)];
  // Up the parents to a known one, then back down.
  std::vector<int32_t> chain;
  int32_t n = node;
  while (n >= 0 && node_bytes_[static_cast<size_t>(n)] < 0) {
    chain.push_back(n);
    n = m.NodeParent(n);
  }
  int32_t above = n < 0 ? 0 : node_bytes_[static_cast<size_t>(n)];
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    above = SatAdd(tail_[static_cast<size_t>(m.NodePos(*it))], above);
    node_bytes_[static_cast<size_t>(*it)] = above;
  }
  return node_bytes_[static_cast<size_t>(node)];
}

int32_t Budget::Bytes(Matcher& m, Matcher::StateId s) {
  if (s < 0) return kNever;
  if (bytes_.size() <= static_cast<size_t>(s)) bytes_.resize(static_cast<size_t>(s) + 1, -1);
  int32_t& memo = bytes_[static_cast<size_t>(s)];
  if (memo >= 0) return memo;
  int32_t best = m.IsAccepting(s) ? 0 : kNever;
  for (int32_t node : m.Stacks(s)) best = std::min(best, NodeBytes(m, node));
  // (memo is a reference into bytes_, which NodeBytes does not resize)
  memo = best;
  return best;
}

std::string Budget::ShortestCompletion(Matcher& m, Matcher::StateId s) {
  std::string w;
  for (int32_t d = Bytes(m, s); d != kNever && d > 0;) {
    // A byte of the set on top of a least stack leads to a state one byte
    // shorter; printable ASCII first (it merges into tokens as text does).
    int32_t pick = -1;
    for (int32_t node : m.Stacks(s)) {
      if (NodeBytes(m, node) != d) continue;
      const ByteSet& set = m.program().sets[static_cast<size_t>(m.program().ops[static_cast<size_t>(m.NodePos(node))].arg)];
      for (int pass = 0; pass < 2 && pick < 0; ++pass)
        for (int b = 0; b < 256 && pick < 0; ++b) {
          if (!set.Has(static_cast<uint8_t>(b)) || (pass == 0 && (b < 0x21 || b > 0x7E))) continue;
          const Matcher::StateId t = m.Step(s, static_cast<uint8_t>(b));
          if (t != Matcher::kDead && Bytes(m, t) < d) pick = b;
        }
      if (pick >= 0) break;
    }
    if (pick < 0) return {};  // (a matcher limit cut the stacks)
    w.push_back(static_cast<char>(pick));
    s = m.Step(s, static_cast<uint8_t>(pick));
    d = Bytes(m, s);
  }
  return w;
}

int32_t Budget::Tokens(Matcher& m, const TokenTrie& trie, Matcher::StateId s) {
  if (s < 0) return kNever;
  if (tokens_.size() <= static_cast<size_t>(s)) tokens_.resize(static_cast<size_t>(s) + 1, -1);
  if (tokens_[static_cast<size_t>(s)] >= 0) return tokens_[static_cast<size_t>(s)];
  if (m.IsAccepting(s)) return tokens_[static_cast<size_t>(s)] = 0;
  if (Bytes(m, s) > kMaxCompletionBytes) return tokens_[static_cast<size_t>(s)] = kNever;
  const std::string w = ShortestCompletion(m, s);
  if (w.empty()) return tokens_[static_cast<size_t>(s)] = kNever;
  // seg[i]: fewest tokens spelling w[i..]; first[i]: the token that starts it.
  const size_t n = w.size();
  std::vector<int32_t> seg(n + 1, kNever), first(n + 1, -1);
  seg[n] = 0;
  for (size_t i = n; i-- > 0;) {
    trie.TokensAlong(std::string_view(w).substr(i), [&](int32_t t) {
      const size_t len = trie.piece(t).size();
      const int32_t c = SatAdd(seg[i + len], 1);
      if (c < seg[i] || (c == seg[i] && len > trie.piece(first[i]).size())) {
        seg[i] = c;
        first[i] = t;
      }
    });
  }
  if (seg[0] == kNever) return tokens_[static_cast<size_t>(s)] = kNever;
  // Follow the segmentation; a state met with a value already uses that.
  std::vector<Matcher::StateId> path;
  size_t i = 0;
  Matcher::StateId cur = s;
  int32_t base = 0;
  while (true) {
    if (tokens_.size() <= static_cast<size_t>(cur)) tokens_.resize(static_cast<size_t>(cur) + 1, -1);
    if (tokens_[static_cast<size_t>(cur)] >= 0) {
      base = tokens_[static_cast<size_t>(cur)];
      break;
    }
    if (i == n || m.IsAccepting(cur)) {
      base = 0;
      if (m.IsAccepting(cur)) tokens_[static_cast<size_t>(cur)] = 0;
      if (!m.IsAccepting(cur)) base = kNever;  // (cannot happen: w completes s)
      break;
    }
    path.push_back(cur);
    const std::string& piece = trie.piece(first[i]);
    cur = m.StepBytes(cur, piece);
    i += piece.size();
    if (cur == Matcher::kDead) {
      base = kNever;
      break;
    }
  }
  for (auto it = path.rbegin(); it != path.rend(); ++it) {
    base = SatAdd(base, 1);
    tokens_[static_cast<size_t>(*it)] = base;
  }
  return tokens_[static_cast<size_t>(s)];
}

const std::vector<uint16_t>& Budget::Needs(Matcher& m, const TokenTrie& trie, Matcher::StateId s,
                                           const std::vector<uint64_t>& mask) {
  auto it = needs_.find(s);
  if (it != needs_.end()) return it->second;
  if (needs_.size() >= kKeptNeeds) needs_.clear();
  std::vector<uint16_t> need(static_cast<size_t>(trie.n_vocab()), kNeedCap);
  // One trie walk steps shared prefixes once; the last state asked is
  // asked again most of the time (a string's characters lead back to it).
  Matcher::StateId last = Matcher::kDead;
  int32_t last_need = kNever;
  trie.ForEachLive(m, s, [&](int32_t t, Matcher::StateId next) {
    if (!((mask[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1)) return;
    if (next != last) {
      last = next;
      last_need = Tokens(m, trie, next);
    }
    need[static_cast<size_t>(t)] = static_cast<uint16_t>(std::min<int32_t>(last_need, kNeedCap));
  });
  return needs_.emplace(s, std::move(need)).first->second;
}

const std::vector<uint64_t>& Budget::Filter(Matcher& m, const TokenTrie& trie, Matcher::StateId s,
                                            const std::vector<uint64_t>& mask, int32_t remaining,
                                            std::vector<uint64_t>* out) {
  if (s < 0) return mask;
  // No state can need more than max_bytes_ bytes, so no more tokens either
  // when every byte is a token.
  if (max_bytes_ != kNever && trie.has_every_byte() && max_bytes_ <= remaining - 2) return mask;
  if (max_need_.size() <= static_cast<size_t>(s)) max_need_.resize(static_cast<size_t>(s) + 1, -1);
  // The mask given may be a filtered copy of the state's own (repeated keys
  // out): the largest need over it is at most the one kept here.
  if (max_need_[static_cast<size_t>(s)] >= 0 && max_need_[static_cast<size_t>(s)] <= remaining - 2 &&
      max_need_[static_cast<size_t>(s)] != kNever)
    return mask;
  const std::vector<uint16_t>& need = Needs(m, trie, s, mask);
  int32_t most = 0;
  bool taken = false;
  *out = mask;
  for (size_t w = 0; w < mask.size(); ++w)
    for (uint64_t bits = mask[w]; bits != 0; bits &= bits - 1) {
      const int32_t t = static_cast<int32_t>(w * 64 + std::countr_zero(bits));
      if (t >= trie.n_vocab() || trie.IsEog(t)) continue;
      int32_t nd = need[static_cast<size_t>(t)];
      if (nd == kNeedCap) nd = remaining - 2 >= kNeedCap && Allows(m, trie, s, t, remaining) ? kNeedCap : kNever;
      most = std::max(most, nd);
      if (nd == kNever || nd > remaining - 2) {
        (*out)[w] &= ~(uint64_t{1} << (t & 63));
        taken = true;
      }
    }
  if (max_need_[static_cast<size_t>(s)] < 0) max_need_[static_cast<size_t>(s)] = most;
  if (!taken) return mask;
  if (std::all_of(out->begin(), out->end(), [](uint64_t x) { return x == 0; })) return mask;
  return *out;
}

bool Budget::Allows(Matcher& m, const TokenTrie& trie, Matcher::StateId s, int32_t t, int32_t remaining) {
  const Matcher::StateId next = m.StepBytes(s, trie.piece(t));
  const int32_t nd = Tokens(m, trie, next);
  return nd != kNever && nd <= remaining - 2;
}

}  // namespace llm::constrain
