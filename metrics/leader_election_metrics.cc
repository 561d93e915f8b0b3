#include "metrics/leader_election_metrics.h"

#include <string>

#include "metrics/registry.h"

namespace rsc::metrics {

LeaderElectionMetrics::LeaderElectionMetrics(prometheus::Registry& registry, std::string_view name)
    : status_(gaugeFamily(registry, "leader_election_master_status",
                          "1 when this replica holds the leader Lease, 0 when it does not.")
                  .Add({{"name", std::string(name)}})) {}

void LeaderElectionMetrics::setLeader(bool leader) { status_.Set(leader ? 1 : 0); }

}  // namespace rsc::metrics
