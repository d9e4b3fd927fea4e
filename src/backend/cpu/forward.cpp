// The Llama / Qwen / Gemma 2 / Gemma 3 forward pass on the CPU, over one batch of tokens
// from any mix of sequences (backend.h). Reads top to bottom like the model:
//
//   x = embed(tokens)                                  [Gemma: * sqrt(n_embd)]
//   for each layer:
//     xn = rmsnorm(x) ; q, k, v = xn·Wqᵀ, xn·Wkᵀ, xn·Wvᵀ  [Qwen2: + bq, bk, bv]
//     [Gemma, Qwen3: q, k = rmsnorm per head] ; rope(q, k) ; store k, v
//     h = attention(q, cache)                 [Gemma local layers: a window;
//                                              Gemma 2: scores soft-capped]
//     x += h · Woᵀ                            [Gemma: x += rmsnorm(h · Woᵀ)]
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
#include <atomic>
#include <cmath>
#include <cstring>
#include <thread>

#include "backend/cpu/cpu_backend.h"

namespace llm::cpu {
namespace {

// Below this many multiply-adds a loop runs on the calling thread. Handing a
// chunk to a spinning worker and joining it costs well under a microsecond,
// about what 10-20K MACs take; measured on stories260K with 2 threads, 16K
// and 8K gave the best decode and prefill; 48K left prefill ~25% slower.
constexpr int64_t kParallelMacs = 16 * 1024;

// c · tanh(v / c) with inv = 1 / c: the one expression for the shared pass
// and the lanes' classifier chunks, so both give bitwise the same logits.
inline float CapLogit(float v, float c, float inv) { return c * std::tanh(v * inv); }

// y += b over n values (a bias row).
inline void AddVector(float* y, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += b[i];
}

}  // namespace

bool CpuBackend::Parallel(int64_t macs) const { return pool_.n_threads() > 1 && macs >= kParallelMacs; }

// ================================================================ embedding

void CpuBackend::Embed(std::span<const llm_token> tokens) {
  const int64_t E = cfg_.n_embd;
  for (size_t t = 0; t < tokens.size(); ++t) DequantizeRow(w_.token_embd, tokens[t], x_.data() + t * E);
  if (cfg_.embd_scale != 1.0f) {
    const float s = cfg_.embd_scale;
    float* x = x_.data();
    for (int64_t i = 0, n = static_cast<int64_t>(tokens.size()) * E; i < n; ++i) x[i] *= s;
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

// logits = c * tanh(logits / c) over (n, n_vocab).
void CpuBackend::SoftCap(float* logits, int64_t n) {
  const float c = cfg_.final_logit_softcap, inv = 1.0f / c;
  auto span = [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) logits[i] = CapLogit(logits[i], c, inv);
  };
  const int64_t total = n * cfg_.n_vocab;
  if (Parallel(total * 16)) {
    pool_.ParallelFor(total, span);
  } else {
    span(0, total, 0);
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
// the n·k·rows multiply-adds) and shared by every thread's rows.
const BlockQ8Act* CpuBackend::QuantizeInput(const WeightView* const* ws, int n_ws, const float* x, int64_t n,
                                            int64_t k) {
  bool any = false;
  for (int j = 0; j < n_ws; ++j) any = any || IsBlockQuantized(ws[j]->type);
  if (!any) return nullptr;
  const int64_t nb = k / 32;  // k % 32 == 0: checked at creation for quantized weights
  for (int64_t t = 0; t < n; ++t) k_->quantize_act(x + t * k, k, xq_.data() + t * nb);
  return xq_.data();
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
  auto rows = [&](int64_t b, int64_t e, int) {
    int64_t base = 0;
    for (int j = 0; j < n_jobs; ++j) {
      const WeightView& w = *jobs[j].w;
      const int64_t lo = b > base ? b - base : 0;
      const int64_t hi = e - base < w.rows ? e - base : w.rows;
      if (lo < hi) {
        MatMulArgs a;
        a.w = &w;
        a.x = x;
        a.ld_x = w.cols;
        a.xq = xq;
        a.ld_xq = w.cols / 32;
        a.n_tok = n;
        a.y = jobs[j].y;
        a.ld_y = w.rows;
        a.row_begin = lo;
        a.row_end = hi;
        a.accumulate = jobs[j].accumulate;
        k_->matmul(a);
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
    a.y = hb_.data();
    k_->matmul(a);
    a.w = &up;
    a.y = hb2_.data();
    k_->matmul(a);
    for (int64_t t = 0; t < n; ++t) act_mul(hb_.data() + t * F + b, hb2_.data() + t * F + b, e - b);
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
void CpuBackend::RopeAndStoreKv(int layer, const Batch& batch, int64_t n) {
  const int32_t hd = cfg_.head_dim, Hq = cfg_.n_head, Hkv = cfg_.n_head_kv;
  const int64_t Q = cfg_.q_dim(), KV = cfg_.kv_dim(), bs = kv_.block_size, rd = cfg_.rope_dim;
  float* pool = pool_base_;
  const bool local = cfg_.IsLocalLayer(layer);
  const Rope& rope = local ? rope_local_ : rope_;
  const float* cos_sin = local ? cos_sin_local_.data() : cos_sin_.data();  // (n, rope_dim)
  const float* qn = cfg_.qk_norm ? norms_->q[layer].data() : nullptr;       // (head_dim)
  const float* kn = cfg_.qk_norm ? norms_->k[layer].data() : nullptr;       // (head_dim)
  const bool bias = cfg_.qkv_bias;
  auto tokens = [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) {
      const float* cs = cos_sin + t * rd;
      if (bias) {
        AddVector(q_.data() + t * Q, norms_->bq[layer].data(), Q);
        AddVector(k_new_.data() + t * KV, norms_->bk[layer].data(), KV);
        AddVector(v_new_.data() + t * KV, norms_->bv[layer].data(), KV);
      }
      if (qn != nullptr) {
        for (int32_t h = 0; h < Hq; ++h) {
          float* qh = q_.data() + t * Q + h * hd;
          k_->rmsnorm(qh, qn, hd, cfg_.rms_eps, qh);
        }
        for (int32_t h = 0; h < Hkv; ++h) {
          float* kh = k_new_.data() + t * KV + h * hd;
          k_->rmsnorm(kh, kn, hd, cfg_.rms_eps, kh);
        }
      }
      rope.Apply(cs, q_.data() + t * Q, Hq, hd);
      const float* k = k_new_.data() + t * KV;  // (Hkv, hd)
      const float* v = v_new_.data() + t * KV;  // (Hkv, hd)
      rope.Apply(cs, k_new_.data() + t * KV, Hkv, hd);
      const int64_t p = pos_[t];
      const int32_t block = batch.seqs[seq_of_[t]].block_table[p / bs];
      const int64_t slot = p % bs;
      float* base = pool + block * kv_.block_floats();
      for (int32_t h = 0; h < Hkv; ++h) {
        float* kt = base + kv_.KOffset(layer, h) + slot;        // column `slot` of (hd, bs)
        float* vr = base + kv_.VOffset(layer, h) + slot * hd;   // row `slot` of (bs, hd)
        for (int32_t d = 0; d < hd; ++d) kt[d * bs] = k[h * hd + d];
        std::memcpy(vr, v + h * hd, hd * sizeof(float));
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
  const int64_t window = cfg_.IsLocalLayer(layer) ? cfg_.sliding_window : 0;  // 0: all keys
  int64_t keys = 0;
  for (int64_t t = 0; t < n; ++t) keys += window > 0 && pos_[t] + 1 > window ? window : pos_[t] + 1;

  auto tasks = [&](int64_t b, int64_t e, int thread) {
    float* scores = scores_.data() + static_cast<int64_t>(thread) * n_rep * cap_keys_;  // (n_rep, cap_keys)
    for (int64_t task = b; task < e; ++task) {
      const int64_t t = task / Hkv;
      const int32_t g = static_cast<int32_t>(task % Hkv);
      const BatchSeq& s = batch.seqs[seq_of_[t]];
      AttnArgs a;
      a.pool = pool_base_;
      a.block_stride = kv_.block_floats();
      a.k_offset = kv_.KOffset(layer, g);
      a.v_offset = kv_.VOffset(layer, g);
      a.block_table = s.block_table.data();
      a.block_size = static_cast<int32_t>(kv_.block_size);
      a.head_dim = hd;
      a.n_keys = pos_[t] + 1;
      a.first_key = window > 0 && a.n_keys > window ? a.n_keys - window : 0;
      a.scale = scale;
      a.softcap = cfg_.attn_logit_softcap;
      const int64_t off = t * Q + static_cast<int64_t>(g) * n_rep * hd;  // query heads g*n_rep ..
      k_->attention(a, n_rep, q_.data() + off, scores, att_.data() + off);
    }
  };
  if (Parallel(keys * cfg_.n_head * hd * 3)) {
    pool_.ParallelForDynamic(n * Hkv, 8 * static_cast<int64_t>(pool_.n_threads()), tasks);
  } else {
    tasks(0, n * Hkv, 0);
  }
}

// ================================================================ lanes
//
// A step of many short sequences (continuous-batching decode) spends a
// fifth of its time at the ~8 fork/joins per layer: a thread that the host
// preempts for tens of microseconds stalls the other at every join. Split by
// sequences instead, each thread runs the layers for its share with no join;
// each thread reads all weights, but a decode step is compute-bound. Every
// token's arithmetic is the same in a lane as in the shared pass (rows,
// tokens and heads are independent), so outputs are bitwise unchanged.
//
// The classifier, a fifth of a decode step, is what evens the lanes out:
// each lane's classifier rows are cut into chunks of vocabulary rows, and a
// thread that is done with its own lane takes chunks of any lane whose
// layers are done. Without it the step waits for the slower lane: on the
// 2-vCPU VM, whose vCPUs the host steals at times, the slower of two lanes
// took 7% longer than their mean (16 sequences); with the chunks the step
// ran 2.6% faster (median of 16 alternating pairs; mean 4%).
//
//   thread 0: [lane 0 layers][lane 0 cls chunks ...][lane 1 cls chunks]
//   thread 1: [lane 1 layers .........][lane 1 cls chunks ...]

Status CpuBackend::LaneLayers(const Batch& batch, const float* logits, const float** xn, const BlockQ8Act** xq,
                              int64_t* n_rows) {
  *xn = nullptr;
  *xq = nullptr;
  *n_rows = 0;
  int64_t max_keys = 0;
  LLM_RETURN_IF_ERROR(Check(batch, logits, &max_keys));
  LLM_RETURN_IF_ERROR(Prepare(batch, max_keys));
  const float* h = RunLayers(batch);
  if (h == nullptr) return Status::Ok();
  const int64_t n = static_cast<int64_t>(batch.logit_rows.size());
  const WeightView* w = &w_.output;
  *xq = QuantizeInput(&w, 1, h, n, cfg_.n_embd);
  *xn = h;
  *n_rows = n;
  return Status::Ok();
}

bool CpuBackend::SplitBySequences(const Batch& batch, float* logits, Status* status) {
  const int P = pool_.n_threads();
  const int64_t n_tok = static_cast<int64_t>(batch.tokens.size());
  const int64_t n_seqs = static_cast<int64_t>(batch.seqs.size());
  // A Mixture-of-Experts step stays in the shared pass: lanes would each
  // read the experts their own tokens chose, and a routed expert would be
  // read once per lane instead of once per step.
  if (P < 2 || n_seqs < P || n_tok < 4 * P || lanes_off_ || cfg_.n_expert > 0) return false;
  // sequences in token order, logit rows ascending: then each lane's tokens
  // and logit rows are contiguous ranges of the batch's
  for (int64_t s = 0, next = 0; s < n_seqs; next += batch.seqs[s].n_tokens, ++s)
    if (batch.seqs[s].first != next) return false;
  for (size_t i = 1; i < batch.logit_rows.size(); ++i)
    if (batch.logit_rows[i] <= batch.logit_rows[i - 1]) return false;
  // cut the sequences into P runs of about n_tok / P tokens
  std::vector<int64_t>& cut = lane_cut_;
  cut.assign(P + 1, n_seqs);
  cut[0] = 0;
  int64_t s = 0, acc = 0, biggest = 0, start_tok = 0;
  for (int p = 0; p < P; ++p) {
    const int64_t goal = n_tok * (p + 1) / P;
    while (s < n_seqs && (acc < goal || p == P - 1) && n_seqs - s > P - 1 - p) acc += batch.seqs[s++].n_tokens;
    if (s == cut[p]) return false;  // an empty lane
    cut[p + 1] = s;
    biggest = std::max(biggest, acc - start_tok);
    start_tok = acc;
  }
  if (cut[P] != n_seqs || biggest * P > n_tok * 3 / 2) return false;  // too uneven: the shared pass
  if (lanes_.empty()) {
    if (Status st = MakeLanes(); !st.ok()) {
      *status = st;
      return true;
    }
  }
  std::vector<LaneStep>& lanes = lane_steps_;  // sized with lanes_
  size_t r = 0;
  for (int p = 0; p < P; ++p) {
    LaneStep& L = lanes[p];
    L.seqs.clear();
    L.rows.clear();
    L.ready.store(false, std::memory_order_relaxed);  // st, xn, xq, n_rows: set by LaneLayers
    L.next_chunk.store(0, std::memory_order_relaxed);
    const int32_t t0 = batch.seqs[cut[p]].first;
    const int32_t t1 = cut[p + 1] < n_seqs ? batch.seqs[cut[p + 1]].first : static_cast<int32_t>(n_tok);
    for (int64_t q = cut[p]; q < cut[p + 1]; ++q) {
      BatchSeq b = batch.seqs[q];
      b.first -= t0;
      L.seqs.push_back(b);
    }
    L.logits = logits == nullptr ? nullptr : logits + r * cfg_.n_vocab;
    for (; r < batch.logit_rows.size() && batch.logit_rows[r] < t1; ++r) L.rows.push_back(batch.logit_rows[r] - t0);
    L.batch.tokens = batch.tokens.subspan(t0, t1 - t0);
    L.batch.seqs = L.seqs;
    L.batch.logit_rows = L.rows;
  }

  // Classifier chunks: whole pairs of 8-row groups (the packed kernels'
  // unit), about 16 per lane.
  const int64_t V = cfg_.n_vocab;
  const int64_t chunk = std::max<int64_t>(256, (V / 16 + 15) / 16 * 16);
  const int64_t n_chunks = (V + chunk - 1) / chunk;
  auto classify = [&](LaneStep& L) {
    for (int64_t c = L.next_chunk.fetch_add(1, std::memory_order_relaxed); c < n_chunks;
         c = L.next_chunk.fetch_add(1, std::memory_order_relaxed)) {
      if (L.n_rows == 0) continue;
      MatMulArgs a;
      a.w = &w_.output;
      a.x = L.xn;
      a.ld_x = cfg_.n_embd;
      a.xq = L.xq;
      a.ld_xq = cfg_.n_embd / 32;
      a.n_tok = L.n_rows;
      a.y = L.logits;
      a.ld_y = V;
      a.row_begin = c * chunk;
      a.row_end = std::min(V, (c + 1) * chunk);
      k_->matmul(a);
      if (cfg_.final_logit_softcap > 0.0f) {
        const float cap = cfg_.final_logit_softcap, inv = 1.0f / cap;
        for (int64_t t = 0; t < L.n_rows; ++t)
          for (int64_t i = a.row_begin; i < a.row_end; ++i) L.logits[t * V + i] = CapLogit(L.logits[t * V + i], cap, inv);
      }
    }
  };
  // Each thread starts lanes nobody has started, then takes chunks of every
  // lane whose layers are done, waiting for lanes other threads are running
  // (every lane is started by some running thread, so the wait ends).
  std::atomic<int> next_lane{0};
  pool_.ParallelFor(P, [&](int64_t, int64_t, int) {
    for (int p; (p = next_lane.fetch_add(1, std::memory_order_relaxed)) < P;) {
      LaneStep& L = lanes[p];
      L.st = lanes_[p]->LaneLayers(L.batch, L.logits, &L.xn, &L.xq, &L.n_rows);
      L.ready.store(true, std::memory_order_release);
      classify(L);
    }
    for (int spins = 0;;) {
      bool waiting = false;
      for (LaneStep& L : lanes) {
        if (L.next_chunk.load(std::memory_order_relaxed) >= n_chunks) continue;
        if (!L.ready.load(std::memory_order_acquire)) {
          waiting = true;
          continue;
        }
        classify(L);
      }
      if (!waiting) return;
      if (++spins % 1024 == 0) {
        std::this_thread::yield();
      } else {
        CpuRelax();
      }
    }
  });
  *status = Status::Ok();
  for (const LaneStep& L : lanes)
    if (!L.st.ok()) {
      *status = L.st;
      break;
    }
  return true;
}

// ================================================================ forward

Status CpuBackend::Forward(const Batch& batch, float* logits) {
  int64_t max_keys = 0;
  LLM_RETURN_IF_ERROR(Check(batch, logits, &max_keys));
  if (Status st; SplitBySequences(batch, logits, &st)) return st;  // each lane prepares its share
  LLM_RETURN_IF_ERROR(Prepare(batch, max_keys));
  const float* xn = RunLayers(batch);
  if (xn == nullptr) return Status::Ok();

  // ---- classifier                                  logits: (n_out, n_vocab)
  const int64_t n_out = static_cast<int64_t>(batch.logit_rows.size());
  const MatJob cls = {&w_.output, logits, false};
  MatMulJobs(&cls, 1, xn, n_out);
  if (cfg_.final_logit_softcap > 0.0f) SoftCap(logits, n_out);
  return Status::Ok();
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
  Embed(batch.tokens);
  for (int64_t t = 0; t < n_tok; ++t) rope_.Angles(pos_[t], cos_sin_.data() + t * cfg_.rope_dim);
  if (cfg_.sliding_window > 0)
    for (int64_t t = 0; t < n_tok; ++t) rope_local_.Angles(pos_[t], cos_sin_local_.data() + t * cfg_.rope_dim);

  float* x = x_.data();      // (n, n_embd) residual stream; n shrinks in the last layer
  float* att = att_.data();  // (n, q_dim)
  int64_t n = n_tok;
  for (int l = 0; l < cfg_.n_layer; ++l) {
    const LayerWeights& L = w_.layers[l];

    // ---- attention block
    RmsNormRows(x, norms_->attn[l].data(), n, xn_.data());  // xn: (n, n_embd)
    const MatJob qkv[3] = {{&L.wq, q_.data(), false},      // q: (n, n_head * head_dim)
                           {&L.wk, k_new_.data(), false},  // k: (n, n_head_kv * head_dim)
                           {&L.wv, v_new_.data(), false}}; // v: (n, n_head_kv * head_dim)
    MatMulJobs(qkv, 3, xn_.data(), n);
    RopeAndStoreKv(l, batch, n);
    if (l == cfg_.n_layer - 1 && n_out == 0) return nullptr;  // K/V stored, nothing more wanted
    Attention(l, batch, n);                                   // att: (n, n_head * head_dim)

    if (l == cfg_.n_layer - 1 && !identity_rows) {
      // keep only the logit rows: x, att: (n_out, ·)
      for (int64_t i = 0; i < n_out; ++i) {
        const int64_t r = batch.logit_rows[i];
        std::memcpy(x_out_.data() + i * E, x + r * E, E * sizeof(float));
        std::memcpy(att_out_.data() + i * Q, att + r * Q, Q * sizeof(float));
      }
      x = x_out_.data();
      att = att_out_.data();
      n = n_out;
    }
    if (!cfg_.post_norms) {
      const MatJob wo = {&L.wo, x, true};  // x += att · Woᵀ
      MatMulJobs(&wo, 1, att, n);
    } else {
      const MatJob wo = {&L.wo, xn_.data(), false};  // xn = att · Woᵀ
      MatMulJobs(&wo, 1, att, n);
      AddNormedRows(xn_.data(), norms_->post_attn[l].data(), n, x);  // x += rmsnorm(xn)
    }

    // ---- feed-forward block
    RmsNormRows(x, norms_->ffn[l].data(), n, xn_.data());  // xn: (n, n_embd)
    if (cfg_.n_expert > 0) {
      MoeFeedForward(l, xn_.data(), n, x);  // x += Σ w_e expert_e(xn)
      continue;
    }
    FeedForwardUp(L.w_gate, L.w_up, xn_.data(), n);  // hb: (n, n_ff)
    if (!cfg_.post_norms) {
      const MatJob down = {&L.w_down, x, true};  // x += hb · Wdᵀ
      MatMulJobs(&down, 1, hb_.data(), n);
    } else {
      const MatJob down = {&L.w_down, xn_.data(), false};  // xn = hb · Wdᵀ
      MatMulJobs(&down, 1, hb_.data(), n);
      AddNormedRows(xn_.data(), norms_->post_ffn[l].data(), n, x);  // x += rmsnorm(xn)
    }
  }

  // ---- final norm                                  xn: (n_out, n_embd)
  RmsNormRows(x, norms_->out.data(), n, xn_.data());
  return xn_.data();
}

}  // namespace llm::cpu
