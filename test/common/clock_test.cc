#include "common/clock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stop_token>
#include <thread>

#include "test/fakes/fake_clock.h"

namespace rsc {
namespace {

TEST(FormatTime, WritesRfc3339Utc) {
  const Clock::SystemTime t{std::chrono::seconds(1767225600) + std::chrono::microseconds(42)};
  EXPECT_EQ(formatTime(t), "2026-01-01T00:00:00Z");
  EXPECT_EQ(formatMicroTime(t), "2026-01-01T00:00:00.000042Z");
}

TEST(Rfc3339Seconds, ReadsWhatMetav1TimeReads) {
  const int64_t t = 1'764'583'200;  // 2025-12-01T10:00:00Z
  EXPECT_EQ(rfc3339Seconds("2025-12-01T10:00:00Z"), t);
  EXPECT_EQ(rfc3339Seconds("2025-12-01t10:00:00.999999z"), t) << "fractions dropped";
  EXPECT_EQ(rfc3339Seconds("2025-12-01T12:30:00+02:30"), t);
  EXPECT_EQ(rfc3339Seconds("2025-12-01T09:00:00-01:00"), t);
  EXPECT_EQ(rfc3339Seconds(formatTime(Clock::SystemTime(std::chrono::seconds(t)))), t);
  for (const char* bad :
       {"", "2025-12-01", "2025-12-01T10:00:00", "2025-12-01 10:00:00Z", "2025-02-30T10:00:00Z",
        "2025-12-01T10:00:00+0200", "yesterday", "2025-12-01T10:00:00Zjunk"}) {
    EXPECT_EQ(rfc3339Seconds(bad), std::nullopt) << bad;
  }
}

TEST(FakeClock, SleepAdvancesBothClocksAndIsRecorded) {
  testing::FakeClock clock;
  const auto start = clock.now();
  const auto wall = clock.systemNow();
  clock.sleepFor(std::chrono::seconds(2));
  clock.advance(std::chrono::milliseconds(500));
  EXPECT_EQ(clock.now() - start, std::chrono::milliseconds(2500));
  EXPECT_EQ(clock.systemNow() - wall, std::chrono::milliseconds(2500));
  ASSERT_EQ(clock.sleeps().size(), 1U);
  EXPECT_EQ(clock.sleeps()[0], std::chrono::seconds(2));
}

// A blocking clock: the sleeper waits until the test has moved time past its
// deadline, and counts as blocked from the moment it sleeps until then.
TEST(FakeClock, BlockingSleepersWakeOnlyWhenTimeHasCome) {
  using std::chrono::seconds;
  testing::BlockedThreads blocked;
  testing::FakeClock clock(testing::FakeClock::Sleeps::kBlock, &blocked);
  const auto start = clock.now();
  std::atomic<bool> woke{false};
  std::thread sleeper([&] {
    clock.sleepFor(seconds(5));
    woke = true;
  });
  ASSERT_TRUE(clock.waitForSleepers(1));
  EXPECT_EQ(blocked.count(), 1U);
  EXPECT_EQ(clock.nextWakeup(), start + seconds(5));
  EXPECT_EQ(clock.now(), start) << "a blocking sleep moves no time";
  clock.advance(seconds(4));
  EXPECT_EQ(clock.sleepers(), 1U);
  EXPECT_FALSE(woke);
  ASSERT_TRUE(clock.advanceToNextWakeup());
  EXPECT_EQ(clock.now(), start + seconds(5));
  EXPECT_EQ(clock.sleepers(), 0U) << "due sleepers stop counting before they run";
  EXPECT_EQ(blocked.count(), 0U);
  sleeper.join();
  EXPECT_TRUE(woke);
  EXPECT_FALSE(clock.advanceToNextWakeup());
  EXPECT_EQ(clock.sleeps(), std::vector<Clock::Duration>{seconds(5)});
}

TEST(FakeClock, StopBlockingReleasesSleepersAndLaterSleepsAdvance) {
  testing::FakeClock clock(testing::FakeClock::Sleeps::kBlock);
  std::thread sleeper([&] { clock.sleepFor(std::chrono::hours(1)); });
  ASSERT_TRUE(clock.waitForSleepers(1));
  const auto before = clock.now();
  clock.stopBlocking();
  sleeper.join();
  EXPECT_EQ(clock.now(), before);
  clock.sleepFor(std::chrono::seconds(2));
  EXPECT_EQ(clock.now(), before + std::chrono::seconds(2));
}

TEST(FakeClock, SleepUntilEndsAtTheDeadlineOrEarlierOnAWake) {
  using std::chrono::seconds;
  testing::BlockedThreads blocked;
  testing::FakeClock clock(testing::FakeClock::Sleeps::kBlock, &blocked);
  const auto start = clock.now();
  std::stop_source wake;
  std::jthread sleeper([&] { clock.sleepUntil(start + seconds(30), wake.get_token()); });
  ASSERT_TRUE(clock.waitForSleepers(1));
  EXPECT_EQ(clock.nextWakeup(), start + seconds(30));
  wake.request_stop();
  sleeper.join();
  EXPECT_EQ(clock.sleepers(), 0U) << "a woken sleeper stops counting";
  EXPECT_EQ(blocked.count(), 0U);
  EXPECT_EQ(clock.now(), start) << "a wake moves no time";
  // Until the deadline, as sleepFor.
  sleeper = std::jthread([&] { clock.sleepUntil(start + seconds(10), std::stop_token()); });
  ASSERT_TRUE(clock.waitForSleepers(1));
  ASSERT_TRUE(clock.advanceToNextWakeup());
  sleeper.join();
  EXPECT_EQ(clock.now(), start + seconds(10));
  // A deadline that has passed, or a wake already requested: no sleep at all.
  clock.sleepUntil(start, std::stop_token());
  clock.sleepUntil(start + seconds(60), wake.get_token());
  EXPECT_EQ(clock.sleepers(), 0U);
  EXPECT_EQ(clock.now(), start + seconds(10));
}

TEST(RealClock, SleepUntilWakesEarlyOnAStop) {
  std::stop_source wake;
  std::jthread waker([&] { wake.request_stop(); });
  // An hour, unless the stop ends it: the test would time out.
  RealClock::instance().sleepUntil(RealClock::instance().now() + std::chrono::hours(1),
                                   wake.get_token());
  EXPECT_TRUE(wake.stop_requested());
}

TEST(RealClock, IsMonotonic) {
  const auto a = RealClock::instance().now();
  const auto b = RealClock::instance().now();
  EXPECT_LE(a, b);
}

}  // namespace
}  // namespace rsc
