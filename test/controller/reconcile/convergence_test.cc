// Property test of the whole reconcile loop (DESIGN.md section 9): random
// sequences of pushes, withdrawals, driver replacements, lease expiries,
// foreign edits of managed slices, injected API faults (409, 429/500, writes
// whose response is lost) and watch failures (resets, 410 + compaction),
// interleaved with partial processing of the work queue, always converge to
// the plan with every pool complete once the faults stop and the queue runs
// dry; a further resync then writes nothing.
//
// Scenarios are seeded: a failure prints the seed and the operation log.
// RSC_CONVERGENCE_SCENARIOS=N runs N scenarios (default 200, 25 under
// sanitizers);
// RSC_CONVERGENCE_SEED=S starts from seed S (default 1), so
// `RSC_CONVERGENCE_SEED=S RSC_CONVERGENCE_SCENARIOS=1` replays one of them;
// RSC_CONVERGENCE_MAX_FAILURES=N reports up to N failing scenarios (default
// 3); RSC_CONVERGENCE_VERBOSE=1 prints the report of passing ones too.
// The informer runs on its own thread, as in production, and every step
// waits until it has seen every write and is blocked (watching, or asleep in
// a backoff that the step then ends by moving the fake clock), so a seed
// replays the same operations. Their effects may still differ slightly from
// run to run: the informer's backoff jitter is not seeded (it decides how far
// the clock moves), and the watch event of our own write may beat the
// reconciler's note of it, which costs an extra reconcile. The property must
// hold either way.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "client/resource_slice.h"
#include "common/log.h"
#include "controller/reconcile/controller.h"
#include "controller/reconcile/planner.h"
#include "test/fakes/fake_clock.h"
#include "test/fakes/fake_kube_api.h"

namespace rsc::controller::reconcile {
namespace {

using client::Device;
using client::ResourceSlice;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::FakeKubeApi;

constexpr std::array<const char*, 3> kDrivers = {"gpu.example.com", "nic.example.com",
                                                 "fpga.example.com"};
constexpr std::array<const char*, 3> kNodes = {"node-a", "node-b", "node-c"};
// Pool names are shared by the drivers; "fabric/2" checks the '/' in names.
constexpr std::array<const char*, 6> kPoolNames = {"node-a",   "node-b",   "node-c",
                                                   "fabric-1", "fabric/2", "cluster"};
constexpr char kTaintKey[] = "example.com/unhealthy";

// Scenarios run by default. Sanitizer builds (CI runs every unit test under
// ASan+UBSan in a debug build) are some twenty times slower, so they run
// fewer by default to stay well inside the test timeout.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr uint64_t kDefaultScenarios = 25;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr uint64_t kDefaultScenarios = 25;
#else
constexpr uint64_t kDefaultScenarios = 200;
#endif
#else
constexpr uint64_t kDefaultScenarios = 200;
#endif

// Bounds that keep a broken controller from hanging the test.
constexpr int kMaxDrainSteps = 5000;
// Wake-ups of the informer (a backoff sleeps in 500 ms slices) and bookmarks
// in one settle().
constexpr int kMaxSettleSteps = 20000;

uint64_t envOr(const char* name, uint64_t fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  return std::strtoull(value, nullptr, 10);
}

// The log of the code under test, kept per scenario and shown on failure.
std::ostringstream& logStream() {
  static std::ostringstream stream;
  return stream;
}

class Random {
 public:
  explicit Random(uint64_t seed) : gen_(seed) {}
  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen_); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(gen_) < p; }
  template <typename C>
  const auto& pick(const C& c) {
    return c[static_cast<size_t>(uniform(0, static_cast<int>(c.size()) - 1))];
  }

 private:
  std::mt19937 gen_;
};

client::Quantity quantity(const std::string& text) { return *client::Quantity::parse(text); }

bool isManaged(const ResourceSlice& s) {
  auto it = s.metadata.labels.find(kManagedByLabel);
  return it != s.metadata.labels.end() && it->second == kManagedByValue;
}

// Live equals desired, except a taint's timeAdded that desired leaves to the
// server's default.
bool sameDevice(const Device& want, Device live) {
  for (size_t i = 0; i < live.taints.size() && i < want.taints.size(); ++i) {
    if (!want.taints[i].time_added) live.taints[i].time_added.reset();
  }
  return want == live;
}

bool sameDevices(const std::vector<client::DeviceRef>& want,
                 const std::vector<client::DeviceRef>& live) {
  if (want.size() != live.size()) return false;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] != live[i] && !sameDevice(want[i].device(), live[i].device())) return false;
  }
  return true;
}

std::string describe(const Pool& p) {
  std::ostringstream out;
  const NodeSelection& sel = p.selection;
  if (sel.node_name) out << "node=" << *sel.node_name;
  if (sel.node_selector) out << "selector";
  if (sel.all_nodes) out << "allNodes";
  if (sel.per_device_node_selection) out << "perDevice";
  if (p.slices) {
    out << " slices=[";
    for (const DesiredSlice& s : *p.slices) {
      out << s.devices.size() << (s.shared_counters.empty() ? "" : "+c") << ' ';
    }
    out << ']';
  } else {
    size_t tainted = 0;
    for (const Device& d : client::decodeAll(p.devices)) tainted += d.usesAdvancedFeatures();
    out << " devices=" << p.devices.size() << " advanced=" << tainted
        << " counterSets=" << p.shared_counters.size();
  }
  if (p.generation > 0) out << " generation=" << p.generation;
  if (p.lease.count() > 0) out << " lease=" << p.lease.count() << "s";
  return out.str();
}

// Counter sets of a pool: up to two counter slices' worth.
constexpr int kMaxPoolCounterSets = 2 * static_cast<int>(kMaxCounterSetsPerSlice) - 4;

struct ScenarioOptions {
  // Slices an earlier controller left behind exist before the start.
  bool leftovers = true;
};

// Builds random pools: fresh ones of 0..400 devices (1..4 slices, more with
// taints or counters), and changes of a previous push.
class PoolGenerator {
 public:
  explicit PoolGenerator(Random& rng) : rng_(rng) {}

  Pool fresh(const std::string& pool_name) {
    Pool p;
    randomSelection(p, pool_name);
    if (rng_.chance(0.1)) {
      p.slices.emplace();
      const int n = rng_.uniform(1, 3);
      for (int i = 0; i < n; ++i) {
        DesiredSlice s;
        if (i == 0 && rng_.chance(0.3)) {
          s.shared_counters = counterSets(rng_.uniform(1, 4));
        } else {
          const int devices = rng_.uniform(0, 60);
          for (int j = 0; j < devices; ++j) s.devices.push_back(device(rng_.chance(0.2)));
        }
        p.slices->push_back(std::move(s));
      }
    } else {
      const int bucket = rng_.uniform(0, 19);
      const int count = bucket == 0   ? 0
                        : bucket < 6  ? rng_.uniform(1, 10)
                        : bucket < 11 ? rng_.uniform(11, 128)
                                      : rng_.uniform(129, 400);
      const double taints = rng_.chance(0.25) ? 0.1 : 0.0;
      for (int i = 0; i < count; ++i) p.devices.push_back(device(rng_.chance(taints)));
      if (rng_.chance(0.2)) {
        p.shared_counters = counterSets(rng_.uniform(1, kMaxPoolCounterSets));
        client::editDevices(p.devices, [&](Device& d) {
          if (rng_.chance(0.1)) consume(d, p.shared_counters);
        });
      }
    }
    if (rng_.chance(0.1)) p.generation = rng_.uniform(1, 20);
    if (rng_.chance(0.25)) p.lease = seconds(rng_.uniform(30, 120));
    fixPerDevice(p);
    return p;
  }

