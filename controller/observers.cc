#include "controller/observers.h"

namespace rsc::controller {

namespace {

// The metric label enum of a reconcile enum, by one table each.
template <typename From, typename To, std::size_t N>
To mapped(const std::pair<From, To> (&table)[N], From value) {
  for (const auto& [from, to] : table) {
    if (from == value) return to;
  }
  return table[N - 1].second;
}

using reconcile::ReconcileOutcome;
using reconcile::WriteOutcome;
using reconcile::WriteVerb;
constexpr std::pair<WriteVerb, metrics::WriteVerb> kVerbs[] = {
    {WriteVerb::kCreate, metrics::WriteVerb::kCreate},
    {WriteVerb::kUpdate, metrics::WriteVerb::kUpdate},
    {WriteVerb::kDelete, metrics::WriteVerb::kDelete}};
constexpr std::pair<WriteOutcome, metrics::WriteResult> kWriteResults[] = {
    {WriteOutcome::kSuccess, metrics::WriteResult::kSuccess},
    {WriteOutcome::kConflict, metrics::WriteResult::kConflict},
    {WriteOutcome::kError, metrics::WriteResult::kError}};
constexpr std::pair<ReconcileOutcome, metrics::ReconcileResult> kReconcileResults[] = {
    {ReconcileOutcome::kSuccess, metrics::ReconcileResult::kSuccess},
    {ReconcileOutcome::kRequeueAfter, metrics::ReconcileResult::kRequeueAfter},
    {ReconcileOutcome::kError, metrics::ReconcileResult::kError}};

}  // namespace

void ReconcileMetricsObserver::sliceWrite(const std::string& driver, reconcile::WriteVerb verb,
                                          reconcile::WriteOutcome outcome) {
  m_.sliceWrite(driver, mapped(kVerbs, verb), mapped(kWriteResults, outcome));
}

void ReconcileMetricsObserver::published(const std::string& driver, Clock::Duration latency) {
  m_.observePublishLatency(driver, latency);
}

void ReconcileMetricsObserver::reconciled(reconcile::ReconcileOutcome outcome,
                                          Clock::Duration took) {
  m_.observeReconcile(mapped(kReconcileResults, outcome), took);
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

void ReconcileMetricsObserver::poolHeld(const reconcile::PoolKey& key,
                                        const client::ObjectReference& /*regarding*/,
                                        const std::string& /*node*/) {
  m_.poolHeld(key.driver);
}

namespace {

std::string poolName(const reconcile::PoolKey& key) { return key.driver + "/" + key.pool; }

}  // namespace

void ReconcileEventObserver::foreignChangeReverted(const reconcile::PoolKey& key,
                                                   const client::ObjectReference& slice,
                                                   const std::string& changed_by) {
  if (recorder_ == nullptr) return;
  recorder_->record(slice, client::EventRecorder::kNormal, "ForeignChangeReverted", "Update",
                    "Reverted a change by " +
                        (changed_by.empty() ? "an unknown manager" : changed_by) + " to slice " +
                        slice.name + " of pool " + poolName(key) +
                        ": managed slices follow what their driver pushed");
}

void ReconcileEventObserver::publishFailed(const reconcile::PoolKey& key,
                                           const client::ObjectReference& regarding,
                                           const Status& error) {
  if (recorder_ == nullptr || regarding.kind.empty()) return;
  recorder_->record(
      regarding, client::EventRecorder::kWarning, "PublishFailed", "Publish",
      "Publishing pool " + poolName(key) + " failed (retried with backoff): " + error.toString());
}

void ReconcileEventObserver::poolHeld(const reconcile::PoolKey& key,
                                      const client::ObjectReference& regarding,
                                      const std::string& node) {
  next_.poolHeld(key, regarding, node);
  if (recorder_ == nullptr) return;
  recorder_->record(regarding, client::EventRecorder::kNormal, "PoolHeld", "Hold",
                    "The slices of pool " + poolName(key) + " on node " + node +
                        " were deleted by someone else (the kubelet does so when it starts and "
                        "when the driver's plugin has gone): withdrawn until the driver pushes or "
                        "renews the pool");
}

void ReconcileEventObserver::poolLeaseExpired(const reconcile::PoolKey& key,
                                              const client::ObjectReference& regarding) {
  next_.poolLeaseExpired(key, regarding);
  if (recorder_ == nullptr) return;
  recorder_->record(regarding, client::EventRecorder::kNormal, "PoolLeaseExpired", "Withdraw",
                    "The lease of pool " + poolName(key) +
                        " expired without a renewal or push from its driver: withdrawing its "
                        "slices");
}

void ReconcileEventObserver::slicesAdopted(const reconcile::PoolKey& key,
                                           const client::ObjectReference& regarding, size_t slices,
                                           int64_t generation) {
  next_.slicesAdopted(key, regarding, slices, generation);
  if (recorder_ == nullptr || regarding.kind.empty()) return;
  recorder_->record(regarding, client::EventRecorder::kNormal, "SlicesAdopted", "Adopt",
                    "Adopted " + std::to_string(slices) + " live slice(s) of pool " +
                        poolName(key) + " at generation " + std::to_string(generation) +
                        "; kept as they are while the driver pushes again");
}

void recordLeadership(client::EventRecorder* recorder, const std::string& lease_namespace,
                      const std::string& lease_name, const std::string& identity, bool acquired) {
  if (recorder == nullptr) return;
  const client::ObjectReference lease{"coordination.k8s.io/v1", "Lease", lease_namespace,
                                      lease_name, ""};
  if (acquired) {
    recorder->record(lease, client::EventRecorder::kNormal, "LeaderElected", "Acquire",
                     identity + " became the leader: it writes the ResourceSlices");
  } else {
    recorder->record(lease, client::EventRecorder::kWarning, "LeaderLost", "Release",
                     identity + " stopped leading: it writes no ResourceSlice any more");
  }
}

std::function<void(const client::RequestResult&)> restRequestObserver(
    metrics::RestClientMetrics& m) {
  static_assert(client::RequestResult::kNoResponse == metrics::RestClientMetrics::kNoResponse);
  return [&m](const client::RequestResult& r) { m.observe(r.verb, r.host, r.code, r.duration); };
}

std::function<void(std::string_view resource, client::WatchRestart reason)> watchRestartObserver(
    metrics::WatchMetrics& m) {
  return [&m](std::string_view resource, client::WatchRestart reason) {
    const auto watched = resource == client::NodeMetadata::kResource
                             ? metrics::WatchedResource::kNodes
                             : metrics::WatchedResource::kResourceSlices;
    switch (reason) {
      case client::WatchRestart::kGone:
        return m.restarted(watched, metrics::WatchRestartReason::kExpired);
      case client::WatchRestart::kClosed:
        return m.restarted(watched, metrics::WatchRestartReason::kClosed);
      case client::WatchRestart::kError:
        return m.restarted(watched, metrics::WatchRestartReason::kError);
    }
  };
}

std::function<void(pull::IgnoredReason reason)> ignoredSourceObserver(metrics::PullMetrics& m) {
  return [&m](pull::IgnoredReason reason) { m.ignored(pull::ignoredReasonName(reason)); };
}

pull::PollerObserver pullObserver(metrics::PullMetrics& m) {
  using Seconds = std::chrono::duration<double>;
  pull::PollerObserver o;
  o.on_fetch = [&m](const std::string& driver, std::string_view result, Clock::Duration took) {
    m.fetched(driver, result, Seconds(took).count());
  };
  o.on_success = [&m](const std::string& driver, Clock::SystemTime when) {
    m.succeeded(driver, Seconds(when.time_since_epoch()).count());
  };
  o.on_sources = [&m](const std::string& driver, size_t sources) { m.setSources(driver, sources); };
  o.on_expired = [&m](const std::string& driver, size_t expired) { m.setExpired(driver, expired); };
  o.on_ignored = ignoredSourceObserver(m);
  o.on_fetch_delay = [&m](Clock::Duration late) { m.fetchDelayed(Seconds(late).count()); };
  o.on_waiting = [&m](size_t waiting) { m.setWaiting(waiting); };
  return o;
}

}  // namespace rsc::controller
