// The CPU kernels, written once over an 8-lane float vector. Not a normal
// header: kernels_generic.cpp and kernels_avx2.cpp each include it inside their
// own namespace, after defining the vector type and these operations:
//
//   V8 Zero(); V8 Set1(float); V8 LoadU(const float*); void StoreU(float*, V8);
//   V8 Add/Sub/Mul/Div/Min/Max(V8, V8); V8 Fma(a, b, c) = a*b + c;
//   V8 RoundInt(V8) (to nearest), V8 Pow2(V8 n) (2^n for integral n in
//   [-126, 127]); float HSum(V8) (fixed order);
//   V8 LoadF16(const uint16_t*); V8 LoadBF16(const uint16_t*); V8 LoadI8(const int8_t*);
//   float ScalarFma(a, b, c): the same rounding as one lane of Fma;
//   void Prefetch(const void*) (a hint; may do nothing).
//
// It must not use std:: templates: an instantiation compiled under the AVX2
// target could be merged by the linker with the portable one.

// ================================================================ exp, silu

// exp(x) for |x| <= 87: Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2,
// then a degree-6 polynomial for e^r (about 1 ulp), then scale by 2^n.
inline V8 Exp(V8 x) {
  x = Min(Max(x, Set1(-87.0f)), Set1(87.0f));
  const V8 n = RoundInt(Mul(x, Set1(1.44269504088896341f)));
  V8 r = Fma(n, Set1(-0.693359375f), x);
  r = Fma(n, Set1(2.12194440e-4f), r);
  V8 p = Set1(1.9875691500e-4f);
  p = Fma(p, r, Set1(1.3981999507e-3f));
  p = Fma(p, r, Set1(8.3334519073e-3f));
  p = Fma(p, r, Set1(4.1665795894e-2f));
  p = Fma(p, r, Set1(1.6666665459e-1f));
  p = Fma(p, r, Set1(5.0000001201e-1f));
  p = Fma(p, Mul(r, r), Add(r, Set1(1.0f)));
  return Mul(p, Pow2(n));
}

// silu(g) * u = g / (1 + e^-g) * u
inline V8 SiluMul8(V8 g, V8 u) {
  const V8 s = Div(g, Add(Set1(1.0f), Exp(Sub(Zero(), g))));
  return Mul(s, u);
}

void SiluMulImpl(float* g, const float* u, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) StoreU(g + i, SiluMul8(LoadU(g + i), LoadU(u + i)));
  if (i < n) {  // tail through the same vector code, so every element is alike
    float tg[8] = {0}, tu[8] = {0};
    for (int64_t j = i; j < n; ++j) tg[j - i] = g[j], tu[j - i] = u[j];
    StoreU(tg, SiluMul8(LoadU(tg), LoadU(tu)));
    for (int64_t j = i; j < n; ++j) g[j] = tg[j - i];
  }
}

// gelu(g) * u with gelu's tanh approximation, written through the identity
// 0.5·(1 + tanh(z)) = 1 / (1 + e^(-2z)):  gelu(g) = g / (1 + e^(-2z)),
// z = √(2/π)·g·(1 + 0.044715·g²). Exp's clamp to ±87 keeps both tails exact
// (g for large g, a vanishing value for very negative g).
inline V8 GeluMul8(V8 g, V8 u) {
  const V8 inner = Fma(Set1(0.044715f), Mul(g, g), Set1(1.0f));
  const V8 m2z = Mul(Set1(-2.0f * 0.79788456080286535588f), Mul(g, inner));
  return Mul(Div(g, Add(Set1(1.0f), Exp(m2z))), u);
}

void GeluMulImpl(float* g, const float* u, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) StoreU(g + i, GeluMul8(LoadU(g + i), LoadU(u + i)));
  if (i < n) {
    float tg[8] = {0}, tu[8] = {0};
    for (int64_t j = i; j < n; ++j) tg[j - i] = g[j], tu[j - i] = u[j];
    StoreU(tg, GeluMul8(LoadU(tg), LoadU(tu)));
    for (int64_t j = i; j < n; ++j) g[j] = tg[j - i];
  }
}

// ================================================================ RMSNorm

void RmsNormImpl(const float* x, const float* w, int64_t n, float eps, float* out) {
  V8 acc = Zero();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const V8 v = LoadU(x + i);
    acc = Fma(v, v, acc);
  }
  float ss = HSum(acc);
  for (; i < n; ++i) ss = ScalarFma(x[i], x[i], ss);
  const float scale = 1.0f / __builtin_sqrtf(ss / static_cast<float>(n) + eps);
  const V8 vs = Set1(scale);
  for (i = 0; i + 8 <= n; i += 8) StoreU(out + i, Mul(Mul(LoadU(x + i), vs), LoadU(w + i)));
  for (; i < n; ++i) out[i] = (x[i] * scale) * w[i];
}

// ================================================================ matmul
//
// Y(n_tok, rows) = X(n_tok, K) · Wᵀ, W row-major (rows, K). A tile of TT
// tokens × TR weight rows keeps TT·TR accumulators in registers; each weight
// vector is loaded (and converted) once per tile and used TT times.
//
//            k →  (8 at a time)
//   W rows  r0 [w w w w w w w w ...]      acc[t][r] += x[t][k..k+8] * w[r][k..k+8]
//           r1 [w w w w w w w w ...]
//   tokens  t0 [x x x x x x x x ...]
//           t1 [x x x x x x x x ...]
//
// Each output is one 8-lane accumulator over k ascending, HSum, then the K%8
// tail with scalar FMAs: the same arithmetic for every tile shape.