  // One to three changes of `p`: devices added, removed, changed, tainted or
  // untainted, counters, node selection, generation or lease.
  Pool change(Pool p, const std::string& pool_name) {
    const int changes = rng_.uniform(1, 3);
    for (int c = 0; c < changes; ++c) {
      std::vector<client::DeviceRef>& devices =
          p.slices ? (*p.slices)[static_cast<size_t>(
                                     rng_.uniform(0, static_cast<int>(p.slices->size()) - 1))]
                         .devices
                   : p.devices;
      const size_t cap = p.slices ? 60 : 400;
      switch (rng_.uniform(0, 8)) {
        case 0: {  // add devices
          const int k = rng_.uniform(1, 40);
          for (int i = 0; i < k && devices.size() < cap; ++i) {
            devices.insert(devices.begin() + rng_.uniform(0, static_cast<int>(devices.size())),
                           device(false));
          }
          break;
        }
        case 1: {  // remove devices
          const int k = rng_.uniform(1, 40);
          for (int i = 0; i < k && !devices.empty(); ++i) {
            devices.erase(devices.begin() + rng_.uniform(0, static_cast<int>(devices.size()) - 1));
          }
          break;
        }
        case 2:
        case 3: {  // change attributes
          const int k = rng_.uniform(1, 5);
          for (int i = 0; i < k && !devices.empty(); ++i) {
            devices[static_cast<size_t>(rng_.uniform(0, static_cast<int>(devices.size()) - 1))]
                .edit([&](Device& d) { setAttributes(d, rng_.uniform(0, 1000)); });
          }
          break;
        }
        case 4: {  // taint or untaint
          const int k = rng_.uniform(1, 70);
          for (int i = 0; i < k && !devices.empty(); ++i) {
            devices[static_cast<size_t>(rng_.uniform(0, static_cast<int>(devices.size()) - 1))]
                .edit([&](Device& d) {
                  if (d.taints.empty()) {
                    taint(d);
                  } else {
                    d.taints.clear();
                  }
                });
          }
          break;
        }
        case 5:  // counters
          if (!p.slices) {
            p.shared_counters = rng_.chance(0.3)
                                    ? std::vector<client::CounterSet>{}
                                    : counterSets(rng_.uniform(1, kMaxPoolCounterSets));
            client::editDevices(p.devices, [&](Device& d) {
              d.consumes_counters.clear();
              if (!p.shared_counters.empty() && rng_.chance(0.1)) consume(d, p.shared_counters);
            });
          }
          break;
        case 6:
          randomSelection(p, pool_name);
          break;
        case 7:
          p.generation = rng_.chance(0.5) ? 0 : rng_.uniform(1, 30);
          break;
        case 8:
          p.lease = rng_.chance(0.5) ? seconds(0) : seconds(rng_.uniform(30, 120));
          break;
      }
    }
    fixPerDevice(p);
    return p;
  }

 private:
  void randomSelection(Pool& p, const std::string& pool_name) {
    p.selection = {};
    const int r = rng_.uniform(0, 9);
    if (r < 5) {
      const bool node_pool = pool_name.starts_with("node-");
      p.selection.node_name = node_pool && rng_.chance(0.8) ? pool_name : rng_.pick(kNodes);
    } else if (r < 7) {
      client::NodeSelector selector;
      selector.value = client::Json::parse(
          R"({"nodeSelectorTerms": [{"matchExpressions": [{"key": "example.com/fabric",
              "operator": "In", "values": []}]}]})");
      selector.value["nodeSelectorTerms"][0]["matchExpressions"][0]["values"].push_back(pool_name);
      p.selection.node_selector = std::move(selector);
    } else if (r < 9) {
      p.selection.all_nodes = true;
    } else {
      p.selection.per_device_node_selection = true;
    }
  }

  // Per-device node selection lives on the devices: set it there exactly
  // when the pool asks for it.
  void fixPerDevice(Pool& p) {
    auto fix = [&](Device& d) {
      if (!p.selection.per_device_node_selection) {
        d.node_name.reset();
        d.all_nodes.reset();
      } else if (!d.node_name && !d.all_nodes) {
        if (rng_.chance(0.5)) {
          d.node_name = rng_.pick(kNodes);
        } else {
          d.all_nodes = true;
        }
      }
    };
    client::editDevices(p.devices, [&](Device& d) { fix(d); });
    if (p.slices) {
      for (DesiredSlice& s : *p.slices) {
        client::editDevices(s.devices, [&](Device& d) { fix(d); });
      }
    }
  }

  Device device(bool tainted) {
    Device d;
    d.name = "dev-" + std::to_string(next_device_++);
    setAttributes(d, rng_.uniform(0, 1000));
    client::DeviceCapacity memory;
    memory.value = quantity(std::to_string(8 << rng_.uniform(0, 3)) + "Gi");
    d.capacity["memory"] = memory;
    if (tainted) taint(d);
    return d;
  }

  static void setAttributes(Device& d, int variant) {
    d.attributes["model"].string_value = "model-" + std::to_string(variant % 4);
    d.attributes["index"].int_value = variant;
    d.attributes["firmware"].version_value = "1." + std::to_string(variant % 7) + ".0";
  }

  void taint(Device& d) {
    client::DeviceTaint t;
    t.key = kTaintKey;
    t.effect = rng_.chance(0.5) ? "NoSchedule" : "NoExecute";
    // Mostly left to the server's default, sometimes set by the driver.
    if (rng_.chance(0.2)) t.time_added = "2026-01-02T03:04:05Z";
    d.taints.push_back(std::move(t));
  }

  std::vector<client::CounterSet> counterSets(int n) {
    std::vector<client::CounterSet> sets;
    for (int i = 0; i < n; ++i) {
      client::CounterSet set;
      set.name = "set-" + std::to_string(i);
      set.counters["memory"].value = quantity(std::to_string(rng_.uniform(1, 8) * 40) + "Gi");
      sets.push_back(std::move(set));
    }
    return sets;
  }

  void consume(Device& d, const std::vector<client::CounterSet>& sets) {
    client::DeviceCounterConsumption c;
    c.counter_set = rng_.pick(sets).name;
    c.counters["memory"].value = quantity("10Gi");
    d.consumes_counters.push_back(std::move(c));
  }

  Random& rng_;
  int next_device_ = 0;
};

// Faults injected into the API calls the reconciler makes (on the test's
// thread) and the lists and watches the informer makes (on its thread).
struct Faults {
  double conflict = 0;  // 409 on update
  double error = 0;     // 429 or 500 on create, update, delete and get node
  double lost = 0;      // the write happens, the response is lost (503)
};

