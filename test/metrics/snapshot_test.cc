#include "test/metrics/snapshot.h"

#include <gtest/gtest.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>

#include <limits>

#include "metrics/registry.h"

namespace rsc::metrics {
namespace {

TEST(Snapshot, FindsSeriesByExactLabels) {
  auto registry = newRegistry();
  auto& family = prometheus::BuildCounter().Name("x_total").Help("x").Register(*registry);
  family.Add({{"a", "1"}, {"b", "2"}}).Increment(3);
  family.Add({{"a", "1"}}).Increment(5);
  const Snapshot snap(*registry);
  EXPECT_EQ(snap.value("x_total", {{"a", "1"}, {"b", "2"}}), 3.0);
  EXPECT_EQ(snap.value("x_total", {{"a", "1"}}), 5.0);
  EXPECT_FALSE(snap.value("x_total", {{"a", "2"}}));
  EXPECT_FALSE(snap.value("x_total", {{"b", "2"}}));
  EXPECT_FALSE(snap.value("y_total", {}));
  EXPECT_EQ(snap.seriesCount("x_total"), 2u);
  EXPECT_EQ(snap.seriesCount("y_total"), 0u);
}

TEST(Snapshot, SumsOverALabelSubset) {
  auto registry = newRegistry();
  auto& family = prometheus::BuildGauge().Name("g").Help("g").Register(*registry);
  family.Add({{"driver", "a"}, {"verb", "create"}}).Set(1);
  family.Add({{"driver", "a"}, {"verb", "update"}}).Set(2);
  family.Add({{"driver", "b"}, {"verb", "create"}}).Set(4);
  const Snapshot snap(*registry);
  EXPECT_EQ(snap.sum("g", {{"driver", "a"}}), 3.0);
  EXPECT_EQ(snap.sum("g", {{"verb", "create"}}), 5.0);
  EXPECT_EQ(snap.sum("g", {}), 7.0);
  EXPECT_EQ(snap.sum("g", {{"driver", "c"}}), 0.0);
}

TEST(Snapshot, HistogramsAreReadAsHistograms) {
  auto registry = newRegistry();
  prometheus::BuildHistogram()
      .Name("h_seconds")
      .Help("h")
      .Register(*registry)
      .Add({}, prometheus::Histogram::BucketBoundaries{1, 2})
      .Observe(1.5);
  const Snapshot snap(*registry);
  EXPECT_FALSE(snap.value("h_seconds", {}));
  const auto histogram = snap.histogram("h_seconds", {});
  ASSERT_TRUE(histogram.has_value());
  EXPECT_EQ(cumulativeCount(*histogram, 1), 0u);
  EXPECT_EQ(cumulativeCount(*histogram, 2), 1u);
  EXPECT_EQ(cumulativeCount(*histogram, std::numeric_limits<double>::infinity()), 1u);
  EXPECT_FALSE(cumulativeCount(*histogram, 3));
  // In the order asked, a missing bound included.
  EXPECT_EQ(cumulativeCounts(*histogram, {2, 3, 1}), (CumulativeCounts{1, std::nullopt, 0}));
}

}  // namespace
}  // namespace rsc::metrics
