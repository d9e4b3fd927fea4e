#include "constrain/mask_cache.h"

#include <algorithm>

namespace llm::constrain {

// Which copy of which repetition each op belongs to. Copies of one
// repetition are disjoint rules, so an op is in at most one.
void MaskCache::Index(const ByteProgram& p) {
  indexed_ = &p;
  op_chain_.assign(p.ops.size(), -1);
  op_left_.assign(p.ops.size(), 0);
  folds_.assign(p.chains.size(), Fold{});
  for (size_t c = 0; c < p.chains.size(); ++c) {
    const RepeatChain& ch = p.chains[c];
    for (int32_t i = 0; i < ch.min; ++i) {
      for (int32_t o = 0; o < ch.body_len; ++o) {
        const size_t at = static_cast<size_t>(ch.seq_start + i * ch.body_len + o);
        op_chain_[at] = static_cast<int32_t>(c);
        op_left_[at] = ch.min - i;
      }
    }
    // Optional copy k's ops and, from k = 2, its reference to copy k - 1
    // (a node can stand on it as the continuation after a call).
    for (size_t k = 1; k <= ch.opt_start.size(); ++k) {
      const int32_t last = k >= 2 ? ch.body_len : ch.body_len - 1;
      for (int32_t o = 0; o <= last; ++o) {
        const size_t at = static_cast<size_t>(ch.opt_start[k - 1] + o);
        op_chain_[at] = static_cast<int32_t>(c);
        op_left_[at] = static_cast<int32_t>(k);
      }
    }
  }
}

MaskCache::Fold MaskCache::MakeFold(const ByteSet& bytes) const {
  Fold f;
  f.runs = trie_.Runs(bytes);
  const std::vector<int64_t>& tokens_at = f.runs->tokens_at;
  // The smallest R with at most kMaxFixups runs above it.
  const int32_t longest = static_cast<int32_t>(tokens_at.size()) - 1;
  int32_t r = longest;
  size_t above = 0;
  while (r > 1 && above + static_cast<size_t>(tokens_at[static_cast<size_t>(r)]) <= kMaxFixups) above += tokens_at[static_cast<size_t>(r--)];
  // A token that can take at most `run` bytes from the repetition takes at
  // most `run` copies, the one its state stands in included (a state inside
  // a copy has a byte op on top, so the token's first byte is that copy's).
  // A required count then behaves alike for every left > run, an optional
  // one for every left >= run. So a copy with k left folds onto the level's
  // copy for every token with run < min(k, level), and the tokens with
  // longer runs are stepped (level >= 2: the copy folded onto must have its
  // reference to the next, RepeatChain).
  f.level = std::max(2, std::min(longest, r) + 1);
  // Copies with fewer than `level` left fold too while the walk over the
  // subtrees that hold their tokens with run >= k (AllowKeyed) stays well
  // under a walk of the whole trie.
  f.min_fold = f.level;
  int64_t nodes = 0;
  for (int32_t k = longest; k >= 2; --k) {
    nodes += f.runs->nodes_at[static_cast<size_t>(k)];
    if (k <= f.level) {
      if (nodes > static_cast<int64_t>(trie_.n_nodes()) / 3) break;
      f.min_fold = k;
    }
  }
  return f;
}

// The trie keeps the runs per byte set (every string of every schema has the
// same bytes), so a repetition's fold is a lookup and a short scan.
const MaskCache::Fold& MaskCache::FoldFor(const ByteProgram& p, int32_t chain) {
  Fold& f = folds_[static_cast<size_t>(chain)];
  if (f.runs == nullptr) f = MakeFold(p.chains[static_cast<size_t>(chain)].bytes);
  return f;
}

void MaskCache::Walk(Matcher& m, Matcher::StateId s, std::vector<uint64_t>* mask) {
  ++stats_.walks;
  trie_.ComputeMask(m, s, mask);
}

const std::vector<uint64_t>& MaskCache::Get(Matcher& m, Matcher::StateId s) {
  auto it = masks_.find(s);
  if (it != masks_.end()) {
    ++stats_.hits;
    return it->second;
  }
  // A bounded cache: a pathological grammar must not grow it without end.
  if (masks_.size() >= kMaxCachedMasks) masks_.clear();
  const ByteProgram& p = m.program();
  if (indexed_ != &p) Index(p);
  // Repetitions moved to another copy, each with the fewest copies left
  // among its moved frames, before or after the move (that bounds which
  // tokens must be stepped).
  std::vector<std::pair<int32_t, int32_t>> folded;
  const Matcher::StateId f = p.chains.empty() ? s : m.MapPositions(s, [&](int32_t pos) {
    const int32_t c = op_chain_[static_cast<size_t>(pos)];
    if (c < 0) return pos;
    const int32_t left = op_left_[static_cast<size_t>(pos)];
    const Fold& fold = FoldFor(p, c);
    const RepeatChain& ch = p.chains[static_cast<size_t>(c)];
    const bool required = pos >= ch.seq_start && pos < ch.seq_start + ch.min * ch.body_len;
    // The copy to move to must exist: the count has `min` required copies
    // and opt_start.size() optional ones (and an optional copy folded onto
    // needs its reference to the next: at least 2).
    const int32_t to = std::min(fold.level, required ? ch.min : static_cast<int32_t>(ch.opt_start.size()));
    if (left == to || left < fold.min_fold || (!required && to < 2)) return pos;
    const int32_t bound = std::min(left, to);
    auto it = std::find_if(folded.begin(), folded.end(), [&](const auto& e) { return e.first == c; });
    if (it == folded.end()) {
      folded.emplace_back(c, bound);
    } else {
      it->second = std::min(it->second, bound);
    }
    // Required copy i = min - left moves to min - to; optional copy k = left to k = to.
    return required ? pos + (left - to) * ch.body_len
                    : ch.opt_start[static_cast<size_t>(to) - 1] + (pos - ch.opt_start[static_cast<size_t>(left) - 1]);
  });
  std::vector<uint64_t>& mask = masks_[s];
  if (f == s) {
    Walk(m, s, &mask);
    return mask;
  }
  ++stats_.folded;
  auto base = masks_.find(f);
  if (base == masks_.end()) {
    base = masks_.emplace(f, std::vector<uint64_t>()).first;
    Walk(m, f, &base->second);
  }
  mask = base->second;
  auto set = [&](int32_t t, bool on) {
    uint64_t& w = mask[static_cast<size_t>(t) >> 6];
    const uint64_t bit = uint64_t{1} << (t & 63);
    w = on ? (w | bit) : (w & ~bit);
  };
  // The tokens the fold does not vouch for: cleared, then set where their
  // bytes lead to a live state from s (a walk of their subtrees only).
  for (const auto& [c, fewest] : folded) {
    const Fold& fold = FoldFor(p, c);
    const int32_t from = fewest;
    const TokenRuns& runs = *fold.runs;
    for (size_t i = 0; i < runs.by_run.size() && runs.runs[i] >= from; ++i) set(runs.by_run[i], false);
  }
  for (const auto& [c, fewest] : folded) {
    const Fold& fold = FoldFor(p, c);
    trie_.AllowKeyed(m, s, fold.runs->run, fold.runs->sub_max, fewest, &mask);
  }
  // End-of-generation tokens: allowed when the output is complete, or when
  // nothing else is (ComputeMask's rule), judged on s's own tokens.
  for (int32_t t : trie_.eog()) set(t, false);
  bool any = false;
  for (uint64_t w : mask) any |= w != 0;
  if (m.IsAccepting(s) || !any) {
    for (int32_t t : trie_.eog()) set(t, true);
  }
  return mask;
}

}  // namespace llm::constrain
