#include "metrics/work_queue_metrics.h"

#include <gtest/gtest.h>

#include <chrono>
#include <limits>
#include <vector>

#include "metrics/registry.h"
#include "test/metrics/snapshot.h"

namespace rsc::metrics {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

TEST(WorkQueueMetrics, EverySeriesOfTheQueueStartsAtZero) {
  auto registry = newRegistry();
  WorkQueueMetrics metrics(*registry, "resourceslice");
  const Snapshot snap(*registry);
  const prometheus::Labels name = {{"name", "resourceslice"}};
  for (const char* family :
       {"workqueue_depth", "workqueue_adds_total", "workqueue_retries_total",
        "workqueue_unfinished_work_seconds", "workqueue_longest_running_processor_seconds"}) {
    EXPECT_EQ(snap.value(family, name), 0.0) << family;
  }
  for (const char* family :
       {"workqueue_queue_duration_seconds", "workqueue_work_duration_seconds"}) {
    const auto histogram = snap.histogram(family, name);
    ASSERT_TRUE(histogram.has_value()) << family;
    EXPECT_EQ(histogram->sample_count, 0u) << family;
  }
}

TEST(WorkQueueMetrics, DurationBucketsAreComponentBases) {
  const std::vector<double> want = {1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1, 10};
  const auto buckets = WorkQueueMetrics::durationBuckets();
  ASSERT_EQ(buckets.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_DOUBLE_EQ(buckets[i], want[i]) << i;
  }
}

TEST(WorkQueueMetrics, RecordsQueueActivity) {
  auto registry = newRegistry();
  WorkQueueMetrics metrics(*registry, "resourceslice");
  metrics.added();
  metrics.added();
  metrics.retried();
  metrics.setDepth(7);
  metrics.setUnfinishedWork(milliseconds(1500));
  metrics.setLongestRunningProcessor(milliseconds(250));
  metrics.observeQueueDuration(nanoseconds(5));    // below the first bound
  metrics.observeQueueDuration(microseconds(50));  // (1e-5, 1e-4]
  metrics.observeWorkDuration(milliseconds(20));   // (1e-2, 1e-1]
  metrics.observeWorkDuration(seconds(30));        // above 10 s: +Inf only
  const Snapshot snap(*registry);
  const prometheus::Labels name = {{"name", "resourceslice"}};

  EXPECT_EQ(snap.value("workqueue_adds_total", name), 2.0);
  EXPECT_EQ(snap.value("workqueue_retries_total", name), 1.0);
  EXPECT_EQ(snap.value("workqueue_depth", name), 7.0);
  EXPECT_EQ(snap.value("workqueue_unfinished_work_seconds", name), 1.5);
  EXPECT_EQ(snap.value("workqueue_longest_running_processor_seconds", name), 0.25);

  const auto buckets = WorkQueueMetrics::durationBuckets();
  const auto queue = snap.histogram("workqueue_queue_duration_seconds", name);
  ASSERT_TRUE(queue.has_value());
  EXPECT_EQ(queue->sample_count, 2u);
  EXPECT_EQ(cumulativeCounts(*queue, {buckets[0], buckets[3], buckets[4]}),
            (CumulativeCounts{1, 1, 2}));

  const auto work = snap.histogram("workqueue_work_duration_seconds", name);
  ASSERT_TRUE(work.has_value());
  EXPECT_EQ(work->sample_count, 2u);
  EXPECT_EQ(cumulativeCounts(*work, {buckets[6], buckets[7], buckets[9],
                                     std::numeric_limits<double>::infinity()}),
            (CumulativeCounts{0, 1, 1, 2}));
  EXPECT_DOUBLE_EQ(work->sample_sum, 30.02);
}

TEST(WorkQueueMetrics, TwoQueuesShareFamiliesWithTheirOwnLabel) {
  auto registry = newRegistry();
  WorkQueueMetrics first(*registry, "resourceslice");
  WorkQueueMetrics second(*registry, "nodes");
  first.added();
  second.setDepth(3);
  const Snapshot snap(*registry);
  EXPECT_EQ(snap.seriesCount("workqueue_adds_total"), 2u);
  EXPECT_EQ(snap.value("workqueue_adds_total", {{"name", "resourceslice"}}), 1.0);
  EXPECT_EQ(snap.value("workqueue_adds_total", {{"name", "nodes"}}), 0.0);
  EXPECT_EQ(snap.value("workqueue_depth", {{"name", "nodes"}}), 3.0);
  EXPECT_EQ(snap.value("workqueue_depth", {{"name", "resourceslice"}}), 0.0);
}

}  // namespace
}  // namespace rsc::metrics
