// The Llama / Qwen / Gemma 2 / Gemma 3 forward pass on the CPU, over one batch of tokens
// from any mix of sequences (backend.h). Reads top to bottom like the model:
//
//   x = embed(tokens)                                  [Gemma: * sqrt(n_embd)]
//   for each layer:
//     xn = rmsnorm(x) ; q, k, v = xn·Wqᵀ, xn·Wkᵀ, xn·Wvᵀ  [Qwen2, gpt-oss: + bq, bk, bv]
//     [Gemma, Qwen3: q, k = rmsnorm per head] ; rope(q, k) ; store k, v
//     h = attention(q, cache)                 [Gemma, gpt-oss local layers: a window;
//                                              Gemma 2: scores soft-capped;
//                                              gpt-oss: a sink per head]
//     x += h · Woᵀ                            [Gemma: x += rmsnorm(h · Woᵀ); gpt-oss: + bo]
//     xn = rmsnorm(x) ; f = (act(xn·Wgᵀ) * xn·Wuᵀ) · Wdᵀ   (act: silu | gelu)
//                                             [MoE: f = Σ_top-k w_e f_e(xn)]
//     x += f                                  [Gemma: x += rmsnorm(f)]
//   logits = rmsnorm(x[logit_rows]) · Woutᵀ   [soft-capped if the model says]
//
// The variant is chosen per layer or per call (ModelConfig), never per
// element, so the Llama path runs exactly the operations it always did.
//
// Threads split only independent outputs (weight rows, query heads, tokens),
// so results are bitwise the same for any thread count and any batch
// composition (see kernels.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "backend/cpu/act_rounding.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/encoder_matmul.h"
#include "backend/cpu/matmul_rows.h"
#include "backend/kv_wire.h"
#include "util/fp16.h"

namespace llm::cpu {
namespace {

// Below this many multiply-adds a loop runs on the calling thread. Handing a
// chunk to a spinning worker and joining it costs well under a microsecond,
// about what 10-20K MACs take; measured on stories260K with 2 threads, 16K
// and 8K gave the best decode and prefill; 48K left prefill ~25% slower.
constexpr int64_t kParallelMacs = 16 * 1024;

// y += b over n values (a bias row).
inline void AddVector(float* y, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += b[i];
}

}  // namespace

bool CpuBackend::Parallel(int64_t macs) const { return pool_.n_threads() > 1 && macs >= kParallelMacs; }

// ================================================================ embedding

// A token given as an embedding row (an image's soft token) is copied as
// it is: the input scale is token_embd's (llama.cpp's Gemma 3 graph scales
// only when the batch holds token ids).
void CpuBackend::Embed(const Batch& batch) {
  const int64_t E = cfg_.n_embd;
  const float s = cfg_.embd_scale;
  for (size_t t = 0; t < batch.tokens.size(); ++t) {
    float* x = ws_.x.data() + t * E;
    if (!batch.embd.empty() && batch.embd[t] != nullptr) {
      std::memcpy(x, batch.embd[t], static_cast<size_t>(E) * sizeof(float));
      continue;
    }
    DequantizeRow(w_.token_embd, batch.tokens[t], x);
    if (s != 1.0f)
      for (int64_t i = 0; i < E; ++i) x[i] *= s;
  }
}

// ================================================================ rmsnorm

void CpuBackend::RmsNormRows(const float* x, const float* w, int64_t n, float* out) {
  const int64_t E = cfg_.n_embd;
  auto rows = [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) k_->rmsnorm(x + t * E, w, E, cfg_.rms_eps, out + t * E);
  };
  if (Parallel(n * E * 8)) {
    pool_.ParallelFor(n, rows);
  } else {
    rows(0, n, 0);
  }
}

void CpuBackend::AddNormedRows(float* y, const float* w, int64_t n, float* x) {
  const int64_t E = cfg_.n_embd;
  auto rows = [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) {
      float* yr = y + t * E;
      float* xr = x + t * E;
      k_->rmsnorm(yr, w, E, cfg_.rms_eps, yr);
      for (int64_t i = 0; i < E; ++i) xr[i] += yr[i];
    }
  };
  if (Parallel(n * E * 10)) {
    pool_.ParallelFor(n, rows);
  } else {
    rows(0, n, 0);
  }
}

