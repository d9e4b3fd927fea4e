// Scheduler and block pool tests: no model, no backend.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "kv/block_pool.h"
#include "kv/kv_cache_manager.h"
#include "sched/scheduler.h"

namespace llm {
namespace {

std::unique_ptr<Sequence> MakeSeq(int32_t n_prompt, uint64_t arrival, int32_t priority = 0) {
  auto s = std::make_unique<Sequence>();
  s->request_id = arrival + 1;
  s->arrival = arrival;
  s->priority = priority;
  for (int32_t i = 0; i < n_prompt; ++i) s->tokens.push_back(static_cast<int32_t>(arrival * 1000 + i));
  s->n_prompt = n_prompt;
  return s;
}

// Runs a step the way the engine does: advance n_computed, then "sample"
// (append a token) for every sequence whose chunk reached its end.
void Advance(const SchedulerOutput& out, KvCacheManager* kv = nullptr) {
  for (const auto& c : out.chunks) {
    c.seq->n_computed += c.n_tokens;
    if (kv) kv->CommitComputed(c.seq);
    if (c.seq->n_computed == static_cast<int32_t>(c.seq->tokens.size())) c.seq->tokens.push_back(9);
  }
}

TEST(BlockPool, AllocateReleaseAndRefCounts) {
  BlockPool pool(4, 16);
  EXPECT_EQ(pool.BlocksFor(0), 0);
  EXPECT_EQ(pool.BlocksFor(1), 1);
  EXPECT_EQ(pool.BlocksFor(16), 1);
  EXPECT_EQ(pool.BlocksFor(17), 2);
  std::vector<int32_t> t;
  ASSERT_TRUE(pool.EnsureCapacity(&t, 33));
  EXPECT_EQ(t.size(), 3u);
  EXPECT_EQ(pool.n_free(), 1);
  std::vector<int32_t> t2;
  EXPECT_FALSE(pool.EnsureCapacity(&t2, 40));  // all or nothing
  EXPECT_TRUE(t2.empty());
  EXPECT_EQ(pool.n_free(), 1);
  pool.AddRef(t[0]);
  pool.ReleaseAll(&t);
  EXPECT_EQ(pool.n_free(), 3);  // t[0] still referenced once
  pool.Release(0);
  EXPECT_EQ(pool.n_free(), 4);
}

TEST(Scheduler, ChunkedPrefillRespectsTokenBudget) {
  KvCacheManager kv(64, 16);
  BlockPool& pool = kv.pool();
  Scheduler sched({/*max_seqs=*/4, /*max_batch_tokens=*/32}, &kv);
  auto a = MakeSeq(50, 0);
  sched.Add(a.get());
  auto out = sched.Schedule();
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.chunks[0].n_tokens, 32);
  EXPECT_EQ(a->block_table.size(), 2u);
  Advance(out);
  out = sched.Schedule();
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.chunks[0].n_tokens, 18);
  Advance(out);
  EXPECT_EQ(a->tokens.size(), 51u);  // sampled after the last chunk
  out = sched.Schedule();
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.chunks[0].n_tokens, 1);  // decode
}

TEST(Scheduler, RunningDecodesComeFirstThenAdmission) {
  KvCacheManager kv(64, 16);
  BlockPool& pool = kv.pool();
  Scheduler sched({4, 20}, &kv);
  auto a = MakeSeq(10, 0);
  sched.Add(a.get());
  Advance(sched.Schedule());  // a prefilled, now decoding
  auto b = MakeSeq(40, 1);
  sched.Add(b.get());
  auto out = sched.Schedule();
  ASSERT_EQ(out.chunks.size(), 2u);
  EXPECT_EQ(out.chunks[0].seq, a.get());
  EXPECT_EQ(out.chunks[0].n_tokens, 1);
  EXPECT_EQ(out.chunks[1].seq, b.get());
  EXPECT_EQ(out.chunks[1].n_tokens, 19);  // the rest of the budget
  EXPECT_EQ(out.n_tokens, 20);
}

TEST(Scheduler, SequenceLimit) {
  KvCacheManager kv(64, 16);
  BlockPool& pool = kv.pool();
  Scheduler sched({2, 512}, &kv);
  auto a = MakeSeq(4, 0), b = MakeSeq(4, 1), c = MakeSeq(4, 2);
  sched.Add(c.get());
  sched.Add(a.get());
  sched.Add(b.get());
  auto out = sched.Schedule();
  ASSERT_EQ(out.chunks.size(), 2u);
  EXPECT_EQ(out.chunks[0].seq, a.get());  // arrival order, not Add order
  EXPECT_EQ(out.chunks[1].seq, b.get());
  EXPECT_EQ(sched.n_waiting(), 1);
}

TEST(Scheduler, PriorityAdmitsFirst) {
  KvCacheManager kv(64, 16);
  BlockPool& pool = kv.pool();
  Scheduler sched({1, 512}, &kv);
  auto low = MakeSeq(4, 0, 0), high = MakeSeq(4, 1, 5);
  sched.Add(low.get());
  sched.Add(high.get());
  auto out = sched.Schedule();
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.chunks[0].seq, high.get());
}