struct LoadF32W {
  static V8 Load(const uint8_t* row, int64_t k) { return LoadU(reinterpret_cast<const float*>(row) + k); }
  static float Scalar(const uint8_t* row, int64_t k) { return reinterpret_cast<const float*>(row)[k]; }
};
struct LoadF16W {
  static V8 Load(const uint8_t* row, int64_t k) { return LoadF16(reinterpret_cast<const uint16_t*>(row) + k); }
  static float Scalar(const uint8_t* row, int64_t k) {
    return ::llm::cpu::F16ToF32(reinterpret_cast<const uint16_t*>(row)[k]);
  }
};
struct LoadBF16W {
  static V8 Load(const uint8_t* row, int64_t k) { return LoadBF16(reinterpret_cast<const uint16_t*>(row) + k); }
  static float Scalar(const uint8_t* row, int64_t k) {
    return ::llm::cpu::BF16ToF32(reinterpret_cast<const uint16_t*>(row)[k]);
  }
};
template <class WL, int TT, int TR>
void Tile(const uint8_t* w, size_t row_bytes, const float* x, int64_t ld_x, int64_t K, float* y,
          int64_t ld_y, bool accumulate) {
  V8 acc[TT][TR];
  for (int t = 0; t < TT; ++t)
    for (int r = 0; r < TR; ++r) acc[t][r] = Zero();
  const int64_t K8 = K & ~int64_t{7};
  for (int64_t k = 0; k < K8; k += 8) {
    V8 wv[TR];
    for (int r = 0; r < TR; ++r) wv[r] = WL::Load(w + r * row_bytes, k);
    for (int t = 0; t < TT; ++t) {
      const V8 xv = LoadU(x + t * ld_x + k);
      for (int r = 0; r < TR; ++r) acc[t][r] = Fma(xv, wv[r], acc[t][r]);
    }
  }
  for (int t = 0; t < TT; ++t) {
    for (int r = 0; r < TR; ++r) {
      float s = HSum(acc[t][r]);
      for (int64_t k = K8; k < K; ++k) s = ScalarFma(x[t * ld_x + k], WL::Scalar(w + r * row_bytes, k), s);
      float* dst = y + t * ld_y + r;
      *dst = accumulate ? *dst + s : s;
    }
  }
}

template <class WL, int TT>
void TileRows(int tr, const uint8_t* w, size_t rb, const float* x, int64_t ld_x, int64_t K, float* y,
              int64_t ld_y, bool acc) {
  switch (tr) {
    case 1: Tile<WL, TT, 1>(w, rb, x, ld_x, K, y, ld_y, acc); break;
    case 2: Tile<WL, TT, 2>(w, rb, x, ld_x, K, y, ld_y, acc); break;
    case 3: Tile<WL, TT, 3>(w, rb, x, ld_x, K, y, ld_y, acc); break;
    default: break;
  }
}

template <class WL>
void MatMulTyped(const MatMulArgs& a) {
  const WeightView& W = *a.w;
  const auto* base = static_cast<const uint8_t*>(W.data);
  const size_t rb = W.row_bytes;
  const int64_t K = W.cols;
  const int64_t r0 = a.row_begin, r1 = a.row_end;

  if (a.n_tok == 1) {
    // GEMV: 8 rows per tile give 8 independent FMA chains.
    int64_t r = r0;
    for (; r + 8 <= r1; r += 8) Tile<WL, 1, 8>(base + r * rb, rb, a.x, a.ld_x, K, a.y + r, a.ld_y, a.accumulate);
    for (; r + 3 <= r1; r += 3) Tile<WL, 1, 3>(base + r * rb, rb, a.x, a.ld_x, K, a.y + r, a.ld_y, a.accumulate);
    if (r < r1) TileRows<WL, 1>(static_cast<int>(r1 - r), base + r * rb, rb, a.x, a.ld_x, K, a.y + r, a.ld_y, a.accumulate);
    return;
  }

  // GEMM: blocks of kTokBlock tokens keep X warm in cache while the row tiles
  // sweep it; inside, 4 tokens × 3 rows per tile.
  constexpr int64_t kTokBlock = 64;
  for (int64_t tb = 0; tb < a.n_tok; tb += kTokBlock) {
    const int64_t te = tb + kTokBlock < a.n_tok ? tb + kTokBlock : a.n_tok;
    for (int64_t r = r0; r < r1; r += 3) {
      const int tr = static_cast<int>(r1 - r < 3 ? r1 - r : 3);
      const uint8_t* w = base + r * rb;
      int64_t t = tb;
      for (; t + 4 <= te; t += 4)
        TileRows<WL, 4>(tr, w, rb, a.x + t * a.ld_x, a.ld_x, K, a.y + t * a.ld_y + r, a.ld_y, a.accumulate);
      const float* x = a.x + t * a.ld_x;
      float* y = a.y + t * a.ld_y + r;
      switch (te - t) {
        case 1: TileRows<WL, 1>(tr, w, rb, x, a.ld_x, K, y, a.ld_y, a.accumulate); break;
        case 2: TileRows<WL, 2>(tr, w, rb, x, a.ld_x, K, y, a.ld_y, a.accumulate); break;
        case 3: TileRows<WL, 3>(tr, w, rb, x, a.ld_x, K, y, a.ld_y, a.accumulate); break;
        default: break;
      }
    }
  }
}

