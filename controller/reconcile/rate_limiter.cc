#include "controller/reconcile/rate_limiter.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace rsc::controller::reconcile {

Clock::Duration exponentialDelay(Clock::Duration base, Clock::Duration max, int failures) {
  if (base <= Clock::Duration::zero()) {
    return Clock::Duration::zero();
  }
  if (failures <= 0) {
    return std::min(base, max);
  }
  // Integer arithmetic: base * 2^failures > max exactly when base > floor(max / 2^failures),
  // and checking that first keeps the shift from overflowing.
  const Clock::Duration::rep b = base.count();
  const Clock::Duration::rep m = max.count();
  if (failures >= std::numeric_limits<Clock::Duration::rep>::digits || b > (m >> failures)) {
    return max;
  }
  return Clock::Duration(b << failures);
}

TokenBucket::TokenBucket(Clock& clock, double qps, int burst)
    : clock_(clock), qps_(qps), burst_(burst), tokens_(burst), last_(clock.now()) {
  if (!(qps > 0) || burst < 1) {
    std::fprintf(stderr, "TokenBucket: qps must be > 0 and burst >= 1, got qps=%g burst=%d\n", qps,
                 burst);
    std::abort();
  }
}

Clock::Duration TokenBucket::reserve() {
  constexpr double kNanosPerSecond = 1e9;
  std::lock_guard lock(mu_);
  const Clock::TimePoint now = clock_.now();
  if (now > last_) {
    // Nanoseconds times qps, then divided, keeps whole-token refills exact
    // (100 ms at 10 qps is exactly one token), so delays come out exact too.
    const double refill =
        static_cast<double>(std::chrono::nanoseconds(now - last_).count()) * qps_ / kNanosPerSecond;
    tokens_ = std::min(burst_, tokens_ + refill);
    last_ = now;
  }
  tokens_ -= 1;
  if (tokens_ >= 0) {
    return Clock::Duration::zero();
  }
  const double wait_nanos = -tokens_ * kNanosPerSecond / qps_;
  return std::chrono::duration_cast<Clock::Duration>(
      std::chrono::nanoseconds(std::llround(wait_nanos)));
}

}  // namespace rsc::controller::reconcile
