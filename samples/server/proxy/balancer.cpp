#include "proxy/balancer.h"

#include <algorithm>

namespace proxy {

Balancer::Balancer(std::vector<Upstream> servers) : servers_(std::move(servers)), in_flight_(servers_.size(), 0) {}

std::vector<size_t> Balancer::Order() {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t n = servers_.size();
  std::vector<size_t> order(n);
  // Rotated by the turn, then stably sorted by load: equal loads keep the
  // rotation, so idle servers take requests in turn.
  for (size_t k = 0; k < n; ++k) order[k] = (turn_ + k) % n;
  std::stable_sort(order.begin(), order.end(), [this](size_t a, size_t b) { return in_flight_[a] < in_flight_[b]; });
  turn_ = n == 0 ? 0 : (turn_ + 1) % n;
  return order;
}

Balancer::InFlight::InFlight(Balancer* b, size_t i) : b_(b), i_(i) {
  std::lock_guard<std::mutex> lock(b_->mu_);
  ++b_->in_flight_[i_];
}

Balancer::InFlight::~InFlight() {
  std::lock_guard<std::mutex> lock(b_->mu_);
  --b_->in_flight_[i_];
}

}  // namespace proxy
