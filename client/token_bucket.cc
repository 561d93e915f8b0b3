#include "client/token_bucket.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace rsc::client {
namespace {

constexpr double kNanosPerSecond = 1e9;

}  // namespace

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
  // Nanoseconds times qps, then divided, keeps whole-token refills exact
  // (100 ms at 10 qps is exactly one token), so waits come out exact too.
  const double earned =
      static_cast<double>(std::chrono::nanoseconds(now - last_).count()) * qps_ / kNanosPerSecond;
  tokens_ = std::min(burst_, tokens_ + earned);
  last_ = now;
}

Clock::Duration TokenBucket::reserve() {
  if (qps_ <= 0) {
    return Clock::Duration::zero();
  }
  std::lock_guard lock(mu_);
  refill(clock_.now());
  tokens_ -= 1;
  if (tokens_ >= 0) {
    return Clock::Duration::zero();
  }
  const double wait_nanos = -tokens_ * kNanosPerSecond / qps_;
  return std::chrono::duration_cast<Clock::Duration>(
      std::chrono::nanoseconds(std::llround(wait_nanos)));
}

Clock::Duration TokenBucket::acquire() {
  const Clock::Duration wait = reserve();
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
