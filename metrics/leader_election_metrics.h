// LeaderElectionMetrics: whether this replica holds the Lease, as client-go's
// leader_election_master_status{name} (1 leader, 0 not). The elector sets it on
// every transition. Thread-safe.
#pragma once

#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <string_view>

namespace rsc::metrics {

class LeaderElectionMetrics {
 public:
  // Registers the family in `registry`, which must outlive this object; `name`
  // is the Lease name (--leader-election-id). Starts at 0: not the leader.
  LeaderElectionMetrics(prometheus::Registry& registry, std::string_view name);
  LeaderElectionMetrics(const LeaderElectionMetrics&) = delete;
  LeaderElectionMetrics& operator=(const LeaderElectionMetrics&) = delete;

  void setLeader(bool leader);

 private:
  prometheus::Gauge& status_;
};

}  // namespace rsc::metrics
