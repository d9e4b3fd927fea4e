// Continuous batching end to end on the bundled model (F32, greedy): batched,
// preempted and prefix-cached runs give exactly the tokens of solo runs.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "llm.h"
#include "support/api_helpers.h"
#include "support/test_paths.h"

namespace llm::test {
namespace {

llm_ctx* MakeCtx(int32_t n_kv_blocks = 0, int32_t n_threads = 2, int32_t max_seqs = 0,
                 int32_t preempt_mode = LLM_PREEMPT_RECOMPUTE, uint64_t swap_space_bytes = 0) {
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  std::string path = ModelPathF32();
  p.model_path = path.c_str();
  p.n_threads = n_threads;
  p.n_kv_blocks = n_kv_blocks;
  p.max_seqs = max_seqs;
  p.max_batch_tokens = 256;
  p.preempt_mode = preempt_mode;
  p.swap_space_bytes = swap_space_bytes;
  llm_ctx* ctx = nullptr;
  EXPECT_EQ(llm_ctx_create(&p, &ctx), LLM_OK) << llm_last_error();
  return ctx;
}

llm_stats Stats(llm_ctx* ctx) {
  llm_stats st{};
  st.struct_size = sizeof st;
  EXPECT_EQ(llm_get_stats(ctx, &st), LLM_OK);
  return st;
}

struct Job {
  std::vector<llm_token> prompt;
  int32_t max_tokens;
};

// 64 requests, prompt lengths spread over 1..400, outputs 1..64 tokens.
std::vector<Job> MakeJobs(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Job> jobs;
  for (int i = 0; i < n; ++i) {
    Job j;
    const int len = 1 + (i * 399) / (n - 1);
    j.prompt.push_back(1);
    for (int k = 1; k < len; ++k) j.prompt.push_back(3 + static_cast<int32_t>(rng() % 509));
    j.max_tokens = 1 + static_cast<int32_t>(rng() % 64);
    jobs.push_back(std::move(j));
  }
  return jobs;
}

llm_request Greedy(const Job& j, llm_sampling_params* sp) {
  llm_sampling_params_init(sp);
  sp->temperature = 0;
  llm_request r;
  llm_request_init(&r);
  r.prompt_tokens = j.prompt.data();
  r.n_prompt_tokens = static_cast<int32_t>(j.prompt.size());
  r.max_tokens = j.max_tokens;
  r.ignore_eos = 1;
  r.sampling = sp;
  return r;
}

std::vector<std::vector<llm_token>> RunSolo(const std::vector<Job>& jobs) {
  llm_ctx* ctx = MakeCtx();
  std::vector<std::vector<llm_token>> out;
  for (const Job& j : jobs) {
    llm_sampling_params sp;
    llm_request r = Greedy(j, &sp);
    llm_request_id id;
    EXPECT_EQ(llm_submit(ctx, &r, &id), LLM_OK) << llm_last_error();
    out.push_back(WaitFor(ctx, id)[0].tokens);
  }
  llm_ctx_destroy(ctx);
  return out;
}

// Submits all jobs at once and collects each one's tokens.
std::vector<std::vector<llm_token>> RunConcurrent(llm_ctx* ctx, const std::vector<Job>& jobs) {
  std::map<llm_request_id, size_t> index;
  std::vector<llm_sampling_params> sps(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    llm_request r = Greedy(jobs[i], &sps[i]);
    llm_request_id id;
    EXPECT_EQ(llm_submit(ctx, &r, &id), LLM_OK) << llm_last_error();
    index[id] = i;
  }
  std::vector<std::vector<llm_token>> out(jobs.size());
  size_t finals = 0;
  llm_event ev[32];
  for (int spins = 0; finals < jobs.size() && spins < 20000; ++spins) {
    uint32_t n = 0;
    ev[0].struct_size = sizeof(llm_event);
    EXPECT_EQ(llm_poll(ctx, ev, 32, &n, 50), LLM_OK);
    for (uint32_t k = 0; k < n; ++k) {
      size_t i = index.at(ev[k].request_id);
      if (ev[k].type == LLM_EVENT_TOKEN) out[i].push_back(ev[k].token);
      if (ev[k].type == LLM_EVENT_FINAL) {
        EXPECT_EQ(ev[k].status, LLM_OK) << ev[k].message;
        ++finals;
      }
    }
  }
  EXPECT_EQ(finals, jobs.size());
  return out;
}

TEST(Batching, SixtyFourConcurrentRequestsMatchSoloRuns) {
  auto jobs = MakeJobs(64, 7);
  auto solo = RunSolo(jobs);
  llm_ctx* ctx = MakeCtx();
  auto batched = RunConcurrent(ctx, jobs);
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ(batched[i], solo[i]) << "request " << i << " (prompt " << jobs[i].prompt.size() << ")";
    EXPECT_EQ(batched[i].size(), static_cast<size_t>(jobs[i].max_tokens));
  }
  llm_stats st = Stats(ctx);
  EXPECT_EQ(st.kv_blocks_used, 0);
  EXPECT_GE(st.kv_utilization, 0.95) << "time-averaged share of allocated KV slots holding tokens";
  llm_ctx_destroy(ctx);
}

TEST(Batching, PreemptionKeepsOutputsExact) {
  auto jobs = MakeJobs(64, 11);
  auto solo = RunSolo(jobs);
  // 48 blocks of 16 = 768 token slots for 64 requests of up to 464 tokens.
  llm_ctx* ctx = MakeCtx(/*n_kv_blocks=*/48);
  auto batched = RunConcurrent(ctx, jobs);
  for (size_t i = 0; i < jobs.size(); ++i) EXPECT_EQ(batched[i], solo[i]) << "request " << i;
  llm_stats st = Stats(ctx);
  EXPECT_GT(st.preemptions, 0u) << "the pool was meant to be too small";
  EXPECT_EQ(st.kv_blocks_used, 0);
  llm_ctx_destroy(ctx);
}

TEST(Batching, PrefixCacheServesASharedPrefix) {
  std::mt19937 rng(3);
  Job first;
  first.prompt.push_back(1);
  for (int k = 1; k < 256; ++k) first.prompt.push_back(3 + static_cast<int32_t>(rng() % 509));
  first.max_tokens = 20;
  Job second = first;
  for (int k = 0; k < 12; ++k) second.prompt.push_back(3 + static_cast<int32_t>(rng() % 509));
  second.max_tokens = 40;

  llm_ctx* fresh = MakeCtx();
  auto expected = RunConcurrent(fresh, {second})[0];
  llm_ctx_destroy(fresh);

  llm_ctx* ctx = MakeCtx();
  RunConcurrent(ctx, {first});
  llm_sampling_params sp;
  llm_request r = Greedy(second, &sp);
  llm_request_id id;
  ASSERT_EQ(llm_submit(ctx, &r, &id), LLM_OK);
  SeqResult res = WaitFor(ctx, id)[0];
  EXPECT_GE(res.metrics.cached_prompt_tokens, 240);
  EXPECT_EQ(res.tokens, expected);
  llm_stats st = Stats(ctx);
  EXPECT_GE(st.prefix_cache_hit_tokens, 240u);
  EXPECT_GT(st.kv_blocks_cached, 0);
  llm_ctx_destroy(ctx);
}

// Four samples of one prompt on `ctx` (default: a fresh context), which
// this destroys; *stats: the context's figures at the end.
std::vector<SeqResult> FourSamples(int threads, uint64_t* prompt_tokens_computed, llm_ctx* ctx = nullptr,
                                   int32_t max_tokens = 40, llm_stats* stats = nullptr) {
  if (ctx == nullptr) ctx = MakeCtx(0, threads);
  llm_sampling_params sp;
  llm_sampling_params_init(&sp);
  sp.temperature = 0.8f;
  sp.seed = 99;
  llm_request r;
  llm_request_init(&r);
  r.prompt = "Once upon a time, there was a little dog named Max. Max liked to run";
  r.max_tokens = max_tokens;
  r.n = 4;
  r.ignore_eos = 1;
  r.sampling = &sp;
  llm_request_id id;
  EXPECT_EQ(llm_submit(ctx, &r, &id), LLM_OK);
  auto res = WaitFor(ctx, id, 4);
  *prompt_tokens_computed = Stats(ctx).prompt_tokens;
  if (stats != nullptr) *stats = Stats(ctx);
  EXPECT_EQ(Stats(ctx).kv_blocks_used, 0);
  llm_ctx_destroy(ctx);
  return res;
}

TEST(Batching, ParallelSamplesSharePrefill) {
  uint64_t computed1 = 0, computed2 = 0;
  auto a = FourSamples(2, &computed1);
  auto b = FourSamples(1, &computed2);
  const int32_t n_prompt = a[0].metrics.prompt_tokens;
  EXPECT_EQ(computed1, static_cast<uint64_t>(n_prompt)) << "the prompt is prefilled once";
  EXPECT_EQ(computed2, static_cast<uint64_t>(n_prompt));
  std::set<std::vector<llm_token>> distinct;
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(a[i].tokens.size(), 40u);
    EXPECT_EQ(a[i].tokens, b[i].tokens) << "same output on 1 and 2 threads";
    distinct.insert(a[i].tokens);
  }
  EXPECT_EQ(distinct.size(), 4u);
}

