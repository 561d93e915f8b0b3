#include "controller/reconcile/controller.h"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "test/controller/reconcile/counter_pools.h"
#include "test/controller/reconcile/manual_controller.h"
#include "test/fakes/fake_clock.h"
#include "test/fakes/fake_kube_api.h"

namespace rsc::controller::reconcile {
namespace {

const PoolKey kNodeA{"gpu.example.com", "node-a"};
const PoolKey kCluster{"gpu.example.com", "cluster"};

class RecordingObserver : public ControllerObserver, public ReconcilerObserver {
 public:
  void sliceWrite(const std::string& /*driver*/, WriteVerb /*verb*/,
                  WriteOutcome /*outcome*/) override {}
  void published(const std::string& /*driver*/, Clock::Duration /*latency*/) override {}
  void foreignChangeReverted(const PoolKey& key, const client::ObjectReference& slice,
                             const std::string& changed_by) override {
    std::lock_guard lock(mu);
    events.push_back("reverted " + key.pool + " " + slice.name + " by " + changed_by);
  }
  void poolLeaseExpired(const PoolKey& key, const client::ObjectReference& regarding) override {
    std::lock_guard lock(mu);
    events.push_back("expired " + key.pool + " " + regarding.kind + " " + regarding.name);
  }
  void slicesAdopted(const PoolKey& key, const client::ObjectReference& regarding, size_t slices,
                     int64_t generation) override {
    std::lock_guard lock(mu);
    events.push_back("adopted " + key.pool + " " + regarding.name + " " + std::to_string(slices) +
                     " at " + std::to_string(generation));
  }
  void poolHeld(const PoolKey& key, const client::ObjectReference& regarding,
                const std::string& node) override {
    std::lock_guard lock(mu);
    events.push_back("held " + key.pool + " " + regarding.kind + " " + regarding.name + " " +
                     regarding.uid + (node == regarding.name ? "" : " (node " + node + ")"));
  }
  std::vector<std::string> events;
  void reconciled(ReconcileOutcome outcome, Clock::Duration /*took*/) override {
    std::lock_guard lock(mu);
    results[std::string(reconcileOutcomeName(outcome))]++;
  }
  void activeWorkers(int /*n*/) override {}
  void reconcileStarts(const PoolKey& key) override {
    if (on_start) on_start(key);
  }
  void reconcileEnds(const PoolKey& key) override {
    if (on_end) on_end(key);
  }
  std::function<void(const PoolKey&)> on_start;
  std::function<void(const PoolKey&)> on_end;
  void counts(const std::map<std::string, DriverCounts>& by_driver) override {
    std::lock_guard lock(mu);
    last_counts = by_driver;
  }
  void leaseExpired(const std::string& driver) override {
    std::lock_guard lock(mu);
    expired[driver]++;
  }
  std::mutex mu;
  std::map<std::string, int> results;
  std::map<std::string, DriverCounts> last_counts;
  std::map<std::string, int> expired;
};

Pool nodePool(int devices) {
  Pool p;
  p.selection.node_name = "node-a";
  for (int i = 0; i < devices; ++i) {
    client::Device d;
    d.name = "gpu-" + std::to_string(i);
    p.devices.push_back(d);
  }
  return p;
}

Pool clusterPool(int devices) {
  Pool p = nodePool(devices);
  p.selection.node_name.reset();
  p.selection.all_nodes = true;
  return p;
}

class ControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    node_a_ = api_.addNode("node-a");
    ControllerOptions o = manualOptions(api_, clock_, store_);
    o.observer = &observer_;
    o.reconciler_observer = &observer_;
    controller_ = startManualController(o);
    ASSERT_NE(controller_, nullptr);
    // Both watches are open, so what the fake writes from now on reaches
    // the informers' handlers by waitForWatchesDelivered().
    ASSERT_TRUE(api_.waitForActiveWatches(1, "resourceslices"));
    ASSERT_TRUE(api_.waitForActiveWatches(1, "nodes"));
  }
  void TearDown() override {
    if (controller_ != nullptr) controller_->stop();
  }

  // Releases batched pushes and runs the queue dry.
  int drain() { return reconcile::drain(*controller_, clock_); }

  size_t poolSlices(const PoolKey& key = kNodeA) {
    size_t n = 0;
    for (const auto& s : api_.resourceSlices()) n += s.spec.pool.name == key.pool;
    return n;
  }

  // The owner UIDs of the pool's slices.
  std::set<std::string> ownerUids(const PoolKey& key = kNodeA) {
    std::set<std::string> uids;
    for (const auto& s : api_.resourceSlices()) {
      if (s.spec.pool.name != key.pool) continue;
      for (const auto& ref : s.metadata.owner_references) uids.insert(ref.uid);
    }
    return uids;
  }

