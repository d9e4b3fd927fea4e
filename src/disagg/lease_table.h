// The producer's leases: each holds one finished request's KV stream (a
// host copy of its prompt's full blocks, written by kvstate::ExportKv) until
// a consumer has pulled it, or until it expires. Every PULL extends the
// lease by its duration, so a slow transfer is not cut off while it moves;
// DONE (or the last byte pulled) ends it. Expired leases are dropped on the
// next call (Sweep), and counted. Thread-safe: the engine thread adds, the
// transport's thread finds and releases. A lease id is 64 random bits: with
// the producer's address it is all a peer needs to read the KV (which
// reveals the prompt), so descriptors are secrets between the servers and
// the listener belongs on a private network (docs/DISAGG.md, "Security").
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <unordered_map>
#include <vector>

namespace llm::disagg {

using LeaseClock = std::chrono::steady_clock;
using LeaseBytes = std::shared_ptr<const std::vector<uint8_t>>;

struct LeaseCounters {
  uint64_t expired = 0;       // dropped unfetched
  uint64_t served = 0;        // released after a complete pull
  uint64_t bytes_served = 0;  // PULL bytes sent
  int32_t active = 0;
  uint64_t bytes_held = 0;
};

class LeaseTable {
 public:
  explicit LeaseTable(std::chrono::milliseconds duration);

  // A new lease on `stream` (random, non-zero id).
  uint64_t Add(std::vector<uint8_t> stream, int32_t n_tokens);
  struct Found {
    LeaseBytes bytes;  // null: no such lease (unknown, expired, released)
    int32_t n_tokens = 0;
  };
  // Finds a live lease and extends it by the duration.
  Found FindAndExtend(uint64_t id);
  void CountServed(uint64_t bytes);
  // Ends a lease (DONE): `complete` counts it as served.
  void Release(uint64_t id, bool complete);
  LeaseCounters counters();
  std::chrono::milliseconds duration() const { return duration_; }

 private:
  void SweepLocked(LeaseClock::time_point now);
  struct Lease {
    LeaseBytes bytes;
    int32_t n_tokens = 0;
    LeaseClock::time_point expiry;
  };
  const std::chrono::milliseconds duration_;
  std::mutex mu_;
  std::random_device random_;
  std::unordered_map<uint64_t, Lease> leases_;
  LeaseCounters counters_;
};

}  // namespace llm::disagg
