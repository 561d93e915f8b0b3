#include "metrics/inventory_metrics.h"

#include <array>

#include "metrics/registry.h"

namespace rsc::metrics {

namespace {

// The codes the inventory API answers a push with (DESIGN.md section 4).
constexpr std::array kKnownPushCodes = {200, 202, 400, 401, 403, 404, 409, 413, 422, 429, 500, 503};

}  // namespace

InventoryMetrics::InventoryMetrics(prometheus::Registry& registry, std::size_t max_drivers)
    : pushes_(counterFamily(registry, "resourceslice_controller_pushes_total",
                            "Inventory push requests, by driver and HTTP status code. Pushes "
                            "refused before the caller was authenticated and authorized for the "
                            "driver are counted as driver=\"_refused\".")),
      bodies_(
          counterFamily(registry, "resourceslice_controller_push_bodies_total",
                        "Pool bodies pushed with PUT /v1/drivers/{driver}/pools/{pool}, by "
                        "driver and path: decoded (parsed, validated and compared) or unchanged "
                        "(the same bytes as the body of the pool's current content, which only "
                        "renews the pool's lease).")),
      refusals_(counterFamily(registry, "resourceslice_controller_inventory_refusals_total",
                              "Connections and requests the inventory API refused at one of its "
                              "limits, by reason.")),
      certificate_events_(
          counterFamily(registry, "resourceslice_controller_inventory_certificate_events_total",
                        "Events of the inventory API's self-signed certificate "
                        "Secret and CA bundle ConfigMap: created, adopted (made by "
                        "another replica), prepared (a next CA joined the bundle), "
                        "rotated, repaired, published, failed.")),
      max_drivers_(max_drivers) {
  for (std::string_view event : kCertificateEvents) {
    certificate_counters_[event] = &certificate_events_.Add({{"event", std::string(event)}});
  }
  certificate_counters_["other"] = &certificate_events_.Add({{"event", "other"}});
  for (std::string_view reason : kRefusalReasons) {
    refusal_counters_[reason] = &refusals_.Add({{"reason", std::string(reason)}});
  }
  refusal_counters_["other"] = &refusals_.Add({{"reason", "other"}});
}

void InventoryMetrics::refused(std::string_view reason) {
  auto it = refusal_counters_.find(reason);
  if (it == refusal_counters_.end()) it = refusal_counters_.find("other");
  it->second->Increment();
}

void InventoryMetrics::certificateEvent(std::string_view event) {
  auto it = certificate_counters_.find(event);
  if (it == certificate_counters_.end()) it = certificate_counters_.find("other");
  it->second->Increment();
}

prometheus::Counter& InventoryMetrics::counterLocked(const std::string& driver, int http_code) {
  auto& codes = drivers_[driver];
  auto it = codes.find(http_code);
  if (it != codes.end()) {
    return *it->second;
  }
  auto& counter = pushes_.Add({{"driver", driver}, {"code", std::to_string(http_code)}});
  codes.emplace(http_code, &counter);
  return counter;
}

void InventoryMetrics::push(std::string_view driver, int http_code) {
  prometheus::Counter* counter = nullptr;
  {
    std::lock_guard lock(mu_);
    std::string label(driver.empty() ? kRefusedDriver : driver);
    if (drivers_.find(label) == drivers_.end() && label != kRefusedDriver) {
      if (drivers_.size() - drivers_.count(std::string(kRefusedDriver)) >= max_drivers_) {
        label = std::string(kOverflowDriver);
      } else {
        for (const int code : kKnownPushCodes) {
          counterLocked(label, code);
        }
      }
    }
    counter = &counterLocked(label, http_code);
  }
  counter->Increment();
}

void InventoryMetrics::poolBody(std::string_view driver, bool unchanged) {
  prometheus::Counter* counter = nullptr;
  {
    std::lock_guard lock(mu_);
    auto it = body_drivers_.find(driver);
    if (it == body_drivers_.end()) {
      const std::string label(body_drivers_.size() >= max_drivers_ ? kOverflowDriver : driver);
      it = body_drivers_.find(label);
      if (it == body_drivers_.end()) {
        const BodyCounters counters{&bodies_.Add({{"driver", label}, {"path", "decoded"}}),
                                    &bodies_.Add({{"driver", label}, {"path", "unchanged"}})};
        it = body_drivers_.emplace(label, counters).first;
      }
    }
    counter = unchanged ? it->second.unchanged : it->second.decoded;
  }
  counter->Increment();
}

}  // namespace rsc::metrics
