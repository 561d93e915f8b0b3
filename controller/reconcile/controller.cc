#include "controller/reconcile/controller.h"

#include <algorithm>
#include <utility>

#include "common/enum_names.h"
#include "common/log.h"
#include "common/thread_name.h"
#include "controller/reconcile/dropped_fields.h"

namespace rsc::controller::reconcile {
namespace {

// The index key of a slice in the informer's store: driver and pool, with a
// separator that cannot occur in either name.
std::string poolIndexKey(const std::string& driver, const std::string& pool) {
  return driver + '\n' + pool;
}

// What the Node cache keeps of a Node: its identity, for owner references,
// and the resourceVersion the informer needs. Labels, annotations and
// managedFields (most of a Node's metadata) are dropped.
void keepNodeIdentity(client::PartialObjectMetadata& node) {
  client::ObjectMeta kept;
  kept.name = std::move(node.metadata.name);
  kept.uid = std::move(node.metadata.uid);
  kept.resource_version = std::move(node.metadata.resource_version);
  node.metadata = std::move(kept);
  node.unknown = nullptr;
}

// What the slice cache keeps of a slice's metadata: everything but
// managedFields, which take about 5 KB per slice and which the controller
// never reads. An update that omits them keeps the server's (the API server
// only resets them when sent an explicit single empty entry).
void dropManagedFields(client::ResourceSlice& slice) {
  client::Json& unknown = slice.metadata.unknown;  // managedFields are not modelled
  if (!unknown.is_object()) return;
  unknown.erase("managedFields");
  if (unknown.empty()) unknown = nullptr;
}

// The field manager of the newest managedFields entry of `meta` that is not
// the controller's: who, other than us, changed the object last. Entries
// carry their time to the second, in one format, so text order is time order;
// a tie goes to the later entry.
std::string newestForeignManager(const client::ObjectMeta& meta) {
  const client::Json& unknown = meta.unknown;  // managedFields are not modelled
  if (!unknown.is_object()) return {};
  const auto fields = unknown.find("managedFields");
  if (fields == unknown.end() || !fields->is_array()) return {};
  std::string manager;
  std::string newest;
  for (const client::Json& entry : *fields) {
    if (!entry.is_object()) continue;
    const auto m = entry.find("manager");
    if (m == entry.end() || !m->is_string() || *m == kFieldManager) continue;
    const auto t = entry.find("time");
    const std::string time = t != entry.end() && t->is_string() ? t->get<std::string>() : "";
    if (manager.empty() || time >= newest) {
      manager = m->get<std::string>();
      newest = time;
    }
  }
  return manager;
}

}  // namespace

// Who else last changed each slice, kept from the managedFields the cache
// drops: one name per slice that someone else has touched, for the Event of
// a reverted change. Written by the informer's thread, read by workers.
class Controller::ForeignManagers {
 public:
  void note(const client::ResourceSlice& slice) {
    std::string manager = newestForeignManager(slice.metadata);
    std::lock_guard lock(mu_);
    if (manager.empty()) {
      by_slice_.erase(slice.metadata.name);
    } else {
      by_slice_[slice.metadata.name] = std::move(manager);
    }
  }
  void forget(const std::string& name) {
    std::lock_guard lock(mu_);
    by_slice_.erase(name);
  }
  std::string get(const std::string& name) const {
    std::lock_guard lock(mu_);
    auto it = by_slice_.find(name);
    return it == by_slice_.end() ? std::string() : it->second;
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::string> by_slice_;
};

// The reconciler's view of the informer's store, which also remembers the
// resourceVersions of our own writes so that their watch events do not cost a
// reconcile. The event of a write may arrive before the write's answer has
// been recorded; an event for a pool being reconciled therefore waits until
// the reconcile ends, and is checked against the writes recorded by then.
class Controller::StoreCache : public SliceCache {
 public:
  StoreCache(client::ResourceSliceStore& store, const ForeignManagers& managers, Clock& clock)
      : store_(store), managers_(managers), clock_(clock) {}

