#include "metrics/leader_election_metrics.h"

#include <gtest/gtest.h>

#include "metrics/registry.h"
#include "test/metrics/snapshot.h"

namespace rsc::metrics {
namespace {

TEST(LeaderElectionMetrics, FollowsLeadership) {
  auto registry = newRegistry();
  LeaderElectionMetrics metrics(*registry, "resourceslice-controller");
  const prometheus::Labels name = {{"name", "resourceslice-controller"}};
  EXPECT_EQ(Snapshot(*registry).value("leader_election_master_status", name), 0.0);
  metrics.setLeader(true);
  EXPECT_EQ(Snapshot(*registry).value("leader_election_master_status", name), 1.0);
  metrics.setLeader(false);
  EXPECT_EQ(Snapshot(*registry).value("leader_election_master_status", name), 0.0);
}

}  // namespace
}  // namespace rsc::metrics
