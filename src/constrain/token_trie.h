// The vocabulary as a byte trie, built once per model (issue 20), and the
// allowed-token mask of a matcher state computed by walking it: a subtree is
// pruned at the first byte the grammar rejects, and a token is allowed iff
// its bytes lead to a live state. Special/control tokens and tokens with no
// bytes are never in the trie; end-of-generation tokens are allowed exactly
// when the state is accepting (and, since nothing else can follow, they are
// the only ones when the output is complete and cannot continue).
#pragma once

#include <cstdint>
#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "constrain/matcher.h"

namespace llm {
class Tokenizer;
}

namespace llm::constrain {

// For one byte set: each token's run (the length of its longest prefix made
// of bytes in the set), the longest run in each trie subtree, and the
// tokens with run >= 2 ordered longest run first (mask_cache.h).
struct TokenRuns {
  std::vector<int32_t> run;       // (n_vocab)
  std::vector<int32_t> sub_max;   // (trie nodes), -1: no token below
  std::vector<int32_t> by_run;    // tokens with run >= 2, longest run first
  std::vector<int32_t> runs;      // their runs
  std::vector<int64_t> tokens_at; // [r]: tokens whose run is r
  std::vector<int64_t> nodes_at;  // [r]: nodes whose subtree's longest run is r
};

class TokenTrie {
 public:
  // pieces: (n_vocab) each token's bytes; ids with excluded[id] set (control,
  // unknown, end-of-generation) never enter the trie. eog: ids allowed when
  // the output is complete.
  TokenTrie(const std::vector<std::string>& pieces, const std::vector<uint8_t>& excluded, std::vector<int32_t> eog);
  static std::shared_ptr<const TokenTrie> FromTokenizer(const Tokenizer& tok);

  int32_t n_vocab() const { return n_vocab_; }
  const std::string& piece(int32_t id) const { return pieces_[static_cast<size_t>(id)]; }
  bool in_trie(int32_t id) const { return !excluded_[static_cast<size_t>(id)]; }
  const std::vector<int32_t>& eog() const { return eog_; }
  bool IsEog(int32_t id) const;
  // The tokens in the trie holding a '"' byte, most quotes first, and each
  // one's count (capped at 255): the only tokens that can close a JSON key
  // (json_keys.h).
  const std::vector<int32_t>& quoted() const { return quoted_; }
  // The tokens in the trie holding a ',' but no '"' (they can start a new
  // member, which may be a dead end: json_keys.h).
  const std::vector<int32_t>& commas() const { return commas_; }
  int32_t quotes(int32_t id) const { return quotes_[static_cast<size_t>(id)]; }
  // Every printable ASCII byte and every byte of UTF-8 below U+40000 is a
  // token of its own (byte-level BPE, byte fallback): a shortest completion
  // over them (budget.h) takes at most one token per byte.
  bool has_every_byte() const { return has_every_byte_; }
  // As bit sets (ceil(n_vocab / 64) words): the tokens in the trie holding a
  // '"', and those holding a blank (space, tab, newline, carriage return),
  // for the layout filter (json_layout.h).
  const std::vector<uint64_t>& quoted_bits() const { return quoted_bits_; }
  const std::vector<uint64_t>& blank_bits() const { return blank_bits_; }
  size_t n_nodes() const { return nodes_.size(); }

  // mask: (ceil(n_vocab / 64)) words, bit t set iff token t is allowed in
  // state s. Never empty: a dead end with no token and no completion allows
  // the EOG tokens so the sequence can end (cannot happen when every byte has
  // a token, as with byte-fallback and byte-level vocabularies).
  void ComputeMask(Matcher& m, Matcher::StateId s, std::vector<uint64_t>* mask) const;

