#include "metrics/controller_metrics.h"

#include <string>

#include "common/enum_names.h"
#include "metrics/registry.h"

namespace rsc::metrics {

namespace {

prometheus::Labels driverLabels(std::string_view driver) {
  return {{"driver", std::string(driver)}};
}

}  // namespace

constexpr auto kWriteVerbNames = enumNames<WriteVerb>({
    {WriteVerb::kCreate, "create"},
    {WriteVerb::kUpdate, "update"},
    {WriteVerb::kDelete, "delete"},
});

std::string_view writeVerbName(WriteVerb verb) { return kWriteVerbNames(verb); }

constexpr auto kWriteResultNames = enumNames<WriteResult>({
    {WriteResult::kSuccess, "success"},
    {WriteResult::kConflict, "conflict"},
    {WriteResult::kError, "error"},
});

std::string_view writeResultName(WriteResult result) { return kWriteResultNames(result); }

constexpr auto kReconcileResultNames = enumNames<ReconcileResult>({
    {ReconcileResult::kSuccess, "success"},
    {ReconcileResult::kError, "error"},
    {ReconcileResult::kRequeue, "requeue"},
    {ReconcileResult::kRequeueAfter, "requeue_after"},
});

std::string_view reconcileResultName(ReconcileResult result) {
  return kReconcileResultNames(result);
}

std::vector<double> ControllerMetrics::reconcileTimeBuckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1,  0.15, 0.2,  0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6,
          0.7,   0.8,  0.9,   1.0,  1.25, 1.5,  1.75, 2.0,  2.5, 3.0,  3.5, 4.0,  4.5, 5.0,
          6.0,   7.0,  8.0,   9.0,  10,   15,   20,   25,   30,  40,   50,  60};
}

std::vector<double> ControllerMetrics::publishLatencyBuckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60};
}

ControllerMetrics::ControllerMetrics(prometheus::Registry& registry, std::string_view controller)
    : pools_(gaugeFamily(registry, "resourceslice_controller_pools",
                         "Number of pools the controller publishes, per driver.")),
      slices_(gaugeFamily(registry, "resourceslice_controller_slices",
                          "Number of ResourceSlices the controller publishes, per driver.")),
      devices_(gaugeFamily(registry, "resourceslice_controller_devices",
                           "Number of devices in the published ResourceSlices, per driver.")),
      slice_writes_(
          counterFamily(registry, "resourceslice_controller_slice_writes_total",
                        "ResourceSlice writes sent to the API server, by verb and result.")),
      publish_latency_(histogramFamily(registry, "resourceslice_controller_publish_latency_seconds",
                                       "Time from an accepted push to its pool being published.")),
      lease_expirations_(counterFamily(registry,
                                       "resourceslice_controller_pool_lease_expirations_total",
                                       "Pools withdrawn because their driver did not renew them.")),
      holds_(counterFamily(registry, "resourceslice_controller_pool_holds_total",
                           "Pools held (withdrawn until their driver pushes or renews them) "
                           "because someone else, usually the kubelet, deleted their node's "
                           "slices.")),
      reconcile_errors_(counterFamily(registry, "controller_runtime_reconcile_errors_total",
                                      "Reconciles that returned an error, per controller.")
                            .Add({{"controller", std::string(controller)}})),
      reconcile_time_(histogramFamily(registry, "controller_runtime_reconcile_time_seconds",
                                      "Time one reconcile takes, per controller.")
                          .Add({{"controller", std::string(controller)}}, reconcileTimeBuckets())),
      max_concurrent_reconciles_(gaugeFamily(registry,
                                             "controller_runtime_max_concurrent_reconciles",
                                             "Number of reconcile workers, per controller.")
                                     .Add({{"controller", std::string(controller)}})),
      active_workers_(gaugeFamily(registry, "controller_runtime_active_workers",
                                  "Reconcile workers busy now, per controller.")
                          .Add({{"controller", std::string(controller)}})) {
  auto& reconcile_total = counterFamily(registry, "controller_runtime_reconcile_total",
                                        "Reconciles, per controller and result.");
  for (const auto result : kReconcileResultNames.values()) {
    reconcile_total_[static_cast<std::size_t>(result)] =
        &reconcile_total.Add({{"controller", std::string(controller)},
                              {"result", std::string(reconcileResultName(result))}});
  }
}

