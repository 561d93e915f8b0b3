// ControllerMetrics: what the reconcile side reports. The per-driver
// resourceslice_controller_* series (pools, slices, devices, slice writes,
// publish latency, lease expirations) and the controller_runtime_* series of
// one controller, under the names dashboards and alerts use (DESIGN.md
// section 8). Built once by main from the registry and passed by reference to
// the controller; tests build their own. Thread-safe: reconcile workers call it
// concurrently.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"

namespace rsc::metrics {

// An API write to a ResourceSlice; the `verb` label.
enum class WriteVerb { kCreate, kUpdate, kDelete };
// How the write ended; the `result` label. kConflict is a 409 (stale
// resourceVersion or failed precondition), which the reconciler retries.
enum class WriteResult { kSuccess, kConflict, kError };
// How one reconcile ended, as controller-runtime counts it.
enum class ReconcileResult { kSuccess, kError, kRequeue, kRequeueAfter };

std::string_view writeVerbName(WriteVerb verb);
std::string_view writeResultName(WriteResult result);
std::string_view reconcileResultName(ReconcileResult result);

// What one driver has published, for the per-driver gauges.
struct DriverCounts {
  std::int64_t pools = 0;
  std::int64_t slices = 0;
  std::int64_t devices = 0;
};

class ControllerMetrics {
 public:
  // The `controller` label of the controller_runtime_* series.
  static constexpr std::string_view kDefaultController = "resourceslice";

  // Registers the families in `registry`, which must outlive this object, and
  // sets every controller_runtime_* series of `controller` to 0.
  explicit ControllerMetrics(prometheus::Registry& registry,
                             std::string_view controller = kDefaultController);
  ControllerMetrics(const ControllerMetrics&) = delete;
  ControllerMetrics& operator=(const ControllerMetrics&) = delete;

  // Creates the counters and the histogram of `driver` at 0, so that rate()
  // and absent-based alerts see the driver from its first push. The other
  // per-driver methods do this themselves on a driver's first use.
  void addDriver(std::string_view driver);
  // Sets the pools, slices and devices gauges of `driver`. A driver with no
  // pools left has its three gauge series removed, so uninstalled drivers do
  // not linger on dashboards; its counters stay (removing them would look like
  // a counter reset).
  void setDriverCounts(std::string_view driver, DriverCounts counts);
  void sliceWrite(std::string_view driver, WriteVerb verb, WriteResult result);
  // Records the time from an accepted push to the pool being published.
  void observePublishLatency(std::string_view driver, Clock::Duration latency);
  void poolLeaseExpired(std::string_view driver);
  // A pool was held: someone else deleted its node's slices.
  void poolHeld(std::string_view driver);

  // Counts one reconcile and records how long it took; kError also counts
  // controller_runtime_reconcile_errors_total.
  void observeReconcile(ReconcileResult result, Clock::Duration duration);
  void setMaxConcurrentReconciles(int workers);
  // A worker calls addActiveWorkers(1) before a reconcile and
  // addActiveWorkers(-1) after it.
  void addActiveWorkers(int delta);

  // Upper bounds of controller_runtime_reconcile_time_seconds: controller-runtime's.
  static std::vector<double> reconcileTimeBuckets();
  // Upper bounds of resourceslice_controller_publish_latency_seconds: 5 ms (a
  // push that needed one write on a quiet server) to 60 s (a large pool
  // behind a client-side rate limit or a retried conflict).
  static std::vector<double> publishLatencyBuckets();

 private:
  static constexpr std::size_t kVerbCount = 3;
  static constexpr std::size_t kResultCount = 3;
  static constexpr std::size_t kReconcileResultCount = 4;

  // The series of one driver. Counters and the histogram are never removed,
  // so their pointers stay valid without the lock; the gauges are removed and
  // re-added, so they are only touched under mu_.
  struct DriverSeries {
    std::array<std::array<prometheus::Counter*, kResultCount>, kVerbCount> writes{};
    prometheus::Histogram* publish_latency = nullptr;
    prometheus::Counter* lease_expirations = nullptr;
    prometheus::Counter* holds = nullptr;
    prometheus::Gauge* pools = nullptr;
    prometheus::Gauge* slices = nullptr;
    prometheus::Gauge* devices = nullptr;
  };

  DriverSeries& driverLocked(std::string_view driver);

  prometheus::Family<prometheus::Gauge>& pools_;
  prometheus::Family<prometheus::Gauge>& slices_;
  prometheus::Family<prometheus::Gauge>& devices_;
  prometheus::Family<prometheus::Counter>& slice_writes_;
  prometheus::Family<prometheus::Histogram>& publish_latency_;
  prometheus::Family<prometheus::Counter>& lease_expirations_;
  prometheus::Family<prometheus::Counter>& holds_;

  std::array<prometheus::Counter*, kReconcileResultCount> reconcile_total_{};
  prometheus::Counter& reconcile_errors_;
  prometheus::Histogram& reconcile_time_;
  prometheus::Gauge& max_concurrent_reconciles_;
  prometheus::Gauge& active_workers_;

  std::mutex mu_;
  std::map<std::string, DriverSeries, std::less<>> drivers_;  // guarded by mu_
};

}  // namespace rsc::metrics
