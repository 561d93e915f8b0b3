#include "metrics/watch_metrics.h"

#include <gtest/gtest.h>

#include "metrics/registry.h"
#include "metrics/snapshot.h"

namespace rsc::metrics {
namespace {

constexpr char kRestarts[] = "resourceslice_controller_watch_restarts_total";

TEST(WatchMetrics, EveryReasonStartsAtZero) {
  auto registry = newRegistry();
  WatchMetrics metrics(*registry);
  const Snapshot snap(*registry);
  EXPECT_EQ(snap.seriesCount(kRestarts), 3u);
  for (const char* reason : {"closed", "expired", "error"}) {
    EXPECT_EQ(snap.value(kRestarts, {{"reason", reason}}), 0.0) << reason;
  }
}

TEST(WatchMetrics, CountsRestartsByReason) {
  auto registry = newRegistry();
  WatchMetrics metrics(*registry);
  metrics.restarted(WatchRestartReason::kExpired);
  metrics.restarted(WatchRestartReason::kError);
  metrics.restarted(WatchRestartReason::kError);
  const Snapshot snap(*registry);
  EXPECT_EQ(snap.value(kRestarts, {{"reason", "closed"}}), 0.0);
  EXPECT_EQ(snap.value(kRestarts, {{"reason", "expired"}}), 1.0);
  EXPECT_EQ(snap.value(kRestarts, {{"reason", "error"}}), 2.0);
}

}  // namespace
}  // namespace rsc::metrics