void MatMulImpl(const MatMulArgs& a) {
  switch (a.w->type) {
    case ::llm::TensorType::F32: MatMulTyped<LoadF32W>(a); break;
    case ::llm::TensorType::F16: MatMulTyped<LoadF16W>(a); break;
    case ::llm::TensorType::BF16: MatMulTyped<LoadBF16W>(a); break;
    default: QuantMatMulImpl(a); break;  // block-quantized: quant.h
  }
}

// ================================================================ attention
//
// The n_q query heads that share one KV head (grouped-query attention) over
// that head's paged K/V tiles (see kv_layout.h). K is stored transposed per
// block, (head_dim, block_size), so 8 consecutive keys' scores come from
// head_dim FMAs with no horizontal sums; V is (block_size, head_dim). Query
// heads go through the tiles in pairs, so each K and V vector loaded from the
// pool serves two heads and the pair's FMA chains interleave.
//
// Two passes per head, numerically stable: scores s_j = q·k_j·scale,
// m = max s, e_j = exp(s_j - m), out = Σ e_j v_j / Σ e_j. Each head's
// arithmetic runs in a fixed order that depends only on n_keys and head_dim,
// never on n_q or on which head it is paired with.
//
// The pool holds F32, F16 or Q8_0 elements (kv_layout.h); each K/V vector is
// converted to F32 in registers as it is loaded (F16C or int8 widening), so
// no step converts the context. Q8_0's per-position scales multiply a key's
// finished dot product and fold into a value's softmax weight.

// Element access for the pool's three types.
inline V8 LoadKv8(const float* p) { return LoadU(p); }
inline V8 LoadKv8(const uint16_t* p) { return LoadF16(p); }
inline V8 LoadKv8(const int8_t* p) { return LoadI8(p); }
inline float KvToF32(float x) { return x; }
inline float KvToF32(uint16_t h) { return F16ToF32(h); }
inline float KvToF32(int8_t x) { return static_cast<float>(x); }
template <typename T>
constexpr bool kKvQ8 = sizeof(T) == 1;

// One (layer, K|V, head) tile of block `blk` of the sequence.
template <typename T>
inline const T* KvTile(const AttnArgs& a, int64_t blk, int64_t off) {
  return reinterpret_cast<const T*>(a.pool + a.block_table[blk] * a.block_stride + off);
}
// A Q8_0 tile's per-position scales (block_size floats); nullptr otherwise.
// scales_offset: its side's (a.k_scales_offset or a.v_scales_offset).
template <typename T>
inline const float* KvScales(const T* tile, int64_t scales_offset) {
  if constexpr (kKvQ8<T>) return reinterpret_cast<const float*>(reinterpret_cast<const uint8_t*>(tile) + scales_offset);
  return nullptr;
}

// A group of 8 consecutive keys of one K tile waiting to be scored: its first
// column in the tile, where its scores go in each head's row of scores, and
// how many of the 8 exist (the rest are computed from stale slots inside the
// tile and dropped).
template <typename T>
struct KeyGroup {
  const T* k;
  const float* ks;  // Q8_0: the 8 keys' scales
  int64_t dst;
  int64_t cnt;
};

// Scores of NV key groups for NG query heads (q: NG rows of hd): NG·NV
// independent FMA chains over d hide the FMA latency. The groups may lie in
// different blocks; each score is the same chain over d wherever it lies.
template <typename T, int NG, int NV>
inline void Scores8(const float* q, int hd, const KeyGroup<T>* grp, int64_t bs, V8 scale, float* const* sb) {
  V8 acc[NG][NV];
  for (int g = 0; g < NG; ++g)
    for (int v = 0; v < NV; ++v) acc[g][v] = Zero();
  for (int d = 0; d < hd; ++d) {
    V8 k[NV];
    for (int v = 0; v < NV; ++v) k[v] = LoadKv8(grp[v].k + d * bs);
    for (int g = 0; g < NG; ++g) {
      const V8 qd = Set1(q[g * hd + d]);
      for (int v = 0; v < NV; ++v) acc[g][v] = Fma(qd, k[v], acc[g][v]);
    }
  }
  for (int g = 0; g < NG; ++g) {
    for (int v = 0; v < NV; ++v) {
      V8 sc = Mul(acc[g][v], scale);
      if constexpr (kKvQ8<T>) sc = Mul(sc, LoadU(grp[v].ks));
      float* dst = sb[g] + grp[v].dst;
      if (grp[v].cnt == 8) {
        StoreU(dst, sc);
      } else {
        float tmp[8];
        StoreU(tmp, sc);
        for (int64_t i = 0; i < grp[v].cnt; ++i) dst[i] = tmp[i];
      }
    }
  }
}

