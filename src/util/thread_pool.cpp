#include "util/thread_pool.h"

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace llm {
namespace {

// Spin iterations before a worker sleeps: a pause is some tens of ns, so this
// is a few tens of microseconds: longer than the gap between two parallel
// loops of one forward pass, far shorter than an idle period.
constexpr int kSpinIterations = 2000;
// Spin iterations before the caller sleeps waiting for the last chunk. A
// worker that is running finishes well within this; one the OS has preempted
// (a busy machine) may be milliseconds away, and a spinning caller would keep
// its core from that worker (an idle core pulls a waiting thread over).
constexpr int kJoinSpinIterations = 1000;
constexpr int kMaxChunks = 0xffff;

// Sleep while *word == expected / wake every sleeper. A raw futex on Linux
// (libstdc++ 12's std::atomic::wait can miss a notify); elsewhere the C++20
// atomic wait.
void WaitWhileEqual(std::atomic<uint32_t>* word, uint32_t expected) {
#if defined(__linux__)
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
#else
  word->wait(expected, std::memory_order_seq_cst);
#endif
}

void WakeAll(std::atomic<uint32_t>* word) {
#if defined(__linux__)
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, 0x7fffffff, nullptr, nullptr, 0);
#else
  word->notify_all();
#endif
}

uint32_t EpochOf(uint64_t c) { return static_cast<uint32_t>(c >> 32); }
uint32_t PartsOf(uint64_t c) { return static_cast<uint32_t>(c >> 16) & 0xffffu; }
uint32_t NextOf(uint64_t c) { return static_cast<uint32_t>(c) & 0xffffu; }

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) {
    n_threads = static_cast<int>(std::thread::hardware_concurrency());
    if (n_threads <= 0) n_threads = 1;
  }
  if (n_threads > kMaxChunks) n_threads = kMaxChunks;
  n_threads_ = n_threads;
  workers_.reserve(n_threads_ - 1);
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_relaxed);
  epoch_.fetch_add(1, std::memory_order_seq_cst);
  WakeAll(&epoch_);
  for (auto& w : workers_) w.join();
}

void ThreadPool::RunChunks(uint32_t epoch, int thread) {
  uint64_t c = claim_.load(std::memory_order_acquire);
  for (;;) {
    if (EpochOf(c) != epoch || NextOf(c) >= PartsOf(c)) return;
    if (!claim_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    const int64_t parts = PartsOf(c), i = NextOf(c);
    job_thunk_(job_ctx_, job_n_ * i / parts, job_n_ * (i + 1) / parts, thread);
    // seq_cst pairs with Run's join: either the caller sees this chunk done
    // or we see it waiting and wake it.
    if (done_.fetch_add(1, std::memory_order_seq_cst) + 1 == parts &&
        caller_waiting_.load(std::memory_order_seq_cst))
      WakeAll(&done_);
    c = claim_.load(std::memory_order_acquire);
  }
}

void ThreadPool::Run(int64_t n, int64_t parts, void* ctx, Thunk thunk) {
  if (n <= 0) return;
  if (parts > n) parts = n;
  if (parts > kMaxChunks) parts = kMaxChunks;
  if (parts <= 1) {
    thunk(ctx, 0, n, 0);
    return;
  }
  job_ctx_ = ctx;
  job_thunk_ = thunk;
  job_n_ = n;
  done_.store(0, std::memory_order_relaxed);
  const uint32_t epoch = epoch_.load(std::memory_order_relaxed) + 1;
  claim_.store((static_cast<uint64_t>(epoch) << 32) | (static_cast<uint64_t>(parts) << 16),
               std::memory_order_release);
  // Publish the epoch, then look for sleepers (both seq_cst: see WorkerLoop).
  epoch_.store(epoch, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) WakeAll(&epoch_);

  RunChunks(epoch, 0);
  const uint32_t all = static_cast<uint32_t>(parts);
  uint32_t d = done_.load(std::memory_order_acquire);
  for (int i = 0; d != all && i < kJoinSpinIterations; ++i) {
    CpuRelax();
    d = done_.load(std::memory_order_acquire);
  }
  if (d != all) {
    caller_waiting_.store(true, std::memory_order_seq_cst);
    while ((d = done_.load(std::memory_order_seq_cst)) != all) WaitWhileEqual(&done_, d);
    caller_waiting_.store(false, std::memory_order_relaxed);
  }
}

void ThreadPool::WorkerLoop(int index) {
  // Epoch 0 is the pool's start: a worker that starts late still sees every
  // later epoch (and the destructor's) as new.
  uint32_t seen = 0;
  for (;;) {
    uint32_t now = epoch_.load(std::memory_order_acquire);
    for (int i = 0; now == seen && i < kSpinIterations; ++i) {
      CpuRelax();
      now = epoch_.load(std::memory_order_acquire);
    }
    if (now == seen) {
      // Register as a sleeper before re-checking: the caller stores epoch_
      // and then reads sleepers_, so either we see the new epoch here or the
      // caller sees us and notifies.
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      while ((now = epoch_.load(std::memory_order_seq_cst)) == seen) WaitWhileEqual(&epoch_, seen);
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
    }
    seen = now;
    if (stop_.load(std::memory_order_acquire)) return;
    RunChunks(seen, index);
  }
}

}  // namespace llm
