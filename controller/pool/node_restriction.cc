#include "controller/pool/node_restriction.h"

#include <string>
#include <string_view>
#include <vector>

#include "client/codec.h"
#include "common/strings.h"

namespace rsc::controller::pool {

// Returns why `caller` may not publish devices placed at `node` (nullopt: by
// a node selector or on all nodes), or nullopt.
namespace {

std::optional<std::string> placementRefusal(const Caller& caller,
                                            const std::optional<std::string>& node,
                                            bool allow_unbound) {
  if (caller.node_name) {
    if (node == caller.node_name) return std::nullopt;
    if (node) {
      return caller.subject + " is bound to node " + inQuotes(*caller.node_name) +
             " and may not publish devices of node " + inQuotes(*node);
    }
    return caller.subject + " is bound to node " + inQuotes(*caller.node_name) +
           " and may publish only devices of that node, not devices that a node selector or "
           "allNodes makes available elsewhere";
  }
  if (node && !allow_unbound) {
    return "devices of node " + inQuotes(*node) +
           " may only be published by a caller bound to that node (the service account token "
           "of a pod running there, or an inventory endpoint there), or when the controller "
           "runs with --allow-unbound-node-pools";
  }
  return std::nullopt;
}

}  // namespace

std::optional<FieldError> nodeRestriction(const Caller& caller, const reconcile::Pool& pool,
                                          bool allow_unbound) {
  if (caller.unrestricted) return std::nullopt;
  const auto check = [&](std::string_view field,
                         const std::optional<std::string>& node) -> std::optional<FieldError> {
    if (auto why = placementRefusal(caller, node, allow_unbound)) {
      return FieldError{std::string(field), std::move(*why)};
    }
    return std::nullopt;
  };
  const reconcile::NodeSelection& selection = pool.selection;
  if (selection.node_name) return check("nodeName", selection.node_name);
  if (selection.node_selector) return check("nodeSelector", std::nullopt);
  if (selection.all_nodes) return check("allNodes", std::nullopt);
  if (!selection.per_device_node_selection) return std::nullopt;
  const auto check_devices =
      [&](std::string_view base,
          const std::vector<client::DeviceRef>& devices) -> std::optional<FieldError> {
    for (size_t i = 0; i < devices.size(); ++i) {
      if (!devices[i]->placed()) continue;
      const client::Device d = devices[i].device();
      std::string_view field;
      std::optional<std::string> why;
      if (d.node_name) {
        field = "nodeName";
        why = placementRefusal(caller, d.node_name, allow_unbound);
      } else if (d.node_selector) {
        field = "nodeSelector";
        why = placementRefusal(caller, std::nullopt, allow_unbound);
      } else if (d.all_nodes.value_or(false)) {
        field = "allNodes";
        why = placementRefusal(caller, std::nullopt, allow_unbound);
      }
      if (why) {
        return FieldError{
            std::string(base) + "devices[" + std::to_string(i) + "]." + std::string(field),
            std::move(*why)};
      }
    }
    return std::nullopt;
  };
  if (auto denied = check_devices("", pool.devices)) return denied;
  if (pool.slices) {
    for (size_t i = 0; i < pool.slices->size(); ++i) {
      const std::string base = "slices[" + std::to_string(i) + "].";
      if (auto denied = check_devices(base, (*pool.slices)[i].devices)) return denied;
    }
  }
  return std::nullopt;
}

void deniedPools(const Caller& caller, const std::map<std::string, reconcile::Pool>& pools,
                 bool allow_unbound, std::vector<FieldError>& denied) {
  for (const auto& [name, pool] : pools) {
    if (auto why = nodeRestriction(caller, pool, allow_unbound)) {
      denied.push_back({client::keyPath("pools", name) + "." + why->field, why->message});
    }
  }
}

Status poolsNotAllowed(std::vector<FieldError> denied) {
  std::string message = std::to_string(denied.size()) +
                        " pool(s) not allowed: " + denied.front().field + ": " +
                        denied.front().message;
  return Status(StatusCode::kPermissionDenied, std::move(message), std::move(denied));
}

}  // namespace rsc::controller::pool