TEST(Scheduler, PreemptsLatestWhenBlocksRunOut) {
  // 4 blocks of 4 tokens. Two sequences of 8 tokens fill the pool; the first
  // one's next decode token needs a fifth block, so the later one is preempted.
  KvCacheManager kv(4, 4);
  BlockPool& pool = kv.pool();
  Scheduler sched({4, 512}, &kv);
  auto a = MakeSeq(8, 0), b = MakeSeq(7, 1);
  sched.Add(a.get());
  sched.Add(b.get());
  Advance(sched.Schedule());
  EXPECT_EQ(pool.n_free(), 0);
  // a: 9 tokens, 8 computed -> needs block 3; b: 8 tokens, 7 computed -> fits.
  auto out = sched.Schedule();
  ASSERT_EQ(out.preempted.size(), 1u);
  EXPECT_EQ(out.preempted[0], b.get());
  EXPECT_EQ(b->n_computed, 0);
  EXPECT_TRUE(b->block_table.empty());
  EXPECT_EQ(b->n_preemptions, 1);
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.chunks[0].seq, a.get());
  Advance(out);
  // Once a finishes, b comes back and recomputes prompt + generated tokens.
  sched.Remove(a.get());
  out = sched.Schedule();
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.chunks[0].seq, b.get());
  EXPECT_EQ(out.chunks[0].n_tokens, 8);
}

// The same squeeze with a swap space: b's K/V go to host slots instead of
// being dropped, and b resumes with its one pending token, no recompute.
TEST(Scheduler, SwapPreemptionResumesWithoutRecompute) {
  KvCacheManager kv(4, 4, /*n_swap_slots=*/8);
  BlockPool& pool = kv.pool();
  Scheduler sched({4, 512}, &kv);
  auto a = MakeSeq(8, 0), b = MakeSeq(7, 1);
  sched.Add(a.get());
  sched.Add(b.get());
  Advance(sched.Schedule(), &kv);
  auto out = sched.Schedule();
  ASSERT_EQ(out.preempted.size(), 1u);
  EXPECT_EQ(out.preempted[0], b.get());
  EXPECT_TRUE(b->swapped);
  EXPECT_EQ(b->n_computed, 7);  // kept: the K/V are in the swap space
  EXPECT_TRUE(b->block_table.empty());
  EXPECT_EQ(b->n_preemptions, 1);
  EXPECT_EQ(out.swap_outs.size(), 2u);  // one full (private) block, one partial
  EXPECT_EQ(kv.n_swap_free(), 6);
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.chunks[0].seq, a.get());
  Advance(out, &kv);
  sched.Remove(a.get());
  EXPECT_EQ(pool.n_used(), 0);
  out = sched.Schedule();
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.chunks[0].seq, b.get());
  EXPECT_EQ(out.chunks[0].n_tokens, 1);  // only the pending token: no re-prefill
  ASSERT_EQ(out.swapped_in.size(), 1u);
  EXPECT_FALSE(b->swapped);
  EXPECT_EQ(b->n_computed, 7);
  EXPECT_EQ(b->block_table.size(), 2u);
  // b's full block 0 was still in the prefix cache: taken back, not copied.
  ASSERT_EQ(out.swap_ins.size(), 1u);
  EXPECT_EQ(out.swap_ins[0].block, b->block_table[1]);
  EXPECT_EQ(kv.n_swap_free(), 8);
  EXPECT_EQ(sched.n_running(), 1);
}

TEST(Scheduler, FullSwapSpaceFallsBackToRecompute) {
  KvCacheManager kv(4, 4, /*n_swap_slots=*/1);
  Scheduler sched({4, 512}, &kv);
  auto a = MakeSeq(8, 0), b = MakeSeq(7, 1);
  sched.Add(a.get());
  sched.Add(b.get());
  Advance(sched.Schedule(), &kv);
  auto out = sched.Schedule();  // b needs 2 slots, there is 1
  ASSERT_EQ(out.preempted.size(), 1u);
  EXPECT_FALSE(b->swapped);
  EXPECT_EQ(b->n_computed, 0);
  EXPECT_TRUE(out.swap_outs.empty());
  EXPECT_EQ(kv.n_swap_free(), 1);
  EXPECT_EQ(b->n_preemptions, 1);
}

TEST(Scheduler, RemovingASwappedOutSequenceFreesItsSlots) {
  KvCacheManager kv(4, 4, /*n_swap_slots=*/8);
  Scheduler sched({4, 512}, &kv);
  auto a = MakeSeq(8, 0), b = MakeSeq(7, 1);
  sched.Add(a.get());
  sched.Add(b.get());
  Advance(sched.Schedule(), &kv);
  Advance(sched.Schedule(), &kv);
  ASSERT_TRUE(b->swapped);
  EXPECT_EQ(kv.n_swap_free(), 6);
  sched.Remove(b.get());  // cancelled while swapped out
  EXPECT_FALSE(b->swapped);
  EXPECT_TRUE(b->swap_slots.empty());
  EXPECT_EQ(kv.n_swap_free(), 8);
  EXPECT_EQ(sched.n_waiting(), 0);
  sched.Remove(a.get());
  EXPECT_TRUE(sched.idle());
  EXPECT_EQ(kv.pool().n_used(), 0);
}

