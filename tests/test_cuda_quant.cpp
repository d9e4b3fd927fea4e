// Quantized weights on the CUDA device (issue 21): the block decoding, the
// decode GEMV and the prefill path's dequantization against the CPU
// backend, on fresh random blocks of every GGUF type the kernels take (the
// seed is printed on failure), outputs poisoned (NaN) before each launch
// with a guard tail that must stay poisoned; then the device memory of real
// quantized models' weights.
//
// Tolerances: a dequantized weight must be the CPU's float exactly (BF16:
// its round-to-nearest-even). The GEMV accumulates in F32 over BF16
// activations, in another order than a double reference: each output within
// 1e-5 of sum |w x| of the double product of the CPU's dequantized weights.
// Against the CPU backend's own matmul (activations quantized to Q8 blocks,
// integer dot products): no farther than the CPU result's own distance to
// the exact product plus this kernel's bound, and relative L2 < 5e-2 over
// 64 or more outputs (that is the CPU's Q8 error: worst printed, 1e-2
// typical, 2.1e-2 the worst of 95 runs; the per-output bound above is the
// tight check).
//
// Skips without CUDA (a GPU or the emulator).
#include <gtest/gtest.h>

#if !LLM_HAVE_CUDA

TEST(CudaQuant, SkippedWithoutCuda) { GTEST_SKIP() << "this build has no CUDA support (LLM_CUDA=OFF or no toolkit)"; }

#else

#include <cuda_runtime.h>
#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

#include "backend/cpu/kernels.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_weights.h"
#include "dequant.cuh"
#include "model/model.h"
#include "model/tensor_type.h"
#include "quant_gemv.cuh"
#include "support/cuda_device_buffer.h"
#include "support/real_models.h"
#include "synth_model.h"
#include "util/fp16.h"

namespace llm::cuda {
namespace {

constexpr TensorType kTypes[] = {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0,   TensorType::Q5_1,
                                 TensorType::Q8_0, TensorType::Q4_K, TensorType::Q5_K,   TensorType::Q6_K,
                                 TensorType::Q2_K, TensorType::Q3_K, TensorType::IQ4_NL, TensorType::IQ4_XS,
                                 TensorType::MXFP4, TensorType::IQ2_XXS, TensorType::IQ2_XS, TensorType::IQ2_S,
                                 TensorType::IQ3_XXS, TensorType::IQ3_S, TensorType::TQ1_0, TensorType::TQ2_0,
                                 TensorType::IQ1_S, TensorType::IQ1_M};

std::string Name(TensorType t) { return TensorTypeName(t); }

int64_t BlockElems(TensorType t) {
  int64_t be = 0, bb = 0;
  TensorTypeLayout(t, &be, &bb);
  return be;
}

bool IsNanBits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b == 0xFFFFFFFFu;
}

// A random (rows, cols) matrix of `type` on the host, and the device copy of
// its bytes. Quants are random bytes; the F16 scales are set to finite
// values of a realistic size (mins of both signs).
class QuantWeights {
 public:
  QuantWeights(TensorType type, int64_t rows, int64_t cols, std::mt19937_64& rng)
      : type_(type), rows_(rows), cols_(cols), row_bytes_(TensorRowBytes(type, cols)) {
    bytes_.resize(row_bytes_ * rows);
    std::uniform_int_distribution<int> byte(0, 255);
    for (auto& b : bytes_) b = static_cast<uint8_t>(byte(rng));
    std::uniform_real_distribution<float> scale(0.002f, 0.05f), mn(-0.1f, 0.1f);
    int64_t be = 0, bb = 0;
    TensorTypeLayout(type, &be, &bb);
    auto put = [&](uint8_t* p, float v) {
      const uint16_t h = F32ToF16(v);
      std::memcpy(p, &h, 2);
    };
    for (size_t off = 0; off < bytes_.size(); off += static_cast<size_t>(bb)) {
      uint8_t* b = bytes_.data() + off;
      switch (type) {
        case TensorType::Q6_K: put(b + 208, scale(rng)); break;
        case TensorType::Q3_K: put(b + 108, scale(rng)); break;
        case TensorType::Q2_K: put(b + 80, scale(rng)), put(b + 82, scale(rng)); break;
        case TensorType::IQ1_M: {  // d: the top nibbles of the u16 scales at 48
          const uint16_t h = F32ToF16(scale(rng));
          for (int i = 0; i < 4; ++i) b[49 + 2 * i] = static_cast<uint8_t>((b[49 + 2 * i] & 0x0F) | ((h >> (4 * i)) & 0xF) << 4);
          break;
        }
        case TensorType::TQ1_0: put(b + 52, scale(rng)); break;
        case TensorType::TQ2_0: put(b + 64, scale(rng)); break;
        case TensorType::MXFP4: b[0] = static_cast<uint8_t>(110 + byte(rng) % 20); break;  // E8M0: 2^-18 .. 2^1
        case TensorType::Q4_1: case TensorType::Q5_1: case TensorType::Q4_K: case TensorType::Q5_K:
          put(b, scale(rng));
          put(b + 2, type == TensorType::Q4_1 || type == TensorType::Q5_1 ? mn(rng) : scale(rng));
          break;
        default: put(b, scale(rng)); break;
      }
    }
    if (cudaMalloc(&dev_, bytes_.size()) == cudaSuccess)
      cudaMemcpy(dev_, bytes_.data(), bytes_.size(), cudaMemcpyHostToDevice);
  }
  ~QuantWeights() { cudaFree(dev_); }
  QuantWeights(const QuantWeights&) = delete;
  QuantWeights& operator=(const QuantWeights&) = delete;