// One scenario: a fake API server, a desired store and a controller driven
// synchronously, plus a model of what the drivers asked for.
class Scenario {
 public:
  explicit Scenario(uint64_t seed, ScenarioOptions options = {})
      : seed_(seed),
        options_(options),
        rng_(seed),
        faults_rng_(seed ^ 0x5eedf00dULL),
        pools_(rng_),
        api_(clock_, {.watch_history = 1000, .seed = seed, .blocked = &blocked_}) {}

  ~Scenario() { stopController(); }

  // Sets up nodes, leftovers of an earlier controller, a foreign slice, the
  // fault reactors and the controller, and starts leading.
  bool start() {
    for (const char* node : kNodes) node_uids_[node] = api_.addNode(node).metadata.uid;
    if (options_.leftovers) seedLeftovers();
    ResourceSlice foreign;
    foreign.metadata.name = "foreign-gpu-node-a";
    foreign.spec.driver = kDrivers[0];
    foreign.spec.pool = {"node-a", 1, 1};
    foreign.spec.node_name = "node-a";
    auto added = api_.addResourceSlice(foreign);
    if (!added.ok()) return fail("add foreign slice: " + added.status().toString());
    foreign_ = *added;
    installReactors();

    ControllerOptions o;
    o.api = &api_;
    o.clock = &clock_;
    o.store = &store_;
    o.manual_for_test = true;
    auto c = Controller::create(o);
    if (!c.ok()) return fail("create controller: " + c.status().toString());
    controller_ = std::move(*c);
    controller_->informerForTest().start();
    if (!settle(1)) return fail("the informer did not sync");
    controller_->startLeading();
    note("start leading; adoption grace until +120s");
    return true;
  }

  // Runs `n` random operations.
  bool run(int n) {
    for (int i = 0; i < n; ++i) {
      if (!step()) return false;
    }
    return true;
  }

  // Stops the faults and runs the queue until it is idle, advancing the clock
  // past backoffs and requeues.
  bool drain() {
    {
      std::lock_guard lock(faults_mu_);
      faults_ = {};
    }
    fail_lists_ = 0;
    fail_watches_ = 0;
    note("drain");
    WorkQueue<PoolKey>& queue = controller_->queueForTest();
    for (int i = 0; i < kMaxDrainSteps; ++i) {
      if (!settle()) return fail("the informer did not catch up while draining");
      queue.releaseDueForTest();
      if (controller_->processNextItemForTest()) continue;
      const auto waiting = queue.waitingForTest();
      if (waiting.empty()) return true;
      clock_.advance(
          std::max<Clock::Duration>(waiting.front().second - clock_.now(), milliseconds(1)));
    }
    return fail("the queue was not idle after " + std::to_string(kMaxDrainSteps) + " steps");
  }

  // Pools held because a slice of theirs was deleted by someone else (a
  // node-local pool): none of their slices may be live. Each is renewed, as
  // its driver would, and the queue drained again, so that the checks below
  // see it republished.
  bool releaseHolds() {
    bool any = false;
    for (auto& [key, m] : model_) {
      const std::optional<PoolStatus> status = store_.status(key);
      if (!status || status->phase != PoolPhase::kHeld) continue;
      any = true;
      if (!boundNode(m.pool))
        early_violations_.push_back(key.toString() + ": held, bound to no node");
      for (const ResourceSlice& s : api_.resourceSlices()) {
        if (isManaged(s) && s.spec.driver == key.driver && s.spec.pool.name == key.pool) {
          early_violations_.push_back(key.toString() + ": held, yet slice " + s.metadata.name +
                                      " is live");
        }
      }
      note("renew held " + key.toString());
      if (!store_.renew(key)) early_violations_.push_back("renew of a held pool failed");
      m.deadline = deadlineOf(m.pool);
    }
    return !any || drain();
  }

  // Everything that must hold once the queue is idle; empty when it does.
  std::vector<std::string> violations() {
    std::vector<std::string> out = early_violations_;
    auto bad = [&](const PoolKey& key, const std::string& what) {
      out.push_back(key.toString() + ": " + what);
    };

    // The desired state is what the drivers asked for.
    std::vector<PoolKey> model_keys;
    for (const auto& [key, m] : model_) model_keys.push_back(key);
    if (store_.keys() != model_keys) out.push_back("the store's pools differ from the model");

    std::map<PoolKey, std::vector<ResourceSlice>> live;
    for (ResourceSlice& s : api_.resourceSlices()) {
      if (isManaged(s)) live[{s.spec.driver, s.spec.pool.name}].push_back(std::move(s));
    }
    for (const auto& [key, slices] : live) {
      if (!model_.contains(key)) {
        bad(key, std::to_string(slices.size()) + " managed slices left of a pool nobody wants");
      }
    }
    for (const auto& [key, m] : model_) checkPool(key, m.pool, live[key], bad);
    // A slice of ours that lost its label still claims its pool for the
    // scheduler: once the controller knew it, it must be taken back (or
    // deleted with its pool). One that loses its label before the controller
    // ever reconciled its pool leaves the label-selected cache unseen.
    for (const ResourceSlice& s : api_.resourceSlices()) {
      if (!isManaged(s) && unlabelled_known_.contains(s.metadata.name)) {
        bad({s.spec.driver, s.spec.pool.name},
            "the unlabelled slice " + s.metadata.name + " was neither taken back nor deleted");
      }
    }

    // Slices without our label are never touched.
    const auto foreign = api_.resourceSlice(foreign_.metadata.name);
    if (!foreign || foreign->metadata.resource_version != foreign_.metadata.resource_version) {
      out.push_back("the unmanaged slice " + foreign_.metadata.name + " was changed or deleted");
    }

    WorkQueue<PoolKey>& queue = controller_->queueForTest();
    if (queue.len() != 0 || !queue.waitingForTest().empty() || queue.processingForTest() != 0) {
      out.push_back("the queue is not idle");
    }
    return out;
  }

  // Reconciles every pool again, desired or live; returns the writes made.
  StatusOr<size_t> resyncWrites() {
    const size_t before = api_.countWrites();
    std::set<PoolKey> keys;
    for (const auto& [key, m] : model_) keys.insert(key);
    for (const ResourceSlice& s : api_.resourceSlices()) {
      if (isManaged(s)) keys.insert({s.spec.driver, s.spec.pool.name});
    }
    for (const PoolKey& key : keys) controller_->queueForTest().add(key);
    for (int i = 0; i < kMaxDrainSteps; ++i) {
      if (!settle()) return deadlineExceeded("the informer did not catch up in the resync");
      if (!controller_->processNextItemForTest()) return api_.countWrites() - before;
    }
    return deadlineExceeded("the resync did not end");
  }

  // The seed, the operations, the failures and the controller's log. Stops
  // the controller first, so that nothing logs while the log is read.
  std::string report() {
    stopController();
    std::ostringstream out;
    out << "seed " << seed_ << " (replay: RSC_CONVERGENCE_SEED=" << seed_
        << " RSC_CONVERGENCE_SCENARIOS=1)\n";
    out << "operations:\n";
    for (const std::string& line : ops_) out << "  " << line << '\n';
    const std::string log = logStream().str();
    constexpr size_t kTail = 20000;
    out << "controller log" << (log.size() > kTail ? " (tail)" : "") << ":\n"
        << (log.size() > kTail ? log.substr(log.size() - kTail) : log);
    return out.str();
  }

