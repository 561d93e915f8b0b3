// Controller: the reconcile loop. It watches managed ResourceSlices and the
// metadata of Nodes through two informers (every replica keeps both caches
// warm), and, once told it leads, runs workers that take (driver, pool) keys
// from the work queue and reconcile them; failed keys are retried with per-key
// backoff, so one bad pool never delays another. Pushes enqueue through the
// DesiredStore's change listener; foreign changes to managed slices, and a
// Node that appears, goes or is re-created, enqueue through the informers'
// handlers. Threading: the informers' threads only enqueue; workers block on
// the queue, `idle_workers` of them at all times while leading, and more, up
// to `workers`, while keys wait and no worker is free (a burst of pushes gets
// its writes in flight at once, up to the client's QPS budget, and a quiet
// controller keeps few threads); an extra worker that finds no key for
// `worker_idle_timeout` ends. Housekeeping (lease expiry, gauges) is a task every
// second on the service's WorkerPool, or on a pool of its own with one thread
// when none is given. All public methods are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "client/informer.h"
#include "client/kube_api.h"
#include "common/clock.h"
#include "common/status.h"
#include "common/worker_pool.h"
#include "controller/reconcile/desired_store.h"
#include "controller/reconcile/rate_limiter.h"
#include "controller/reconcile/reconciler.h"
#include "controller/reconcile/work_queue.h"