// ------------------------------------------------------------ swapping

// Bytes of one KV block of `ctx`'s model on the CPU backend (16 tokens of
// the default F16 KV), computed from the model and checked against the
// context's own figure.
uint64_t CpuBlockBytes(llm_ctx* ctx) {
  llm_model_info info{};
  info.struct_size = sizeof info;
  EXPECT_EQ(llm_model_get_info(ctx, &info), LLM_OK);
  const uint64_t bytes = uint64_t{16} * 2 * static_cast<uint64_t>(info.n_layer) *
                         static_cast<uint64_t>(info.n_head_kv) * static_cast<uint64_t>(info.n_embd / info.n_head) *
                         sizeof(uint16_t);
  const llm_stats st = Stats(ctx);
  EXPECT_EQ(st.kv_pool_bytes, bytes * static_cast<uint64_t>(st.kv_blocks_total));
  return bytes;
}

uint64_t PromptTokens(const std::vector<Job>& jobs) {
  uint64_t n = 0;
  for (const Job& j : jobs) n += j.prompt.size();
  return n;
}

// The pool of PreemptionKeepsOutputsExact with room in host memory for all
// that is swapped out: every preemption is a swap, every swapped sequence
// resumes where it stopped (each prompt token is computed exactly once, the
// prompts share no block), and the output is still that of solo runs.
TEST(Batching, SwapPreemptionKeepsOutputsExactWithoutRecompute) {
  auto jobs = MakeJobs(64, 11);
  auto solo = RunSolo(jobs);
  llm_ctx* ctx = MakeCtx(/*n_kv_blocks=*/48, 2, 0, LLM_PREEMPT_SWAP, /*swap_space_bytes=*/16u << 20);
  auto batched = RunConcurrent(ctx, jobs);
  for (size_t i = 0; i < jobs.size(); ++i) EXPECT_EQ(batched[i], solo[i]) << "request " << i;
  llm_stats st = Stats(ctx);
  EXPECT_GT(st.swap_outs, 0u) << "the pool was meant to be too small";
  EXPECT_EQ(st.preemptions, st.swap_outs) << "a preemption fell back to recompute";
  EXPECT_EQ(st.swap_ins, st.swap_outs);
  EXPECT_GT(st.swap_blocks_out, 0u);
  // Swapped blocks still in the prefix cache when their sequence comes back
  // are taken from there, not copied.
  EXPECT_GT(st.swap_blocks_in, 0u);
  EXPECT_LE(st.swap_blocks_in, st.swap_blocks_out);
  EXPECT_EQ(st.prompt_tokens, PromptTokens(jobs)) << "a prompt was computed again";
  EXPECT_EQ(st.swap_blocks_total, static_cast<int32_t>((16u << 20) / CpuBlockBytes(ctx)));
  EXPECT_EQ(st.swap_blocks_used, 0);
  EXPECT_EQ(st.kv_blocks_used, 0);
  llm_ctx_destroy(ctx);
}