ControllerMetrics::DriverSeries& ControllerMetrics::driverLocked(std::string_view driver) {
  auto it = drivers_.find(driver);
  if (it != drivers_.end()) {
    return it->second;
  }

  // First sight of this driver: create its counters and histogram at 0.
  DriverSeries series;
  for (const auto verb : kWriteVerbNames.values()) {
    for (const auto result : kWriteResultNames.values()) {
      series.writes[static_cast<std::size_t>(verb)][static_cast<std::size_t>(result)] =
          &slice_writes_.Add({{"driver", std::string(driver)},
                              {"verb", std::string(writeVerbName(verb))},
                              {"result", std::string(writeResultName(result))}});
    }
  }
  series.publish_latency = &publish_latency_.Add(driverLabels(driver), publishLatencyBuckets());
  series.lease_expirations = &lease_expirations_.Add(driverLabels(driver));
  series.holds = &holds_.Add(driverLabels(driver));
  return drivers_.emplace(std::string(driver), series).first->second;
}

void ControllerMetrics::addDriver(std::string_view driver) {
  std::lock_guard lock(mu_);
  driverLocked(driver);
}

void ControllerMetrics::setDriverCounts(std::string_view driver, DriverCounts counts) {
  std::lock_guard lock(mu_);
  auto& series = driverLocked(driver);
  if (counts.pools == 0) {
    if (series.pools != nullptr) {
      pools_.Remove(series.pools);
      slices_.Remove(series.slices);
      devices_.Remove(series.devices);
      series.pools = series.slices = series.devices = nullptr;
    }
    return;
  }
  if (series.pools == nullptr) {
    series.pools = &pools_.Add(driverLabels(driver));
    series.slices = &slices_.Add(driverLabels(driver));
    series.devices = &devices_.Add(driverLabels(driver));
  }
  series.pools->Set(static_cast<double>(counts.pools));
  series.slices->Set(static_cast<double>(counts.slices));
  series.devices->Set(static_cast<double>(counts.devices));
}

void ControllerMetrics::sliceWrite(std::string_view driver, WriteVerb verb, WriteResult result) {
  prometheus::Counter* counter = nullptr;
  {
    std::lock_guard lock(mu_);
    counter = driverLocked(driver)
                  .writes[static_cast<std::size_t>(verb)][static_cast<std::size_t>(result)];
  }
  counter->Increment();
}

void ControllerMetrics::observePublishLatency(std::string_view driver, Clock::Duration latency) {
  prometheus::Histogram* histogram = nullptr;
  {
    std::lock_guard lock(mu_);
    histogram = driverLocked(driver).publish_latency;
  }
  histogram->Observe(toSeconds(latency));
}

void ControllerMetrics::poolLeaseExpired(std::string_view driver) {
  prometheus::Counter* counter = nullptr;
  {
    std::lock_guard lock(mu_);
    counter = driverLocked(driver).lease_expirations;
  }
  counter->Increment();
}

void ControllerMetrics::poolHeld(std::string_view driver) {
  prometheus::Counter* counter = nullptr;
  {
    std::lock_guard lock(mu_);
    counter = driverLocked(driver).holds;
  }
  counter->Increment();
}

void ControllerMetrics::observeReconcile(ReconcileResult result, Clock::Duration duration) {
  reconcile_total_[static_cast<std::size_t>(result)]->Increment();
  if (result == ReconcileResult::kError) {
    reconcile_errors_.Increment();
  }
  reconcile_time_.Observe(toSeconds(duration));
}

void ControllerMetrics::setMaxConcurrentReconciles(int workers) {
  max_concurrent_reconciles_.Set(workers);
}

void ControllerMetrics::addActiveWorkers(int delta) { active_workers_.Increment(delta); }

}  // namespace rsc::metrics