// ================================================================ matmul
//
// Several weights that read the same input (Q, K and V) run as one parallel
// loop over their rows laid end to end:
//
//   rows:  [ 0 ........ wq.rows | ... wk.rows | ... wv.rows ]
//   thread 0: [=========)  thread 1: [====================)

// A block-quantized weight reads its input as Q8 blocks (kernels.h), made
// here once per matmul on the calling thread (n·k values: a small fraction of
// the n·k·rows multiply-adds) and shared by every thread's rows. They are
// rounded as llama.cpp rounds them for the weights' type (act_rounding.h)
// when all the weights agree on it, else by Kernels::quantize_act.
//
// MXFP4 (gpt-oss's experts) always gets llama.cpp's Q8_0 rounding, F16
// block scales: without it the tiny gpt-oss model is 2.7e-3 off llama.cpp
// at its first position and later picks another top-4 expert set where two
// router logits nearly tie (tests/test_families.cpp).
//
// F16 and BF16 weights read F32 activations, rounded first to F16 / BF16
// values (RoundDenseInput, below) when every weight of the call has that
// one type, as llama.cpp rounds them (act_rounding.h); not with
// LLM_CPU_ACT=own. Every call site of the two (MatMulJobs, FeedForwardUp,
// the classifier here and in lanes.cpp) makes both: a call's weights are
// either dense or block-quantized, and a mix gets neither rounding.
const BlockQ8Act* CpuBackend::QuantizeInput(const WeightView* const* ws, int n_ws, const float* x, int64_t n,
                                            int64_t k) {
  bool any = false, mxfp4 = false, agree = true;
  ActRounding r = ActRounding::kOwn;
  for (int j = 0; j < n_ws; ++j) {
    if (!IsBlockQuantized(ws[j]->type)) continue;
    const ActRounding rj = PeerActRounding(ws[j]->type);
    agree = agree && (!any || rj == r);
    r = rj;
    any = true;
    mxfp4 = mxfp4 || ws[j]->type == TensorType::MXFP4;
  }
  if (!any) return nullptr;
  if (mxfp4) {
    r = ActRounding::kQ8_0;
  } else if (!agree || shared_->act_own || (r == ActRounding::kQ8_K && k % 256 != 0)) {
    r = ActRounding::kOwn;
  }
  const int64_t nb = k / 32;  // k % 32 == 0: checked at creation for quantized weights
  BlockQ8Act* xq = ws_.xq.data();
  for (int64_t t = 0; t < n; ++t) {
    switch (r) {
      case ActRounding::kOwn: k_->quantize_act(x + t * k, k, xq + t * nb); break;
      case ActRounding::kQ8_0: QuantizeRowAsQ8_0(x + t * k, k, xq + t * nb); break;
      case ActRounding::kQ8_1: QuantizeRowAsQ8_1(x + t * k, k, xq + t * nb); break;
      case ActRounding::kQ8_K: QuantizeRowAsQ8_K(x + t * k, k, xq + t * nb); break;
    }
  }
  return xq;
}

// The copy goes to ws_.xr, never over x: x is the caller's (MoE's experts
// gather the router's input after it; the lanes' classifier reads its xn
// after this returns). An Encode step rounds too (llama.cpp's embedding
// models run the same matmuls); its AMX GEMM then splits F16 values into
// BF16 hi + lo exactly and BF16 values into hi alone (embed_matmul_amx.h),
// so nothing is rounded twice.
const float* CpuBackend::RoundDenseInput(const WeightView* const* ws, int n_ws, const float* x, int64_t n,
                                         int64_t k) {
  return cpu::RoundDenseInput(ws, n_ws, x, n * k, shared_->act_own, &ws_.xr);
}

// An embedding step's GEMMs (Encode: whole prompts, hidden_out_ set) may take
// the AVX-512 panel GEMM (encoder_matmul.h); generation keeps Kernels::matmul.
void CpuBackend::MatMul(const MatMulArgs& a) const {
  if (hidden_out_ != nullptr) {
    EmbedStepMatMul(*k_, a);
  } else {
    k_->matmul(a);
  }
}

