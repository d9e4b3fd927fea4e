#include "constrain/byte_program.h"

#include <map>
#include <utility>

namespace llm::constrain {
namespace {

using ByteSeq = std::vector<std::pair<uint8_t, uint8_t>>;  // one byte range per position

int Utf8Len(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

void Encode(uint32_t cp, uint8_t* b) {
  switch (Utf8Len(cp)) {
    case 1: b[0] = static_cast<uint8_t>(cp); break;
    case 2:
      b[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
      b[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
      break;
    case 3:
      b[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
      b[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
      b[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
      break;
    default:
      b[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
      b[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F));
      b[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
      b[3] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  }
}

// Splits the code points [lo, hi] (no surrogates inside) into byte-range
// sequences whose concatenated byte sets are exactly their UTF-8 encodings.
// A range qualifies once lo and hi have the same length and every
// continuation position below the first differing one spans 80..BF fully.
void SplitUtf8(uint32_t lo, uint32_t hi, std::vector<ByteSeq>* out) {
  for (uint32_t b : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= b && b < hi) {
      SplitUtf8(lo, b, out);
      SplitUtf8(b + 1, hi, out);
      return;
    }
  }
  const int n = Utf8Len(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        SplitUtf8(lo, lo | m, out);
        SplitUtf8((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        SplitUtf8(lo, (hi & ~m) - 1, out);
        SplitUtf8(hi & ~m, hi, out);
        return;
      }
    }
  }
  uint8_t a[4], z[4];
  Encode(lo, a);
  Encode(hi, z);
  ByteSeq s;
  for (int k = 0; k < n; ++k) s.emplace_back(a[k], z[k]);
  out->push_back(std::move(s));
}

class Lowerer {
 public:
  explicit Lowerer(const Grammar& g) : g_(g) {}

  StatusOr<std::shared_ptr<const ByteProgram>> Run() {
    p_ = std::make_shared<ByteProgram>();
    p_->unique_keys = g_.unique_keys;
    p_->json_layout = g_.json_layout;
    p_->rule_alts.resize(g_.rules.size());
    p_->root = g_.root;
    // Rules first (helpers for wide classes are appended as they appear).
    for (size_t r = 0; r < g_.rules.size(); ++r) {
      for (const Alternative& a : g_.rules[r].alts) {
        std::vector<ByteOp> ops;
        for (const Element& e : a) {
          if (e.kind == Element::Kind::kRule) {
            ops.push_back({ByteOp::kRule, e.rule});
          } else {
            LLM_ASSIGN_OR_RETURN(ByteOp op, CharsOp(e.ranges));
            ops.push_back(op);
          }
        }
        LLM_RETURN_IF_ERROR(Emit(static_cast<int32_t>(r), ops));
      }
    }
    LowerRepeats();
    return std::shared_ptr<const ByteProgram>(std::move(p_));
  }

 private:
  Status Emit(int32_t rule, const std::vector<ByteOp>& ops) {
    if (p_->ops.size() + ops.size() + 1 > static_cast<size_t>(kMaxElements) * 4)
      return LimitExceeded("grammar too large after lowering to bytes");
    p_->rule_alts[static_cast<size_t>(rule)].push_back(static_cast<int32_t>(p_->ops.size()));
    p_->ops.insert(p_->ops.end(), ops.begin(), ops.end());
    p_->ops.push_back({ByteOp::kEnd, 0});
    return Status::Ok();
  }

  int32_t SetId(const ByteSet& s) {
    auto [it, fresh] = set_ids_.emplace(s.bits, static_cast<int32_t>(p_->sets.size()));
    if (fresh) p_->sets.push_back(s);
    return it->second;
  }

  StatusOr<ByteOp> CharsOp(const std::vector<CodeRange>& ranges) {
    ByteSet ascii;
    bool wide = false;
    for (const CodeRange& c : ranges) {
      if (c.lo < 0x80) ascii.AddRange(static_cast<uint8_t>(c.lo), static_cast<uint8_t>(std::min<uint32_t>(c.hi, 0x7F)));
      if (c.hi >= 0x80) wide = true;
    }
    if (!wide) return ByteOp{ByteOp::kBytes, SetId(ascii)};
    std::vector<std::pair<uint32_t, uint32_t>> key;
    for (const CodeRange& c : ranges) key.emplace_back(c.lo, c.hi);
    auto it = helpers_.find(key);
    if (it != helpers_.end()) return ByteOp{ByteOp::kRule, it->second};
    const int32_t rule = static_cast<int32_t>(p_->rule_alts.size());
    if (rule >= kMaxRules * 2) return LimitExceeded("grammar too large: too many character classes");
    p_->rule_alts.emplace_back();
    helpers_.emplace(key, rule);
    std::vector<ByteSeq> seqs;
    for (const CodeRange& c : ranges) {
      uint32_t lo = c.lo, hi = c.hi;
      // Skip surrogates: no valid UTF-8 encodes them.
      if (lo <= 0xDFFF && hi >= 0xD800) {
        if (lo < 0xD800) SplitUtf8(lo, 0xD7FF, &seqs);
        if (hi > 0xDFFF) SplitUtf8(0xE000, hi, &seqs);
      } else {
        SplitUtf8(lo, hi, &seqs);
      }
    }
    // Merge all one-byte sequences into one set; the rest as they come.
    bool any_ascii = false;
    std::vector<std::vector<ByteOp>> alts;
    for (const ByteSeq& s : seqs) {
      if (s.size() == 1) {
        any_ascii = true;
        continue;
      }
      std::vector<ByteOp> ops;
      for (auto [a, z] : s) {
        ByteSet b;
        b.AddRange(a, z);
        ops.push_back({ByteOp::kBytes, SetId(b)});
      }
      alts.push_back(std::move(ops));
    }
    if (any_ascii) LLM_RETURN_IF_ERROR(Emit(rule, {{ByteOp::kBytes, SetId(ascii)}}));
    for (const auto& ops : alts) LLM_RETURN_IF_ERROR(Emit(rule, ops));
    return ByteOp{ByteOp::kRule, rule};
  }

  // The bytes each rule can consume, through the rules it calls: a fixpoint
  // over the reference graph (rules mostly call earlier ones, so it settles
  // in a few passes; a grammar that does not within the bound gets "every
  // byte" everywhere, which is an upper bound and so still sound).
  std::vector<ByteSet> RuleBytes() const {
    const size_t n = p_->rule_alts.size();
    std::vector<ByteSet> bytes(n);
    bool changed = true;
    for (int pass = 0; changed && pass < 64; ++pass) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        ByteSet b = bytes[r];
        for (int32_t a : p_->rule_alts[r]) {
          for (size_t i = static_cast<size_t>(a); p_->ops[i].kind != ByteOp::kEnd; ++i) Add(&b, OpBytes(p_->ops[i], bytes));
        }
        if (!(b == bytes[r])) {
          bytes[r] = b;
          changed = true;
        }
      }
    }
    if (changed) {
      ByteSet all;
      all.AddRange(0, 255);
      bytes.assign(n, all);
    }
    return bytes;
  }

  ByteSet OpBytes(const ByteOp& op, const std::vector<ByteSet>& rule_bytes) const {
    return op.kind == ByteOp::kBytes ? p_->sets[static_cast<size_t>(op.arg)] : rule_bytes[static_cast<size_t>(op.arg)];
  }
  static void Add(ByteSet* to, const ByteSet& b) {
    for (size_t w = 0; w < 4; ++w) to->bits[w] |= b.bits[w];
  }

  void LowerRepeats() {
    if (g_.repeats.empty()) return;
    const std::vector<ByteSet> rule_bytes = RuleBytes();
    for (const CountedRepeat& rep : g_.repeats) {
      RepeatChain c;
      c.body_len = rep.body_len;
      c.min = rep.min;
      c.seq_start = p_->rule_alts[static_cast<size_t>(rep.seq_rule)][0];
      for (int32_t o : rep.opt_rules) c.opt_start.push_back(p_->rule_alts[static_cast<size_t>(o)][0]);
      const int32_t body = rep.min > 0 ? c.seq_start : c.opt_start[0];
      for (int32_t i = 0; i < c.body_len; ++i) Add(&c.bytes, OpBytes(p_->ops[static_cast<size_t>(body + i)], rule_bytes));
      p_->chains.push_back(std::move(c));
    }
  }

  const Grammar& g_;
  std::shared_ptr<ByteProgram> p_;
  std::map<std::array<uint64_t, 4>, int32_t> set_ids_;
  std::map<std::vector<std::pair<uint32_t, uint32_t>>, int32_t> helpers_;
};

}  // namespace

StatusOr<std::shared_ptr<const ByteProgram>> LowerToBytes(const Grammar& g) {
  if (g.root < 0 || g.root >= static_cast<int32_t>(g.rules.size())) return InvalidArgument("grammar has no root rule");
  return Lowerer(g).Run();
}

}  // namespace llm::constrain