  // Foreign deletes are noted only while leading: a follower never takes
  // them, and one that starts leading looks at every pool anyway.
  void noteForeignDeletes(bool on) {
    std::lock_guard lock(mu_);
    noting_ = on;
    if (!on) foreign_deletes_.clear();
  }
  ForeignDeletes takeForeignDeletes(const PoolKey& key) override {
    std::lock_guard lock(mu_);
    auto it = foreign_deletes_.find(key);
    if (it == foreign_deletes_.end()) return {};
    ForeignDeletes out = std::move(it->second);
    foreign_deletes_.erase(it);
    return out;
  }

  std::string lastForeignManager(const std::string& name) const override {
    return managers_.get(name);
  }

  std::vector<SlicePtr> slicesOfPool(const PoolKey& key) const override {
    return store_.byIndex(poolIndexKey(key.driver, key.pool));
  }
  void assumeWritten(const client::ResourceSlice& stored) override {
    client::ResourceSlice kept = stored;
    dropManagedFields(kept);
    store_.assumeWritten(kept);
    std::lock_guard lock(mu_);
    own_writes_[stored.metadata.name] = stored.metadata.resource_version;
    // Written, so not deleted by an earlier delete whose outcome was open.
    own_deletes_.erase(stored.metadata.name);
  }
  void assumeDeleted(const client::ResourceSlice& last) override {
    store_.assumeDeleted(last.metadata.name);
  }
  void deleting(const std::string& name) override {
    std::lock_guard lock(mu_);
    own_deletes_.insert(name);
  }
  void deleteFailed(const std::string& name) override {
    std::lock_guard lock(mu_);
    own_deletes_.erase(name);
  }
  // True when the watch event of `s` needs no reconcile now: it is the
  // event of a write (or delete) of ours, seen once, or its pool is being
  // reconciled and the event waits for endReconcile().
  bool settled(const client::ResourceSlice& s, bool deleted) {
    std::lock_guard lock(mu_);
    Event event{s.metadata.name, s.metadata.resource_version, deleted};
    if (ownLocked(event)) return true;
    const PoolKey key{s.spec.driver, s.spec.pool.name};
    if (!reconciling_.contains(key)) {
      if (deleted) noteForeignDeleteLocked(key, event.name);
      return false;
    }
    deferred_[key].push_back(std::move(event));
    return true;
  }
  // Called by the worker before and after it reconciles `key`. endReconcile
  // returns true when an event that arrived meanwhile was not our own.
  void beginReconcile(const PoolKey& key) {
    std::lock_guard lock(mu_);
    reconciling_.insert(key);
  }
  bool endReconcile(const PoolKey& key) {
    std::lock_guard lock(mu_);
    reconciling_.erase(key);
    auto it = deferred_.find(key);
    if (it == deferred_.end()) return false;
    bool foreign = false;
    for (const Event& event : it->second) {
      if (ownLocked(event)) continue;
      foreign = true;
      if (event.deleted) noteForeignDeleteLocked(key, event.name);
    }
    deferred_.erase(it);
    return foreign;
  }

 private:
  struct Event {
    std::string name;
    std::string resource_version;
    bool deleted = false;
  };
  // Consumes the record of our own write or delete that `event` reports.
  bool ownLocked(const Event& event) {
    if (event.deleted) {
      own_writes_.erase(event.name);
      return own_deletes_.erase(event.name) > 0;
    }
    auto it = own_writes_.find(event.name);
    if (it == own_writes_.end() || it->second != event.resource_version) return false;
    own_writes_.erase(it);
    return true;
  }

  void noteForeignDeleteLocked(const PoolKey& key, const std::string& name) {
    if (!noting_) return;
    ForeignDeletes& deletes = foreign_deletes_[key];
    if (deletes.names.empty()) deletes.first_seen = clock_.now();
    deletes.names.push_back(name);
  }

