// The flags of a controller replica that campaigns for a Lease in the default
// namespace with short timings (lease 4 s, renew deadline 3 s, retry 1 s), so
// that failover tests take seconds. Used by the service and leadership tests.
// They serve the inventory API over plain http (unless they add TLS flags), so
// a follower forwards to the leader only with --forward-insecure.
#pragma once

#include <string>
#include <vector>

namespace rsc::testing {

inline std::vector<std::string> leaderFlags(const std::string& id, const std::string& lease) {
  return {"--auth=none",
          "--leader-elect",
          "--leader-election-namespace=default",
          "--leader-election-id=" + lease,
          "--leader-elect-lease-duration=4s",
          "--leader-elect-renew-deadline=3s",
          "--leader-elect-retry-period=1s",
          "--identity=" + id,
          "--forward-insecure"};
}

}  // namespace rsc::testing
