#include "metrics/event_metrics.h"

#include <string>

#include "metrics/registry.h"

namespace rsc::metrics {

EventMetrics::EventMetrics(prometheus::Registry& registry)
    : family_(counterFamily(registry, "resourceslice_controller_events_total",
                            "Kubernetes Events recorded, by reason and result (created, series, "
                            "spam_filtered, queue_full, shutdown, error).")) {}

void EventMetrics::recorded(std::string_view reason, std::string_view result) {
  family_.Add({{"reason", std::string(reason)}, {"result", std::string(result)}}).Increment();
}

}  // namespace rsc::metrics
