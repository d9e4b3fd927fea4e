// Stress: 2,000+ requests from 8 submitting threads with random prompts,
// lengths, n, priorities and sampling settings, random cancels, a KV pool
// small enough to force preemption, and a poller with random timeouts and
// wakeups. Every sequence must end exactly once; uncancelled greedy requests
// must produce their solo outputs; the stats must balance; the KV pool must
// end empty (free or cached). Bounded in count and time.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "llm.h"
#include "support/api_helpers.h"
#include "support/test_paths.h"

namespace llm::test {
namespace {

constexpr int kThreads = 8;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
// Under the sanitizers (15x slower here) a quarter of the requests: the same
// cancels, preemptions and wakeups, in a quarter of the time.
constexpr int kPerThread = 64;  // 512 requests
#else
constexpr int kPerThread = 256;  // 2,048 requests
#endif
constexpr int kGreedyVariants = 16;

struct Variant {
  std::vector<llm_token> prompt;
  int32_t max_tokens;
};

struct Tracked {
  bool greedy = false;
  int variant = -1;
  int n = 1;
  bool cancel_sent = false;
  std::vector<int> finals;                     // (n) final events seen per sequence
  std::vector<std::vector<llm_token>> tokens;  // (n)
  std::vector<int32_t> reasons;                // (n)
};

TEST(Stress, TwoThousandRequestsEightThreadsPreemptionCancelsWakeups) {
  std::mt19937 vrng(2024);
  std::vector<Variant> variants(kGreedyVariants);
  for (auto& v : variants) {
    v.prompt.push_back(1);
    const int len = 1 + static_cast<int>(vrng() % 64);
    for (int k = 1; k < len; ++k) v.prompt.push_back(3 + static_cast<int32_t>(vrng() % 509));
    v.max_tokens = 1 + static_cast<int32_t>(vrng() % 24);
  }
  // Solo outputs, one request at a time.
  std::vector<std::vector<llm_token>> solo(kGreedyVariants);
  {
    llm_ctx_params p;
    llm_ctx_params_init(&p);
    std::string path = ModelPathF32();
    p.model_path = path.c_str();
    llm_ctx* ctx = nullptr;
    ASSERT_EQ(llm_ctx_create(&p, &ctx), LLM_OK);
    for (int i = 0; i < kGreedyVariants; ++i) {
      llm_sampling_params sp;
      llm_sampling_params_init(&sp);
      sp.temperature = 0;
      llm_request r;
      llm_request_init(&r);
      r.prompt_tokens = variants[i].prompt.data();
      r.n_prompt_tokens = static_cast<int32_t>(variants[i].prompt.size());
      r.max_tokens = variants[i].max_tokens;
      r.ignore_eos = 1;
      r.sampling = &sp;
      llm_request_id id;
      ASSERT_EQ(llm_submit(ctx, &r, &id), LLM_OK);
      solo[i] = WaitFor(ctx, id)[0].tokens;
    }
    llm_ctx_destroy(ctx);
  }

  llm_ctx_params p;
  llm_ctx_params_init(&p);
  std::string path = ModelPathF32();
  p.model_path = path.c_str();
  p.n_threads = 2;
  p.n_kv_blocks = 24;  // 384 slots for up to 32 sequences of up to ~90 tokens: preemption
  p.max_seqs = 32;
  p.max_batch_tokens = 128;
  p.max_queued = 64;
  llm_ctx* ctx = nullptr;
  ASSERT_EQ(llm_ctx_create(&p, &ctx), LLM_OK);

  std::mutex mu;
  std::map<llm_request_id, Tracked> tracked;
  std::atomic<int> accepted{0}, rejected{0}, submitters_done{0};
  std::atomic<bool> stop_poller{false};

  // ---- the poller: random timeouts; another thread pokes it with wakeups
  std::atomic<int> finals_seen{0}, events_seen{0};
  std::atomic<int> bad_events{0};
  std::thread poller([&] {
    std::mt19937 rng(77);
    std::vector<llm_event> ev(64);
    while (!stop_poller) {
      uint32_t n = 0;
      ev[0].struct_size = sizeof(llm_event);
      const int32_t timeout = static_cast<int32_t>(rng() % 4) == 0 ? -1 : static_cast<int32_t>(rng() % 20);
      const uint32_t cap = 1 + rng() % 64;
      if (llm_poll(ctx, ev.data(), cap, &n, timeout) != LLM_OK) bad_events++;
      std::lock_guard<std::mutex> lock(mu);
      for (uint32_t k = 0; k < n; ++k) {
        events_seen++;
        auto it = tracked.find(ev[k].request_id);
        if (it == tracked.end() || ev[k].seq_index < 0 || ev[k].seq_index >= it->second.n) {
          bad_events++;
          continue;
        }
        Tracked& t = it->second;
        const int s = ev[k].seq_index;
        if (t.finals[s] != 0) bad_events++;  // an event after the final one
        if (ev[k].type == LLM_EVENT_TOKEN) {
          t.tokens[s].push_back(ev[k].token);
        } else {
          t.finals[s]++;
          t.reasons[s] = ev[k].finish_reason;
          if (ev[k].status != LLM_OK) bad_events++;
          finals_seen++;
        }
      }
    }
  });
  std::thread waker([&] {
    while (!stop_poller) {
      llm_wakeup(ctx);
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
    }
  });

  // ---- the submitters
  std::vector<std::thread> subs;
  for (int th = 0; th < kThreads; ++th) {
    subs.emplace_back([&, th] {
      std::mt19937 rng(1000 + th);
      std::vector<llm_request_id> mine;
      for (int i = 0; i < kPerThread; ++i) {
        Tracked t;
        llm_sampling_params sp;
        llm_sampling_params_init(&sp);
        llm_request r;
        llm_request_init(&r);
        std::vector<llm_token> prompt;
        t.greedy = rng() % 3 == 0;
        if (t.greedy) {
          t.variant = static_cast<int>(rng() % kGreedyVariants);
          const Variant& v = variants[t.variant];
          prompt = v.prompt;
          r.max_tokens = v.max_tokens;
          sp.temperature = 0;
        } else {
          prompt.push_back(1);
          const int len = 1 + static_cast<int>(rng() % 64);
          for (int k = 1; k < len; ++k) prompt.push_back(3 + static_cast<int32_t>(rng() % 509));
          r.max_tokens = 1 + static_cast<int32_t>(rng() % 24);
          sp.temperature = static_cast<float>(rng() % 15) / 10.0f;
          sp.top_k = static_cast<int32_t>(rng() % 50);
          sp.top_p = 0.5f + static_cast<float>(rng() % 51) / 100.0f;
          sp.min_p = static_cast<float>(rng() % 10) / 100.0f;
          sp.repetition_penalty = 1.0f + static_cast<float>(rng() % 3) / 10.0f;
          sp.seed = rng();
          r.n = 1 + static_cast<int32_t>(rng() % 3);
        }
        r.prompt_tokens = prompt.data();
        r.n_prompt_tokens = static_cast<int32_t>(prompt.size());
        r.ignore_eos = 1;
        r.priority = static_cast<int32_t>(rng() % 3);
        r.sampling = &sp;
        t.n = r.n;
        t.finals.assign(t.n, 0);
        t.tokens.assign(t.n, {});
        t.reasons.assign(t.n, 0);
        llm_request_id id = 0;
        while (true) {
          // Register before submitting so the poller knows the id at once.
          std::unique_lock<std::mutex> lock(mu);
          llm_status s = llm_submit(ctx, &r, &id);
          if (s == LLM_OK) {
            tracked[id] = t;
            break;
          }
          lock.unlock();
          ASSERT_EQ(s, LLM_ERR_BUSY) << llm_last_error();
          rejected++;
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
        accepted++;
        mine.push_back(id);
        if (rng() % 8 == 0) {  // cancel a random earlier request of ours
          llm_request_id victim = mine[rng() % mine.size()];
          llm_status s = llm_cancel(ctx, victim);
          if (s == LLM_OK) {
            std::lock_guard<std::mutex> lock(mu);
            tracked[victim].cancel_sent = true;
          } else {
            EXPECT_EQ(s, LLM_ERR_NOT_FOUND);
          }
        }
      }
      submitters_done++;
    });
  }
  for (auto& s : subs) s.join();

  // ---- drain: every sequence's final event, bounded in time
  int expected_finals = 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& [id, t] : tracked) expected_finals += t.n;
  }
  const auto t0 = std::chrono::steady_clock::now();
  while (finals_seen < expected_finals &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(300)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  stop_poller = true;
  llm_wakeup(ctx);
  poller.join();
  waker.join();

  EXPECT_EQ(accepted.load(), kThreads * kPerThread);
  EXPECT_EQ(bad_events.load(), 0);
  EXPECT_EQ(finals_seen.load(), expected_finals);
  int greedy_checked = 0, cancelled = 0;
  for (auto& [id, t] : tracked) {
    for (int s = 0; s < t.n; ++s) {
      ASSERT_EQ(t.finals[s], 1) << "request " << id << " seq " << s;
      if (t.reasons[s] == LLM_FINISH_CANCELLED) {
        EXPECT_TRUE(t.cancel_sent) << "request " << id << " was cancelled by nobody";
        ++cancelled;
      }
    }
    if (t.greedy && t.reasons[0] != LLM_FINISH_CANCELLED) {
      EXPECT_EQ(t.tokens[0], solo[t.variant]) << "request " << id << " variant " << t.variant;
      ++greedy_checked;
    }
  }
  EXPECT_GT(greedy_checked, kThreads * kPerThread * 300 / 2048);  // 300 of 2,048 (75 of 512)
  EXPECT_GT(cancelled, 10);

  llm_stats st{};
  st.struct_size = sizeof st;
  ASSERT_EQ(llm_get_stats(ctx, &st), LLM_OK);
  EXPECT_EQ(st.requests_submitted, static_cast<uint64_t>(accepted.load()));
  EXPECT_EQ(st.requests_finished, st.requests_submitted) << "submitted = finished (incl. cancelled)";
  EXPECT_EQ(st.kv_blocks_used, 0) << "all KV blocks free or cached at the end";
  EXPECT_EQ(st.kv_blocks_free, st.kv_blocks_total);
  EXPECT_EQ(st.running, 0);
  EXPECT_EQ(st.queue_depth, 0);
  EXPECT_GT(st.preemptions, 0u) << "the pool was meant to force preemption";
  EXPECT_GT(rejected.load(), 0) << "the bounded queue was meant to push back";
  std::printf("stress: %d requests (%d rejected submits, %d cancelled sequences, %d greedy checked), "
              "%llu preemptions, %d events\n",
              accepted.load(), rejected.load(), cancelled, greedy_checked,
              static_cast<unsigned long long>(st.preemptions), events_seen.load());
  llm_ctx_destroy(ctx);
}

}  // namespace
}  // namespace llm::test