  testing::FakeClock clock_;
  testing::FakeKubeApi api_{clock_};
  DesiredStore store_{clock_};
  RecordingObserver observer_;
  client::Node node_a_;
  std::unique_ptr<Controller> controller_;
};

TEST_F(ControllerTest, PushesInOneWindowCostOneReconcile) {
  controller_->startLeading();
  for (int i = 1; i <= 5; ++i) store_.put(kNodeA, nodePool(i));
  EXPECT_EQ(drain(), 1);
  EXPECT_EQ(api_.countWrites(), 1U);
  EXPECT_EQ(api_.resourceSlices()[0].spec.devices.size(), 5U);
}

// The watch event of our own write may arrive before the worker has recorded
// the write's answer; either way it must not cost another reconcile. The race
// is real (the informer's thread against the worker), so the test runs it
// many times: before echo events were held back, about half the rounds
// reconciled twice.
TEST_F(ControllerTest, TheWatchEventOfOurOwnWriteNeverCostsAReconcile) {
  controller_->startLeading();
  for (int round = 1; round <= 40; ++round) {
    store_.put(kNodeA, nodePool(1 + round % 7));
    ASSERT_EQ(drain(), 1) << "round " << round;
    ASSERT_TRUE(api_.waitForWatchesDelivered());
    ASSERT_EQ(controller_->queueForTest().len(), 0U) << "round " << round;
  }
}

TEST_F(ControllerTest, OwnWritesDoNotRequeueButForeignDeletesAreUndone) {
  controller_->startLeading();
  store_.put(kCluster, clusterPool(3));
  drain();
  ASSERT_TRUE(api_.waitForWatchesDelivered());
  EXPECT_EQ(controller_->queueForTest().len(), 0U) << "our own create came back as work";

  const std::string name = api_.resourceSlices()[0].metadata.name;
  ASSERT_TRUE(api_.removeResourceSlice(name).ok());
  ASSERT_TRUE(api_.waitForWatchesDelivered());
  ASSERT_EQ(controller_->queueForTest().len(), 1U);
  drain();
  EXPECT_EQ(poolSlices(kCluster), 1U);
  EXPECT_NE(api_.resourceSlices()[0].metadata.name, name);
}

// The kubelet deletes its node's slices when it starts (and 30 s after a
// driver's plugin went) and expects the driver to publish them again once its
// plugin registers: a node-local pool is held, what is left of it withdrawn,
// nothing recreated, until the driver renews it; then it is republished at
// the next generation.
TEST_F(ControllerTest, ForeignDeleteOfANodeLocalSliceHoldsThePoolUntilItsDriverRenews) {
  controller_->startLeading();
  store_.put(kNodeA, nodePool(200));  // two slices
  store_.put(kCluster, clusterPool(3));
  drain();
  ASSERT_EQ(poolSlices(), 2U);
  const int64_t generation = api_.resourceSlices()[0].spec.pool.generation;
  ASSERT_TRUE(api_.waitForWatchesDelivered());

  size_t writes = api_.countWrites();
  std::string deleted;
  for (const auto& s : api_.resourceSlices()) {
    if (s.spec.pool.name == kNodeA.pool) deleted = s.metadata.name;
  }
  ASSERT_TRUE(api_.removeResourceSlice(deleted).ok());
  ASSERT_TRUE(api_.waitForWatchesDelivered());
  drain();
  EXPECT_EQ(poolSlices(), 0U) << "the rest of a held pool is withdrawn";
  EXPECT_EQ(api_.countWrites() - writes, 1U) << "one delete: the slice the deleter left";
  std::optional<PoolStatus> status = store_.status(kNodeA);
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->phase, PoolPhase::kHeld);
  ASSERT_TRUE(status->hold.has_value());
  EXPECT_EQ(status->hold->node, "node-a");
  EXPECT_EQ(status->hold->reason, "NodeSlicesDeleted");
  EXPECT_TRUE(status->slice_names.empty());
  EXPECT_EQ(poolSlices(kCluster), 1U) << "another pool is untouched";
  {
    std::lock_guard lock(observer_.mu);
    EXPECT_EQ(observer_.events,
              std::vector<std::string>{"held node-a Node node-a " + node_a_.metadata.uid});
  }

  // Nothing comes back by itself: not with time, not for a Node event.
  writes = api_.countWrites();
  ASSERT_TRUE(api_.waitForWatchesDelivered());
  clock_.advance(std::chrono::minutes(5));
  controller_->queueForTest().add(kNodeA);
  drain();
  EXPECT_EQ(poolSlices(), 0U);
  EXPECT_EQ(api_.countWrites(), writes);

  ASSERT_TRUE(store_.renew(kNodeA));
  EXPECT_EQ(drain(), 1);
  EXPECT_EQ(poolSlices(), 2U);
  for (const auto& s : api_.resourceSlices()) {
    if (s.spec.pool.name == kNodeA.pool) {
      EXPECT_EQ(s.spec.pool.generation, generation + 1);
    }
  }
  status = store_.status(kNodeA);
  EXPECT_EQ(status->phase, PoolPhase::kPublished);
  EXPECT_FALSE(status->hold.has_value());
  EXPECT_FALSE(status->released);
  std::lock_guard lock(observer_.mu);
  EXPECT_EQ(observer_.events.size(), 1U) << "republishing reverts nothing";
}

