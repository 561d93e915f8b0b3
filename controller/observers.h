// Adapters from the hooks of reconcile/, client/ and the work queue to the
// metric structs of metrics/, so that those folders need not know metrics/,
// and to Kubernetes Events (client::EventRecorder). Built once by main.
// Thread-safe (the metric structs and the recorder are).
#pragma once

#include <set>
#include <string>
#include <string_view>

#include "client/event_recorder.h"
#include "client/rest_kube_api.h"
#include "controller/pull/poller.h"
#include "controller/reconcile/controller.h"
#include "controller/reconcile/reconciler.h"
#include "controller/reconcile/work_queue.h"
#include "metrics/controller_metrics.h"
#include "metrics/pull_metrics.h"
#include "metrics/rest_client_metrics.h"
#include "metrics/watch_metrics.h"
#include "metrics/work_queue_metrics.h"

namespace rsc::controller {

class ReconcileMetricsObserver final : public reconcile::ReconcilerObserver,
                                       public reconcile::ControllerObserver {
 public:
  explicit ReconcileMetricsObserver(metrics::ControllerMetrics& m) : m_(m) {}

  // ReconcilerObserver
  void sliceWrite(const std::string& driver, reconcile::WriteVerb verb,
                  reconcile::WriteOutcome outcome) override;
  void published(const std::string& driver, Clock::Duration latency) override;
  // ControllerObserver
  void reconciled(reconcile::ReconcileOutcome outcome, Clock::Duration took) override;
  void activeWorkers(int n) override;
  void counts(const std::map<std::string, reconcile::DriverCounts>& by_driver) override;
  void leaseExpired(const std::string& driver) override;
  void poolHeld(const reconcile::PoolKey& key, const client::ObjectReference& regarding,
                const std::string& node) override;

 private:
  metrics::ControllerMetrics& m_;
  std::mutex mu_;
  int active_ = 0;                 // guarded by mu_
  std::set<std::string> drivers_;  // guarded by mu_: drivers with gauges
};

// The reconcile hooks that make Kubernetes Events, each in front of `next`
// (the metrics), which sees every hook. Without a recorder (--events=false)
// it only forwards.
class ReconcileEventObserver final : public reconcile::ReconcilerObserver,
                                     public reconcile::ControllerObserver {
 public:
  ReconcileEventObserver(ReconcileMetricsObserver& next, client::EventRecorder* recorder)
      : next_(next), recorder_(recorder) {}

  // ReconcilerObserver
  void sliceWrite(const std::string& driver, reconcile::WriteVerb verb,
                  reconcile::WriteOutcome outcome) override {
    next_.sliceWrite(driver, verb, outcome);
  }
  void published(const std::string& driver, Clock::Duration latency) override {
    next_.published(driver, latency);
  }
  void foreignChangeReverted(const reconcile::PoolKey& key, const client::ObjectReference& slice,
                             const std::string& changed_by) override;
  void publishFailed(const reconcile::PoolKey& key, const client::ObjectReference& regarding,
                     const Status& error) override;
  void poolHeld(const reconcile::PoolKey& key, const client::ObjectReference& regarding,
                const std::string& node) override;
  // ControllerObserver
  void reconciled(reconcile::ReconcileOutcome outcome, Clock::Duration took) override {
    next_.reconciled(outcome, took);
  }
  void activeWorkers(int n) override { next_.activeWorkers(n); }
  void counts(const std::map<std::string, reconcile::DriverCounts>& by_driver) override {
    next_.counts(by_driver);
  }
  void leaseExpired(const std::string& driver) override { next_.leaseExpired(driver); }
  void poolLeaseExpired(const reconcile::PoolKey& key,
                        const client::ObjectReference& regarding) override;
  void slicesAdopted(const reconcile::PoolKey& key, const client::ObjectReference& regarding,
                     size_t slices, int64_t generation) override;

 private:
  ReconcileMetricsObserver& next_;
  client::EventRecorder* const recorder_;
};

// Leadership as Events about the Lease (LeaderElected, LeaderLost).
void recordLeadership(client::EventRecorder* recorder, const std::string& lease_namespace,
                      const std::string& lease_name, const std::string& identity, bool acquired);

class WorkQueueMetricsObserver final : public reconcile::WorkQueueObserver {
 public:
  explicit WorkQueueMetricsObserver(metrics::WorkQueueMetrics& m) : m_(m) {}
  void add() override { m_.added(); }
  void depth(std::size_t depth) override { m_.setDepth(depth); }
  void get(Clock::Duration queued_for) override { m_.observeQueueDuration(queued_for); }
  void done(Clock::Duration worked_for) override { m_.observeWorkDuration(worked_for); }
  void retry() override { m_.retried(); }
  void unfinishedWork(Clock::Duration total, Clock::Duration longest) override {
    m_.setUnfinishedWork(total);
    m_.setLongestRunningProcessor(longest);
  }

 private:
  metrics::WorkQueueMetrics& m_;
};

// Every API request by its verb, host and code (no response: kNoResponse).
std::function<void(const client::RequestResult&)> restRequestObserver(
    metrics::RestClientMetrics& m);
// An informer's watch restart: resource "nodes" or "resourceslices".
std::function<void(std::string_view resource, client::WatchRestart reason)> watchRestartObserver(
    metrics::WatchMetrics& m);
// A discovered source not pulled, by the poller or by discovery.
std::function<void(pull::IgnoredReason reason)> ignoredSourceObserver(metrics::PullMetrics& m);
// The poller's fetches, sources and refusals.
pull::PollerObserver pullObserver(metrics::PullMetrics& m);

}  // namespace rsc::controller
