// KV cache manager and scheduler tests with no model: prefix caching, copy on
// write, forks, eviction, and a randomized property test of the invariants.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <set>

#include "kv/kv_cache_manager.h"
#include "sched/scheduler.h"

namespace llm {
namespace {

std::unique_ptr<Sequence> Seq(std::vector<int32_t> tokens, uint64_t arrival = 0, uint64_t salt = 0) {
  auto s = std::make_unique<Sequence>();
  s->arrival = arrival;
  s->tokens = std::move(tokens);
  s->n_prompt = static_cast<int32_t>(s->tokens.size());
  s->cache_salt = salt;
  return s;
}

std::vector<int32_t> Range(int32_t n, int32_t base = 100) {
  std::vector<int32_t> v;
  for (int32_t i = 0; i < n; ++i) v.push_back(base + i);
  return v;
}

// Runs every pending token of `s` as the engine would.
void Compute(KvCacheManager& kv, Sequence* s) {
  std::vector<KvCopy> copies;
  ASSERT_TRUE(kv.AllocateSlots(s, s->n_pending(), 0, &copies));
  s->n_computed = static_cast<int32_t>(s->tokens.size());
  kv.CommitComputed(s);
}

TEST(KvCache, PrefixHitSharesFullBlocksOnly) {
  KvCacheManager kv(32, 4);
  auto a = Seq(Range(10));
  Compute(kv, a.get());
  EXPECT_EQ(a->block_hashes.size(), 2u);  // blocks 0,1 full; block 2 partial
  auto b = Seq(Range(10));
  EXPECT_EQ(kv.AttachCachedPrefix(b.get()), 8);
  EXPECT_EQ(b->block_table[0], a->block_table[0]);
  EXPECT_EQ(b->block_table[1], a->block_table[1]);
  EXPECT_EQ(kv.pool().ref_count(a->block_table[0]), 2);
  // A prompt that is exactly 8 tokens reuses only one block: the last token
  // must still be computed to get its logits.
  auto c = Seq(Range(8));
  EXPECT_EQ(kv.AttachCachedPrefix(c.get()), 4);
  // A different token in block 1 stops the match there.
  auto d_tokens = Range(10);
  d_tokens[5] = 7;
  auto d = Seq(d_tokens);
  EXPECT_EQ(kv.AttachCachedPrefix(d.get()), 4);
}

TEST(KvCache, SaltsPartitionTheCache) {
  KvCacheManager kv(32, 4);
  auto a = Seq(Range(12), 0, /*salt=*/1);
  Compute(kv, a.get());
  auto b = Seq(Range(12), 1, /*salt=*/2);
  EXPECT_EQ(kv.AttachCachedPrefix(b.get()), 0);
  auto c = Seq(Range(12), 2, /*salt=*/1);
  EXPECT_EQ(kv.AttachCachedPrefix(c.get()), 8);
}

TEST(KvCache, FreedBlocksStayCachedUntilEvictedTailFirst) {
  KvCacheManager kv(4, 4);
  auto a = Seq(Range(13));  // 3 full blocks + 1 partial: the whole pool
  Compute(kv, a.get());
  std::vector<int32_t> table = a->block_table;
  kv.Free(a.get());
  EXPECT_EQ(kv.pool().n_free(), 4);
  EXPECT_EQ(kv.pool().n_cached_free(), 3);
  // The next allocation takes the partial (uncached) tail, then full block 2.
  auto x = kv.pool().Allocate();
  EXPECT_EQ(*x, table[3]);
  auto y = kv.pool().Allocate();
  EXPECT_EQ(*y, table[2]);
  EXPECT_EQ(kv.pool().n_cached_free(), 2);
  // Blocks 0 and 1 are still found.
  auto b = Seq(Range(13));
  EXPECT_EQ(kv.AttachCachedPrefix(b.get()), 8);
}

TEST(KvCache, ForkSharesAndCopiesOnWrite) {
  KvCacheManager kv(16, 4);
  auto p = Seq(Range(6));
  Compute(kv, p.get());
  auto c = Seq(Range(6));
  kv.Fork(*p, c.get());
  EXPECT_EQ(c->n_computed, 6);
  EXPECT_EQ(kv.pool().ref_count(p->block_table[1]), 2);
  p->tokens.push_back(1);
  c->tokens.push_back(2);
  std::vector<KvCopy> copies;
  ASSERT_TRUE(kv.AllocateSlots(c.get(), 1, 0, &copies));
  ASSERT_EQ(copies.size(), 1u);  // the shared partial block 1 is copied
  EXPECT_EQ(copies[0].src, p->block_table[1]);
  EXPECT_EQ(copies[0].dst, c->block_table[1]);
  EXPECT_NE(c->block_table[1], p->block_table[1]);
  EXPECT_EQ(c->block_table[0], p->block_table[0]);  // full blocks stay shared
  copies.clear();
  ASSERT_TRUE(kv.AllocateSlots(p.get(), 1, 0, &copies));
  EXPECT_TRUE(copies.empty());  // the parent's block is its own again
}

// A fork shares only blocks that hold computed tokens: an empty block past
// them (reserved for lookahead slots) would be written by both sequences
// with no copy-on-write, which only looks at partially filled blocks.
TEST(KvCache, ForkLeavesEmptyLookaheadBlocksBehind) {
  KvCacheManager kv(16, 4);
  auto p = Seq(Range(8));
  std::vector<KvCopy> copies;
  ASSERT_TRUE(kv.AllocateSlots(p.get(), 8, /*n_lookahead=*/2, &copies));
  p->n_computed = 8;
  ASSERT_EQ(p->block_table.size(), 3u);
  auto c = Seq(Range(8));
  kv.Fork(*p, c.get());
  ASSERT_EQ(c->block_table.size(), 2u);
  EXPECT_EQ(kv.pool().ref_count(p->block_table[2]), 1);
  c->tokens.push_back(5);
  ASSERT_TRUE(kv.AllocateSlots(c.get(), 1, 0, &copies));
  EXPECT_NE(c->block_table[2], p->block_table[2]);
}

TEST(KvCache, AllocateSlotsIsAllOrNothing) {
  KvCacheManager kv(3, 4);
  auto a = Seq(Range(9));
  std::vector<KvCopy> copies;
  ASSERT_TRUE(kv.AllocateSlots(a.get(), 9, 0, &copies));
  auto b = Seq(Range(5, 900));
  EXPECT_FALSE(kv.AllocateSlots(b.get(), 5, 0, &copies));
  EXPECT_TRUE(b->block_table.empty());
  EXPECT_EQ(kv.pool().n_free(), 0);
  // Lookahead slots count too.
  kv.Free(a.get());
  a->n_computed = 0;
  EXPECT_FALSE(kv.AllocateSlots(a.get(), 9, 4, &copies));
  EXPECT_TRUE(kv.AllocateSlots(a.get(), 9, 3, &copies));
}

TEST(SchedulerKv, AdmissionUsesThePrefixCache) {
  KvCacheManager kv(64, 4);
  Scheduler sched({8, 512}, &kv);
  auto a = Seq(Range(20), 0);
  sched.Add(a.get());
  auto out = sched.Schedule();
  ASSERT_EQ(out.chunks.size(), 1u);
  a->n_computed += out.chunks[0].n_tokens;
  kv.CommitComputed(a.get());
  auto b = Seq(Range(18), 1);
  sched.Add(b.get());
  out = sched.Schedule();
  // a has nothing pending; b starts after 16 cached tokens.
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.chunks[0].seq, b.get());
  EXPECT_EQ(out.chunks[0].n_tokens, 2);
  EXPECT_EQ(b->n_cached_prompt, 16);
  EXPECT_EQ(kv.hit_tokens(), 16u);
}

TEST(SchedulerKv, ForkedSequenceGetsItsCopyInThePlan) {
  KvCacheManager kv(16, 4);
  Scheduler sched({8, 512}, &kv);
  auto p = Seq(Range(6), 0);
  sched.Add(p.get());
  auto out = sched.Schedule();
  p->n_computed += out.chunks[0].n_tokens;
  kv.CommitComputed(p.get());
  auto c = Seq(Range(6), 0);
  c->seq_index = 1;
  kv.Fork(*p, c.get());
  sched.AddRunning(c.get());
  p->tokens.push_back(1);
  c->tokens.push_back(2);
  out = sched.Schedule();
  ASSERT_EQ(out.chunks.size(), 2u);
  ASSERT_EQ(out.copies.size(), 1u);  // the first writer of the shared partial block copies it
  EXPECT_NE(p->block_table[1], c->block_table[1]);
  EXPECT_EQ(p->block_table[0], c->block_table[0]);
}

TEST(SchedulerKv, LowerPriorityIsPreemptedFirst) {
  KvCacheManager kv(4, 4);
  Scheduler sched({8, 512}, &kv);
  auto low = Seq(Range(8, 100), 0);
  low->priority = 0;
  auto high = Seq(Range(7, 500), 1);
  high->priority = 5;
  sched.Add(low.get());
  sched.Add(high.get());
  auto out = sched.Schedule();
  for (auto& ch : out.chunks) {
    ch.seq->n_computed += ch.n_tokens;
    ch.seq->tokens.push_back(9);
  }
  // high (arrived later, higher priority) needs a new block: low goes.
  high->tokens.push_back(9);
  out = sched.Schedule();
  ASSERT_EQ(out.preempted.size(), 1u);
  EXPECT_EQ(out.preempted[0], low.get());
  EXPECT_EQ(low->n_computed, 0);
  EXPECT_EQ(sched.n_waiting(), 1);
}

// ------------------------------------------------------------------------
// Randomized property test: allocate / append / fork / free / evict /
// preempt / cancel, with every invariant checked after every operation.

void CheckAll(const KvCacheManager& kv, const std::vector<std::unique_ptr<Sequence>>& live) {
  const BlockPool& pool = kv.pool();
  std::string why;
  ASSERT_TRUE(pool.CheckInvariants(&why)) << why;
  std::map<int32_t, int32_t> holders;
  for (const auto& s : live) {
    ASSERT_GE(static_cast<int32_t>(s->block_table.size()), pool.BlocksFor(s->n_computed));
    for (int32_t b : s->block_table) holders[b]++;
    // A sequence's full, hashed blocks hold its own tokens when cached.
    for (size_t i = 0; i < s->block_hashes.size(); ++i) {
      const int32_t b = s->block_table[i];
      if (pool.is_cached(b) && pool.hash_of(b) == s->block_hashes[i]) {
        auto toks = pool.cached_tokens(b);
        for (int32_t j = 0; j < pool.block_size(); ++j)
          ASSERT_EQ(toks[j], s->tokens[i * pool.block_size() + j]);
      }
    }
  }
  int32_t used = 0;
  for (int32_t b = 0; b < pool.n_blocks(); ++b) {
    const int32_t h = holders.count(b) ? holders[b] : 0;
    ASSERT_EQ(pool.ref_count(b), h) << "block " << b;  // ref count = tables holding it
    used += h > 0;
  }
  ASSERT_EQ(used, pool.n_used());
  // total = free (uncached) + used + cached
  ASSERT_EQ(pool.n_blocks(), (pool.n_free() - pool.n_cached_free()) + pool.n_used() + pool.n_cached_free());
}

TEST(KvCacheProperty, TenThousandRandomOperations) {
  std::mt19937 rng(12345);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  KvCacheManager kv(48, 4);
  std::vector<std::unique_ptr<Sequence>> live;
  // A few shared prefixes make cache hits common.
  std::vector<std::vector<int32_t>> stems = {Range(12, 1000), Range(9, 2000), Range(20, 3000)};
  int hits = 0, forks = 0, cows = 0, evictions_seen = 0, no_room = 0;
  for (int op = 0; op < 10000; ++op) {
    const int kind = pick(7);
    if (kind == 0 || live.empty()) {  // allocate: a new sequence (maybe sharing a stem), admitted
      std::vector<int32_t> t = stems[pick(3)];
      t.resize(1 + pick(static_cast<int>(t.size())));
      for (int i = pick(6); i > 0; --i) t.push_back(pick(50));
      auto s = Seq(t, op, pick(4) == 0 ? 7 : 0);
      const int32_t cached_before = kv.pool().n_cached_free();
      hits += kv.AttachCachedPrefix(s.get()) > 0;
      std::vector<KvCopy> copies;
      if (kv.AllocateSlots(s.get(), s->n_pending(), pick(3), &copies)) {
        s->n_computed = static_cast<int32_t>(s->tokens.size());
        kv.CommitComputed(s.get());
        evictions_seen += kv.pool().n_cached_free() < cached_before;
        live.push_back(std::move(s));
      } else {
        kv.Free(s.get());
        ++no_room;
      }
    } else if (kind == 1) {  // append: decode a few tokens
      Sequence* s = live[pick(static_cast<int>(live.size()))].get();
      const int n = 1 + pick(5);
      for (int i = 0; i < n; ++i) s->tokens.push_back(pick(50));
      std::vector<KvCopy> copies;
      if (kv.AllocateSlots(s, n, pick(2), &copies)) {
        cows += static_cast<int>(copies.size());
        s->n_computed += n;
        kv.CommitComputed(s);
      } else {
        s->tokens.resize(s->tokens.size() - n);
        ++no_room;
      }
    } else if (kind == 2) {  // fork
      Sequence* p = live[pick(static_cast<int>(live.size()))].get();
      auto c = Seq(p->tokens, op, p->cache_salt);
      c->tokens.resize(p->n_computed);
      kv.Fork(*p, c.get());
      live.push_back(std::move(c));
      ++forks;
    } else if (kind == 3 || kind == 4) {  // free (finish) or cancel
      const int i = pick(static_cast<int>(live.size()));
      kv.Free(live[i].get());
      live.erase(live.begin() + i);
    } else if (kind == 5) {  // preempt: free and recompute from the cache later
      Sequence* s = live[pick(static_cast<int>(live.size()))].get();
      kv.Free(s);
      s->n_computed = 0;
      kv.AttachCachedPrefix(s);
      std::vector<KvCopy> copies;
      if (kv.AllocateSlots(s, s->n_pending(), 0, &copies)) {
        s->n_computed = static_cast<int32_t>(s->tokens.size());
        kv.CommitComputed(s);
      } else {
        kv.Free(s);
        s->n_computed = 0;
        // Not runnable: drop it, as a cancel would.
        for (size_t i = 0; i < live.size(); ++i) {
          if (live[i].get() == s) {
            live.erase(live.begin() + static_cast<long>(i));
            break;
          }
        }
      }
    } else {  // evict pressure: grab and return raw blocks
      std::vector<int32_t> grabbed;
      for (int i = pick(8); i > 0; --i) {
        auto b = kv.pool().Allocate();
        if (!b) break;
        grabbed.push_back(*b);
      }
      for (int32_t b : grabbed) kv.pool().Release(b);
    }
    CheckAll(kv, live);
    if (HasFatalFailure()) {
      FAIL() << "invariant broken after operation " << op << " (kind " << kind << ")";
    }
  }
  EXPECT_GT(hits, 100);
  EXPECT_GT(forks, 100);
  EXPECT_GT(cows, 10);
  EXPECT_GT(no_room, 10);
  EXPECT_GT(evictions_seen, 10);
}

}  // namespace
}  // namespace llm
