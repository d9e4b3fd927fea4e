// AmxGemm (embed_matmul_amx.h). Compiled with -mamx-tile -mamx-bf16
// -mavx512bf16 (only this file); run only where AmxBf16Usable().
//
// Blocking: rows in groups of up to kGroupBytes of packed W (one group for
// the row ranges of the embedding models' matrices), their W packed once
// per group into B tiles (VNNI pairs: tile row p, column n = W[n][2p],
// W[n][2p+1]), hi and lo; tokens in chunks of up to kChunkBytes of packed x,
// in A tiles (16 tokens × 32 k, 1 KiB each), hi and lo; then for each 32
// rows × 32 tokens four accumulator tiles over all of K:
//   tmm0 tokens 0-15 × rows 0-15   tmm1 tokens 0-15 × rows 16-31
//   tmm2 tokens 16-31 × rows 0-15  tmm3 tokens 16-31 × rows 16-31
//   tmm4, tmm5: A (tokens 0-15, 16-31)   tmm6, tmm7: B (rows 0-15, 16-31)
// per 32 k: 4 × (x_hi·w_lo), 4 × (x_hi·w_hi), 4 × (x_lo·w_hi): 8 tile
// loads for 12 products.
#include "backend/cpu/embed_matmul_amx.h"

#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AVX512BF16__) && defined(__AVX512F__)
#include <immintrin.h>
#include <string.h>

namespace llm::cpu {
namespace {

constexpr int64_t kGroupBytes = int64_t{8} << 20;  // packed W rows at a time (L3)
constexpr int64_t kChunkBytes = int64_t{1} << 20;  // packed x tokens at a time (L2)
constexpr int64_t kTileBytes = 1024;  // 16 rows × 64 bytes

int64_t RoundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// BF16 (round to nearest even) of 16 floats, widened back to F32.
__m256i ToBf16(__m512 f) { return (__m256i)_mm512_cvtneps_pbh(f); }
__m512 FromBf16(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }

// 16 floats -> hi (BF16) and lo = BF16(f - hi).
void Split(__m512 f, __m256i* hi, __m256i* lo) {
  *hi = ToBf16(f);
  *lo = ToBf16(_mm512_sub_ps(f, FromBf16(*hi)));
}

// 32 values of W row r from k (n valid, the rest zero), as F32.
template <bool kBf16>
void LoadW(const AmxGemmArgs& a, int64_t r, int64_t k, int n, __m512* f0, __m512* f1) {
  const uint16_t* src = reinterpret_cast<const uint16_t*>(reinterpret_cast<const uint8_t*>(a.w) + r * a.w_row_bytes) + k;
  __m256i h0, h1;
  if (n == 32) {
    h0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
    h1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 16));
  } else {
    alignas(32) uint16_t tmp[32] = {};
    memcpy(tmp, src, static_cast<size_t>(n) * 2);
    h0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(tmp));
    h1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(tmp + 16));
  }
  if (kBf16) {
    *f0 = FromBf16(h0);
    *f1 = FromBf16(h1);
  } else {
    *f0 = _mm512_cvtph_ps(h0);
    *f1 = _mm512_cvtph_ps(h1);
  }
}

// out[p · 16 + n] = r[n][p] for 16 rows of 16 32-bit lanes (BF16 pairs):
// pairs of rows interleaved, then pairs of pairs, then 128-bit lanes.
void Transpose16(const __m512i* r, uint16_t* out) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  // u[4g + j]: rows 4g .. 4g + 3 of lane element 4L + j in 128-bit lane L
  for (int g = 0; g < 4; ++g) {
    u[4 * g + 0] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
    u[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
  }
  auto* o = reinterpret_cast<__m512i*>(out);
  for (int j = 0; j < 4; ++j) {
    const __m512i v0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x88);
    const __m512i v1 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xDD);
    const __m512i v2 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x88);
    const __m512i v3 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xDD);
    _mm512_store_si512(o + j, _mm512_shuffle_i32x4(v0, v2, 0x88));
    _mm512_store_si512(o + 8 + j, _mm512_shuffle_i32x4(v0, v2, 0xDD));
    _mm512_store_si512(o + 4 + j, _mm512_shuffle_i32x4(v1, v3, 0x88));
    _mm512_store_si512(o + 12 + j, _mm512_shuffle_i32x4(v1, v3, 0xDD));
  }
}

