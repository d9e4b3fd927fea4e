// A Grammar lowered to bytes: what the matcher (matcher.h) runs. Every
// code-point class becomes byte-range sequences of its UTF-8 encoding (a
// class of ASCII code points is one byte set; a wider class is a helper rule
// whose alternatives are the UTF-8 sequences covering it), so the matcher
// consumes one byte at a time and never needs a partial-character state, and
// only valid UTF-8 can ever match.
//
//   ops: one flat array; an alternative is a run of kBytes / kRule ops ended
//   by kEnd. rule_alts[r] lists the start offsets of rule r's alternatives.
//
//        rule 0 (root) ::= "a" b | ""          ops: [Bytes{a} Rule(1) End] [End] [Bytes{b} End]
//        rule 1        ::= "b"                 rule_alts: {{0, 3}, {4}}
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "constrain/grammar.h"
#include "util/status.h"

namespace llm::constrain {

struct ByteSet {
  std::array<uint64_t, 4> bits{};
  bool Has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  void Add(uint8_t b) { bits[b >> 6] |= uint64_t{1} << (b & 63); }
  void AddRange(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) Add(static_cast<uint8_t>(b));
  }
  bool operator==(const ByteSet&) const = default;
};

struct ByteOp {
  enum Kind : uint8_t { kBytes, kRule, kEnd };
  Kind kind;
  int32_t arg;  // kBytes: index into sets; kRule: rule id; kEnd: unused
};

// A counted repetition X{m,n} (grammar.h's CountedRepeat) in ops offsets:
// copy i (0-based) of the m required ones is ops[seq_start + i * body_len,
// + body_len); the optional copy with k copies left (this one included) is
// ops[opt_start[k - 1], + body_len], the last op being the reference to the
// next optional copy (for k >= 2). Every copy is lowered alike, so an offset
// within one copy means the same in any other.
struct RepeatChain {
  int32_t body_len = 0;
  int32_t min = 0;
  int32_t seq_start = 0;
  std::vector<int32_t> opt_start;
  ByteSet bytes;  // every byte X can consume (through the rules it calls): an upper bound
};

struct ByteProgram {
  std::vector<ByteOp> ops;
  std::vector<ByteSet> sets;
  std::vector<std::vector<int32_t>> rule_alts;  // (n_rules) alternative start offsets into ops
  int32_t root = 0;
  std::vector<RepeatChain> chains;
  bool unique_keys = false;  // Grammar::unique_keys
  bool json_layout = false;  // Grammar::json_layout
};

// Lowers a finished Grammar (GrammarBuilder::Finish). Fails only on limits.
StatusOr<std::shared_ptr<const ByteProgram>> LowerToBytes(const Grammar& g);

}  // namespace llm::constrain