  // For the tests of the checker and of single bugs.
  FakeKubeApi& api() { return api_; }
  bool settleForTest() { return settle(); }
  void pushForTest(const PoolKey& key, Pool pool) { push(key, std::move(pool)); }

 private:
  struct ModelPool {
    Pool pool;
    Clock::TimePoint deadline = Clock::TimePoint::max();
  };

  bool fail(const std::string& why) {
    note("FAILED: " + why);
    return false;
  }
  void note(const std::string& line) {
    ops_.push_back(
        "[t+" +
        std::to_string(std::chrono::duration_cast<milliseconds>(clock_.now() - epoch_).count()) +
        "ms] " + line);
  }

  // Waits until the informer has seen every write and is watching again
  // (after at least `min_watches` watches were started). Its thread is
  // waited for until it blocks: asleep in a backoff, which the fake clock is
  // then moved on to end (as sleepFor moved it before), or in its watch with
  // every event delivered and handled. Real time is only the safety net of
  // each wait.
  bool settle(size_t min_watches = 0) {
    client::Informer<client::ResourceSlices>& informer = controller_->informerForTest();
    for (int i = 0; i < kMaxSettleSteps; ++i) {
      if (!blocked_.waitFor(1)) return false;
      if (clock_.advanceToNextWakeup()) continue;
      if (api_.watchesStarted() >= min_watches &&
          informer.lastResourceVersion() == api_.resourceVersion()) {
        return true;
      }
      // Writes the informer does not watch (unmanaged slices) move the
      // resourceVersion too; a bookmark tells it.
      api_.sendBookmark();
    }
    return false;
  }

  // Stops the controller. Its informer may be asleep in a backoff, and a
  // sleep cannot be interrupted, so sleeps stop blocking first.
  void stopController() {
    if (!controller_) return;
    clock_.stopBlocking();
    controller_->stop();
  }

  // ---- the operations -------------------------------------------------------

  bool step() {
    const int r = rng_.uniform(0, 99);
    if (r < 24) return opPush();
    if (r < 30) return opRepush();
    if (r < 34) return opRemove();
    if (r < 38) return opReplaceDriver();
    if (r < 42) return opLeases();
    if (r < 56) return opForeignEdit();
    if (r < 62) return opFaults();
    if (r < 65) return opWatchReset();
    if (r < 68) return opWatchGone();
    return opProcess();
  }

  PoolKey randomKey() { return {rng_.pick(kDrivers), rng_.pick(kPoolNames)}; }

  // A key with a desired pool, if there is any.
  std::optional<PoolKey> desiredKey() {
    if (model_.empty()) return std::nullopt;
    auto it = model_.begin();
    std::advance(it, rng_.uniform(0, static_cast<int>(model_.size()) - 1));
    return it->first;
  }

  void push(const PoolKey& key, Pool pool) {
    note("push " + key.toString() + " " + describe(pool));
    model_[key] = {pool, deadlineOf(pool)};
    store_.put(key, std::move(pool));
  }

  Clock::TimePoint deadlineOf(const Pool& pool) const {
    return pool.lease.count() > 0 ? clock_.now() + pool.lease : Clock::TimePoint::max();
  }

  bool opPush() {
    const PoolKey key = randomKey();
    auto it = model_.find(key);
    push(key, it != model_.end() && rng_.chance(0.7) ? pools_.change(it->second.pool, key.pool)
                                                     : pools_.fresh(key.pool));
    return settle();
  }

  bool opRepush() {
    const auto key = desiredKey();
    if (!key) return opPush();
    ModelPool& m = model_[*key];
    if (rng_.chance(0.5)) {
      note("re-push unchanged " + key->toString());
      store_.put(*key, m.pool);
    } else {
      note("renew " + key->toString());
      if (!store_.renew(*key)) early_violations_.push_back("renew of a desired pool failed");
    }
    m.deadline = deadlineOf(m.pool);
    return settle();
  }

  bool opRemove() {
    const auto key = desiredKey();
    if (!key) return opPush();
    note("remove " + key->toString());
    model_.erase(*key);
    if (!store_.remove(*key)) early_violations_.push_back("remove of a desired pool failed");
    return settle();
  }

  bool opReplaceDriver() {
    const std::string driver = rng_.pick(kDrivers);
    std::map<std::string, Pool> pools;
    std::string text;
    for (const char* name : kPoolNames) {
      if (!rng_.chance(0.4)) continue;
      const PoolKey key{driver, name};
      auto it = model_.find(key);
      Pool p = it == model_.end() ? pools_.fresh(name)
               : rng_.chance(0.5) ? it->second.pool
                                  : pools_.change(it->second.pool, name);
      text += std::string(" ") + name + "{" + describe(p) + "}";
      pools[name] = std::move(p);
    }
    note("replace driver " + driver + ":" + (text.empty() ? " (nothing)" : text));
    std::erase_if(model_, [&](const auto& e) { return e.first.driver == driver; });
    for (const auto& [name, p] : pools) model_[{driver, name}] = {p, deadlineOf(p)};
    store_.replaceDriver(driver, std::move(pools));
    return settle();
  }

  bool opLeases() {
    const Clock::Duration d = seconds(rng_.uniform(0, 100));
    clock_.advance(d);
    note("advance " + std::to_string(std::chrono::duration_cast<seconds>(d).count()) +
         "s, housekeeping");
    controller_->housekeepingForTest();
    const Clock::TimePoint now = clock_.now();
    std::erase_if(model_, [&](const auto& e) {
      if (e.second.deadline > now) return false;
      note("  lease of " + e.first.toString() + " expired");
      return true;
    });
    std::vector<PoolKey> model_keys;
    for (const auto& [key, m] : model_) model_keys.push_back(key);
    if (store_.keys() != model_keys) {
      early_violations_.push_back("after housekeeping, the store's pools differ from the model");
    }
    return settle();
  }

