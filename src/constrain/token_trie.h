// The vocabulary as a byte trie, built once per model (issue 20), and the
// allowed-token mask of a matcher state computed by walking it: a subtree is
// pruned at the first byte the grammar rejects, and a token is allowed iff
// its bytes lead to a live state. Special/control tokens and tokens with no
// bytes are never in the trie; end-of-generation tokens are allowed exactly
// when the state is accepting (and, since nothing else can follow, they are
// the only ones when the output is complete and cannot continue).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "constrain/matcher.h"

namespace llm {
class Tokenizer;
}

namespace llm::constrain {

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
  size_t n_nodes() const { return nodes_.size(); }

  // mask: (ceil(n_vocab / 64)) words, bit t set iff token t is allowed in
  // state s. Never empty: a dead end with no token and no completion allows
  // the EOG tokens so the sequence can end (cannot happen when every byte has
  // a token, as with byte-fallback and byte-level vocabularies).
  void ComputeMask(Matcher& m, Matcher::StateId s, std::vector<uint64_t>* mask) const;

 private:
  struct Node {
    int32_t first_child = -1;  // children are contiguous: [first_child, first_child + n_children)
    int32_t n_children = 0;
    int32_t first_token = 0;   // tokens ending here: token_ids_[first_token, first_token + n_tokens)
    int32_t n_tokens = 0;
    uint8_t byte = 0;          // the edge byte into this node
  };
  void Build();

  int32_t n_vocab_;
  std::vector<std::string> pieces_;
  std::vector<uint8_t> excluded_;
  std::vector<int32_t> eog_;
  std::vector<Node> nodes_;  // nodes_[0] = root
  std::vector<int32_t> token_ids_;
};

}  // namespace llm::constrain
