#include "disagg/lease_table.h"

namespace llm::disagg {

LeaseTable::LeaseTable(std::chrono::milliseconds duration) : duration_(duration) {}

void LeaseTable::SweepLocked(LeaseClock::time_point now) {
  for (auto it = leases_.begin(); it != leases_.end();) {
    if (it->second.expiry <= now) {
      counters_.bytes_held -= it->second.bytes->size();
      ++counters_.expired;
      it = leases_.erase(it);
    } else {
      ++it;
    }
  }
  counters_.active = int32_t(leases_.size());
}

uint64_t LeaseTable::Add(std::vector<uint8_t> stream, int32_t n_tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = LeaseClock::now();
  SweepLocked(now);
  uint64_t id = 0;
  // Each id straight from the system's random source (/dev/urandom on
  // Linux): a descriptor's lease is what lets a peer read the KV, so ids
  // must not be predictable from the ones handed out before.
  while (id == 0 || leases_.count(id) != 0) id = uint64_t(random_()) << 32 | random_();
  counters_.bytes_held += stream.size();
  leases_[id] = {std::make_shared<const std::vector<uint8_t>>(std::move(stream)), n_tokens, now + duration_};
  counters_.active = int32_t(leases_.size());
  return id;
}

LeaseTable::Found LeaseTable::FindAndExtend(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = LeaseClock::now();
  SweepLocked(now);
  auto it = leases_.find(id);
  if (it == leases_.end()) return {};
  it->second.expiry = now + duration_;
  return {it->second.bytes, it->second.n_tokens};
}

void LeaseTable::CountServed(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  counters_.bytes_served += bytes;
}

void LeaseTable::Release(uint64_t id, bool complete) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = leases_.find(id);
  if (it != leases_.end()) {
    counters_.bytes_held -= it->second.bytes->size();
    leases_.erase(it);
    if (complete) ++counters_.served;
  }
  SweepLocked(LeaseClock::now());
}

LeaseCounters LeaseTable::counters() {
  std::lock_guard<std::mutex> lock(mu_);
  SweepLocked(LeaseClock::now());
  return counters_;
}

}  // namespace llm::disagg
