// EncoderMatMul and EmbedStepMatMul (encoder_matmul.h). Only the functions
// inside the pragma are compiled for AVX-512F (+F16C); they run only after
// the CPU check, and they use no std:: templates (nothing the linker could
// share with code for older CPUs), as in kernels_avx2.cpp.
//
// EncoderMatMul, a dot-product tile (one encoder sequence per call):
//            k →  (16 at a time)
//   W rows  r0 [w w w ... w]      acc[t][r] += x[t][k..k+16] * w[r][k..k+16]
//           r1 ...  (4 rows)
//   tokens  t0 [x x x ... x]      (6 tokens): 24 accumulators, 4 W + 1 X registers
//
// EmbedStepMatMul, an outer-product tile over widened, transposed panels
// (a decoder's embedding step: a whole batch per call), blocked so that a
// panel (L1) and a sweep of x (L2) stay in cache:
//   for each slab of 256 k: panels (256, 32) F32, row k = W[r0 .. r0+31][k]
//     for each sweep of 240 tokens, for each panel, for each 12 tokens:
//       acc[t][0..1] (32 rows) += broadcast(x[t][k]) * panel[k]   (24 accumulators)
#include "backend/cpu/encoder_matmul.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cpu/amx.h"
#include "backend/cpu/embed_matmul_amx.h"
#include "util/env.h"
#include "util/fp16.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define LLM_HAVE_AVX512_ENCODER 1

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,f16c,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,f16c,fma")
#endif

namespace llm::cpu {
namespace avx512_encoder {

using V16 = __m512;

struct LoadF32 {
  static V16 Load(const uint8_t* row, int64_t k) { return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + k); }
  static float Scalar(const uint8_t* row, int64_t k) { return reinterpret_cast<const float*>(row)[k]; }
};
struct LoadF16 {
  static V16 Load(const uint8_t* row, int64_t k) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(row) + k)));
  }
  static float Scalar(const uint8_t* row, int64_t k) {
    return _cvtsh_ss(reinterpret_cast<const uint16_t*>(row)[k]);
  }
};
struct LoadBF16 {
  static V16 Load(const uint8_t* row, int64_t k) {
    const __m512i h = _mm512_cvtepu16_epi32(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(row) + k)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
  }
  static float Scalar(const uint8_t* row, int64_t k) {
    const uint32_t bits = static_cast<uint32_t>(reinterpret_cast<const uint16_t*>(row)[k]) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
};

// The 16 lanes summed in a fixed order: halves, then quarters, ... (pairs
// i and i + 8, then i and i + 4, ...).
inline float HSum16(V16 a) {
  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1));  // AVX-512F only
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(a), hi);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float ScalarFma(float a, float b, float c) {
  return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}

template <class WL, int TT, int TR>
void Tile(const uint8_t* w, size_t row_bytes, const float* x, int64_t ld_x, int64_t K, float* y, int64_t ld_y,
          bool accumulate) {
  V16 acc[TT][TR];
  for (int t = 0; t < TT; ++t)
    for (int r = 0; r < TR; ++r) acc[t][r] = _mm512_setzero_ps();
  const int64_t K16 = K & ~int64_t{15};
  for (int64_t k = 0; k < K16; k += 16) {
    V16 wv[TR];
    for (int r = 0; r < TR; ++r) wv[r] = WL::Load(w + r * row_bytes, k);
    for (int t = 0; t < TT; ++t) {
      const V16 xv = _mm512_loadu_ps(x + t * ld_x + k);
      for (int r = 0; r < TR; ++r) acc[t][r] = _mm512_fmadd_ps(xv, wv[r], acc[t][r]);
    }
  }
  for (int t = 0; t < TT; ++t) {
    for (int r = 0; r < TR; ++r) {
      float s = HSum16(acc[t][r]);
      for (int64_t k = K16; k < K; ++k) s = ScalarFma(x[t * ld_x + k], WL::Scalar(w + r * row_bytes, k), s);
      float* dst = y + t * ld_y + r;
      *dst = accumulate ? *dst + s : s;
    }
  }
}

template <class WL, int TT>
void TileRows(int tr, const uint8_t* w, size_t rb, const float* x, int64_t ld_x, int64_t K, float* y, int64_t ld_y,
              bool acc) {
  switch (tr) {
    case 1: Tile<WL, TT, 1>(w, rb, x, ld_x, K, y, ld_y, acc); break;
    case 2: Tile<WL, TT, 2>(w, rb, x, ld_x, K, y, ld_y, acc); break;
    case 3: Tile<WL, TT, 3>(w, rb, x, ld_x, K, y, ld_y, acc); break;
    case 4: Tile<WL, TT, 4>(w, rb, x, ld_x, K, y, ld_y, acc); break;
    default: break;
  }
}

