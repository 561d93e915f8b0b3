#include "controller/reconcile/reconciler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <set>

#include "test/controller/reconcile/counter_pools.h"
#include "test/fakes/fake_clock.h"
#include "test/fakes/fake_kube_api.h"

namespace rsc::controller::reconcile {
namespace {

using client::ResourceSlice;

const PoolKey kNodeA{"gpu.example.com", "node-a"};

// Reads the fake's current state: the cache is exact, so assume* have
// nothing to do (the informer's mutation cache is tested with the informer).
// Like the controller's informer, it selects the managed-by label, unless
// `labelled_only` is cleared (a cache of every slice).
class ListingSliceCache : public SliceCache {
 public:
  explicit ListingSliceCache(testing::FakeKubeApi& api) : api_(api) {}
  std::vector<SlicePtr> slicesOfPool(const PoolKey& key) const override {
    std::vector<SlicePtr> out;
    for (const ResourceSlice& s : api_.resourceSlices()) {
      auto it = s.metadata.labels.find(kManagedByLabel);
      const bool labelled = it != s.metadata.labels.end() && it->second == kManagedByValue;
      if (labelled_only && !labelled) continue;
      if (s.spec.driver == key.driver && s.spec.pool.name == key.pool) {
        out.push_back(std::make_shared<ResourceSlice>(s));
      }
    }
    return out;
  }
  void assumeWritten(const ResourceSlice& /*stored*/) override {}
  void assumeDeleted(const ResourceSlice& /*last*/) override {}

  bool labelled_only = true;

 private:
  testing::FakeKubeApi& api_;
};

class CountingObserver : public ReconcilerObserver {
 public:
  // Called from the reconciler's write threads at once.
  void sliceWrite(const std::string& driver, std::string_view verb,
                  std::string_view result) override {
    std::lock_guard lock(mu);
    writes[driver + "/" + std::string(verb) + "/" + std::string(result)]++;
  }
  void published(const std::string& /*driver*/, Clock::Duration latency) override {
    latencies.push_back(latency);
  }
  std::mutex mu;
  std::map<std::string, int> writes;  // read by the test once writes are done
  std::vector<Clock::Duration> latencies;
};

client::Device gpu(const std::string& name, const std::string& model = "A100") {
  client::Device d;
  d.name = name;
  client::DeviceAttribute a;
  a.string_value = model;
  d.attributes["model"] = a;
  client::DeviceCapacity c;
  c.value = *client::Quantity::parse("40Gi");
  d.capacity["memory"] = c;
  return d;
}

Pool nodePool(int devices, const std::string& node = "node-a") {
  Pool p;
  p.selection.node_name = node;
  for (int i = 0; i < devices; ++i) p.devices.push_back(gpu("gpu-" + std::to_string(i)));
  return p;
}

// The device names of each slice of the pool, by slice name.
std::map<std::string, std::vector<std::string>> deviceNames(
    const std::vector<ResourceSlice>& slices) {
  std::map<std::string, std::vector<std::string>> out;
  for (const ResourceSlice& s : slices) {
    for (const client::Device& d : client::decodeAll(s.spec.devices))
      out[s.metadata.name].push_back(d.name);
  }
  return out;
}

bool anyDevice(const ResourceSlice& slice, const std::function<bool(const client::Device&)>& f) {
  const std::vector<client::Device> devices = client::decodeAll(slice.spec.devices);
  return std::any_of(devices.begin(), devices.end(), f);
}

class ReconcilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    api_.addNode("node-a");
    api_.addNode("node-b");
    ReconcilerOptions o = options(store_);
    o.observer = &observer_;
    auto r = Reconciler::create(o);
    ASSERT_TRUE(r.ok()) << r.status().toString();
    reconciler_ = std::move(*r);
  }

  // Reconciles and checks DRA's invariants: success, and a second reconcile
  // makes no write at all.
  void sync(const PoolKey& key = kNodeA) {
    const ReconcileResult r = reconciler_->reconcile(key);
    ASSERT_TRUE(r.status.ok()) << r.status.toString();
    const size_t writes = api_.countWrites();
    const ReconcileResult again = reconciler_->reconcile(key);
    ASSERT_TRUE(again.status.ok()) << again.status.toString();
    EXPECT_EQ(api_.countWrites(), writes) << "a second reconcile wrote";
  }

  std::vector<ResourceSlice> poolSlices(const PoolKey& key = kNodeA) {
    std::vector<ResourceSlice> out;
    for (const ResourceSlice& s : api_.resourceSlices()) {
      if (s.spec.driver == key.driver && s.spec.pool.name == key.pool) out.push_back(s);
    }
    return out;
  }

  // Every slice of the pool has the same generation and the right count.
  void expectComplete(int64_t generation, size_t slices, const PoolKey& key = kNodeA) {
    const auto all = poolSlices(key);
    ASSERT_EQ(all.size(), slices);
    for (const ResourceSlice& s : all) {
      EXPECT_EQ(s.spec.pool.generation, generation) << s.metadata.name;
      EXPECT_EQ(s.spec.pool.resource_slice_count, static_cast<int64_t>(slices)) << s.metadata.name;
    }
  }

  size_t writes(std::string_view verb) { return api_.countActions(verb, "resourceslices"); }

  // The verbs of the slice writes since the last clearActions(), in order.
  std::vector<std::string> writeVerbs() {
    std::vector<std::string> verbs;
    for (const auto& a : api_.actions()) {
      if (a.resource == "resourceslices" && a.verb != "get" && a.verb != "list")
        verbs.push_back(a.verb);
    }
    return verbs;
  }

  // A reconciler as a restarted process has it: a fresh desired store, the
  // same API server and cache.
  std::unique_ptr<Reconciler> restartedWith(DesiredStore& store,
                                            Clock::TimePoint adoption_grace_until = {}) {
    ReconcilerOptions o = options(store);
    o.adoption_grace_until = adoption_grace_until;
    return std::move(*Reconciler::create(o));
  }

  // The fixture's API, clock and cache, with `store`.
  ReconcilerOptions options(DesiredStore& store) {
    ReconcilerOptions o;
    o.api = &api_;
    o.clock = &clock_;
    o.store = &store;
    o.cache = &cache_;
    return o;
  }

  // Publishes nodePool(200) on node-a: two slices at generation 1. Returns
  // the device names of each slice.
  std::map<std::string, std::vector<std::string>> publishTwoSlices() {
    store_.put(kNodeA, nodePool(200));
    sync();
    expectComplete(1, 2);
    return deviceNames(poolSlices());
  }