namespace rsc::controller::reconcile {

// How long a new leader leaves alone the slices of pools nobody has pushed to
// it yet: drivers re-push after a restart or failover (they retry when a renew
// answers 404), and two minutes covers their retry with room to spare, while a
// driver that is really gone has its pools withdrawn soon after.
inline constexpr Clock::Duration kDefaultAdoptionGrace = std::chrono::minutes(2);
// Several pushes of one pool within this window cost one reconcile. Short
// enough not to matter for publish latency.
inline constexpr Clock::Duration kDefaultBatchWindow = std::chrono::milliseconds(10);
// Reconcile workers kept while nothing is queued, and how long an extra
// worker (started for a burst) waits for a key before it ends.
inline constexpr int kDefaultIdleWorkers = 4;
inline constexpr Clock::Duration kDefaultWorkerIdleTimeout = std::chrono::seconds(30);
// The default of --workers: one reconcile in flight per request the client's
// budget lets out at once (--kube-api-burst), at least the idle workers and at
// most kMaxDefaultWorkers, so that a burst of pushes keeps as many writes in
// flight as the token bucket allows and no more.
inline constexpr int kMaxDefaultWorkers = 64;
int defaultWorkers(int kube_api_burst);
// How often leases are checked and gauges refreshed.
inline constexpr Clock::Duration kHousekeepingPeriod = std::chrono::seconds(1);

// Per-driver totals for the pools, slices and devices gauges.
struct DriverCounts {
  int64_t pools = 0;
  int64_t slices = 0;
  int64_t devices = 0;
};

// How one reconcile ended, as controller-runtime counts it.
enum class ReconcileOutcome { kSuccess, kError, kRequeueAfter };
// "success", "error", "requeue_after".
std::string_view reconcileOutcomeName(ReconcileOutcome outcome);

// Hooks for metrics, so that reconcile/ does not depend on metrics/.
class ControllerObserver {
 public:
  virtual ~ControllerObserver() = default;
  virtual void reconciled(ReconcileOutcome outcome, Clock::Duration took) = 0;
  // A worker starts reconciling `key`, and has ended (before the queue may
  // hand the key to another worker).
  virtual void reconcileStarts(const PoolKey& /*key*/) {}
  virtual void reconcileEnds(const PoolKey& /*key*/) {}
  virtual void activeWorkers(int n) = 0;
  virtual void counts(const std::map<std::string, DriverCounts>& by_driver) = 0;
  virtual void leaseExpired(const std::string& driver) = 0;
  // A pool's lease expired and the pool is being withdrawn; `regarding` is
  // poolReference() of its live slices.
  virtual void poolLeaseExpired(const PoolKey& /*key*/,
                                const client::ObjectReference& /*regarding*/) {}
  // Leading started with `slices` live slices of a pool (at `generation`),
  // kept as they are while its driver pushes again.
  virtual void slicesAdopted(const PoolKey& /*key*/, const client::ObjectReference& /*regarding*/,
                             size_t /*slices*/, int64_t /*generation*/) {}
};

struct ControllerOptions {
  // Required.
  client::KubeApi* api = nullptr;
  Clock* clock = nullptr;
  DesiredStore* store = nullptr;
  // Optional.
  // Most pools reconciled at once (threads started as keys wait).
  int workers = 4;
  // Workers kept while idle (at most `workers`), and how long another one
  // waits for a key before it ends.
  int idle_workers = kDefaultIdleWorkers;
  Clock::Duration worker_idle_timeout = kDefaultWorkerIdleTimeout;
  // Slice writes of one pool under way at once (ReconcilerOptions).
  int max_parallel_writes = 8;
  // ReconcilerOptions::counter_placement.
  CounterPlacement counter_placement = CounterPlacement::kOwnSlices;
  // When set, asked once as leading starts (the caches have synced, so the
  // API server answers; not at start, which must not wait for it): its
  // counter placement replaces counter_placement, and the release goes to
  // the DesiredStore for push validation.
  std::function<ServerRelease()> server_release_probe;
  // Learn what the API server drops of a slice as leading starts, with
  // dry-run creates (dropped_fields.h), so that the first reconcile knows it;
  // if that fails, it is learnt from the answers to writes. main.cc turns it
  // on; off by default so that tests count only the calls they expect.
  bool probe_dropped_fields = false;
  Clock::Duration adoption_grace = kDefaultAdoptionGrace;
  Clock::Duration batch_window = kDefaultBatchWindow;
  ControllerObserver* observer = nullptr;
  ReconcilerObserver* reconciler_observer = nullptr;
  WorkQueueObserver* queue_observer = nullptr;
  // An informer's watch restarted: resource is "resourceslices" or "nodes",
  // reason as InformerOptions::on_watch_restart says.
  std::function<void(std::string_view resource, client::WatchRestart reason)> on_watch_restart;
  // --start-timeout: caches not synced this long after start() are a failure,
  // reported once to on_fatal with the informer's last list error (RBAC, an
  // API server out of reach). Zero or no on_fatal: never.
  Clock::Duration start_timeout = Clock::Duration::zero();
  std::function<void(Status)> on_fatal;
  // Where housekeeping runs (one task at a time, on a lane of its own); must
  // outlive the controller. Null: a pool of one "housekeeping" thread.
  WorkerPool* pool = nullptr;
  // Tests drive the loop themselves: no informer threads (a test starts
  // them), no workers, no housekeeping, and the queue releases delayed keys
  // only on releaseDueForTest().
  bool manual_for_test = false;
};

// Asks the API server for its release (ControllerOptions::server_release_probe):
// counter sets go where it accepts them. When it cannot be read, the placement
// of Kubernetes 1.35 and later; a 1.34 server with partitionable devices on
// then refuses such pools, and the refusal is in their status.
ServerRelease probeServerRelease(client::KubeApi& api);

class Controller : public PoolPreviewer {
 public:
  static StatusOr<std::unique_ptr<Controller>> create(ControllerOptions options);
  ~Controller();

  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Starts the informers and the housekeeping thread. Workers wait for
  // startLeading().
  void start();
  // Blocks until both caches (slices and Nodes) hold their first full list,
  // or `stop` is requested. The informers list at the same time, so this
  // waits for the slower of the two.
  bool waitForCacheSync(std::stop_token stop);
  bool hasSynced() const;
  // Starts reconciling: adopts the live slices (the grace period starts now)
  // and enqueues every known pool. Does nothing once `stop` is requested or
  // stopLeading() has run, so that a leader that lost its lease while it
  // waited for the cache never starts workers.
  void startLeading(std::stop_token stop = {});
  bool leading() const { return leading_.load(); }
  // PoolPreviewer: what reconciling the pool would write now. Unavailable
  // while this replica does not lead (its cache and the server's release may
  // not be what the leader's are).
  StatusOr<PoolPreview> preview(const PoolKey& key, const Pool* desired) override;
  // Ends leadership for good, at once: workers take no further key (the keys
  // still queued are left alone) and are joined before this returns; a
  // reconcile in flight ends first (its writes are refused once the lease is
  // gone). The informers keep running. For a lost lease.
  void stopLeading();
  // Stops taking new work, lets in-flight reconciles finish, then stops the
  // workers, the informers and the housekeeping thread.
  void stop();

