#include "spec/ngram_proposer.h"

#include <algorithm>

namespace llm {

void NgramProposer::Lookup(std::span<const int32_t> tokens, int32_t k, std::vector<int32_t>* out) const {
  out->clear();
  const int64_t size = static_cast<int64_t>(tokens.size());
  if (k <= 0) return;
  for (int64_t n = std::min<int64_t>(max_n_, size - 1); n >= min_n_; --n) {
    const int32_t* suffix = tokens.data() + (size - n);
    // Latest match first: start j such that tokens[j .. j+n) == suffix and
    // at least one token follows it (j + n < size).
    for (int64_t j = size - n - 1; j >= 0; --j) {
      if (!std::equal(suffix, suffix + n, tokens.data() + j)) continue;
      const int64_t from = j + n;
      const int64_t m = std::min<int64_t>(k, size - from);
      out->assign(tokens.begin() + from, tokens.begin() + from + m);
      return;
    }
  }
}

Status NgramProposer::Propose(std::span<Sequence* const> seqs) {
  for (Sequence* s : seqs) Lookup(s->tokens, s->spec_k, &s->drafts);
  return Status::Ok();
}

}  // namespace llm
