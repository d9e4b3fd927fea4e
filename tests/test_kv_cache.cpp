// KV cache manager and scheduler tests with no model: prefix caching, copy on
// write, forks, eviction, and a randomized property test of the invariants.
#include <gtest/gtest.h>

#include <algorithm>
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

// ---- keep_kv: the protected end of the eviction order

TEST(KvCache, KeptBlocksAreEvictedAfterEveryOtherBlock) {
  KvCacheManager kv(8, 4);
  auto kept = Seq(Range(12));
  kept->keep_kv = true;
  Compute(kv, kept.get());  // 3 blocks
  auto other = Seq(Range(8, 500));
  Compute(kv, other.get());  // 2 blocks, freed after the kept ones
  kv.Free(kept.get());
  kv.Free(other.get());
  EXPECT_EQ(kv.pool().n_protected_free(), 3);
  std::string why;
  ASSERT_TRUE(kv.pool().CheckInvariants(&why)) << why;
  // 5 allocations take the 3 never-used blocks and `other`'s 2, not the kept ones.
  std::vector<int32_t> taken;
  for (int i = 0; i < 5; ++i) taken.push_back(*kv.pool().Allocate());
  auto again = Seq(Range(12));
  EXPECT_EQ(kv.AttachCachedPrefix(again.get()), 8) << "a kept block was evicted before unprotected ones";
  kv.Free(again.get());
  // Only when nothing else is left do the protected blocks go (tail first).
  EXPECT_TRUE(kv.pool().Allocate().has_value());
  EXPECT_EQ(kv.pool().n_protected_free(), 2);
  ASSERT_TRUE(kv.pool().CheckInvariants(&why)) << why;
  for (int32_t b : taken) kv.pool().Release(b);
  ASSERT_TRUE(kv.pool().CheckInvariants(&why)) << why;
}

// ---- the tier hook: what an evicted cached block offers, and restores

struct FakeTier : KvTierHook {
  std::vector<BlockHash> evicted;
  std::map<BlockHash, std::vector<int32_t>> held;  // hash -> tokens
  std::vector<int32_t> written;
  void OnEvict(const EvictedBlock& b) override {
    evicted.push_back(b.hash);
    held[b.hash].assign(b.tokens.begin(), b.tokens.end());
  }
  bool Stage(BlockHash hash, BlockHash, uint64_t, std::span<const int32_t> tokens) override {
    auto it = held.find(hash);
    return it != held.end() && std::equal(tokens.begin(), tokens.end(), it->second.begin(), it->second.end());
  }
  bool WriteStaged(int32_t block) override {
    written.push_back(block);
    return true;
  }
};

TEST(KvCache, EvictedBlocksGoToTheTierAndComeBack) {
  KvCacheManager kv(4, 4);
  FakeTier tier;
  kv.set_tier(&tier);
  auto a = Seq(Range(13));
  Compute(kv, a.get());
  kv.Free(a.get());
  for (int i = 0; i < 4; ++i) kv.pool().Allocate();  // evicts all 3 cached blocks
  EXPECT_EQ(tier.evicted.size(), 3u);
  for (int b = 0; b < 4; ++b) kv.pool().Release(b);
  auto b = Seq(Range(13));
  EXPECT_EQ(kv.AttachCachedPrefix(b.get()), 12) << "the tier's blocks were not restored";
  EXPECT_EQ(tier.written.size(), 3u);
  EXPECT_EQ(kv.tier_restored_blocks(), 3u);
  std::string why;
  EXPECT_TRUE(kv.pool().CheckInvariants(&why)) << why;
}

