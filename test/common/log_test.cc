#include "common/log.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "test/fakes/fake_clock.h"

namespace rsc::log {
namespace {

class LogTest : public ::testing::Test {
 protected:
  void TearDown() override { configure(Format::kText, 0, nullptr); }
  std::ostringstream out_;
};

TEST_F(LogTest, TextLineHasSeverityCallerMessageAndQuotedFields) {
  configure(Format::kText, 0, &out_);
  info("Published pool", {{"driver", "gpu.example.com"}, {"pool", "node a"}, {"slices", 3}});
  const std::string line = out_.str();
  EXPECT_EQ(line.front(), 'I');
  EXPECT_NE(line.find("log_test.cc:"), std::string::npos) << line;
  EXPECT_NE(line.find("] \"Published pool\" driver=\"gpu.example.com\" pool=\"node a\" slices=3\n"),
            std::string::npos)
      << line;
}

TEST_F(LogTest, JsonLineParsesAndKeepsTypes) {
  configure(Format::kJson, 0, &out_);
  error("Reconcile failed", conflict("stale"), {{"driver", "d"}, {"retry", true}, {"n", 2}});
  const auto j = nlohmann::json::parse(out_.str());
  EXPECT_EQ(j["msg"], "Reconcile failed");
  EXPECT_EQ(j["level"], "error");
  EXPECT_EQ(j["err"], "Conflict: stale");
  EXPECT_EQ(j["driver"], "d");
  EXPECT_EQ(j["retry"], true);
  EXPECT_EQ(j["n"], 2);
  EXPECT_TRUE(j["ts"].is_number());
}

TEST_F(LogTest, DebugHonoursVerbosity) {
  configure(Format::kText, 1, &out_);
  debug(2, "hidden");
  debug(1, "shown");
  EXPECT_EQ(out_.str().find("hidden"), std::string::npos);
  EXPECT_NE(out_.str().find("shown"), std::string::npos);
}

TEST_F(LogTest, QuoteEscapesControlCharacters) {
  EXPECT_EQ(quote("a\"b\\c\nd\x01"), "\"a\\\"b\\\\c\\nd\\u0001\"");
}

// A line a client can provoke passes once per interval per key, and the one
// that passes says how many were held back.
TEST(Throttle, PassesOneLinePerKeyAndIntervalAndCountsTheRest) {
  testing::FakeClock clock;
  Throttle throttle(clock, std::chrono::seconds(10));
  EXPECT_EQ(throttle.allow("connections"), 0U);
  EXPECT_EQ(throttle.allow("connections"), std::nullopt);
  EXPECT_EQ(throttle.allow("connections"), std::nullopt);
  EXPECT_EQ(throttle.allow("evicted"), 0U);  // keys are independent
  clock.advance(std::chrono::seconds(9));
  EXPECT_EQ(throttle.allow("connections"), std::nullopt);
  clock.advance(std::chrono::seconds(1));
  EXPECT_EQ(throttle.allow("connections"), 3U);
  EXPECT_EQ(throttle.allow("connections"), std::nullopt);
}

}  // namespace
}  // namespace rsc::log