// Scores the n <= 4 pending groups for every head of the GQA group, two
// heads at a time, into rows (n_q, ld).
template <typename T>
inline void ScorePending(const float* q, int n_q, int hd, const KeyGroup<T>* grp, int n, int64_t bs, V8 scale,
                         float* rows, int64_t ld) {
  for (int g = 0; g < n_q; g += 2) {
    const float* qg = q + g * hd;
    float* const sb[2] = {rows + g * ld, rows + (g + 1) * ld};  // the second unused for a lone head
    for (int i = 0; i < n;) {
      if (n_q - g >= 2) {
        if (n - i >= 4) {
          Scores8<T, 2, 4>(qg, hd, grp + i, bs, scale, sb), i += 4;
        } else if (n - i >= 2) {
          Scores8<T, 2, 2>(qg, hd, grp + i, bs, scale, sb), i += 2;
        } else {
          Scores8<T, 2, 1>(qg, hd, grp + i, bs, scale, sb), i += 1;
        }
      } else {
        if (n - i >= 4) {
          Scores8<T, 1, 4>(qg, hd, grp + i, bs, scale, sb), i += 4;
        } else if (n - i >= 2) {
          Scores8<T, 1, 2>(qg, hd, grp + i, bs, scale, sb), i += 2;
        } else {
          Scores8<T, 1, 1>(qg, hd, grp + i, bs, scale, sb), i += 1;
        }
      }
    }
  }
}

// out (NG, 8*NC) = Σ_j e_j v_j over keys lo .. n-1 for NG heads; head g's
// weight of key j is e[g * ld_e + j - lo]. Key j adds into accumulator chain
// j % K, so consecutive FMAs do not wait on each other; K is fixed per
// head_dim (more chains where a row is a single vector) and the chains are
// summed in a fixed order at the end.
template <int NG, int NC, int K>
struct VAcc {
  V8 acc[K][NG][NC];
};

// rs: the row's Q8_0 scale (unused for F32 and F16)
template <int C, typename T, int NG, int NC, int K>
inline void AddKey(VAcc<NG, NC, K>& a, const T* v, float rs, const float* e, int64_t ld_e, int64_t i) {
  V8 row[NC];
  for (int c = 0; c < NC; ++c) row[c] = LoadKv8(v + 8 * c);
  for (int g = 0; g < NG; ++g) {
    float wg = e[g * ld_e + i];
    if constexpr (kKvQ8<T>) wg *= rs;
    const V8 w = Set1(wg);
    for (int c = 0; c < NC; ++c) a.acc[C][g][c] = Fma(w, row[c], a.acc[C][g][c]);
  }
}

// Key j0 + s, whose chain is (j0 + s) % K, at run time.
template <typename T, int NG, int NC, int K>
inline void AddKeyAnyChain(VAcc<NG, NC, K>& a, int64_t j, const T* v, float rs, const float* e, int64_t ld_e,
                           int64_t i) {
  switch (static_cast<int>(j % K)) {
    case 0: AddKey<0>(a, v, rs, e, ld_e, i); break;
    case 1: if constexpr (K > 1) AddKey<1 % K>(a, v, rs, e, ld_e, i); break;
    case 2: if constexpr (K > 2) AddKey<2 % K>(a, v, rs, e, ld_e, i); break;
    default: if constexpr (K > 3) AddKey<3 % K>(a, v, rs, e, ld_e, i); break;
  }
}

template <typename T, int NG, int NC, int K>
inline void WeightedSumV(const AttnArgs& a, const float* e, int64_t ld_e, int64_t lo, int64_t n, const float* inv,
                         float* out) {
  static_assert(K == 1 || K == 2 || K == 4, "chains");
  VAcc<NG, NC, K> acc;
  for (int k = 0; k < K; ++k)
    for (int g = 0; g < NG; ++g)
      for (int c = 0; c < NC; ++c) acc.acc[k][g][c] = Zero();
  const int64_t bs = a.block_size, hd = 8 * NC;
  for (int64_t blk = lo / bs, j0 = blk * bs; j0 < n; j0 += bs, ++blk) {
    const T* vb = KvTile<T>(a, blk, a.v_offset);  // (bs, hd)
    const float* vs = KvScales(vb, a.v_scales_offset);  // (bs) Q8_0 only
    auto rs = [&](int64_t s) { return kKvQ8<T> ? vs[s] : 1.0f; };
    const int64_t cnt = n - j0 < bs ? n - j0 : bs;
    int64_t s = j0 < lo ? lo - j0 : 0;
    for (; s < cnt && (j0 + s) % K != 0; ++s) AddKeyAnyChain(acc, j0 + s, vb + s * hd, rs(s), e, ld_e, j0 + s - lo);
    for (; s + K <= cnt; s += K) {
      const T* v = vb + s * hd;
      const int64_t i = j0 + s - lo;
      AddKey<0>(acc, v, rs(s), e, ld_e, i);
      if constexpr (K > 1) AddKey<1 % K>(acc, v + hd, rs(s + 1), e, ld_e, i + 1);
      if constexpr (K > 2) {
        AddKey<2 % K>(acc, v + 2 * hd, rs(s + 2), e, ld_e, i + 2);
        AddKey<3 % K>(acc, v + 3 * hd, rs(s + 3), e, ld_e, i + 3);
      }
    }
    for (; s < cnt; ++s) AddKeyAnyChain(acc, j0 + s, vb + s * hd, rs(s), e, ld_e, j0 + s - lo);
  }
  for (int g = 0; g < NG; ++g) {
    for (int c = 0; c < NC; ++c) {
      V8 t = acc.acc[0][g][c];
      if constexpr (K == 2) t = Add(t, acc.acc[1 % K][g][c]);
      if constexpr (K == 4) t = Add(Add(t, acc.acc[1 % K][g][c]), Add(acc.acc[2 % K][g][c], acc.acc[3 % K][g][c]));
      StoreU(out + g * hd + 8 * c, Mul(t, Set1(inv[g])));
    }
  }
}