// A node-local slice that loses the managed-by label leaves the label-selected
// watch as if deleted: read back, it is an edit, taken back, not a hold.
TEST_F(ControllerTest, ANodeLocalSliceThatLostItsLabelIsTakenBackNotHeld) {
  controller_->startLeading();
  store_.put(kNodeA, nodePool(3));
  drain();
  ASSERT_EQ(poolSlices(), 1U);
  const std::string name = api_.resourceSlices()[0].metadata.name;
  ASSERT_TRUE(api_.waitForWatchesDelivered());
  ASSERT_TRUE(
      api_.editResourceSlice(
              name, [](client::ResourceSlice& s) { s.metadata.labels.erase(kManagedByLabel); })
          .ok());
  ASSERT_TRUE(api_.waitForWatchesDelivered());
  drain();
  EXPECT_EQ(store_.status(kNodeA)->phase, PoolPhase::kPublished);
  const auto slice = api_.resourceSlice(name);
  ASSERT_TRUE(slice.has_value()) << "taken back, not replaced";
  EXPECT_EQ(slice->metadata.labels.at(kManagedByLabel), kManagedByValue);
}

TEST_F(ControllerTest, ExpiredLeaseWithdrawsThePool) {
  controller_->startLeading();
  Pool pool = nodePool(2);
  pool.lease = std::chrono::seconds(30);
  store_.put(kNodeA, pool);
  drain();
  ASSERT_EQ(poolSlices(), 1U);

  clock_.advance(std::chrono::seconds(20));
  ASSERT_TRUE(store_.renew(kNodeA));
  clock_.advance(std::chrono::seconds(20));
  controller_->housekeepingForTest();
  EXPECT_EQ(poolSlices(), 1U) << "a renewed lease must not expire";

  const std::string name = api_.resourceSlices()[0].metadata.name;
  clock_.advance(std::chrono::seconds(11));
  controller_->housekeepingForTest();
  drain();
  EXPECT_EQ(poolSlices(), 0U);
  std::lock_guard lock(observer_.mu);
  EXPECT_EQ(observer_.expired["gpu.example.com"], 1);
  EXPECT_EQ(observer_.events, std::vector<std::string>{"expired node-a ResourceSlice " + name});
}

// The cache drops managedFields but keeps who else last changed each slice:
// the newest entry that is not the controller's.
TEST_F(ControllerTest, AManualEditIsRevertedAndReportedWithItsEditorFromManagedFields) {
  controller_->startLeading();
  store_.put(kNodeA, nodePool(3));
  drain();
  ASSERT_TRUE(api_.waitForWatchesDelivered());
  const std::string name = api_.resourceSlices()[0].metadata.name;
  ASSERT_TRUE(api_.editResourceSlice(name,
                                     [](client::ResourceSlice& s) {
                                       s.spec.devices.pop_back();
                                       s.metadata.unknown["managedFields"] =
                                           client::Json::parse(R"([
        {"manager": "kubectl-label", "operation": "Update", "time": "2026-12-02T10:00:00Z"},
        {"manager": "kubectl-edit", "operation": "Update", "time": "2026-12-02T10:05:00Z"},
        {"manager": "resourceslice-controller", "operation": "Update",
         "time": "2026-12-02T10:06:00Z"}])");
                                     })
                  .ok());
  ASSERT_TRUE(api_.waitForWatchesDelivered());
  drain();
  EXPECT_EQ(api_.resourceSlices()[0].spec.devices.size(), 3U);
  std::lock_guard lock(observer_.mu);
  EXPECT_EQ(observer_.events,
            std::vector<std::string>{"reverted node-a " + name + " by kubectl-edit"});
}

TEST_F(ControllerTest, LeadingStartsByReportingTheLiveSlicesAsAdopted) {
  for (const char* name : {"b-slice", "a-slice"}) {
    client::ResourceSlice s;
    s.metadata.name = name;
    s.metadata.labels[kManagedByLabel] = kManagedByValue;
    s.spec.driver = kNodeA.driver;
    s.spec.pool = {kNodeA.pool, 4, 2};
    s.spec.node_name = "node-a";
    ASSERT_TRUE(api_.createResourceSlice(s).ok());
  }
  ASSERT_TRUE(api_.waitForWatchesDelivered());
  controller_->startLeading();
  std::lock_guard lock(observer_.mu);
  EXPECT_EQ(observer_.events, std::vector<std::string>{"adopted node-a a-slice 2 at 4"});
}

