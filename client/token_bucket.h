// TokenBucket: the one token bucket of the project. RestKubeApi takes a token
// before every HTTP attempt (--kube-api-qps / --kube-api-burst), the
// authenticator limits TokenReviews with it, and the work queue's
// BucketRateLimiter spaces retries with reserve(). Waiting goes through
// Clock::sleepFor, so tests with a FakeClock never sleep. Thread-safe: callers
// reserve their slot under the lock and wait outside it, in arrival order.
#pragma once

#include <mutex>

#include "common/clock.h"

namespace rsc::client {

class TokenBucket {
 public:
  // `qps` tokens are added per second up to `burst` (at least 1); the bucket
  // starts full. qps <= 0 turns the limit off (every token is free at once).
  TokenBucket(double qps, int burst, Clock& clock);

  TokenBucket(const TokenBucket&) = delete;
  TokenBucket& operator=(const TokenBucket&) = delete;

  // Takes one token, waiting until it is available. Returns the time waited.
  Clock::Duration acquire();
  // Takes one token, going into debt when the bucket is empty, and returns how
  // long the caller must wait for it (zero if it is available now); never
  // waits itself. Concurrent callers are spaced 1/qps apart.
  Clock::Duration reserve();
  // Takes one token if one is available now; never waits.
  bool tryAcquire();

 private:
  // Adds the tokens earned since the last call. Requires mu_.
  void refill(Clock::TimePoint now);

  const double qps_;
  const double burst_;
  Clock& clock_;
  std::mutex mu_;
  // May go negative: each waiter owes what it reserved, so later callers
  // queue behind it instead of racing it for the next token.
  double tokens_;
  Clock::TimePoint last_;
};

}  // namespace rsc::client