  // The runs over `bytes`, computed once per byte set and kept (every JSON
  // string of every schema has the same bytes). Thread-safe.
  std::shared_ptr<const TokenRuns> Runs(const ByteSet& bytes) const;
  // f(t) for every token that is a prefix of s (the trie walked along s).
  template <class F>
  void TokensAlong(std::string_view s, F f) const {
    int32_t n = 0;
    for (char ch : s) {
      const Node& node = nodes_[static_cast<size_t>(n)];
      int32_t next = -1;
      for (int32_t c = node.first_child; c < node.first_child + node.n_children && next < 0; ++c)
        if (nodes_[static_cast<size_t>(c)].byte == static_cast<uint8_t>(ch)) next = c;
      if (next < 0) return;
      n = next;
      const Node& at = nodes_[static_cast<size_t>(n)];
      for (int32_t k = 0; k < at.n_tokens; ++k) f(token_ids_[static_cast<size_t>(at.first_token + k)]);
    }
  }
  // f(t, state) for every token t whose bytes lead to a live state from s,
  // that state given (a trie walk: shared prefixes are stepped once).
  template <class F>
  void ForEachLive(Matcher& m, Matcher::StateId s, F f) const {
    if (s < 0) return;
    std::vector<std::pair<int32_t, Matcher::StateId>> stack{{0, s}};
    while (!stack.empty()) {
      const auto [n, st] = stack.back();
      stack.pop_back();
      const Node& node = nodes_[static_cast<size_t>(n)];
      const Matcher::StateId* row = m.Row(st);
      for (int32_t c = node.first_child; c < node.first_child + node.n_children; ++c) {
        const Node& child = nodes_[static_cast<size_t>(c)];
        Matcher::StateId next = row[child.byte];
        if (next == Matcher::kUnknown) next = m.Step(st, child.byte);
        if (next < 0) continue;
        for (int32_t k = 0; k < child.n_tokens; ++k) f(token_ids_[static_cast<size_t>(child.first_token + k)], next);
        if (child.n_children > 0) stack.emplace_back(c, next);
      }
    }
  }
  // A walk restricted to some tokens, for the mask cache (mask_cache.h).
  // key: (n_vocab) a number per token. Returns, per trie node, the largest
  // key of a token in its subtree (-1: none).
  std::vector<int32_t> SubtreeMax(const std::vector<int32_t>& key) const;
  // Sets the bit of every token t with key[t] >= min_key whose bytes lead to
  // a live state from s; enters only subtrees holding such a token
  // (sub_max = SubtreeMax(key)). Other bits are left alone, and so are the
  // bits of such tokens that are not allowed: clear them first.
  void AllowKeyed(Matcher& m, Matcher::StateId s, const std::vector<int32_t>& key, const std::vector<int32_t>& sub_max,
                  int32_t min_key, std::vector<uint64_t>* mask) const;

 private:
  struct Node {
    int32_t first_child = -1;  // children are contiguous: [first_child, first_child + n_children)
    int32_t n_children = 0;
    int32_t first_token = 0;   // tokens ending here: token_ids_[first_token, first_token + n_tokens)
    int32_t n_tokens = 0;
    uint8_t byte = 0;          // the edge byte into this node
  };
  void Build();
  template <class Enter, class OnToken>
  void WalkLive(Matcher& m, Matcher::StateId s, Enter enter, OnToken on_token) const;

  int32_t n_vocab_;
  std::vector<std::string> pieces_;
  std::vector<uint8_t> excluded_;
  std::vector<int32_t> eog_;
  std::vector<int32_t> quoted_;
  std::vector<int32_t> commas_;
  std::vector<uint8_t> quotes_;  // (n_vocab)
  std::vector<uint64_t> quoted_bits_, blank_bits_;
  bool has_every_byte_ = false;
  std::vector<Node> nodes_;  // nodes_[0] = root
  std::vector<int32_t> token_ids_;
  mutable std::mutex runs_mu_;
  mutable std::map<std::array<uint64_t, 4>, std::shared_ptr<const TokenRuns>> runs_;
};

}  // namespace llm::constrain