TEST_F(ControllerTest, FailingPoolIsRetriedWithBackoffWhileOthersPublish) {
  api_.addNode("node-b");
  controller_->startLeading();
  int failures = 3;
  api_.prependReactor("create", "resourceslices", [&](testing::FakeKubeApi::Request& req) {
    if (req.slice && req.slice->spec.pool.name == "node-a" && failures-- > 0) {
      return unavailable("injected");
    }
    return okStatus();
  });
  store_.put(kNodeA, nodePool(1));
  Pool b = nodePool(1);
  b.selection.node_name = "node-b";
  store_.put({"gpu.example.com", "node-b"}, b);
  drain();
  EXPECT_EQ(store_.status({"gpu.example.com", "node-b"})->phase, PoolPhase::kPublished);
  EXPECT_EQ(store_.status(kNodeA)->phase, PoolPhase::kFailed);
  for (int i = 0; i < 4; ++i) drain();  // each drain advances past the backoff
  EXPECT_EQ(store_.status(kNodeA)->phase, PoolPhase::kPublished);
  std::lock_guard lock(observer_.mu);
  EXPECT_EQ(observer_.results["error"], 3);
}

// The Node cache: owner references come from it, not from a GET per pool.
TEST_F(ControllerTest, NodeLocalPoolsArePublishedWithoutReadingTheirNodes) {
  controller_->startLeading();
  std::map<std::string, std::string> uids;
  for (int i = 0; i < 20; ++i) {
    const std::string node = "node-" + std::to_string(i);
    uids[node] = api_.addNode(node).metadata.uid;
    Pool p = nodePool(2);
    p.selection.node_name = node;
    store_.put({"gpu.example.com", node}, p);
  }
  ASSERT_TRUE(api_.waitForWatchesDelivered());
  drain();
  for (const auto& [node, uid] : uids) {
    const PoolKey key{"gpu.example.com", node};
    EXPECT_EQ(store_.status(key)->phase, PoolPhase::kPublished) << node;
    EXPECT_EQ(ownerUids(key), std::set<std::string>{uid}) << node;
  }
  EXPECT_EQ(api_.countActions("get", "nodes"), 0U);
}

// The counter placement is asked for when leading starts, not when the
// controller is made (the API server may not answer then), and used from
// the first reconcile on.
TEST(ControllerPlacement, IsAskedForWhenLeadingStarts) {
  testing::FakeClock clock;
  testing::FakeKubeApi api{clock};
  DesiredStore store{clock};
  api.addNode("node-a");
  ControllerOptions o = manualOptions(api, clock, store);
  int asked = 0;
  o.server_release_probe = [&] {
    ++asked;
    return ServerRelease{CounterPlacement::kWithConsumers, "v1.34.0"};
  };
  std::unique_ptr<Controller> made = startManualController(o);
  ASSERT_NE(made, nullptr);
  Controller& controller = *made;
  EXPECT_EQ(asked, 0);
  controller.startLeading();
  EXPECT_EQ(asked, 1);

  Pool pool = nodePool(2);
  addCounterSetConsumedByAll(pool, "gpu-0");
  store.put(kNodeA, pool);
  drain(controller, clock);
  // One slice with the counter set and both consumers, not a counter slice
  // of its own.
  const std::vector<client::ResourceSlice> slices = api.resourceSlices();
  ASSERT_EQ(slices.size(), 1U);
  EXPECT_EQ(slices[0].spec.shared_counters.size(), 1U);
  EXPECT_EQ(slices[0].spec.devices.size(), 2U);
  controller.stop();
}

// A pool pushed before its Node exists fails and waits for its backoff; the
// Node's arrival queues it at once, so no time has to pass.
TEST_F(ControllerTest, APoolWaitingForItsNodeIsPublishedAsSoonAsTheNodeAppears) {
  controller_->startLeading();
  const PoolKey key{"gpu.example.com", "node-late"};
  Pool p = nodePool(1);
  p.selection.node_name = "node-late";
  store_.put(key, p);
  drain();
  ASSERT_EQ(store_.status(key)->phase, PoolPhase::kFailed);
  EXPECT_EQ(store_.status(key)->last_error.code(), StatusCode::kNotFound);
  EXPECT_EQ(api_.countActions("get", "nodes"), 1U) << "a cache miss reads the Node once";
  EXPECT_EQ(controller_->queueForTest().len(), 0U) << "the retry waits for its backoff";

  const Clock::TimePoint failed_at = clock_.now();
  const client::Node node = api_.addNode("node-late");
  ASSERT_TRUE(api_.waitForWatchesDelivered());
  EXPECT_EQ(controller_->queueForTest().len(), 1U);
  EXPECT_TRUE(controller_->processNextItemForTest());
  EXPECT_EQ(clock_.now(), failed_at);
  EXPECT_EQ(store_.status(key)->phase, PoolPhase::kPublished);
  EXPECT_EQ(ownerUids(key), std::set<std::string>{node.metadata.uid});
  EXPECT_EQ(api_.countActions("get", "nodes"), 1U) << "the Node came from the cache";
}

