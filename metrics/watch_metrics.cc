#include "metrics/watch_metrics.h"

#include <string>

#include "common/enum_names.h"
#include "metrics/registry.h"

namespace rsc::metrics {

constexpr auto kWatchedResourceNames = enumNames<WatchedResource>({
    {WatchedResource::kResourceSlices, "resourceslices"},
    {WatchedResource::kNodes, "nodes"},
});

std::string_view watchedResourceName(WatchedResource resource) {
  return kWatchedResourceNames(resource);
}

constexpr auto kWatchRestartReasonNames = enumNames<WatchRestartReason>({
    {WatchRestartReason::kClosed, "closed"},
    {WatchRestartReason::kExpired, "expired"},
    {WatchRestartReason::kError, "error"},
});

std::string_view watchRestartReasonName(WatchRestartReason reason) {
  return kWatchRestartReasonNames(reason);
}

WatchMetrics::WatchMetrics(prometheus::Registry& registry) {
  auto& family =
      counterFamily(registry, "resourceslice_controller_watch_restarts_total",
                    "Watches (of ResourceSlices, and of Nodes for the Node cache) started "
                    "again, by resource and reason.");
  for (const auto resource : kWatchedResourceNames.values()) {
    for (const auto reason : kWatchRestartReasonNames.values()) {
      restarts_[static_cast<std::size_t>(resource)][static_cast<std::size_t>(reason)] =
          &family.Add({{"resource", std::string(watchedResourceName(resource))},
                       {"reason", std::string(watchRestartReasonName(reason))}});
    }
  }
}

void WatchMetrics::restarted(WatchedResource resource, WatchRestartReason reason) {
  restarts_[static_cast<std::size_t>(resource)][static_cast<std::size_t>(reason)]->Increment();
}

}  // namespace rsc::metrics
