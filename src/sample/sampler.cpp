#include "sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "sample/sum_exp.h"

namespace llm {

// ------------------------------------------------------------ validation

namespace {

std::string Num(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

Status ValidateSamplingParams(const SamplingParams& p) {
  if (!std::isfinite(p.temperature) || p.temperature < 0.0f)
    return InvalidArgument("sampling.temperature must be finite and >= 0 (got " + Num(p.temperature) + ")");
  if (p.top_k < 0)
    return InvalidArgument("sampling.top_k must be >= 0, 0 = off (got " + std::to_string(p.top_k) + ")");
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f))  // also rejects NaN
    return InvalidArgument("sampling.top_p must be in (0, 1], 1 = off (got " + Num(p.top_p) + ")");
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f))
    return InvalidArgument("sampling.min_p must be in [0, 1], 0 = off (got " + Num(p.min_p) + ")");
  if (!std::isfinite(p.repetition_penalty) || p.repetition_penalty <= 0.0f)
    return InvalidArgument("sampling.repetition_penalty must be finite and > 0, 1 = off (got " +
                           Num(p.repetition_penalty) + ")");
  if (!(p.frequency_penalty >= -2.0f && p.frequency_penalty <= 2.0f))
    return InvalidArgument("sampling.frequency_penalty must be in [-2, 2] (got " + Num(p.frequency_penalty) + ")");
  if (!(p.presence_penalty >= -2.0f && p.presence_penalty <= 2.0f))
    return InvalidArgument("sampling.presence_penalty must be in [-2, 2] (got " + Num(p.presence_penalty) + ")");
  if (p.penalty_last_n < -1)
    return InvalidArgument("sampling.penalty_last_n must be >= -1, -1 = whole sequence (got " +
                           std::to_string(p.penalty_last_n) + ")");
  return Status::Ok();
}

// ------------------------------------------------------------------- RNG

namespace {

uint64_t SplitMix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

Rng::Rng(uint64_t seed) {
  // splitmix64 never yields four zero words from one stream, so the xoshiro
  // state is never the forbidden all-zero state.
  for (uint64_t& w : s_) w = SplitMix64(seed);
}

uint64_t Rng::NextU64() {
  const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

double Rng::NextDouble() { return static_cast<double>(NextU64() >> 11) * 0x1.0p-53; }

// --------------------------------------------------------------- Sampler

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

}  // namespace

SamplingParams SanitisedSamplingParams(SamplingParams p) {
  if (!std::isfinite(p.temperature) || p.temperature < 0.0f) p.temperature = 0.0f;
  if (p.top_k < 0) p.top_k = 0;
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) p.top_p = 1.0f;
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) p.min_p = 0.0f;
  if (!std::isfinite(p.repetition_penalty) || p.repetition_penalty <= 0.0f) p.repetition_penalty = 1.0f;
  if (!std::isfinite(p.frequency_penalty)) p.frequency_penalty = 0.0f;
  if (!std::isfinite(p.presence_penalty)) p.presence_penalty = 0.0f;
  if (p.penalty_last_n < -1) p.penalty_last_n = 0;
  return p;
}

Sampler::Sampler(const SamplingParams& p, int32_t n_vocab)
    : p_(SanitisedSamplingParams(p)),
      n_vocab_(std::max<int32_t>(n_vocab, 1)),
      rng_(p.seed) {
  cand_.resize(static_cast<size_t>(n_vocab_));
  w_.resize(static_cast<size_t>(n_vocab_));
  // The window never holds more than the sequence so far: reserve a typical
  // one, not whatever the caller passed (INT32_MAX would be 8 GiB; fuzz finding).
  if (p_.penalty_last_n > 0) window_.reserve(static_cast<size_t>(std::min<int32_t>(p_.penalty_last_n, 1024)));
}

