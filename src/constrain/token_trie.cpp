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
  quotes_.assign(pieces_.size(), 0);
  quoted_bits_.assign((pieces_.size() + 63) / 64, 0);
  blank_bits_.assign((pieces_.size() + 63) / 64, 0);
  for (size_t i = 0; i < pieces_.size(); ++i) {
    if (excluded_[i]) continue;
    quotes_[i] = static_cast<uint8_t>(std::min<size_t>(255, std::count(pieces_[i].begin(), pieces_[i].end(), '"')));
    if (quotes_[i] > 0) quoted_bits_[i >> 6] |= uint64_t{1} << (i & 63);
    if (pieces_[i].find_first_of(" \t\n\r") != std::string::npos) blank_bits_[i >> 6] |= uint64_t{1} << (i & 63);
    if (quotes_[i] > 0) quoted_.push_back(static_cast<int32_t>(i));
    else if (pieces_[i].find(',') != std::string::npos) commas_.push_back(static_cast<int32_t>(i));
  }
  std::array<bool, 256> single{};
  for (size_t i = 0; i < pieces_.size(); ++i)
    if (!excluded_[i] && pieces_[i].size() == 1) single[static_cast<uint8_t>(pieces_[i][0])] = true;
  // Printable ASCII and every byte of UTF-8 below U+40000 (byte-level BPE
  // vocabularies merge some control bytes and the rarest lead bytes away).
  has_every_byte_ = true;
  for (int b = 0x20; b <= 0xF0; ++b)
    if (b != 0x7F && b != 0xC0 && b != 0xC1 && !single[static_cast<size_t>(b)]) has_every_byte_ = false;
  std::stable_sort(quoted_.begin(), quoted_.end(), [&](int32_t a, int32_t b) { return quotes_[static_cast<size_t>(a)] > quotes_[static_cast<size_t>(b)]; });
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

// Depth-first from s: a child is entered only when enter(child) and its byte
// keeps a live state; on_token(t) for every token ending at an entered child.
template <class Enter, class OnToken>
void TokenTrie::WalkLive(Matcher& m, Matcher::StateId s, Enter enter, OnToken on_token) const {
  if (s < 0) return;
  std::vector<std::pair<int32_t, Matcher::StateId>> stack{{0, s}};
  while (!stack.empty()) {
    const auto [n, st] = stack.back();
    stack.pop_back();
    const Node& node = nodes_[static_cast<size_t>(n)];
    const Matcher::StateId* row = m.Row(st);
    for (int32_t c = node.first_child; c < node.first_child + node.n_children; ++c) {
      if (!enter(c)) continue;
      const Node& child = nodes_[static_cast<size_t>(c)];
      Matcher::StateId next = row[child.byte];
      if (next == Matcher::kUnknown) next = m.Step(st, child.byte);
      if (next < 0) continue;
      for (int32_t k = 0; k < child.n_tokens; ++k) on_token(token_ids_[static_cast<size_t>(child.first_token + k)]);
      if (child.n_children > 0) stack.emplace_back(c, next);
    }
  }
}

void TokenTrie::ComputeMask(Matcher& m, Matcher::StateId s, std::vector<uint64_t>* mask) const {
  const size_t words = (static_cast<size_t>(n_vocab_) + 63) / 64;
  mask->assign(words, 0);
  auto allow = [&](int32_t t) { (*mask)[static_cast<size_t>(t) >> 6] |= uint64_t{1} << (t & 63); };
  bool any = false;
  WalkLive(m, s, [](int32_t) { return true; }, [&](int32_t t) {
    allow(t);
    any = true;
  });
  if (m.IsAccepting(s) || !any) {
    for (int32_t t : eog_) allow(t);
  }
}

std::shared_ptr<const TokenRuns> TokenTrie::Runs(const ByteSet& bytes) const {
  {
    std::lock_guard<std::mutex> lock(runs_mu_);
    auto it = runs_.find(bytes.bits);
    if (it != runs_.end()) return it->second;
  }
  auto r = std::make_shared<TokenRuns>();
  r->run.assign(static_cast<size_t>(n_vocab_), 0);
  for (int32_t t = 0; t < n_vocab_; ++t) {
    if (excluded_[static_cast<size_t>(t)]) continue;
    const std::string& piece = pieces_[static_cast<size_t>(t)];
    size_t k = 0;
    while (k < piece.size() && bytes.Has(static_cast<uint8_t>(piece[k]))) ++k;
    r->run[static_cast<size_t>(t)] = static_cast<int32_t>(k);
    if (r->tokens_at.size() <= k) r->tokens_at.resize(k + 1, 0);
    ++r->tokens_at[k];
  }
  if (r->tokens_at.empty()) r->tokens_at.push_back(0);
  const int32_t longest = static_cast<int32_t>(r->tokens_at.size()) - 1;
  r->sub_max = SubtreeMax(r->run);
  r->nodes_at.assign(r->tokens_at.size(), 0);
  for (int32_t v : r->sub_max) {
    if (v >= 0) ++r->nodes_at[static_cast<size_t>(v)];
  }
  // Tokens with run >= 2, longest first: a counting sort.
  std::vector<int64_t> slot(r->tokens_at.size() + 1, 0);
  for (int32_t k = longest; k >= 2; --k) slot[static_cast<size_t>(k) - 1] = slot[static_cast<size_t>(k)] + r->tokens_at[static_cast<size_t>(k)];
  const size_t n_long = longest >= 2 ? static_cast<size_t>(slot[1]) : 0;
  r->by_run.resize(n_long);
  r->runs.resize(n_long);
  for (int32_t t = 0; t < n_vocab_; ++t) {
    const int32_t k = r->run[static_cast<size_t>(t)];
    if (k < 2) continue;
    const size_t at = static_cast<size_t>(slot[static_cast<size_t>(k)]++);
    r->by_run[at] = t;
    r->runs[at] = k;
  }
  std::lock_guard<std::mutex> lock(runs_mu_);
  if (runs_.size() >= 64) runs_.clear();  // a bound for hostile grammars with many byte sets
  return runs_.emplace(bytes.bits, std::move(r)).first->second;
}

// Children come after their parent (breadth-first order), so one pass from
// the last node back sees every child before its parent.
std::vector<int32_t> TokenTrie::SubtreeMax(const std::vector<int32_t>& key) const {
  std::vector<int32_t> best(nodes_.size(), -1);
  for (size_t n = nodes_.size(); n-- > 0;) {
    const Node& node = nodes_[n];
    int32_t b = -1;
    for (int32_t k = 0; k < node.n_tokens; ++k) b = std::max(b, key[static_cast<size_t>(token_ids_[static_cast<size_t>(node.first_token + k)])]);
    for (int32_t c = node.first_child; c < node.first_child + node.n_children; ++c) b = std::max(b, best[static_cast<size_t>(c)]);
    best[n] = b;
  }
  return best;
}

void TokenTrie::AllowKeyed(Matcher& m, Matcher::StateId s, const std::vector<int32_t>& key,
                           const std::vector<int32_t>& sub_max, int32_t min_key, std::vector<uint64_t>* mask) const {
  if (sub_max.empty() || sub_max[0] < min_key) return;
  WalkLive(
      m, s, [&](int32_t c) { return sub_max[static_cast<size_t>(c)] >= min_key; },
      [&](int32_t t) {
        if (key[static_cast<size_t>(t)] >= min_key) (*mask)[static_cast<size_t>(t) >> 6] |= uint64_t{1} << (t & 63);
      });
}

}  // namespace llm::constrain
