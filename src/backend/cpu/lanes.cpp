// The CPU backend's lane scheduler: a step of many sequences runs as
// n_threads independent lanes (single-threaded CpuBackends over the same
// weights and KV pool), then the lanes' classifier rows in chunks any thread
// may take (cpu_backend.h: SplitBySequences).
#include <algorithm>
#include <atomic>
#include <new>
#include <thread>

#include "backend/cpu/cpu_backend.h"

namespace llm::cpu {

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
  *xn = RoundDenseInput(&w, 1, h, n, cfg_.n_embd);  // ws_.xr's copy, unless the head is not F16 / BF16
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
  if (P < 2 || n_seqs < P || n_tok < 4 * P || shared_->lanes_off || cfg_.n_expert > 0) return false;
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
    if (!batch.embd.empty()) L.batch.embd = batch.embd.subspan(t0, t1 - t0);
    if (!batch.attn_end.empty()) L.batch.attn_end = batch.attn_end.subspan(t0, t1 - t0);
    if (!batch.mrope_pos.empty()) L.batch.mrope_pos = batch.mrope_pos.subspan(3 * t0, 3 * (t1 - t0));
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
      if (L.n_rows > 0) ClassifierRows(L.xn, L.xq, L.n_rows, L.logits, c * chunk, std::min(V, (c + 1) * chunk));
    }
  };
  // Each thread starts lanes nobody has started, then takes chunks of every
  // lane whose layers are done, waiting for lanes other threads are running
  // (every lane is started by some running thread, so the wait ends).
  std::atomic<int> next_lane{0};
  pool_.ParallelFor(P, [&](int64_t, int64_t, int) {
    for (int p; (p = next_lane.fetch_add(1, std::memory_order_relaxed)) < P;) {
      LaneStep& L = lanes[p];
      // a lane's hidden states: its tokens' rows of the step's (partial offload)
      const int64_t t0 = L.seqs.empty() ? 0 : batch.seqs[lane_cut_[p]].first;
      lanes_[p]->hidden_in_ = hidden_in_ == nullptr ? nullptr : hidden_in_ + t0 * cfg_.n_embd;
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

Status CpuBackend::MakeLanes() {
  try {
    for (int i = 0; i < pool_.n_threads(); ++i) {
      // one thread and its own workspace over the same weights, packed
      // copies, norms and KV pool
      lanes_.push_back(std::unique_ptr<CpuBackend>(new CpuBackend(shared_, 1)));
    }
    lane_steps_ = std::vector<LaneStep>(lanes_.size());
    lane_cut_.reserve(lanes_.size() + 1);
  } catch (const std::bad_alloc&) {
    lanes_.clear();
    lane_steps_.clear();
    return OutOfMemory("CPU backend: out of host memory");
  }
  return Status::Ok();
}

}  // namespace llm::cpu
