#include "client/token_bucket.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "test/fakes/fake_clock.h"

namespace rsc::client {
namespace {

using std::chrono::milliseconds;
using testing::FakeClock;

TEST(TokenBucket, BurstIsFreeThenWaitsOneIntervalPerToken) {
  FakeClock clock;
  TokenBucket bucket(/*qps=*/10, /*burst=*/3, clock);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(bucket.acquire(), Clock::Duration::zero()) << i;
  }
  EXPECT_TRUE(clock.sleeps().empty());
  // Every further token costs 1/qps, waited through the clock.
  EXPECT_EQ(bucket.acquire(), milliseconds(100));
  EXPECT_EQ(bucket.acquire(), milliseconds(100));
  ASSERT_EQ(clock.sleeps().size(), 2u);
  EXPECT_EQ(clock.sleeps()[0], milliseconds(100));
}

TEST(TokenBucket, RefillsWithTimeUpToBurst) {
  FakeClock clock;
  TokenBucket bucket(/*qps=*/2, /*burst=*/2, clock);
  EXPECT_TRUE(bucket.tryAcquire());
  EXPECT_TRUE(bucket.tryAcquire());
  EXPECT_FALSE(bucket.tryAcquire());
  clock.advance(milliseconds(500));
  EXPECT_TRUE(bucket.tryAcquire());
  EXPECT_FALSE(bucket.tryAcquire());
  // A long pause earns no more than `burst` tokens.
  clock.advance(std::chrono::hours(1));
  EXPECT_TRUE(bucket.tryAcquire());
  EXPECT_TRUE(bucket.tryAcquire());
  EXPECT_FALSE(bucket.tryAcquire());
}

TEST(TokenBucket, PartialRefillShortensTheWait) {
  FakeClock clock;
  TokenBucket bucket(/*qps=*/4, /*burst=*/1, clock);
  EXPECT_EQ(bucket.acquire(), Clock::Duration::zero());
  clock.advance(milliseconds(100));  // 0.4 of a token earned
  EXPECT_EQ(bucket.acquire(), milliseconds(150));
}

TEST(TokenBucket, ReserveGoesIntoDebtAndNeverSleeps) {
  FakeClock clock;
  TokenBucket bucket(/*qps=*/10, /*burst=*/2, clock);
  EXPECT_EQ(bucket.reserve(), Clock::Duration::zero());
  EXPECT_EQ(bucket.reserve(), Clock::Duration::zero());
  // Each further reservation waits for the token after the previous one.
  EXPECT_EQ(bucket.reserve(), milliseconds(100));
  EXPECT_EQ(bucket.reserve(), milliseconds(200));
  EXPECT_TRUE(clock.sleeps().empty());
  // The debt is paid back before a token is free again.
  clock.advance(milliseconds(200));
  EXPECT_FALSE(bucket.tryAcquire());
  EXPECT_EQ(bucket.reserve(), milliseconds(100));
}

TEST(TokenBucket, ZeroQpsDisablesTheLimit) {
  FakeClock clock;
  TokenBucket bucket(/*qps=*/0, /*burst=*/1, clock);
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(bucket.acquire(), Clock::Duration::zero());
    EXPECT_EQ(bucket.reserve(), Clock::Duration::zero());
    EXPECT_TRUE(bucket.tryAcquire());
  }
  EXPECT_TRUE(clock.sleeps().empty());
}

TEST(TokenBucket, BurstBelowOneActsAsOne) {
  FakeClock clock;
  TokenBucket bucket(/*qps=*/1, /*burst=*/0, clock);
  EXPECT_TRUE(bucket.tryAcquire());
  EXPECT_FALSE(bucket.tryAcquire());
}

TEST(TokenBucket, ConcurrentWaitersQueueInsteadOfSharingATokenTwice) {
  FakeClock clock;
  const Clock::TimePoint start = clock.now();
  TokenBucket bucket(/*qps=*/100, /*burst=*/5, clock);
  constexpr int kThreads = 4;
  constexpr int kPerThread = 50;
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) {
        bucket.acquire();
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  // 200 tokens at 100/s with 5 free need at least (200 - 5) / 100 s of the
  // clock, whatever the interleaving: a token is never handed out twice.
  Clock::Duration total{};
  for (auto d : clock.sleeps()) {
    total += d;
  }
  EXPECT_GE(total, milliseconds(1950));
  EXPECT_EQ(clock.now() - start, total);
}

}  // namespace
}  // namespace rsc::client
