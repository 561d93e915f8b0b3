#include "controller/cleanup.h"

#include <string>

#include "controller/reconcile/reconciler.h"

namespace rsc::controller {

Status deleteManagedSlices(client::KubeApi& api) {
  client::ListOptions selector;
  selector.label_selector =
      std::string(reconcile::kManagedByLabel) + "=" + reconcile::kManagedByValue;
  if (Status s = api.deleteResourceSlices(selector); !s.ok()) {
    return s.withContext("deleting the managed ResourceSlices");
  }
  StatusOr<client::ResourceSliceList> left = api.listResourceSlices(selector);
  if (!left.ok()) return left.status().withContext("listing the managed ResourceSlices");
  for (const client::ResourceSlice& slice : left->items) {
    Status d = api.deleteResourceSlice(slice.metadata.name, {});
    if (!d.ok() && d.code() != StatusCode::kNotFound) {
      return d.withContext("deleting ResourceSlice " + slice.metadata.name);
    }
  }
  return okStatus();
}

}  // namespace rsc::controller