TEST(Scheduler, LoneSequenceThatCannotGrowIsReported) {
  KvCacheManager kv(2, 4);
  BlockPool& pool = kv.pool();
  Scheduler sched({4, 512}, &kv);
  auto a = MakeSeq(8, 0);
  sched.Add(a.get());
  Advance(sched.Schedule());
  auto out = sched.Schedule();  // 9th token needs a third block
  EXPECT_TRUE(out.chunks.empty());
  ASSERT_EQ(out.no_room.size(), 1u);
  EXPECT_EQ(out.no_room[0], a.get());
  sched.Remove(a.get());
  EXPECT_EQ(pool.n_free(), 2);
  EXPECT_TRUE(sched.idle());
}

TEST(Scheduler, RemoveReleasesBlocks) {
  KvCacheManager kv(8, 4);
  BlockPool& pool = kv.pool();
  Scheduler sched({4, 512}, &kv);
  auto a = MakeSeq(10, 0);
  sched.Add(a.get());
  Advance(sched.Schedule());
  EXPECT_EQ(pool.n_free(), 5);
  sched.Remove(a.get());
  EXPECT_EQ(pool.n_free(), 8);
  EXPECT_TRUE(sched.idle());
}

// An image's span (its tokens attend to each other both ways) runs whole in
// the step that ends it: a chunk that would end inside it stops before it,
// and the span waits for a step whose budget holds it.
TEST(Scheduler, ChunksNeverEndInsideAnImageSpan) {
  KvCacheManager kv(64, 16);
  Scheduler sched({/*max_seqs=*/4, /*max_batch_tokens=*/20}, &kv);
  auto a = MakeSeq(60, 0);
  a->image_spans.push_back({10, 16, 0xABCDull});  // positions [10, 26)
  a->image_spans.push_back({30, 16, 0xABCDull});  // positions [30, 46)
  sched.Add(a.get());
  std::vector<int32_t> chunks;
  for (int step = 0; step < 10 && a->n_computed < a->n_prompt; ++step) {
    auto out = sched.Schedule();
    ASSERT_EQ(out.chunks.size(), 1u);
    const int32_t begin = a->n_computed, end = begin + out.chunks[0].n_tokens;
    for (const ImageSpan& im : a->image_spans) {
      EXPECT_FALSE(end > im.first && end < im.first + im.n) << "chunk [" << begin << ", " << end << ") ends inside";
    }
    chunks.push_back(out.chunks[0].n_tokens);
    Advance(out);
  }
  // [0, 10) text, stopping short of the first image; [10, 30) the image
  // and text up to the second; [30, 50) the second image and text; the rest
  EXPECT_EQ(chunks, (std::vector<int32_t>{10, 20, 20, 10}));

  // A second sequence whose span does not fit beside the first one's
  // decode waits without losing its place, then runs it whole.
  KvCacheManager kv2(64, 16);
  Scheduler s2({/*max_seqs=*/4, /*max_batch_tokens=*/16}, &kv2);
  auto b = MakeSeq(4, 0);
  auto c = MakeSeq(20, 1);
  c->image_spans.push_back({0, 16, 7});
  s2.Add(b.get());
  s2.Add(c.get());
  auto out = s2.Schedule();  // b's prompt (4) leaves 12: too few for c's span
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.chunks[0].seq, b.get());
  EXPECT_TRUE(c->block_table.empty());  // its attach was undone
  Advance(out);
  out = s2.Schedule();  // b decodes (1), c still waits (15 < 16)
  ASSERT_EQ(out.chunks.size(), 1u);
  Advance(out);
  s2.Remove(b.get());
  out = s2.Schedule();
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.chunks[0].seq, c.get());
  EXPECT_EQ(out.chunks[0].n_tokens, 16);

  // Starting inside a span (its first blocks came from the prefix cache,
  // computed whole) runs on to the span's end.
  KvCacheManager kv3(64, 16);
  Scheduler s3({/*max_seqs=*/4, /*max_batch_tokens=*/8}, &kv3);
  auto d = MakeSeq(40, 0);
  d->image_spans.push_back({12, 16, 9});
  d->n_computed = 20;  // as if the cache held [0, 20)
  std::vector<KvCopy> copies;
  ASSERT_TRUE(kv3.AllocateSlots(d.get(), 0, 0, &copies));
  s3.AddRunning(d.get());
  out = s3.Schedule();
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.chunks[0].n_tokens, 8);  // [20, 28): ends at the span's end
}

}  // namespace
}  // namespace llm
