#include "controller/observers.h"

namespace rsc::controller {

void ReconcileMetricsObserver::sliceWrite(const std::string& driver, std::string_view verb,
                                          std::string_view result) {
  metrics::WriteVerb v = metrics::WriteVerb::kCreate;
  if (verb == "update") v = metrics::WriteVerb::kUpdate;
  if (verb == "delete") v = metrics::WriteVerb::kDelete;
  metrics::WriteResult r = metrics::WriteResult::kSuccess;
  if (result == "conflict") r = metrics::WriteResult::kConflict;
  if (result == "error") r = metrics::WriteResult::kError;
  m_.sliceWrite(driver, v, r);
}

void ReconcileMetricsObserver::published(const std::string& driver, Clock::Duration latency) {
  m_.observePublishLatency(driver, latency);
}

void ReconcileMetricsObserver::reconciled(std::string_view result, Clock::Duration took) {
  metrics::ReconcileResult r = metrics::ReconcileResult::kSuccess;
  if (result == "error") r = metrics::ReconcileResult::kError;
  if (result == "requeue_after") r = metrics::ReconcileResult::kRequeueAfter;
  m_.observeReconcile(r, took);
}

void ReconcileMetricsObserver::activeWorkers(int n) {
  std::lock_guard lock(mu_);
  m_.addActiveWorkers(n - active_);
  active_ = n;
}

void ReconcileMetricsObserver::counts(
    const std::map<std::string, reconcile::DriverCounts>& by_driver) {
  std::lock_guard lock(mu_);
  // Drivers that have gone drop to zero rather than vanish, so that rate()
  // and absent() in dashboards behave; their series stay until restart.
  for (const std::string& d : drivers_) {
    if (!by_driver.contains(d)) m_.setDriverCounts(d, {});
  }
  for (const auto& [driver, c] : by_driver) {
    drivers_.insert(driver);
    m_.setDriverCounts(driver, {c.pools, c.slices, c.devices});
  }
}

void ReconcileMetricsObserver::leaseExpired(const std::string& driver) {
  m_.poolLeaseExpired(driver);
}

}  // namespace rsc::controller
