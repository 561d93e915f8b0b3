#include "controller/reconcile/rate_limiter.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "test/controller/reconcile/default_backoff.h"
#include "test/fakes/fake_clock.h"

namespace rsc::controller::reconcile {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(ExponentialDelay, DoublesFromBaseAndCapsAtMax) {
  EXPECT_EQ(exponentialDelay(milliseconds(5), seconds(1000), 0), milliseconds(5));
  EXPECT_EQ(exponentialDelay(milliseconds(5), seconds(1000), 1), milliseconds(10));
  EXPECT_EQ(exponentialDelay(milliseconds(5), seconds(1000), 17), milliseconds(655360));
  EXPECT_EQ(exponentialDelay(milliseconds(5), seconds(1000), 18), seconds(1000));
  // Far past the point where base * 2^n overflows 64 bits.
  EXPECT_EQ(exponentialDelay(milliseconds(5), seconds(1000), 62), seconds(1000));
  EXPECT_EQ(exponentialDelay(milliseconds(5), seconds(1000), 63), seconds(1000));
  EXPECT_EQ(exponentialDelay(milliseconds(5), seconds(1000), 100000), seconds(1000));
  EXPECT_EQ(exponentialDelay(milliseconds(5), milliseconds(1), 0), milliseconds(1));
}

TEST(ItemExponentialFailureRateLimiter, BackoffDoublesPerKeyUpToMax) {
  ItemExponentialFailureRateLimiter<std::string> limiter;
  std::vector<Clock::Duration> delays;
  delays.reserve(20);
  for (int i = 0; i < 20; ++i) {
    delays.push_back(limiter.when("a"));
  }
  expectDefaultBackoff(delays);
  EXPECT_EQ(limiter.numRequeues("a"), 20);

  // Another key has its own count.
  EXPECT_EQ(limiter.when("b"), milliseconds(5));
  EXPECT_EQ(limiter.numRequeues("b"), 1);
}

TEST(ItemExponentialFailureRateLimiter, ForgetStartsOver) {
  ItemExponentialFailureRateLimiter<std::string> limiter(milliseconds(1), seconds(1));
  limiter.when("a");
  limiter.when("a");
  limiter.when("b");
  EXPECT_EQ(limiter.numRequeues("a"), 2);

  limiter.forget("a");

  EXPECT_EQ(limiter.numRequeues("a"), 0);
  EXPECT_EQ(limiter.when("a"), milliseconds(1));
  EXPECT_EQ(limiter.numRequeues("b"), 1);
  EXPECT_EQ(limiter.when("b"), milliseconds(2));
}

TEST(BucketRateLimiter, AllowsBurstThenSpacesAtQps) {
  testing::FakeClock clock;
  BucketRateLimiter<std::string> limiter(clock, 10, 100);

  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(limiter.when("k" + std::to_string(i)), Clock::Duration::zero()) << i;
  }
  // Each further try reserves the next token, 100 ms after the previous one.
  EXPECT_EQ(limiter.when("x"), milliseconds(100));
  EXPECT_EQ(limiter.when("x"), milliseconds(200));
  EXPECT_EQ(limiter.when("y"), milliseconds(300));

  // One second brings 10 tokens; 3 pay back the debt, 7 are free.
  clock.advance(seconds(1));
  for (int i = 0; i < 7; ++i) {
    ASSERT_EQ(limiter.when("z"), Clock::Duration::zero()) << i;
  }
  EXPECT_EQ(limiter.when("z"), milliseconds(100));

  // Half a token's time halves the wait for the next one.
  clock.advance(milliseconds(50));
  EXPECT_EQ(limiter.when("z"), milliseconds(150));

  EXPECT_EQ(limiter.numRequeues("x"), 0);
  limiter.forget("x");
  EXPECT_EQ(limiter.when("x"), milliseconds(250));
}

TEST(BucketRateLimiter, RefillStopsAtBurst) {
  testing::FakeClock clock;
  BucketRateLimiter<std::string> limiter(clock, 10, 100);
  clock.advance(std::chrono::hours(1));
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(limiter.when("a"), Clock::Duration::zero()) << i;
  }
  EXPECT_EQ(limiter.when("a"), milliseconds(100));
}

// A limiter with a fixed answer that records what it was asked.
class FixedRateLimiter final : public RateLimiter<std::string> {
 public:
  FixedRateLimiter(Clock::Duration delay, int requeues) : delay_(delay), requeues_(requeues) {}

  Clock::Duration when(const std::string& /*key*/) override {
    ++whens_;
    return delay_;
  }
  void forget(const std::string& key) override { forgotten_.push_back(key); }
  int numRequeues(const std::string& /*key*/) const override { return requeues_; }

  int whens() const { return whens_; }
  const std::vector<std::string>& forgotten() const { return forgotten_; }

 private:
  Clock::Duration delay_;
  int requeues_;
  int whens_ = 0;
  std::vector<std::string> forgotten_;
};

TEST(MaxOfRateLimiter, TakesTheLongestDelayAndAsksEveryLimiter) {
  auto short_limiter = std::make_unique<FixedRateLimiter>(milliseconds(3), 7);
  auto long_limiter = std::make_unique<FixedRateLimiter>(milliseconds(40), 2);
  FixedRateLimiter* short_ptr = short_limiter.get();
  FixedRateLimiter* long_ptr = long_limiter.get();
  std::vector<std::unique_ptr<RateLimiter<std::string>>> limiters;
  limiters.push_back(std::move(short_limiter));
  limiters.push_back(std::move(long_limiter));
  MaxOfRateLimiter<std::string> limiter(std::move(limiters));

  EXPECT_EQ(limiter.when("a"), milliseconds(40));
  EXPECT_EQ(short_ptr->whens(), 1);
  EXPECT_EQ(long_ptr->whens(), 1);
  EXPECT_EQ(limiter.numRequeues("a"), 7);

  limiter.forget("a");
  EXPECT_EQ(short_ptr->forgotten(), std::vector<std::string>{"a"});
  EXPECT_EQ(long_ptr->forgotten(), std::vector<std::string>{"a"});
}

TEST(DefaultControllerRateLimiter, CombinesPerKeyBackoffAndOverallBucket) {
  testing::FakeClock clock;
  std::unique_ptr<RateLimiter<std::string>> limiter =
      defaultControllerRateLimiter<std::string>(clock);

  // Per-key backoff while the bucket has tokens.
  EXPECT_EQ(limiter->when("a"), milliseconds(5));
  EXPECT_EQ(limiter->when("a"), milliseconds(10));
  EXPECT_EQ(limiter->when("a"), milliseconds(20));
  EXPECT_EQ(limiter->numRequeues("a"), 3);
  limiter->forget("a");
  EXPECT_EQ(limiter->numRequeues("a"), 0);
  EXPECT_EQ(limiter->when("a"), milliseconds(5));

  // Four tokens are gone; once the burst is spent the bucket's wait exceeds a
  // new key's 5 ms.
  for (int i = 0; i < 96; ++i) {
    ASSERT_EQ(limiter->when("k" + std::to_string(i)), milliseconds(5)) << i;
  }
  EXPECT_EQ(limiter->when("late"), milliseconds(100));
  EXPECT_EQ(limiter->numRequeues("late"), 1);
}

}  // namespace
}  // namespace rsc::controller::reconcile