  // Makes the fake refuse every create and update of a slice that `bad`
  // matches with 422 Invalid and `message`, as the API server's validation
  // would.
  void refuse(std::function<bool(const ResourceSlice&)> bad, const std::string& message) {
    api_.prependReactor("*", "resourceslices", [bad, message](testing::FakeKubeApi::Request& req) {
      if (!req.slice || !bad(*req.slice)) return okStatus();
      return Status(StatusCode::kUnprocessable,
                    "ResourceSlice.resource.k8s.io is invalid: " + message, {{"spec", message}},
                    "Invalid");
    });
  }

  // The pool is whole, with the devices of `published` (nodePool(200) as
  // first published) in the same slices. Returns its generation.
  int64_t expectPublishedContent(const std::map<std::string, std::vector<std::string>>& published) {
    const std::vector<ResourceSlice> now = poolSlices();
    if (now.empty()) {
      ADD_FAILURE() << "no slices";
      return 0;
    }
    const int64_t generation = now[0].spec.pool.generation;
    expectComplete(generation, published.size());
    EXPECT_EQ(deviceNames(now), published);
    for (const ResourceSlice& s : now) {
      for (const client::Device& d : client::decodeAll(s.spec.devices)) {
        EXPECT_EQ(d.attributes.at("model").string_value, "A100") << d.name;
        EXPECT_FALSE(d.attributes.contains("firmware")) << d.name;
      }
    }
    return generation;
  }

  // Makes the server refuse a firmware version "v1" and pushes nodePool(200)
  // to `store` with a change in each slice, the second one such a version.
  Pool refusedInTheSecondSlice(DesiredStore& store) {
    refuse(
        [](const ResourceSlice& s) {
          return anyDevice(s, [](const client::Device& d) {
            auto it = d.attributes.find("firmware");
            return it != d.attributes.end() && it->second.version_value == "v1";
          });
        },
        "spec.devices[22].attributes[firmware].version: Invalid value: \"v1\": must be a "
        "semantic version");
    Pool changed = nodePool(200);
    changed.devices[10].edit(
        [&](client::Device& d_) { d_.attributes["model"].string_value = "H100"; });
    changed.devices[150].edit(
        [&](client::Device& d_) { d_.attributes["firmware"].version_value = "v1"; });
    store.put(kNodeA, changed);
    return changed;
  }

  // After a refused push: the pool is Failed with the server's message, and
  // retries succeed without writing anything.
  void expectRefusedAndNotRetried(const std::string& message) {
    EXPECT_EQ(store_.status(kNodeA)->phase, PoolPhase::kFailed);
    EXPECT_NE(store_.status(kNodeA)->last_error.message().find(message), std::string::npos)
        << store_.status(kNodeA)->last_error.toString();
    const size_t before = api_.countWrites();
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(reconciler_->reconcile(kNodeA).status.ok());
    EXPECT_EQ(api_.countWrites(), before) << "a retry wrote again";
    EXPECT_EQ(store_.status(kNodeA)->phase, PoolPhase::kFailed);
  }

  testing::FakeClock clock_;
  testing::FakeKubeApi api_{clock_};
  DesiredStore store_{clock_};
  ListingSliceCache cache_{api_};
  CountingObserver observer_;
  std::unique_ptr<Reconciler> reconciler_;
};

TEST_F(ReconcilerTest, CreatesANewNodeLocalPool) {
  const uint64_t version = store_.put(kNodeA, nodePool(3));
  sync();
  const auto slices = poolSlices();
  ASSERT_EQ(slices.size(), 1U);
  const ResourceSlice& s = slices[0];
  EXPECT_EQ(s.metadata.name.substr(0, 29), "00000-gpu.example.com-node-a-");
  EXPECT_EQ(s.metadata.labels.at(kManagedByLabel), kManagedByValue);
  ASSERT_EQ(s.metadata.owner_references.size(), 1U);
  EXPECT_EQ(s.metadata.owner_references[0].kind, "Node");
  EXPECT_EQ(s.metadata.owner_references[0].name, "node-a");
  EXPECT_EQ(s.metadata.owner_references[0].uid, api_.getNode("node-a")->metadata.uid);
  EXPECT_EQ(s.spec.node_name, "node-a");
  EXPECT_EQ(s.spec.devices.size(), 3U);
  expectComplete(1, 1);
  EXPECT_EQ(writes("create"), 1U);

  const auto status = store_.status(kNodeA);
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->phase, PoolPhase::kPublished);
  EXPECT_EQ(status->published_version, version);
  EXPECT_EQ(status->slice_names, std::vector<std::string>{s.metadata.name});
  EXPECT_EQ(observer_.writes["gpu.example.com/create/success"], 1);
  EXPECT_EQ(observer_.latencies.size(), 1U);
}

TEST_F(ReconcilerTest, ChangingOneDeviceUpdatesOneSliceWithoutABump) {
  store_.put(kNodeA, nodePool(300));
  sync();
  expectComplete(1, 3);
  api_.clearActions();

  Pool changed = nodePool(300);
  changed.devices[200].edit(
      [&](client::Device& d_) { d_.attributes["model"].string_value = "H100"; });
  store_.put(kNodeA, changed);
  sync();
  EXPECT_EQ(api_.countWrites(), 1U);
  EXPECT_EQ(writes("update"), 1U);
  expectComplete(1, 3);
}

TEST_F(ReconcilerTest, AddingADeviceWithRoomUpdatesOneSlice) {
  store_.put(kNodeA, nodePool(130));
  sync();
  api_.clearActions();
  store_.put(kNodeA, nodePool(131));
  sync();
  EXPECT_EQ(api_.countWrites(), 1U);
  expectComplete(1, 2);
}

TEST_F(ReconcilerTest, GrowingBeyondASliceBumpsAndRewritesEverySlice) {
  store_.put(kNodeA, nodePool(128));
  sync();
  api_.clearActions();
  store_.put(kNodeA, nodePool(129));
  sync();
  EXPECT_EQ(writes("update"), 1U);
  EXPECT_EQ(writes("create"), 1U);
  expectComplete(2, 2);
}

// Obsolete slices go last: until every slice of the new generation is
// written, the published generation stays whole (and usable if the server
// refuses one of the new slices).
TEST_F(ReconcilerTest, ShrinkingBumpsAndDeletesObsoleteSlicesLast) {
  store_.put(kNodeA, nodePool(300));
  sync();
  api_.clearActions();
  store_.put(kNodeA, nodePool(100));
  sync();
  EXPECT_EQ(writeVerbs(), (std::vector<std::string>{"update", "delete", "delete"}));
  expectComplete(2, 1);
}