// Heads [g0, g0 + ng) of the group, ng <= 2, for head_dim 8*NC. Chains per
// head: 4 for one-vector rows, 2 up to four vectors, else 1 (the row's own
// vectors are independent chains already).
template <typename T, int NC>
inline void WeightedSumVHeads(const AttnArgs& a, const float* e, int64_t ld_e, int64_t lo, int64_t n,
                              const float* inv, float* out, int ng) {
  constexpr int K = NC == 1 ? 4 : NC <= 4 ? 2 : 1;
  if (ng == 2 && NC <= 2) {  // two heads' accumulators fit in registers
    WeightedSumV<T, 2, NC, K>(a, e, ld_e, lo, n, inv, out);
    return;
  }
  for (int g = 0; g < ng; ++g) WeightedSumV<T, 1, NC, K>(a, e + g * ld_e, ld_e, lo, n, inv + g, out + g * 8 * NC);
}

// The whole GQA group's weighted sums for head_dim 8*NC >= 64, where each
// head keeps one accumulator chain per vector (K = 1 above): block by block,
// every head of the group adds the block's keys while its V tile (a few KiB)
// is in L1, so V is read from memory once per group instead of once per
// head. A head's accumulators wait in its `out` row between blocks (stores
// and loads are exact), so each head's operations and their order are those
// of WeightedSumV<T, 1, NC, 1>: bitwise the same result, whatever n_q.
template <typename T, int NC>
inline void WeightedSumVGroup(const AttnArgs& a, const float* e, int64_t ld_e, int64_t lo, int64_t n,
                              const float* inv, float* out, int n_q) {
  const int64_t bs = a.block_size, hd = 8 * NC;
  for (int g = 0; g < n_q; ++g)
    for (int c = 0; c < NC; ++c) StoreU(out + g * hd + 8 * c, Zero());
  for (int64_t blk = lo / bs, j0 = blk * bs; j0 < n; j0 += bs, ++blk) {
    const T* vb = KvTile<T>(a, blk, a.v_offset);  // (bs, hd)
    const float* vs = KvScales(vb, a.v_scales_offset);  // (bs) Q8_0 only
    const int64_t cnt = n - j0 < bs ? n - j0 : bs;
    const int64_t s0 = j0 < lo ? lo - j0 : 0;
    for (int g = 0; g < n_q; ++g) {
      float* o = out + g * hd;
      const float* eg = e + g * ld_e;
      V8 acc[NC];
      for (int c = 0; c < NC; ++c) acc[c] = LoadU(o + 8 * c);
      for (int64_t s = s0; s < cnt; ++s) {
        float w = eg[j0 + s - lo];
        if constexpr (kKvQ8<T>) w *= vs[s];
        const V8 wv = Set1(w);
        const T* v = vb + s * hd;
        for (int c = 0; c < NC; ++c) acc[c] = Fma(wv, LoadKv8(v + 8 * c), acc[c]);
      }
      for (int c = 0; c < NC; ++c) StoreU(o + 8 * c, acc[c]);
    }
  }
  for (int g = 0; g < n_q; ++g)
    for (int c = 0; c < NC; ++c) StoreU(out + g * hd + 8 * c, Mul(LoadU(out + g * hd + 8 * c), Set1(inv[g])));
}

// Requests the start of a K or V tile (up to 16 cache lines) ahead of use. A
// sequence's blocks lie a whole block (every layer's K and V) apart in the
// pool, a stride hardware prefetchers do not follow; inside a tile they do.
inline void PrefetchTile(const void* p, int64_t bytes) {
  const int64_t lines = bytes / 64 < 16 ? bytes / 64 : 16;
  for (int64_t i = 0; i < lines; ++i) Prefetch(static_cast<const uint8_t*>(p) + 64 * i);
}

// e_j = exp(s_j - m) in place over n >= 1 scores, m = max s; returns Σ e_j.
// With a sink (an attention sink's logit): m = max(max s, *sink) and the sum
// has exp(*sink - m) added, a softmax term with no value behind it.
inline float SoftmaxWeights(float* scores, int64_t n, const float* sink = nullptr) {
  // the max is exact in any order
  float mx = scores[0];
  int64_t j = 0;
  if (n >= 8) {
    V8 vm = LoadU(scores);
    for (j = 8; j + 8 <= n; j += 8) vm = Max(vm, LoadU(scores + j));
    float tmp[8];
    StoreU(tmp, vm);
    for (int i = 0; i < 8; ++i) mx = tmp[i] > mx ? tmp[i] : mx;
  }
  for (; j < n; ++j) mx = scores[j] > mx ? scores[j] : mx;
  if (sink != nullptr) mx = *sink > mx ? *sink : mx;
  const V8 vmx = Set1(mx);
  V8 vsum = Zero();
  for (j = 0; j + 8 <= n; j += 8) {
    const V8 e = Exp(Sub(LoadU(scores + j), vmx));
    StoreU(scores + j, e);
    vsum = Add(vsum, e);
  }
  float sum = HSum(vsum);
  if (j < n) {
    float tmp[8];
    for (int i = 0; i < 8; ++i) tmp[i] = j + i < n ? scores[j + i] : mx;
    StoreU(tmp, Exp(Sub(LoadU(tmp), vmx)));
    for (int64_t i = j; i < n; ++i) {
      scores[i] = tmp[i - j];
      sum += tmp[i - j];
    }
  }
  if (sink != nullptr) sum += std::exp(*sink - mx);
  return sum;
}