  WeightView view() const { return WeightView{type_, bytes_.data(), rows_, cols_, row_bytes_}; }
  QuantPart part() const {
    return QuantPart{dev_, static_cast<uint32_t>(type_), static_cast<int32_t>(rows_), static_cast<int64_t>(row_bytes_)};
  }
  QuantMatrix matrix() const {
    QuantMatrix m;
    m.part[0] = part();
    m.n_parts = 1;
    m.rows = static_cast<int32_t>(rows_);
    m.cols = static_cast<int32_t>(cols_);
    return m;
  }
  // The CPU backend's dequantization of row r.
  std::vector<float> Row(int64_t r) const {
    std::vector<float> v(static_cast<size_t>(cols_));
    const WeightView w = view();
    cpu::DequantizeRow(w, r, v.data());
    return v;
  }

 private:
  TensorType type_;
  int64_t rows_, cols_;
  size_t row_bytes_;
  std::vector<uint8_t> bytes_;
  void* dev_ = nullptr;
};

class CudaQuant : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_DEVICE();
    seed_ = std::random_device{}();
    rng_.seed(seed_);
  }
  std::string Seed() const { return "seed " + std::to_string(seed_); }
  std::vector<uint16_t> RandomBf16(size_t n) {
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<uint16_t> v(n);
    for (auto& x : v) x = F32ToBf16(d(rng_));
    return v;
  }

  uint32_t seed_ = 0;
  std::mt19937_64 rng_;
};

// ================================================================ dequantization

TEST_F(CudaQuant, DequantRowsAreTheCpuValuesInBf16) {
  SCOPED_TRACE(Seed());
  for (TensorType t : kTypes) {
    SCOPED_TRACE(Name(t));
    const int64_t cols = 3 * BlockElems(t), rows = 13;
    QuantWeights w(t, rows, cols, rng_);
    const int32_t row0 = 2, n_rows = 9;
    Dev<uint16_t> out(static_cast<size_t>((n_rows + 1) * cols));  // one guard row
    LAUNCH_OK(LaunchDequantRows(w.matrix(), row0, n_rows, reinterpret_cast<bf16*>(out.get()), 0));
    const std::vector<uint16_t> got = out.Download();
    for (int32_t r = 0; r < n_rows; ++r) {
      const std::vector<float> ref = w.Row(row0 + r);
      for (int64_t c = 0; c < cols; ++c)
        ASSERT_EQ(got[r * cols + c], F32ToBf16(ref[c])) << "row " << row0 + r << " col " << c << " (cpu " << ref[c] << ")";
    }
    for (int64_t c = 0; c < cols; ++c) ASSERT_EQ(got[n_rows * cols + c], 0xFFFF) << "guard row written at " << c;
  }
}

TEST_F(CudaQuant, EmbeddingGatherIsTheCpuRow) {
  SCOPED_TRACE(Seed());
  for (TensorType t : kTypes) {
    SCOPED_TRACE(Name(t));
    const int64_t cols = 2 * BlockElems(t), rows = 50;
    QuantWeights w(t, rows, cols, rng_);
    const std::vector<int32_t> tokens = {0, 49, 7, 7, 23, -1};  // the last one out of range: a NaN row
    Dev<int32_t> d_tok(tokens.size());
    d_tok.Upload(tokens);
    // Gemma's scale sqrt(n_embd) as the CPU backend applies it: one F32 multiply.
    const float scale = t == TensorType::Q6_K ? std::sqrt(640.0f) : 1.0f;
    Dev<float> out(tokens.size() * cols + 16);
    LAUNCH_OK(
        LaunchQuantEmbedding(w.matrix(), d_tok.get(), static_cast<int32_t>(tokens.size()), out.get(), 0, scale));
    const std::vector<float> got = out.Download();
    for (size_t i = 0; i + 1 < tokens.size(); ++i) {
      const std::vector<float> ref = w.Row(tokens[i]);
      for (int64_t c = 0; c < cols; ++c)
        ASSERT_EQ(got[i * cols + c], ref[c] * scale) << "token " << i << " col " << c;
    }
    for (int64_t c = 0; c < cols; ++c) ASSERT_TRUE(std::isnan(got[(tokens.size() - 1) * cols + c]));
    for (size_t i = tokens.size() * cols; i < got.size(); ++i) ASSERT_TRUE(IsNanBits(got[i])) << "guard written";
  }
}

