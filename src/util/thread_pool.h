// ThreadPool: a persistent pool for data-parallel loops (n - 1 workers plus
// the calling thread).
//
// Why hand-rolled: a forward pass of a small model issues a few parallel loops
// per layer, each lasting microseconds, so what matters is dispatch latency.
// Workers spin for a short while after each job (the next loop of the same step
// usually arrives within that window) and then sleep on an atomic wait
// (a futex on Linux), so an idle engine burns no CPU.
//
// Work split: ParallelFor(n, fn) gives thread i of T the contiguous range
// [n*i/T, n*(i+1)/T). Callers keep results independent of T by splitting only
// over independent outputs (rows, heads), never inside a reduction.
//
// Thread-safety: one ParallelFor at a time per pool (the CPU backend owns its
// pool and is driven by one thread). `fn` must not throw and must not call
// ParallelFor on the same pool.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace llm {

class ThreadPool {
 public:
  // n_threads <= 0: one per hardware thread. The caller counts as one thread.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return n_threads_; }

  // Calls fn(begin, end, thread_index) over a partition of [0, n) into at most
  // min(n, n_threads(), max_threads) non-empty contiguous ranges, one per
  // thread; returns when all are done. thread_index is in [0, n_threads()) and
  // is unique among concurrent calls, so it can index per-thread scratch.
  // No allocation: `fn` is passed by reference (type-erased to a pointer).
  template <typename Fn>
  void ParallelFor(int64_t n, Fn&& fn, int max_threads = 1 << 30) {
    using F = std::remove_reference_t<Fn>;
    Run(n, max_threads, &fn, [](void* ctx, int64_t b, int64_t e, int t) {
      (*static_cast<F*>(ctx))(b, e, t);
    });
  }

 private:
  using Thunk = void (*)(void* ctx, int64_t begin, int64_t end, int thread);

  void Run(int64_t n, int max_threads, void* ctx, Thunk thunk);
  void WorkerLoop(int index);
  void RunShare(int index);

  int n_threads_ = 1;
  std::vector<std::thread> workers_;

  // The current job; written by the caller before epoch_ is bumped (release),
  // read by workers after they observe the new epoch (acquire).
  void* job_ctx_ = nullptr;
  Thunk job_thunk_ = nullptr;
  int64_t job_n_ = 0;
  int job_parts_ = 0;

  alignas(64) std::atomic<uint32_t> epoch_{0};
  alignas(64) std::atomic<int> pending_{0};   // workers still running the job
  alignas(64) std::atomic<int> sleepers_{0};  // workers blocked in epoch_.wait
  std::atomic<bool> stop_{false};
};

}  // namespace llm
