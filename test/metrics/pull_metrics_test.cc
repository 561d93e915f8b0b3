#include "metrics/pull_metrics.h"

#include <gtest/gtest.h>

#include "metrics/registry.h"
#include "test/metrics/snapshot.h"

namespace rsc::metrics {
namespace {

constexpr char kFetches[] = "resourceslice_controller_pull_fetches_total";
constexpr char kLastSuccess[] = "resourceslice_controller_pull_last_success_timestamp_seconds";
constexpr char kExpired[] = "resourceslice_controller_pull_source_expired";
constexpr char kDuration[] = "resourceslice_controller_pull_fetch_duration_seconds";
constexpr char kSources[] = "resourceslice_controller_pull_sources";
constexpr char kIgnored[] = "resourceslice_controller_pull_sources_ignored_total";
constexpr char kDelay[] = "resourceslice_controller_pull_fetch_delay_seconds";
constexpr char kWaiting[] = "resourceslice_controller_pull_fetches_waiting";

TEST(PullMetrics, ASourceStartsWithEverySeriesAtZero) {
  auto registry = newRegistry();
  PullMetrics metrics(*registry);
  metrics.setSources("nic.example.com", 1);
  const Snapshot snap(*registry);
  EXPECT_EQ(snap.seriesCount(kFetches), PullMetrics::kResults.size() + 1);
  for (std::string_view result : PullMetrics::kResults) {
    EXPECT_EQ(
        snap.value(kFetches, {{"driver", "nic.example.com"}, {"result", std::string(result)}}), 0.0)
        << result;
  }
  EXPECT_EQ(snap.value(kLastSuccess, {{"driver", "nic.example.com"}}), 0.0);
  EXPECT_EQ(snap.value(kExpired, {{"driver", "nic.example.com"}}), 0.0);
  EXPECT_EQ(snap.seriesCount(kDuration), 1u);
}

TEST(PullMetrics, CountsFetchesByResultAndKeepsTheLastSuccess) {
  auto registry = newRegistry();
  PullMetrics metrics(*registry);
  metrics.setSources("nic.example.com", 1);
  metrics.fetched("nic.example.com", "ok", 0.01);
  metrics.fetched("nic.example.com", "Timeout", 10);
  metrics.fetched("nic.example.com", "Timeout", 10);
  metrics.fetched("nic.example.com", "SomethingNew", 0.1);
  metrics.succeeded("nic.example.com", 1.7e9);
  metrics.setExpired("nic.example.com", 2);
  const Snapshot snap(*registry);
  const auto fetches = [&](const char* result) {
    return snap.value(kFetches, {{"driver", "nic.example.com"}, {"result", result}});
  };
  EXPECT_EQ(fetches("ok"), 1.0);
  EXPECT_EQ(fetches("Timeout"), 2.0);
  EXPECT_EQ(fetches("other"), 1.0);
  EXPECT_EQ(snap.value(kLastSuccess, {{"driver", "nic.example.com"}}), 1.7e9);
  EXPECT_EQ(snap.value(kExpired, {{"driver", "nic.example.com"}}), 2.0);
  metrics.setExpired("nic.example.com", 0);
  EXPECT_EQ(Snapshot(*registry).value(kExpired, {{"driver", "nic.example.com"}}), 0.0);
}

TEST(PullMetrics, ADriversSeriesGoWithItsLastSource) {
  auto registry = newRegistry();
  PullMetrics metrics(*registry);
  metrics.setSources("nic.example.com", 3);
  metrics.setSources("gpu.example.com", 1);
  metrics.fetched("nic.example.com", "Forbidden", 0.01);
  Snapshot snap(*registry);
  EXPECT_EQ(snap.value(kSources, {{"driver", "nic.example.com"}}), 3.0);
  EXPECT_EQ(snap.value(kFetches, {{"driver", "nic.example.com"}, {"result", "Forbidden"}}), 1.0);
  metrics.setSources("nic.example.com", 0);
  snap = Snapshot(*registry);
  EXPECT_EQ(snap.seriesCount(kSources), 1u);
  EXPECT_EQ(snap.seriesCount(kFetches), PullMetrics::kResults.size() + 1);
  EXPECT_EQ(snap.seriesCount(kExpired), 1u);
  EXPECT_EQ(snap.seriesCount(kLastSuccess), 1u);
  EXPECT_EQ(snap.seriesCount(kDuration), 1u);
  EXPECT_EQ(snap.value(kSources, {{"driver", "gpu.example.com"}}), 1.0);
}

TEST(PullMetrics, CountsIgnoredSourcesByReason) {
  auto registry = newRegistry();
  PullMetrics metrics(*registry);
  EXPECT_EQ(Snapshot(*registry).value(kIgnored, {{"reason", "OverLimit"}}), 0.0);
  metrics.ignored("OverLimit");
  metrics.ignored("Invalid");
  metrics.ignored("OverLimit");
  const Snapshot snap(*registry);
  EXPECT_EQ(snap.value(kIgnored, {{"reason", "OverLimit"}}), 2.0);
  EXPECT_EQ(snap.value(kIgnored, {{"reason", "Invalid"}}), 1.0);
}

TEST(PullMetrics, HowLateFetchesStartAndHowManyWait) {
  auto registry = newRegistry();
  PullMetrics metrics(*registry);
  EXPECT_EQ(Snapshot(*registry).value(kWaiting, {}), 0.0) << "from the start";
  metrics.fetchDelayed(0);
  metrics.fetchDelayed(7);
  metrics.setWaiting(12);
  const Snapshot snap(*registry);
  EXPECT_EQ(snap.value(kWaiting, {}), 12.0);
  const auto delay = snap.histogram(kDelay, {});
  ASSERT_TRUE(delay.has_value());
  EXPECT_EQ(delay->sample_count, 2u);
  EXPECT_EQ(cumulativeCount(*delay, 0.01), 1u);
  EXPECT_EQ(cumulativeCount(*delay, 10), 2u);
}

}  // namespace
}  // namespace rsc::metrics