void Sampler::ApplyPenalties(float* logits, std::span<const int32_t> history) {
  const bool any = p_.repetition_penalty != 1.0f || p_.frequency_penalty != 0.0f ||
                   p_.presence_penalty != 0.0f;
  if (!any || p_.penalty_last_n == 0 || history.empty()) return;
  size_t n = history.size();
  if (p_.penalty_last_n > 0) n = std::min(n, static_cast<size_t>(p_.penalty_last_n));
  const std::span<const int32_t> win = history.subspan(history.size() - n);

  // Count occurrences by sorting a copy of the window: O(w log w) with w the
  // window (64 by default), instead of an (n_vocab) count array to clear.
  window_.assign(win.begin(), win.end());  // reuses capacity; grows only for -1
  std::sort(window_.begin(), window_.end());
  for (size_t i = 0; i < window_.size();) {
    size_t j = i + 1;
    while (j < window_.size() && window_[j] == window_[i]) ++j;
    const int32_t tok = window_[i];
    const float count = static_cast<float>(j - i);
    i = j;
    if (tok < 0 || tok >= n_vocab_) continue;
    float& l = logits[tok];
    if (p_.repetition_penalty != 1.0f) l = l > 0.0f ? l / p_.repetition_penalty : l * p_.repetition_penalty;
    l -= count * p_.frequency_penalty + p_.presence_penalty;
  }
}

int32_t Sampler::Argmax(const float* logits) const {
  int32_t best = 0;
  float best_l = kNegInf;
  for (int32_t i = 0; i < n_vocab_; ++i) {
    if (logits[i] > best_l) {  // strict: ties keep the lowest id; NaN never wins
      best_l = logits[i];
      best = i;
    }
  }
  return best;
}

namespace {

// The (logit desc, id asc) total order every filter cuts a prefix of.
struct Before {
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  }
};

}  // namespace

size_t Sampler::WeighAndCut(Candidate* c, size_t k, float inv_t) const {
  // softmax with temperature, unnormalised: the best token (c[0]) has w = 1
  const float lmax = c[0].logit;
  double z = 0.0;
  for (size_t i = 0; i < k; ++i) z += c[i].w = std::exp((c[i].logit - lmax) * inv_t);
  // top-p then min-p; both keep prefixes, so the shorter prefix wins. min-p's
  // test p >= min_p * p_max is w >= min_p, since w = p / p_max.
  size_t size = k;
  if (p_.top_p < 1.0f) {
    const double target = static_cast<double>(p_.top_p) * z;
    double cum = 0.0;
    for (size_t i = 0; i < k; ++i) {
      if ((cum += c[i].w) >= target) {
        size = i + 1;
        break;
      }
    }
  }
  if (p_.min_p > 0.0f) {
    const float min_w = p_.min_p;
    size = static_cast<size_t>(
        std::partition_point(c, c + size, [&](const Candidate& x) { return x.w >= min_w; }) - c);
  }
  return size;
}

namespace {

// top-k up to this size is sorted outright; above it (or with top-k off) the
// bucketed path avoids sorting the vocabulary.
constexpr size_t kSortedTopK = 4096;

// top-p buckets over x = (logit - max) / T in [-kBucketRange, 0]; everything
// below (weight < e^-32 of the best token's) shares the last bucket.
constexpr int kBuckets = 1024;
constexpr float kBucketRange = 32.0f;

int Bucket(float x) {  // x <= 0
  const float y = -x * (kBuckets / kBucketRange);
  return y >= static_cast<float>(kBuckets - 1) ? kBuckets - 1 : static_cast<int>(y);
}

}  // namespace

int32_t Sampler::Sample(float* logits, std::span<const int32_t> history) {
  if (rules_ != nullptr) rules_->Apply(logits, history.size());
  if (constraint_ != nullptr) constraint_->Apply(logits, n_vocab_, history);
  ApplyPenalties(logits, history);
  if (p_.temperature == 0.0f || p_.top_k == 1) return Argmax(logits);
  const float inv_t = 1.0f / p_.temperature;
  if (!std::isfinite(inv_t)) return Argmax(logits);  // subnormal T: greedy in the limit
  const size_t n = static_cast<size_t>(n_vocab_);
  for (size_t i = 0; i < n; ++i)
    if (std::isnan(logits[i])) logits[i] = kNegInf;
  const size_t k = (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < n) ? static_cast<size_t>(p_.top_k) : 0;
  return k > 0 && k <= kSortedTopK ? SampleTopK(logits, inv_t, k) : SampleWide(logits, inv_t, k);
}