// A Node deleted and created again (a new UID) has its pools reconciled at
// once, and their slices follow the new UID.
TEST_F(ControllerTest, ARecreatedNodeMovesTheOwnerReferencesToItsNewUid) {
  controller_->startLeading();
  store_.put(kNodeA, nodePool(3));
  drain();
  ASSERT_TRUE(api_.waitForWatchesDelivered());
  ASSERT_EQ(ownerUids(), std::set<std::string>{node_a_.metadata.uid});
  ASSERT_EQ(controller_->queueForTest().len(), 0U);

  api_.clearActions();
  api_.removeNode("node-a");
  const client::Node again = api_.addNode("node-a");
  ASSERT_TRUE(api_.waitForWatchesDelivered());
  const Clock::TimePoint before = clock_.now();
  EXPECT_EQ(controller_->queueForTest().len(), 1U);
  while (controller_->processNextItemForTest()) {
  }
  EXPECT_EQ(clock_.now(), before);
  EXPECT_EQ(poolSlices(), 1U);
  EXPECT_EQ(ownerUids(), std::set<std::string>{again.metadata.uid});
  EXPECT_EQ(api_.countActions("update", "resourceslices"), 1U);
  EXPECT_EQ(api_.countActions("get", "nodes"), 0U);
  // The update's own echo costs nothing more.
  ASSERT_TRUE(api_.waitForWatchesDelivered());
  EXPECT_EQ(controller_->queueForTest().len(), 0U);
}

// Nodes change often (status, labels); a change that keeps the UID is not
// the controller's business.
TEST_F(ControllerTest, ANodeChangeThatKeepsItsUidQueuesNothing) {
  controller_->startLeading();
  store_.put(kNodeA, nodePool(1));
  drain();
  ASSERT_TRUE(api_.waitForWatchesDelivered());
  ASSERT_EQ(controller_->queueForTest().len(), 0U);
  ASSERT_TRUE(
      api_.editNode("node-a", [](client::Node& n) { n.metadata.labels["zone"] = "b"; }).ok());
  ASSERT_TRUE(api_.waitForWatchesDelivered());
  EXPECT_EQ(controller_->queueForTest().len(), 0U);
}

// Leadership waits for both caches: a replica that led before its Node cache
// was filled would read every Node once.
TEST(ControllerCacheSync, WaitsForTheNodeCacheToo) {
  testing::FakeClock clock;
  testing::FakeKubeApi api{clock};
  DesiredStore store{clock};
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  api.prependReactor("list", "nodes", [&](testing::FakeKubeApi::Request&) {
    std::unique_lock lock(mu);
    cv.wait_for(lock, std::chrono::seconds(10), [&] { return release; });  // a safety net
    return okStatus();
  });
  auto made = Controller::create(manualOptions(api, clock, store));
  ASSERT_TRUE(made.ok()) << made.status().toString();
  Controller& controller = **made;
  controller.informerForTest().start();
  controller.nodeInformerForTest().start();
  ASSERT_TRUE(controller.informerForTest().waitForSync(std::stop_token()));
  EXPECT_FALSE(controller.hasSynced());
  std::stop_source stopped;
  stopped.request_stop();
  EXPECT_FALSE(controller.waitForCacheSync(stopped.get_token()));
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  EXPECT_TRUE(controller.waitForCacheSync(std::stop_token()));
  EXPECT_TRUE(controller.hasSynced());
  controller.stop();
}

TEST_F(ControllerTest, HousekeepingCountsPoolsSlicesAndDevices) {
  controller_->startLeading();
  store_.put(kNodeA, nodePool(130));
  drain();
  ASSERT_TRUE(api_.waitForWatchesDelivered());
  controller_->housekeepingForTest();
  std::lock_guard lock(observer_.mu);
  const DriverCounts c = observer_.last_counts["gpu.example.com"];
  EXPECT_EQ(c.pools, 1);
  EXPECT_EQ(c.slices, 2);
  EXPECT_EQ(c.devices, 130);
}