// ================================================================ decode GEMV

// Checks y (n, rows) from the device against the double product of the CPU's
// dequantized rows (per-element bound) and against the CPU backend's matmul
// (relative L2); returns the latter.
double CheckProduct(const std::vector<std::vector<float>>& wrows, const std::vector<uint16_t>& x, int n,
                    const std::vector<float>& y, const WeightView* cpu_view, const std::string& what) {
  const int64_t rows = static_cast<int64_t>(wrows.size()), cols = static_cast<int64_t>(wrows[0].size());
  std::vector<double> exact(static_cast<size_t>(n * rows));
  double mag2 = 0;  // sum over outputs of (sum |w x|)^2: a scale no cancellation shrinks
  for (int j = 0; j < n; ++j)
    for (int64_t r = 0; r < rows; ++r) {
      double& ref = exact[j * rows + r];
      double mag = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const double p = static_cast<double>(wrows[r][c]) * Bf16ToF32(x[j * cols + c]);
        ref += p;
        mag += std::fabs(p);
      }
      mag2 += mag * mag;
      const float got = y[j * rows + r];
      if (!(std::fabs(got - ref) <= 1e-5 * mag + 1e-30)) {
        ADD_FAILURE() << what << ": y[" << j << "][" << r << "] = " << got << ", reference " << ref << " (sum |wx| "
                      << mag << ")";
        return 1e9;
      }
    }
  if (cpu_view == nullptr) return 0.0;
  // The CPU backend's matmul, activations quantized to Q8 blocks as it does.
  std::vector<float> xf(static_cast<size_t>(n * cols));
  for (size_t i = 0; i < xf.size(); ++i) xf[i] = Bf16ToF32(x[i]);
  std::vector<cpu::BlockQ8Act> xq(static_cast<size_t>(n * cols / 32));
  const cpu::Kernels& k = cpu::BestKernels();
  for (int j = 0; j < n; ++j) k.quantize_act(xf.data() + j * cols, cols, xq.data() + j * cols / 32);
  std::vector<float> yc(static_cast<size_t>(n * rows));
  cpu::MatMulArgs a;
  a.w = cpu_view;
  a.x = xf.data();
  a.ld_x = cols;
  a.xq = xq.data();
  a.ld_xq = cols / 32;
  a.n_tok = n;
  a.y = yc.data();
  a.ld_y = rows;
  a.row_begin = 0;
  a.row_end = rows;
  k.matmul(a);
  double num = 0, num_cpu = 0, den_ref = 0;
  for (int j = 0; j < n; ++j)
    for (int64_t r = 0; r < rows; ++r) {
      const double d = static_cast<double>(y[j * rows + r]) - yc[j * rows + r];
      num += d * d;
      const double e = static_cast<double>(yc[j * rows + r]) - exact[j * rows + r];
      num_cpu += e * e;
      den_ref += exact[j * rows + r] * exact[j * rows + r];
    }
  // The distance to the CPU backend is its activation quantization's error
  // (the CPU result against the exact product) plus at most this kernel's
  // own (1e-5 sum |w x| per output, checked above); and, relative to the
  // exact product, small where there are enough outputs for a relative L2
  // to mean something (a 32-weight row can cancel to ~0).
  EXPECT_LE(std::sqrt(num), std::sqrt(num_cpu) + 1.01e-5 * std::sqrt(mag2))
      << what << ": farther from the CPU backend's matmul than its Q8 error";
  const double rel = std::sqrt(num / std::max(den_ref, 1e-300));
  if (rows * n >= 64) {
    EXPECT_LT(rel, 5e-2) << what << ": against the CPU backend's matmul";
  }
  return rows * n >= 64 ? rel : 0.0;
}

TEST_F(CudaQuant, GemvMatchesCpuForEveryTypeShapeAndBatch) {
  SCOPED_TRACE(Seed());
  double worst = 0;
  for (TensorType t : kTypes) {
    const bool k_quant = BlockElems(t) == 256;
    // Rows not a multiple of the CTA's 4, columns not a multiple of the
    // warp's 32 chunks, a single block, and rows of more than one of the fast
    // kernel's 64-chunk tiles with a partial last one; n = 1..8.
    const std::vector<std::pair<int64_t, int64_t>> shapes =
        k_quant ? std::vector<std::pair<int64_t, int64_t>>{{1, 256}, {37, 768}, {6, 256 * 9}}
                : std::vector<std::pair<int64_t, int64_t>>{{1, 32}, {37, 224}, {130, 1056}, {3, 32 * 129}};
    for (const auto& [rows, cols] : shapes) {
      QuantWeights w(t, rows, cols, rng_);
      std::vector<std::vector<float>> wrows;
      for (int64_t r = 0; r < rows; ++r) wrows.push_back(w.Row(r));
      const WeightView view = w.view();
      for (int n = 1; n <= kQuantGemvMaxRows; ++n) {
        const std::string what = Name(t) + " rows " + std::to_string(rows) + " cols " + std::to_string(cols) +
                                 " n " + std::to_string(n);
        SCOPED_TRACE(what);
        const std::vector<uint16_t> x = RandomBf16(static_cast<size_t>(n * cols));
        Dev<uint16_t> dx(x.size());
        dx.Upload(x);
        Dev<float> dy(static_cast<size_t>(n * rows) + 64);  // 64 guard floats
        LAUNCH_OK(LaunchQuantGemv(w.matrix(), reinterpret_cast<const bf16*>(dx.get()), n, dy.get(), 0));
        const std::vector<float> y = dy.Download();
        for (size_t i = static_cast<size_t>(n * rows); i < y.size(); ++i) ASSERT_TRUE(IsNanBits(y[i])) << "guard written";
        worst = std::max(worst, CheckProduct(wrows, x, n, y, &view, what));
        if (HasFailure()) return;
      }
    }
  }
  std::printf("worst relative L2 against the CPU backend's matmul: %.3g\n", worst);
}

