#include "backend/cpu/qwen25vl_vision.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/encoder_attention.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/vision_linear.h"
#include "backend/validate.h"
#include "util/thread_pool.h"

namespace llm::cpu {
namespace {

constexpr int32_t kWindowPixels = 112;  // llama.cpp's attention window for Qwen2.5-VL, in pixels
constexpr float kRopeBase = 10000.0f;
// A picture's patches are held to this (llama.cpp's 4096 merged tokens, 4 patches each).
constexpr int64_t kMaxPatches = 4 * 4096;

const float* F32(const WeightView& w) { return static_cast<const float*>(w.data); }

class CpuQwen25VLVision final : public VisionEncoder {
 public:
  CpuQwen25VLVision(const VisionConfig& c, const VisionWeights& w, int n_threads, Qwen25VLMutation m)
      : c_(c), w_(w), m_(m), pool_(n_threads), k_(BestKernels()), linear_(k_, pool_) {}

  Status Check() const {
    const char* who = "CPU Qwen2.5-VL tower";
    const int64_t E = c_.n_embd, F = c_.n_ff, K = 3LL * c_.patch_size * c_.patch_size;
    LLM_RETURN_IF_ERROR(CheckWeightMatrix(w_.patch_embd, E, K, "patch_embd", who));
    LLM_RETURN_IF_ERROR(CheckWeightMatrix(w_.patch_embd1, E, K, "patch_embd.1", who));
    if (static_cast<int64_t>(w_.layers.size()) != c_.n_layer) return InvalidArgument("CPU Qwen2.5-VL tower: wrong layer count");
    auto vec = [](const WeightView& v, int64_t n) { return !v.empty() && v.type == TensorType::F32 && v.cols == n; };
    for (const VisionLayerWeights& L : w_.layers) {
      LLM_RETURN_IF_ERROR(CheckWeightMatrix(L.wq, E, E, "attn_q", who));
      LLM_RETURN_IF_ERROR(CheckWeightMatrix(L.wk, E, E, "attn_k", who));
      LLM_RETURN_IF_ERROR(CheckWeightMatrix(L.wv, E, E, "attn_v", who));
      LLM_RETURN_IF_ERROR(CheckWeightMatrix(L.wo, E, E, "attn_out", who));
      LLM_RETURN_IF_ERROR(CheckWeightMatrix(L.w_gate, F, E, "ffn_gate", who));
      LLM_RETURN_IF_ERROR(CheckWeightMatrix(L.w_up, F, E, "ffn_up", who));
      LLM_RETURN_IF_ERROR(CheckWeightMatrix(L.w_down, E, F, "ffn_down", who));
      for (const WeightView* v : {&L.ln1, &L.ln2, &L.bq, &L.bk, &L.bv, &L.bo, &L.b_down})
        if (!vec(*v, E)) return InvalidArgument("CPU Qwen2.5-VL tower: a norm or bias is missing or not F32");
      if (!vec(L.b_gate, F) || !vec(L.b_up, F))
        return InvalidArgument("CPU Qwen2.5-VL tower: ffn_gate's or ffn_up's bias is missing or not F32");
    }
    if (!vec(w_.post_ln, E)) return InvalidArgument("CPU Qwen2.5-VL tower: post_ln is missing or not F32");
    LLM_RETURN_IF_ERROR(CheckWeightMatrix(w_.merger_w0, 4 * E, 4 * E, "mm.0", who));
    LLM_RETURN_IF_ERROR(CheckWeightMatrix(w_.merger_w1, c_.n_embd_out, 4 * E, "mm.2", who));
    if (!vec(w_.merger_b0, 4 * E) || !vec(w_.merger_b1, c_.n_embd_out))
      return InvalidArgument("CPU Qwen2.5-VL merger: a bias is missing or not F32");
    if (c_.head_dim % 4 != 0) return InvalidArgument("CPU Qwen2.5-VL tower: head_dim must be a multiple of 4");
    if (c_.n_wa_pattern > 0 && kWindowPixels / c_.patch_size / 2 < 1)
      return InvalidArgument("CPU Qwen2.5-VL tower: patches too large for the attention window");
    return Status::Ok();
  }