TEST_F(ControllerTest, AfterStopLeadingNoKeyIsReconciledAndLeadingNeverRestarts) {
  controller_->startLeading();
  store_.put(kNodeA, nodePool(3));
  clock_.advance(std::chrono::seconds(1));
  controller_->queueForTest().releaseDueForTest();
  ASSERT_EQ(controller_->queueForTest().len(), 1U);
  // The lease is lost with the key queued: it is left alone.
  controller_->stopLeading();
  EXPECT_FALSE(controller_->leading());
  EXPECT_FALSE(controller_->processNextItemForTest());
  controller_->startLeading();
  EXPECT_FALSE(controller_->leading()) << "a replica that lost its lease leads again only anew";
  EXPECT_EQ(drain(), 0);
  EXPECT_EQ(api_.countWrites(), 0U);
}

TEST_F(ControllerTest, LeadershipThatEndedDuringTheCacheWaitNeverStartsWorkers) {
  std::stop_source leading;
  leading.request_stop();
  controller_->startLeading(leading.get_token());
  EXPECT_FALSE(controller_->leading());
  store_.put(kNodeA, nodePool(3));
  EXPECT_EQ(drain(), 0);
  EXPECT_EQ(api_.countWrites(), 0U);
}

// A controller with its own threads, as in production: informers,
// housekeeping and, once leading, four workers. The clock moves only when the
// test says, so the housekeeping thread sleeps instead of racing time forward.
class ControllerThreadsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    api_.addNode("node-a");
    ControllerOptions o;
    o.api = &api_;
    o.clock = &clock_;
    o.store = &store_;
    o.workers = 4;
    o.batch_window = Clock::Duration::zero();  // a push is queued at once
    auto made = Controller::create(o);
    ASSERT_TRUE(made.ok()) << made.status().toString();
    controller_ = std::move(*made);
    controller_->start();
    ASSERT_TRUE(controller_->waitForCacheSync(std::stop_token()));
  }
  void TearDown() override {
    clock_.stopBlocking();  // the housekeeping thread may be asleep
    controller_->stop();
  }

  testing::FakeClock clock_{testing::FakeClock::Sleeps::kBlock};
  testing::FakeKubeApi api_{clock_};
  DesiredStore store_{clock_};
  std::unique_ptr<Controller> controller_;
};

// preview() runs on the inventory's handler threads while leading starts: it
// sees no term yet (unavailable) or the whole term of the new leadership
// (counter placement, dropped fields, adoption grace), never a half-set one.
// ThreadSanitizer checks the reads against startLeading's writes; before the
// term was published as one value, it reported a race in about one round of
// six, so the test runs several.
TEST(ControllerTerm, PreviewDuringStartLeadingReadsAWholeTerm) {
  for (int round = 0; round < 8; ++round) {
    testing::FakeClock clock(testing::FakeClock::Sleeps::kBlock);
    testing::FakeKubeApi api(clock);
    DesiredStore store(clock);
    api.addNode("node-a");
    ControllerOptions o;
    o.api = &api;
    o.clock = &clock;
    o.store = &store;
    auto made = Controller::create(o);
    ASSERT_TRUE(made.ok()) << made.status().toString();
    std::unique_ptr<Controller> controller = std::move(*made);
    controller->start();
    ASSERT_TRUE(controller->waitForCacheSync(std::stop_token()));
    const Pool pool = nodePool(3);
    std::atomic<bool> done{false};
    std::atomic<int> previews{0};
    std::thread previewer([&] {
      while (!done.load()) {
        if (controller->preview(kNodeA, &pool).ok()) ++previews;
      }
    });
    controller->startLeading();
    while (previews.load() < 20) std::this_thread::yield();
    done = true;
    previewer.join();
    StatusOr<PoolPreview> preview = controller->preview(kNodeA, &pool);
    ASSERT_TRUE(preview.ok()) << preview.status().toString();
    EXPECT_EQ(preview->writes.size(), 1U);
    clock.stopBlocking();
    controller->stop();
  }
}

// A follower's workers, if it had any, have done all they can with a queued
// key before the test looks, so a follower that wrote would fail here.
TEST_F(ControllerThreadsTest, FollowersDoNotWrite) {
  store_.put(kNodeA, nodePool(3));
  ASSERT_TRUE(controller_->waitIdleForTest());
  EXPECT_EQ(api_.countWrites(), 0U);
  EXPECT_EQ(controller_->queueForTest().len(), 1U) << "the key waits for a leader";

  controller_->startLeading();
  ASSERT_TRUE(controller_->waitIdleForTest());
  EXPECT_EQ(api_.countWrites(), 1U);
  EXPECT_EQ(store_.status(kNodeA)->phase, PoolPhase::kPublished);
}

