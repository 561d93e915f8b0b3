#include "common/duration.h"

#include <gtest/gtest.h>

#include <chrono>

namespace rsc {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::nanoseconds;
using std::chrono::seconds;

TEST(ParseDuration, SumsNumbersWithUnits) {
  EXPECT_EQ(*parseDuration("0"), Clock::Duration::zero());
  EXPECT_EQ(*parseDuration("500ms"), milliseconds(500));
  EXPECT_EQ(*parseDuration("30s"), seconds(30));
  EXPECT_EQ(*parseDuration("1m30s"), seconds(90));
  EXPECT_EQ(*parseDuration("1h2m3.5s"), hours(1) + minutes(2) + milliseconds(3500));
  EXPECT_EQ(*parseDuration("1.5s"), milliseconds(1500));
  EXPECT_EQ(*parseDuration(".5s"), milliseconds(500));
  EXPECT_EQ(*parseDuration("1.s"), seconds(1));
  EXPECT_EQ(*parseDuration("0.000001ms"), nanoseconds(1));
  EXPECT_EQ(*parseDuration("0s"), Clock::Duration::zero());
}

TEST(ParseDuration, RefusesAnythingElseNamingTheUnits) {
  for (const char* bad : {"", "10", "s", "-1s", "+1s", "1x", "1s2", ".s", ".", "10 s", " 1s",
                          "1.2.3s", "1sm", "1H", "ms"}) {
    StatusOr<Clock::Duration> d = parseDuration(bad);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(d.status().message(),
              std::string("must be a duration such as 30s, 1m30s or 500ms (units ms, s, m, h), "
                          "not \"") +
                  bad + "\"");
  }
}

TEST(ParseDuration, LargestUnitKeepsLargerUnitsOut) {
  EXPECT_EQ(*parseDuration("10m", minutes(1)), minutes(10));
  StatusOr<Clock::Duration> d = parseDuration("1h", minutes(1));
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message(),
            "must be a duration such as 30s, 1m30s or 500ms (units ms, s, m), not \"1h\"");
}

TEST(ParseDuration, SaturatesBeyondTheClocksRange) {
  EXPECT_EQ(*parseDuration("3000000h"), Clock::Duration::max());
  EXPECT_EQ(*parseDuration("99999999999999999999999m"), Clock::Duration::max());
  EXPECT_EQ(*parseDuration("2000000h"), hours(2000000));
}

}  // namespace
}  // namespace rsc