  int32_t n_tokens() const override { return 0; }
  int32_t n_embd_out() const override { return c_.n_embd_out; }
  int32_t n_tokens_for(int32_t width, int32_t height) const override {
    const int32_t a = 2 * c_.patch_size;
    if (width < a || height < a || width % a != 0 || height % a != 0) return 0;
    return (width / a) * (height / a);
  }

  Status Encode(const std::vector<float>&, float*) override {
    return InvalidArgument("Qwen2.5-VL's tower reads each picture at its own size: EncodeSized");
  }

  Status EncodeSized(const std::vector<float>& pixels, int32_t width, int32_t height, float* out) override {
    const int32_t a = 2 * c_.patch_size;
    if (width < a || height < a || width % a != 0 || height % a != 0)
      return InvalidArgument("Qwen2.5-VL vision encoder: a " + std::to_string(width) + "x" + std::to_string(height) +
                             " picture; each side must be a positive multiple of " + std::to_string(a));
    const int64_t n = static_cast<int64_t>(width / c_.patch_size) * (height / c_.patch_size);
    if (n > kMaxPatches)
      return InvalidArgument("Qwen2.5-VL vision encoder: " + std::to_string(n) + " patches, more than " +
                             std::to_string(kMaxPatches));
    if (pixels.size() != 3ull * width * height)
      return InvalidArgument("Qwen2.5-VL vision encoder: " + std::to_string(pixels.size()) +
                             " pixel values, expected 3 x " + std::to_string(width) + " x " + std::to_string(height));
    if (out == nullptr) return InvalidArgument("vision encoder: no output buffer");
    Run(pixels.data(), width, height, out);
    return Status::Ok();
  }

 private:
  void Layout(int32_t width, int32_t height);
  void Patchify(const float* pixels, int32_t width, int32_t height);
  void Rope(float* x);
  void Run(const float* pixels, int32_t width, int32_t height, float* out);