// Once stopLeading() returns, no worker is left to write, however busy they
// were.
TEST_F(ControllerThreadsTest, StopLeadingReturnsOnlyWhenNoWorkerCanWrite) {
  controller_->startLeading();

  std::atomic<bool> stopped{false};
  std::atomic<int> writes_after_stop{0};
  std::atomic<int> writes{0};
  api_.prependReactor("create", "resourceslices", [&](testing::FakeKubeApi::Request&) {
    ++writes;
    if (stopped) ++writes_after_stop;
    return okStatus();
  });
  for (int i = 0; i < 40; ++i) {
    const std::string node = "node-" + std::to_string(i);
    api_.addNode(node);
    Pool p = nodePool(2);
    p.selection.node_name = node;
    store_.put({"gpu.example.com", node}, p);
  }
  controller_->stopLeading();
  stopped = true;
  // More work arrives; nobody takes it.
  store_.put(kNodeA, nodePool(1));
  clock_.stopBlocking();
  controller_->stop();
  EXPECT_EQ(writes_after_stop, 0);
  EXPECT_FALSE(controller_->leading());
  RecordProperty("writes_before_stop", writes.load());
}

// Threads named `name` in this process, read from /proc: the threads that
// really run, not the controller's own count.
int threadsNamed(const std::string& name) {
  int n = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string line;
    if (std::getline(comm, line) && line == name) ++n;
  }
  return n;
}