// Tokens tb .. te-1 against rows r .. r+tr-1 (read through WL from w): tiles of 6 tokens, then the rest.
template <class WL>
void SweepTokens(int tr, const uint8_t* w, size_t rb, const MatMulArgs& a, int64_t tb, int64_t te, int64_t r) {
  const int64_t K = a.w->cols;
  int64_t t = tb;
  for (; t + 6 <= te; t += 6)
    TileRows<WL, 6>(tr, w, rb, a.x + t * a.ld_x, a.ld_x, K, a.y + t * a.ld_y + r, a.ld_y, a.accumulate);
  const float* x = a.x + t * a.ld_x;
  float* y = a.y + t * a.ld_y + r;
  switch (te - t) {
    case 1: TileRows<WL, 1>(tr, w, rb, x, a.ld_x, K, y, a.ld_y, a.accumulate); break;
    case 2: TileRows<WL, 2>(tr, w, rb, x, a.ld_x, K, y, a.ld_y, a.accumulate); break;
    case 3: TileRows<WL, 3>(tr, w, rb, x, a.ld_x, K, y, a.ld_y, a.accumulate); break;
    case 4: TileRows<WL, 4>(tr, w, rb, x, a.ld_x, K, y, a.ld_y, a.accumulate); break;
    case 5: TileRows<WL, 5>(tr, w, rb, x, a.ld_x, K, y, a.ld_y, a.accumulate); break;
    default: break;
  }
}

// Blocks of 60 tokens keep X warm (L2) while the row tiles sweep it; the
// 4 rows of a tile stay in L1 across its 10 token tiles. (Widening F16 rows
// to F32 once per block instead of in every tile measured no faster.)
template <class WL>
void MatMul(const MatMulArgs& a) {
  const auto* base = static_cast<const uint8_t*>(a.w->data);
  const size_t rb = a.w->row_bytes;
  constexpr int64_t kTokBlock = 60;  // whole tiles of 6
  for (int64_t tb = 0; tb < a.n_tok; tb += kTokBlock) {
    const int64_t te = tb + kTokBlock < a.n_tok ? tb + kTokBlock : a.n_tok;
    for (int64_t r = a.row_begin; r < a.row_end; r += 4) {
      const int tr = static_cast<int>(a.row_end - r < 4 ? a.row_end - r : 4);
      SweepTokens<WL>(tr, base + r * rb, rb, a, tb, te, r);
    }
  }
}

constexpr int kPanelTok = 12;      // 24 accumulators + 2 panel vectors + 1 broadcast
constexpr int64_t kPanelK = 64;    // k summed in blocks of 64 (from k = 0), each block apart
constexpr int64_t kSlabK = 256;    // k slabs (whole blocks of 64): panels of 32 KiB
constexpr int64_t kSlabTok = 240;  // tokens per sweep of the slab's panels: 240 KiB of x (L2)

// Tiles of TT tokens × 32 rows over one k slab of a panel (panel[k * 32 +
// i] = W[r0 + i][k0 + k], F32, rows past the range zero): each k step loads
// two panel vectors and broadcasts one x per token (TT + 2 loads for 2·TT
// FMAs; the dot-product tile needed TT + 4 full-width loads and 4
// conversions for 4·TT). Each output is one lane: s = y (accumulate, or a
// slab after the first) or 0, then s += Σ x[t][k]·w[k] over each block of
// 64 k in turn, k ascending: whatever the tile, slab sweep, panel or thread.
template <int TT>
void PanelTile(const float* panel, const float* x, int64_t ld_x, int64_t k0, int64_t k1, float* y, int64_t ld_y,
               int nr, bool load_y) {
  const __mmask16 m0 = static_cast<__mmask16>(nr >= 16 ? 0xFFFF : (1u << nr) - 1);
  const __mmask16 m1 = static_cast<__mmask16>(nr >= 32 ? 0xFFFF : nr <= 16 ? 0 : (1u << (nr - 16)) - 1);
  V16 tot[TT][2];
  for (int t = 0; t < TT; ++t) {
    tot[t][0] = load_y ? _mm512_maskz_loadu_ps(m0, y + t * ld_y) : _mm512_setzero_ps();
    tot[t][1] = load_y ? _mm512_maskz_loadu_ps(m1, y + t * ld_y + 16) : _mm512_setzero_ps();
  }
  for (int64_t kb = k0; kb < k1; kb += kPanelK) {
    const int64_t ke = kb + kPanelK < k1 ? kb + kPanelK : k1;
    V16 acc[TT][2];
    for (int t = 0; t < TT; ++t) acc[t][0] = acc[t][1] = _mm512_setzero_ps();
    for (int64_t k = kb; k < ke; ++k) {
      const V16 w0 = _mm512_loadu_ps(panel + (k - k0) * 32);
      const V16 w1 = _mm512_loadu_ps(panel + (k - k0) * 32 + 16);
      for (int t = 0; t < TT; ++t) {
        const V16 xb = _mm512_set1_ps(x[t * ld_x + k]);
        acc[t][0] = _mm512_fmadd_ps(xb, w0, acc[t][0]);
        acc[t][1] = _mm512_fmadd_ps(xb, w1, acc[t][1]);
      }
    }
    for (int t = 0; t < TT; ++t) {
      tot[t][0] = _mm512_add_ps(tot[t][0], acc[t][0]);
      tot[t][1] = _mm512_add_ps(tot[t][1], acc[t][1]);
    }
  }
  for (int t = 0; t < TT; ++t) {
    _mm512_mask_storeu_ps(y + t * ld_y, m0, tot[t][0]);
    _mm512_mask_storeu_ps(y + t * ld_y + 16, m1, tot[t][1]);
  }
}

