// Hands memory freed by requests back to the system when the server goes
// idle. The strings and JSON nodes of a request are freed into its worker
// thread's malloc arena, where glibc keeps them resident (each worker has
// an arena of its own), so a burst of large or many requests would leave
// the resident size at its peak. When the last request in flight ends,
// malloc_trim releases the free pages of every arena: at once after a
// request whose body was over kLargeBodyBytes, else at most once per
// kMinInterval.
#pragma once

#include <malloc.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace server {

class IdleTrim {
 public:
  static constexpr size_t kLargeBodyBytes = size_t{1} << 20;
  static constexpr std::chrono::milliseconds kMinInterval{1000};

  // One per request handler, alive while it runs.
  class Scope {
   public:
    explicit Scope(IdleTrim* t) : t_(t) { t_->active_.fetch_add(1); }
    ~Scope() { t_->Leave(large_); }
    void set_body_bytes(size_t n) { large_ = n > kLargeBodyBytes; }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    IdleTrim* t_;
    bool large_ = false;
  };

 private:
  void Leave(bool large) {
    if (large) large_pending_ = true;
    if (active_.fetch_sub(1) != 1) return;  // others still run: the last one trims
    const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count();
    int64_t last = last_ms_.load();
    if (!large_pending_.exchange(false) && now - last < kMinInterval.count()) return;
    if (!last_ms_.compare_exchange_strong(last, now)) return;  // another thread is trimming
    malloc_trim(0);
  }

  std::atomic<int> active_{0};
  std::atomic<bool> large_pending_{false};
  std::atomic<int64_t> last_ms_{0};
};

}  // namespace server