  bool opForeignEdit() {
    std::vector<ResourceSlice> managed;
    for (ResourceSlice& s : api_.resourceSlices()) {
      if (isManaged(s)) managed.push_back(std::move(s));
    }
    if (managed.empty()) return opPush();
    const ResourceSlice target = rng_.pick(managed);
    const std::string& name = target.metadata.name;
    auto edit = [&](const std::string& what, const std::function<void(ResourceSlice&)>& f) {
      note("foreign edit of " + name + ": " + what);
      auto result = api_.editResourceSlice(name, f);
      if (!result.ok()) note("  failed: " + result.status().toString());
    };
    auto rogue = [&](const std::string& what, const std::function<void(ResourceSlice&)>& f) {
      ResourceSlice copy = target;
      copy.metadata.name.clear();
      copy.metadata.uid.clear();
      copy.metadata.resource_version.clear();
      copy.metadata.generate_name = name.size() > 5 ? name.substr(0, name.size() - 5) : name;
      f(copy);
      auto added = api_.addResourceSlice(copy);
      note("rogue slice " + (added.ok() ? added->metadata.name : added.status().toString()) + " (" +
           what + ", copied from " + name + ")");
    };
    switch (rng_.uniform(0, 12)) {
      case 0:
        edit("change a device", [](ResourceSlice& s) {
          if (!s.spec.devices.empty()) {
            s.spec.devices[0].edit([](Device& d) { d.attributes["model"].string_value = "x"; });
          }
        });
        break;
      case 1:
        edit("add a device", [](ResourceSlice& s) {
          Device d;
          d.name = "intruder";
          s.spec.devices.push_back(d);
        });
        break;
      case 2:
        edit("remove every device", [](ResourceSlice& s) { s.spec.devices.clear(); });
        break;
      case 3: {
        const int delta = rng_.uniform(-2, 3);
        edit("generation " + std::to_string(delta), [delta](ResourceSlice& s) {
          s.spec.pool.generation = std::max<int64_t>(0, s.spec.pool.generation + delta);
        });
        break;
      }
      case 4:
        edit("resourceSliceCount + 1",
             [](ResourceSlice& s) { ++s.spec.pool.resource_slice_count; });
        break;
      case 5:
        note("foreign delete of " + name);
        if (Status s = api_.removeResourceSlice(name); !s.ok()) note("  failed: " + s.toString());
        break;
      case 6:
        rogue("duplicate index", [](ResourceSlice&) {});
        break;
      case 7: {
        const std::string node = rng_.pick(kNodes);
        rogue("duplicate index on " + node, [&](ResourceSlice& s) { s.spec.node_name = node; });
        break;
      }
      case 8:
        rogue("no index", [](ResourceSlice& s) { s.metadata.generate_name = "rogue-"; });
        break;
      case 9: {
        const std::string pool = rng_.pick(kPoolNames);
        rogue("of pool " + pool, [&](ResourceSlice& s) { s.spec.pool.name = pool; });
        break;
      }
      case 10:
        edit("drop owner references",
             [](ResourceSlice& s) { s.metadata.owner_references.clear(); });
        break;
      case 11: {
        const auto status = store_.status({target.spec.driver, target.spec.pool.name});
        const bool known =
            status && std::find(status->known_slices.begin(), status->known_slices.end(), name) !=
                          status->known_slices.end();
        if (known) unlabelled_known_.insert(name);
        edit(std::string("drop the managed-by label") + (known ? " of a known slice" : ""),
             [](ResourceSlice& s) { s.metadata.labels.erase(kManagedByLabel); });
        break;
      }
      case 12: {
        const std::string pool = rng_.pick(kPoolNames);
        edit("move to pool " + pool, [&](ResourceSlice& s) { s.spec.pool.name = pool; });
        break;
      }
    }
    return settle();
  }

  bool opFaults() {
    Faults f;
    if (rng_.chance(0.7)) {
      f.conflict = rng_.pick(std::array{0.0, 0.2, 0.5});
      f.error = rng_.pick(std::array{0.0, 0.1, 0.3});
      f.lost = rng_.pick(std::array{0.0, 0.1, 0.2});
    }
    note("faults: conflict " + std::to_string(f.conflict) + ", error " + std::to_string(f.error) +
         ", lost response " + std::to_string(f.lost));
    std::lock_guard lock(faults_mu_);
    faults_ = f;
    return true;
  }

  bool opWatchReset() {
    const size_t started = api_.watchesStarted();
    const int failing = rng_.chance(0.3) ? rng_.uniform(1, 3) : 0;
    note("reset watches" + (failing ? ", next " + std::to_string(failing) + " watches fail" : ""));
    fail_watches_ = failing;
    api_.resetWatches();
    return settle(started + 1);
  }

  bool opWatchGone() {
    const size_t started = api_.watchesStarted();
    const int failing = rng_.chance(0.3) ? rng_.uniform(1, 3) : 0;
    note("compact, watch ERROR 410" +
         (failing ? ", next " + std::to_string(failing) + " lists fail" : ""));
    fail_lists_ = failing;
    api_.compact();
    api_.sendWatchError(Status(StatusCode::kGone, "too old resource version", {}, "Expired"));
    return settle(started + 1);
  }

  bool opProcess() {
    const Clock::Duration d = rng_.pick(std::array<Clock::Duration, 4>{
        Clock::Duration::zero(), milliseconds(10), seconds(1), seconds(30)});
    clock_.advance(d);
    WorkQueue<PoolKey>& queue = controller_->queueForTest();
    const size_t released = queue.releaseDueForTest();
    const int k = rng_.uniform(0, 6);
    int processed = 0;
    const size_t writes = api_.countWrites();
    for (; processed < k; ++processed) {
      if (!controller_->processNextItemForTest()) break;
      if (!settle()) return fail("the informer did not catch up after a reconcile");
    }
    note("advance " + std::to_string(std::chrono::duration_cast<milliseconds>(d).count()) +
         "ms, released " + std::to_string(released) + ", processed " + std::to_string(processed) +
         " of up to " + std::to_string(k) + ", " + std::to_string(api_.countWrites() - writes) +
         " writes");
    return true;
  }

  // ---- setup ----------------------------------------------------------------

  // Slices an earlier controller left behind: adopted if their pool is
  // pushed, deleted after the grace period otherwise.
  void seedLeftovers() {
    const int pools = rng_.uniform(0, 2);
    for (int p = 0; p < pools; ++p) {
      const PoolKey key = randomKey();
      const int slices = rng_.uniform(1, 3);
      const int64_t generation = rng_.uniform(1, 5);
      for (int i = 0; i < slices; ++i) {
        ResourceSlice s;
        s.metadata.generate_name = sliceGenerateName(i, key);
        s.metadata.labels[kManagedByLabel] = kManagedByValue;
        s.spec.driver = key.driver;
        s.spec.pool = {key.pool, generation, slices};
        if (key.pool.starts_with("node-")) {
          s.spec.node_name = key.pool;
        } else {
          s.spec.all_nodes = true;
        }
        for (int j = 0; j < 3; ++j) {
          Device d;
          d.name = "old-" + std::to_string(i) + "-" + std::to_string(j);
          s.spec.devices.push_back(d);
        }
        auto added = api_.addResourceSlice(s);
        note("leftover slice " + (added.ok() ? added->metadata.name : added.status().toString()));
      }
    }
  }

  // Rolls the dice for one write. Reactors for writes run on the test's
  // thread (the reconciler's), so the sequence of faults follows the seed.
  enum class Fault { kNone, kConflict, kError, kLost };
  Fault roll(bool may_conflict) {
    std::lock_guard lock(faults_mu_);
    const double r = std::uniform_real_distribution<double>(0, 1)(faults_rng_);
    const double conflict = may_conflict ? faults_.conflict : 0;
    if (r < conflict) return Fault::kConflict;
    if (r < conflict + faults_.error) return Fault::kError;
    if (r < conflict + faults_.error + faults_.lost) return Fault::kLost;
    return Fault::kNone;
  }
  Status injectedError() {
    std::lock_guard lock(faults_mu_);
    if (std::uniform_int_distribution<int>(0, 1)(faults_rng_) == 0) {
      return Status(StatusCode::kUnavailable, "injected: 429 Too Many Requests", {},
                    "TooManyRequests");
    }
    return Status(StatusCode::kUnavailable, "injected: 500 Internal Server Error", {},
                  "InternalError");
  }
  static Status lostResponse() {
    return Status(StatusCode::kUnavailable, "injected: the write happened, its response was lost",
                  {}, "ServiceUnavailable");
  }

