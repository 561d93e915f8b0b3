#include "client/quantity.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace rsc::client {
namespace {

using ::testing::HasSubstr;

Quantity q(std::string_view text) {
  StatusOr<Quantity> parsed = Quantity::parse(text);
  EXPECT_TRUE(parsed.ok()) << text << ": " << parsed.status().toString();
  return parsed.ok() ? *parsed : Quantity();
}

TEST(Quantity, DefaultIsZero) {
  Quantity zero;
  EXPECT_EQ(zero.text(), "0");
  EXPECT_EQ(zero, q("0"));
  EXPECT_EQ(zero.toInt64(), 0);
}

TEST(Quantity, KeepsOriginalText) {
  for (std::string_view text : {"1024Mi", "1.5", "+1e3", "0.000", "-0", "1.G", ".5", "5."}) {
    EXPECT_EQ(q(text).text(), text);
  }
}

// Each group holds spellings of one value; every pair within a group is
// equal and every pair across groups differs.
TEST(Quantity, EqualityIsByValue) {
  const std::vector<std::vector<std::string_view>> groups = {
      {"0", "-0", "+0", "0.000", "0Ki", "0e7", "000", "0n"},
      {"1Gi", "1024Mi", "1048576Ki", "1073741824", "1.073741824G", "1073741824e0",
       "0.0009765625Ti"},
      {"1500m", "1.5", "1.50", "15e-1", "1500000u", "1500000000n", "+1.5", "0.0015k"},
      {"1e3", "1k", "1000", "1E3", "1e+3", "+1000", "1000.000", "10e2", "0.001M"},
      {"1.5Gi", "1536Mi", "1610612736"},
      {"0.5Ki", "512", "512000m"},
      {"12e6", "12M", "12000k", "0.012G"},
      {"1Ei", "1152921504606846976", "1024Pi"},
      {"1.G", "1G", "1e9"},
      {".5", "500m", "0.5", "5e-1"},
      {"-1Gi", "-1073741824", "-1024Mi"},
      {"-1500m", "-1.5"},
      {"1m", "0.001", "1000u"},
      {"123456789012345678901234567890", "123456789012345678901234567.890k"},
      {"123456789012345678901234567891"},
      {"1E", "1e18", "1000P"},
  };
  for (size_t g = 0; g < groups.size(); ++g) {
    for (size_t h = 0; h < groups.size(); ++h) {
      for (std::string_view a : groups[g]) {
        for (std::string_view b : groups[h]) {
          if (g == h) {
            EXPECT_EQ(q(a), q(b)) << a << " vs " << b;
            EXPECT_EQ(q(a) <=> q(b), std::strong_ordering::equal) << a << " vs " << b;
          } else {
            EXPECT_NE(q(a), q(b)) << a << " vs " << b;
          }
        }
      }
    }
  }
}

// Values the API server stores differently from their exact value compare as
// it stores them, so that writing them never looks like a change.
TEST(Quantity, MatchesServerRoundingAndCap) {
  EXPECT_EQ(q("0.1n"), q("1n"));    // rounded up to a nano unit
  EXPECT_EQ(q("-0.1n"), q("-1n"));  // away from zero
  EXPECT_EQ(q("1.0000000001"), q("1000000001n"));
  EXPECT_EQ(q("0.0000000019"), q("2n"));
  EXPECT_EQ(q("1.9999999999"), q("2"));
  EXPECT_EQ(q("8Ei"), q("9223372036854775807"));  // binary quantities are capped
  EXPECT_EQ(q("-16Ei"), q("-9223372036854775807"));
  EXPECT_NE(q("8E"), q("9223372036854775807"));  // decimal ones are not
  EXPECT_EQ(q("8E"), q("8000000000000000000"));
}

TEST(Quantity, OrdersByValue) {
  const std::vector<std::string_view> ascending = {
      "-1e30", "-2",     "-1.5", "-1",   "-999m",
      "-1n",   "0",      "1n",   "1m",   "999m",
      "1",     "1.0001", "1k",   "1Ki",  "1M",
      "1Mi",   "1G",     "1Gi",  "1e30", "123456789012345678901234567891e5"};
  for (size_t i = 0; i < ascending.size(); ++i) {
    for (size_t j = 0; j < ascending.size(); ++j) {
      EXPECT_EQ(q(ascending[i]) <=> q(ascending[j]), i <=> j)
          << ascending[i] << " vs " << ascending[j];
    }
  }
}

TEST(Quantity, ToInt64RoundsTowardZeroAndSaturates) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  struct Case {
    std::string_view text;
    int64_t want;
  };
  const std::vector<Case> cases = {
      {"0", 0},
      {"1500m", 1},
      {"-1500m", -1},
      {"999m", 0},
      {"-999m", 0},
      {"1Gi", 1073741824},
      {"40Gi", 42949672960},
      {"123e-1", 12},
      {"1k", 1000},
      {"1.5Ki", 1536},
      {"9223372036854775807", kMax},
      {"9223372036854775808", kMax},
      {"-9223372036854775808", kMin},
      {"-9223372036854775809", kMin},
      {"9999999999999999999", kMax},
      {"99999999999999999999", kMax},
      {"-99999999999999999999", kMin},
      {"1e19", kMax},
      {"1e30", kMax},
      {"-1e30", kMin},
      {"8Ei", kMax},
      {"1e-30", 0},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(q(c.text).toInt64(), c.want) << c.text;
  }
}

TEST(Quantity, RejectsMalformedText) {
  struct Case {
    std::string_view text;
    std::string_view why;
  };
  const std::vector<Case> cases = {
      {"", "empty"},
      {"1.5.2", "more than one decimal point"},
      {"Ki", "expected a number"},
      {"abc", "expected a number"},
      {"+", "expected a number"},
      {"-", "expected a number"},
      {".", "expected a number"},
      {"e3", "expected a number"},
      {"1x", "unknown suffix"},
      {"1KiB", "unknown suffix"},
      {"1ki", "unknown suffix"},
      {"1K", "unknown suffix"},
      {"1Ki2", "unknown suffix"},
      {"1 Ki", "unknown suffix"},
      {" 1", "expected a number"},
      {"1 ", "unknown suffix"},
      {"--1", "expected a number"},
      {"1e", "exponent has no digits"},
      {"1e+", "exponent has no digits"},
      {"1e3.5", "exponent is not an integer"},
      {"1e3Ki", "exponent is not an integer"},
      {"1e99999999999", "exponent out of range"},
      {"1e2147483648", "exponent out of range"},
  };
  for (const auto& c : cases) {
    StatusOr<Quantity> parsed = Quantity::parse(c.text);
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(parsed.status().message(), HasSubstr(c.why)) << c.text;
    EXPECT_THAT(parsed.status().message(), HasSubstr("\"" + std::string(c.text) + "\"")) << c.text;
  }
}

TEST(Quantity, AcceptsExtremeButValidExponents) {
  EXPECT_EQ(q("1e2147483647").toInt64(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(q("1e-2147483648"), q("1n"));  // rounded up like any sub-nano value
  EXPECT_LT(q("1e2147483646"), q("1e2147483647"));
}

TEST(Quantity, ErrorMessageCutsHugeInput) {
  std::string huge(10000, 'x');
  StatusOr<Quantity> parsed = Quantity::parse(huge);
  ASSERT_FALSE(parsed.ok());
  EXPECT_LT(parsed.status().message().size(), 200u);
}

}  // namespace
}  // namespace rsc::client
