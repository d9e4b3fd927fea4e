#include "sched/scheduler.h"

#include <algorithm>

namespace llm {

namespace {
void InsertOrdered(std::vector<Sequence*>* list, Sequence* seq) {
  list->insert(std::upper_bound(list->begin(), list->end(), seq, RunsBefore), seq);
}
void Erase(std::vector<Sequence*>* list, Sequence* seq) {
  list->erase(std::remove(list->begin(), list->end(), seq), list->end());
}

// The tokens `seq` runs this step, at most `budget`: its pending ones, cut
// back so the chunk does not end inside an image span. A span's tokens
// attend to each other both ways, so the step that ends a span holds every
// one of its tokens not yet in the cache (a chunk may start inside one: the
// cached part was computed whole, with the same image). 0: the span it
// stands at does not fit in `budget` this step (Engine::Submit keeps every
// span within max_batch_tokens, so a step's first sequence always fits).
//
//   n_computed          span [first, first + n)
//        v              v                  v
//   ... t t t t t t t t i i i i i i i i i i t t t
//        |<-- k -->|                            chunk ends before the span, or
//        |<------------------- k ------------->|  after it, never inside
int32_t ChunkTokens(const Sequence* seq, int32_t budget) {
  const int32_t k = std::min(seq->n_pending(), budget);
  const int32_t end = seq->n_computed + k;
  for (const ImageSpan& im : seq->image_spans) {
    if (im.first >= end) break;
    if (end > im.first && end < im.first + im.n) return im.first > seq->n_computed ? im.first - seq->n_computed : 0;
  }
  return k;
}
}  // namespace

Scheduler::Scheduler(const SchedulerConfig& config, KvCacheManager* kv) : config_(config), kv_(kv) {}

void Scheduler::Add(Sequence* seq) {
  seq->state = SeqState::kWaiting;
  InsertOrdered(&waiting_, seq);
}

void Scheduler::AddRunning(Sequence* seq) {
  seq->state = SeqState::kRunning;
  InsertOrdered(&running_, seq);
}

void Scheduler::Remove(Sequence* seq) {
  Erase(&running_, seq);
  Erase(&waiting_, seq);
  kv_->Free(seq);
  seq->state = SeqState::kFinished;
}

void Scheduler::Preempt(Sequence* seq, SchedulerOutput* out) {
  Erase(&running_, seq);
  if (!kv_->SwapOut(seq, &out->swap_outs)) {
    kv_->Free(seq);
    seq->n_computed = 0;  // recompute prompt + generated tokens when readmitted
  }
  seq->draft_computed = 0;  // the draft model's cache is never swapped
  seq->n_preemptions++;
  seq->state = SeqState::kWaiting;
  InsertOrdered(&waiting_, seq);
  out->preempted.push_back(seq);
}

SchedulerOutput Scheduler::Schedule() {
  SchedulerOutput out;
  int32_t budget = config_.max_batch_tokens;

  // 1. Running sequences, highest priority first. A sequence that needs a
  //    block the pool lacks takes it from the lowest-priority, latest running
  //    sequence; if that is itself, it steps back to the waiting queue.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* seq = running_[i];
    int32_t k = ChunkTokens(seq, budget);
    if (k <= 0) {
      ++i;
      continue;
    }
    bool scheduled = false;
    int32_t lookahead = 0;
    if (k == seq->n_pending() && seq->spec_k > 0) {
      const int32_t want = std::min(seq->spec_k, budget - k);
      if (want > 0 && kv_->AllocateSlots(seq, k, want, &out.copies)) {
        scheduled = true;
        lookahead = want;
      }
    }
    while (!scheduled) {
      if (kv_->AllocateSlots(seq, k, 0, &out.copies)) {
        scheduled = true;
        break;
      }
      Sequence* victim = running_.back();
      if (victim == seq) {
        if (running_.size() == 1) {
          // Alone in the pool and still no room: it can never grow.
          Erase(&running_, seq);
          out.no_room.push_back(seq);
        } else {
          Preempt(seq, &out);
        }
        break;
      }
      Preempt(victim, &out);
    }
    if (!scheduled) continue;  // running_[i] is now the next sequence
    out.chunks.push_back({seq, k, lookahead});
    out.n_tokens += k + lookahead;
    budget -= k + lookahead;
    ++i;
  }

  // 2. Admit waiting sequences in order while budget, slots and blocks last.
  //    A preempted sequence is not readmitted in the step that preempted it.
  while (!waiting_.empty() && budget > 0 &&
         static_cast<int32_t>(running_.size()) < config_.max_seqs) {
    Sequence* seq = waiting_.front();
    if (std::find(out.preempted.begin(), out.preempted.end(), seq) != out.preempted.end()) break;
    if (seq->swapped) {
      const int32_t k = ChunkTokens(seq, budget);
      if (k <= 0) break;  // it keeps its place
      const auto r = kv_->SwapIn(seq, k, &out.swap_ins);
      if (r == KvCacheManager::SwapInResult::kNoRoom) break;  // it keeps its place
      if (r == KvCacheManager::SwapInResult::kOk) {
        waiting_.erase(waiting_.begin());
        seq->state = SeqState::kRunning;
        InsertOrdered(&running_, seq);
        out.swapped_in.push_back(seq);
        out.chunks.push_back({seq, k, 0});
        out.n_tokens += k;
        budget -= k;
        continue;
      }
      // kLost: a block it left in the prefix cache is gone; it recomputes.
    }
    const int32_t cached = kv_->AttachCachedPrefix(seq);
    int32_t k = ChunkTokens(seq, budget);
    if (k <= 0 || !kv_->AllocateSlots(seq, k, 0, &out.copies)) {
      kv_->Free(seq);  // undo the attach; try again next step
      seq->n_computed = 0;
      break;
    }
    kv_->RecordQuery(static_cast<int32_t>(seq->tokens.size()), cached);
    if (seq->n_cached_prompt < 0) seq->n_cached_prompt = std::min(cached, seq->n_prompt);
    waiting_.erase(waiting_.begin());
    seq->state = SeqState::kRunning;
    InsertOrdered(&running_, seq);
    out.chunks.push_back({seq, k, 0});
    out.n_tokens += k;
    budget -= k;
  }
  return out;
}

}  // namespace llm
