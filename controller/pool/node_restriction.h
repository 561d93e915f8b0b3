// Node restriction: which pools a caller may publish, by the nodes their devices land on. The
// push API applies it to every pool a caller pushes, replaces or withdraws; pull mode applies it
// to every pool a discovered endpoint serves, with the endpoint's node as the caller's. Knows
// the Caller only (caller.h), not how it was authenticated. Pure functions; thread-safe.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "controller/pool/caller.h"
#include "controller/reconcile/pool.h"

namespace rsc::controller::pool {

// Returns why `caller` may not write `pool`, naming the field that places it, or nullopt. The
// restriction covers every node the pool can land on: the pool's nodeName, nodeSelector or
// allNodes, and with perDeviceNodeSelection each device's. A caller bound to a node writes only
// pools whose devices are all on that node. A caller bound to no node writes pools placed by
// selector or on all nodes, and node-bound ones only with `allow_unbound`
// (--allow-unbound-node-pools). Field paths are built only for a refusal: an allowed pool costs
// a few comparisons per device (the no-op push path runs this on every push).
std::optional<FieldError> nodeRestriction(const Caller& caller, const reconcile::Pool& pool,
                                          bool allow_unbound);

// Appends to `denied` a refusal for each pool of a driver's inventory (the body of PUT
// /v1/drivers/{driver}, or a pulled answer) that `caller` may not write, its field path under
// pools["name"].
void deniedPools(const Caller& caller, const std::map<std::string, reconcile::Pool>& pools,
                 bool allow_unbound, std::vector<FieldError>& denied);

// The PermissionDenied of an inventory with `denied` pools (not empty): "N pool(s) not allowed:
// <first field>: <its message>", every refusal in the details.
Status poolsNotAllowed(std::vector<FieldError> denied);

}  // namespace rsc::controller::pool