// W rows r0 .. r0 + nr - 1 into B tiles (rows past nr, to a multiple of 32,
// and k past K zero): for 16-row tile j and k block b, hi at
// wp + ((j · nkb + b) · parts) · 512, lo next.
template <bool kBf16>
void PackW(const AmxGemmArgs& a, int64_t r0, int64_t nr, int64_t nkb, int parts, uint16_t* wp) {
  const int64_t n_tiles = RoundUp(nr, 32) / 16;
  __m512i hi[16], lo[16];
  for (int64_t j = 0; j < n_tiles; ++j) {
    for (int64_t b = 0; b < nkb; ++b) {
      uint16_t* dst = wp + (j * nkb + b) * parts * 512;
      const int64_t k = b * 32;
      const int nk = static_cast<int>(a.k - k < 32 ? a.k - k : 32);
      for (int n = 0; n < 16; ++n) {
        const int64_t r = j * 16 + n;
        __m512 f0 = _mm512_setzero_ps(), f1 = _mm512_setzero_ps();
        if (r < nr) LoadW<kBf16>(a, r0 + r, k, nk, &f0, &f1);
        __m256i h0, l0, h1, l1;
        Split(f0, &h0, &l0);
        Split(f1, &h1, &l1);
        hi[n] = _mm512_inserti64x4(_mm512_castsi256_si512(h0), h1, 1);  // pair p: k = 2p, 2p + 1
        lo[n] = _mm512_inserti64x4(_mm512_castsi256_si512(l0), l1, 1);
      }
      Transpose16(hi, dst);
      if (parts == 2) Transpose16(lo, dst + 512);
    }
  }
}

// Tokens t0 .. t0 + nt - 1 into A tiles, hi at xh and lo at xl: token t,
// k at ((t / 16) · nkb + k / 32) · 512 + (t % 16) · 32 + k % 32; tokens past
// nt (to a multiple of 32) and k past K zero.
void PackX(const AmxGemmArgs& a, int64_t t0, int64_t nt, int64_t nkb, uint16_t* xh, uint16_t* xl) {
  const int64_t rows = RoundUp(nt, 32);
  for (int64_t t = 0; t < rows; ++t) {
    const float* x = a.x + (t < nt ? t0 + t : 0) * a.ld_x;
    for (int64_t k = 0; k < nkb * 32; k += 16) {
      const int64_t n = t < nt ? a.k - k : 0;
      const __mmask16 m = static_cast<__mmask16>(n >= 16 ? 0xFFFF : n <= 0 ? 0 : (1u << n) - 1);
      __m256i vh, vl;
      Split(_mm512_maskz_loadu_ps(m, x + k), &vh, &vl);  // no lane read where m is clear
      const int64_t at = ((t / 16) * nkb + k / 32) * 512 + (t % 16) * 32 + k % 32;
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(xh + at), vh);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(xl + at), vl);
    }
  }
}

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved0[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// 32 tokens (A tiles from xh / xl: the 16-token tiles of the second half
// nkb · 512 further) × 32 rows (B tiles from wt: the second 16 rows tstride
// further) over nkb blocks of k, into c (4 tiles of 16 × 16).
void Block(const uint16_t* xh, const uint16_t* xl, const uint16_t* wt, int64_t tstride, int64_t nkb, int parts,
           float* c) {
  const int64_t xs = nkb * 512;
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t b = 0; b < nkb; ++b) {
    const uint16_t* w0 = wt + b * parts * 512;
    const uint16_t* w1 = w0 + tstride;
    _tile_loadd(4, xh + b * 512, 64);
    _tile_loadd(5, xh + xs + b * 512, 64);
    if (parts == 2) {  // x_hi·w_lo
      _tile_loadd(6, w0 + 512, 64);
      _tile_loadd(7, w1 + 512, 64);
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
    _tile_loadd(6, w0, 64);  // x_hi·w_hi
    _tile_loadd(7, w1, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
    _tile_loadd(4, xl + b * 512, 64);  // x_lo·w_hi
    _tile_loadd(5, xl + xs + b * 512, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, c, 64);
  _tile_stored(1, c + 256, 64);
  _tile_stored(2, c + 512, 64);
  _tile_stored(3, c + 768, 64);
}

// c (Block's) into y for tokens 0 .. nt - 1 and rows 0 .. nr - 1 of the
// block: y = c, or y + c.
void WriteBlock(const float* c, int64_t nt, int64_t nr, float* y, int64_t ld_y, bool accumulate) {
  const __mmask16 m0 = static_cast<__mmask16>(nr >= 16 ? 0xFFFF : (1u << nr) - 1);
  const __mmask16 m1 = static_cast<__mmask16>(nr >= 32 ? 0xFFFF : nr <= 16 ? 0 : (1u << (nr - 16)) - 1);
  for (int64_t i = 0; i < nt && i < 32; ++i) {
    const float* ci = c + (i / 16) * 512 + (i % 16) * 16;  // rows 0-15; rows 16-31 at + 256
    float* yi = y + i * ld_y;
    __m512 v0 = _mm512_load_ps(ci), v1 = _mm512_load_ps(ci + 256);
    if (accumulate) {
      v0 = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, yi), v0);
      v1 = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, yi + 16), v1);
    }
    _mm512_mask_storeu_ps(yi, m0, v0);
    _mm512_mask_storeu_ps(yi + 16, m1, v1);
  }
}