// K and V are read by two passes that share only the scores, so each side
// runs the pass of its own element type (llm_ctx_params.kv_type and
// kv_type_v may differ): AttentionImpl pairs ScoresTyped<TK> or ScoresQ4
// with SumValuesTyped<TV> or SumValuesQ4. A pair of one type performs the
// operations, in the order, of a single kernel of that type.
//
// Scores of keys first_key .. n_keys-1 for the n_q heads. They are computed
// from the start of first_key's block (whole blocks keep the 8-wide loads
// aligned to the tile) into row g of scores_buf, (n_q, ld) with
// ld = n_keys - base; the softmax then reads from key first_key on:
//
//   scores_buf row g: [ base ... lo-1 | lo ............ n_end-1 ]
//                       (discarded)     scores, n = n_end - lo of them
template <typename T>
void ScoresTyped(const AttnArgs& a, int n_q, const float* q, float* scores_buf) {
  const int64_t n_end = a.n_keys;
  const int64_t bs = a.block_size;
  const int hd = a.head_dim;
  const int64_t lo = a.first_key, base = lo / bs * bs, ld = n_end - base;

  // ---- scores. K tiles are requested kAhead blocks ahead of use and each
  // block's V tile as its K tile is scored, so the V pass finds them in cache.
  const V8 vscale = Set1(a.scale);
  const int64_t tile = a.k_tile_bytes, last_blk = (n_end - 1) / bs;
  constexpr int64_t kAhead = 4;
  for (int64_t blk = base / bs; blk <= last_blk && blk < base / bs + kAhead; ++blk)
    PrefetchTile(KvTile<T>(a, blk, a.k_offset), tile);
  KeyGroup<T> pend[4];  // up to 4 groups of 8 keys, possibly from several blocks, scored together
  int n_pend = 0;
  for (int64_t blk = base / bs, j0 = base; j0 < n_end; j0 += bs, ++blk) {
    if (blk + kAhead <= last_blk) PrefetchTile(KvTile<T>(a, blk + kAhead, a.k_offset), tile);
    PrefetchTile(KvTile<uint8_t>(a, blk, a.v_offset), a.v_tile_bytes);
    const T* kt = KvTile<T>(a, blk, a.k_offset);  // (hd, bs)
    const float* ks = KvScales(kt, a.k_scales_offset);  // (bs) Q8_0 only
    const int64_t cnt = n_end - j0 < bs ? n_end - j0 : bs;
    if ((bs & 7) == 0) {
      for (int64_t s = 0; s < cnt; s += 8) {
        pend[n_pend++] = KeyGroup<T>{kt + s, kKvQ8<T> ? ks + s : nullptr, j0 - base + s, cnt - s < 8 ? cnt - s : 8};
        if (n_pend == 4) {
          ScorePending(q, n_q, hd, pend, n_pend, bs, vscale, scores_buf, ld);
          n_pend = 0;
        }
      }
      continue;
    }
    for (int g = 0; g < n_q; ++g) {
      for (int64_t s = 0; s < cnt; ++s) {
        float acc = 0.0f;
        for (int d = 0; d < hd; ++d) acc = ScalarFma(q[g * hd + d], KvToF32(kt[d * bs + s]), acc);
        float sc = acc * a.scale;
        if constexpr (kKvQ8<T>) sc *= ks[s];
        scores_buf[g * ld + j0 - base + s] = sc;
      }
    }
  }
  if (n_pend > 0) ScorePending(q, n_q, hd, pend, n_pend, bs, vscale, scores_buf, ld);
}

// Gemma 2's soft-cap over the attended scores (ScoresTyped's layout), in
// llama.cpp's order: scale, tanh(s / cap), * cap.
inline void SoftcapScores(const AttnArgs& a, int n_q, float* scores_buf) {
  if (!(a.softcap > 0.0f)) return;
  const int64_t bs = a.block_size, lo = a.first_key, base = lo / bs * bs, ld = a.n_keys - base, n = a.n_keys - lo;
  float* scores = scores_buf + (lo - base);
  const float cap = a.softcap, inv_cap = 1.0f / a.softcap;
  for (int g = 0; g < n_q; ++g)
    for (int64_t i = 0; i < n; ++i) scores[g * ld + i] = cap * std::tanh(scores[g * ld + i] * inv_cap);
}

