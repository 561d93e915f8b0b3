#include "controller/observers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "metrics/registry.h"
#include "test/fakes/fake_clock.h"
#include "test/fakes/fake_kube_api.h"
#include "test/metrics/snapshot.h"

namespace rsc::controller {
namespace {

using ::testing::HasSubstr;

class ReconcileEventObserverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    client::EventRecorderOptions o;
    o.api = &api_;
    o.clock = &clock_;
    o.reporting_instance = "replica-a";
    o.qps = 0;
    auto r = client::EventRecorder::create(o);
    ASSERT_TRUE(r.ok()) << r.status().toString();
    recorder_ = std::move(*r);
  }

  // The Events sent, by reason.
  std::map<std::string, client::Event> sent() {
    EXPECT_TRUE(recorder_->waitIdleForTest());
    std::map<std::string, client::Event> by_reason;
    for (const client::Event& e : api_.events()) by_reason[e.reason] = e;
    return by_reason;
  }

  testing::FakeClock clock_;
  testing::FakeKubeApi api_{clock_};
  std::shared_ptr<prometheus::Registry> registry_ = metrics::newRegistry();
  metrics::ControllerMetrics metrics_{*registry_};
  ReconcileMetricsObserver metrics_observer_{metrics_};
  std::unique_ptr<client::EventRecorder> recorder_;
  const reconcile::PoolKey key_{"gpu.example.com", "node-a"};
  const client::ObjectReference slice_{"resource.k8s.io/v1", "ResourceSlice", "", "s-1", "u-1"};
};

TEST_F(ReconcileEventObserverTest, EachHookIsAnEventAboutItsObject) {
  ReconcileEventObserver observer(metrics_observer_, recorder_.get());
  observer.foreignChangeReverted(key_, slice_, "kubectl-edit");
  observer.publishFailed(key_, slice_,
                         Status(StatusCode::kUnprocessable, "spec.devices: Invalid value"));
  observer.poolLeaseExpired(key_, slice_);
  observer.slicesAdopted(key_, slice_, 2, 4);
  recordLeadership(recorder_.get(), "kube-system", "rsc", "replica-a", true);
  recordLeadership(recorder_.get(), "kube-system", "rsc", "replica-a", false);

  auto events = sent();
  ASSERT_EQ(events.size(), 6U);
  const client::Event& reverted = events["ForeignChangeReverted"];
  EXPECT_EQ(reverted.regarding, slice_);
  EXPECT_EQ(reverted.type, "Normal");
  EXPECT_THAT(reverted.note,
              HasSubstr("by kubectl-edit to slice s-1 of pool gpu.example.com/node-a"));
  const client::Event& failed = events["PublishFailed"];
  EXPECT_EQ(failed.type, "Warning");
  EXPECT_THAT(failed.note, HasSubstr("spec.devices: Invalid value"));
  EXPECT_THAT(events["PoolLeaseExpired"].note, HasSubstr("gpu.example.com/node-a"));
  EXPECT_THAT(events["SlicesAdopted"].note, HasSubstr("2 live slice(s)"));
  EXPECT_THAT(events["SlicesAdopted"].note, HasSubstr("generation 4"));
  const client::Event& elected = events["LeaderElected"];
  EXPECT_EQ(elected.regarding.kind, "Lease");
  EXPECT_EQ(elected.metadata.namespace_, "kube-system");
  EXPECT_THAT(elected.note, HasSubstr("replica-a"));
  EXPECT_EQ(events["LeaderLost"].type, "Warning");
}

TEST_F(ReconcileEventObserverTest, NothingToPointAtOrNoRecorderMeansNoEvent) {
  ReconcileEventObserver observer(metrics_observer_, recorder_.get());
  observer.publishFailed(key_, {}, Status(StatusCode::kUnavailable, "down"));
  observer.slicesAdopted(key_, {}, 1, 1);
  ReconcileEventObserver off(metrics_observer_, nullptr);
  off.foreignChangeReverted(key_, slice_, "kubectl-edit");
  off.publishFailed(key_, slice_, Status(StatusCode::kUnavailable, "down"));
  recordLeadership(nullptr, "kube-system", "rsc", "replica-a", true);
  EXPECT_TRUE(sent().empty());
}

// Each reconcile verb and outcome is counted under the label of its own name.
TEST_F(ReconcileEventObserverTest, ReconcileWordsAreTheMetricLabelsOfTheSameName) {
  using reconcile::WriteOutcome;
  using reconcile::WriteVerb;
  for (WriteVerb verb : {WriteVerb::kCreate, WriteVerb::kUpdate, WriteVerb::kDelete}) {
    for (WriteOutcome outcome :
         {WriteOutcome::kSuccess, WriteOutcome::kConflict, WriteOutcome::kError}) {
      metrics_observer_.sliceWrite("gpu.example.com", verb, outcome);
      EXPECT_EQ(metrics::Snapshot(*registry_)
                    .value("resourceslice_controller_slice_writes_total",
                           {{"driver", "gpu.example.com"},
                            {"verb", std::string(reconcile::writeVerbName(verb))},
                            {"result", std::string(reconcile::writeOutcomeName(outcome))}}),
                1.0);
    }
  }
  using reconcile::ReconcileOutcome;
  for (ReconcileOutcome outcome :
       {ReconcileOutcome::kSuccess, ReconcileOutcome::kError, ReconcileOutcome::kRequeueAfter}) {
    metrics_observer_.reconciled(outcome, std::chrono::milliseconds(5));
    EXPECT_EQ(metrics::Snapshot(*registry_)
                  .value("controller_runtime_reconcile_total",
                         {{"controller", "resourceslice"},
                          {"result", std::string(reconcile::reconcileOutcomeName(outcome))}}),
              1.0);
  }
}

// Every reason a source is not pulled is a label of the ignored-sources
// counter, under its own name, and every label is one of the reasons.
TEST(PullObserver, IgnoredReasonsAreTheMetricLabelsOfTheSameName) {
  using pull::IgnoredReason;
  auto registry = metrics::newRegistry();
  metrics::PullMetrics pull_metrics(*registry);
  pull::PollerObserver observer = pullObserver(pull_metrics);
  std::set<std::string_view> names;
  for (IgnoredReason reason : {IgnoredReason::kOverLimit, IgnoredReason::kInvalid,
                               IgnoredReason::kUnbound, IgnoredReason::kUnverified}) {
    observer.on_ignored(reason);
    const std::string_view name = pull::ignoredReasonName(reason);
    names.insert(name);
    EXPECT_EQ(
        metrics::Snapshot(*registry).value("resourceslice_controller_pull_sources_ignored_total",
                                           {{"reason", std::string(name)}}),
        1.0)
        << name;
  }
  EXPECT_EQ(names, std::set<std::string_view>(metrics::PullMetrics::kIgnoredReasons.begin(),
                                              metrics::PullMetrics::kIgnoredReasons.end()));
}

}  // namespace
}  // namespace rsc::controller
