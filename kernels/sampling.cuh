// Device sampling: a decode step can return token ids instead of n_vocab
// floats per row.
//
// LaunchSample runs the host Sampler's chain (src/sample/sampler.h) on each
// row, one CTA per row:
//
//   raw logits ─► log-sum-exp (for the chosen token's logprob)
//              ─► penalties (repetition, frequency, presence over the row's
//                 (token, count) list, applied in place)
//              ─► temperature == 0, top_k == 1 or 1/T not finite ? argmax (ties → lowest id; NaN never wins)
//              ─► NaN as -inf; max not finite ? argmax
//              ─► top-k ─► w = exp((l - max) / T) ─► top-p ─► min-p ─► draw
//
// Every filter keeps a prefix of the (logit desc, id asc) order, as on the
// host. The cut-offs are found without sorting: radix selection over the
// logits' order-preserving 32-bit keys, by count (top-k) and by probability
// mass (top-p). Masses are summed as 2^-40 fixed-point integers, so every
// sum (and hence every cut-off and draw) is the same whatever order the
// threads add in: a row's result depends only on its logits and parameters.
//
// The draw is inverse-CDF in id order with u = SampleUniform(seed, step), a
// counter-based hash: deterministic per request and independent of the row's
// position in the batch, but not the host Sampler's xoshiro stream.
#pragma once

#include "common.cuh"

#if defined(__CUDACC__)
#define LLM_HOST_DEVICE __host__ __device__
#else
#define LLM_HOST_DEVICE
#endif

namespace llm::cuda {

// out[r] = argmax_j logits[r][j], the smallest j among equal maxima; NaN
// entries never win. logits: (n_rows, n_vocab) F32; out: (n_rows).
cudaError_t LaunchArgmax(const float* logits, int32_t n_rows, int32_t n_vocab, int32_t* out, cudaStream_t stream);

// One row's sampling parameters, sanitised on the host as the Sampler does.
struct SampleRowParams {
  float temperature;         // 0 = greedy
  int32_t top_k;             // 0 = off
  float top_p;               // (0, 1]; 1 = off
  float min_p;               // [0, 1]; 0 = off
  float repetition_penalty;  // 1 = off
  float frequency_penalty;
  float presence_penalty;
  int32_t pen_offset;        // this row's (token, count) list in SampleArgs::pen_*
  int32_t n_pen;             // its length; 0 = no penalties
  int32_t reserved;
  uint64_t seed;
  uint64_t step;             // RNG counter
};
static_assert(sizeof(SampleRowParams) == 56);

struct SampleArgs {
  float* logits = nullptr;                  // (n_rows, n_vocab) F32; penalties are applied in place
  int32_t n_rows = 0;
  int32_t n_vocab = 0;
  const SampleRowParams* params = nullptr;  // (n_rows)
  const int32_t* pen_tokens = nullptr;      // (sum n_pen) distinct ids per row (ids outside the vocabulary are skipped)
  const int32_t* pen_counts = nullptr;      // (sum n_pen) occurrences in the penalty window
  float* pen_raw = nullptr;                 // (sum n_pen) scratch: the raw logits the penalties replace
  int32_t* tokens = nullptr;                // (n_rows) out
  float* logprobs = nullptr;                // (n_rows) out, or nullptr: log softmax(raw logits)[token]
};

// cudaErrorInvalidValue for n_rows < 0, n_vocab <= 0 or a missing pointer.
cudaError_t LaunchSample(const SampleArgs& a, cudaStream_t stream);

// splitmix64's finaliser.
LLM_HOST_DEVICE inline uint64_t SampleMix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The uniform draw in [0, 1) (53 bits) of (seed, step): a pure function,
// computed the same on host and device (tests recompute it).
LLM_HOST_DEVICE inline double SampleUniform(uint64_t seed, uint64_t step) {
  const uint64_t h = SampleMix64(SampleMix64(seed + 0x9E3779B97F4A7C15ull) ^ (step * 0xD1B54A32D192ED03ull + 1));
  return static_cast<double>(h >> 11) * (1.0 / 9007199254740992.0);  // 2^-53
}

// Fixed-point scale of the weights w in [0, 1] the kernel sums (2^40: a
// 2^18-token vocabulary of w = 1 still fits in 64 bits).
constexpr double kSampleFixedScale = 1099511627776.0;

}  // namespace llm::cuda