// A swap space of 3 blocks: short victims are swapped, longer ones are
// recomputed, and both kinds still give the solo output.
TEST(Batching, FullSwapSpaceFallsBackToRecompute) {
  auto jobs = MakeJobs(64, 11);
  auto solo = RunSolo(jobs);
  llm_ctx* probe = MakeCtx(/*n_kv_blocks=*/8);
  const uint64_t block = CpuBlockBytes(probe);
  llm_ctx_destroy(probe);
  llm_ctx* ctx = MakeCtx(/*n_kv_blocks=*/48, 2, 0, LLM_PREEMPT_SWAP, 3 * block + block / 2);
  auto batched = RunConcurrent(ctx, jobs);
  for (size_t i = 0; i < jobs.size(); ++i) EXPECT_EQ(batched[i], solo[i]) << "request " << i;
  llm_stats st = Stats(ctx);
  EXPECT_EQ(st.swap_blocks_total, 3);  // whole blocks only
  EXPECT_GT(st.swap_outs, 0u);
  EXPECT_GT(st.preemptions, st.swap_outs) << "some victim was meant not to fit in the swap space";
  EXPECT_EQ(st.swap_ins, st.swap_outs);
  EXPECT_GT(st.prompt_tokens, PromptTokens(jobs)) << "the fallback recomputes";
  EXPECT_EQ(st.swap_blocks_used, 0);
  EXPECT_EQ(st.kv_blocks_used, 0);
  llm_ctx_destroy(ctx);
}