struct Layout {
  int64_t nkb, group_rows, chunk_tok;
  int parts;
  size_t w_elems, x_elems;
};

Layout MakeLayout(const AmxGemmArgs& a) {
  Layout l;
  l.nkb = RoundUp(a.k, 32) / 32;
  l.parts = a.w_bf16 ? 1 : 2;
  const int64_t row_bytes = l.nkb * 32 * 2 * l.parts, tok_bytes = l.nkb * 32 * 4;
  const int64_t rows = RoundUp(a.row_end - a.row_begin, 32), toks = RoundUp(a.n_tok, 32);
  const int64_t max_rows = RoundUp(kGroupBytes / row_bytes, 32), max_toks = RoundUp(kChunkBytes / tok_bytes, 32);
  l.group_rows = rows < max_rows ? rows : max_rows;
  l.chunk_tok = toks < max_toks ? toks : max_toks;
  l.w_elems = static_cast<size_t>(l.group_rows * l.nkb * 32 * l.parts);
  l.x_elems = static_cast<size_t>(l.chunk_tok * l.nkb * 32);
  return l;
}

}  // namespace

bool AmxGemmCompiled() { return true; }

size_t AmxGemmScratchBytes(const AmxGemmArgs& a) {
  const Layout l = MakeLayout(a);
  return (l.w_elems + 2 * l.x_elems) * 2;
}

void AmxGemm(const AmxGemmArgs& a, void* scratch) {
  if (a.n_tok <= 0 || a.row_end <= a.row_begin) return;
  const Layout l = MakeLayout(a);
  uint16_t* wp = static_cast<uint16_t*>(scratch);
  uint16_t* xh = wp + l.w_elems;
  uint16_t* xl = xh + l.x_elems;
  TileConfig cfg;
  for (int i = 0; i < 8; ++i) {
    cfg.colsb[i] = 64;
    cfg.rows[i] = 16;
  }
  _tile_loadconfig(&cfg);
  alignas(64) float c[1024];
  const int64_t tile_stride = l.nkb * l.parts * 512;  // from one 16-row B tile column to the next
  for (int64_t g0 = a.row_begin; g0 < a.row_end; g0 += l.group_rows) {
    const int64_t gn = a.row_end - g0 < l.group_rows ? a.row_end - g0 : l.group_rows;
    if (a.w_bf16) {
      PackW<true>(a, g0, gn, l.nkb, l.parts, wp);
    } else {
      PackW<false>(a, g0, gn, l.nkb, l.parts, wp);
    }
    for (int64_t t0 = 0; t0 < a.n_tok; t0 += l.chunk_tok) {
      const int64_t tn = a.n_tok - t0 < l.chunk_tok ? a.n_tok - t0 : l.chunk_tok;
      PackX(a, t0, tn, l.nkb, xh, xl);
      for (int64_t rb = 0; rb < gn; rb += 32) {
        const uint16_t* wt = wp + (rb / 16) * tile_stride;
        for (int64_t tb = 0; tb < tn; tb += 32) {
          const int64_t at = (tb / 16) * l.nkb * 512;
          Block(xh + at, xl + at, wt, tile_stride, l.nkb, l.parts, c);
          WriteBlock(c, tn - tb, gn - rb, a.y + (t0 + tb) * a.ld_y + g0 + rb, a.ld_y, a.accumulate);
        }
      }
    }
  }
  _tile_release();
}

}  // namespace llm::cpu

#else

namespace llm::cpu {

bool AmxGemmCompiled() { return false; }
size_t AmxGemmScratchBytes(const AmxGemmArgs&) { return 0; }
void AmxGemm(const AmxGemmArgs&, void*) {}

}  // namespace llm::cpu

#endif