void CpuBackend::MatMulJobs(const MatJob* jobs, int n_jobs, const float* x, int64_t n) {
  int64_t total_rows = 0, macs = 0;
  const WeightView* ws[4];  // callers pass at most 4 jobs (Q, K, V)
  for (int j = 0; j < n_jobs; ++j) {
    total_rows += jobs[j].w->rows;
    macs += n * jobs[j].w->rows * jobs[j].w->cols;
    ws[j] = jobs[j].w;
  }
  const BlockQ8Act* xq = QuantizeInput(ws, n_jobs, x, n, jobs[0].w->cols);  // jobs share their input
  x = RoundDenseInput(ws, n_jobs, x, n, jobs[0].w->cols);
  auto rows = [&](int64_t b, int64_t e, int) {
    int64_t base = 0;
    for (int j = 0; j < n_jobs; ++j) {
      const WeightView& w = *jobs[j].w;
      const int64_t lo = b > base ? b - base : 0;
      const int64_t hi = e - base < w.rows ? e - base : w.rows;
      if (lo < hi) {
        MatMul(DenseRowRange(w, x, xq, n, jobs[j].y, lo, hi, jobs[j].accumulate));
      }
      base += w.rows;
    }
  };
  if (Parallel(macs)) {
    pool_.ParallelFor(total_rows, rows);
  } else {
    rows(0, total_rows, 0);
  }
}

// hb = act(xn·Wgᵀ) * (xn·Wuᵀ), act = silu (Llama) or gelu (Gemma), split over
// the n_ff hidden units so that each thread finishes its own units' gate, up
// and product.
void CpuBackend::FeedForwardUp(const WeightView& gate, const WeightView& up, const float* xn, int64_t n) {
  const int64_t E = cfg_.n_embd, F = gate.rows;
  void (*const act_mul)(float*, const float*, int64_t) =
      cfg_.ffn_act == FfnActivation::kGeluTanh ? k_->gelu_mul : k_->silu_mul;
  const WeightView* ws[2] = {&gate, &up};
  const BlockQ8Act* xq = QuantizeInput(ws, 2, xn, n, E);
  xn = RoundDenseInput(ws, 2, xn, n, E);
  auto units = [&](int64_t b, int64_t e, int) {
    MatMulArgs a;
    a.x = xn;
    a.ld_x = E;
    a.xq = xq;
    a.ld_xq = E / 32;
    a.n_tok = n;
    a.ld_y = F;
    a.row_begin = b;
    a.row_end = e;
    a.w = &gate;
    a.y = ws_.hb.data();
    MatMul(a);
    a.w = &up;
    a.y = ws_.hb2.data();
    MatMul(a);
    for (int64_t t = 0; t < n; ++t) act_mul(ws_.hb.data() + t * F + b, ws_.hb2.data() + t * F + b, e - b);
  };
  if (Parallel(2 * n * F * E)) {
    pool_.ParallelFor(F, units);
  } else {
    units(0, F, 0);
  }
}

// ================================================================ RoPE, KV store