// W rows r0 .. r0+nr-1, k in [k0, k1), into a panel: 16 k at a time, the 32
// rows widened into a 32 × 16 block, read back by columns (one gather of 16
// rows per half-panel row).
template <class WL>
void PackPanel(const uint8_t* w, size_t rb, int nr, int64_t k0, int64_t k1, float* panel) {
  alignas(64) float blk[32 * 16];
  const __m512i rows16 = _mm512_setr_epi32(0, 16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240);
  int64_t k = k0;
  for (; k + 16 <= k1; k += 16) {
    for (int i = 0; i < 32; ++i)
      _mm512_store_ps(blk + i * 16, i < nr ? WL::Load(w + static_cast<size_t>(i) * rb, k) : _mm512_setzero_ps());
    for (int kk = 0; kk < 16; ++kk) {
      const __m512i idx = _mm512_add_epi32(rows16, _mm512_set1_epi32(kk));
      _mm512_storeu_ps(panel + (k - k0 + kk) * 32, _mm512_i32gather_ps(idx, blk, 4));
      _mm512_storeu_ps(panel + (k - k0 + kk) * 32 + 16, _mm512_i32gather_ps(idx, blk + 256, 4));
    }
  }
  for (; k < k1; ++k)
    for (int i = 0; i < 32; ++i)
      panel[(k - k0) * 32 + i] = i < nr ? WL::Scalar(w + static_cast<size_t>(i) * rb, k) : 0.0f;
}

// For each k slab: every panel of the row range packed (buf: PanelBufferFloats),
// then the tokens in sweeps of kSlabTok, each over all the panels.
template <class WL>
void PanelMatMul(const MatMulArgs& a, float* buf) {
  const auto* base = static_cast<const uint8_t*>(a.w->data);
  const size_t rb = a.w->row_bytes;
  const int64_t K = a.w->cols;
  for (int64_t k0 = 0; k0 < K; k0 += kSlabK) {
    const int64_t k1 = k0 + kSlabK < K ? k0 + kSlabK : K;
    const bool load_y = a.accumulate || k0 > 0;
    for (int64_t r = a.row_begin, p = 0; r < a.row_end; r += 32, ++p) {
      const int nr = static_cast<int>(a.row_end - r < 32 ? a.row_end - r : 32);
      PackPanel<WL>(base + r * rb, rb, nr, k0, k1, buf + p * kSlabK * 32);
    }
    for (int64_t tb = 0; tb < a.n_tok; tb += kSlabTok) {
      const int64_t te = tb + kSlabTok < a.n_tok ? tb + kSlabTok : a.n_tok;
      for (int64_t r = a.row_begin, p = 0; r < a.row_end; r += 32, ++p) {
        const int nr = static_cast<int>(a.row_end - r < 32 ? a.row_end - r : 32);
        const float* panel = buf + p * kSlabK * 32;
        int64_t t = tb;
        for (; t + kPanelTok <= te; t += kPanelTok)
          PanelTile<kPanelTok>(panel, a.x + t * a.ld_x, a.ld_x, k0, k1, a.y + t * a.ld_y + r, a.ld_y, nr, load_y);
        const float* x = a.x + t * a.ld_x;
        float* y = a.y + t * a.ld_y + r;
        switch (te - t) {
          case 1: PanelTile<1>(panel, x, a.ld_x, k0, k1, y, a.ld_y, nr, load_y); break;
          case 2: PanelTile<2>(panel, x, a.ld_x, k0, k1, y, a.ld_y, nr, load_y); break;
          case 3: PanelTile<3>(panel, x, a.ld_x, k0, k1, y, a.ld_y, nr, load_y); break;
          case 4: PanelTile<4>(panel, x, a.ld_x, k0, k1, y, a.ld_y, nr, load_y); break;
          case 5: PanelTile<5>(panel, x, a.ld_x, k0, k1, y, a.ld_y, nr, load_y); break;
          case 6: PanelTile<6>(panel, x, a.ld_x, k0, k1, y, a.ld_y, nr, load_y); break;
          case 7: PanelTile<7>(panel, x, a.ld_x, k0, k1, y, a.ld_y, nr, load_y); break;
          case 8: PanelTile<8>(panel, x, a.ld_x, k0, k1, y, a.ld_y, nr, load_y); break;
          case 9: PanelTile<9>(panel, x, a.ld_x, k0, k1, y, a.ld_y, nr, load_y); break;
          case 10: PanelTile<10>(panel, x, a.ld_x, k0, k1, y, a.ld_y, nr, load_y); break;
          case 11: PanelTile<11>(panel, x, a.ld_x, k0, k1, y, a.ld_y, nr, load_y); break;
          default: break;
        }
      }
    }
  }
}