// Elastic workers: a few wait for work, more start while pools wait.
class ControllerWorkersTest : public ::testing::Test {
 protected:
  void start(int workers) {
    ControllerOptions o;
    o.api = &api_;
    o.clock = &clock_;
    o.store = &store_;
    o.workers = workers;
    o.idle_workers = 4;
    o.worker_idle_timeout = std::chrono::milliseconds(100);
    o.batch_window = Clock::Duration::zero();  // a push is queued at once
    o.observer = &observer_;
    auto made = Controller::create(o);
    ASSERT_TRUE(made.ok()) << made.status().toString();
    controller_ = std::move(*made);
    controller_->start();
    ASSERT_TRUE(controller_->waitForCacheSync(std::stop_token()));
    controller_->startLeading();
  }
  void TearDown() override {
    clock_.stopBlocking();  // the housekeeping thread may be asleep
    if (controller_ != nullptr) controller_->stop();
  }
  // A pool of `devices` on its own Node `node`.
  PoolKey putPool(const std::string& node, int devices) {
    Pool p = nodePool(devices);
    p.selection.node_name = node;
    const PoolKey key{"gpu.example.com", node};
    store_.put(key, p);
    return key;
  }
  // Polls `done` for up to 10 s of real time.
  static bool eventually(const std::function<bool()>& done) {
    for (int i = 0; i < 1000; ++i) {
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return done();
  }

  testing::FakeClock clock_{testing::FakeClock::Sleeps::kBlock};
  testing::FakeKubeApi api_{clock_};
  DesiredStore store_{clock_};
  RecordingObserver observer_;
  std::unique_ptr<Controller> controller_;
};

// A burst of pushes gets a write in flight per pool, up to --workers, where
// four fixed workers kept four; the extra threads end once idle, so a quiet
// controller keeps its four. The fake holds every write until 16 are under
// way at once: with fewer workers it gives up after 10 s and the peak says so.
TEST_F(ControllerWorkersTest, ABurstGetsAWriteInFlightPerPoolUpToTheWorkersAndExtrasEnd) {
  for (int i = 0; i < 40; ++i) api_.addNode("node-" + std::to_string(i));
  start(16);
  ASSERT_TRUE(eventually([&] { return threadsNamed("reconcile") == 4; }))
      << threadsNamed("reconcile") << " reconcile threads at rest";

  api_.holdWritesUntilConcurrent(16);
  for (int i = 0; i < 40; ++i) putPool("node-" + std::to_string(i), 1);
  ASSERT_TRUE(eventually([&] { return api_.countWrites() == 40; })) << api_.countWrites();
  EXPECT_EQ(api_.maxConcurrentWrites(), 16U);
  EXPECT_EQ(controller_->peakWorkersForTest(), 16U) << "never more than --workers";

  // Idle for longer than the idle limit: the extra workers end, the four stay.
  // Time goes on while the test looks: a worker that finished its last key
  // after an advance waits from then.
  ASSERT_TRUE(eventually([&] {
    clock_.advance(std::chrono::seconds(1));
    return threadsNamed("reconcile") == 4;
  })) << threadsNamed("reconcile")
      << " reconcile threads after the burst";
  EXPECT_EQ(controller_->workerCountForTest(), 4U);

  // The next burst starts them again.
  api_.holdWritesUntilConcurrent(8);
  for (int i = 0; i < 8; ++i) putPool("node-" + std::to_string(i), 2);
  ASSERT_TRUE(eventually([&] { return api_.countWrites() == 48; })) << api_.countWrites();
  // The fake counts a write when it starts and in flight a moment later: the
  // last of the eight may be counted before it is in flight (with fewer
  // workers the peak stays at 7 until the fake's 10 s safety net).
  eventually([&] { return api_.maxConcurrentWrites() == 8U; });
  EXPECT_EQ(api_.maxConcurrentWrites(), 8U);
}

// Leading starts with slices already live (a restart, a failover): their
// pools are queued as the workers start, and nothing waits on itself.
TEST_F(ControllerWorkersTest, LeadingStartsWithLiveSlicesOfManyPools) {
  for (int i = 0; i < 12; ++i) api_.addNode("node-" + std::to_string(i));
  for (int i = 0; i < 12; ++i) putPool("node-" + std::to_string(i), 1);
  {
    // The slices of another controller term, written before this one starts.
    ControllerOptions o = manualOptions(api_, clock_, store_);
    std::unique_ptr<Controller> earlier = startManualController(o);
    ASSERT_NE(earlier, nullptr);
    earlier->startLeading();
    EXPECT_EQ(reconcile::drain(*earlier, clock_), 12);
    earlier->stop();
  }
  ASSERT_EQ(api_.resourceSlices().size(), 12U);
  start(16);
  EXPECT_TRUE(controller_->leading());
  ASSERT_TRUE(controller_->waitIdleForTest());
  EXPECT_EQ(api_.countWrites(), 12U) << "the earlier term's creates, and nothing since";
}

// However many workers run, a pool has one reconcile at a time, and its writes
// keep their order: the creates and changes of one generation before its
// deletes, generations never going back. Eight pools are pushed over and over
// with sizes that add and remove slices, against 64 workers; every write is
// checked as it starts.
TEST_F(ControllerWorkersTest, ManyWorkersNeverOverlapAPoolsReconcilesNorReorderItsWrites) {
  struct PoolTrace {
    bool reconciling = false;
    bool deleting = false;    // a delete started in the current reconcile
    int64_t generation = -1;  // of the current reconcile's writes
    int64_t highest = 0;      // generation ever written
  };
  std::mutex mu;
  std::map<std::string, PoolTrace> traces;
  std::vector<std::string> violations;
  const auto violation = [&](std::string what) {
    if (violations.size() < 20) violations.push_back(std::move(what));
  };
  observer_.on_start = [&](const PoolKey& key) {
    std::lock_guard lock(mu);
    PoolTrace& t = traces[key.pool];
    if (t.reconciling) violation("two reconciles of " + key.pool + " at once");
    t = PoolTrace{true, false, -1, t.highest};
  };
  observer_.on_end = [&](const PoolKey& key) {
    std::lock_guard lock(mu);
    traces[key.pool].reconciling = false;
  };
  const auto write = [&](testing::FakeKubeApi::Request& r) {
    std::string pool;
    int64_t generation = 0;
    if (r.verb == "delete") {
      StatusOr<client::ResourceSlice> old = api_.getResourceSlice(r.name);
      if (!old.ok()) return okStatus();
      pool = old->spec.pool.name;
    } else {
      pool = r.slice->spec.pool.name;
      generation = r.slice->spec.pool.generation;
    }
    {
      std::lock_guard lock(mu);
      PoolTrace& t = traces[pool];
      if (!t.reconciling) violation(r.verb + " of " + pool + " outside its reconcile");
      if (r.verb == "delete") {
        t.deleting = true;
      } else {
        if (t.deleting) violation(r.verb + " of " + pool + " after its deletes");
        if (t.generation >= 0 && generation != t.generation) {
          violation(pool + ": generations " + std::to_string(t.generation) + " and " +
                    std::to_string(generation) + " in one reconcile");
        }
        if (generation < t.highest) violation(pool + ": generation went back");
        t.generation = generation;
        t.highest = std::max(t.highest, generation);
      }
    }
    // Widens the window in which another reconcile of the pool could start.
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    return okStatus();
  };
  for (const char* verb : {"create", "update", "delete"}) {
    api_.prependReactor(verb, "resourceslices", write);
  }
  for (int i = 0; i < 8; ++i) api_.addNode("node-" + std::to_string(i));
  start(64);

  // 1, 2, 3 and 1 slices again (128 devices fill one), 25 rounds per pool.
  const std::array<int, 4> sizes = {5, 200, 300, 7};
  for (int round = 0; round < 25; ++round) {
    for (int i = 0; i < 8; ++i) {
      putPool("node-" + std::to_string(i), sizes[(round + i) % sizes.size()]);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_TRUE(controller_->waitIdleForTest());
  std::lock_guard lock(mu);
  EXPECT_TRUE(violations.empty()) << ::testing::PrintToString(violations);
  for (int i = 0; i < 8; ++i) {
    const std::string node = "node-" + std::to_string(i);
    EXPECT_EQ(store_.status({"gpu.example.com", node})->phase, PoolPhase::kPublished) << node;
  }
  EXPECT_GT(api_.countWrites(), 100U) << "the pools changed shape many times";
}

}  // namespace
}  // namespace rsc::controller::reconcile