// A fused matrix whose parts differ in type (Q4_K_M's attn_v is Q6_K) runs
// as one launch, each row decoded with its own part's type.
TEST_F(CudaQuant, GemvFusedPartsOfDifferentTypes) {
  SCOPED_TRACE(Seed());
  const int64_t cols = 512;
  QuantWeights a(TensorType::Q4_K, 41, cols, rng_), b(TensorType::Q4_K, 6, cols, rng_), c(TensorType::Q6_K, 7, cols, rng_);
  QuantMatrix m;
  m.part[0] = a.part();
  m.part[1] = b.part();
  m.part[2] = c.part();
  m.n_parts = 3;
  m.rows = 41 + 6 + 7;
  m.cols = static_cast<int32_t>(cols);
  std::vector<std::vector<float>> wrows;
  for (const QuantWeights* q : {&a, &b, &c})
    for (int64_t r = 0; r < q->view().rows; ++r) wrows.push_back(q->Row(r));
  const int n = 3;
  const std::vector<uint16_t> x = RandomBf16(static_cast<size_t>(n * cols));
  Dev<uint16_t> dx(x.size());
  dx.Upload(x);
  Dev<float> dy(static_cast<size_t>(n * m.rows));
  LAUNCH_OK(LaunchQuantGemv(m, reinterpret_cast<const bf16*>(dx.get()), n, dy.get(), 0));
  CheckProduct(wrows, x, n, dy.Download(), nullptr, "fused Q4_K|Q4_K|Q6_K");
  // Activations not 16-byte aligned (one bf16 in): the general kernel, which
  // the fast types otherwise never reach.
  Dev<uint16_t> dx1(x.size() + 1);
  std::vector<uint16_t> x1(1, 0);
  x1.insert(x1.end(), x.begin(), x.end());
  dx1.Upload(x1);
  LAUNCH_OK(LaunchQuantGemv(m, reinterpret_cast<const bf16*>(dx1.get()) + 1, n, dy.get(), 0));
  CheckProduct(wrows, x, n, dy.Download(), nullptr, "fused Q4_K|Q4_K|Q6_K, unaligned activations");
  // The same rows dequantized (prefill path) across the part boundaries.
  Dev<uint16_t> out(static_cast<size_t>(10 * cols));
  LAUNCH_OK(LaunchDequantRows(m, 40, 10, reinterpret_cast<bf16*>(out.get()), 0));
  const std::vector<uint16_t> got = out.Download();
  for (int r = 0; r < 10; ++r)
    for (int64_t k = 0; k < cols; ++k) ASSERT_EQ(got[r * cols + k], F32ToBf16(wrows[40 + r][k])) << r << "," << k;
}

// The prefill path's pieces as the backend chains them: rows dequantized to
// BF16, then one cuBLAS GEMM for a 33-token batch.
TEST_F(CudaQuant, PrefillDequantThenGemmMatchesCpu) {
  SCOPED_TRACE(Seed());
  cublasHandle_t h = nullptr;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  for (TensorType t : {TensorType::Q4_1, TensorType::Q4_K, TensorType::Q6_K}) {
    SCOPED_TRACE(Name(t));
    const int64_t rows = 45, cols = 512;
    const int n = 33;
    QuantWeights w(t, rows, cols, rng_);
    Dev<uint16_t> scratch(static_cast<size_t>(rows * cols));
    LAUNCH_OK(LaunchDequantRows(w.matrix(), 0, static_cast<int32_t>(rows), reinterpret_cast<bf16*>(scratch.get()), 0));
    const std::vector<uint16_t> x = RandomBf16(static_cast<size_t>(n * cols));
    Dev<uint16_t> dx(x.size());
    dx.Upload(x);
    Dev<float> dy(static_cast<size_t>(n * rows));
    const float alpha = 1.0f, beta = 0.0f;
    ASSERT_EQ(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows), n, static_cast<int>(cols), &alpha,
                           scratch.get(), CUDA_R_16BF, static_cast<int>(cols), dx.get(), CUDA_R_16BF,
                           static_cast<int>(cols), &beta, dy.get(), CUDA_R_32F, static_cast<int>(rows),
                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_SUCCESS);
    CUDA_OK(cudaDeviceSynchronize());
    // The weights went through BF16: compare with the BF16-rounded CPU rows.
    std::vector<std::vector<float>> wrows;
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> v = w.Row(r);
      for (float& f : v) f = Bf16ToF32(F32ToBf16(f));
      wrows.push_back(v);
    }
    CheckProduct(wrows, x, n, dy.Download(), nullptr, "dequant + GEMM");
  }
  cublasDestroy(h);
}