void MatMulAny(const MatMulArgs& a) {
  switch (a.w->type) {
    case ::llm::TensorType::F16: MatMul<LoadF16>(a); break;
    case ::llm::TensorType::BF16: MatMul<LoadBF16>(a); break;
    default: MatMul<LoadF32>(a); break;
  }
}

void PanelMatMulAny(const MatMulArgs& a, float* panel) {
  switch (a.w->type) {
    case ::llm::TensorType::F16: PanelMatMul<LoadF16>(a, panel); break;
    case ::llm::TensorType::BF16: PanelMatMul<LoadBF16>(a, panel); break;
    default: PanelMatMul<LoadF32>(a, panel); break;
  }
}

}  // namespace avx512_encoder
}  // namespace llm::cpu

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif  // x86-64

namespace llm::cpu {

bool EncoderMatMulAvx512() {
#if defined(LLM_HAVE_AVX512_ENCODER)
  static const bool use = [] {
    const EnvOptions env = ReadEnv();
    if (env.cpu_isa_generic || env.cpu_isa_avx2) return false;
    __builtin_cpu_init();
    // Every AVX-512F CPU has F16C (clang before 15 cannot ask for "f16c" here).
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
  }();
  return use;
#else
  return false;
#endif
}

void EncoderMatMul(const Kernels& kernels, const MatMulArgs& a) {
#if defined(LLM_HAVE_AVX512_ENCODER)
  const TensorType t = a.w->type;
  if ((t == TensorType::F32 || t == TensorType::F16 || t == TensorType::BF16) && EncoderMatMulAvx512()) {
    avx512_encoder::MatMulAny(a);
    return;
  }
#endif
  kernels.matmul(a);
}

void EmbedStepMatMul(const Kernels& kernels, const MatMulArgs& a) {
#if defined(LLM_HAVE_AVX512_ENCODER)
  const TensorType t = a.w->type;
  if ((t == TensorType::F16 || t == TensorType::BF16) && AmxBf16Usable()) {
    // Always AMX for these types once it is usable (whatever n_tok): one
    // arithmetic per weight type keeps a row batch-invariant.
    AmxGemmArgs g;
    g.w = static_cast<const uint16_t*>(a.w->data);
    g.w_row_bytes = a.w->row_bytes;
    g.w_bf16 = t == TensorType::BF16;
    g.k = a.w->cols;
    g.x = a.x;
    g.ld_x = a.ld_x;
    g.n_tok = a.n_tok;
    g.y = a.y;
    g.ld_y = a.ld_y;
    g.row_begin = a.row_begin;
    g.row_end = a.row_end;
    g.accumulate = a.accumulate;
    thread_local std::vector<uint8_t> scratch;
    const size_t need = AmxGemmScratchBytes(g) + 64;
    if (scratch.size() < need) scratch.resize(need);
    const auto addr = reinterpret_cast<uintptr_t>(scratch.data());
    AmxGemm(g, scratch.data() + ((64 - addr % 64) % 64));
    return;
  }
  if ((t == TensorType::F32 || t == TensorType::F16 || t == TensorType::BF16) && EncoderMatMulAvx512()) {
    // The row range's panels for one k slab, per thread, kept between calls.
    thread_local std::vector<float> panels;
    const size_t need = static_cast<size_t>((a.row_end - a.row_begin + 31) / 32 * avx512_encoder::kSlabK * 32);
    if (panels.size() < need) panels.resize(need);
    avx512_encoder::PanelMatMulAny(a, panels.data());
    return;
  }
#endif
  kernels.matmul(a);
}

}  // namespace llm::cpu