TEST(KvCache, PendingBlocksAreNotOfferedToTheTier) {
  // A block registered before the copy that fills it (a swap-in) holds
  // nothing yet: evicted in that state, it must not reach a tier.
  KvCacheManager kv(2, 4);
  FakeTier tier;
  kv.set_tier(&tier);
  auto a = Seq(Range(5));
  Compute(kv, a.get());
  const int32_t b0 = a->block_table[0];
  kv.pool().MarkPending(b0);
  kv.Free(a.get());
  kv.pool().Allocate();
  kv.pool().Allocate();
  EXPECT_TRUE(tier.evicted.empty());
  kv.pool().ClearPending();
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

// ---- swapping

using SwapIn = KvCacheManager::SwapInResult;

// Takes every free block (evicting every cached one) and gives them back.
void EvictAll(KvCacheManager& kv) {
  std::vector<int32_t> grabbed;
  while (auto b = kv.pool().Allocate()) grabbed.push_back(*b);
  for (int32_t b : grabbed) kv.pool().Release(b);
}

TEST(KvCache, SwapOutCopiesPrivateBlocksAndFreesThemAll) {
  KvCacheManager kv(8, 4, /*n_swap_slots=*/4);
  auto a = Seq(Range(10));
  Compute(kv, a.get());
  std::vector<int32_t> table = a->block_table;
  std::vector<KvSwap> outs;
  ASSERT_TRUE(kv.SwapOut(a.get(), &outs));
  ASSERT_EQ(outs.size(), 3u);  // two full blocks and the partial one
  for (int i = 0; i < 3; ++i) EXPECT_EQ(outs[i].block, table[i]);
  EXPECT_TRUE(a->swapped);
  EXPECT_TRUE(a->block_table.empty());
  EXPECT_EQ(a->n_computed, 10);
  EXPECT_EQ(kv.pool().n_used(), 0);
  EXPECT_EQ(kv.n_swap_free(), 1);
  EXPECT_EQ(kv.swapped_out_blocks(), 3u);
  // Nothing cached survives: every block comes back by copy.
  EvictAll(kv);
  std::vector<KvSwap> ins;
  ASSERT_EQ(kv.SwapIn(a.get(), 1, &ins), SwapIn::kOk);
  ASSERT_EQ(ins.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(ins[i].block, a->block_table[i]);
    EXPECT_EQ(ins[i].slot, outs[i].slot);
  }
  EXPECT_FALSE(a->swapped);
  EXPECT_EQ(a->n_computed, 10);
  EXPECT_EQ(kv.n_swap_free(), 4);
  // Copied-back full blocks are in the prefix cache again.
  auto b = Seq(Range(10));
  EXPECT_EQ(kv.AttachCachedPrefix(b.get()), 8);
  EXPECT_EQ(b->block_table[0], a->block_table[0]);
}

TEST(KvCache, SwapInGrowsForThePendingTokensAllOrNothing) {
  KvCacheManager kv(4, 4, /*n_swap_slots=*/4);
  auto a = Seq(Range(8));
  Compute(kv, a.get());
  std::vector<KvSwap> outs, ins;
  ASSERT_TRUE(kv.SwapOut(a.get(), &outs));
  EvictAll(kv);
  std::vector<int32_t> held;
  for (int i = 0; i < 2; ++i) held.push_back(*kv.pool().Allocate());
  // 2 blocks to copy back + 1 for token 9: 3 > 2 free.
  EXPECT_EQ(kv.SwapIn(a.get(), 1, &ins), SwapIn::kNoRoom);
  EXPECT_TRUE(ins.empty());
  EXPECT_TRUE(a->swapped);
  EXPECT_EQ(kv.n_swap_free(), 2);
  kv.pool().Release(held.back());
  ASSERT_EQ(kv.SwapIn(a.get(), 1, &ins), SwapIn::kOk);
  EXPECT_EQ(a->block_table.size(), 3u);
  EXPECT_EQ(ins.size(), 2u);
}

TEST(KvCache, SharedCachedBlocksStayAndAreTakenBack) {
  KvCacheManager kv(16, 4, /*n_swap_slots=*/8);
  auto a = Seq(Range(10));
  Compute(kv, a.get());
  auto b = Seq(Range(14));
  ASSERT_EQ(kv.AttachCachedPrefix(b.get()), 8);
  Compute(kv, b.get());  // blocks 0-1 shared with a, 2 full and 3 partial its own
  const std::vector<int32_t> table = b->block_table;
  std::vector<KvSwap> outs;
  ASSERT_TRUE(kv.SwapOut(b.get(), &outs));
  ASSERT_EQ(outs.size(), 2u);  // the shared blocks are not copied
  EXPECT_EQ(outs[0].block, table[2]);
  EXPECT_EQ(outs[1].block, table[3]);
  EXPECT_EQ(b->swap_slots[0], -1);
  EXPECT_EQ(b->swap_slots[1], -1);
  EXPECT_EQ(kv.pool().ref_count(table[0]), 1);  // b's reference dropped
  EvictAll(kv);  // a keeps blocks 0-1 alive
  std::vector<KvSwap> ins;
  ASSERT_EQ(kv.SwapIn(b.get(), 1, &ins), SwapIn::kOk);
  EXPECT_EQ(b->block_table[0], table[0]);
  EXPECT_EQ(b->block_table[1], table[1]);
  EXPECT_EQ(kv.pool().ref_count(table[0]), 2);
  EXPECT_EQ(ins.size(), 2u);
}

TEST(KvCache, LostSharedBlockMeansRecompute) {
  KvCacheManager kv(16, 4, /*n_swap_slots=*/8);
  auto a = Seq(Range(10));
  Compute(kv, a.get());
  auto b = Seq(Range(14));
  kv.AttachCachedPrefix(b.get());
  Compute(kv, b.get());
  std::vector<KvSwap> outs, ins;
  ASSERT_TRUE(kv.SwapOut(b.get(), &outs));
  kv.Free(a.get());
  EvictAll(kv);  // now nobody keeps blocks 0-1: their K/V are gone
  EXPECT_EQ(kv.SwapIn(b.get(), 1, &ins), SwapIn::kLost);
  EXPECT_TRUE(ins.empty());
  EXPECT_FALSE(b->swapped);
  EXPECT_EQ(b->n_computed, 0);
  EXPECT_TRUE(b->block_hashes.empty());
  EXPECT_EQ(kv.n_swap_free(), 8);
  EXPECT_EQ(kv.pool().n_used(), 0);
}

TEST(KvCache, ForkSharedPartialBlockIsCopied) {
  KvCacheManager kv(16, 4, /*n_swap_slots=*/8);
  auto p = Seq(Range(6));
  Compute(kv, p.get());
  auto c = Seq(Range(6));
  kv.Fork(*p, c.get());
  std::vector<KvSwap> outs;
  ASSERT_TRUE(kv.SwapOut(c.get(), &outs));
  // Block 0 is full, cached and shared: left. Block 1 is shared but partial
  // (not in the cache, and the parent writes it next): copied.
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].block, p->block_table[1]);
  EXPECT_EQ(kv.pool().ref_count(p->block_table[1]), 1);
}