// Small top-k: select the k best with a bounded heap, sort them, and cut every
// later filter as a prefix of that sorted list.
int32_t Sampler::SampleTopK(const float* logits, float inv_t, size_t k) {
  Candidate* c = cand_.data();
  const size_t n = static_cast<size_t>(n_vocab_);
  // c[0, k) is a heap whose top c[0] is the worst of the k best so far. Most
  // tokens fail the single comparison with it, so this is one cheap pass over
  // the logits (an nth_element over (n_vocab) candidates costs several times
  // more). Ids increase, so a tie with the top never displaces it.
  for (size_t i = 0; i < k; ++i) c[i] = {logits[i], static_cast<int32_t>(i), 0.0f};
  std::make_heap(c, c + k, Before{});
  for (size_t i = k; i < n; ++i) {
    if (logits[i] > c[0].logit) {
      std::pop_heap(c, c + k, Before{});
      c[k - 1] = {logits[i], static_cast<int32_t>(i), 0.0f};
      std::push_heap(c, c + k, Before{});
    }
  }
  std::sort(c, c + k, Before{});
  const float lmax = c[0].logit;
  if (!std::isfinite(lmax)) return Argmax(logits);  // all -inf, or +inf present

  const size_t size = WeighAndCut(c, k, inv_t);

  // renormalise and draw, in sorted order
  double total = 0.0;
  for (size_t i = 0; i < size; ++i) total += c[i].w;
  const double target = rng_.NextDouble() * total;
  double cum = 0.0;
  for (size_t i = 0; i < size; ++i) {
    if ((cum += c[i].w) > target && c[i].w > 0.0f) return c[i].id;
  }
  return c[0].id;  // rounding left the target at the total (c[0] has w = 1)
}

// No top-k, or a large one. Sorting the survivors could mean sorting most of a
// 256K vocabulary, so instead every filter is expressed as a zero weight in the
// id-indexed w_, and the draw walks ids in order:
//
//   top-k   nth_element once; tokens after the k-th (in the total order) get w = 0
//   top-p   weights summed into kBuckets buckets by log-weight; the bucket where
//           the cumulative mass crosses top_p is the only one sorted, which
//           gives the cut-off token; tokens after it get w = 0
//   min-p   w < min_p gets w = 0
int32_t Sampler::SampleWide(float* logits, float inv_t, size_t k) {
  const size_t n = static_cast<size_t>(n_vocab_);
  Candidate kcut{};
  if (k > 0) {
    Candidate* c = cand_.data();
    for (size_t i = 0; i < n; ++i) c[i] = {logits[i], static_cast<int32_t>(i), 0.0f};
    std::nth_element(c, c + (k - 1), c + n, Before{});
    kcut = c[k - 1];  // the k-th best: the top-k set is everything up to it
  }
  float lmax = kNegInf;
  for (size_t i = 0; i < n; ++i) lmax = std::max(lmax, logits[i]);
  if (!std::isfinite(lmax)) return Argmax(logits);

  const auto after = [](const Candidate& cut, float l, size_t i) {  // (l, i) comes after cut
    return l < cut.logit || (l == cut.logit && static_cast<int32_t>(i) > cut.id);
  };
  float* w = w_.data();
  double z = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const bool out = k > 0 && after(kcut, logits[i], i);
    z += w[i] = out ? 0.0f : std::exp((logits[i] - lmax) * inv_t);
  }

  Candidate pcut{};
  bool has_pcut = false;
  if (p_.top_p < 1.0f) {
    double mass[kBuckets] = {};
    for (size_t i = 0; i < n; ++i)
      if (w[i] > 0.0f) mass[Bucket((logits[i] - lmax) * inv_t)] += w[i];
    const double target = static_cast<double>(p_.top_p) * z;
    double cum = 0.0;
    int bc = 0;
    for (; bc < kBuckets; ++bc) {
      if (cum + mass[bc] >= target) break;
      cum += mass[bc];
    }
    if (bc < kBuckets) {  // else rounding: top-p keeps everything
      Candidate* c = cand_.data();
      size_t m = 0;
      for (size_t i = 0; i < n; ++i)
        if (w[i] > 0.0f && Bucket((logits[i] - lmax) * inv_t) == bc) c[m++] = {logits[i], static_cast<int32_t>(i), w[i]};
      std::sort(c, c + m, Before{});
      for (size_t j = 0; j < m && !has_pcut; ++j) {
        if ((cum += c[j].w) >= target || j + 1 == m) {
          pcut = c[j];
          has_pcut = true;
        }
      }
    }
  }

  // apply min-p and top-p, renormalise, draw in id order
  const float min_w = p_.min_p;
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) {
    if (w[i] < min_w || (has_pcut && after(pcut, logits[i], i))) w[i] = 0.0f;
    total += w[i];
  }
  const double target = rng_.NextDouble() * total;
  double cum = 0.0;
  int32_t last = -1;
  for (size_t i = 0; i < n; ++i) {
    if (w[i] <= 0.0f) continue;
    last = static_cast<int32_t>(i);
    if ((cum += w[i]) > target) return last;
  }
  // Rounding left the target at the total: the last token with weight. There
  // is one (the best token has w = 1); Argmax is belt and braces.
  return last >= 0 ? last : Argmax(logits);
}