// Every delete names the uid and resourceVersion of the slice it decided
// on, so that a slice someone changed or re-created meanwhile is not deleted
// blindly (the server answers 409 and the pool is looked at again).
TEST_F(ReconcilerTest, DeletesCarryUidAndResourceVersionPreconditions) {
  store_.put(kNodeA, nodePool(300));
  sync();
  std::map<std::string, ResourceSlice> before;
  for (const ResourceSlice& s : poolSlices()) before[s.metadata.name] = s;
  std::vector<testing::FakeKubeApi::Request> deletes;
  api_.prependReactor("delete", "resourceslices", [&](testing::FakeKubeApi::Request& r) {
    deletes.push_back(r);
    return okStatus();
  });
  store_.put(kNodeA, nodePool(100));
  sync();
  ASSERT_EQ(deletes.size(), 2U);
  for (const testing::FakeKubeApi::Request& d : deletes) {
    const ResourceSlice& seen = before.at(d.name);
    EXPECT_EQ(d.preconditions.uid, seen.metadata.uid) << d.name;
    EXPECT_EQ(d.preconditions.resource_version, seen.metadata.resource_version) << d.name;
  }
}

TEST_F(ReconcilerTest, GrowingCreatesNewSlicesBeforeRewritingTheOthers) {
  store_.put(kNodeA, nodePool(128));
  sync();
  api_.clearActions();
  store_.put(kNodeA, nodePool(300));
  sync();
  EXPECT_EQ(writeVerbs(), (std::vector<std::string>{"create", "create", "update"}));
  expectComplete(2, 3);
}

// A bump writes its slices together (bounded by max_parallel_writes), so
// that the scheduler sees the new generation incomplete for about one round
// trip rather than one per slice.
TEST_F(ReconcilerTest, TheSlicesOfABumpAreWrittenConcurrently) {
  store_.put(kNodeA, nodePool(128));
  sync();
  // The first writes wait until eight are under way: only writes that run
  // together get past, and the bound is reached.
  api_.holdWritesUntilConcurrent(8);
  store_.put(kNodeA, nodePool(128 * 16));
  sync();
  expectComplete(2, 16);
  EXPECT_EQ(api_.maxConcurrentWrites(), 8U);
}

// One write of a concurrent bump fails: the others may have landed. The
// reconcile fails, is retried, and the pool ends whole, with no slice twice.
TEST_F(ReconcilerTest, AFailedWriteAmongConcurrentOnesLeavesThePoolToBeRepaired) {
  store_.put(kNodeA, nodePool(128));
  sync();
  int creates = 0;
  api_.prependReactor("create", "resourceslices", [&](testing::FakeKubeApi::Request&) {
    if (++creates == 7) return unavailable("injected: 503 on the seventh create");
    return okStatus();
  });
  store_.put(kNodeA, nodePool(128 * 16));
  EXPECT_EQ(reconciler_->reconcile(kNodeA).status.code(), StatusCode::kUnavailable);
  sync();
  expectComplete(poolSlices()[0].spec.pool.generation, 16);
  std::set<std::string> devices;
  for (const ResourceSlice& s : poolSlices()) {
    for (const client::Device& d : client::decodeAll(s.spec.devices)) {
      EXPECT_TRUE(devices.insert(d.name).second) << d.name << " published twice";
    }
  }
  EXPECT_EQ(devices.size(), 128U * 16);
  EXPECT_EQ(store_.status(kNodeA)->phase, PoolPhase::kPublished);
}

TEST_F(ReconcilerTest, ManualEditIsUndoneWithoutABump) {
  store_.put(kNodeA, nodePool(3));
  sync();
  const std::string name = poolSlices()[0].metadata.name;
  ASSERT_TRUE(api_.editResourceSlice(name,
                                     [](ResourceSlice& s) {
                                       s.spec.devices[0].edit([&](client::Device& d_) {
                                         d_.attributes["model"].string_value = "tampered";
                                       });
                                     })
                  .ok());
  api_.clearActions();
  sync();
  EXPECT_EQ(writes("update"), 1U);
  EXPECT_EQ(poolSlices()[0].spec.devices[0].device().attributes.at("model").string_value, "A100");
  expectComplete(1, 1);
}

TEST_F(ReconcilerTest, ASliceDeletedBySomeoneElseIsRecreated) {
  store_.put(kNodeA, nodePool(200));
  sync();
  const auto before = poolSlices();
  ASSERT_EQ(before.size(), 2U);
  ASSERT_TRUE(api_.removeResourceSlice(before[1].metadata.name).ok());
  sync();
  expectComplete(2, 2);
}

TEST_F(ReconcilerTest, WithdrawnPoolIsDeleted) {
  store_.put(kNodeA, nodePool(200));
  sync();
  ASSERT_TRUE(store_.remove(kNodeA));
  EXPECT_EQ(store_.status(kNodeA)->phase, PoolPhase::kWithdrawing);
  sync();
  EXPECT_TRUE(poolSlices().empty());
  EXPECT_FALSE(store_.status(kNodeA).has_value());
}

TEST_F(ReconcilerTest, AdoptedSlicesWaitForTheGracePeriod) {
  store_.put(kNodeA, nodePool(3));
  sync();
  // A restarted controller: nothing desired yet, slices live.
  DesiredStore fresh(clock_);
  const Clock::TimePoint grace = clock_.now() + std::chrono::minutes(2);
  auto restarted = restartedWith(fresh, grace);
  api_.clearActions();

  ReconcileResult r = restarted->reconcile(kNodeA);
  ASSERT_TRUE(r.status.ok());
  ASSERT_TRUE(r.requeue_after.has_value());
  EXPECT_EQ(*r.requeue_after, std::chrono::minutes(2));
  EXPECT_EQ(api_.countWrites(), 0U);

  // The driver pushes the same pool again within the grace: adopted, no write.
  fresh.put(kNodeA, nodePool(3));
  r = restarted->reconcile(kNodeA);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(api_.countWrites(), 0U);
  EXPECT_EQ(fresh.status(kNodeA)->phase, PoolPhase::kPublished);

  // A pool no one pushes again goes after the grace.
  DesiredStore empty(clock_);
  auto later = restartedWith(empty, grace);
  clock_.advance(std::chrono::minutes(3));
  r = later->reconcile(kNodeA);
  ASSERT_TRUE(r.status.ok());
  EXPECT_TRUE(poolSlices().empty());
}

TEST_F(ReconcilerTest, ConflictingUpdateIsReReadAndRetried) {
  store_.put(kNodeA, nodePool(3));
  sync();
  int conflicts = 1;
  api_.prependReactor("update", "resourceslices", [&](testing::FakeKubeApi::Request&) {
    if (conflicts-- > 0) return conflict("the object has been modified");
    return okStatus();
  });
  Pool changed = nodePool(3);
  changed.devices[0].edit(
      [&](client::Device& d_) { d_.attributes["model"].string_value = "H100"; });
  store_.put(kNodeA, changed);
  sync();
  EXPECT_EQ(poolSlices()[0].spec.devices[0].device().attributes.at("model").string_value, "H100");
  EXPECT_EQ(observer_.writes["gpu.example.com/update/conflict"], 1);
  EXPECT_EQ(observer_.writes["gpu.example.com/update/success"], 1);
}

