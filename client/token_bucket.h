// TokenBucket: the client-side rate limit of requests to the API server
// (--kube-api-qps / --kube-api-burst), so a burst of reconciles cannot flood it.
// RestKubeApi takes one token before every HTTP attempt. Waiting goes through
// Clock::sleepFor, so tests with a FakeClock never sleep. Thread-safe: waiters
// reserve their slot under the lock and sleep outside it, in arrival order.
#pragma once

#include <mutex>

#include "common/clock.h"

namespace rsc::client {

class TokenBucket {
 public:
  // `qps` tokens are added per second up to `burst` (at least 1); the bucket
  // starts full. qps <= 0 turns the limit off (every acquire is immediate).
  TokenBucket(double qps, int burst, Clock& clock);

  TokenBucket(const TokenBucket&) = delete;
  TokenBucket& operator=(const TokenBucket&) = delete;

  // Takes one token, waiting until it is available. Returns the time waited.
  Clock::Duration acquire();
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