TEST_F(CudaQuant, LaunchersRejectMalformedMatrices) {
  QuantWeights w(TensorType::Q4_0, 4, 64, rng_);
  Dev<float> y(64);
  Dev<uint16_t> x(64 * 9);
  const bf16* xb = reinterpret_cast<const bf16*>(x.get());
  EXPECT_EQ(LaunchQuantGemv(w.matrix(), xb, 0, y.get(), 0), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchQuantGemv(w.matrix(), xb, kQuantGemvMaxRows + 1, y.get(), 0), cudaErrorInvalidValue);
  QuantMatrix bad = w.matrix();
  bad.part[0].row_bytes += 1;
  EXPECT_EQ(LaunchQuantGemv(bad, xb, 1, y.get(), 0), cudaErrorInvalidValue);
  bad = w.matrix();
  bad.part[0].type = 1;  // F16: not a block type
  EXPECT_EQ(LaunchQuantGemv(bad, xb, 1, y.get(), 0), cudaErrorInvalidValue);
  bad = w.matrix();
  EXPECT_EQ(LaunchQuantEmbedding(w.matrix(), reinterpret_cast<const int32_t*>(x.get()), 1, y.get(), 0, 0.0f),
            cudaErrorInvalidValue);
  bad.rows = 5;  // more than its parts hold
  EXPECT_EQ(LaunchDequantRows(bad, 0, 1, reinterpret_cast<bf16*>(x.get()), 0), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchDequantRows(w.matrix(), 2, 3, reinterpret_cast<bf16*>(x.get()), 0), cudaErrorInvalidValue);
  cudaGetLastError();
}