TEST(KvCache, SwapOutDeclinesWithoutRoomAndFreeGivesSlotsBack) {
  KvCacheManager kv(8, 4, /*n_swap_slots=*/2);
  auto a = Seq(Range(10));
  Compute(kv, a.get());
  std::vector<KvSwap> outs;
  EXPECT_FALSE(kv.SwapOut(a.get(), &outs));  // 3 blocks, 2 slots
  EXPECT_TRUE(outs.empty());
  EXPECT_FALSE(a->swapped);
  EXPECT_EQ(a->block_table.size(), 3u);
  auto b = Seq(Range(5, 900));
  Compute(kv, b.get());
  ASSERT_TRUE(kv.SwapOut(b.get(), &outs));
  EXPECT_EQ(kv.n_swap_free(), 0);
  kv.Free(b.get());  // cancelled while swapped out
  EXPECT_EQ(kv.n_swap_free(), 2);
  EXPECT_FALSE(b->swapped);
  KvCacheManager no_swap(8, 4);
  auto c = Seq(Range(3));
  Compute(no_swap, c.get());
  EXPECT_FALSE(no_swap.SwapOut(c.get(), &outs));
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
// preempt / cancel / swap out / swap in, with every invariant checked after
// every operation.
//
// A model of the KV memory checks what the bookkeeping promises: each pool
// block and swap slot holds the token ids "computed" into it (-1: garbage),
// copies and swaps move them as the backend would, and after every operation
// every running sequence's computed positions read back its own tokens.

struct KvModel {
  KvModel(int32_t n_blocks, int32_t n_slots, int32_t bs)
      : bs(bs), pool(n_blocks, std::vector<int32_t>(bs, -1)), swap(n_slots, std::vector<int32_t>(bs, -1)) {}
  void Copies(const std::vector<KvCopy>& copies) {
    for (const KvCopy& c : copies) pool[c.dst] = pool[c.src];
  }
  void Out(const std::vector<KvSwap>& outs) {
    for (const KvSwap& m : outs) swap[m.slot] = pool[m.block];
  }
  void In(const std::vector<KvSwap>& ins) {
    for (const KvSwap& m : ins) pool[m.block] = swap[m.slot];
  }
  // Positions [from, to) of `s` computed: their K/V land in its blocks.
  void Write(const Sequence& s, int32_t from, int32_t to) {
    for (int32_t p = from; p < to; ++p) pool[s.block_table[p / bs]][p % bs] = s.tokens[p];
  }
  void Garbage(int32_t block) { pool[block].assign(bs, -1); }
  int32_t bs;
  std::vector<std::vector<int32_t>> pool;  // (n_blocks, bs)
  std::vector<std::vector<int32_t>> swap;  // (n_slots, bs)
};

void CheckAll(const KvCacheManager& kv, const KvModel& mem, const std::vector<std::unique_ptr<Sequence>>& live) {
  const BlockPool& pool = kv.pool();
  std::string why;
  ASSERT_TRUE(pool.CheckInvariants(&why)) << why;
  std::vector<const Sequence*> swapped;
  std::map<int32_t, int32_t> holders;
  for (const auto& s : live) {
    if (s->swapped) {
      swapped.push_back(s.get());
      // What comes back: the slots hold the tokens of the blocks they saved.
      for (size_t i = 0; i < s->swap_slots.size(); ++i) {
        if (s->swap_slots[i] < 0) continue;
        for (int32_t j = 0; j < pool.block_size(); ++j) {
          const int32_t p = static_cast<int32_t>(i) * pool.block_size() + j;
          if (p < s->n_computed) ASSERT_EQ(mem.swap[s->swap_slots[i]][j], s->tokens[p]) << "slot " << s->swap_slots[i];
        }
      }
      continue;
    }
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
    // Every computed position reads back the sequence's own token.
    for (int32_t p = 0; p < s->n_computed; ++p)
      ASSERT_EQ(mem.pool[s->block_table[p / pool.block_size()]][p % pool.block_size()], s->tokens[p])
          << "position " << p << " of a sequence of " << s->tokens.size();
  }
  ASSERT_TRUE(kv.CheckSwapInvariants(swapped, &why)) << why;
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
  constexpr int32_t kBlocks = 40, kSlots = 10, kBs = 4;
  KvCacheManager kv(kBlocks, kBs, kSlots);
  KvModel mem(kBlocks, kSlots, kBs);
  std::vector<std::unique_ptr<Sequence>> live;
  // A sequence that runs (not swapped out), or null.
  auto pick_running = [&]() -> Sequence* {
    Sequence* s = live[pick(static_cast<int>(live.size()))].get();
    return s->swapped ? nullptr : s;
  };
  auto drop = [&](Sequence* s) {
    kv.Free(s);
    for (size_t i = 0; i < live.size(); ++i) {
      if (live[i].get() == s) {
        live.erase(live.begin() + static_cast<long>(i));
        break;
      }
    }
  };
  // Admits `s` (no blocks) from the prefix cache and computes the rest; not
  // runnable: dropped, as a cancel would.
  auto recompute = [&](Sequence* s) {
    s->n_computed = 0;
    kv.AttachCachedPrefix(s);
    std::vector<KvCopy> copies;
    const int32_t from = s->n_computed;
    if (kv.AllocateSlots(s, s->n_pending(), 0, &copies)) {
      mem.Copies(copies);
      s->n_computed = static_cast<int32_t>(s->tokens.size());
      mem.Write(*s, from, s->n_computed);
      kv.CommitComputed(s);
    } else {
      drop(s);
    }
  };
  // A few shared prefixes make cache hits common.
  std::vector<std::vector<int32_t>> stems = {Range(12, 1000), Range(9, 2000), Range(20, 3000)};
  int hits = 0, forks = 0, cows = 0, evictions_seen = 0, no_room = 0;
  int swap_outs = 0, swap_declined = 0, swap_ins = 0, swap_no_room = 0, swap_lost = 0, revived = 0;
  for (int op = 0; op < 10000; ++op) {
    const int kind = pick(9);
    if (kind == 0 || live.empty()) {  // allocate: a new sequence (maybe sharing a stem), admitted
      std::vector<int32_t> t = stems[pick(3)];
      t.resize(1 + pick(static_cast<int>(t.size())));
      for (int i = pick(6); i > 0; --i) t.push_back(pick(50));
      auto s = Seq(t, op, pick(4) == 0 ? 7 : 0);
      const int32_t cached_before = kv.pool().n_cached_free();
      hits += kv.AttachCachedPrefix(s.get()) > 0;
      std::vector<KvCopy> copies;
      if (kv.AllocateSlots(s.get(), s->n_pending(), pick(3), &copies)) {
        mem.Copies(copies);
        const int32_t from = s->n_computed;
        s->n_computed = static_cast<int32_t>(s->tokens.size());
        mem.Write(*s, from, s->n_computed);
        kv.CommitComputed(s.get());
        evictions_seen += kv.pool().n_cached_free() < cached_before;
        live.push_back(std::move(s));
      } else {
        kv.Free(s.get());
        ++no_room;
      }
    } else if (kind == 1) {  // append: decode a few tokens
      Sequence* s = pick_running();
      if (s == nullptr) continue;
      const int n = 1 + pick(5);
      for (int i = 0; i < n; ++i) s->tokens.push_back(pick(50));
      std::vector<KvCopy> copies;
      if (kv.AllocateSlots(s, n, pick(2), &copies)) {
        cows += static_cast<int>(copies.size());
        mem.Copies(copies);
        mem.Write(*s, s->n_computed, s->n_computed + n);
        s->n_computed += n;
        kv.CommitComputed(s);
      } else {
        s->tokens.resize(s->tokens.size() - n);
        ++no_room;
      }
    } else if (kind == 2) {  // fork
      Sequence* p = pick_running();
      if (p == nullptr) continue;
      auto c = Seq(p->tokens, op, p->cache_salt);
      c->tokens.resize(p->n_computed);
      kv.Fork(*p, c.get());
      live.push_back(std::move(c));
      ++forks;
    } else if (kind == 3 || kind == 4) {  // free (finish) or cancel, swapped out or not
      drop(live[pick(static_cast<int>(live.size()))].get());
    } else if (kind == 5) {  // preempt by recompute
      Sequence* s = pick_running();
      if (s == nullptr) continue;
      kv.Free(s);
      recompute(s);
    } else if (kind == 6) {  // preempt by swapping
      Sequence* s = pick_running();
      if (s == nullptr) continue;
      std::vector<KvSwap> outs;
      if (kv.SwapOut(s, &outs)) {
        mem.Out(outs);
        ++swap_outs;
      } else {
        ++swap_declined;
      }
    } else if (kind == 7) {  // readmit a swapped-out sequence
      Sequence* s = live[pick(static_cast<int>(live.size()))].get();
      if (!s->swapped) continue;
      const int32_t n_slots_used = static_cast<int32_t>(std::count_if(
          s->swap_slots.begin(), s->swap_slots.end(), [](int32_t x) { return x >= 0; }));
      // Half the time other sequences have taken all but a few free blocks.
      std::vector<int32_t> others;
      for (int i = pick(2) ? kv.pool().n_free() - pick(4) : 0; i > 0; --i) {
        others.push_back(*kv.pool().Allocate());
        mem.Garbage(others.back());
      }
      std::vector<KvSwap> ins;
      switch (kv.SwapIn(s, pick(3), &ins)) {
        case KvCacheManager::SwapInResult::kOk:
          mem.In(ins);
          revived += n_slots_used - static_cast<int32_t>(ins.size());
          ++swap_ins;
          break;
        case KvCacheManager::SwapInResult::kNoRoom: ++swap_no_room; break;
        case KvCacheManager::SwapInResult::kLost:
          ++swap_lost;
          recompute(s);
          break;
      }
      for (int32_t b : others) kv.pool().Release(b);
    } else {  // evict pressure: grab raw blocks, overwrite them, give them back
      std::vector<int32_t> grabbed;
      for (int i = pick(8); i > 0; --i) {
        auto b = kv.pool().Allocate();
        if (!b) break;
        mem.Garbage(*b);  // whatever K/V they held is gone
        grabbed.push_back(*b);
      }
      for (int32_t b : grabbed) kv.pool().Release(b);
    }
    CheckAll(kv, mem, live);
    if (HasFatalFailure()) {
      FAIL() << "invariant broken after operation " << op << " (kind " << kind << ")";
    }
  }
  EXPECT_GT(hits, 100);
  EXPECT_GT(forks, 100);
  EXPECT_GT(cows, 10);
  EXPECT_GT(no_room, 10);
  EXPECT_GT(evictions_seen, 10);
  EXPECT_GT(swap_outs, 100);
  EXPECT_GT(swap_declined, 10);
  EXPECT_GT(swap_ins, 100);
  EXPECT_GT(swap_no_room, 10);
  EXPECT_GT(swap_lost, 0);
  EXPECT_GT(revived, 10);  // copied blocks found again in the cache
  std::vector<const Sequence*> none;
  for (auto& s : live) kv.Free(s.get());
  std::string why;
  EXPECT_TRUE(kv.CheckSwapInvariants(none, &why)) << why;
  EXPECT_EQ(kv.n_swap_free(), kSlots);
  EXPECT_EQ(kv.pool().n_used(), 0);
}

// Blocks holding an image's positions are keyed by the image's whole
// content hash as well as their tokens: the same tokens with another image
// there never match, the same image does, and text before the image is
// shared either way.
TEST(KvCache, ImageBlocksAreKeyedByTheImageHash) {
  KvCacheManager kv(32, 4);
  auto with_image = [](uint64_t hash, uint64_t arrival) {
    auto s = Seq(Range(14), arrival);
    s->image_spans.push_back({6, 5, hash});  // positions [6, 11): blocks 1 and 2
    return s;
  };
  auto a = with_image(0x1111, 0);
  Compute(kv, a.get());
  auto same = with_image(0x1111, 1);
  EXPECT_EQ(kv.AttachCachedPrefix(same.get()), 12);  // every full block
  auto other = with_image(0x2222, 2);  // same tokens, another image
  EXPECT_EQ(kv.AttachCachedPrefix(other.get()), 4);  // the text block before it only
  auto text = Seq(Range(14), 3);  // no image at all
  EXPECT_EQ(kv.AttachCachedPrefix(text.get()), 4);
  std::string why;
  EXPECT_TRUE(kv.pool().CheckInvariants(&why)) << why;
}

}  // namespace
}  // namespace llm