// out (n_q, head_dim) = softmax(scores) · V over the attended keys: softmax
// weights (unnormalised) in place, head g's key lo + i at scores[g * ld + i],
// then out = Σ e_j v_j / Σ e_j.
template <typename T>
void SumValuesTyped(const AttnArgs& a, int n_q, float* scores_buf, float* out) {
  const int64_t n_end = a.n_keys, bs = a.block_size;
  const int hd = a.head_dim;
  const int64_t lo = a.first_key, base = lo / bs * bs, ld = n_end - base;
  float* scores = scores_buf + (lo - base);
  const int64_t n = n_end - lo;
  constexpr int kMaxGroup = 64;
  if ((hd == 64 || hd == 128 || hd == 256) && n_q >= 2 && n_q <= kMaxGroup) {  // V read once per group
    float inv_all[kMaxGroup];
    for (int g = 0; g < n_q; ++g)
      inv_all[g] = 1.0f / SoftmaxWeights(scores + g * ld, n, a.sinks ? a.sinks + g : nullptr);
    if (hd == 64) WeightedSumVGroup<T, 8>(a, scores, ld, lo, n_end, inv_all, out, n_q);
    if (hd == 128) WeightedSumVGroup<T, 16>(a, scores, ld, lo, n_end, inv_all, out, n_q);
    if (hd == 256) WeightedSumVGroup<T, 32>(a, scores, ld, lo, n_end, inv_all, out, n_q);
    return;
  }
  float inv[2];
  for (int g = 0; g < n_q; g += 2) {
    const int ng = n_q - g >= 2 ? 2 : 1;
    for (int h = 0; h < ng; ++h)
      inv[h] = 1.0f / SoftmaxWeights(scores + (g + h) * ld, n, a.sinks ? a.sinks + g + h : nullptr);

    // ---- out = Σ e_j v_j / Σ e_j
    const float* e = scores + g * ld;
    float* o = out + g * hd;
    switch (hd) {
      case 8: WeightedSumVHeads<T, 1>(a, e, ld, lo, n_end, inv, o, ng); continue;
      case 16: WeightedSumVHeads<T, 2>(a, e, ld, lo, n_end, inv, o, ng); continue;
      case 32: WeightedSumVHeads<T, 4>(a, e, ld, lo, n_end, inv, o, ng); continue;
      case 64: WeightedSumVHeads<T, 8>(a, e, ld, lo, n_end, inv, o, ng); continue;
      case 128: WeightedSumVHeads<T, 16>(a, e, ld, lo, n_end, inv, o, ng); continue;
      case 256: WeightedSumVHeads<T, 32>(a, e, ld, lo, n_end, inv, o, ng); continue;
      default: break;
    }
    for (int h = 0; h < ng; ++h) {
      const float* eh = e + h * ld;
      float* oh = o + h * hd;
      for (int d = 0; d < hd; ++d) oh[d] = 0.0f;
      for (int64_t blk = base / bs, j0 = base; j0 < n_end; j0 += bs, ++blk) {
        const T* vb = KvTile<T>(a, blk, a.v_offset);
        const float* vs = KvScales(vb, a.v_scales_offset);
        const int64_t cnt = n_end - j0 < bs ? n_end - j0 : bs;
        for (int64_t s = j0 < lo ? lo - j0 : 0; s < cnt; ++s) {
          float w = eh[j0 + s - lo];
          if constexpr (kKvQ8<T>) w *= vs[s];
          for (int d = 0; d < hd; ++d) oh[d] = ScalarFma(w, KvToF32(vb[s * hd + d]), oh[d]);
        }
      }
      for (int d = 0; d < hd; ++d) oh[d] *= inv[h];
    }
  }
}

// ---- Q4_0 (kv_layout.h): a byte holds dims (2i, 2i+1) of one position,
// value = (nibble - 8) * its block's F16 scale. Tiles are widened to F32 a
// few keys at a time on the stack (8 keys of K, one row of V: at most 8 KiB
// per group, never the cache), then scored and summed as F32 tiles are.

// 8 consecutive bytes' low (hi = false) or high nibbles, each minus 8.
inline V8 LoadQ4Nibbles(const uint8_t* p, bool hi) {
  int8_t v[8];
  for (int i = 0; i < 8; ++i) v[i] = static_cast<int8_t>((hi ? p[i] >> 4 : p[i] & 15) - 8);
  return LoadI8(v);
}

// Keys s .. s+n-1 (n <= 8) of a Q4_0 K tile as F32 (hd, 8) in out; the
// columns past n are zero.
inline void WidenKeysQ4(const uint8_t* tile, int64_t scales_offset, int64_t bs, int hd, int64_t s, int64_t n,
                        float* out) {
  const uint16_t* sc = reinterpret_cast<const uint16_t*>(tile + scales_offset);
  if (n == 8 && (bs & 7) == 0) {
    for (int d = 0; d < hd; d += 2) {
      const uint8_t* b = tile + (d / 2) * bs + s;
      const V8 scale = LoadF16(sc + (d / 32) * bs + s);
      StoreU(out + d * 8, Mul(LoadQ4Nibbles(b, false), scale));
      StoreU(out + (d + 1) * 8, Mul(LoadQ4Nibbles(b, true), scale));
    }
    return;
  }
  for (int d = 0; d < hd; ++d) {
    for (int64_t i = 0; i < 8; ++i) {
      if (i >= n) {
        out[d * 8 + i] = 0.0f;
        continue;
      }
      const uint8_t b = tile[(d / 2) * bs + s + i];
      const int v = ((d & 1) != 0 ? b >> 4 : b & 15) - 8;
      out[d * 8 + i] = static_cast<float>(v) * ::llm::cpu::F16ToF32(sc[(d / 32) * bs + s + i]);
    }
  }
}

// Row s of a Q4_0 V tile as F32 (hd values; hd a multiple of 32).
inline void WidenRowQ4(const uint8_t* tile, int64_t scales_offset, int hd, int64_t s, float* out) {
  const uint16_t* sc = reinterpret_cast<const uint16_t*>(tile + scales_offset) + s * (hd / 32);
  const uint8_t* row = tile + s * (hd / 2);
  for (int c = 0; c < hd; c += 16) {
    // bytes c/2 .. c/2+7 hold dims c .. c+15 as (low, high) pairs
    float lo[8], hi[8];
    const V8 scale = Set1(::llm::cpu::F16ToF32(sc[c / 32]));
    StoreU(lo, Mul(LoadQ4Nibbles(row + c / 2, false), scale));
    StoreU(hi, Mul(LoadQ4Nibbles(row + c / 2, true), scale));
    for (int i = 0; i < 8; ++i) {
      out[c + 2 * i] = lo[i];
      out[c + 2 * i + 1] = hi[i];
    }
  }
}

