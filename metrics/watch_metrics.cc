#include "metrics/watch_metrics.h"

#include <string>

namespace rsc::metrics {

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
                     .Help("ResourceSlice watches started again, by reason.")
                     .Register(registry);
  for (const auto reason :
       {WatchRestartReason::kClosed, WatchRestartReason::kExpired, WatchRestartReason::kError}) {
    restarts_[static_cast<std::size_t>(reason)] =
        &family.Add({{"reason", std::string(watchRestartReasonName(reason))}});
  }
}

void WatchMetrics::restarted(WatchRestartReason reason) {
  restarts_[static_cast<std::size_t>(reason)]->Increment();
}

}  // namespace rsc::metrics