// ------------------------------------------------------------- distribution

// The chain of Sample() written out as probabilities. The candidates are cut
// as prefixes of the same (logit desc, id asc) order, so the surviving set and
// the weights match Sample()'s (up to the order of float sums).
void Sampler::Distribution(float* logits, std::span<const int32_t> history, float* probs) {
  if (rules_ != nullptr) rules_->Apply(logits, history.size());
  if (constraint_ != nullptr) constraint_->Apply(logits, n_vocab_, history);
  ApplyPenalties(logits, history);
  const size_t n = static_cast<size_t>(n_vocab_);
  std::fill(probs, probs + n, 0.0f);
  const float inv_t = greedy() ? 0.0f : 1.0f / p_.temperature;
  if (greedy() || !std::isfinite(inv_t)) {
    probs[Argmax(logits)] = 1.0f;
    return;
  }
  for (size_t i = 0; i < n; ++i)
    if (std::isnan(logits[i])) logits[i] = kNegInf;
  const size_t k = (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < n) ? static_cast<size_t>(p_.top_k) : n;
  Candidate* c = cand_.data();
  for (size_t i = 0; i < n; ++i) c[i] = {logits[i], static_cast<int32_t>(i), 0.0f};
  if (k < n) std::nth_element(c, c + (k - 1), c + n, Before{});
  std::sort(c, c + k, Before{});
  const float lmax = c[0].logit;
  if (!std::isfinite(lmax)) {  // all -inf, or +inf present: Sample() takes the argmax
    probs[Argmax(logits)] = 1.0f;
    return;
  }
  const size_t size = WeighAndCut(c, k, inv_t);
  double total = 0.0;
  for (size_t i = 0; i < size; ++i) total += c[i].w;
  for (size_t i = 0; i < size; ++i) probs[c[i].id] = static_cast<float>(c[i].w / total);
}

// ------------------------------------------------------------- logprobs

namespace {

// max and log(sum(exp(l - max))) over the finite-or-infinite logits, NaN
// skipped (sum_exp.h: vectorised, relative error below 2e-7). The sum is
// n_max >= 1 terms of exactly 1 plus the rest, so log1p keeps the digits of
// a sum close to 1: the log-probability of a near-certain token.
void LogSumExp(const float* logits, int32_t n, float* max_out, double* log_sum_out) {
  const MaxSumExp r = RowMaxSumExp(logits, n);
  *max_out = r.max;
  *log_sum_out = r.n_max >= 1.0 ? std::log1p((r.n_max - 1.0) + r.rest) : -std::numeric_limits<double>::infinity();
}

// log p of a logit l of the row summarised by r.
float LogprobFrom(const MaxSumExp& r, float l) {
  if (!std::isfinite(r.max) || std::isnan(l)) return kNegInf;  // degenerate row, or a NaN logit
  const double log_sum = std::log1p((r.n_max - 1.0) + r.rest);  // n_max >= 1: see LogSumExp
  return static_cast<float>(static_cast<double>(l) - r.max - log_sum);
}

}  // namespace

float TokenLogprob(const float* logits, int32_t n_vocab, int32_t token) {
  if (token < 0 || token >= n_vocab) return kNegInf;
  return LogprobFrom(RowMaxSumExp(logits, n_vocab), logits[token]);
}

GreedyPick GreedyWithLogprob(const float* logits, int32_t n_vocab) {
  if (n_vocab <= 0) return {0, kNegInf};
  const MaxSumExp r = RowMaxSumExp(logits, n_vocab);
  int32_t token = 0;
  if (r.max > kNegInf) {
    while (logits[token] != r.max) ++token;  // r.max is one of the logits
  }
  return {token, LogprobFrom(r, logits[token])};
}

void LogSoftmax(const float* logits, int32_t n_vocab, float* out) {
  float m;
  double log_sum;
  LogSumExp(logits, n_vocab, &m, &log_sum);
  const bool ok = std::isfinite(m);
  for (int32_t i = 0; i < n_vocab; ++i) {
    const float l = logits[i];
    out[i] = (!ok || std::isnan(l)) ? kNegInf : static_cast<float>(static_cast<double>(l) - m - log_sum);
  }
}

}  // namespace llm