  const VisionConfig& c_;
  const VisionWeights& w_;
  Qwen25VLMutation m_;
  ThreadPool pool_;
  const Kernels& k_;
  VisionLinear linear_;
  // ---- one picture's layout: cells (2 x 2 patch groups) in window order
  int64_t gx_ = 0, gy_ = 0;         // patches per row, per column
  std::vector<int64_t> cell_of_;    // window-order slot -> the cell's row-major index
  std::vector<int64_t> windows_;    // window w holds slots [windows_[w], windows_[w + 1])
  std::vector<int32_t> pos_y_, pos_x_;  // per patch row (window order)
  // ---- activations
  std::vector<float> patches_, x_, h_, q_, kk_, v_, att_, g_, u_, merged_, tok_;
  std::vector<float> cos_, sin_;
  EncoderAttnScratch attn_;
};

void CpuQwen25VLVision::Layout(int32_t width, int32_t height) {
  gx_ = width / c_.patch_size;
  gy_ = height / c_.patch_size;
  const int64_t mx = gx_ / 2, my = gy_ / 2;
  cell_of_.clear();
  windows_.assign(1, 0);
  if (c_.n_wa_pattern > 0) {
    const int64_t g = kWindowPixels / c_.patch_size / 2;
    for (int64_t y = 0; y < my; y += g)
      for (int64_t x = 0; x < mx; x += g) {
        for (int64_t dy = 0; dy < std::min(g, my - y); ++dy)
          for (int64_t dx = 0; dx < std::min(g, mx - x); ++dx) cell_of_.push_back((y + dy) * mx + x + dx);
        windows_.push_back(static_cast<int64_t>(cell_of_.size()));
      }
  } else {
    for (int64_t i = 0; i < mx * my; ++i) cell_of_.push_back(i);
    windows_.push_back(mx * my);
  }
  pos_y_.resize(cell_of_.size() * 4);
  pos_x_.resize(cell_of_.size() * 4);
  for (size_t s = 0; s < cell_of_.size(); ++s) {
    const int64_t by = cell_of_[s] / mx, bx = cell_of_[s] % mx;
    for (int d = 0; d < 4; ++d) {
      pos_y_[s * 4 + d] = static_cast<int32_t>(2 * by + d / 2);
      pos_x_[s * 4 + d] = static_cast<int32_t>(2 * bx + d % 2);
    }
  }
}

// row s·4 + d holds patch (pos_y_, pos_x_); its column (ch, y, x) is
// ch·P·P + y·P + x, the layout of the convolution kernel's (E, 3, P, P).
void CpuQwen25VLVision::Patchify(const float* pixels, int32_t width, int32_t height) {
  const int64_t P = c_.patch_size, K = 3 * P * P, N = gx_ * gy_, W = width, plane = int64_t{width} * height;
  patches_.resize(static_cast<size_t>(N * K));
  for (int64_t r = 0; r < N; ++r) {
    float* row = patches_.data() + r * K;
    const int64_t py = pos_y_[r], px = pos_x_[r];
    for (int64_t ch = 0; ch < 3; ++ch)
      for (int64_t y = 0; y < P; ++y)
        for (int64_t x = 0; x < P; ++x) row[(ch * P + y) * P + x] = pixels[ch * plane + (py * P + y) * W + px * P + x];
  }
}

// 2D RoPE of every head of every row of x (N, E), in place, with the
// per-row angles in cos_/sin_ (N, head_dim / 2).
void CpuQwen25VLVision::Rope(float* x) {
  const int64_t N = gx_ * gy_, E = c_.n_embd, d = c_.head_dim, half = d / 2;
  for (int64_t t = 0; t < N; ++t) {
    const float* cs = cos_.data() + t * half;
    const float* sn = sin_.data() + t * half;
    for (int32_t h = 0; h < c_.n_head; ++h) {
      float* r = x + t * E + h * d;
      for (int64_t j = 0; j < half; ++j) {
        const float x0 = r[j], x1 = r[j + half];
        r[j] = x0 * cs[j] - x1 * sn[j];
        r[j + half] = x0 * sn[j] + x1 * cs[j];
      }
    }
  }
}

void CpuQwen25VLVision::Run(const float* pixels, int32_t width, int32_t height, float* out) {
  Layout(width, height);
  const int64_t N = gx_ * gy_, E = c_.n_embd, F = c_.n_ff, T = N / 4, D = c_.n_embd_out;
  const int64_t d = c_.head_dim, half = d / 2, quarter = d / 4;
  x_.resize(N * E);
  h_.resize(N * E);
  q_.resize(N * E);
  kk_.resize(N * E);
  v_.resize(N * E);
  att_.resize(N * E);
  g_.resize(N * F);
  u_.resize(N * F);
  // ---- the angles: theta advances by a factor per pair; the second quarter
  // starts again from its own position (as ggml's vision M-RoPE does)
  cos_.resize(N * half);
  sin_.resize(N * half);
  const float theta_scale = std::pow(kRopeBase, -2.0f / static_cast<float>(half));
  for (int64_t t = 0; t < N; ++t) {
    const float py = static_cast<float>(m_.swap_rope_axes ? pos_x_[t] : pos_y_[t]);
    const float px = static_cast<float>(m_.swap_rope_axes ? pos_y_[t] : pos_x_[t]);
    float th_y = py, th_x = px;
    for (int64_t j = 0; j < half; ++j) {
      if (j == quarter) th_x = px;
      const float th = j < quarter ? th_y : th_x;
      cos_[t * half + j] = std::cos(th);
      sin_[t * half + j] = std::sin(th);
      th_y *= theta_scale;
      th_x *= theta_scale;
    }
  }
  // ---- embeddings: both patch kernels, summed
  Patchify(pixels, width, height);
  linear_(w_.patch_embd, WeightView{}, patches_.data(), N, x_.data());
  linear_(w_.patch_embd1, WeightView{}, patches_.data(), N, x_.data(), /*accumulate=*/true);
  EncoderAttnShape shape;
  shape.n_head = c_.n_head;
  shape.head_dim = c_.head_dim;
  shape.ld = E;
  shape.scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (int32_t il = 0; il < c_.n_layer; ++il) {
    const VisionLayerWeights& L = w_.layers[il];
    const bool full = m_.full_attention || c_.n_wa_pattern == 0 || (il + 1) % c_.n_wa_pattern == 0;
    // ---- attention block (pre-norm)
    h_ = x_;
    RmsNormRows(h_.data(), N, E, F32(L.ln1), c_.eps);
    linear_(L.wq, L.bq, h_.data(), N, q_.data());
    linear_(L.wk, L.bk, h_.data(), N, kk_.data());
    linear_(L.wv, L.bv, h_.data(), N, v_.data());
    Rope(q_.data());
    Rope(kk_.data());
    if (full) {
      shape.n = N;
      EncoderAttention(k_, pool_, shape, q_.data(), kk_.data(), v_.data(), att_.data(), &attn_);
    } else {
      for (size_t w = 0; w + 1 < windows_.size(); ++w) {
        const int64_t r0 = windows_[w] * 4 * E;
        shape.n = (windows_[w + 1] - windows_[w]) * 4;
        EncoderAttention(k_, pool_, shape, q_.data() + r0, kk_.data() + r0, v_.data() + r0, att_.data() + r0, &attn_);
      }
    }
    linear_(L.wo, L.bo, att_.data(), N, x_.data(), /*accumulate=*/true);
    // ---- feed-forward block (pre-norm, SwiGLU)
    h_ = x_;
    RmsNormRows(h_.data(), N, E, F32(L.ln2), c_.eps);
    linear_(L.w_gate, L.b_gate, h_.data(), N, g_.data());
    linear_(L.w_up, L.b_up, h_.data(), N, u_.data());
    k_.silu_mul(g_.data(), u_.data(), N * F);
    linear_(L.w_down, L.b_down, g_.data(), N, x_.data(), /*accumulate=*/true);
  }
  RmsNormRows(x_.data(), N, E, F32(w_.post_ln), c_.eps);
  // ---- the merger: a cell's four rows are one (4E) row of x_ already
  merged_.resize(T * 4 * E);
  linear_(w_.merger_w0, w_.merger_b0, x_.data(), T, merged_.data());
  g_.assign(static_cast<size_t>(T * 4 * E), 1.0f);
  k_.gelu_mul(merged_.data(), g_.data(), T * 4 * E);
  tok_.resize(T * D);
  linear_(w_.merger_w1, w_.merger_b1, merged_.data(), T, tok_.data());
  for (int64_t s = 0; s < T; ++s)
    std::copy(tok_.begin() + s * D, tok_.begin() + (s + 1) * D, out + cell_of_[s] * D);
}

}  // namespace

StatusOr<std::unique_ptr<VisionEncoder>> CreateQwen25VLVision(const VisionConfig& config,
                                                              const VisionWeights& weights, int n_threads,
                                                              Qwen25VLMutation mutation) {
  if (n_threads < 1) return InvalidArgument("vision encoder: n_threads must be >= 1");
  if (config.projector != ProjectorType::kQwen25VL) return InvalidArgument("vision encoder: not a Qwen2.5-VL projector");
  auto enc = std::make_unique<CpuQwen25VLVision>(config, weights, n_threads, mutation);
  LLM_RETURN_IF_ERROR(enc->Check());
  return std::unique_ptr<VisionEncoder>(std::move(enc));
}

}  // namespace llm::cpu
