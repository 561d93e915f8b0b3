// EventMetrics: what became of the Kubernetes Events the controller recorded
// (client/event_recorder.h): created, counted in a series, or dropped by the
// spam filter, a full queue, shutdown or an API error. client/ knows nothing
// of metrics, so main wires the recorder's observer to this. Thread-safe.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include <string_view>

namespace rsc::metrics {

class EventMetrics {
 public:
  // Registers resourceslice_controller_events_total{reason,result} in
  // `registry`, which must outlive this object.
  explicit EventMetrics(prometheus::Registry& registry);
  EventMetrics(const EventMetrics&) = delete;
  EventMetrics& operator=(const EventMetrics&) = delete;

  // `reason` is the Event's reason (a few fixed words of the controller's
  // own), `result` the recorder's name for the outcome.
  void recorded(std::string_view reason, std::string_view result);

 private:
  prometheus::Family<prometheus::Counter>& family_;
};

}  // namespace rsc::metrics