// Parallel samples share their prompt's blocks: a swapped-out sample leaves
// the shared full blocks in the pool and takes them back. Same tokens as
// with a pool large enough for all four; the prompt is prefilled once.
TEST(Batching, SwappedParallelSamplesMatchUnpreemptedOnes) {
  uint64_t computed = 0;
  auto want = FourSamples(2, &computed, nullptr, /*max_tokens=*/100);
  // 4 samples of ~20 + 100 tokens need ~28 blocks; 16 make them take turns.
  llm_ctx* ctx = MakeCtx(/*n_kv_blocks=*/16, 2, 0, LLM_PREEMPT_SWAP);
  llm_stats st{};
  auto got = FourSamples(2, &computed, ctx, /*max_tokens=*/100, &st);
  ASSERT_EQ(got.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(got[i].tokens, want[i].tokens) << "sample " << i;
  int32_t preempted = 0;
  for (const SeqResult& r : got) preempted += r.metrics.preemptions;
  EXPECT_GT(preempted, 0);
  EXPECT_EQ(st.preemptions, static_cast<uint64_t>(preempted));
  EXPECT_EQ(st.swap_outs, st.preemptions);
  EXPECT_EQ(st.swap_ins, st.swap_outs);
  EXPECT_EQ(computed, static_cast<uint64_t>(got[0].metrics.prompt_tokens)) << "the prompt is prefilled once";
}

// A low-priority request swapped out by a high-priority one that then needs
// the whole pool is cancelled while it waits in the swap space: it ends
// CANCELLED, gives its swap space back and never comes back in; the other
// request is unaffected.
TEST(Batching, CancelWhileSwappedOutFreesTheSwapSpace) {
  std::mt19937 rng(5);
  auto job = [&](int32_t max_tokens) {
    Job j;
    j.prompt.push_back(1);
    for (int k = 1; k < 10; ++k) j.prompt.push_back(3 + static_cast<int32_t>(rng() % 509));
    j.max_tokens = max_tokens;
    return j;
  };
  const Job low = job(300), high = job(400);  // high: 409 positions = all 26 blocks
  const auto high_solo = RunSolo({high})[0];
  llm_ctx* ctx = MakeCtx(/*n_kv_blocks=*/26, 2, 0, LLM_PREEMPT_SWAP);
  llm_sampling_params sp_low, sp_high;
  llm_request r_low = Greedy(low, &sp_low), r_high = Greedy(high, &sp_high);
  r_high.priority = 5;
  llm_request_id id_low = 0, id_high = 0;
  ASSERT_EQ(llm_submit(ctx, &r_low, &id_low), LLM_OK);
  std::vector<llm_token> high_tokens;
  int32_t low_reason = LLM_FINISH_NONE, low_preemptions = 0;
  bool high_done = false, cancelled = false;
  llm_event ev[32];
  for (int spins = 0; !(high_done && low_reason != LLM_FINISH_NONE) && spins < 200000; ++spins) {
    uint32_t n = 0;
    ev[0].struct_size = sizeof(llm_event);
    ASSERT_EQ(llm_poll(ctx, ev, 32, &n, 1), LLM_OK);
    for (uint32_t k = 0; k < n; ++k) {
      if (ev[k].request_id == id_low && ev[k].type == LLM_EVENT_TOKEN && id_high == 0) {
        ASSERT_EQ(llm_submit(ctx, &r_high, &id_high), LLM_OK);  // low is running: now the squeeze
      }
      if (ev[k].request_id == id_high && ev[k].type == LLM_EVENT_TOKEN) high_tokens.push_back(ev[k].token);
      if (ev[k].request_id == id_high && ev[k].type == LLM_EVENT_FINAL) high_done = true;
      if (ev[k].request_id == id_low && ev[k].type == LLM_EVENT_FINAL) {
        low_reason = ev[k].finish_reason;
        low_preemptions = ev[k].metrics.preemptions;
      }
    }
    if (!cancelled && Stats(ctx).swap_blocks_used > 0) {
      ASSERT_EQ(llm_cancel(ctx, id_low), LLM_OK);
      cancelled = true;
    }
  }
  ASSERT_TRUE(cancelled) << "the low-priority request was never swapped out";
  EXPECT_EQ(low_reason, LLM_FINISH_CANCELLED);
  EXPECT_EQ(low_preemptions, 1);
  EXPECT_EQ(high_tokens, high_solo);
  llm_stats st = Stats(ctx);
  EXPECT_EQ(st.swap_outs, 1u);
  EXPECT_EQ(st.swap_ins, 0u) << "cancelled before it could come back";
  EXPECT_EQ(st.swap_blocks_used, 0);
  EXPECT_EQ(st.kv_blocks_used, 0);
  llm_ctx_destroy(ctx);
}

TEST(Batching, RequestsThatCanNeverFitAreRejected) {
  llm_ctx* ctx = MakeCtx(/*n_kv_blocks=*/8);  // 128 token slots
  llm_request r;
  llm_request_init(&r);
  r.prompt = "Once upon a time";
  r.max_tokens = 600;  // beyond the 512-token context
  llm_request_id id;
  EXPECT_EQ(llm_submit(ctx, &r, &id), LLM_ERR_CONTEXT_OVERFLOW);
  EXPECT_NE(std::string(llm_last_error()).find("context"), std::string::npos);
  r.max_tokens = 200;  // fits the context, not the pool
  EXPECT_EQ(llm_submit(ctx, &r, &id), LLM_ERR_CONTEXT_OVERFLOW);
  EXPECT_NE(std::string(llm_last_error()).find("blocks"), std::string::npos);
  r.max_tokens = 100;
  EXPECT_EQ(llm_submit(ctx, &r, &id), LLM_OK);
  EXPECT_EQ(WaitFor(ctx, id)[0].tokens.size() > 0, true);
  llm_ctx_destroy(ctx);
}

TEST(Batching, BurstFromEightThreadsNeverDeadlocks) {
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  std::string path = ModelPathF32();
  p.model_path = path.c_str();
  p.max_queued = 4;
  p.max_seqs = 4;
  llm_ctx* ctx = nullptr;
  ASSERT_EQ(llm_ctx_create(&p, &ctx), LLM_OK);
  std::atomic<int> submitted{0}, busy{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        llm_request r;
        llm_request_init(&r);
        r.prompt = t % 2 ? "The sun was" : "Lily wanted to";
        r.max_tokens = 4 + i % 5;
        llm_request_id id;
        while (true) {
          llm_status s = llm_submit(ctx, &r, &id);
          if (s == LLM_OK) break;
          ASSERT_EQ(s, LLM_ERR_BUSY);
          busy++;
          std::this_thread::yield();
        }
        submitted++;
      }
    });
  }
  int finals = 0;
  llm_event ev[32];
  for (int spins = 0; finals < 200 && spins < 100000; ++spins) {
    uint32_t n = 0;
    ev[0].struct_size = sizeof(llm_event);
    ASSERT_EQ(llm_poll(ctx, ev, 32, &n, 10), LLM_OK);
    for (uint32_t k = 0; k < n; ++k) finals += ev[k].type == LLM_EVENT_FINAL;
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(submitted.load(), 200);
  EXPECT_EQ(finals, 200);
  EXPECT_GT(busy.load(), 0) << "the bounded queue pushed back";
  llm_ctx_destroy(ctx);
}

}  // namespace
}  // namespace llm::test
