#include "controller/reconcile/rate_limiter.h"

#include <algorithm>
#include <limits>

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

}  // namespace rsc::controller::reconcile