// A synthesized quantized mix end to end on the CUDA backend, e.g. Q4_K_M: the synthesized `tiny`
// Llama written in llama.cpp's Q4_K_M mix (llm-synth --type q4_k_m: Q4_K,
// with attn_v of layer 1, every ffn_down... and output in Q6_K, so the fused
// [Wq; Wk; Wv] of layer 1 mixes types). Device weight bytes within 5% of the
// file's tensor bytes; a 13-token prompt (dequantize + GEMM) and 4 decode
// steps (GEMV, graphs replayed) give the logits of the CPU backend on the
// same weights dequantized to F32 within 1e-2 relative L2 (the GPU's BF16
// activations and KV cache), those of the CPU backend on the Q4_K_M file
// within 4e-2 (it multiplies against Q8-quantized activations: ~2e-2
// measured), and the same argmax, or a near-tie within 0.05 of the logit
// range.
void CheckSynthMixOnDevice(const synth::SynthOptions& so, const char* label,
                           const std::function<void(const ModelWeights&)>& check_types) {
  const std::string path = ::testing::TempDir() + "/llmrt_mix_" + std::to_string(::getpid()) + ".gguf";
  const Status written = synth::WriteSynthModel(*synth::FindSynthShape("tiny"), so, path);
  ASSERT_TRUE(written.ok()) << written.message();
  auto m = Model::Load(path.c_str());
  std::remove(path.c_str());
  ASSERT_TRUE(m.ok()) << m.status().message();
  const ModelWeights& w = (*m)->weights;
  check_types(w);
  if (::testing::Test::HasFatalFailure()) return;
  int64_t file = 0;
  for (const GgufTensorInfo& t : (*m)->file->tensors())
    if (t.name != "rope_freqs.weight") file += static_cast<int64_t>(t.nbytes);

  KvCacheSpec kv{16, 16};
  CudaBackendOptions o;
  o.max_seqs = 4;
  o.max_seq_len = 256;
  auto gpu = CreateCudaBackend((*m)->config, w, &kv, o);
  ASSERT_TRUE(gpu.ok()) << gpu.status().message();
  const auto* cb = dynamic_cast<const CudaBackend*>(gpu->get());
  ASSERT_NE(cb, nullptr);
  EXPECT_TRUE(cb->weights_quantized());
  const double ratio = static_cast<double>(cb->weight_bytes()) / static_cast<double>(file);
  std::printf("synthesized tiny %s: %lld weight bytes on the device, %lld tensor bytes in the file (%.4f)\n", label,
              static_cast<long long>(cb->weight_bytes()), static_cast<long long>(file), ratio);
  EXPECT_LE(ratio, 1.05);
  EXPECT_GE(ratio, 0.95);
  auto cpu = CreateCpuBackend((*m)->config, w, KvCacheSpec{16, 16}, 1);
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  // The CPU backend on the same weights dequantized to F32: no activation
  // quantization, the tight oracle of what the device computes.
  std::vector<std::vector<float>> store;
  ModelWeights wf = w;
  auto to_f32 = [&](WeightView* v) {
    if (v->empty()) return;
    store.emplace_back(static_cast<size_t>(v->rows * v->cols));
    for (int64_t r = 0; r < v->rows; ++r) cpu::DequantizeRow(*v, r, store.back().data() + r * v->cols);
    *v = WeightView{TensorType::F32, store.back().data(), v->rows, v->cols, static_cast<size_t>(v->cols) * 4};
  };
  store.reserve(64);
  to_f32(&wf.token_embd);
  to_f32(&wf.output);
  for (LayerWeights& L : wf.layers)
    for (WeightView* v : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) to_f32(v);
  auto exact = CreateCpuBackend((*m)->config, wf, KvCacheSpec{16, 16}, 1);
  ASSERT_TRUE(exact.ok()) << exact.status().message();
  auto rel_l2 = [](const std::vector<float>& a, const std::vector<float>& ref) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      num += (static_cast<double>(a[i]) - ref[i]) * (static_cast<double>(a[i]) - ref[i]);
      den += static_cast<double>(ref[i]) * ref[i];
    }
    return std::sqrt(num / den);
  };

  const int32_t V = (*m)->config.n_vocab;
  std::vector<int32_t> table = {3, 1, 4};
  std::vector<llm_token> toks(13);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<llm_token>((i * 37 + 5) % V);
  int32_t n_past = 0;
  double worst = 0, worst_exact = 0;
  for (int step = 0; step < 5; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const BatchSeq seq{0, static_cast<int32_t>(toks.size()), n_past, table};
    const int32_t last = static_cast<int32_t>(toks.size()) - 1;
    const Batch b{toks, std::span<const BatchSeq>(&seq, 1), std::span<const int32_t>(&last, 1)};
    std::vector<float> want(V), ref(V), got(V, NAN);
    ASSERT_TRUE((*cpu)->Forward(b, want.data()).ok());
    ASSERT_TRUE((*exact)->Forward(b, ref.data()).ok());
    const Status st = (*gpu)->Forward(b, got.data());
    ASSERT_TRUE(st.ok()) << st.message();
    const double rel = rel_l2(got, want), rel_exact = rel_l2(got, ref);
    worst = std::max(worst, rel);
    worst_exact = std::max(worst_exact, rel_exact);
    EXPECT_LT(rel_exact, 1e-2) << "against the CPU on the dequantized F32 weights";
    EXPECT_LT(rel, 4e-2) << "against the CPU on the Q4_K_M weights (Q8 activations)";
    const auto top_w = std::max_element(want.begin(), want.end()) - want.begin();
    const auto top_g = std::max_element(got.begin(), got.end()) - got.begin();
    const float range = *std::max_element(want.begin(), want.end()) - *std::min_element(want.begin(), want.end());
    if (top_w != top_g) {
      EXPECT_LE(want[top_w] - want[top_g], 0.05f * range) << "argmax differs beyond a near-tie";
    }
    n_past += static_cast<int32_t>(toks.size());
    toks = {static_cast<llm_token>(top_w)};
  }
  std::printf("%s: worst relative L2 of the logits against the CPU backend: %.4g (its Q8 activations), "
              "%.4g (F32 weights)\n", label, worst, worst_exact);
}

TEST(CudaQuantModels, SynthQ4KMForwardMatchesCpu) {
  SKIP_WITHOUT_DEVICE();
  synth::SynthOptions so;
  so.q4_k_m = true;
  so.stddev = 0.05f;
  CheckSynthMixOnDevice(so, "Q4_K_M", [](const ModelWeights& w) {
    ASSERT_EQ(w.layers[0].wq.type, TensorType::Q4_K);
    ASSERT_EQ(w.layers[1].wv.type, TensorType::Q6_K);
    ASSERT_EQ(w.output.type, TensorType::Q6_K);
  });
}

// The same for the low-bit mix (llm-synth --type lowbit): IQ4_XS, IQ4_NL,
// Q3_K, Q2_K and Q6_K matrices, the fused [Wq; Wk; Wv] Q3_K|Q3_K|IQ4_NL and
// [W_gate; W_up] Q2_K|Q2_K.
TEST(CudaQuantModels, SynthLowBitForwardMatchesCpu) {
  SKIP_WITHOUT_DEVICE();
  synth::SynthOptions so;
  so.low_bit = true;
  so.stddev = 0.05f;
  CheckSynthMixOnDevice(so, "low-bit", [](const ModelWeights& w) {
    ASSERT_EQ(w.token_embd.type, TensorType::IQ4_XS);
    ASSERT_EQ(w.layers[0].wq.type, TensorType::Q3_K);
    ASSERT_EQ(w.layers[0].wv.type, TensorType::IQ4_NL);
    ASSERT_EQ(w.layers[1].w_gate.type, TensorType::Q2_K);
    ASSERT_EQ(w.layers[1].w_down.type, TensorType::IQ4_XS);
  });
}

