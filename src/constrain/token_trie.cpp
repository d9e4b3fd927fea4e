#include "constrain/token_trie.h"

#include <algorithm>
#include <numeric>

#include "tokenizer/tokenizer.h"

namespace llm::constrain {

TokenTrie::TokenTrie(const std::vector<std::string>& pieces, const std::vector<uint8_t>& excluded,
                     std::vector<int32_t> eog)
    : n_vocab_(static_cast<int32_t>(pieces.size())), pieces_(pieces), excluded_(excluded), eog_(std::move(eog)) {
  excluded_.resize(pieces_.size(), 1);
  for (size_t i = 0; i < pieces_.size(); ++i) {
    if (pieces_[i].empty()) excluded_[i] = 1;
  }
  for (int32_t t : eog_) {
    if (t >= 0 && t < n_vocab_) excluded_[static_cast<size_t>(t)] = 1;
  }
  std::sort(eog_.begin(), eog_.end());
  eog_.erase(std::unique(eog_.begin(), eog_.end()), eog_.end());
  std::erase_if(eog_, [&](int32_t t) { return t < 0 || t >= n_vocab_; });
  Build();
}

std::shared_ptr<const TokenTrie> TokenTrie::FromTokenizer(const Tokenizer& tok) {
  const int32_t n = tok.n_vocab();
  std::vector<std::string> pieces(static_cast<size_t>(n));
  std::vector<uint8_t> excluded(static_cast<size_t>(n), 0);
  std::vector<int32_t> eog;
  for (int32_t t = 0; t < n; ++t) {
    if (tok.IsEog(t)) eog.push_back(t);
    if (tok.IsControl(t) || tok.IsEog(t)) {
      excluded[static_cast<size_t>(t)] = 1;
      continue;
    }
    tok.AppendPiece(t, /*render_special=*/false, &pieces[static_cast<size_t>(t)]);
  }
  return std::make_shared<const TokenTrie>(pieces, excluded, std::move(eog));
}

bool TokenTrie::IsEog(int32_t id) const { return std::binary_search(eog_.begin(), eog_.end(), id); }

// Nodes in breadth-first order with each node's children contiguous, built
// from the tokens sorted by their bytes: the children of a node are the
// distinct next bytes of a contiguous run of sorted tokens.
void TokenTrie::Build() {
  std::vector<int32_t> ids;
  for (int32_t t = 0; t < n_vocab_; ++t) {
    if (!excluded_[static_cast<size_t>(t)]) ids.push_back(t);
  }
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return pieces_[static_cast<size_t>(a)] < pieces_[static_cast<size_t>(b)] ||
           (pieces_[static_cast<size_t>(a)] == pieces_[static_cast<size_t>(b)] && a < b);
  });
  struct Span {
    size_t lo, hi, depth;  // tokens ids[lo, hi) share this node's depth-byte prefix
  };
  nodes_.clear();
  token_ids_.clear();
  nodes_.push_back({});
  std::vector<Span> spans{{0, ids.size(), 0}};
  for (size_t n = 0; n < nodes_.size(); ++n) {
    Span sp = spans[n];
    // Tokens that end exactly here come first in sorted order.
    nodes_[n].first_token = static_cast<int32_t>(token_ids_.size());
    while (sp.lo < sp.hi && pieces_[static_cast<size_t>(ids[sp.lo])].size() == sp.depth) {
      token_ids_.push_back(ids[sp.lo]);
      ++sp.lo;
    }
    nodes_[n].n_tokens = static_cast<int32_t>(token_ids_.size()) - nodes_[n].first_token;
    nodes_[n].first_child = static_cast<int32_t>(nodes_.size());
    for (size_t i = sp.lo; i < sp.hi;) {
      const uint8_t b = static_cast<uint8_t>(pieces_[static_cast<size_t>(ids[i])][sp.depth]);
      size_t j = i;
      while (j < sp.hi && static_cast<uint8_t>(pieces_[static_cast<size_t>(ids[j])][sp.depth]) == b) ++j;
      Node child;
      child.byte = b;
      nodes_.push_back(child);
      spans.push_back({i, j, sp.depth + 1});
      i = j;
    }
    nodes_[n].n_children = static_cast<int32_t>(nodes_.size()) - nodes_[n].first_child;
  }
}

void TokenTrie::ComputeMask(Matcher& m, Matcher::StateId s, std::vector<uint64_t>* mask) const {
  const size_t words = (static_cast<size_t>(n_vocab_) + 63) / 64;
  mask->assign(words, 0);
  auto allow = [&](int32_t t) { (*mask)[static_cast<size_t>(t) >> 6] |= uint64_t{1} << (t & 63); };
  bool any = false;
  if (s >= 0) {
    // Depth-first; a child is entered only when its byte keeps a live state.
    std::vector<std::pair<int32_t, Matcher::StateId>> stack{{0, s}};
    while (!stack.empty()) {
      const auto [n, st] = stack.back();
      stack.pop_back();
      const Node& node = nodes_[static_cast<size_t>(n)];
      for (int32_t c = node.first_child; c < node.first_child + node.n_children; ++c) {
        const Node& child = nodes_[static_cast<size_t>(c)];
        const Matcher::StateId next = m.Step(st, child.byte);
        if (next < 0) continue;
        for (int32_t k = 0; k < child.n_tokens; ++k) allow(token_ids_[static_cast<size_t>(child.first_token + k)]);
        any |= child.n_tokens > 0;
        if (child.n_children > 0) stack.emplace_back(c, next);
      }
    }
  }
  if (m.IsAccepting(s) || !any) {
    for (int32_t t : eog_) allow(t);
  }
}

}  // namespace llm::constrain
