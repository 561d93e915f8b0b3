// What the API server drops of a ResourceSlice (fields of features that are off there, or that it
// does not know), learnt once as leading starts from dry-run creates of probe slices, so that the
// Reconciler treats them as dropped from its first reconcile: a restarted controller needs no
// write per pool to learn them again from the answers. Used by the Controller. Pure functions
// apart from the API calls; thread-safe.
#pragma once

#include <set>
#include <string>
#include <string_view>

#include "client/kube_api.h"
#include "common/status.h"
#include "controller/reconcile/planner.h"

namespace rsc::controller::reconcile {

// The driver of the probe slices: ours, never a real driver's. Nothing is stored under it.
inline constexpr char kProbeDriver[] = "probe.resourceslice-controller.dra.k8s.io";

// A field path without its list indices and map keys, so that a drop learnt from one device
// covers that field of every device: "spec.devices[3].capacity[\"mem\"].requestPolicy" becomes
// "spec.devices[].capacity[].requestPolicy".
std::string fieldShape(std::string_view path);

// The shapes of the fields the server drops. One probe per feature of client/api_features.h: a
// dry-run create of a slice for all nodes with one device carrying that feature's fields (counter
// sets in the device's slice, or in a slice of their own, as `placement` says the server takes
// them). A probe the server refuses for its content (400, 422) teaches nothing: those fields are
// learnt from the answers to writes, as without probing. Fails when a probe fails otherwise
// (RBAC, an unreachable server, no dryRun); then nothing was learnt.
StatusOr<std::set<std::string>> probeDroppedFields(client::KubeApi& api,
                                                   CounterPlacement placement);

}  // namespace rsc::controller::reconcile