// ================================================================ real models: device memory

// Bytes of the tensors a backend uploads (every matrix and norm the Llama
// block reads) as the file holds them.
int64_t FileBytes(const WeightView& w) { return w.empty() ? 0 : static_cast<int64_t>(w.row_bytes) * w.rows; }

// The lattice mix (llm-synth --type iqmix): IQ3_XXS, IQ3_S, IQ2_XS, IQ2_S,
// IQ2_XXS and Q6_K matrices, the fused [Wq; Wk; Wv] IQ3_XXS|IQ3_XXS|IQ2_XS.
TEST(CudaQuantModels, SynthLatticeForwardMatchesCpu) {
  SKIP_WITHOUT_DEVICE();
  synth::SynthOptions so;
  so.iq_mix = true;
  so.stddev = 0.05f;
  CheckSynthMixOnDevice(so, "lattice", [](const ModelWeights& w) {
    ASSERT_EQ(w.token_embd.type, TensorType::IQ3_XXS);
    ASSERT_EQ(w.layers[0].wq.type, TensorType::IQ3_XXS);
    ASSERT_EQ(w.layers[0].wv.type, TensorType::IQ2_XS);
    ASSERT_EQ(w.layers[0].wo.type, TensorType::IQ3_S);
    ASSERT_EQ(w.layers[1].w_gate.type, TensorType::IQ2_XXS);
    ASSERT_EQ(w.layers[1].w_down.type, TensorType::IQ2_S);
  });
}

TEST(CudaQuantModels, SmolLM2WeightsStayQuantizedOnTheDevice) {
  SKIP_WITHOUT_DEVICE();
  LLM_LOAD_REAL_MODEL_OR_SKIP(m, test::kSmolLM2);
  int64_t file = FileBytes(m->weights.token_embd) + FileBytes(m->weights.output_norm);
  if (!m->weights.output.empty() && m->weights.output.data != m->weights.token_embd.data)
    file += FileBytes(m->weights.output);
  for (const LayerWeights& L : m->weights.layers)
    for (const WeightView* w : {&L.attn_norm, &L.ffn_norm, &L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down})
      file += FileBytes(*w);
  KvCacheSpec kv{16, 64};
  CudaBackendOptions o;
  o.cuda_graphs = false;
  auto b = CreateCudaBackend(m->config, m->weights, &kv, o);
  ASSERT_TRUE(b.ok()) << b.status().message();
  const auto* gpu = dynamic_cast<const CudaBackend*>(b->get());
  ASSERT_NE(gpu, nullptr);
  EXPECT_TRUE(gpu->weights_quantized());
  const double ratio = static_cast<double>(gpu->weight_bytes()) / static_cast<double>(file);
  std::printf("SmolLM2 Q4_1: %lld weight bytes on the device, %lld in the file (ratio %.4f)\n",
              static_cast<long long>(gpu->weight_bytes()), static_cast<long long>(file), ratio);
  EXPECT_LE(ratio, 1.05);
  EXPECT_GE(ratio, 0.95);
}

