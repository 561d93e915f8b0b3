#include "metrics/watch_metrics.h"

#include <string>

namespace rsc::metrics {

std::string_view watchedResourceName(WatchedResource resource) {
  switch (resource) {
    case WatchedResource::kResourceSlices:
      return "resourceslices";
    case WatchedResource::kNodes:
      return "nodes";
  }
  return "unknown";
}

std::string_view watchRestartReasonName(WatchRestartReason reason) {
  switch (reason) {
    case WatchRestartReason::kClosed:
      return "closed";
    case WatchRestartReason::kExpired:
      return "expired";
    case WatchRestartReason::kError:
      return "error";
  }
  return "unknown";
}

WatchMetrics::WatchMetrics(prometheus::Registry& registry) {
  auto& family = prometheus::BuildCounter()
                     .Name("resourceslice_controller_watch_restarts_total")
                     .Help(
                         "Watches (of ResourceSlices, and of Nodes for the Node cache) started "
                         "again, by resource and reason.")
                     .Register(registry);
  for (const auto resource : {WatchedResource::kResourceSlices, WatchedResource::kNodes}) {
    for (const auto reason :
         {WatchRestartReason::kClosed, WatchRestartReason::kExpired, WatchRestartReason::kError}) {
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