  client::ResourceSliceStore& store_;
  const ForeignManagers& managers_;
  Clock& clock_;
  mutable std::mutex mu_;
  bool noting_ = false;
  std::map<PoolKey, ForeignDeletes> foreign_deletes_;
  std::unordered_map<std::string, std::string> own_writes_;  // name -> resourceVersion
  std::set<std::string> own_deletes_;
  std::set<PoolKey> reconciling_;
  std::map<PoolKey, std::vector<Event>> deferred_;
};

// The reconciler's view of the Node informer's store.
class Controller::NodeStoreCache : public NodeCache {
 public:
  explicit NodeStoreCache(const client::Store<client::PartialObjectMetadata>& store)
      : store_(store) {}

  std::optional<std::string> nodeUid(const std::string& name) const override {
    const auto node = store_.get(name);
    if (node == nullptr) return std::nullopt;
    return node->metadata.uid;
  }

 private:
  const client::Store<client::PartialObjectMetadata>& store_;
};

StatusOr<std::unique_ptr<Controller>> Controller::create(ControllerOptions options) {
  if (options.api == nullptr) return invalidArgument("controller: api is required");
  if (options.clock == nullptr) return invalidArgument("controller: clock is required");
  if (options.store == nullptr) return invalidArgument("controller: store is required");
  if (options.workers < 1) return invalidArgument("controller: workers must be at least 1");
  if (options.idle_workers < 1) {
    return invalidArgument("controller: idle workers must be at least 1");
  }
  if (options.worker_idle_timeout <= Clock::Duration::zero()) {
    return invalidArgument("controller: worker idle timeout must be positive");
  }
  options.idle_workers = std::min(options.idle_workers, options.workers);
  if (options.adoption_grace < Clock::Duration::zero()) {
    return invalidArgument("controller: adoption grace must not be negative");
  }
  std::unique_ptr<Controller> c(new Controller(options));

  client::InformerOptions<client::ResourceSlices> informer_options;
  informer_options.label_selector = std::string(kManagedByLabel) + "=" + kManagedByValue;
  informer_options.index = [](const client::ResourceSlice& s) {
    return poolIndexKey(s.spec.driver, s.spec.pool.name);
  };
  c->managers_ = std::make_unique<ForeignManagers>();
  informer_options.transform = [managers = c->managers_.get()](client::ResourceSlice& s) {
    managers->note(s);
    dropManagedFields(s);
  };
  if (options.on_watch_restart) {
    informer_options.on_watch_restart =
        [report = options.on_watch_restart](client::WatchRestart reason) {
          report(client::ResourceSlices::kResource, reason);
        };
  }
  Controller* self = c.get();
  client::InformerHandlers<client::ResourceSlices> handlers;
  handlers.on_add = [self](const client::ResourceSlice& s) {
    if (!self->cache_->settled(s, false)) self->enqueueSlice(s);
  };
  handlers.on_update = [self](const client::ResourceSlice& old, const client::ResourceSlice& s) {
    // A slice moved to another pool leaves its old pool one short.
    if (old.spec.driver != s.spec.driver || old.spec.pool.name != s.spec.pool.name) {
      self->enqueueSlice(old);
    }
    if (!self->cache_->settled(s, false)) self->enqueueSlice(s);
  };
  handlers.on_delete = [self](const client::ResourceSlice& s) {
    self->managers_->forget(s.metadata.name);
    if (!self->cache_->settled(s, true)) self->enqueueSlice(s);
  };
  ASSIGN_OR_RETURN(c->informer_, client::Informer<client::ResourceSlices>::create(
                                     *options.api, *options.clock, informer_options, handlers));
  c->cache_ = std::make_unique<StoreCache>(c->informer_->store(), *c->managers_, *options.clock);

  // The Node cache. A Node that appears, goes, or comes back with a new UID
  // (re-created) has its pools reconciled at once: a pool that failed for
  // want of its Node is published without waiting for its backoff, and owner
  // references follow the live UID. Updates of the same Node (status,
  // labels) change nothing the controller uses.
  client::InformerOptions<client::NodeMetadata> node_options;
  node_options.transform = keepNodeIdentity;
  if (options.on_watch_restart) {
    node_options.on_watch_restart = [report =
                                         options.on_watch_restart](client::WatchRestart reason) {
      report(client::NodeMetadata::kResource, reason);
    };
  }
  client::InformerHandlers<client::NodeMetadata> node_handlers;
  node_handlers.on_add = [self](const client::PartialObjectMetadata& node) {
    self->enqueueNode(node.metadata.name);
  };
  node_handlers.on_update = [self](const client::PartialObjectMetadata& old,
                                   const client::PartialObjectMetadata& node) {
    if (old.metadata.uid != node.metadata.uid) self->enqueueNode(node.metadata.name);
  };
  node_handlers.on_delete = [self](const client::PartialObjectMetadata& node) {
    self->enqueueNode(node.metadata.name);
  };
  ASSIGN_OR_RETURN(c->node_informer_,
                   client::Informer<client::NodeMetadata>::create(*options.api, *options.clock,
                                                                  node_options, node_handlers));
  c->nodes_ = std::make_unique<NodeStoreCache>(c->node_informer_->store());

  ReconcilerOptions r;
  r.api = options.api;
  r.clock = options.clock;
  r.store = options.store;
  r.cache = c->cache_.get();
  r.nodes = c->nodes_.get();
  r.observer = options.reconciler_observer;
  r.max_parallel_writes = options.max_parallel_writes;
  r.counter_placement = options.counter_placement;
  // No deletions until leading starts and sets the real grace.
  r.adoption_grace_until = Clock::TimePoint::max();
  ASSIGN_OR_RETURN(c->reconciler_, Reconciler::create(r));

  options.store->setChangeListener([self](const PoolKey& key) {
    self->queue_->addAfter(key, self->options_.batch_window);
    self->growIfBacklogged();
  });
  return c;
}

Controller::Controller(ControllerOptions options) : options_(std::move(options)) {
  limiter_ = defaultControllerRateLimiter<PoolKey>(*options_.clock);
  WorkQueueOptions q;
  q.observer = options_.queue_observer;
  q.release_due_in_get = !options_.manual_for_test;
  queue_ = std::make_unique<WorkQueue<PoolKey>>(*options_.clock, *limiter_, q);
}

int defaultWorkers(int kube_api_burst) {
  return std::clamp(kube_api_burst, kDefaultIdleWorkers, kMaxDefaultWorkers);
}

std::string_view reconcileOutcomeName(ReconcileOutcome outcome) {
  static constexpr auto kNames =
      enumNames<ReconcileOutcome>({{ReconcileOutcome::kSuccess, "success"},
                                   {ReconcileOutcome::kError, "error"},
                                   {ReconcileOutcome::kRequeueAfter, "requeue_after"}});
  return kNames(outcome);
}

ServerRelease probeServerRelease(client::KubeApi& api) {
  StatusOr<client::ServerVersion> version = api.getServerVersion();
  if (!version.ok()) {
    log::warning("Cannot read the API server's version; counter sets go in slices of their own",
                 {{"error", version.status().toString()}});
    return {};
  }
  ServerRelease release;
  release.counter_placement = counterPlacementFor(version->majorNumber(), version->minorNumber());
  release.version = version->git_version;
  log::info("Kubernetes API server",
            {{"version", version->git_version},
             {"counterSets", release.counter_placement == CounterPlacement::kWithConsumers
                                 ? "with their consumers"
                                 : "in slices of their own"}});
  return release;
}

Controller::~Controller() {
  stop();
  options_.store->setChangeListener(nullptr);
}

void Controller::enqueueSlice(const client::ResourceSlice& slice) {
  queue_->add(PoolKey{slice.spec.driver, slice.spec.pool.name});
  growIfBacklogged();
}

void Controller::enqueueNode(const std::string& node) {
  const std::vector<PoolKey> keys = options_.store->keysOnNode(node);
  if (keys.empty()) return;
  log::debug(2, "Node appeared, went or was re-created: reconciling its pools",
             {{"node", node}, {"pools", static_cast<int64_t>(keys.size())}});
  for (const PoolKey& key : keys) queue_->add(key);
  growIfBacklogged();
}

void Controller::start() {
  if (options_.manual_for_test) return;
  informer_->start();
  node_informer_->start();
  WorkerPool* pool = options_.pool;
  if (pool == nullptr) {
    own_pool_ = std::make_unique<WorkerPool>(*options_.clock, "housekeeping", 1);
    pool = own_pool_.get();
  }
  housekeeping_ = pool->lane(1);
  started_ = options_.clock->now();
  housekeeping_->post([this] { housekeepingRound(); });
}

bool Controller::waitForCacheSync(std::stop_token stop) {
  return informer_->waitForSync(stop) && node_informer_->waitForSync(stop);
}

bool Controller::hasSynced() const { return informer_->hasSynced() && node_informer_->hasSynced(); }

StatusOr<PoolPreview> Controller::preview(const PoolKey& key, const Pool* desired) {
  if (!leading_.load()) return unavailable("this replica does not lead; it cannot plan writes");
  return reconciler_->preview(key, desired);
}

void Controller::startLeading(std::stop_token stop) {
  // Before the lock: the probes may wait for the API server.
  std::optional<ServerRelease> release;
  if (options_.server_release_probe && !stop.stop_requested()) {
    release = options_.server_release_probe();
  }
  const CounterPlacement placement =
      release ? release->counter_placement : options_.counter_placement;
  std::optional<std::set<std::string>> dropped;
  if (options_.probe_dropped_fields && !stop.stop_requested()) {
    StatusOr<std::set<std::string>> probed = probeDroppedFields(*options_.api, placement);
    if (probed.ok()) {
      log::info("Learnt which slice fields the API server drops",
                {{"fields", static_cast<int64_t>(probed->size())},
                 {"first", probed->empty() ? std::string("none") : *probed->begin()}});
      dropped = std::move(*probed);
    } else {
      log::warning(
          "Cannot learn which slice fields the API server drops; learning them from "
          "the answers to writes",
          {{"error", probed.status().toString()}});
    }
  }
  // Under mu_, so that stopLeading() either sees the workers or prevents them.
  std::lock_guard lock(mu_);
  if (stop.stop_requested() || stopped_leading_ || leading_.load()) return;
  // The term is whole before leading_ lets a preview (handler threads) or a
  // worker read it.
  Reconciler::Term term;
  term.adoption_grace_until = options_.clock->now() + options_.adoption_grace;
  term.counter_placement = placement;
  if (dropped) term.server_dropped_fields = std::move(*dropped);
  reconciler_->startTerm(std::move(term));
  if (release) options_.store->setServerRelease(*release);
  cache_->noteForeignDeletes(true);
  leading_ = true;
  // Every pool we know of, desired or live, gets a look.
  for (const PoolKey& key : options_.store->keys()) queue_->add(key);
  // Not enqueueSlice(): it may start a worker, which takes mu_; the workers
  // start below.
  for (const SlicePtr& s : informer_->store().list()) {
    queue_->add(PoolKey{s->spec.driver, s->spec.pool.name});
  }
  reportAdopted();
  log::info("Started leading: reconciling",
            {{"workers", options_.workers},
             {"idleWorkers", options_.idle_workers},
             {"adoptionGraceSeconds",
              std::chrono::duration_cast<std::chrono::seconds>(options_.adoption_grace).count()}});
  if (options_.manual_for_test) return;
  for (int i = 0; i < options_.idle_workers; ++i) startWorkerLocked(false);
  if (options_.observer != nullptr) options_.observer->activeWorkers(0);
}

void Controller::startWorkerLocked(bool extra) {
  reapEndedWorkersLocked();
  Worker& w = workers_.emplace_back();
  ++running_workers_;
  peak_workers_ = std::max(peak_workers_, running_workers_);
  ++free_workers_;
  w.thread = std::thread([this, extra, ended = &w.ended] {
    setThreadName("reconcile");
    workerLoop(extra);
    std::lock_guard lock(mu_);
    *ended = true;
    --running_workers_;  // the next grow may start another at once
  });
}

void Controller::reapEndedWorkersLocked() {
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (!it->ended) {
      ++it;
      continue;
    }
    // Its last step was to set `ended` under mu_: the join is immediate.
    it->thread.join();
    it = workers_.erase(it);
  }
}

void Controller::growIfBacklogged() {
  if (!leading_ || options_.manual_for_test) return;
  // Keys ready now, or delayed ones that only a waiting worker releases.
  const size_t ready = queue_->len();
  const size_t wanted = ready + (ready == 0 && queue_->delayedLen() > 0 ? 1 : 0);
  if (wanted <= static_cast<size_t>(free_workers_.load())) return;
  std::lock_guard lock(mu_);
  // Again under mu_: another thread may have just started a worker (it counts
  // as free from then). stopLeading() clears leading_ under mu_.
  if (!leading_ || queue_->shuttingDown()) return;
  if (running_workers_ >= static_cast<size_t>(options_.workers)) return;
  if (wanted <= static_cast<size_t>(free_workers_.load())) return;
  startWorkerLocked(true);
}

void Controller::reportAdopted() {
  std::map<PoolKey, std::vector<SlicePtr>> pools;
  size_t slices = 0;
  for (const SlicePtr& s : informer_->store().list()) {
    pools[PoolKey{s->spec.driver, s->spec.pool.name}].push_back(s);
    ++slices;
  }
  if (pools.empty()) return;
  log::info(
      "Adopted the live slices: each pool stays as it is while its driver pushes again",
      {{"pools", static_cast<int64_t>(pools.size())}, {"slices", static_cast<int64_t>(slices)}});
  if (options_.observer == nullptr) return;
  for (const auto& [key, live] : pools) {
    int64_t generation = 0;
    for (const SlicePtr& s : live) generation = std::max(generation, s->spec.pool.generation);
    options_.observer->slicesAdopted(key, poolReference(live, std::nullopt), live.size(),
                                     generation);
  }
}

void Controller::stopLeading() {
  std::list<Worker> workers;
  {
    std::lock_guard lock(mu_);
    stopped_leading_ = true;
    leading_ = false;
    cache_->noteForeignDeletes(false);
    // Wakes the workers blocked in get(); a worker that gets a key now sees
    // leading_ false and gives it back untouched.
    queue_->shutDown();
    workers.swap(workers_);
  }
  for (Worker& w : workers) w.thread.join();
  log::info("Stopped leading: workers stopped",
            {{"workers", static_cast<int64_t>(workers.size())}});
}

void Controller::stop() {
  // Let in-flight reconciles finish their writes, then stop.
  queue_->shutDownWithDrain();
  std::list<Worker> workers;
  {
    std::lock_guard lock(mu_);
    workers.swap(workers_);
  }
  for (Worker& w : workers) w.thread.join();
  // Drops the next round and waits for a running one.
  if (housekeeping_) housekeeping_->drain();
  if (own_pool_) own_pool_->stop();
  informer_->stop();
  node_informer_->stop();
}

bool Controller::processNextItemForTest() { return processNextItem(false); }

SliceCache& Controller::cacheForTest() { return *cache_; }

bool Controller::waitIdleForTest() {
  // The number of workers changes while they take keys (extras start), so it
  // is read again until the queue is idle with as many getters as workers.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < give_up) {
    const size_t workers = workerCountForTest();
    if (queue_->waitIdleForTest(workers, std::chrono::milliseconds(50)) &&
        workerCountForTest() == workers) {
      return true;
    }
  }
  return false;
}