  // The server defaults a taint's timeAdded.
  void defaultTaints(ResourceSlice& slice) {
    client::editDevices(slice.spec.devices, [&](Device& d) {
      for (client::DeviceTaint& t : d.taints) {
        if (!t.time_added) t.time_added = formatTime(clock_.systemNow());
      }
    });
  }

  // One write's fate, rolled: none lets it go on; a conflict (an update's
  // only) or an injected error fails it; a lost answer is `lose`'s answer
  // (what the server would have done, then lostResponse(), or OK to let the
  // write go on when the server would have refused it).
  Status fault(bool may_conflict, const std::function<Status()>& lose) {
    switch (roll(may_conflict)) {
      case Fault::kNone:
        return okStatus();
      case Fault::kConflict:
        return Status(StatusCode::kConflict, "injected: the object has been modified", {},
                      "Conflict");
      case Fault::kError:
        return injectedError();
      case Fault::kLost:
        return lose();
    }
    return okStatus();
  }

  void installReactors() {
    api_.prependReactor("create", "resourceslices", [this](FakeKubeApi::Request& req) {
      defaultTaints(*req.slice);
      return fault(false, [&] {
        (void)api_.addResourceSlice(*req.slice);
        return lostResponse();
      });
    });
    api_.prependReactor("update", "resourceslices", [this](FakeKubeApi::Request& req) {
      defaultTaints(*req.slice);
      return fault(true, [&] {
        // Only what the server would have accepted happens.
        const auto current = api_.resourceSlice(req.name);
        if (!current ||
            current->metadata.resource_version != req.slice->metadata.resource_version) {
          return okStatus();
        }
        const ResourceSlice wanted = *req.slice;
        auto stored = api_.editResourceSlice(req.name, [&](ResourceSlice& s) { s = wanted; });
        if (!stored.ok()) return stored.status();
        return lostResponse();
      });
    });
    api_.prependReactor("delete", "resourceslices", [this](FakeKubeApi::Request& req) {
      return fault(false, [&] {
        const auto current = api_.resourceSlice(req.name);
        const auto& pre = req.preconditions;
        if (!current || (pre.uid && *pre.uid != current->metadata.uid) ||
            (pre.resource_version && *pre.resource_version != current->metadata.resource_version)) {
          return okStatus();
        }
        (void)api_.removeResourceSlice(req.name);
        return lostResponse();
      });
    });
    api_.prependReactor("get", "nodes", [this](FakeKubeApi::Request&) {
      return roll(false) == Fault::kError ? injectedError() : okStatus();
    });
    // Lists and watches run on the informer's thread: counted, not rolled.
    api_.prependReactor("list", "resourceslices", [this](FakeKubeApi::Request&) {
      if (fail_lists_.load() > 0) {
        --fail_lists_;
        return Status(StatusCode::kUnavailable, "injected: list failed");
      }
      return okStatus();
    });
    api_.prependReactor("watch", "resourceslices", [this](FakeKubeApi::Request&) {
      if (fail_watches_.load() > 0) {
        --fail_watches_;
        return Status(StatusCode::kUnavailable, "injected: watch failed");
      }
      return okStatus();
    });
  }

  // ---- the invariants of one desired pool ------------------------------------

  template <typename Bad>
  void checkPool(const PoolKey& key, const Pool& pool, std::vector<ResourceSlice> slices,
                 Bad& bad) {
    // The store and the status.
    const auto desired = store_.get(key);
    if (desired == nullptr || !(desired->pool == pool)) {
      bad(key, "the store's desired pool differs from the model");
      return;
    }
    const auto status = store_.status(key);
    if (!status) {
      bad(key, "no status");
    } else {
      if (status->phase != PoolPhase::kPublished) {
        bad(key, "phase " + std::string(poolPhaseName(status->phase)) + ", last error " +
                     status->last_error.toString());
      }
      if (status->published_version != desired->version) {
        bad(key, "published version " + std::to_string(status->published_version) + ", desired " +
                     std::to_string(desired->version));
      }
    }
    if (slices.empty()) {
      bad(key, "no slices");
      return;
    }

    // One generation, the right count, indices unique and named after the pool.
    std::map<int64_t, const ResourceSlice*> by_index;
    const int64_t generation = slices[0].spec.pool.generation;
    std::set<std::string> names;
    for (const ResourceSlice& s : slices) {
      const std::string& n = s.metadata.name;
      names.insert(n);
      if (s.spec.pool.generation != generation) {
        bad(key, n + " has generation " + std::to_string(s.spec.pool.generation) + ", another " +
                     std::to_string(generation));
      }
      if (s.spec.pool.resource_slice_count != static_cast<int64_t>(slices.size())) {
        bad(key, n + " says " + std::to_string(s.spec.pool.resource_slice_count) +
                     " slices, the pool has " + std::to_string(slices.size()));
      }
      // A rogue copy of another pool's slice keeps that pool's name; only
      // the index in it counts.
      const int64_t index = sliceIndexFromName(n);
      if (index < 0) {
        bad(key, n + " has no index in its name");
      } else if (!by_index.emplace(index, &s).second) {
        bad(key, n + " repeats index " + std::to_string(index));
      }
    }
    // A foreign edit that lowers the generation of a one-slice pool leaves
    // it consistent, but below what was published: it is raised again.
    if (generation < pool.generation) {
      bad(key, "generation " + std::to_string(generation) + " below the asked " +
                   std::to_string(pool.generation));
    }
    if (status && status->published_generation != generation) {
      bad(key, "status says generation " + std::to_string(status->published_generation) +
                   ", slices " + std::to_string(generation));
    }
    if (status &&
        std::set<std::string>(status->slice_names.begin(), status->slice_names.end()) != names) {
      bad(key, "status names other slices than the live ones");
    }

    // Node selection and ownership.
    const NodeSelection& sel = pool.selection;
    std::vector<client::OwnerReference> owners;
    if (sel.node_name) {
      client::OwnerReference ref;
      ref.api_version = "v1";
      ref.kind = "Node";
      ref.name = *sel.node_name;
      ref.uid = node_uids_[*sel.node_name];
      ref.controller = true;
      owners.push_back(ref);
    }
    for (const ResourceSlice& s : slices) {
      const std::string& n = s.metadata.name;
      if (s.spec.node_name != sel.node_name || s.spec.node_selector != sel.node_selector ||
          s.spec.all_nodes != (sel.all_nodes ? std::optional<bool>(true) : std::nullopt) ||
          s.spec.per_device_node_selection !=
              (sel.per_device_node_selection ? std::optional<bool>(true) : std::nullopt)) {
        bad(key, n + " has the wrong node selection");
      }
      if (s.metadata.owner_references != owners) bad(key, n + " has the wrong owner references");
    }

    // Content.
    if (pool.slices) {
      if (slices.size() != pool.slices->size()) {
        bad(key, std::to_string(slices.size()) + " slices, the driver chose " +
                     std::to_string(pool.slices->size()));
      }
      for (size_t i = 0; i < pool.slices->size(); ++i) {
        auto it = by_index.find(static_cast<int64_t>(i));
        if (it == by_index.end()) {
          bad(key, "no slice with index " + std::to_string(i));
          continue;
        }
        const ResourceSlice& s = *it->second;
        if (!sameDevices((*pool.slices)[i].devices, s.spec.devices) ||
            s.spec.shared_counters != (*pool.slices)[i].shared_counters) {
          bad(key, s.metadata.name + " differs from the driver's slice " + std::to_string(i));
        }
      }
    } else {
      std::map<std::string, const Device*> want;
      const std::vector<Device> desired_devices = client::decodeAll(pool.devices);
      for (const Device& d : desired_devices) want[d.name] = &d;
      std::set<std::string> seen;
      std::vector<client::CounterSet> counters;
      size_t empty = 0;
      for (const auto& [index, s] : by_index) {
        const std::string& n = s->metadata.name;
        for (const Device& d : client::decodeAll(s->spec.devices)) {
          auto it = want.find(d.name);
          if (it == want.end()) {
            bad(key, n + " has device " + d.name + ", which is not desired");
          } else if (!seen.insert(d.name).second) {
            bad(key, "device " + d.name + " is published twice");
          } else if (!sameDevice(*it->second, d)) {
            bad(key, n + " has device " + d.name +
                         " with other content than desired: " + client::toJson(d).dump() +
                         ", desired " + client::toJson(*it->second).dump());
          }
        }
        if (s->spec.devices.size() > deviceLimit(s->spec.devices)) {
          bad(key,
              n + " holds " + std::to_string(s->spec.devices.size()) + " devices, over its limit");
        }
        if (!s->spec.shared_counters.empty() && !s->spec.devices.empty()) {
          bad(key, n + " mixes shared counters and devices");
        }
        if (s->spec.shared_counters.size() > kMaxCounterSetsPerSlice) {
          bad(key, n + " holds too many counter sets");
        }
        counters.insert(counters.end(), s->spec.shared_counters.begin(),
                        s->spec.shared_counters.end());
        empty += s->spec.devices.empty() && s->spec.shared_counters.empty();
      }
      if (seen.size() != want.size()) {
        bad(key, std::to_string(want.size() - seen.size()) + " desired devices are not published");
      }
      if (counters != pool.shared_counters) {
        std::string text;
        for (const auto& c : counters) text += client::toJson(c).dump();
        text += " desired ";
        for (const auto& c : pool.shared_counters) text += client::toJson(c).dump();
        bad(key, "the shared counters differ from desired: " + text);
      }
      const bool empty_pool = pool.devices.empty() && pool.shared_counters.empty();
      if (empty_pool ? slices.size() != 1 || empty != 1 : empty != 0) {
        bad(key, std::to_string(empty) + " empty slices in a pool of " +
                     std::to_string(pool.devices.size()) + " devices");
      }
    }

    // And the planner, asked again, keeps exactly these slices as they are.
    std::vector<SlicePtr> live;
    for (const ResourceSlice& s : slices) live.push_back(std::make_shared<const ResourceSlice>(s));
    const Plan plan = planPool(pool, live);
    if (!plan.obsolete.empty()) {
      bad(key, "the planner would delete " + plan.obsolete.front()->metadata.name);
    }
    for (const PlannedSlice& p : plan.slices) {
      if (p.live == nullptr) {
        bad(key, "the planner would create slice " + std::to_string(p.index));
      } else if (!sameDevices(p.devices, p.live->spec.devices) ||
                 p.shared_counters != p.live->spec.shared_counters) {
        bad(key, "the planner would change " + p.live->metadata.name);
      }
    }
  }