// With qkv_bias (Qwen2) the biases are added to q, k and v first; with
// qk_norm (Gemma 3, Qwen3) each head of q and k is RMS-normed over head_dim.
// One position's head_dim values into a K tile (column `slot` of (hd, bs):
// transposed) or a V tile (row `slot` of (bs, hd)), in that side's element
// type (kv_layout.h). F16 rounds to nearest even; Q8_0 stores the row's
// scale max|x| / 127 beside the tile and x / scale rounded to nearest; Q4_0
// stores GGUF Q4_0 blocks of 32 (values and F16 scale).
namespace {
template <bool kColumn>
void StoreKv(const KvLayout& kv, uint8_t* tile, int64_t slot, const float* x) {
  const int64_t hd = kv.head_dim, bs = kv.block_size;
  const int64_t step = kColumn ? bs : 1, first = kColumn ? slot : slot * hd;
  const KvElem elem = kColumn ? kv.elem_k : kv.elem_v;  // K tiles are the transposed ones
  const int64_t scales_offset = kv.ScalesOffset(elem);
  switch (elem) {
    case KvElem::kF32: {
      float* t = reinterpret_cast<float*>(tile) + first;
      for (int64_t d = 0; d < hd; ++d) t[d * step] = x[d];
      return;
    }
    case KvElem::kF16: {
      uint16_t* t = reinterpret_cast<uint16_t*>(tile) + first;
      for (int64_t d = 0; d < hd; ++d) t[d * step] = F32ToF16(x[d]);
      return;
    }
    case KvElem::kQ8: {
      // the rule of the KV wire format's Q8_0 too (backend/kv_wire.h)
      const float scale = QuantizeRowQ8(x, hd, reinterpret_cast<int8_t*>(tile) + first, step);
      reinterpret_cast<float*>(tile + scales_offset)[slot] = scale;
      return;
    }
    case KvElem::kQ4: {
      // GGUF's Q4_0 rule (backend/kv_wire.h); byte of dims (2i, 2i+1):
      // (i, slot) in K's tile, (slot, i) in V's; scales likewise
      const int64_t nb = hd / kQ4Block;
      uint16_t* sc = reinterpret_cast<uint16_t*>(tile + scales_offset);
      uint8_t q[kQ4Block];
      for (int64_t b = 0; b < nb; ++b) {
        sc[kColumn ? b * bs + slot : slot * nb + b] = QuantizeBlockQ4(x + b * kQ4Block, q);
        for (int64_t j = 0; j < kQ4Block; j += 2) {
          const int64_t i = (b * kQ4Block + j) / 2;
          tile[kColumn ? i * bs + slot : slot * (hd / 2) + i] = static_cast<uint8_t>(q[j] | q[j + 1] << 4);
        }
      }
      return;
    }
  }
}
}  // namespace

void CpuBackend::StoreKvColumn(uint8_t* tile, int64_t slot, const float* k) const { StoreKv<true>(kv_, tile, slot, k); }
void CpuBackend::StoreKvRow(uint8_t* tile, int64_t slot, const float* v) const { StoreKv<false>(kv_, tile, slot, v); }

namespace {
// The GGUF type llama.cpp's cache would hold for a side of `e` (llmrt's Q8_0
// has one scale per row, GGUF's per 32 values; act_rounding.h asks only
// which vec_dot_type reads it)
TensorType KvElemTensorType(KvElem e) {
  switch (e) {
    case KvElem::kF32: return TensorType::F32;
    case KvElem::kF16: return TensorType::F16;
    case KvElem::kQ8: return TensorType::Q8_0;
    case KvElem::kQ4: return TensorType::Q4_0;
  }
  return TensorType::F32;
}
}  // namespace

