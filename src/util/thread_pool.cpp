#include "util/thread_pool.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define LLM_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define LLM_CPU_RELAX() __asm__ __volatile__("yield")
#else
#define LLM_CPU_RELAX() ((void)0)
#endif

namespace llm {
namespace {

// Spin iterations before a worker sleeps: with pause ~ 40 ns each this is a
// few tens of microseconds, longer than the gap between two parallel loops of
// one forward pass, much shorter than a human-visible idle period.
constexpr int kSpinIterations = 2000;

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) {
    n_threads = static_cast<int>(std::thread::hardware_concurrency());
    if (n_threads <= 0) n_threads = 1;
  }
  n_threads_ = n_threads;
  workers_.reserve(n_threads_ - 1);
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_relaxed);
  epoch_.fetch_add(1, std::memory_order_seq_cst);
  epoch_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::RunShare(int index) {
  if (index >= job_parts_) return;
  const int64_t begin = job_n_ * index / job_parts_;
  const int64_t end = job_n_ * (index + 1) / job_parts_;
  if (begin < end) job_thunk_(job_ctx_, begin, end, index);
}

void ThreadPool::Run(int64_t n, int max_threads, void* ctx, Thunk thunk) {
  if (n <= 0) return;
  int64_t parts = n_threads_;
  if (parts > max_threads) parts = max_threads;
  if (parts > n) parts = n;
  if (parts <= 1) {
    thunk(ctx, 0, n, 0);
    return;
  }
  job_ctx_ = ctx;
  job_thunk_ = thunk;
  job_n_ = n;
  job_parts_ = static_cast<int>(parts);
  // Every worker observes the epoch, even those without a share this time,
  // so that pending_ counts them all and the job fields stay stable until
  // each has looked at them.
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  epoch_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) epoch_.notify_all();

  RunShare(0);
  while (pending_.load(std::memory_order_acquire) != 0) LLM_CPU_RELAX();
}

void ThreadPool::WorkerLoop(int index) {
  uint32_t seen = 0;
  for (;;) {
    uint32_t now = epoch_.load(std::memory_order_acquire);
    for (int i = 0; now == seen && i < kSpinIterations; ++i) {
      LLM_CPU_RELAX();
      now = epoch_.load(std::memory_order_acquire);
    }
    if (now == seen) {
      // Register as a sleeper before re-checking: the caller bumps epoch_
      // and then reads sleepers_ (both seq_cst), so either we see the new
      // epoch here or the caller sees us and notifies.
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      while ((now = epoch_.load(std::memory_order_seq_cst)) == seen) epoch_.wait(seen);
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
    }
    seen = now;
    if (stop_.load(std::memory_order_relaxed)) return;
    RunShare(index);
    pending_.fetch_sub(1, std::memory_order_release);
  }
}

}  // namespace llm