  const uint64_t seed_;
  const ScenarioOptions options_;
  Random rng_;
  std::mutex faults_mu_;
  std::mt19937 faults_rng_;  // guarded by faults_mu_
  Faults faults_;            // guarded by faults_mu_
  std::atomic<int> fail_lists_{0};
  std::atomic<int> fail_watches_{0};
  PoolGenerator pools_;
  // The informer's thread, when it waits in its watch or sleeps.
  testing::BlockedThreads blocked_;
  testing::FakeClock clock_{testing::FakeClock::Sleeps::kBlock, &blocked_};
  const Clock::TimePoint epoch_ = clock_.now();
  FakeKubeApi api_;
  DesiredStore store_{clock_};
  std::map<std::string, std::string> node_uids_;
  ResourceSlice foreign_;
  std::map<PoolKey, ModelPool> model_;
  std::vector<std::string> ops_;
  std::vector<std::string> early_violations_;
  // Slices whose label a foreign edit dropped after the controller knew them.
  std::set<std::string> unlabelled_known_;
  // Last: stopped and destroyed before everything it uses.
  std::unique_ptr<Controller> controller_;
};

class ConvergenceTest : public ::testing::Test {
 protected:
  void SetUp() override { log::configure(log::Format::kText, 0, &logStream()); }
  void TearDown() override { log::configure(log::Format::kText, 0, nullptr); }
};

// Runs one scenario of `ops` operations to convergence; returns an empty
// string or what went wrong, with the report.
std::string runScenario(uint64_t seed, int ops) {
  logStream().str("");
  Scenario scenario(seed);
  if (!scenario.start() || !scenario.run(ops) || !scenario.drain() || !scenario.releaseHolds()) {
    return scenario.report();
  }
  std::vector<std::string> problems = scenario.violations();
  if (problems.empty()) {
    StatusOr<size_t> writes = scenario.resyncWrites();
    if (!writes.ok()) {
      problems.push_back(writes.status().toString());
    } else if (*writes != 0) {
      problems.push_back("a resync of every pool made " + std::to_string(*writes) + " writes");
    }
  }
  if (problems.empty()) {
    if (envOr("RSC_CONVERGENCE_VERBOSE", 0) != 0) std::cout << scenario.report() << '\n';
    return {};
  }
  std::string out = "violations:\n";
  for (const std::string& p : problems) out += "  " + p + "\n";
  return out + scenario.report();
}

TEST_F(ConvergenceTest, RandomPushEditAndFaultSequencesConvergeToThePlan) {
  const uint64_t first = envOr("RSC_CONVERGENCE_SEED", 1);
  const uint64_t scenarios = envOr("RSC_CONVERGENCE_SCENARIOS", kDefaultScenarios);
  const uint64_t max_failures = envOr("RSC_CONVERGENCE_MAX_FAILURES", 3);
  uint64_t failures = 0;
  for (uint64_t seed = first; seed < first + scenarios; ++seed) {
    Random lengths(seed * 7919);
    const std::string failure = runScenario(seed, lengths.uniform(10, 70));
    if (!failure.empty()) {
      ADD_FAILURE() << failure;
      // A few reports are enough to debug from.
      if (++failures >= max_failures) {
        GTEST_FAIL() << "stopping after " << failures << " failing scenarios (last seed " << seed
                     << ")";
      }
    }
  }
}

