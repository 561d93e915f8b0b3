#include "metrics/event_metrics.h"

#include <string>

namespace rsc::metrics {

EventMetrics::EventMetrics(prometheus::Registry& registry)
    : family_(prometheus::BuildCounter()
                  .Name("resourceslice_controller_events_total")
                  .Help("Kubernetes Events recorded, by reason and result (created, series, "
                        "spam_filtered, queue_full, shutdown, error).")
                  .Register(registry)) {}

void EventMetrics::recorded(std::string_view reason, std::string_view result) {
  family_.Add({{"reason", std::string(reason)}, {"result", std::string(result)}}).Increment();
}

}  // namespace rsc::metrics
