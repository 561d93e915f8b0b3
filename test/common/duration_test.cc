#include "common/duration.h"

#include <gtest/gtest.h>

#include <chrono>

namespace rsc {
namespace {

using namespace std::chrono_literals;

TEST(ParseDuration, SumsNumbersWithUnits) {
  EXPECT_EQ(*parseDuration("0"), Clock::Duration::zero());
  EXPECT_EQ(*parseDuration("500ms"), 500ms);
  EXPECT_EQ(*parseDuration("30s"), 30s);
  EXPECT_EQ(*parseDuration("1m30s"), 90s);
  EXPECT_EQ(*parseDuration("1h2m3.5s"), 1h + 2min + 3500ms);
  EXPECT_EQ(*parseDuration("1.5s"), 1500ms);
  EXPECT_EQ(*parseDuration(".5s"), 500ms);
  EXPECT_EQ(*parseDuration("1.s"), 1s);
  EXPECT_EQ(*parseDuration("0.000001ms"), 1ns);
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
  EXPECT_EQ(*parseDuration("10m", 1min), 10min);
  StatusOr<Clock::Duration> d = parseDuration("1h", 1min);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message(),
            "must be a duration such as 30s, 1m30s or 500ms (units ms, s, m), not \"1h\"");
}

TEST(ParseDuration, SaturatesBeyondTheClocksRange) {
  EXPECT_EQ(*parseDuration("3000000h"), Clock::Duration::max());
  EXPECT_EQ(*parseDuration("99999999999999999999999m"), Clock::Duration::max());
  EXPECT_EQ(*parseDuration("2000000h"), std::chrono::hours(2000000));
}

}  // namespace
}  // namespace rsc