// The checker itself: a converged scenario passes, and an incomplete pool or
// a tampered device is caught, so the property above cannot pass vacuously.
TEST_F(ConvergenceTest, CheckerCatchesAnIncompleteOrTamperedPool) {
  Scenario scenario(42);
  ASSERT_TRUE(scenario.start()) << scenario.report();
  const PoolKey key{"gpu.example.com", "cluster"};
  Pool pool;
  pool.selection.all_nodes = true;
  for (int i = 0; i < 200; ++i) {
    Device d;
    d.name = "gpu-" + std::to_string(i);
    pool.devices.push_back(d);
  }
  scenario.pushForTest(key, pool);
  ASSERT_TRUE(scenario.drain()) << scenario.report();
  ASSERT_TRUE(scenario.violations().empty()) << scenario.report();

  // A slice lost behind the controller's back (not yet reconciled).
  auto poolSlices = [&] {
    std::vector<ResourceSlice> out;
    for (const ResourceSlice& s : scenario.api().resourceSlices()) {
      if (isManaged(s) && s.spec.driver == key.driver && s.spec.pool.name == key.pool) {
        out.push_back(s);
      }
    }
    return out;
  };
  std::vector<ResourceSlice> slices = poolSlices();
  ASSERT_EQ(slices.size(), 2U);
  ASSERT_TRUE(scenario.api().removeResourceSlice(slices[1].metadata.name).ok());
  ASSERT_TRUE(scenario.settleForTest());
  EXPECT_FALSE(scenario.violations().empty()) << "an incomplete pool passed the check";
  ASSERT_TRUE(scenario.drain()) << scenario.report();
  EXPECT_TRUE(scenario.violations().empty()) << scenario.report();

  // A device changed behind its back.
  slices = poolSlices();
  ASSERT_FALSE(slices.empty());
  const std::string name = slices[0].metadata.name;
  ASSERT_TRUE(scenario.api()
                  .editResourceSlice(name,
                                     [](ResourceSlice& s) {
                                       s.spec.devices[0].edit([&](client::Device& d_) {
                                         d_.attributes["model"].string_value = "x";
                                       });
                                     })
                  .ok());
  ASSERT_TRUE(scenario.settleForTest());
  EXPECT_FALSE(scenario.violations().empty()) << "a tampered device passed the check";
  ASSERT_TRUE(scenario.drain()) << scenario.report();
  EXPECT_TRUE(scenario.violations().empty()) << scenario.report();
}

// ---- Regressions ------------------------------------------------------------
// Minimal reproductions of the bugs the property found, each fixed.

Pool clusterPool(int devices) {
  Pool pool;
  pool.selection.all_nodes = true;
  for (int i = 0; i < devices; ++i) {
    Device d;
    d.name = "gpu-" + std::to_string(i);
    pool.devices.push_back(d);
  }
  return pool;
}

// A taint added to a device of a slice where no device had one read as
// "dropped by the server" (DRADeviceTaints disabled), so the slice was never
// updated while the pool reported Published; consumesCounters and the other
// gated fields were the same. Now only fields that the server's answer to one
// of our writes dropped are excused.
TEST_F(ConvergenceTest, ATaintAddedToAnUntaintedSliceIsPublished) {
  Scenario scenario(1, {.leftovers = false});
  ASSERT_TRUE(scenario.start()) << scenario.report();
  const PoolKey key{"gpu.example.com", "cluster"};
  Pool pool = clusterPool(3);
  scenario.pushForTest(key, pool);
  ASSERT_TRUE(scenario.drain()) << scenario.report();
  ASSERT_TRUE(scenario.violations().empty()) << scenario.report();

  client::DeviceTaint taint;
  taint.key = kTaintKey;
  taint.effect = "NoSchedule";
  pool.devices[0].edit([&](client::Device& d_) { d_.taints.push_back(taint); });
  scenario.pushForTest(key, pool);
  ASSERT_TRUE(scenario.drain()) << scenario.report();
  const std::vector<std::string> problems = scenario.violations();
  EXPECT_TRUE(problems.empty()) << problems.front();
}

// When someone changed spec.pool.name of a managed slice, only its new pool
// was enqueued; the old one stayed a slice short (its other slices still said
// resourceSliceCount N), so the scheduler ignored it. Now the informer's
// update handler enqueues the old pool too.
TEST_F(ConvergenceTest, ASliceMovedToAnotherPoolIsReplaced) {
  Scenario scenario(1, {.leftovers = false});
  ASSERT_TRUE(scenario.start()) << scenario.report();
  const PoolKey key{"gpu.example.com", "cluster"};
  scenario.pushForTest(key, clusterPool(200));
  ASSERT_TRUE(scenario.drain()) << scenario.report();
  ASSERT_TRUE(scenario.violations().empty()) << scenario.report();

  std::string name;
  for (const ResourceSlice& s : scenario.api().resourceSlices()) {
    if (isManaged(s) && s.spec.pool.name == key.pool) name = s.metadata.name;
  }
  ASSERT_TRUE(scenario.api()
                  .editResourceSlice(name, [](ResourceSlice& s) { s.spec.pool.name = "other"; })
                  .ok());
  ASSERT_TRUE(scenario.settleForTest());
  ASSERT_TRUE(scenario.drain()) << scenario.report();
  const std::vector<std::string> problems = scenario.violations();
  EXPECT_TRUE(problems.empty()) << problems.front();
}

// Counter chunks were matched to live counter slices by position while new
// counter slices took the lowest free index: with the first chunk's slice
// gone, the first chunk moved into the second chunk's slice and the second
// got index 0, and planning that result again swapped them back (a second
// rewrite of the pool, and only when something else enqueued it). Now a chunk
// goes back to the slice that holds its first set.
std::vector<std::string> counterSetNames(const std::vector<client::CounterSet>& sets) {
  std::vector<std::string> names;
  for (const client::CounterSet& set : sets) names.push_back(set.name);
  return names;
}

TEST(ConvergencePlanner, PlanningItsOwnCounterSlicesAgainChangesNothing) {
  const PoolKey key{"gpu.example.com", "cluster"};
  Pool pool;
  pool.selection.all_nodes = true;
  for (size_t i = 0; i <= kMaxCounterSetsPerSlice; ++i) {
    client::CounterSet set;
    set.name = "set-" + std::to_string(i);
    set.counters["memory"].value = quantity("80Gi");
    pool.shared_counters.push_back(set);
  }
  // What is left after someone deleted slice 0 (the first eight sets).
  auto second = std::make_shared<ResourceSlice>();
  second->metadata.name = sliceGenerateName(1, key) + "abcde";
  second->spec.pool = {key.pool, 1, 2};
  second->spec.shared_counters = {pool.shared_counters.back()};

  const Plan first = planPool(pool, {second});
  std::vector<SlicePtr> live;
  for (const PlannedSlice& p : first.slices) {
    auto s = std::make_shared<ResourceSlice>();
    s->metadata.name = p.live ? p.live->metadata.name : sliceGenerateName(p.index, key) + "fghij";
    s->spec.pool = {key.pool, 2, static_cast<int64_t>(first.slices.size())};
    s->spec.shared_counters = p.shared_counters;
    live.push_back(s);
  }
  const Plan again = planPool(pool, live);
  ASSERT_EQ(again.slices.size(), live.size());
  EXPECT_TRUE(again.obsolete.empty());
  for (const PlannedSlice& p : again.slices) {
    ASSERT_NE(p.live, nullptr);
    EXPECT_EQ(counterSetNames(p.shared_counters), counterSetNames(p.live->spec.shared_counters))
        << "slice " << p.index << " would be rewritten";
  }
}

}  // namespace
}  // namespace rsc::controller::reconcile