TEST_F(ReconcilerTest, MissingNodeFailsThePool) {
  store_.put(kNodeA, nodePool(1, "node-z"));
  const ReconcileResult r = reconciler_->reconcile(kNodeA);
  EXPECT_EQ(r.status.code(), StatusCode::kNotFound);
  EXPECT_EQ(api_.countWrites(), 0U);
  const auto status = store_.status(kNodeA);
  EXPECT_EQ(status->phase, PoolPhase::kFailed);
  EXPECT_NE(status->last_error.message().find("node-z"), std::string::npos);
}

// A Node cache that holds what the test puts in it.
class MapNodeCache : public NodeCache {
 public:
  std::optional<std::string> nodeUid(const std::string& name) const override {
    auto it = uids.find(name);
    if (it == uids.end()) return std::nullopt;
    return it->second;
  }
  std::map<std::string, std::string> uids;
};

// With a Node cache, the owner reference takes the cached UID and the API
// server is not asked; a Node the cache lacks is read once, as without one.
TEST_F(ReconcilerTest, TheNodeCacheAnswersAndAMissReadsTheNodeOnce) {
  MapNodeCache nodes;
  nodes.uids["node-a"] = "uid-from-the-cache";
  ReconcilerOptions o = options(store_);
  o.nodes = &nodes;
  auto made = Reconciler::create(o);
  ASSERT_TRUE(made.ok()) << made.status().toString();
  reconciler_ = std::move(*made);

  struct Case {
    std::string name;
    std::string node;
    std::string want_uid;
    size_t want_gets;
  };
  const std::vector<Case> cases = {
      {"hit", "node-a", "uid-from-the-cache", 0},
      {"miss", "node-b", api_.getNode("node-b")->metadata.uid, 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const PoolKey key{"gpu.example.com", c.node};
    store_.put(key, nodePool(2, c.node));
    api_.clearActions();
    const ReconcileResult r = reconciler_->reconcile(key);
    ASSERT_TRUE(r.status.ok()) << r.status.toString();
    EXPECT_EQ(api_.countActions("get", "nodes"), c.want_gets);
    const auto slices = poolSlices(key);
    ASSERT_EQ(slices.size(), 1U);
    ASSERT_EQ(slices[0].metadata.owner_references.size(), 1U);
    EXPECT_EQ(slices[0].metadata.owner_references[0].uid, c.want_uid);
    // A second sync writes nothing and reads the Node as often again.
    api_.clearActions();
    ASSERT_TRUE(reconciler_->reconcile(key).status.ok());
    EXPECT_EQ(api_.countWrites(), 0U);
    EXPECT_EQ(api_.countActions("get", "nodes"), c.want_gets);
  }
}

TEST_F(ReconcilerTest, ServerDefaultsAndDroppedFieldsCauseNoUpdateLoop) {
  // The server defaults taint timeAdded and drops bindingConditions (as with
  // the feature disabled).
  auto serverSide = [](testing::FakeKubeApi::Request& req) {
    if (!req.slice) return okStatus();
    client::editDevices(req.slice->spec.devices, [&](client::Device& d) {
      for (client::DeviceTaint& t : d.taints) {
        if (!t.time_added) t.time_added = "2026-01-01T00:00:00Z";
      }
      d.binding_conditions.clear();
      d.binding_failure_conditions.clear();
    });
    return okStatus();
  };
  api_.prependReactor("create", "resourceslices", serverSide);
  api_.prependReactor("update", "resourceslices", serverSide);
  Pool pool = nodePool(2);
  client::DeviceTaint taint;
  taint.key = "example.com/maintenance";
  taint.effect = "NoSchedule";
  pool.devices[0].edit([&](client::Device& d_) { d_.taints.push_back(taint); });
  pool.devices[1].edit(
      [&](client::Device& d_) { d_.binding_conditions = {"example.com/attached"}; });
  pool.devices[1].edit(
      [&](client::Device& d_) { d_.binding_failure_conditions = {"example.com/failed"}; });
  store_.put(kNodeA, pool);
  sync();  // also asserts that the second reconcile writes nothing
  EXPECT_EQ(api_.countWrites(), 1U);
  const auto status = store_.status(kNodeA);
  EXPECT_FALSE(status->dropped_fields.empty());
}

TEST_F(ReconcilerTest, RequestedGenerationIsHonoured) {
  Pool pool = nodePool(2);
  pool.generation = 7;
  store_.put(kNodeA, pool);
  sync();
  expectComplete(7, 1);
  pool.generation = 9;
  store_.put(kNodeA, pool);
  sync();
  expectComplete(9, 1);
}

TEST_F(ReconcilerTest, MovingAPoolToAnotherNodeReplacesItsSlices) {
  store_.put(kNodeA, nodePool(2, "node-a"));
  sync();
  store_.put(kNodeA, nodePool(2, "node-b"));
  sync();
  const auto slices = poolSlices();
  ASSERT_EQ(slices.size(), 1U);
  EXPECT_EQ(slices[0].spec.node_name, "node-b");
  EXPECT_EQ(slices[0].metadata.owner_references[0].name, "node-b");
  expectComplete(2, 1);
}

TEST_F(ReconcilerTest, NetworkPoolWithSelectorHasNoOwner) {
  const PoolKey key{"nic.example.com", "fabric-1"};
  Pool pool;
  client::NodeSelector sel;
  sel.value = client::Json::parse(
      R"({"nodeSelectorTerms":[{"matchExpressions":[{"key":"fabric","operator":"In","values":["1"]}]}]})");
  pool.selection.node_selector = sel;
  for (int i = 0; i < 40; ++i) pool.devices.push_back(gpu("nic-" + std::to_string(i)));
  store_.put(key, pool);
  sync(key);
  const auto slices = poolSlices(key);
  ASSERT_EQ(slices.size(), 1U);
  EXPECT_TRUE(slices[0].metadata.owner_references.empty());
  EXPECT_EQ(slices[0].spec.node_selector, sel);
  EXPECT_FALSE(slices[0].spec.node_name.has_value());
}

TEST_F(ReconcilerTest, OneFailingPoolDoesNotAffectAnother) {
  const PoolKey other{"gpu.example.com", "node-b"};
  api_.prependReactor("create", "resourceslices", [](testing::FakeKubeApi::Request& req) {
    if (req.slice && req.slice->spec.pool.name == "node-a") return unavailable("injected");
    return okStatus();
  });
  store_.put(kNodeA, nodePool(1));
  store_.put(other, nodePool(1, "node-b"));
  EXPECT_FALSE(reconciler_->reconcile(kNodeA).status.ok());
  EXPECT_TRUE(reconciler_->reconcile(other).status.ok());
  EXPECT_EQ(store_.status(kNodeA)->phase, PoolPhase::kFailed);
  EXPECT_EQ(store_.status(other)->phase, PoolPhase::kPublished);
}

TEST_F(ReconcilerTest, AllNodesPoolHasNoNodeAndNoOwner) {
  const PoolKey key{"fabric.example.com", "global"};
  Pool pool;
  pool.selection.all_nodes = true;
  pool.devices.push_back(gpu("link-0"));
  store_.put(key, pool);
  sync(key);
  const auto slices = poolSlices(key);
  ASSERT_EQ(slices.size(), 1U);
  EXPECT_EQ(slices[0].spec.all_nodes, true);
  EXPECT_FALSE(slices[0].spec.node_name.has_value());
  EXPECT_TRUE(slices[0].metadata.owner_references.empty());
}

TEST_F(ReconcilerTest, ExplicitSlicesArePublishedAsGiven) {
  Pool pool;
  pool.selection.node_name = "node-a";
  pool.slices = std::vector<DesiredSlice>{{{gpu("a-0"), gpu("a-1")}, {}}, {{gpu("b-0")}, {}}};
  store_.put(kNodeA, pool);
  sync();
  expectComplete(1, 2);
  std::set<std::vector<std::string>> contents;
  for (const ResourceSlice& s : poolSlices()) {
    std::vector<std::string> names;
    for (const auto& d : s.spec.devices) names.push_back(d->name());
    contents.insert(names);
  }
  EXPECT_EQ(contents, (std::set<std::vector<std::string>>{{"a-0", "a-1"}, {"b-0"}}));
}

// nodePool(n) with one counter set, of which every device consumes half.
Pool nodePoolWithCounters(int n) {
  Pool pool = nodePool(n);
  addCounterSetConsumedByAll(pool, "gpu-0-counters");
  return pool;
}

TEST_F(ReconcilerTest, SharedCountersGetASliceOfTheirOwn) {
  Pool pool = nodePoolWithCounters(2);
  store_.put(kNodeA, pool);
  sync();
  expectComplete(1, 2);
  int counter_slices = 0;
  for (const ResourceSlice& s : poolSlices()) {
    if (!s.spec.shared_counters.empty()) {
      ++counter_slices;
      EXPECT_TRUE(s.spec.devices.empty());
    }
  }
  EXPECT_EQ(counter_slices, 1);
}

// Kubernetes 1.34 with DRAPartitionableDevices on refuses a device that
// consumes a counter set of another slice; for it the counter set shares the
// slice of its consumers: one create, and nothing more.
TEST_F(ReconcilerTest, OnKubernetes134CounterSetsShareTheirConsumersSlice) {
  api_.prependReactor("create", "resourceslices", [](testing::FakeKubeApi::Request& req) {
    if (!req.slice) return okStatus();
    std::set<std::string> here;
    for (const client::CounterSet& c : req.slice->spec.shared_counters) here.insert(c.name);
    for (const client::DeviceRef& d : req.slice->spec.devices) {
      for (const auto& c : d.device().consumes_counters) {
        if (!here.contains(c.counter_set)) {
          return invalidArgument("must reference a counterSet defined in the ResourceSlice");
        }
      }
    }
    return okStatus();
  });
  ReconcilerOptions o = options(store_);
  o.counter_placement = counterPlacementFor(1, 34);
  reconciler_ = std::move(*Reconciler::create(o));
  store_.put(kNodeA, nodePoolWithCounters(2));
  sync();
  expectComplete(1, 1);
  EXPECT_EQ(writes("create"), 1U);
  const std::vector<ResourceSlice> slices = poolSlices();
  ASSERT_EQ(slices.size(), 1U);
  EXPECT_EQ(slices[0].spec.shared_counters.size(), 1U);
  EXPECT_EQ(slices[0].spec.devices.size(), 2U);
}

// Kubernetes 1.34 and 1.35 with DRAPartitionableDevices off (their default)
// drop sharedCounters and consumesCounters: the slice of counter sets is
// stored empty. Publishing costs one create per slice, and after that the
// pool is left alone: no generation bump, no create and delete of the counter
// slice on every reconcile (issue 15's write storm).
TEST_F(ReconcilerTest, AServerDroppingCounterSetsCausesNoRewriteLoop) {
  auto dropCounters = [](testing::FakeKubeApi::Request& req) {
    if (!req.slice) return okStatus();
    req.slice->spec.shared_counters.clear();
    client::editDevices(req.slice->spec.devices,
                        [&](client::Device& d) { d.consumes_counters.clear(); });
    return okStatus();
  };
  api_.prependReactor("create", "resourceslices", dropCounters);
  api_.prependReactor("update", "resourceslices", dropCounters);
  Pool pool = nodePoolWithCounters(2);
  store_.put(kNodeA, pool);
  sync();  // also asserts that a second reconcile writes nothing
  expectComplete(1, 2);
  EXPECT_EQ(writes("create"), 2U);
  EXPECT_EQ(writes("update"), 0U);
  EXPECT_EQ(writes("delete"), 0U);
  const auto status = store_.status(kNodeA);
  EXPECT_NE(std::find(status->dropped_fields.begin(), status->dropped_fields.end(),
                      "spec.sharedCounters"),
            status->dropped_fields.end());

  // On a server that keeps counter sets (upgraded, or the gate turned on),
  // a restarted controller fills the emptied slice in again: updates, no
  // create and delete.
  std::string emptied;
  for (const ResourceSlice& s : poolSlices()) {
    if (s.spec.devices.empty()) emptied = s.metadata.name;
  }
  ASSERT_FALSE(emptied.empty());
  api_.clearReactors();
  DesiredStore fresh(clock_);
  fresh.put(kNodeA, pool);
  reconciler_ = restartedWith(fresh);
  ASSERT_TRUE(reconciler_->reconcile(kNodeA).status.ok());
  EXPECT_EQ(writes("create"), 2U);
  EXPECT_EQ(writes("delete"), 0U);
  StatusOr<ResourceSlice> refilled = api_.getResourceSlice(emptied);
  ASSERT_TRUE(refilled.ok()) << refilled.status().toString();
  EXPECT_EQ(refilled->spec.shared_counters.size(), 1U);
  expectComplete(2, 2);
}

// A slice someone else made by hand for node-a's pool, without our label or
// an index in its name, claiming generation 5.
ResourceSlice handmadeSlice() {
  ResourceSlice foreign;
  foreign.metadata.name = "handmade-node-a";
  foreign.spec.driver = kNodeA.driver;
  foreign.spec.pool = {kNodeA.pool, 5, 1};
  foreign.spec.node_name = "node-a";
  foreign.spec.devices.push_back(gpu("other"));
  return foreign;
}

// With the label-selected cache, such a slice is invisible (see
// WithEverySliceCachedAForeignSliceClaimingThePoolIsReplaced).
TEST_F(ReconcilerTest, ForeignUnmanagedSliceOfTheSameDriverIsLeftAlone) {
  auto added = api_.addResourceSlice(handmadeSlice());
  ASSERT_TRUE(added.ok());
  store_.put(kNodeA, nodePool(2));
  sync();
  const auto still = api_.resourceSlice("handmade-node-a");
  ASSERT_TRUE(still.has_value());
  EXPECT_EQ(still->metadata.resource_version, added->metadata.resource_version);
  EXPECT_EQ(poolSlices().size(), 2U);  // ours and the foreign one
}

TEST_F(ReconcilerTest, ServerRejectingOnePoolDoesNotStopOthers) {
  const PoolKey other{"gpu.example.com", "node-b"};
  api_.prependReactor("create", "resourceslices", [](testing::FakeKubeApi::Request& req) {
    if (req.slice && req.slice->spec.pool.name == "node-a") {
      return Status(StatusCode::kUnprocessable, "spec.devices[0].name: Invalid value",
                    {{"spec.devices[0].name", "Invalid value"}}, "Invalid");
    }
    return okStatus();
  });
  store_.put(kNodeA, nodePool(1));
  store_.put(other, nodePool(1, "node-b"));
  const ReconcileResult bad = reconciler_->reconcile(kNodeA);
  EXPECT_EQ(bad.status.code(), StatusCode::kUnprocessable);
  sync(other);
  EXPECT_EQ(store_.status(kNodeA)->phase, PoolPhase::kFailed);
  EXPECT_EQ(store_.status(kNodeA)->last_error.reason(), "Invalid");
  EXPECT_EQ(store_.status(other)->phase, PoolPhase::kPublished);
}

// ---- A push the server rejects never destroys what is published ------------

// A node-local pool re-pushed with a node selector the server refuses: the
// old slice used to be deleted before the new one was refused (0 slices).
TEST_F(ReconcilerTest, ARejectedNodeSelectionKeepsThePublishedSlice) {
  store_.put(kNodeA, nodePool(3));
  sync();
  const std::vector<ResourceSlice> before = poolSlices();
  ASSERT_EQ(before.size(), 1U);
  refuse([](const ResourceSlice& s) { return s.spec.node_selector.has_value(); },
         "spec.nodeSelector.nodeSelectorTerms[0].matchFields[0].values[0]: Invalid value: "
         "\"N_021\"");
  Pool moved = nodePool(3);
  moved.selection.node_name.reset();
  client::NodeSelector selector;
  selector.value = client::Json::parse(
      R"({"nodeSelectorTerms":[{"matchFields":[{"key":"metadata.name","operator":"In","values":["N_021"]}]}]})");
  moved.selection.node_selector = selector;
  store_.put(kNodeA, moved);
  api_.clearActions();

  const ReconcileResult r = reconciler_->reconcile(kNodeA);
  EXPECT_EQ(r.status.code(), StatusCode::kUnprocessable);
  EXPECT_EQ(writes("delete"), 0U) << "the published slice was deleted";
  const std::vector<ResourceSlice> after = poolSlices();
  ASSERT_EQ(after.size(), 1U);
  EXPECT_EQ(after[0].metadata.resource_version, before[0].metadata.resource_version);
  // Retries write nothing until the driver pushes something else.
  expectRefusedAndNotRetried("N_021");

  // Back on its node with one more device: one update, nothing was bumped.
  store_.put(kNodeA, nodePool(4));
  sync();
  expectComplete(1, 1);
  EXPECT_EQ(poolSlices()[0].spec.devices.size(), 4U);
  EXPECT_EQ(store_.status(kNodeA)->phase, PoolPhase::kPublished);
}

// A two-slice pool re-pushed with a taint the server refuses: the taint
// moves its device to a new slice (64 devices at most with taints), so the
// pool is bumped; the refused slice is written first and nothing else is.
TEST_F(ReconcilerTest, ARejectedBumpWritesNothingElseAndIsNotRetried) {
  const auto published = publishTwoSlices();
  refuse(
      [](const ResourceSlice& s) {
        return anyDevice(s, [](const client::Device& d) {
          return !d.taints.empty() && d.taints[0].time_added == "yesterday";
        });
      },
      "spec.devices[22].taints[0].timeAdded: Invalid value: \"yesterday\"");
  Pool changed = nodePool(200);
  client::DeviceTaint taint;
  taint.key = "example.com/unhealthy";
  taint.effect = "NoSchedule";
  taint.time_added = "yesterday";
  changed.devices[150].edit([&](client::Device& d_) { d_.taints.push_back(taint); });
  store_.put(kNodeA, changed);
  api_.clearActions();

  const ReconcileResult r = reconciler_->reconcile(kNodeA);
  EXPECT_EQ(r.status.code(), StatusCode::kUnprocessable);
  // The creates and changed slices of a bump are written together: when a
  // sibling of the refused write landed, the published content was written
  // back at a newer generation; when none did, nothing else was written.
  // Either way the pool is whole with the devices it had.
  const int64_t generation = expectPublishedContent(published);
  if (generation == 1) {
    EXPECT_EQ(api_.countWrites(), 1U) << "only the refused write";
  }
  expectRefusedAndNotRetried("yesterday");
  expectComplete(generation, 2);

  changed.devices[150].edit([&](client::Device& d_) { d_.taints[0].time_added.reset(); });
  store_.put(kNodeA, changed);
  sync();
  expectComplete(generation + 1, 3);
  EXPECT_EQ(store_.status(kNodeA)->phase, PoolPhase::kPublished);
}

// Both slices of a pool change and the second one is refused after the first
// was written at the new generation: the pool used to stay incomplete, and
// every retry bumped it again (generation 15, 16, ...). Now the published
// content is written back at a newer generation, once.
TEST_F(ReconcilerTest, ARejectedSecondWriteRestoresThePublishedContentOnce) {
  const auto published = publishTwoSlices();
  Pool changed = refusedInTheSecondSlice(store_);

  const ReconcileResult r = reconciler_->reconcile(kNodeA);
  EXPECT_EQ(r.status.code(), StatusCode::kUnprocessable);
  const int64_t generation = expectPublishedContent(published);
  EXPECT_EQ(store_.status(kNodeA)->published_generation, generation);
  expectRefusedAndNotRetried("semantic version");
  expectComplete(generation, 2);

  changed.devices[150].edit(
      [&](client::Device& d_) { d_.attributes["firmware"].version_value = "1.0.0"; });
  store_.put(kNodeA, changed);
  sync();
  expectComplete(generation + 1, 2);
  EXPECT_EQ(store_.status(kNodeA)->phase, PoolPhase::kPublished);
}

// After a restart or failover this process has published nothing: what it
// puts back is the pool as it was live before the refused attempt.
TEST_F(ReconcilerTest, ARejectedSecondWriteAfterARestartRestoresTheLivePool) {
  const auto published = publishTwoSlices();
  DesiredStore fresh(clock_);
  auto restarted = restartedWith(fresh);
  refusedInTheSecondSlice(fresh);

  EXPECT_EQ(restarted->reconcile(kNodeA).status.code(), StatusCode::kUnprocessable);
  const int64_t generation = expectPublishedContent(published);
  const size_t writes = api_.countWrites();
  EXPECT_TRUE(restarted->reconcile(kNodeA).status.ok());
  EXPECT_EQ(api_.countWrites(), writes) << "a retry wrote again";
  expectComplete(generation, 2);
}

// Failures the server may recover from (409, 429, 5xx) are retried as before.
TEST_F(ReconcilerTest, ATransientFailureIsStillRetried) {
  store_.put(kNodeA, nodePool(3));
  sync();
  int failures = 1;
  api_.prependReactor("update", "resourceslices", [&](testing::FakeKubeApi::Request&) {
    if (failures-- > 0) return unavailable("injected: 500 Internal Server Error");
    return okStatus();
  });
  store_.put(kNodeA, nodePool(4));
  EXPECT_EQ(reconciler_->reconcile(kNodeA).status.code(), StatusCode::kUnavailable);
  sync();
  EXPECT_EQ(poolSlices()[0].spec.devices.size(), 4U);
  EXPECT_EQ(store_.status(kNodeA)->phase, PoolPhase::kPublished);
}

// A 403 from RBAC is an operator's to fix: the same content is retried with
// backoff and published once the permission is back. A 403 from an
// admission policy judges the content and is not retried.
TEST_F(ReconcilerTest, MissingRbacIsRetriedButAnAdmissionDenialIsNot) {
  bool granted = false;
  api_.prependReactor("create", "resourceslices", [&](testing::FakeKubeApi::Request&) {
    if (granted) return okStatus();
    return Status(StatusCode::kPermissionDenied,
                  "resourceslices.resource.k8s.io is forbidden: User "
                  "\"system:serviceaccount:rsc:rsc\" cannot create resource \"resourceslices\" "
                  "in API group \"resource.k8s.io\" at the cluster scope",
                  {}, "Forbidden");
  });
  store_.put(kNodeA, nodePool(3));
  EXPECT_EQ(reconciler_->reconcile(kNodeA).status.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(store_.status(kNodeA)->rejected_version, 0U);
  granted = true;
  sync();
  expectComplete(1, 1);
  EXPECT_EQ(store_.status(kNodeA)->phase, PoolPhase::kPublished);

  api_.prependReactor("update", "resourceslices", [](testing::FakeKubeApi::Request&) {
    return Status(StatusCode::kPermissionDenied,
                  "resourceslices.resource.k8s.io \"x\" is forbidden: ValidatingAdmissionPolicy "
                  "'no-h100' with binding 'no-h100' denied request: no H100 here",
                  {}, "Forbidden");
  });
  Pool changed = nodePool(3);
  changed.devices[0].edit(
      [&](client::Device& d_) { d_.attributes["model"].string_value = "H100"; });
  store_.put(kNodeA, changed);
  EXPECT_EQ(reconciler_->reconcile(kNodeA).status.code(), StatusCode::kPermissionDenied);
  expectRefusedAndNotRetried("no H100 here");
}

// ---- Generations ------------------------------------------------------------

// A pool at the largest generation that needs a bump used to be published at
// generation 1 (the increment overflowed), below its old slices.
TEST_F(ReconcilerTest, GenerationSaturatesAtTheLargestValue) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  Pool pool = nodePool(128);
  pool.generation = kMax;
  store_.put(kNodeA, pool);
  sync();
  expectComplete(kMax, 1);
  store_.put(kNodeA, nodePool(129));
  sync();
  expectComplete(kMax, 2);
  EXPECT_EQ(store_.status(kNodeA)->published_generation, kMax);
  store_.put(kNodeA, nodePool(5));
  sync();
  expectComplete(kMax, 1);
}

// A generation lowered by someone else goes back up, never below what was
// published.
TEST_F(ReconcilerTest, AForeignlyLoweredGenerationIsRaisedAgain) {
  Pool pool = nodePool(3);
  pool.generation = 5;
  store_.put(kNodeA, pool);
  sync();
  expectComplete(5, 1);
  ASSERT_TRUE(api_.editResourceSlice(poolSlices()[0].metadata.name,
                                     [](ResourceSlice& s) { s.spec.pool.generation = 1; })
                  .ok());
  sync();
  expectComplete(6, 1);
}

// A resourceSliceCount changed by someone else makes the pool look
// incomplete to the scheduler: the pool is rewritten at a new generation.
TEST_F(ReconcilerTest, AForeignResourceSliceCountIsRepaired) {
  store_.put(kNodeA, nodePool(200));
  sync();
  ASSERT_TRUE(api_.editResourceSlice(poolSlices()[0].metadata.name,
                                     [](ResourceSlice& s) { s.spec.pool.resource_slice_count = 3; })
                  .ok());
  sync();
  expectComplete(2, 2);
}

// ---- Pool integrity against foreign edits -------------------------------------

// `kubectl label resourceslice <slice> app.kubernetes.io/managed-by-`: the
// slice leaves the label-selected cache. It used to be replaced by a new
// slice at the same generation (2 slices at generation 1, count 1, forever).
TEST_F(ReconcilerTest, ASliceThatLostItsLabelIsRelabelledNotDuplicated) {
  store_.put(kNodeA, nodePool(200));
  sync();
  expectComplete(1, 2);
  const std::string name = poolSlices()[1].metadata.name;
  ASSERT_TRUE(api_.editResourceSlice(
                      name, [](ResourceSlice& s) { s.metadata.labels.erase(kManagedByLabel); })
                  .ok());
  api_.clearActions();
  sync();
  EXPECT_EQ(writes("create"), 0U);
  EXPECT_EQ(writes("update"), 1U);
  expectComplete(1, 2);
  for (const ResourceSlice& s : poolSlices()) {
    EXPECT_EQ(s.metadata.labels.at(kManagedByLabel), kManagedByValue) << s.metadata.name;
  }
}

TEST_F(ReconcilerTest, ASliceWithAForeignManagerLabelIsTakenBack) {
  store_.put(kNodeA, nodePool(3));
  sync();
  const std::string name = poolSlices()[0].metadata.name;
  ASSERT_TRUE(
      api_.editResourceSlice(
              name, [](ResourceSlice& s) { s.metadata.labels[kManagedByLabel] = "someone-else"; })
          .ok());
  sync();
  expectComplete(1, 1);
  EXPECT_EQ(poolSlices()[0].metadata.labels.at(kManagedByLabel), kManagedByValue);
}

TEST_F(ReconcilerTest, AWithdrawnPoolTakesItsUnlabelledSlicesWithIt) {
  store_.put(kNodeA, nodePool(200));
  sync();
  const std::string name = poolSlices()[0].metadata.name;
  ASSERT_TRUE(api_.editResourceSlice(
                      name, [](ResourceSlice& s) { s.metadata.labels.erase(kManagedByLabel); })
                  .ok());
  ASSERT_TRUE(store_.remove(kNodeA));
  sync();
  EXPECT_TRUE(poolSlices().empty());
}

// With a cache of every slice (no label selector), a slice that claims a
// desired pool belongs to it: adopted if it has an index, deleted otherwise,
// and the pool's generation goes above the one it claimed.
TEST_F(ReconcilerTest, WithEverySliceCachedAForeignSliceClaimingThePoolIsReplaced) {
  cache_.labelled_only = false;
  ASSERT_TRUE(api_.addResourceSlice(handmadeSlice()).ok());
  store_.put(kNodeA, nodePool(2));
  sync();
  expectComplete(6, 1);
  EXPECT_FALSE(api_.resourceSlice("handmade-node-a").has_value());
  EXPECT_EQ(writeVerbs(), (std::vector<std::string>{"create", "delete"}));
}

// ... but a pool nobody desires owns only the slices labelled as ours (or
// known to be ours): someone else's slices of that driver and pool stay.
TEST_F(ReconcilerTest, WithEverySliceCachedWithdrawingDeletesOnlyOurSlices) {
  cache_.labelled_only = false;
  const PoolKey key{"gpu.example.com", "node-b"};
  ResourceSlice ours;
  ours.metadata.generate_name = sliceGenerateName(0, key);
  ours.metadata.labels[kManagedByLabel] = kManagedByValue;
  ours.spec.driver = key.driver;
  ours.spec.pool = {key.pool, 1, 1};
  ours.spec.node_name = "node-b";
  ASSERT_TRUE(api_.addResourceSlice(ours).ok());
  ResourceSlice theirs = ours;
  theirs.metadata.labels.clear();
  ASSERT_TRUE(api_.addResourceSlice(theirs).ok());
  ASSERT_EQ(poolSlices(key).size(), 2U);

  sync(key);  // no desired pool, adoption grace over: withdrawn
  const std::vector<ResourceSlice> left = poolSlices(key);
  ASSERT_EQ(left.size(), 1U);
  EXPECT_FALSE(left[0].metadata.labels.contains(kManagedByLabel));
}

// A dry run's answer is exactly what the reconcile then writes, step by
// step through a pool's life, and the preview itself writes nothing.
TEST_F(ReconcilerTest, PreviewNamesTheWritesTheReconcileThenMakes) {
  Pool changed = nodePool(300);
  changed.devices[200].edit(
      [&](client::Device& d_) { d_.attributes["model"].string_value = "H100"; });
  struct Step {
    std::string name;
    std::optional<Pool> desired;  // nullopt: withdrawn
    bool bumped;
    std::vector<std::string> changed_fields;  // of the updates, when there is one
  };
  const std::vector<Step> steps = {
      {"new pool of three slices", nodePool(300), true, {}},
      {"one device changed", changed, false, {"spec.devices[gpu-200].attributes.model.string"}},
      {"grown to four slices", nodePool(400), true, {}},
      {"shrunk to one slice", nodePool(10), true, {}},
      {"withdrawn", std::nullopt, false, {}},
  };
  for (const Step& step : steps) {
    SCOPED_TRACE(step.name);
    const std::vector<ResourceSlice> before = poolSlices();
    StatusOr<PoolPreview> preview =
        reconciler_->preview(kNodeA, step.desired ? &*step.desired : nullptr);
    ASSERT_TRUE(preview.ok()) << preview.status().toString();
    EXPECT_EQ(api_.countWrites(), 0U) << "the preview wrote";
    EXPECT_EQ(preview->withdraw, !step.desired);
    EXPECT_EQ(preview->generation_bumped, step.bumped);

    if (step.desired) {
      store_.put(kNodeA, *step.desired);
    } else {
      store_.remove(kNodeA);
    }
    sync();
    // What was written, by verb: the names of the slices updated and
    // deleted, and how many were created.
    std::multiset<std::string> done;
    std::multiset<std::string> planned;
    for (const auto& a : api_.actions()) {
      if (a.resource != "resourceslices" || a.verb == "get" || a.verb == "list") continue;
      done.insert(a.verb + " " + (a.verb == "create" ? "" : a.name));
    }
    for (const PlannedWrite& w : preview->writes) {
      const char* verb = w.verb == PlannedWrite::Verb::kCreate   ? "create"
                         : w.verb == PlannedWrite::Verb::kUpdate ? "update"
                                                                 : "delete";
      planned.insert(std::string(verb) + " " + w.slice);
      if (w.verb == PlannedWrite::Verb::kUpdate && !step.changed_fields.empty()) {
        EXPECT_EQ(w.changed_fields, step.changed_fields) << w.slice;
      }
    }
    EXPECT_EQ(planned, done);
    EXPECT_FALSE(done.empty());
    if (step.desired) {
      const std::vector<ResourceSlice> after = poolSlices();
      ASSERT_FALSE(after.empty());
      EXPECT_EQ(preview->generation, after.front().spec.pool.generation);
      EXPECT_EQ(preview->slice_count, static_cast<int64_t>(after.size()));
    }
    int64_t live_generation = 0;
    for (const ResourceSlice& s : before) {
      live_generation = std::max(live_generation, s.spec.pool.generation);
    }
    EXPECT_EQ(preview->live_generation, live_generation);
    api_.clearActions();
  }
}

// A generation bump rewrites slices whose devices stay: their update changes
// only the generation and the count.
TEST_F(ReconcilerTest, PreviewOfAGenerationOnlyUpdateNamesThePoolFields) {
  store_.put(kNodeA, nodePool(200));
  sync();
  expectComplete(1, 2);
  api_.clearActions();

  const Pool grown = nodePool(300);
  StatusOr<PoolPreview> preview = reconciler_->preview(kNodeA, &grown);
  ASSERT_TRUE(preview.ok()) << preview.status().toString();
  size_t generation_only = 0;
  for (const PlannedWrite& w : preview->writes) {
    if (w.verb != PlannedWrite::Verb::kUpdate) continue;
    if (w.changed_fields ==
        std::vector<std::string>{"spec.pool.generation", "spec.pool.resourceSliceCount"}) {
      ++generation_only;
    }
  }
  EXPECT_GE(generation_only, 1U);
  EXPECT_EQ(api_.countWrites(), 0U);
}

}  // namespace
}  // namespace rsc::controller::reconcile