size_t Controller::workerCountForTest() const {
  std::lock_guard lock(mu_);
  return running_workers_;
}

size_t Controller::peakWorkersForTest() const {
  std::lock_guard lock(mu_);
  return peak_workers_;
}

bool Controller::processNextItem(bool block, std::optional<Clock::Duration> max_wait) {
  if (!leading_ || (!block && queue_->len() == 0)) return false;
  std::optional<PoolKey> key = queue_->getWithin(max_wait);
  if (!key) return false;
  if (!leading_) {
    // Leadership ended while this worker waited: no reconcile may start.
    queue_->done(*key);
    return false;
  }
  --free_workers_;
  // More keys than free workers: another worker takes the next one.
  growIfBacklogged();
  const int active = ++active_workers_;
  if (options_.observer != nullptr) options_.observer->activeWorkers(active);

  const Clock::TimePoint start = options_.clock->now();
  if (options_.observer != nullptr) options_.observer->reconcileStarts(*key);
  cache_->beginReconcile(*key);
  const ReconcileResult result = reconciler_->reconcile(*key);
  // A foreign change that arrived meanwhile needs another look (the key is
  // still processing, so the queue hands it out again after done()).
  if (cache_->endReconcile(*key)) queue_->add(*key);
  const Clock::Duration took = options_.clock->now() - start;

  ReconcileOutcome outcome = ReconcileOutcome::kSuccess;
  if (!result.status.ok()) {
    outcome = ReconcileOutcome::kError;
    log::error("Reconcile failed, will retry", result.status,
               {{"driver", key->driver},
                {"pool", key->pool},
                {"retries", static_cast<int64_t>(queue_->numRequeues(*key))}});
    queue_->addRateLimited(*key);
  } else {
    queue_->forget(*key);
    if (result.requeue_after) {
      outcome = ReconcileOutcome::kRequeueAfter;
      queue_->addAfter(*key, *result.requeue_after);
    }
  }
  if (options_.observer != nullptr) {
    options_.observer->reconciled(outcome, took);
    options_.observer->activeWorkers(--active_workers_);
  } else {
    --active_workers_;
  }
  if (options_.observer != nullptr) options_.observer->reconcileEnds(*key);
  ++free_workers_;
  queue_->done(*key);
  return true;
}

