#include "metrics/controller_metrics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "metrics/registry.h"
#include "test/metrics/snapshot.h"

namespace rsc::metrics {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kDriver[] = "gpu.example.com";

TEST(ControllerMetrics, PreinitialisesReconcileSeriesOfTheController) {
  auto registry = newRegistry();
  ControllerMetrics metrics(*registry);
  const Snapshot snap(*registry);

  for (const char* result : {"success", "error", "requeue", "requeue_after"}) {
    EXPECT_EQ(snap.value("controller_runtime_reconcile_total",
                         {{"controller", "resourceslice"}, {"result", result}}),
              0.0)
        << result;
  }
  EXPECT_EQ(snap.seriesCount("controller_runtime_reconcile_total"), 4u);
  EXPECT_EQ(
      snap.value("controller_runtime_reconcile_errors_total", {{"controller", "resourceslice"}}),
      0.0);
  EXPECT_EQ(
      snap.value("controller_runtime_max_concurrent_reconciles", {{"controller", "resourceslice"}}),
      0.0);
  EXPECT_EQ(snap.value("controller_runtime_active_workers", {{"controller", "resourceslice"}}),
            0.0);
  const auto time = snap.histogram("controller_runtime_reconcile_time_seconds",
                                   {{"controller", "resourceslice"}});
  ASSERT_TRUE(time.has_value());
  EXPECT_EQ(time->sample_count, 0u);
  // No driver has appeared yet, so no per-driver series exist.
  EXPECT_EQ(snap.seriesCount("resourceslice_controller_slice_writes_total"), 0u);
  EXPECT_EQ(snap.seriesCount("resourceslice_controller_pools"), 0u);
}

TEST(ControllerMetrics, ControllerNameIsTheLabel) {
  auto registry = newRegistry();
  ControllerMetrics metrics(*registry, "other");
  metrics.observeReconcile(ReconcileResult::kSuccess, milliseconds(1));
  const Snapshot snap(*registry);
  EXPECT_EQ(snap.value("controller_runtime_reconcile_total",
                       {{"controller", "other"}, {"result", "success"}}),
            1.0);
  EXPECT_FALSE(snap.value("controller_runtime_reconcile_total",
                          {{"controller", "resourceslice"}, {"result", "success"}}));
}

TEST(ControllerMetrics, FirstWriteOfADriverPreinitialisesEveryVerbAndResult) {
  auto registry = newRegistry();
  ControllerMetrics metrics(*registry);
  metrics.sliceWrite(kDriver, WriteVerb::kUpdate, WriteResult::kConflict);
  metrics.sliceWrite(kDriver, WriteVerb::kUpdate, WriteResult::kConflict);
  metrics.sliceWrite(kDriver, WriteVerb::kCreate, WriteResult::kSuccess);
  const Snapshot snap(*registry);

  EXPECT_EQ(snap.seriesCount("resourceslice_controller_slice_writes_total"), 9u);
  for (const char* verb : {"create", "update", "delete"}) {
    for (const char* result : {"success", "conflict", "error"}) {
      double want = 0;
      if (std::string(verb) == "update" && std::string(result) == "conflict") {
        want = 2;
      }
      if (std::string(verb) == "create" && std::string(result) == "success") {
        want = 1;
      }
      EXPECT_EQ(snap.value("resourceslice_controller_slice_writes_total",
                           {{"driver", kDriver}, {"verb", verb}, {"result", result}}),
                want)
          << verb << " " << result;
    }
  }
  EXPECT_EQ(
      snap.value("resourceslice_controller_pool_lease_expirations_total", {{"driver", kDriver}}),
      0.0);
  const auto latency =
      snap.histogram("resourceslice_controller_publish_latency_seconds", {{"driver", kDriver}});
  ASSERT_TRUE(latency.has_value());
  EXPECT_EQ(latency->sample_count, 0u);
}

TEST(ControllerMetrics, AddDriverCreatesCountersAtZeroButNoGauges) {
  auto registry = newRegistry();
  ControllerMetrics metrics(*registry);
  metrics.addDriver("a.example.com");
  metrics.addDriver("a.example.com");
  metrics.addDriver("b.example.com");
  const Snapshot snap(*registry);
  EXPECT_EQ(snap.seriesCount("resourceslice_controller_slice_writes_total"), 18u);
  EXPECT_EQ(snap.seriesCount("resourceslice_controller_pool_lease_expirations_total"), 2u);
  EXPECT_EQ(snap.seriesCount("resourceslice_controller_publish_latency_seconds"), 2u);
  EXPECT_EQ(snap.sum("resourceslice_controller_slice_writes_total", {}), 0.0);
  EXPECT_EQ(snap.seriesCount("resourceslice_controller_pools"), 0u);
}

TEST(ControllerMetrics, DriverCountsAreSetAndRemovedWhenNoPoolIsLeft) {
  auto registry = newRegistry();
  ControllerMetrics metrics(*registry);
  metrics.setDriverCounts("a.example.com", {.pools = 2, .slices = 3, .devices = 200});
  metrics.setDriverCounts("b.example.com", {.pools = 1, .slices = 1, .devices = 8});
  {
    const Snapshot snap(*registry);
    EXPECT_EQ(snap.value("resourceslice_controller_pools", {{"driver", "a.example.com"}}), 2.0);
    EXPECT_EQ(snap.value("resourceslice_controller_slices", {{"driver", "a.example.com"}}), 3.0);
    EXPECT_EQ(snap.value("resourceslice_controller_devices", {{"driver", "a.example.com"}}), 200.0);
    EXPECT_EQ(snap.value("resourceslice_controller_devices", {{"driver", "b.example.com"}}), 8.0);
  }

  metrics.sliceWrite("a.example.com", WriteVerb::kDelete, WriteResult::kSuccess);
  metrics.setDriverCounts("a.example.com", {.pools = 0, .slices = 0, .devices = 0});
  {
    const Snapshot snap(*registry);
    for (const char* name : {"resourceslice_controller_pools", "resourceslice_controller_slices",
                             "resourceslice_controller_devices"}) {
      EXPECT_FALSE(snap.value(name, {{"driver", "a.example.com"}})) << name;
      EXPECT_EQ(snap.seriesCount(name), 1u) << name;
    }
    EXPECT_EQ(snap.value("resourceslice_controller_pools", {{"driver", "b.example.com"}}), 1.0);
    // Counters outlive the gauges: dropping them would read as a reset.
    EXPECT_EQ(snap.value("resourceslice_controller_slice_writes_total",
                         {{"driver", "a.example.com"}, {"verb", "delete"}, {"result", "success"}}),
              1.0);
  }

  // Removing twice is harmless, and a driver that comes back gets its gauges back.
  metrics.setDriverCounts("a.example.com", {});
  metrics.setDriverCounts("a.example.com", {.pools = 1, .slices = 1, .devices = 4});
  const Snapshot snap(*registry);
  EXPECT_EQ(snap.value("resourceslice_controller_pools", {{"driver", "a.example.com"}}), 1.0);
  EXPECT_EQ(snap.value("resourceslice_controller_devices", {{"driver", "a.example.com"}}), 4.0);
}

TEST(ControllerMetrics, PublishLatencyLandsInItsBucket) {
  auto registry = newRegistry();
  ControllerMetrics metrics(*registry);
  metrics.observePublishLatency(kDriver, milliseconds(5));    // on the first bound: le is inclusive
  metrics.observePublishLatency(kDriver, milliseconds(7));    // (0.005, 0.01]
  metrics.observePublishLatency(kDriver, milliseconds(300));  // (0.25, 0.5]
  metrics.observePublishLatency(kDriver, seconds(90));        // above 60 s: +Inf only
  const auto latency = Snapshot(*registry).histogram(
      "resourceslice_controller_publish_latency_seconds", {{"driver", kDriver}});
  ASSERT_TRUE(latency.has_value());
  EXPECT_EQ(latency->sample_count, 4u);
  EXPECT_DOUBLE_EQ(latency->sample_sum, 0.005 + 0.007 + 0.3 + 90);
  EXPECT_EQ(cumulativeCounts(*latency,
                             {0.005, 0.01, 0.25, 0.5, 60, std::numeric_limits<double>::infinity()}),
            (CumulativeCounts{1, 2, 2, 3, 3, 4}));
}

TEST(ControllerMetrics, PublishLatencyBucketsSpanFiveMillisecondsToAMinute) {
  const auto buckets = ControllerMetrics::publishLatencyBuckets();
  ASSERT_FALSE(buckets.empty());
  EXPECT_EQ(buckets.front(), 0.005);
  EXPECT_EQ(buckets.back(), 60.0);
  EXPECT_TRUE(std::is_sorted(buckets.begin(), buckets.end()));
}

TEST(ControllerMetrics, ReconcileTimeUsesControllerRuntimeBuckets) {
  const auto buckets = ControllerMetrics::reconcileTimeBuckets();
  const std::vector<double> want = {0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3,  0.35,
                                    0.4,   0.45, 0.5,   0.6,  0.7, 0.8,  0.9, 1.0,  1.25, 1.5,
                                    1.75,  2.0,  2.5,   3.0,  3.5, 4.0,  4.5, 5,    6,    7,
                                    8,     9,    10,    15,   20,  25,   30,  40,   50,   60};
  EXPECT_EQ(buckets, want);
}

TEST(ControllerMetrics, ReconcileResultsAreCountedAndTimed) {
  auto registry = newRegistry();
  ControllerMetrics metrics(*registry);
  metrics.observeReconcile(ReconcileResult::kSuccess, milliseconds(3));
  metrics.observeReconcile(ReconcileResult::kError, milliseconds(120));
  metrics.observeReconcile(ReconcileResult::kError, milliseconds(120));
  metrics.observeReconcile(ReconcileResult::kRequeueAfter, seconds(2));
  const Snapshot snap(*registry);
  const prometheus::Labels controller = {{"controller", "resourceslice"}};

  auto total = [&](const char* result) {
    return snap.value("controller_runtime_reconcile_total",
                      {{"controller", "resourceslice"}, {"result", result}});
  };
  EXPECT_EQ(total("success"), 1.0);
  EXPECT_EQ(total("error"), 2.0);
  EXPECT_EQ(total("requeue"), 0.0);
  EXPECT_EQ(total("requeue_after"), 1.0);
  EXPECT_EQ(snap.value("controller_runtime_reconcile_errors_total", controller), 2.0);
  const auto time = snap.histogram("controller_runtime_reconcile_time_seconds", controller);
  ASSERT_TRUE(time.has_value());
  EXPECT_EQ(time->sample_count, 4u);
  EXPECT_EQ(cumulativeCounts(*time, {0.005, 0.1, 0.15, 1.75, 2.0}),
            (CumulativeCounts{1, 1, 3, 3, 4}));
}

TEST(ControllerMetrics, WorkerGauges) {
  auto registry = newRegistry();
  ControllerMetrics metrics(*registry);
  metrics.setMaxConcurrentReconciles(4);
  metrics.addActiveWorkers(1);
  metrics.addActiveWorkers(1);
  metrics.addActiveWorkers(-1);
  const Snapshot snap(*registry);
  EXPECT_EQ(
      snap.value("controller_runtime_max_concurrent_reconciles", {{"controller", "resourceslice"}}),
      4.0);
  EXPECT_EQ(snap.value("controller_runtime_active_workers", {{"controller", "resourceslice"}}),
            1.0);
}

TEST(ControllerMetrics, LeaseExpirationsAreCountedPerDriver) {
  auto registry = newRegistry();
  ControllerMetrics metrics(*registry);
  metrics.poolLeaseExpired("a.example.com");
  metrics.poolLeaseExpired("a.example.com");
  metrics.poolLeaseExpired("b.example.com");
  const Snapshot snap(*registry);
  EXPECT_EQ(snap.value("resourceslice_controller_pool_lease_expirations_total",
                       {{"driver", "a.example.com"}}),
            2.0);
  EXPECT_EQ(snap.value("resourceslice_controller_pool_lease_expirations_total",
                       {{"driver", "b.example.com"}}),
            1.0);
}

TEST(ControllerMetrics, NoLabelNamesBeyondTheContract) {
  auto registry = newRegistry();
  ControllerMetrics metrics(*registry);
  metrics.setDriverCounts(kDriver, {.pools = 1, .slices = 1, .devices = 1});
  metrics.sliceWrite(kDriver, WriteVerb::kCreate, WriteResult::kError);
  metrics.observePublishLatency(kDriver, milliseconds(1));
  metrics.poolLeaseExpired(kDriver);
  for (const auto& family : Snapshot(*registry).families()) {
    for (const auto& metric : family.metric) {
      for (const auto& label : metric.label) {
        EXPECT_TRUE(label.name == "driver" || label.name == "verb" || label.name == "result" ||
                    label.name == "controller")
            << family.name << " has label " << label.name;
      }
    }
  }
}

TEST(ControllerMetrics, ConcurrentWritersAndRemovalsKeepCountsExact) {
  auto registry = newRegistry();
  ControllerMetrics metrics(*registry);
  constexpr int kThreads = 4;
  constexpr int kRounds = 500;
  std::vector<std::thread> threads;
  threads.reserve(kThreads + 1);
  // A scraper collects while the gauges are removed and re-added.
  threads.emplace_back([&registry] {
    for (int i = 0; i < 100; ++i) {
      const Snapshot snap(*registry);
      EXPECT_LE(snap.seriesCount("resourceslice_controller_pools"), 2u);
    }
  });
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&metrics, t] {
      const std::string driver = "d" + std::to_string(t % 2) + ".example.com";
      for (int i = 0; i < kRounds; ++i) {
        metrics.sliceWrite(driver, WriteVerb::kUpdate, WriteResult::kSuccess);
        metrics.setDriverCounts(driver, {.pools = i % 3, .slices = 1, .devices = 1});
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  const Snapshot snap(*registry);
  EXPECT_EQ(snap.sum("resourceslice_controller_slice_writes_total", {{"verb", "update"}}),
            kThreads * kRounds);
  EXPECT_EQ(snap.value("resourceslice_controller_slice_writes_total",
                       {{"driver", "d0.example.com"}, {"verb", "update"}, {"result", "success"}}),
            2 * kRounds);
  // Every thread's last round set one pool.
  EXPECT_EQ(snap.value("resourceslice_controller_pools", {{"driver", "d0.example.com"}}), 1.0);
  EXPECT_EQ(snap.value("resourceslice_controller_pools", {{"driver", "d1.example.com"}}), 1.0);
}

}  // namespace
}  // namespace rsc::metrics
