// Rate limiters that tell the WorkQueue how long a key must wait before it is
// retried: per-key exponential backoff, an overall token bucket, and the max of
// several. They only compute durations; the WorkQueue does the waiting. Used by
// WorkQueue::addRateLimited. All limiters are thread-safe.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "client/token_bucket.h"
#include "common/clock.h"

namespace rsc::controller::reconcile {

// The default first retry delay of a failing key. Short, because most failures
// (a conflict, a slice the cache had not yet seen) are fixed by the next try.
inline constexpr Clock::Duration kDefaultBaseDelay = std::chrono::milliseconds(5);
// The default longest retry delay of a failing key: about 17 minutes, so a pool
// that keeps failing is still retried a few times an hour without flooding the
// API server. 5 ms doubled 18 times exceeds it.
inline constexpr Clock::Duration kDefaultMaxDelay = std::chrono::seconds(1000);
// The default overall retry rate and burst: a burst of 100 lets many pools fail
// at once (an API server restart) and retry quickly; afterwards all retries
// together are held to 10 per second.
inline constexpr double kDefaultRetryQps = 10;
inline constexpr int kDefaultRetryBurst = 100;

// Decides how long a key waits before it is retried. Implementations are
// thread-safe.
template <typename Key>
class RateLimiter {
 public:
  virtual ~RateLimiter() = default;

  // Returns how long `key` must wait before its next try, and records the try.
  virtual Clock::Duration when(const Key& key) = 0;
  // Stops tracking `key`: call it when the key succeeded, so its next failure
  // starts again at the shortest delay.
  virtual void forget(const Key& key) = 0;
  // Returns how many times `key` has been retried since it was last forgotten.
  virtual int numRequeues(const Key& key) const = 0;
};

// Returns base * 2^failures, capped at `max` (also when the product overflows).
Clock::Duration exponentialDelay(Clock::Duration base, Clock::Duration max, int failures);

// Per-key exponential backoff: base, 2*base, 4*base, ... capped at max; forget()
// starts a key over. Thread-safe.
template <typename Key, typename Hash = std::hash<Key>>
class ItemExponentialFailureRateLimiter final : public RateLimiter<Key> {
 public:
  explicit ItemExponentialFailureRateLimiter(Clock::Duration base = kDefaultBaseDelay,
                                             Clock::Duration max = kDefaultMaxDelay)
      : base_(base), max_(max) {}

  Clock::Duration when(const Key& key) override {
    std::lock_guard lock(mu_);
    int& failures = failures_[key];
    const Clock::Duration delay = exponentialDelay(base_, max_, failures);
    // Past the cap the count only feeds numRequeues; do not let it wrap.
    if (failures < std::numeric_limits<int>::max()) {
      ++failures;
    }
    return delay;
  }

  void forget(const Key& key) override {
    std::lock_guard lock(mu_);
    failures_.erase(key);
  }

  int numRequeues(const Key& key) const override {
    std::lock_guard lock(mu_);
    auto it = failures_.find(key);
    return it == failures_.end() ? 0 : it->second;
  }

 private:
  const Clock::Duration base_;
  const Clock::Duration max_;
  mutable std::mutex mu_;
  std::unordered_map<Key, int, Hash> failures_;  // guarded by mu_
};

// One token bucket (client/token_bucket.h) shared by every key: limits the
// overall retry rate, whichever keys fail. It keeps no per-key state, so forget() does nothing and
// numRequeues() is always 0. Thread-safe.
template <typename Key>
class BucketRateLimiter final : public RateLimiter<Key> {
 public:
  BucketRateLimiter(Clock& clock, double qps, int burst) : bucket_(qps, burst, clock) {}

  Clock::Duration when(const Key& /*key*/) override { return bucket_.reserve(); }
  void forget(const Key& /*key*/) override {}
  int numRequeues(const Key& /*key*/) const override { return 0; }

 private:
  client::TokenBucket bucket_;
};

// Combines limiters: a key waits as long as the strictest of them says. when()
// asks every limiter, so each one records the try. Thread-safe when its
// limiters are.
template <typename Key>
class MaxOfRateLimiter final : public RateLimiter<Key> {
 public:
  explicit MaxOfRateLimiter(std::vector<std::unique_ptr<RateLimiter<Key>>> limiters)
      : limiters_(std::move(limiters)) {}

  Clock::Duration when(const Key& key) override {
    Clock::Duration longest = Clock::Duration::zero();
    for (auto& limiter : limiters_) {
      longest = std::max(longest, limiter->when(key));
    }
    return longest;
  }

  void forget(const Key& key) override {
    for (auto& limiter : limiters_) {
      limiter->forget(key);
    }
  }

  int numRequeues(const Key& key) const override {
    int most = 0;
    for (const auto& limiter : limiters_) {
      most = std::max(most, limiter->numRequeues(key));
    }
    return most;
  }

 private:
  const std::vector<std::unique_ptr<RateLimiter<Key>>> limiters_;
};

// Returns the limiter controllers use unless told otherwise: per-key backoff
// from 5 ms to 1000 s, and at most 10 retries a second overall after a burst of
// 100. `clock` must outlive the limiter.
template <typename Key, typename Hash = std::hash<Key>>
std::unique_ptr<RateLimiter<Key>> defaultControllerRateLimiter(Clock& clock) {
  std::vector<std::unique_ptr<RateLimiter<Key>>> limiters;
  limiters.push_back(std::make_unique<ItemExponentialFailureRateLimiter<Key, Hash>>(
      kDefaultBaseDelay, kDefaultMaxDelay));
  limiters.push_back(
      std::make_unique<BucketRateLimiter<Key>>(clock, kDefaultRetryQps, kDefaultRetryBurst));
  return std::make_unique<MaxOfRateLimiter<Key>>(std::move(limiters));
}

}  // namespace rsc::controller::reconcile
