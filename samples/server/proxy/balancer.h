// Which of several servers of one kind (prefill or decode) the proxy sends a
// request to: the one with the fewest of the proxy's requests in flight,
// ties taken in turn (round robin), and the others after it in the same
// order, for a retry when the first cannot be connected to.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "proxy/upstream.h"

namespace proxy {

class Balancer {
 public:
  explicit Balancer(std::vector<Upstream> servers);
  size_t size() const { return servers_.size(); }
  const Upstream& at(size_t i) const { return servers_[i]; }
  // Every server's index, the least loaded first (ties in turn).
  std::vector<size_t> Order();

  // A request in flight on server i, from construction to destruction.
  class InFlight {
   public:
    InFlight(Balancer* b, size_t i);
    ~InFlight();
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;

   private:
    Balancer* b_;
    size_t i_;
  };
  std::unique_ptr<InFlight> Begin(size_t i) { return std::make_unique<InFlight>(this, i); }

 private:
  std::vector<Upstream> servers_;
  std::mutex mu_;
  std::vector<int> in_flight_;
  size_t turn_ = 0;
};

}  // namespace proxy
