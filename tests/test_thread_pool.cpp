// ThreadPool: every index is covered exactly once, chunks are the documented
// contiguous split, thread indices are in range and usable as scratch slots,
// and the pool survives many rapid jobs, idle periods (sleeping workers) and
// destruction.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "util/thread_pool.h"

namespace llm {
namespace {

TEST(ThreadPool, CoversEveryIndexOnceWithTheDocumentedChunks) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.n_threads(), threads);
    for (int64_t n : {0, 1, 2, 3, 7, 64, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      std::mutex mu;
      std::set<std::pair<int64_t, int64_t>> chunks;
      pool.ParallelFor(n, [&](int64_t b, int64_t e, int t) {
        EXPECT_GE(t, 0);
        EXPECT_LT(t, threads);
        for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
        std::lock_guard<std::mutex> lock(mu);
        chunks.insert({b, e});
      });
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << "n " << n << " index " << i;
      const int64_t parts = std::min<int64_t>(n, threads);
      std::set<std::pair<int64_t, int64_t>> expected;
      for (int64_t i = 0; i < parts; ++i) expected.insert({n * i / parts, n * (i + 1) / parts});
      EXPECT_EQ(chunks, expected) << "threads " << threads << " n " << n;
    }
  }
}

TEST(ThreadPool, DynamicChunksCoverEveryIndexOnce) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 5, 64, 1000}) {
      for (int64_t chunks : {1, 4, 16, 100000}) {
        std::vector<std::atomic<int>> hits(n);
        std::mutex mu;
        std::set<std::pair<int64_t, int64_t>> got;
        pool.ParallelForDynamic(n, chunks, [&](int64_t b, int64_t e, int t) {
          EXPECT_GE(t, 0);
          EXPECT_LT(t, threads);
          for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
          std::lock_guard<std::mutex> lock(mu);
          got.insert({b, e});
        });
        for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << "n " << n << " index " << i;
        // A single-threaded pool makes one call; otherwise min(n, chunks, 65535) chunks.
        const int64_t parts = threads == 1 ? std::min<int64_t>(n, 1) : std::min({n, chunks, int64_t{65535}});
        std::set<std::pair<int64_t, int64_t>> expected;
        for (int64_t i = 0; i < parts; ++i) expected.insert({n * i / parts, n * (i + 1) / parts});
        EXPECT_EQ(got, expected) << "threads " << threads << " n " << n << " chunks " << chunks;
      }
    }
  }
}

TEST(ThreadPool, MaxThreadsLimitsTheChunks) {
  ThreadPool pool(4);
  std::atomic<int> calls{0};
  pool.ParallelFor(100, [&](int64_t, int64_t, int) { calls.fetch_add(1); }, 2);
  EXPECT_EQ(calls.load(), 2);
}

TEST(ThreadPool, ThreadIndexIsExclusiveWhileRunning) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> busy(3);
  std::atomic<bool> clash{false};
  for (int rep = 0; rep < 200; ++rep) {
    pool.ParallelFor(3, [&](int64_t, int64_t, int t) {
      if (busy[t].fetch_add(1) != 0) clash = true;
      std::this_thread::yield();
      busy[t].fetch_sub(1);
    });
  }
  EXPECT_FALSE(clash.load());
}

TEST(ThreadPool, ManyRapidJobsAndSleepingWorkers) {
  ThreadPool pool(2);
  int64_t total = 0;
  for (int rep = 0; rep < 20000; ++rep) {
    std::atomic<int64_t> sum{0};
    pool.ParallelFor(10, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) sum.fetch_add(i);
    });
    total += sum.load();
  }
  EXPECT_EQ(total, 20000 * 45);
  // Let the workers fall asleep, then wake them.
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  std::atomic<int> calls{0};
  pool.ParallelFor(2, [&](int64_t, int64_t, int) { calls.fetch_add(1); });
  EXPECT_EQ(calls.load(), 2);
}

TEST(ThreadPool, DefaultUsesHardwareThreadsAndDestroysWhileIdle) {
  ThreadPool pool(0);
  EXPECT_GE(pool.n_threads(), 1);
  { ThreadPool idle(4); }  // destroyed without ever running a job
  {
    ThreadPool p(3);
    p.ParallelFor(3, [](int64_t, int64_t, int) {});
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }  // destroyed while workers sleep
}

}  // namespace
}  // namespace llm