void CpuBackend::RopeAndStoreKv(int layer, const Batch& batch, int64_t n) {
  const int32_t hd = cfg_.head_dim, Hq = cfg_.n_head, Hkv = cfg_.n_head_kv;
  const int64_t Q = cfg_.q_dim(), KV = cfg_.kv_dim(), bs = kv_.block_size, rd = cfg_.rope_dim;
  uint8_t* pool = pool_base_;
  const bool local = cfg_.IsLocalLayer(layer);
  const Rope& rope = local ? rope_local_ : rope_;
  const float* cos_sin = local ? ws_.cos_sin_local.data() : ws_.cos_sin.data();  // (n, rope_dim)
  const float* qn = cfg_.qk_norm ? norms_.q[layer].data() : nullptr;       // (head_dim)
  const float* kn = cfg_.qk_norm ? norms_.k[layer].data() : nullptr;       // (head_dim)
  const bool bias = cfg_.qkv_bias;
  const int64_t rot_k = kv_.k_rotation(), rot_v = kv_.v_rotation();
  // q as llama.cpp's attention reads it against Q4_0 / Q8_0 keys: Q8_0
  // blocks in the basis of its cache's keys, which it rotates for both
  // types (act_rounding.h). llmrt's Q4_0 keys are rotated like them (q too,
  // below); its Q8_0 keys are not, so q is rounded in the rotated basis and
  // turned back (round_q.basis).
  const QueryRounding round_q = PeerQueryRounding(KvElemTensorType(kv_.elem_k), hd, rot_k, shared_->act_own);
  auto tokens = [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) {
      const float* cs = cos_sin + t * rd;
      if (bias) {
        AddVector(ws_.q.data() + t * Q, norms_.bq[layer].data(), Q);
        AddVector(ws_.k_new.data() + t * KV, norms_.bk[layer].data(), KV);
        AddVector(ws_.v_new.data() + t * KV, norms_.bv[layer].data(), KV);
      }
      if (qn != nullptr) {
        for (int32_t h = 0; h < Hq; ++h) {
          float* qh = ws_.q.data() + t * Q + h * hd;
          k_->rmsnorm(qh, qn, hd, cfg_.rms_eps, qh);
        }
        for (int32_t h = 0; h < Hkv; ++h) {
          float* kh = ws_.k_new.data() + t * KV + h * hd;
          k_->rmsnorm(kh, kn, hd, cfg_.rms_eps, kh);
        }
      }
      rope.Apply(cs, ws_.q.data() + t * Q, Hq, hd);
      const float* k = ws_.k_new.data() + t * KV;  // (Hkv, hd)
      const float* v = ws_.v_new.data() + t * KV;  // (Hkv, hd)
      rope.Apply(cs, ws_.k_new.data() + t * KV, Hkv, hd);
      // a Q4_0 side holds rotated rows: with a Q4_0 K, q and k rotate alike
      // (scores keep); with a Q4_0 V, v here and its head's output after
      // attention (kv_rotation.h)
      if (rot_k > 0) {
        HadamardRotate(ws_.q.data() + t * Q, Q, rot_k);
        HadamardRotate(ws_.k_new.data() + t * KV, KV, rot_k);
      }
      if (round_q.q8_0) RoundQueryAsQ8_0(ws_.q.data() + t * Q, Q, round_q.basis);
      if (rot_v > 0) HadamardRotate(ws_.v_new.data() + t * KV, KV, rot_v);
      const int64_t p = ws_.pos[t];
      const int32_t block = batch.seqs[ws_.seq_of[t]].block_table[p / bs];
      const int64_t slot = p % bs;
      uint8_t* base = pool + block * kv_.block_bytes();
      for (int32_t h = 0; h < Hkv; ++h) {
        StoreKvColumn(base + kv_.KOffset(layer, h), slot, k + h * hd);  // column `slot` of (hd, bs)
        StoreKvRow(base + kv_.VOffset(layer, h), slot, v + h * hd);     // row `slot` of (bs, hd)
      }
    }
  };
  if (Parallel(n * (Q + KV) * 4)) {
    pool_.ParallelFor(n, tokens);
  } else {
    tokens(0, n, 0);
  }
}

// ================================================================ attention
//
// One task per (token, KV head): the n_rep query heads that read KV head g
// (grouped-query attention) run together, so each K and V tile is read once
// per group. Token t attends to positions 0 .. pos[t] of its own sequence,
// which this step's RopeAndStoreKv has already completed; on a sliding-window
// layer only to the last `window` of them:
//
//   pos:     0 1 2 ... p-W  p-W+1 ... p
//   local:   (masked)       [attended  ]     W = sliding_window
//
// The masked keys stay in the pool: global layers of the same block still
// need them. (A pool that kept local layers' K/V in blocks of their own could
// free those out of the window; the block tables share one layout today.)
//
// Tasks differ in cost (a batch mixes short and long contexts), so they are
// cut into several chunks per thread that threads claim as they finish.

