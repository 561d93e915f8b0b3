#include "metrics/watch_metrics.h"

#include <gtest/gtest.h>

#include "metrics/registry.h"
#include "test/metrics/snapshot.h"

namespace rsc::metrics {
namespace {

constexpr char kRestarts[] = "resourceslice_controller_watch_restarts_total";

TEST(WatchMetrics, EveryResourceAndReasonStartsAtZero) {
  auto registry = newRegistry();
  WatchMetrics metrics(*registry);
  const Snapshot snap(*registry);
  EXPECT_EQ(snap.seriesCount(kRestarts), 6u);
  for (const char* resource : {"resourceslices", "nodes"}) {
    for (const char* reason : {"closed", "expired", "error"}) {
      EXPECT_EQ(snap.value(kRestarts, {{"resource", resource}, {"reason", reason}}), 0.0)
          << resource << " " << reason;
    }
  }
}

TEST(WatchMetrics, CountsRestartsByResourceAndReason) {
  auto registry = newRegistry();
  WatchMetrics metrics(*registry);
  metrics.restarted(WatchedResource::kResourceSlices, WatchRestartReason::kExpired);
  metrics.restarted(WatchedResource::kResourceSlices, WatchRestartReason::kError);
  metrics.restarted(WatchedResource::kResourceSlices, WatchRestartReason::kError);
  metrics.restarted(WatchedResource::kNodes, WatchRestartReason::kClosed);
  const Snapshot snap(*registry);
  const auto slices = [&](const char* reason) {
    return snap.value(kRestarts, {{"resource", "resourceslices"}, {"reason", reason}});
  };
  EXPECT_EQ(slices("closed"), 0.0);
  EXPECT_EQ(slices("expired"), 1.0);
  EXPECT_EQ(slices("error"), 2.0);
  EXPECT_EQ(snap.value(kRestarts, {{"resource", "nodes"}, {"reason", "closed"}}), 1.0);
  EXPECT_EQ(snap.value(kRestarts, {{"resource", "nodes"}, {"reason", "error"}}), 0.0);
}

}  // namespace
}  // namespace rsc::metrics