void Controller::workerLoop(bool extra) {
  // The kept workers wait for ever; an extra one ends when it found no key
  // for worker_idle_timeout (or leadership or the queue ended).
  const std::optional<Clock::Duration> max_wait =
      extra ? std::optional(options_.worker_idle_timeout) : std::nullopt;
  while (processNextItem(true, max_wait)) {
  }
  --free_workers_;
}

void Controller::housekeeping() {
  queue_->updateUnfinishedWork();
  // Withdraw pools whose lease ran out (the store enqueues them).
  for (const PoolKey& key : options_.store->expireLeases()) {
    log::info("Pool lease expired: withdrawing", {{"driver", key.driver}, {"pool", key.pool}});
    if (options_.observer == nullptr) continue;
    options_.observer->leaseExpired(key.driver);
    const client::ObjectReference regarding =
        poolReference(cache_->slicesOfPool(key), std::nullopt);
    if (!regarding.kind.empty()) options_.observer->poolLeaseExpired(key, regarding);
  }
  if (options_.observer == nullptr) return;
  // Gauges: desired pools, and the slices and devices live in the cache.
  std::map<std::string, DriverCounts> counts;
  for (const PoolKey& key : options_.store->keys()) counts[key.driver].pools++;
  for (const SlicePtr& s : informer_->store().list()) {
    DriverCounts& c = counts[s->spec.driver];
    c.slices++;
    c.devices += static_cast<int64_t>(s->spec.devices.size());
  }
  options_.observer->counts(counts);
}

bool Controller::checkCacheSync(Clock::TimePoint started) {
  if (options_.start_timeout <= Clock::Duration::zero() || !options_.on_fatal) return true;
  if (hasSynced()) return true;
  if (options_.clock->now() - started < options_.start_timeout) return false;
  const bool slices = !informer_->hasSynced();
  const Status why = slices ? informer_->lastListError() : node_informer_->lastListError();
  options_.on_fatal(deadlineExceeded(
      std::string(slices ? "ResourceSlices" : "Node metadata") + " not listed within " +
      std::to_string(
          std::chrono::duration_cast<std::chrono::seconds>(options_.start_timeout).count()) +
      " s (flag --start-timeout)" + (why.ok() ? "" : ": " + why.toString())));
  return true;
}

void Controller::housekeepingRound() {
  if (!sync_settled_) sync_settled_ = checkCacheSync(started_);
  // Leases are only enforced by the leader; followers hold no pools.
  housekeeping();
  // Refused once stop() drained the lane.
  housekeeping_->postAt(options_.clock->now() + kHousekeepingPeriod,
                        [this] { housekeepingRound(); });
}

}  // namespace rsc::controller::reconcile
