// ThreadPool: a persistent pool for data-parallel loops (n - 1 workers plus
// the calling thread).
//
// Why hand-rolled: a forward pass of a small model issues a few parallel loops
// per layer, each lasting microseconds, so what matters is dispatch latency.
// Workers spin for a short while after each job (the next loop of the same step
// usually arrives within that window) and then sleep on an atomic wait
// (a futex on Linux), so an idle engine burns no CPU.
//
// Work split: ParallelFor(n, fn) cuts [0, n) into P = min(n, threads) fixed
// contiguous chunks, chunk i = [n*i/P, n*(i+1)/P). Which thread runs which
// chunk is decided at run time (threads claim chunks from a shared counter),
// so a worker that the OS has not scheduled yet never stalls the caller: the
// caller simply runs the remaining chunks itself. Callers keep results
// independent of all this by splitting only over independent outputs (rows,
// heads), never inside a reduction.
//
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace llm {

// One iteration of a spin-wait: a hint to the core (x86 PAUSE, Arm YIELD).
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

class ThreadPool {
 public:
  // n_threads <= 0: one per hardware thread. The caller counts as one thread.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return n_threads_; }

  // Calls fn(begin, end, thread_index) for each chunk of [0, n) (at most
  // min(n, n_threads(), max_threads) chunks) and returns when all are done.
  // thread_index is in [0, n_threads()) and identifies the running thread, so
  // it can index per-thread scratch. No allocation: `fn` is passed by
  // reference (type-erased to a pointer).
  template <typename Fn>
  void ParallelFor(int64_t n, Fn&& fn, int max_threads = 1 << 30) {
    int64_t parts = n_threads_ < max_threads ? n_threads_ : max_threads;
    Run(n, parts, &fn, &Call<std::remove_reference_t<Fn>>);
  }

  // Like ParallelFor, but cuts [0, n) into min(n, n_chunks) chunks (at most
  // 65535), more than there are threads, which threads claim one at a time as
  // they finish: for loops whose items differ in cost. Single-threaded pools
  // make one call.
  template <typename Fn>
  void ParallelForDynamic(int64_t n, int64_t n_chunks, Fn&& fn) {
    Run(n, n_threads_ > 1 ? n_chunks : 1, &fn, &Call<std::remove_reference_t<Fn>>);
  }

 private:
  using Thunk = void (*)(void* ctx, int64_t begin, int64_t end, int thread);

  template <typename F>
  static void Call(void* ctx, int64_t b, int64_t e, int t) {
    (*static_cast<F*>(ctx))(b, e, t);
  }
  // Runs `thunk` over [0, n) cut into min(n, parts, 65535) chunks.
  void Run(int64_t n, int64_t parts, void* ctx, Thunk thunk);
  void WorkerLoop(int index);
  // Claims and runs chunks of job `epoch` until none is left.
  void RunChunks(uint32_t epoch, int thread);

  int n_threads_ = 1;
  std::vector<std::thread> workers_;

  // The current job; written by the caller before claim_ is published
  // (release), read by a thread only after it has claimed a chunk (acquire),
  // and not rewritten until every chunk is done.
  void* job_ctx_ = nullptr;
  Thunk job_thunk_ = nullptr;
  int64_t job_n_ = 0;

  // claim_ = epoch (32 bits) | chunk count (16) | next unclaimed chunk (16):
  // one CAS claims a chunk of the current job and fails for a stale one.
  alignas(64) std::atomic<uint64_t> claim_{0};
  alignas(64) std::atomic<uint32_t> epoch_{0};  // bumped per job; workers wait on it
  alignas(64) std::atomic<uint32_t> done_{0};   // chunks finished in the current job
  std::atomic<bool> caller_waiting_{false};      // the caller sleeps on done_ (after a short spin)
  alignas(64) std::atomic<int> sleepers_{0};    // workers blocked in epoch_.wait
  std::atomic<bool> stop_{false};
};

}  // namespace llm
