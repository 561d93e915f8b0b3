#include "client/token_bucket.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace rsc::client {

TokenBucket::TokenBucket(double qps, int burst, Clock& clock)
    : qps_(qps),
      burst_(static_cast<double>(std::max(burst, 1))),
      clock_(clock),
      tokens_(burst_),
      last_(clock.now()) {}

void TokenBucket::refill(Clock::TimePoint now) {
  if (now <= last_) {
    return;
  }
  const double elapsed = std::chrono::duration<double>(now - last_).count();
  tokens_ = std::min(burst_, tokens_ + elapsed * qps_);
  last_ = now;
}

Clock::Duration TokenBucket::acquire() {
  if (qps_ <= 0) {
    return Clock::Duration::zero();
  }
  Clock::Duration wait{};
  {
    std::lock_guard lock(mu_);
    refill(clock_.now());
    tokens_ -= 1;
    if (tokens_ < 0) {
      wait = std::chrono::ceil<Clock::Duration>(std::chrono::duration<double>(-tokens_ / qps_));
    }
  }
  if (wait > Clock::Duration::zero()) {
    clock_.sleepFor(wait);
  }
  return wait;
}

bool TokenBucket::tryAcquire() {
  if (qps_ <= 0) {
    return true;
  }
  std::lock_guard lock(mu_);
  refill(clock_.now());
  if (tokens_ < 1) {
    return false;
  }
  tokens_ -= 1;
  return true;
}

}  // namespace rsc::client
