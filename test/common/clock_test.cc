#include "common/clock.h"

#include <gtest/gtest.h>

#include "test/fakes/fake_clock.h"

namespace rsc {
namespace {

TEST(FormatTime, WritesRfc3339Utc) {
  const Clock::SystemTime t{std::chrono::seconds(1767225600) + std::chrono::microseconds(42)};
  EXPECT_EQ(formatTime(t), "2026-01-01T00:00:00Z");
  EXPECT_EQ(formatMicroTime(t), "2026-01-01T00:00:00.000042Z");
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

TEST(RealClock, IsMonotonic) {
  const auto a = RealClock::instance().now();
  const auto b = RealClock::instance().now();
  EXPECT_LE(a, b);
}

}  // namespace
}  // namespace rsc