void CpuBackend::Attention(int layer, const Batch& batch, int64_t n) {
  const int32_t hd = cfg_.head_dim, Hkv = cfg_.n_head_kv;
  const int32_t n_rep = cfg_.n_head / cfg_.n_head_kv;
  const int64_t Q = cfg_.q_dim();
  const float scale = cfg_.AttnScale();
  const int64_t rot_v = kv_.v_rotation();  // 0: none
  const int64_t window = cfg_.IsLocalLayer(layer) ? cfg_.sliding_window : 0;  // 0: all keys
  // Keys [first, end) of token t's sequence: causal 0 .. pos (the last
  // `window` of them on a local layer); bidirectional (EmbeddingGemma, the
  // whole sequence in this step) all of the sequence, within window / 2 of
  // pos either side on a local layer.
  auto key_range = [&](int64_t t, int64_t* first, int64_t* end) {
    const int64_t p = ws_.pos[t];
    if (cfg_.causal) {
      // an image span's tokens reach past themselves to the span's end;
      // the window still counts back from the token's own position
      *end = batch.attn_end.empty() ? p + 1 : batch.attn_end[t];
      *first = window > 0 && p + 1 > window ? p + 1 - window : 0;
      return;
    }
    const BatchSeq& s = batch.seqs[ws_.seq_of[t]];
    *end = int64_t{s.n_past} + s.n_tokens;
    *first = 0;
    if (window > 0) {
      *first = std::max<int64_t>(0, p - window / 2);
      *end = std::min<int64_t>(*end, p + window / 2 + 1);
    }
  };
  int64_t keys = 0;
  for (int64_t t = 0; t < n; ++t) {
    int64_t first = 0, end = 0;
    key_range(t, &first, &end);
    keys += end - first;
  }

  auto tasks = [&](int64_t b, int64_t e, int thread) {
    float* scores = ws_.scores.data() + static_cast<int64_t>(thread) * n_rep * ws_.cap_keys;  // (n_rep, cap_keys)
    for (int64_t task = b; task < e; ++task) {
      const int64_t t = task / Hkv;
      const int32_t g = static_cast<int32_t>(task % Hkv);
      const BatchSeq& s = batch.seqs[ws_.seq_of[t]];
      AttnArgs a;
      a.pool = pool_base_;
      a.elem_k = kv_.elem_k;
      a.elem_v = kv_.elem_v;
      a.block_stride = kv_.block_bytes();
      a.k_tile_bytes = kv_.k_tile_bytes();
      a.v_tile_bytes = kv_.v_tile_bytes();
      a.k_scales_offset = kv_.k_scales_offset();
      a.v_scales_offset = kv_.v_scales_offset();
      a.k_offset = kv_.KOffset(layer, g);
      a.v_offset = kv_.VOffset(layer, g);
      a.block_table = s.block_table.data();
      a.block_size = static_cast<int32_t>(kv_.block_size);
      a.head_dim = hd;
      key_range(t, &a.first_key, &a.n_keys);
      a.scale = scale;
      a.softcap = cfg_.attn_logit_softcap;
      a.sinks = cfg_.attn_sinks ? norms_.sinks[layer].data() + static_cast<int64_t>(g) * n_rep : nullptr;
      const int64_t off = t * Q + static_cast<int64_t>(g) * n_rep * hd;  // query heads g*n_rep ..
      k_->attention(a, n_rep, ws_.q.data() + off, scores, ws_.att.data() + off);
      HadamardRotate(ws_.att.data() + off, static_cast<int64_t>(n_rep) * hd, rot_v);  // back from V's rotation
    }
  };
  if (Parallel(keys * cfg_.n_head * hd * 3)) {
    pool_.ParallelForDynamic(n * Hkv, 8 * static_cast<int64_t>(pool_.n_threads()), tasks);
  } else {
    tasks(0, n * Hkv, 0);
  }
}

// ================================================================ forward

Status CpuBackend::ForwardFromHidden(const Batch& batch, const float* hidden, float* logits) {
  if (hidden == nullptr && !batch.tokens.empty()) return InvalidArgument("CPU backend: hidden states are NULL");
  hidden_in_ = hidden;
  Status st = Forward(batch, logits);
  hidden_in_ = nullptr;
  return st;
}