// SmolLM2 135M Q4_1 on the CUDA backend against the CPU backend on the same
// weights dequantized to F32 (no activation quantization: the oracle of
// what the device computes): a 10-token prompt (dequantize + GEMM) and two
// decode steps (GEMV) within 1.5e-2 relative L2 of the logits (BF16
// activations and KV over 30 layers: ~1e-2 measured, printed).
// 0.5 GB of F32 weights on the host, under the sanitizers too (the CI's
// emulator stages let no CUDA test skip).
TEST(CudaQuantModels, SmolLM2LogitsMatchCpuOnDequantizedWeights) {
  SKIP_WITHOUT_DEVICE();
  LLM_LOAD_REAL_MODEL_OR_SKIP(m, test::kSmolLM2);
  std::vector<std::vector<float>> store;
  ModelWeights wf = m->weights;
  auto to_f32 = [&](WeightView* v) {
    if (v->empty() || v->type == TensorType::F32) return;
    store.emplace_back(static_cast<size_t>(v->rows * v->cols));
    for (int64_t r = 0; r < v->rows; ++r) cpu::DequantizeRow(*v, r, store.back().data() + r * v->cols);
    *v = WeightView{TensorType::F32, store.back().data(), v->rows, v->cols, static_cast<size_t>(v->cols) * 4};
  };
  store.reserve(8 * wf.layers.size() + 4);
  const bool tied = wf.output.empty() || wf.output.data == wf.token_embd.data;
  to_f32(&wf.token_embd);
  if (tied) {
    wf.output = WeightView{};
  } else {
    to_f32(&wf.output);
  }
  for (LayerWeights& L : wf.layers)
    for (WeightView* v : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) to_f32(v);
  auto exact = CreateCpuBackend(m->config, wf, KvCacheSpec{16, 8}, 2);
  ASSERT_TRUE(exact.ok()) << exact.status().message();
  KvCacheSpec kv{16, 8};
  CudaBackendOptions o;
  o.max_seqs = 2;
  o.max_seq_len = 128;
  auto gpu = CreateCudaBackend(m->config, m->weights, &kv, o);
  ASSERT_TRUE(gpu.ok()) << gpu.status().message();
  const int32_t V = m->config.n_vocab;
  std::vector<int32_t> table = {5, 2};
  std::vector<llm_token> toks = {1, 504, 3458, 282, 4649, 314, 7042, 30, 378, 3458};
  auto rel_l2 = [](const std::vector<float>& a, const std::vector<float>& r) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      num += (static_cast<double>(a[i]) - r[i]) * (static_cast<double>(a[i]) - r[i]);
      den += static_cast<double>(r[i]) * r[i];
    }
    return std::sqrt(num / den);
  };
  auto forward = [](Backend* be, const std::vector<llm_token>& t, int32_t n_past, const std::vector<int32_t>& tab,
                    std::vector<float>* out) {
    const BatchSeq seq{0, static_cast<int32_t>(t.size()), n_past, tab};
    const int32_t last = static_cast<int32_t>(t.size()) - 1;
    return be->Forward(Batch{t, std::span<const BatchSeq>(&seq, 1), std::span<const int32_t>(&last, 1)}, out->data());
  };
  const std::vector<llm_token> prompt = toks;
  llm_token toks_after_prompt = 0;
  int32_t n_past = 0;
  double worst = 0;
  std::vector<float> decoded;  // the GPU's logits after the first decode step (GEMV path)
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    std::vector<float> ref(V), got(V, NAN);
    ASSERT_TRUE(forward(exact->get(), toks, n_past, table, &ref).ok());
    const Status st = forward(gpu->get(), toks, n_past, table, &got);
    ASSERT_TRUE(st.ok()) << st.message();
    const double rel = rel_l2(got, ref);
    std::printf("step %d: relative L2 %.4g\n", step, rel);
    worst = std::max(worst, rel);
    EXPECT_LT(rel, 1.5e-2);
    if (step == 1) decoded = got;
    n_past += static_cast<int32_t>(toks.size());
    toks = {static_cast<llm_token>(std::max_element(ref.begin(), ref.end()) - ref.begin())};
    if (step == 0) toks_after_prompt = toks[0];
  }
  std::printf("SmolLM2 Q4_1: worst relative L2 of the logits against the CPU on F32 weights: %.4g\n", worst);
  // The decode step's row again, as the last of an 11-token prompt (every
  // matrix through dequantize + GEMM instead of the GEMV). The two paths
  // differ by the GEMM's weights rounded to BF16 in the scratch (the GEMV
  // multiplies the exact dequantized values) and by the attention kernel:
  // 7e-3 measured, the same order as either's distance to F32.
  std::vector<llm_token> whole = prompt;
  whole.push_back(toks_after_prompt);
  std::vector<float> again(V, NAN);
  ASSERT_TRUE(forward(gpu->get(), whole, 0, {3, 4}, &again).ok());
  const double paths = rel_l2(decoded, again);
  std::printf("GEMV step against the same row through dequantize + GEMM: relative L2 %.4g\n", paths);
  EXPECT_LT(paths, 1.5e-2);
}

// Gemma 3 270M Q4_K_M: every matrix of a K-quant file (Q4_K, Q6_K, the
// Q5_0/Q8_0 fallbacks for widths that are not a multiple of 256) stays in its
// file bytes on the device. Uploaded matrix by matrix: the backend's
// Gemma 3 forward is another issue's.
TEST(CudaQuantModels, Gemma3Q4KMMatricesStayQuantizedOnTheDevice) {
  SKIP_WITHOUT_DEVICE();
  LLM_LOAD_REAL_MODEL_OR_SKIP(m, test::kGemma3);
  int64_t file = 0, device = 0;
  std::vector<const WeightView*> mats = {&m->weights.token_embd};
  for (const LayerWeights& L : m->weights.layers)
    for (const WeightView* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) mats.push_back(w);
  bool saw_k = false;
  for (const WeightView* w : mats) {
    DeviceMatrix d;
    const Status st = d.Upload({w}, TensorTypeName(w->type));
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_TRUE(d.quantized()) << TensorTypeName(w->type);
    saw_k = saw_k || w->type == TensorType::Q4_K || w->type == TensorType::Q6_K;
    file += FileBytes(*w);
    device += static_cast<int64_t>(d.bytes());
  }
  EXPECT_TRUE(saw_k);
  std::printf("Gemma 3 270M Q4_K_M: %zu matrices, %lld bytes on the device, %lld in the file\n", mats.size(),
              static_cast<long long>(device), static_cast<long long>(file));
  EXPECT_EQ(device, file);
}

}  // namespace
}  // namespace llm::cuda

#endif  // LLM_HAVE_CUDA