  // Test hooks: the informers (to start them), one synchronous step of a
  // worker (returns false when the queue is empty), and housekeeping.
  client::Informer<client::ResourceSlices>& informerForTest() { return *informer_; }
  client::Informer<client::NodeMetadata>& nodeInformerForTest() { return *node_informer_; }
  bool processNextItemForTest();
  void housekeepingForTest() { housekeeping(); }
  WorkQueue<PoolKey>& queueForTest() { return *queue_; }
  // Blocks until every worker thread waits for a key with nothing queued and
  // no key is being processed (with no workers: until none is); false after
  // a safety timeout.
  bool waitIdleForTest();
  SliceCache& cacheForTest();
  // Worker threads running now, and the most that ran at once.
  size_t workerCountForTest() const;
  size_t peakWorkersForTest() const;

 private:
  class StoreCache;
  class NodeStoreCache;
  class ForeignManagers;

  explicit Controller(ControllerOptions options);
  void enqueueSlice(const client::ResourceSlice& slice);
  // Enqueues the node-local pools of Node `node`.
  void enqueueNode(const std::string& node);
  // One key: waits for it (at most `max_wait` when given), reconciles it and
  // marks it done. False when none came.
  bool processNextItem(bool block, std::optional<Clock::Duration> max_wait = std::nullopt);
  // A worker; an `extra` one ends after worker_idle_timeout without a key.
  void workerLoop(bool extra);
  // Starts a worker thread. Requires mu_.
  void startWorkerLocked(bool extra);
  // Starts a worker when keys wait (or are due soon) and none is free, up to
  // `workers`. Requires mu_ not held.
  void growIfBacklogged();
  // Joins the workers that ended. Requires mu_.
  void reapEndedWorkersLocked();
  void housekeeping();
  // One round on the pool: the start-up check, housekeeping(), and the next
  // round a period later.
  void housekeepingRound();
  // Reports caches still unsynced past start_timeout; true once settled.
  bool checkCacheSync(Clock::TimePoint started);
  // Reports the live slices of every pool as adopted (leading starts).
  void reportAdopted();

  ControllerOptions options_;
  std::unique_ptr<RateLimiter<PoolKey>> limiter_;
  std::unique_ptr<WorkQueue<PoolKey>> queue_;
  std::unique_ptr<client::Informer<client::ResourceSlices>> informer_;
  std::unique_ptr<client::Informer<client::NodeMetadata>> node_informer_;
  std::unique_ptr<ForeignManagers> managers_;
  std::unique_ptr<StoreCache> cache_;
  std::unique_ptr<NodeStoreCache> nodes_;
  std::unique_ptr<Reconciler> reconciler_;
  std::atomic<bool> leading_{false};
  std::atomic<int> active_workers_{0};
  mutable std::mutex mu_;
  bool stopped_leading_ = false;  // guarded by mu_
  // A worker thread, and whether its loop has returned (it is joined then).
  struct Worker {
    std::thread thread;
    bool ended = false;
  };
  std::list<Worker> workers_;   // guarded by mu_
  size_t running_workers_ = 0;  // guarded by mu_: in workers_ and not ended
  size_t peak_workers_ = 0;     // guarded by mu_
  // Workers not inside a reconcile (waiting for a key, or about to).
  std::atomic<int> free_workers_{0};
  // Housekeeping: its pool when none was given, its lane, and (on the lane
  // only) when it started and whether the start-up check is settled.
  std::unique_ptr<WorkerPool> own_pool_;
  std::unique_ptr<WorkerPool::Lane> housekeeping_;
  Clock::TimePoint started_{};
  bool sync_settled_ = false;
};

}  // namespace rsc::controller::reconcile
