// deleteManagedSlices: what --cleanup does for the chart's pre-delete hook:
// deletes every ResourceSlice this controller manages (by its managed-by
// label) and succeeds only when none is left. Used by main before anything
// else starts; blocks on the API server.
#pragma once

#include "client/kube_api.h"
#include "common/status.h"

namespace rsc::controller {

// Deletes the managed slices with one collection delete, then each one the
// list still shows (a slice already gone counts as deleted). Fails with the
// first error, with context.
Status deleteManagedSlices(client::KubeApi& api);

}  // namespace rsc::controller
