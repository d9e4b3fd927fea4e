#include "constrain/mask_cache.h"

#include <algorithm>

namespace llm::constrain {

// Which copy of which repetition each op belongs to. Copies of one
// repetition are disjoint rules, so an op is in at most one.
void MaskCache::Index(const ByteProgram& p) {
  indexed_ = &p;
  op_chain_.assign(p.ops.size(), -1);
  op_left_.assign(p.ops.size(), 0);
  chain_fold_.assign(p.chains.size(), -1);
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
  const int32_t n = trie_.n_vocab();
  std::vector<int32_t> run(static_cast<size_t>(n), 0);
  std::vector<int32_t> hist;  // hist[r]: tokens whose run is r
  for (int32_t t = 0; t < n; ++t) {
    if (!trie_.in_trie(t)) continue;
    const std::string& piece = trie_.piece(t);
    size_t r = 0;
    while (r < piece.size() && bytes.Has(static_cast<uint8_t>(piece[r]))) ++r;
    run[static_cast<size_t>(t)] = static_cast<int32_t>(r);
    if (hist.size() <= r) hist.resize(r + 1, 0);
    ++hist[r];
  }
  // The smallest R with at most kMaxFixups runs above it.
  const int32_t longest = static_cast<int32_t>(hist.size()) - 1;
  int32_t r = longest;
  size_t above = 0;
  while (r > 1 && above + static_cast<size_t>(hist[static_cast<size_t>(r)]) <= kMaxFixups) above += hist[static_cast<size_t>(r--)];
  // A token that can take at most `run` bytes from the repetition takes at
  // most `run` copies, the one its state stands in included (a state inside
  // a copy has a byte op on top, so the token's first byte is that copy's).
  // A required count then behaves alike for every left > run, an optional
  // one for every left >= run. So a copy with k left folds onto the level's
  // copy for every token with run < min(k, level), and the tokens with
  // longer runs are stepped (level >= 2: the copy folded onto must have its
  // reference to the next, RepeatChain).
  Fold f;
  f.level = std::max(2, std::min(longest, r) + 1);
  // Tokens with run >= 2, longest run first: a counting sort (the
  // histogram gives each run's first slot).
  std::vector<size_t> slot(hist.size() + 1, 0);
  for (int32_t k = longest; k >= 2; --k) slot[static_cast<size_t>(k) - 1] = slot[static_cast<size_t>(k)] + hist[static_cast<size_t>(k)];
  const size_t n_long = longest >= 2 ? slot[1] : 0;
  f.by_run.resize(n_long);
  f.runs.resize(n_long);
  for (int32_t t = 0; t < n; ++t) {
    const int32_t k = run[static_cast<size_t>(t)];
    if (k < 2) continue;
    const size_t at = slot[static_cast<size_t>(k)]++;
    f.by_run[at] = t;
    f.runs[at] = k;
  }
  // Copies with fewer than `level` left fold too while stepping the tokens
  // with run >= k costs well under a walk of the trie (a token dies at most
  // k + 1 bytes in, where it must leave the repetition).
  f.min_fold = f.level;
  int64_t steps = 0;
  size_t i = 0;
  for (int32_t k = f.level; k >= 2; --k) {
    for (; i < f.by_run.size() && f.runs[i] >= k; ++i) {
      steps += std::min<int64_t>(static_cast<int64_t>(trie_.piece(f.by_run[i]).size()), k + 1);
    }
    // Every token's run grows the bill by one more step per lower k, too.
    if (steps + static_cast<int64_t>(i) * (f.level - k) > static_cast<int64_t>(trie_.n_nodes()) / 2) break;
    f.min_fold = k;
  }
  return f;
}

const MaskCache::Fold& MaskCache::FoldFor(const ByteProgram& p, int32_t chain) {
  int32_t& idx = chain_fold_[static_cast<size_t>(chain)];
  if (idx < 0) {
    // Repetitions over the same bytes (every string of a schema) share one.
    const ByteSet& bytes = p.chains[static_cast<size_t>(chain)].bytes;
    for (size_t c = 0; c < p.chains.size() && idx < 0; ++c) {
      if (chain_fold_[c] >= 0 && p.chains[c].bytes == bytes) idx = chain_fold_[c];
    }
    if (idx < 0) {
      folds_.push_back(MakeFold(bytes));
      idx = static_cast<int32_t>(folds_.size()) - 1;
    }
  }
  return folds_[static_cast<size_t>(idx)];
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
  // among its moved frames (that bounds which tokens must be stepped).
  std::vector<std::pair<int32_t, int32_t>> folded;
  const Matcher::StateId f = p.chains.empty() ? s : m.MapPositions(s, [&](int32_t pos) {
    const int32_t c = op_chain_[static_cast<size_t>(pos)];
    if (c < 0) return pos;
    const int32_t left = op_left_[static_cast<size_t>(pos)];
    const Fold& fold = FoldFor(p, c);
    if (left == fold.level || left < fold.min_fold) return pos;
    auto it = std::find_if(folded.begin(), folded.end(), [&](const auto& e) { return e.first == c; });
    if (it == folded.end()) {
      folded.emplace_back(c, left);
    } else {
      it->second = std::min(it->second, left);
    }
    const RepeatChain& ch = p.chains[static_cast<size_t>(c)];
    // Required copy i = min - left moves to min - level; optional copy k = left to k = level.
    const bool required = pos >= ch.seq_start && pos < ch.seq_start + ch.min * ch.body_len;
    return required ? pos + (left - fold.level) * ch.body_len
                    : ch.opt_start[static_cast<size_t>(fold.level) - 1] + (pos - ch.opt_start[static_cast<size_t>(left) - 1]);
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
  for (const auto& [c, fewest] : folded) {
    const Fold& fold = FoldFor(p, c);
    const int32_t from = std::min(fewest, fold.level);
    for (size_t i = 0; i < fold.by_run.size() && fold.runs[i] >= from; ++i) {
      const int32_t t = fold.by_run[i];
      set(t, m.StepBytes(s, trie_.piece(t)) != Matcher::kDead);
    }
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
