// Device sampling (CudaBackend::ForwardSample, cuda_backend.h): the forward
// pass (graph or eager, as Forward), then kernels/sampling.cu on the logits
// rows while they are still on the device; only token ids (and logprobs)
// come back.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "sampling.cuh"

namespace llm::cuda {
namespace {

size_t Align8(size_t b) { return (b + 7) / 8 * 8; }

}  // namespace

// Appends the (token, count) pairs Sampler::ApplyPenalties would apply: the
// distinct ids among the last penalty_last_n history tokens (all for -1),
// none when every penalty is off. Ids outside the vocabulary are dropped
// (the host skips them too).
static void AppendPenaltyList(const SamplingParams& p, std::span<const int32_t> history, int32_t n_vocab,
                              std::vector<int32_t>* window, std::vector<int32_t>* tokens,
                              std::vector<int32_t>* counts) {
  const bool any = p.repetition_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f;
  if (!any || p.penalty_last_n == 0 || history.empty()) return;
  size_t n = history.size();
  if (p.penalty_last_n > 0) n = std::min(n, static_cast<size_t>(p.penalty_last_n));
  const std::span<const int32_t> win = history.subspan(history.size() - n);
  window->assign(win.begin(), win.end());
  std::sort(window->begin(), window->end());
  for (size_t i = 0; i < window->size();) {
    size_t j = i + 1;
    while (j < window->size() && (*window)[j] == (*window)[i]) ++j;
    const int32_t tok = (*window)[i];
    if (tok >= 0 && tok < n_vocab) {
      tokens->push_back(tok);
      counts->push_back(static_cast<int32_t>(j - i));
    }
    i = j;
  }
}

Status CudaBackend::ForwardSample(const Batch& batch, std::span<const DeviceSampling> sampling, int32_t* tokens,
                                  float* logprobs) {
  if (partial() || from_hidden()) return Unsupported("ForwardSample: this CUDA backend runs only some layers of the model");
  LLM_CUDA_TRY(cudaSetDevice(opt_.device), "cudaSetDevice");
  LLM_RETURN_IF_ERROR(Validate(batch, nullptr, /*need_logits=*/false));
  if (sampling.size() != batch.logit_rows.size())
    return InvalidArgument("ForwardSample: " + std::to_string(sampling.size()) + " sampling entries for " +
                           std::to_string(batch.logit_rows.size()) + " logit rows");
  if (!sampling.empty() && tokens == nullptr) return InvalidArgument("ForwardSample: tokens output is NULL");
  for (const DeviceSampling& s : sampling) LLM_RETURN_IF_ERROR(ValidateSamplingParams(s.params));
  if (batch.tokens.empty()) return Status::Ok();
  bool handled = false;
  Status st = RunDecodeGraph(&handled);
  if (st.ok() && !handled) st = RunEager();
  if (st.ok()) st = SampleOnDevice(sampling, tokens, logprobs);
  return SettleOnError(std::move(st));  // the staging buffers may still be read (cuda_forward.cpp)
}

// Device buffer (8-byte aligned parts):
//   params (n x SampleRowParams) | pen_tokens (p) | pen_counts (p) | pen_raw (p) F32 | tokens (n) | logprobs (n) F32
// The pinned buffer mirrors it: the first three parts go up, the last two come back.
Status CudaBackend::SampleOnDevice(std::span<const DeviceSampling> sampling, int32_t* tokens, float* logprobs) {
  const int32_t n = n_out_;
  if (n == 0) {
    LLM_CUDA_TRY(cudaStreamSynchronize(stream_), "forward");
    return Status::Ok();
  }
  samp_rows_.resize(static_cast<size_t>(n));
  samp_pen_tok_.clear();
  samp_pen_cnt_.clear();
  for (int32_t i = 0; i < n; ++i) {
    const SamplingParams p = SanitisedSamplingParams(sampling[i].params);
    SampleRowParams& r = samp_rows_[i];
    r.temperature = p.temperature;
    r.top_k = p.top_k;
    r.top_p = p.top_p;
    r.min_p = p.min_p;
    r.repetition_penalty = p.repetition_penalty;
    r.frequency_penalty = p.frequency_penalty;
    r.presence_penalty = p.presence_penalty;
    r.pen_offset = static_cast<int32_t>(samp_pen_tok_.size());
    AppendPenaltyList(p, sampling[i].history, cfg_.n_vocab, &samp_window_, &samp_pen_tok_, &samp_pen_cnt_);
    r.n_pen = static_cast<int32_t>(samp_pen_tok_.size()) - r.pen_offset;
    r.reserved = 0;
    r.seed = p.seed;
    r.step = sampling[i].step;
  }
  const size_t np = std::max<size_t>(samp_pen_tok_.size(), 1);  // never a null list pointer
  const size_t o_params = 0;
  const size_t o_ptok = Align8(o_params + static_cast<size_t>(n) * sizeof(SampleRowParams));
  const size_t o_pcnt = Align8(o_ptok + np * sizeof(int32_t));
  const size_t o_praw = Align8(o_pcnt + np * sizeof(int32_t));
  const size_t o_tok = Align8(o_praw + np * sizeof(float));
  const size_t o_lp = Align8(o_tok + static_cast<size_t>(n) * sizeof(int32_t));
  const size_t total = Align8(o_lp + static_cast<size_t>(n) * sizeof(float));
  if (samp_dev_.bytes() < total || samp_pinned_.bytes() < total) {
    LLM_CUDA_TRY(cudaStreamSynchronize(stream_), "synchronise before growing sampling buffers");
    const size_t grown = std::max(total, samp_dev_.bytes() * 2);
    LLM_RETURN_IF_ERROR(samp_dev_.Allocate(grown, "sampling parameters"));
    LLM_RETURN_IF_ERROR(samp_pinned_.Allocate(grown, "sampling parameters (host)"));
  }
  unsigned char* h = samp_pinned_.get<unsigned char>();
  unsigned char* d = samp_dev_.get<unsigned char>();
  std::memcpy(h + o_params, samp_rows_.data(), static_cast<size_t>(n) * sizeof(SampleRowParams));
  if (!samp_pen_tok_.empty()) {
    std::memcpy(h + o_ptok, samp_pen_tok_.data(), samp_pen_tok_.size() * sizeof(int32_t));
    std::memcpy(h + o_pcnt, samp_pen_cnt_.data(), samp_pen_cnt_.size() * sizeof(int32_t));
  }
  LLM_CUDA_TRY(cudaMemcpyAsync(d, h, o_praw, cudaMemcpyHostToDevice, stream_), "upload sampling parameters");

  SampleArgs a;
  a.logits = logits_.get<float>();
  a.n_rows = n;
  a.n_vocab = cfg_.n_vocab;
  a.params = reinterpret_cast<const SampleRowParams*>(d + o_params);
  a.pen_tokens = reinterpret_cast<const int32_t*>(d + o_ptok);
  a.pen_counts = reinterpret_cast<const int32_t*>(d + o_pcnt);
  a.pen_raw = reinterpret_cast<float*>(d + o_praw);
  a.tokens = reinterpret_cast<int32_t*>(d + o_tok);
  a.logprobs = logprobs != nullptr ? reinterpret_cast<float*>(d + o_lp) : nullptr;
  LLM_RETURN_IF_ERROR(Launched(LaunchSample(a, stream_), "device sampling"));
  LLM_CUDA_TRY(cudaMemcpyAsync(h + o_tok, d + o_tok, total - o_tok, cudaMemcpyDeviceToHost, stream_),
               "copy sampled tokens to the host");
  LLM_CUDA_TRY(cudaStreamSynchronize(stream_), "forward + sampling");
  std::memcpy(tokens, h + o_tok, static_cast<size_t>(n) * sizeof(int32_t));
  if (logprobs != nullptr) std::memcpy(logprobs, h + o_lp, static_cast<size_t>(n) * sizeof(float));
  return Status::Ok();
}

}  // namespace llm::cuda