Status CpuBackend::Forward(const Batch& batch, float* logits) {
  // A backend for the upper layers only has nothing to embed tokens with.
  if (first_layer_ > 0 && hidden_in_ == nullptr)
    return InvalidArgument("CPU backend: runs layers from " + std::to_string(first_layer_) +
                           " on and needs the hidden states entering them (ForwardFromHidden)");
  int64_t max_keys = 0;
  LLM_RETURN_IF_ERROR(Check(batch, hidden_out_ != nullptr ? hidden_out_ : logits, &max_keys));
  CommitBatchBlocks(batch);  // the lanes share the pool: commit before splitting
  if (Status st; hidden_out_ == nullptr && SplitBySequences(batch, logits, &st)) return st;  // each lane prepares its share
  LLM_RETURN_IF_ERROR(Prepare(batch, max_keys));
  const float* xn = RunLayers(batch);
  if (xn == nullptr) return Status::Ok();
  if (hidden_out_ != nullptr) {  // Encode: the normed rows themselves
    std::memcpy(hidden_out_, xn, static_cast<size_t>(batch.logit_rows.size() * cfg_.n_embd) * sizeof(float));
    return Status::Ok();
  }

  // ---- classifier                                  logits: (n_out, n_vocab)
  const int64_t n_out = static_cast<int64_t>(batch.logit_rows.size());
  const WeightView* w = &w_.output;
  const BlockQ8Act* xq = QuantizeInput(&w, 1, xn, n_out, cfg_.n_embd);
  xn = RoundDenseInput(&w, 1, xn, n_out, cfg_.n_embd);
  auto rows = [&](int64_t b, int64_t e, int) { ClassifierRows(xn, xq, n_out, logits, b, e); };
  if (Parallel(n_out * cfg_.n_vocab * cfg_.n_embd)) {
    pool_.ParallelFor(cfg_.n_vocab, rows);
  } else {
    rows(0, cfg_.n_vocab, 0);
  }
  return Status::Ok();
}

// The classifier over vocabulary rows [row_begin, row_end) of n_rows tokens:
// logits = xn · Woutᵀ, soft-capped (c · tanh(v / c)) when the model says.
// The one path for the shared pass (split over threads above) and the lanes'
// classifier chunks (lanes.cpp), so both give bitwise the same logits.
void CpuBackend::ClassifierRows(const float* xn, const BlockQ8Act* xq, int64_t n_rows, float* logits,
                                int64_t row_begin, int64_t row_end) const {
  const int64_t V = cfg_.n_vocab;
  MatMulArgs a;
  a.w = &w_.output;
  a.x = xn;
  a.ld_x = cfg_.n_embd;
  a.xq = xq;
  a.ld_xq = cfg_.n_embd / 32;
  a.n_tok = n_rows;
  a.y = logits;
  a.ld_y = V;
  a.row_begin = row_begin;
  a.row_end = row_end;
  k_->matmul(a);
  if (cfg_.final_logit_softcap > 0.0f) {
    const float c = cfg_.final_logit_softcap, inv = 1.0f / c;
    for (int64_t t = 0; t < n_rows; ++t)
      for (int64_t i = row_begin; i < row_end; ++i) logits[t * V + i] = c * std::tanh(logits[t * V + i] * inv);
  }
}

