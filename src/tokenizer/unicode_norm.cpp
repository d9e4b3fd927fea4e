#include "tokenizer/unicode_norm.h"

#include <algorithm>
#include <iterator>

namespace llm {
namespace {

struct Decomposition {
  uint32_t cp;
  uint32_t offset;  // into kDecompositionCps
  uint32_t n;
};
struct CombiningRun {
  uint32_t first, last;
  uint8_t ccc;
};
struct CodepointRange {
  uint32_t first, last;
};

#include "tokenizer/unicode_norm_data.inc"

// Hangul syllables: S = SBase + (L * VCount + V) * TCount + T.
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kVCount = 21, kTCount = 28, kSCount = 19 * kVCount * kTCount;

void Decompose(uint32_t cp, std::vector<uint32_t>* out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const uint32_t s = cp - kSBase;
    out->push_back(kLBase + s / (kVCount * kTCount));
    out->push_back(kVBase + (s % (kVCount * kTCount)) / kTCount);
    if (s % kTCount != 0) out->push_back(kTBase + s % kTCount);
    return;
  }
  const auto* end = std::end(kDecompositions);
  const auto* it = std::lower_bound(std::begin(kDecompositions), end, cp,
                                    [](const Decomposition& d, uint32_t v) { return d.cp < v; });
  if (it == end || it->cp != cp) {
    out->push_back(cp);
    return;
  }
  out->insert(out->end(), kDecompositionCps + it->offset, kDecompositionCps + it->offset + it->n);
}

}  // namespace

uint8_t CanonicalCombiningClass(uint32_t cp) {
  if (cp < 0x300) return 0;
  const auto* end = std::end(kCombiningClasses);
  const auto* it = std::upper_bound(std::begin(kCombiningClasses), end, cp,
                                    [](uint32_t v, const CombiningRun& r) { return v < r.first; });
  if (it == std::begin(kCombiningClasses)) return 0;
  --it;
  return cp <= it->last ? it->ccc : 0;
}

bool IsNonspacingMark(uint32_t cp) {
  if (cp < 0x300) return false;
  const auto* end = std::end(kNonspacingMarks);
  const auto* it = std::upper_bound(std::begin(kNonspacingMarks), end, cp,
                                    [](uint32_t v, const CodepointRange& r) { return v < r.first; });
  if (it == std::begin(kNonspacingMarks)) return false;
  --it;
  return cp <= it->last;
}

std::vector<uint32_t> ToNfd(const std::vector<uint32_t>& cps) {
  std::vector<uint32_t> out;
  out.reserve(cps.size());
  for (uint32_t cp : cps) Decompose(cp, &out);
  // Canonical ordering: each run of non-starters is stably sorted by class.
  for (size_t i = 0; i < out.size();) {
    if (CanonicalCombiningClass(out[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < out.size() && CanonicalCombiningClass(out[j]) != 0) ++j;
    std::stable_sort(out.begin() + i, out.begin() + j, [](uint32_t a, uint32_t b) {
      return CanonicalCombiningClass(a) < CanonicalCombiningClass(b);
    });
    i = j;
  }
  return out;
}

}  // namespace llm
