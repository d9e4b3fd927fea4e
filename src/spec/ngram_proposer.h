// N-gram (prompt lookup) proposer: no model. Finds the latest earlier
// occurrence of the sequence's last n tokens (n from max_n down to min_n) in
// its prompt and output, and proposes the tokens that followed it.
//
//   tokens:  a b c X Y Z d e ... a b c      suffix "a b c" (n = 3)
//                  ^ latest earlier match -> drafts X Y Z ...
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "spec/proposer.h"

namespace llm {

class NgramProposer final : public Proposer {
 public:
  explicit NgramProposer(int32_t max_n = 3, int32_t min_n = 1) : max_n_(max_n), min_n_(min_n) {}
  Status Propose(std::span<Sequence* const> seqs) override;

  // The lookup itself: writes at most k drafts for `tokens` into *out.
  void Lookup(std::span<const int32_t> tokens, int32_t k, std::vector<int32_t>* out) const;

 private:
  int32_t max_n_;
  int32_t min_n_;
};

}  // namespace llm
