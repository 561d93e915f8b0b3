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

TEST(PullMetrics, ASourceStartsWithEverySeriesAtZero) {
  auto registry = newRegistry();
  PullMetrics metrics(*registry);
  metrics.addSource("nic.example.com");
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
  metrics.addSource("nic.example.com");
  metrics.fetched("nic.example.com", "ok", 0.01);
  metrics.fetched("nic.example.com", "Timeout", 10);
  metrics.fetched("nic.example.com", "Timeout", 10);
  metrics.fetched("nic.example.com", "SomethingNew", 0.1);
  metrics.succeeded("nic.example.com", 1.7e9);
  metrics.setExpired("nic.example.com", true);
  const Snapshot snap(*registry);
  const auto fetches = [&](const char* result) {
    return snap.value(kFetches, {{"driver", "nic.example.com"}, {"result", result}});
  };
  EXPECT_EQ(fetches("ok"), 1.0);
  EXPECT_EQ(fetches("Timeout"), 2.0);
  EXPECT_EQ(fetches("other"), 1.0);
  EXPECT_EQ(snap.value(kLastSuccess, {{"driver", "nic.example.com"}}), 1.7e9);
  EXPECT_EQ(snap.value(kExpired, {{"driver", "nic.example.com"}}), 1.0);
  metrics.setExpired("nic.example.com", false);
  EXPECT_EQ(Snapshot(*registry).value(kExpired, {{"driver", "nic.example.com"}}), 0.0);
}

}  // namespace
}  // namespace rsc::metrics
