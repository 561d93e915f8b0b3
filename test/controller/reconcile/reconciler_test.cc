#include "controller/reconcile/reconciler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

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
  std::string lastForeignManager(const std::string& name) const override {
    auto it = managers.find(name);
    return it == managers.end() ? std::string() : it->second;
  }

  bool labelled_only = true;
  // What the controller's cache would have read from managedFields.
  std::map<std::string, std::string> managers;

 private:
  testing::FakeKubeApi& api_;
};

class CountingObserver : public ReconcilerObserver {
 public:
  // Called from the reconciler's write threads at once.
  void sliceWrite(const std::string& driver, WriteVerb verb, WriteOutcome outcome) override {
    std::lock_guard lock(mu);
    writes[driver + "/" + std::string(writeVerbName(verb)) + "/" +
           std::string(writeOutcomeName(outcome))]++;
  }
  void published(const std::string& /*driver*/, Clock::Duration latency) override {
    latencies.push_back(latency);
  }
  // Called on the reconciling thread.
  void foreignChangeReverted(const PoolKey& key, const client::ObjectReference& slice,
                             const std::string& changed_by) override {
    reverted.push_back(key.pool + " " + slice.kind + " " + slice.name + " by " + changed_by);
  }
  void publishFailed(const PoolKey& key, const client::ObjectReference& regarding,
                     const Status& error) override {
    failed.push_back(key.pool + " " + regarding.kind + " " + regarding.name + ": " +
                     error.message());
  }
  std::vector<std::string> reverted;
  std::vector<std::string> failed;
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

// nodePool(n) with one counter set, of which every device consumes half.
Pool nodePoolWithCounters(int n) {
  Pool pool = nodePool(n);
  addCounterSetConsumedByAll(pool, "gpu-0-counters");
  return pool;
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

// "gpu-<from>" up to "gpu-<to - 1>": the names nodePool() gives its devices.
std::vector<std::string> gpus(int from, int to) {
  std::vector<std::string> names;
  for (int i = from; i < to; ++i) names.push_back("gpu-" + std::to_string(i));
  return names;
}

// A slice a case expects the pool to have, at the index of its place in the
// case's list: the devices and counter sets of the pool's content it holds,
// by name, in order.
struct WantSlice {
  std::vector<std::string> devices{};
  std::vector<std::string> counter_sets{};
};

// The slices of nodePool(devices) as the automatic split makes them from
// nothing: full slices of 128 devices in order, then the rest.
std::vector<WantSlice> split(int devices) {
  std::vector<WantSlice> slices;
  for (int from = 0; from < devices; from += 128) {
    slices.push_back({gpus(from, std::min(from + 128, devices)), {}});
  }
  return slices;
}

class ReconcilerEnv;

// One reconcile of one pool, in the style of the DRA controller's tests: the
// objects the API server holds, what the controller published before, the
// input, and everything expected after the sync. Each case runs in a fresh
// ReconcilerEnv; run() also checks that a second sync writes nothing and
// that no reconcile asks to be queued again.
struct Case {
  std::string name{};
  PoolKey key = kNodeA;

  // Initial objects: the Nodes, and slices someone else made.
  std::vector<std::string> nodes = {"node-a", "node-b"};
  std::vector<ResourceSlice> slices{};
  // The controller's past: pools pushed for `key` and published, in turn.
  std::vector<Pool> published{};
  // Then, before the sync: a foreign change, or a server-side hook
  // (reactor) for the sync.
  std::function<void(ReconcilerEnv&)> then{};

  // Inputs.
  std::optional<Pool> push{};       // pushed for `key`; without it the pool stays as published
  bool withdraw = false;            // the pool withdrawn (remove) instead
  bool every_slice_cached = false;  // a slice cache without the label selector
  std::function<void(ReconcilerOptions&)> options{};

  // Expected.
  StatusCode want_code = StatusCode::kOk;
  std::string want_error{};  // in the pool's last error
  // The pool's managed slices, by index; their generation and count.
  std::vector<WantSlice> want_slices{};
  int64_t want_generation = 1;
  // Where want_slices find their devices and selection: by default the pool
  // pushed (or last published); what the server stored, when it differs.
  std::optional<Pool> want_content{};
  // The pool's other slices (someone else's), as given.
  std::vector<ResourceSlice> want_foreign{};
  // The slice writes of the sync, in order. The writes of one step run
  // concurrently; in these cases a step's writes share their verb, so the
  // order is fixed.
  std::vector<std::string> want_writes{};
  // slice_writes_total by "verb/result"; empty: one success per want_writes.
  std::map<std::string, int> want_metrics{};
  // Foreign changes reported as reverted: the index of the slice, the editor.
  std::vector<std::pair<size_t, std::string>> want_reverted{};
  // The pool status's dropped fields.
  std::vector<std::string> want_dropped{};
};

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

// A fake API server, a desired store, a cache over the fake and a
// reconciler: what one test or one case runs against.
class ReconcilerEnv {
 public:
  explicit ReconcilerEnv(const std::vector<std::string>& nodes = {"node-a", "node-b"}) {
    for (const std::string& node : nodes) api_.addNode(node);
    ReconcilerOptions o = options(store_);
    o.observer = &observer_;
    reconciler_ = std::move(*Reconciler::create(o));
  }

  // Runs one case in this environment.
  void run(const Case& c);

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

  // Applies `edit` to node-a's slice number `i` (by name) as someone else
  // would; returns its name.
  std::string editSlice(size_t i, const std::function<void(ResourceSlice&)>& edit) {
    const std::string name = poolSlices().at(i).metadata.name;
    EXPECT_TRUE(api_.editResourceSlice(name, edit).ok()) << name;
    return name;
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

  // The environment's API, clock and cache, with `store`.
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

 private:
  // The slice `want` of case `c` as the reconciler should have written it.
  ResourceSlice wantSlice(const Case& c, const Pool& content, size_t index);
  // The case's expected slices and the live ones, without what the server
  // assigns (names it generated, uid, resourceVersion, timestamps), as
  // indented JSON in name order: a mismatch prints as a diff.
  std::string wantedSlices(const Case& c, const Pool* content);
  std::string liveSlices(const PoolKey& key);

  // The delete requests of run()'s sync, with their preconditions.
  std::mutex deletes_mu_;
  std::vector<testing::FakeKubeApi::Request> deletes_;
};

ResourceSlice ReconcilerEnv::wantSlice(const Case& c, const Pool& content, size_t index) {
  std::map<std::string, client::DeviceRef> devices;
  std::map<std::string, client::CounterSet> counter_sets;
  auto collect = [&](const std::vector<client::DeviceRef>& d,
                     const std::vector<client::CounterSet>& s) {
    for (const client::DeviceRef& ref : d) devices[ref->name()] = ref;
    for (const client::CounterSet& set : s) counter_sets[set.name] = set;
  };
  collect(content.devices, content.shared_counters);
  for (const DesiredSlice& s : content.slices.value_or(std::vector<DesiredSlice>{})) {
    collect(s.devices, s.shared_counters);
  }

  const WantSlice& want = c.want_slices.at(index);
  ResourceSlice s;
  s.metadata.generate_name = sliceGenerateName(static_cast<int64_t>(index), c.key);
  s.metadata.labels[kManagedByLabel] = kManagedByValue;
  s.spec.driver = c.key.driver;
  s.spec.pool = {c.key.pool, c.want_generation, static_cast<int64_t>(c.want_slices.size())};
  const NodeSelection& where = content.selection;
  if (where.node_name) {
    s.spec.node_name = where.node_name;
    client::OwnerReference node;
    node.api_version = "v1";
    node.kind = "Node";
    node.name = *where.node_name;
    node.uid = api_.getNode(*where.node_name)->metadata.uid;
    node.controller = true;
    s.metadata.owner_references = {node};
  }
  s.spec.node_selector = where.node_selector;
  if (where.all_nodes) s.spec.all_nodes = true;
  if (where.per_device_node_selection) s.spec.per_device_node_selection = true;
  for (const std::string& name : want.devices) {
    EXPECT_TRUE(devices.contains(name)) << "the case's content has no device " << name;
    s.spec.devices.push_back(devices[name]);
  }
  for (const std::string& name : want.counter_sets) {
    EXPECT_TRUE(counter_sets.contains(name)) << "the case's content has no counter set " << name;
    s.spec.shared_counters.push_back(counter_sets[name]);
  }
  return s;
}

// JSON of `slices` without what the server assigns, sorted, one field a line.
std::string serverFieldsCleared(std::vector<ResourceSlice> slices) {
  std::vector<client::Json> out;
  for (ResourceSlice& s : slices) {
    if (!s.metadata.generate_name.empty()) s.metadata.name.clear();
    s.metadata.uid.clear();
    s.metadata.resource_version.clear();
    s.metadata.creation_timestamp.clear();
    s.metadata.generation = 0;
    out.push_back(client::toJson(s));
  }
  std::sort(out.begin(), out.end(), [](const client::Json& a, const client::Json& b) {
    return a["metadata"].dump() < b["metadata"].dump();
  });
  return client::Json(out).dump(1);
}

std::string ReconcilerEnv::wantedSlices(const Case& c, const Pool* content) {
  std::vector<ResourceSlice> want = c.want_foreign;
  for (size_t i = 0; i < c.want_slices.size(); ++i) {
    if (content == nullptr) {
      ADD_FAILURE() << "slices wanted of a pool without content";
      break;
    }
    want.push_back(wantSlice(c, *content, i));
  }
  return serverFieldsCleared(std::move(want));
}

std::string ReconcilerEnv::liveSlices(const PoolKey& key) {
  std::vector<ResourceSlice> live = poolSlices(key);
  for (const ResourceSlice& s : live) {
    if (s.metadata.generate_name.empty()) continue;
    EXPECT_EQ(s.metadata.name.substr(0, s.metadata.generate_name.size()), s.metadata.generate_name);
  }
  return serverFieldsCleared(std::move(live));
}

void ReconcilerEnv::run(const Case& c) {
  // The initial objects and the controller's past.
  cache_.labelled_only = !c.every_slice_cached;
  if (c.options) {
    ReconcilerOptions o = options(store_);
    o.observer = &observer_;
    c.options(o);
    auto made = Reconciler::create(o);
    ASSERT_TRUE(made.ok()) << made.status().toString();
    reconciler_ = std::move(*made);
  }
  for (const ResourceSlice& s : c.slices) ASSERT_TRUE(api_.addResourceSlice(s).ok());
  uint64_t version = 0;
  for (const Pool& p : c.published) {
    version = store_.put(c.key, p);
    ASSERT_NO_FATAL_FAILURE(sync(c.key));
  }
  if (c.then) c.then(*this);

  // The input.
  if (c.push) version = store_.put(c.key, *c.push);
  if (c.withdraw) {
    ASSERT_TRUE(store_.remove(c.key));
    EXPECT_EQ(store_.status(c.key)->phase, PoolPhase::kWithdrawing);
  }
  const std::shared_ptr<const DesiredPool> desired = store_.get(c.key);
  std::map<std::string, ResourceSlice> before;
  for (ResourceSlice& s : poolSlices(c.key)) before[s.metadata.name] = std::move(s);
  api_.prependReactor("delete", "resourceslices", [this](testing::FakeKubeApi::Request& r) {
    std::lock_guard lock(deletes_mu_);
    deletes_.push_back(r);
    return okStatus();
  });
  api_.clearActions();
  observer_.writes.clear();
  observer_.latencies.clear();
  observer_.failed.clear();

  // The sync.
  const ReconcileResult r = reconciler_->reconcile(c.key);
  EXPECT_EQ(r.status.code(), c.want_code) << r.status.toString();
  EXPECT_FALSE(r.requeue_after.has_value()) << "queued again";

  // The slices as objects, and the writes that made them.
  const Pool* content = c.want_content       ? &*c.want_content
                        : desired != nullptr ? &desired->pool
                                             : nullptr;
  EXPECT_EQ(liveSlices(c.key), wantedSlices(c, content));
  EXPECT_EQ(writeVerbs(), c.want_writes);
  {
    std::lock_guard lock(deletes_mu_);
    EXPECT_EQ(deletes_.size(), std::count(c.want_writes.begin(), c.want_writes.end(), "delete"));
    for (const testing::FakeKubeApi::Request& d : deletes_) {
      // Each delete names the uid and resourceVersion of the slice it
      // decided on, so that one changed or re-created meanwhile stays.
      ASSERT_TRUE(before.contains(d.name)) << d.name;
      EXPECT_EQ(d.preconditions.uid, before.at(d.name).metadata.uid) << d.name;
      EXPECT_EQ(d.preconditions.resource_version, before.at(d.name).metadata.resource_version)
          << d.name;
    }
  }

  // Metrics and events.
  std::map<std::string, int> want_metrics;
  for (const auto& [verb_result, n] : c.want_metrics) {
    want_metrics[c.key.driver + "/" + verb_result] = n;
  }
  if (c.want_metrics.empty()) {
    for (const std::string& verb : c.want_writes)
      want_metrics[c.key.driver + "/" + verb + "/success"]++;
  }
  {
    std::lock_guard lock(observer_.mu);
    EXPECT_EQ(observer_.writes, want_metrics);
  }
  const bool ok = c.want_code == StatusCode::kOk;
  EXPECT_EQ(observer_.latencies.size(), c.push && ok ? 1U : 0U) << "publish latencies";
  EXPECT_EQ(observer_.failed.size(), ok ? 0U : 1U);
  std::vector<std::string> want_reverted;
  const std::vector<ResourceSlice> after = poolSlices(c.key);
  for (const auto& [index, editor] : c.want_reverted) {
    want_reverted.push_back(c.key.pool + " ResourceSlice " + after.at(index).metadata.name +
                            " by " + editor);
  }
  EXPECT_EQ(observer_.reverted, want_reverted);

  // The pool's status.
  const std::optional<PoolStatus> status = store_.status(c.key);
  if (desired == nullptr) {
    EXPECT_FALSE(status.has_value()) << "a withdrawn pool keeps a status";
  } else if (!status) {
    ADD_FAILURE() << "no status";
  } else if (ok) {
    EXPECT_EQ(status->phase, PoolPhase::kPublished);
    EXPECT_TRUE(status->last_error.ok()) << status->last_error.toString();
    EXPECT_EQ(status->published_version, version);
    EXPECT_EQ(status->published_generation, c.want_generation);
    std::vector<std::string> ours;
    for (const ResourceSlice& s : after) {
      if (s.metadata.labels.contains(kManagedByLabel)) ours.push_back(s.metadata.name);
    }
    EXPECT_EQ(status->slice_names, ours);
    // In the order the pool's concurrent writes were answered.
    std::vector<std::string> dropped = status->dropped_fields;
    std::sort(dropped.begin(), dropped.end());
    std::vector<std::string> want_dropped = c.want_dropped;
    std::sort(want_dropped.begin(), want_dropped.end());
    EXPECT_EQ(dropped, want_dropped);
  } else {
    EXPECT_EQ(status->phase, PoolPhase::kFailed);
    EXPECT_EQ(status->last_error.code(), c.want_code);
    EXPECT_NE(status->last_error.message().find(c.want_error), std::string::npos)
        << status->last_error.toString();
  }

  // A second sync writes nothing and the queue stays idle.
  const size_t writes = api_.countWrites();
  const ReconcileResult again = reconciler_->reconcile(c.key);
  EXPECT_EQ(again.status.code(), c.want_code) << again.status.toString();
  EXPECT_FALSE(again.requeue_after.has_value()) << "queued again";
  EXPECT_EQ(api_.countWrites(), writes) << "a second sync wrote";
}

// Runs each case in a fresh environment.
void runAll(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ReconcilerEnv env(c.nodes);
    env.run(c);
  }
}

class ReconcilerTest : public ::testing::Test, public ReconcilerEnv {};

// nodePool(n) with device `i`'s model changed to H100.
Pool withH100(int n, size_t i) {
  Pool p = nodePool(n);
  p.devices[i].edit([](client::Device& d) { d.attributes["model"].string_value = "H100"; });
  return p;
}

Pool withGeneration(Pool p, int64_t generation) {
  p.generation = generation;
  return p;
}

// ---- Publishing a pool --------------------------------------------------------

TEST(ReconcilerTable, PublishesPools) {
  client::NodeSelector fabric;
  fabric.value = client::Json::parse(
      R"({"nodeSelectorTerms":[{"matchExpressions":[{"key":"fabric","operator":"In","values":["1"]}]}]})");
  Pool network;
  network.selection.node_selector = fabric;
  std::vector<std::string> nics;
  for (int i = 0; i < 40; ++i) {
    network.devices.push_back(gpu("nic-" + std::to_string(i)));
    nics.push_back("nic-" + std::to_string(i));
  }
  Pool everywhere;
  everywhere.selection.all_nodes = true;
  everywhere.devices.push_back(gpu("link-0"));
  Pool explicit_slices;
  explicit_slices.selection.node_name = "node-a";
  explicit_slices.slices =
      std::vector<DesiredSlice>{{{gpu("a-0"), gpu("a-1")}, {}, {}}, {{gpu("b-0")}, {}, {}}};

  runAll({
      {
          .name = "a new node-local pool: one create, owned by its Node",
          .push = nodePool(3),
          .want_slices = {{gpus(0, 3)}},
          .want_writes = {"create"},
      },
      {
          .name = "a pool with a node selector has no node and no owner",
          .key = {"nic.example.com", "fabric-1"},
          .push = network,
          .want_slices = {{nics}},
          .want_writes = {"create"},
      },
      {
          .name = "an all-nodes pool has no node and no owner",
          .key = {"fabric.example.com", "global"},
          .push = everywhere,
          .want_slices = {{{"link-0"}}},
          .want_writes = {"create"},
      },
      {
          .name = "explicit slices are published as given",
          .push = explicit_slices,
          .want_slices = {{{"a-0", "a-1"}}, {{"b-0"}}},
          .want_writes = {"create", "create"},
      },
      {
          .name = "shared counters get a slice of their own",
          .push = nodePoolWithCounters(2),
          .want_slices = {{{}, {"gpu-0-counters"}}, {gpus(0, 2)}},
          .want_writes = {"create", "create"},
      },
      {
          // Kubernetes 1.34 with DRAPartitionableDevices on refuses a device
          // that consumes a counter set of another slice; for it the counter
          // set shares the slice of its consumers.
          .name = "on Kubernetes 1.34 counter sets share their consumers' slice",
          .then =
              [](ReconcilerEnv& env) {
                env.api_.prependReactor(
                    "create", "resourceslices", [](testing::FakeKubeApi::Request& req) {
                      if (!req.slice) return okStatus();
                      std::set<std::string> here;
                      for (const client::CounterSet& c : req.slice->spec.shared_counters) {
                        here.insert(c.name);
                      }
                      for (const client::DeviceRef& d : req.slice->spec.devices) {
                        for (const auto& c : d.device().consumes_counters) {
                          if (!here.contains(c.counter_set)) {
                            return invalidArgument(
                                "must reference a counterSet defined in the ResourceSlice");
                          }
                        }
                      }
                      return okStatus();
                    });
              },
          .push = nodePoolWithCounters(2),
          .options = [](ReconcilerOptions& o) { o.counter_placement = counterPlacementFor(1, 34); },
          .want_slices = {{gpus(0, 2), {"gpu-0-counters"}}},
          .want_writes = {"create"},
      },
      {
          .name = "a missing Node fails the pool and writes nothing",
          .push = nodePool(1, "node-z"),
          .want_code = StatusCode::kNotFound,
          .want_error = "node-z",
      },
      {
          .name = "a requested generation is used",
          .push = withGeneration(nodePool(2), 7),
          .want_slices = split(2),
          .want_generation = 7,
          .want_writes = {"create"},
      },
  });
}

// ---- Changing a published pool ------------------------------------------------

TEST(ReconcilerTable, ChangesPublishedPools) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  runAll({
      {
          .name = "one device changed: one update, no bump",
          .published = {nodePool(300)},
          .push = withH100(300, 200),
          .want_slices = split(300),
          .want_writes = {"update"},
      },
      {
          .name = "a device added to a slice with room: one update, no bump",
          .published = {nodePool(130)},
          .push = nodePool(131),
          .want_slices = split(131),
          .want_writes = {"update"},
      },
      {
          .name = "grown beyond a slice: a bump rewrites every slice",
          .published = {nodePool(128)},
          .push = nodePool(129),
          .want_slices = split(129),
          .want_generation = 2,
          .want_writes = {"create", "update"},
      },
      {
          .name = "grown by two slices: new slices first, then the others",
          .published = {nodePool(128)},
          .push = nodePool(300),
          .want_slices = split(300),
          .want_generation = 2,
          .want_writes = {"create", "create", "update"},
      },
      {
          // Until every slice of the new generation is written, the
          // published generation stays whole (and usable if the server
          // refuses one of the new slices).
          .name = "shrunk: a bump, obsolete slices deleted last",
          .published = {nodePool(300)},
          .push = nodePool(100),
          .want_slices = split(100),
          .want_generation = 2,
          .want_writes = {"update", "delete", "delete"},
      },
      {
          .name = "moved to another Node: its slices are replaced",
          .published = {nodePool(2, "node-a")},
          .push = nodePool(2, "node-b"),
          .want_slices = split(2),
          .want_generation = 2,
          .want_writes = {"create", "delete"},
      },
      {
          .name = "withdrawn: its slices are deleted and its status goes",
          .published = {nodePool(200)},
          .withdraw = true,
          .want_writes = {"delete", "delete"},
      },
      {
          .name = "a higher requested generation is honoured",
          .published = {withGeneration(nodePool(2), 7)},
          .push = withGeneration(nodePool(2), 9),
          .want_slices = split(2),
          .want_generation = 9,
          .want_writes = {"update"},
      },
      {
          // The increment used to overflow: published at generation 1,
          // below the old slices.
          .name = "at the largest generation, a bump keeps it",
          .published = {withGeneration(nodePool(128), kMax)},
          .push = nodePool(129),
          .want_slices = split(129),
          .want_generation = kMax,
          .want_writes = {"create", "update"},
      },
      {
          .name = "at the largest generation, shrinking keeps it",
          .published = {withGeneration(nodePool(128), kMax), nodePool(129)},
          .push = nodePool(5),
          .want_slices = split(5),
          .want_generation = kMax,
          .want_writes = {"update", "delete"},
      },
      {
          .name = "a driver's own change is no foreign change",
          .published = {nodePool(200)},
          .push = withH100(200, 3),
          .want_slices = split(200),
          .want_writes = {"update"},
      },
  });
}

// ---- Answers of the API server --------------------------------------------------

TEST(ReconcilerTable, AdoptsWhatTheServerStores) {
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
  Pool tainted = nodePool(2);
  client::DeviceTaint taint;
  taint.key = "example.com/maintenance";
  taint.effect = "NoSchedule";
  tainted.devices[0].edit([&](client::Device& d_) { d_.taints.push_back(taint); });
  tainted.devices[1].edit(
      [&](client::Device& d_) { d_.binding_conditions = {"example.com/attached"}; });
  tainted.devices[1].edit(
      [&](client::Device& d_) { d_.binding_failure_conditions = {"example.com/failed"}; });
  // What the server stores: the taint with its default time.
  Pool stored = nodePool(2);
  taint.time_added = "2026-01-01T00:00:00Z";
  stored.devices[0].edit([&](client::Device& d_) { d_.taints.push_back(taint); });

  runAll({
      {
          .name = "server defaults and dropped fields cause no update loop",
          .then =
              [&](ReconcilerEnv& env) {
                env.api_.prependReactor("create", "resourceslices", serverSide);
                env.api_.prependReactor("update", "resourceslices", serverSide);
              },
          .push = tainted,
          .want_slices = split(2),
          .want_content = stored,
          .want_writes = {"create"},
          .want_dropped = {"spec.devices[1].bindingConditions",
                           "spec.devices[1].bindingFailureConditions"},
      },
      {
          .name = "a conflicting update is read again and retried",
          .published = {nodePool(3)},
          .then =
              [](ReconcilerEnv& env) {
                auto conflicts = std::make_shared<int>(1);
                env.api_.prependReactor("update", "resourceslices",
                                        [conflicts](testing::FakeKubeApi::Request&) {
                                          if ((*conflicts)-- > 0) {
                                            return conflict("the object has been modified");
                                          }
                                          return okStatus();
                                        });
              },
          .push = withH100(3, 0),
          .want_slices = split(3),
          .want_writes = {"update", "update"},
          .want_metrics = {{"update/conflict", 1}, {"update/success", 1}},
      },
  });
}

// ---- Foreign changes to a published pool ------------------------------------------

TEST(ReconcilerTable, RepairsForeignChanges) {
  const auto unlabel = [](ResourceSlice& s) { s.metadata.labels.erase(kManagedByLabel); };
  runAll({
      {
          .name = "a manual edit is undone without a bump and reported once with its editor",
          .published = {nodePool(3)},
          .then =
              [](ReconcilerEnv& env) {
                const std::string name = env.editSlice(0, [](ResourceSlice& s) {
                  s.spec.devices[0].edit([&](client::Device& d_) {
                    d_.attributes["model"].string_value = "tampered";
                  });
                });
                env.cache_.managers[name] = "kubectl-edit";
              },
          .want_slices = split(3),
          .want_writes = {"update"},
          .want_reverted = {{0, "kubectl-edit"}},
      },
      {
          .name = "a slice deleted by someone else is recreated",
          .published = {nodePool(200)},
          .then =
              [](ReconcilerEnv& env) {
                ASSERT_TRUE(env.api_.removeResourceSlice(env.poolSlices()[1].metadata.name).ok());
              },
          .want_slices = split(200),
          .want_generation = 2,
          .want_writes = {"create", "update"},
      },
      {
          // Without managedFields naming anyone, the editor is unknown.
          .name = "a generation lowered by someone else goes above the published one",
          .published = {withGeneration(nodePool(3), 5)},
          .then =
              [](ReconcilerEnv& env) {
                env.editSlice(0, [](ResourceSlice& s) { s.spec.pool.generation = 1; });
              },
          .want_slices = split(3),
          .want_generation = 6,
          .want_writes = {"update"},
          .want_reverted = {{0, ""}},
      },
      {
          // It makes the pool look incomplete to the scheduler.
          .name = "a foreign resourceSliceCount is repaired at a new generation",
          .published = {nodePool(200)},
          .then =
              [](ReconcilerEnv& env) {
                env.editSlice(0, [](ResourceSlice& s) { s.spec.pool.resource_slice_count = 3; });
              },
          .want_slices = split(200),
          .want_generation = 2,
          .want_writes = {"update", "update"},
          .want_reverted = {{0, ""}},
      },
      {
          // `kubectl label resourceslice <slice> app.kubernetes.io/managed-by-`:
          // the slice leaves the label-selected cache. It used to be replaced
          // by a new slice at the same generation (2 slices at generation 1,
          // count 1, forever).
          .name = "a slice that lost its label is relabelled, not duplicated",
          .published = {nodePool(200)},
          .then = [&](ReconcilerEnv& env) { env.editSlice(1, unlabel); },
          .want_slices = split(200),
          .want_writes = {"update"},
          .want_reverted = {{1, ""}},
      },
      {
          .name = "a slice with a foreign manager label is taken back",
          .published = {nodePool(3)},
          .then =
              [](ReconcilerEnv& env) {
                env.editSlice(0, [](ResourceSlice& s) {
                  s.metadata.labels[kManagedByLabel] = "someone-else";
                });
              },
          .want_slices = split(3),
          .want_writes = {"update"},
          .want_reverted = {{0, ""}},
      },
      {
          .name = "a withdrawn pool takes its unlabelled slices with it",
          .published = {nodePool(200)},
          .then = [&](ReconcilerEnv& env) { env.editSlice(0, unlabel); },
          .withdraw = true,
          .want_writes = {"delete", "delete"},
      },
  });
}

// ---- Slices of the pool that someone else made ---------------------------------------

TEST(ReconcilerTable, LeavesOrReplacesForeignSlices) {
  const PoolKey node_b{"gpu.example.com", "node-b"};
  ResourceSlice ours;
  ours.metadata.generate_name = sliceGenerateName(0, node_b);
  ours.metadata.labels[kManagedByLabel] = kManagedByValue;
  ours.spec.driver = node_b.driver;
  ours.spec.pool = {node_b.pool, 1, 1};
  ours.spec.node_name = "node-b";
  ResourceSlice theirs = ours;
  theirs.metadata.labels.clear();

  runAll({
      {
          // With the label-selected cache, such a slice is invisible.
          .name = "a foreign unmanaged slice of the same driver is left alone",
          .slices = {handmadeSlice()},
          .push = nodePool(2),
          .want_slices = split(2),
          .want_foreign = {handmadeSlice()},
          .want_writes = {"create"},
      },
      {
          // With a cache of every slice (no label selector), a slice that
          // claims a desired pool belongs to it: adopted if it has an index,
          // deleted otherwise, and the pool's generation goes above the one
          // it claimed.
          .name = "every slice cached: a foreign slice claiming the pool is replaced",
          .slices = {handmadeSlice()},
          .push = nodePool(2),
          .every_slice_cached = true,
          .want_slices = split(2),
          .want_generation = 6,
          .want_writes = {"create", "delete"},
      },
      {
          // ... but a pool nobody desires owns only the slices labelled as
          // ours (or known to be ours): someone else's slices of that driver
          // and pool stay. No desired pool, adoption grace over: withdrawn.
          .name = "every slice cached: withdrawing deletes only our slices",
          .key = node_b,
          .slices = {ours, theirs},
          .every_slice_cached = true,
          .want_foreign = {theirs},
          .want_writes = {"delete"},
      },
  });
}

// ---- Cases with more to check than the table holds ----------------------------------

// A bump writes its slices together (bounded by max_parallel_writes), so
// that the scheduler sees the new generation incomplete for about one round
// trip rather than one per slice.
TEST_F(ReconcilerTest, TheSlicesOfABumpAreWrittenConcurrently) {
  std::vector<std::string> fifteen_creates(15, "create");
  fifteen_creates.emplace_back("update");
  run({
      .name = "grown from one slice to sixteen",
      .published = {nodePool(128)},
      // The first writes wait until eight are under way: only writes that
      // run together get past, and the bound is reached.
      .then = [](ReconcilerEnv& env) { env.api_.holdWritesUntilConcurrent(8); },
      .push = nodePool(128 * 16),
      .want_slices = split(128 * 16),
      .want_generation = 2,
      .want_writes = fifteen_creates,
  });
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
  const Pool pool = nodePoolWithCounters(2);
  run({
      .name = "published where the server drops counter sets",
      .then =
          [&](ReconcilerEnv& env) {
            env.api_.prependReactor("create", "resourceslices", dropCounters);
            env.api_.prependReactor("update", "resourceslices", dropCounters);
          },
      .push = pool,
      // The slice of counter sets is stored empty.
      .want_slices = {{}, {gpus(0, 2)}},
      .want_content = nodePool(2),
      .want_writes = {"create", "create"},
      .want_dropped = {"spec.sharedCounters", "spec.devices[0].consumesCounters",
                       "spec.devices[1].consumesCounters"},
  });

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

// A pool whose writes fail, for a while or for its content, is Failed; the
// failure is reported about the pool's Node (it has no slice yet), and
// another pool is published all the same.
TEST(ReconcilerFailures, OneFailingPoolDoesNotStopAnother) {
  struct Failure {
    std::string name;
    Status error;  // of every create of node-a's slices
  };
  const std::vector<Failure> failures = {
      {"unavailable", unavailable("injected")},
      {"refused", Status(StatusCode::kUnprocessable, "spec.devices[0].name: Invalid value",
                         {{"spec.devices[0].name", "Invalid value"}}, "Invalid")},
  };
  const PoolKey other{"gpu.example.com", "node-b"};
  for (const Failure& f : failures) {
    SCOPED_TRACE(f.name);
    ReconcilerEnv env;
    env.api_.prependReactor("create", "resourceslices", [&f](testing::FakeKubeApi::Request& req) {
      if (req.slice && req.slice->spec.pool.name == "node-a") return f.error;
      return okStatus();
    });
    env.store_.put(kNodeA, nodePool(1));
    env.store_.put(other, nodePool(1, "node-b"));
    EXPECT_EQ(env.reconciler_->reconcile(kNodeA).status.code(), f.error.code());
    env.sync(other);
    EXPECT_EQ(env.store_.status(kNodeA)->phase, PoolPhase::kFailed);
    EXPECT_EQ(env.store_.status(kNodeA)->last_error.reason(), f.error.reason());
    EXPECT_EQ(env.store_.status(other)->phase, PoolPhase::kPublished);
    ASSERT_EQ(env.observer_.failed.size(), 1U);
    EXPECT_EQ(env.observer_.failed[0], "node-a Node node-a: " + f.error.message());
  }
}

TEST(PoolReference, FirstLiveSliceByNameElseTheNodeElseNothing) {
  auto slice = [](const std::string& name) {
    auto s = std::make_shared<ResourceSlice>();
    s->metadata.name = name;
    s->metadata.uid = "uid-" + name;
    return SlicePtr(s);
  };
  const client::ObjectReference first = poolReference({slice("b"), slice("a")}, "node-a");
  EXPECT_EQ(first,
            (client::ObjectReference{"resource.k8s.io/v1", "ResourceSlice", "", "a", "uid-a"}));
  EXPECT_EQ(poolReference({}, "node-a"), (client::ObjectReference{"v1", "Node", "", "node-a", ""}));
  EXPECT_TRUE(poolReference({}, std::nullopt).kind.empty());
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