const float* CpuBackend::RunLayers(const Batch& batch) {
  const int64_t n_tok = static_cast<int64_t>(batch.tokens.size());
  const int64_t n_out = static_cast<int64_t>(batch.logit_rows.size());
  if (n_tok == 0) return nullptr;
  const int64_t E = cfg_.n_embd, Q = cfg_.q_dim();

  // Rows whose logits are wanted, in order, are all the last layer needs
  // after attention; skip the rest of that layer for the other tokens.
  bool identity_rows = n_out == n_tok;
  for (int64_t i = 0; identity_rows && i < n_out; ++i) identity_rows = batch.logit_rows[i] == i;

  // ---- embedding                                   x: (n_tok, n_embd)
  // (or, for the upper layers of a split model, the lower layers' output)
  if (hidden_in_ != nullptr) {
    std::memcpy(ws_.x.data(), hidden_in_, static_cast<size_t>(n_tok * E) * sizeof(float));
  } else {
    Embed(batch);
  }
  if (cfg_.mrope()) {  // M-RoPE: the batch's (t, h, w), or (p, p, p) at the slot's position
    for (int64_t t = 0; t < n_tok; ++t) {
      const int32_t p = static_cast<int32_t>(ws_.pos[t]), same[3] = {p, p, p};
      rope_.AnglesMrope(batch.mrope_pos.empty() ? same : batch.mrope_pos.data() + 3 * t,
                        ws_.cos_sin.data() + t * cfg_.rope_dim);
    }
  } else {
    for (int64_t t = 0; t < n_tok; ++t) rope_.Angles(ws_.pos[t], ws_.cos_sin.data() + t * cfg_.rope_dim);
  }
  if (cfg_.sliding_window > 0)
    for (int64_t t = 0; t < n_tok; ++t) rope_local_.Angles(ws_.pos[t], ws_.cos_sin_local.data() + t * cfg_.rope_dim);

  float* x = ws_.x.data();      // (n, n_embd) residual stream; n shrinks in the last layer
  float* att = ws_.att.data();  // (n, q_dim)
  int64_t n = n_tok;
  for (int l = static_cast<int>(first_layer_); l < cfg_.n_layer; ++l) {
    const LayerWeights& L = w_.layers[l];

    // ---- attention block
    RmsNormRows(x, norms_.attn[l].data(), n, ws_.xn.data());  // xn: (n, n_embd)
    const MatJob qkv[3] = {{&L.wq, ws_.q.data(), false},      // q: (n, n_head * head_dim)
                           {&L.wk, ws_.k_new.data(), false},  // k: (n, n_head_kv * head_dim)
                           {&L.wv, ws_.v_new.data(), false}}; // v: (n, n_head_kv * head_dim)
    MatMulJobs(qkv, 3, ws_.xn.data(), n);
    RopeAndStoreKv(l, batch, n);
    if (l == cfg_.n_layer - 1 && n_out == 0) return nullptr;  // K/V stored, nothing more wanted
    Attention(l, batch, n);                                   // att: (n, n_head * head_dim)

    if (l == cfg_.n_layer - 1 && !identity_rows) {
      // keep only the logit rows: x, att: (n_out, ·)
      for (int64_t i = 0; i < n_out; ++i) {
        const int64_t r = batch.logit_rows[i];
        std::memcpy(ws_.x_out.data() + i * E, x + r * E, E * sizeof(float));
        std::memcpy(ws_.att_out.data() + i * Q, att + r * Q, Q * sizeof(float));
      }
      x = ws_.x_out.data();
      att = ws_.att_out.data();
      n = n_out;
    }
    if (!cfg_.post_norms) {
      const MatJob wo = {&L.wo, x, true};  // x += att · Woᵀ
      MatMulJobs(&wo, 1, att, n);
      if (cfg_.out_bias)  // gpt-oss: x += bo
        for (int64_t t = 0; t < n; ++t) AddVector(x + t * E, norms_.bo[l].data(), E);
    } else {
      const MatJob wo = {&L.wo, ws_.xn.data(), false};  // xn = att · Woᵀ
      MatMulJobs(&wo, 1, att, n);
      AddNormedRows(ws_.xn.data(), norms_.post_attn[l].data(), n, x);  // x += rmsnorm(xn)
    }

    // ---- feed-forward block
    RmsNormRows(x, norms_.ffn[l].data(), n, ws_.xn.data());  // xn: (n, n_embd)
    if (cfg_.n_expert > 0) {
      MoeFeedForward(l, ws_.xn.data(), n, x);  // x += Σ w_e expert_e(xn)
      continue;
    }
    FeedForwardUp(L.w_gate, L.w_up, ws_.xn.data(), n);  // hb: (n, n_ff)
    if (!cfg_.post_norms) {
      const MatJob down = {&L.w_down, x, true};  // x += hb · Wdᵀ
      MatMulJobs(&down, 1, ws_.hb.data(), n);
    } else {
      const MatJob down = {&L.w_down, ws_.xn.data(), false};  // xn = hb · Wdᵀ
      MatMulJobs(&down, 1, ws_.hb.data(), n);
      AddNormedRows(ws_.xn.data(), norms_.post_ffn[l].data(), n, x);  // x += rmsnorm(xn)
    }
  }

  // ---- final norm                                  xn: (n_out, n_embd)
  RmsNormRows(x, norms_.out.data(), n, ws_.xn.data());
  return ws_.xn.data();
}

}  // namespace llm::cpu