constexpr int kMaxHdQ4 = 256;

// ScoresTyped's scores from a Q4_0 K.
inline void ScoresQ4(const AttnArgs& a, int n_q, const float* q, float* scores_buf) {
  constexpr int kMaxHd = kMaxHdQ4;
  const int64_t n_end = a.n_keys, bs = a.block_size;
  const int hd = a.head_dim;
  // scores from the start of lo's block, as ScoresTyped lays them out
  const int64_t lo = a.first_key, base = lo / bs * bs, ld = n_end - base;
  const V8 vscale = Set1(a.scale);
  alignas(32) float wide[4][8 * kMaxHd];  // up to 4 widened groups of 8 keys
  KeyGroup<float> pend[4];
  int n_pend = 0;
  for (int64_t blk = base / bs, j0 = base; j0 < n_end; j0 += bs, ++blk) {
    const uint8_t* kt = KvTile<uint8_t>(a, blk, a.k_offset);
    PrefetchTile(KvTile<uint8_t>(a, blk, a.v_offset), a.v_tile_bytes);
    const int64_t cnt = n_end - j0 < bs ? n_end - j0 : bs;
    for (int64_t s = 0; s < cnt; s += 8) {
      const int64_t n = cnt - s < 8 ? cnt - s : 8;
      WidenKeysQ4(kt, a.k_scales_offset, bs, hd, s, n, wide[n_pend]);
      pend[n_pend] = KeyGroup<float>{wide[n_pend], nullptr, j0 - base + s, n};
      if (++n_pend == 4) {
        ScorePending(q, n_q, hd, pend, n_pend, 8, vscale, scores_buf, ld);
        n_pend = 0;
      }
    }
  }
  if (n_pend > 0) ScorePending(q, n_q, hd, pend, n_pend, 8, vscale, scores_buf, ld);
}

// SumValuesTyped's weighted sum over a Q4_0 V.
inline void SumValuesQ4(const AttnArgs& a, int n_q, float* scores_buf, float* out) {
  constexpr int kMaxHd = kMaxHdQ4;
  const int64_t n_end = a.n_keys, bs = a.block_size;
  const int hd = a.head_dim;
  const int64_t lo = a.first_key, base = lo / bs * bs, ld = n_end - base;
  float* scores = scores_buf + (lo - base);
  const int64_t n = n_end - lo;
  // heads in chunks of up to 64, each V row widened once per chunk
  constexpr int kChunk = 64;
  alignas(32) float row[kMaxHd];
  for (int g0 = 0; g0 < n_q; g0 += kChunk) {
    const int ng = n_q - g0 < kChunk ? n_q - g0 : kChunk;
    float inv[kChunk];
    for (int g = 0; g < ng; ++g) {
      inv[g] = 1.0f / SoftmaxWeights(scores + (g0 + g) * ld, n, a.sinks ? a.sinks + g0 + g : nullptr);
      for (int d = 0; d < hd; d += 8) StoreU(out + (g0 + g) * hd + d, Zero());
    }
    for (int64_t blk = lo / bs, j0 = blk * bs; j0 < n_end; j0 += bs, ++blk) {
      const uint8_t* vt = KvTile<uint8_t>(a, blk, a.v_offset);
      const int64_t cnt = n_end - j0 < bs ? n_end - j0 : bs;
      for (int64_t s = j0 < lo ? lo - j0 : 0; s < cnt; ++s) {
        WidenRowQ4(vt, a.v_scales_offset, hd, s, row);
        for (int g = 0; g < ng; ++g) {
          const V8 w = Set1(scores[(g0 + g) * ld + j0 + s - lo]);
          float* o = out + (g0 + g) * hd;
          for (int d = 0; d < hd; d += 8) StoreU(o + d, Fma(w, LoadU(row + d), LoadU(o + d)));
        }
      }
    }
    for (int g = 0; g < ng; ++g) {
      const V8 iv = Set1(inv[g]);
      float* o = out + (g0 + g) * hd;
      for (int d = 0; d < hd; d += 8) StoreU(o + d, Mul(LoadU(o + d), iv));
    }
  }
}

void AttentionImpl(const AttnArgs& a, int n_q, const float* q, float* scores_buf, float* out) {
  switch (a.elem_k) {
    case KvElem::kQ4: ScoresQ4(a, n_q, q, scores_buf); break;
    case KvElem::kF16: ScoresTyped<uint16_t>(a, n_q, q, scores_buf); break;
    case KvElem::kQ8: ScoresTyped<int8_t>(a, n_q, q, scores_buf); break;
    default: ScoresTyped<float>(a, n_q, q, scores_buf); break;
  }
  SoftcapScores(a, n_q, scores_buf);
  switch (a.elem_v) {
    case KvElem::kQ4: SumValuesQ4(a, n_q, scores_buf, out); break;
    case KvElem::kF16: SumValuesTyped<uint16_t>(a, n_q, scores_buf, out); break;
    case KvElem::kQ8: SumValuesTyped<int8_t>(a, n_q, scores_buf, out); break;
    default: SumValuesTyped<float>(a, n_q, scores_buf, out); break;
  }
}
