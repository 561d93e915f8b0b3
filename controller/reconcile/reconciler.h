// Reconciler: brings the live ResourceSlices of one pool to the desired state
// with the fewest writes: keep the pool generation when exactly one existing
// slice changes and none is added or removed, otherwise bump it and rewrite
// every slice, writing the new generation before deleting obsolete slices.
// Content the API server refuses is not written again, and what was published
// stays (or is put back) until the driver pushes something else. It holds
// business logic only and returns a result; retries and backoff belong to the
// controller loop. reconcile() is called by one worker per key at a time (the
// work queue guarantees it); different keys may run concurrently.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "client/kube_api.h"
#include "common/clock.h"
#include "common/status.h"
#include "controller/reconcile/desired_store.h"
#include "controller/reconcile/planner.h"
#include "controller/reconcile/preview.h"
#include "controller/reconcile/write_executor.h"

namespace rsc::controller::reconcile {

inline constexpr char kManagedByLabel[] = "app.kubernetes.io/managed-by";
inline constexpr char kManagedByValue[] = "resourceslice-controller";
// The field manager of the controller's writes: the API server names a
// manager after the writer's User-Agent (client::kDefaultUserAgent).
inline constexpr char kFieldManager[] = "resourceslice-controller";

// What an Event is about (client/event_recorder.h): a slice, or a pool, whose
// object is its first live slice by name, else its Node when node-local; the
// reference's kind is empty when the pool has neither.
client::ObjectReference sliceReference(const client::ResourceSlice& slice);
client::ObjectReference poolReference(const std::vector<SlicePtr>& live,
                                      const std::optional<std::string>& node_name);

// What the reconciler needs of the slice cache (the informer's store): the
// live managed slices of a pool, and a way to make its own writes visible at
// once, so that the next reconcile never creates a slice twice.
class SliceCache {
 public:
  virtual ~SliceCache() = default;
  virtual std::vector<SlicePtr> slicesOfPool(const PoolKey& key) const = 0;
  virtual void assumeWritten(const client::ResourceSlice& stored) = 0;
  virtual void assumeDeleted(const client::ResourceSlice& last) = 0;
  // Before a delete is sent, and after it failed without a doubt (the server
  // answered it): the watch event of a delete whose answer was lost must not
  // pass for someone else's.
  virtual void deleting(const std::string& /*name*/) {}
  virtual void deleteFailed(const std::string& /*name*/) {}
  // The field manager of the newest change to slice `name` by someone other
  // than the controller (from its managedFields); empty when unknown.
  virtual std::string lastForeignManager(const std::string& /*name*/) const { return {}; }

  // The slices of a pool that left the cache other than by the controller's
  // own deletes since the last call for the pool (cleared by the call), and
  // when the first of them left. A slice that lost the managed-by label leaves
  // the label-selected cache as if deleted: the reconciler reads each back.
  struct ForeignDeletes {
    std::vector<std::string> names;
    Clock::TimePoint first_seen{};
  };
  virtual ForeignDeletes takeForeignDeletes(const PoolKey& /*key*/) { return {}; }
};

// What the reconciler needs of the Node cache: a Node's live UID by name, for
// the owner references of node-local slices, without an API call per pool.
class NodeCache {
 public:
  virtual ~NodeCache() = default;
  // The UID of Node `name` as the cache last saw it; nullopt when the cache
  // does not hold it (then the reconciler reads the Node from the API server).
  virtual std::optional<std::string> nodeUid(const std::string& name) const = 0;
};

// Hooks for metrics and logs, so that reconcile/ does not depend on metrics/.
// A slice write: its verb, and how it ended (kConflict: a 409, stale
// resourceVersion or failed precondition, retried by the next reconcile).
enum class WriteVerb { kCreate, kUpdate, kDelete };
enum class WriteOutcome { kSuccess, kConflict, kError };
// "create", "update", "delete"; "success", "conflict", "error".
std::string_view writeVerbName(WriteVerb verb);
std::string_view writeOutcomeName(WriteOutcome outcome);

class ReconcilerObserver {
 public:
  virtual ~ReconcilerObserver() = default;
  // Called from several threads at once (a pool's writes run concurrently).
  virtual void sliceWrite(const std::string& driver, WriteVerb verb, WriteOutcome outcome) = 0;
  // A pool's pushed content reached the API server `latency` after the push.
  virtual void published(const std::string& driver, Clock::Duration latency) = 0;
  // Someone else changed a slice of a published pool, and the reconcile
  // wrote the pool's content back. `changed_by`: their field manager, or
  // empty when unknown.
  virtual void foreignChangeReverted(const PoolKey& /*key*/,
                                     const client::ObjectReference& /*slice*/,
                                     const std::string& /*changed_by*/) {}
  // Writing a pool failed with `error` (retried with backoff); `regarding`
  // is poolReference() of the pool.
  virtual void publishFailed(const PoolKey& /*key*/, const client::ObjectReference& /*regarding*/,
                             const Status& /*error*/) {}
  // The pool bound to Node `node` (`regarding`) is held: someone else
  // deleted its slices there, and it waits for its driver to push or renew.
  virtual void poolHeld(const PoolKey& /*key*/, const client::ObjectReference& /*regarding*/,
                        const std::string& /*node*/) {}
};

struct ReconcileResult {
  Status status;
  // Reconcile again after this long even without a change (e.g. the end of
  // the adoption grace period).
  std::optional<Clock::Duration> requeue_after;
};

struct ReconcilerOptions {
  // Required.
  client::KubeApi* api = nullptr;
  Clock* clock = nullptr;
  DesiredStore* store = nullptr;
  SliceCache* cache = nullptr;
  // Optional.
  // Without it, every reconcile of a node-local pool reads its Node.
  NodeCache* nodes = nullptr;
  ReconcilerObserver* observer = nullptr;
  // Until then, slices of pools nobody has pushed since this process started
  // are left alone: their drivers are expected to push again after a restart
  // or failover. Pools withdrawn explicitly are deleted at once.
  Clock::TimePoint adoption_grace_until{};
  // How often an update that conflicts (409) is re-read and retried before
  // the reconcile fails and is retried with backoff.
  int max_conflict_retries = 3;
  // Writes of one pool that run at the same time (on the reconciling thread
  // and up to this many minus one helpers), so that a new generation reaches
  // the API server in about one round trip instead of one per slice. 1:
  // one after another. The helpers are one WriteExecutor shared by every
  // reconcile: this many minus one threads in all.
  int max_parallel_writes = 8;
  // Where the automatic split puts counter sets: what the API server accepts
  // (counterPlacementFor its version).
  CounterPlacement counter_placement = CounterPlacement::kOwnSlices;
  // Fields the API server drops from every slice, as fieldShape()s
  // (dropped_fields.h): a field we want that a live slice lacks is no change
  // when its shape is here, as when the answer to one of our writes of the
  // pool said so. Empty: learnt from those answers alone.
  std::set<std::string> server_dropped_fields;
};

class Reconciler : public PoolPreviewer {
 public:
  // Fails with InvalidArgument if a required option is missing.
  static StatusOr<std::unique_ptr<Reconciler>> create(ReconcilerOptions options);

  ReconcileResult reconcile(const PoolKey& key);

  // PoolPreviewer. Thread-safe like reconcile(); the pool's own reconcile
  // may run at the same time (the preview then shows one of the two states).
  StatusOr<PoolPreview> preview(const PoolKey& key, const Pool* desired) override;

  // What a leadership term decides as it starts (ReconcilerOptions holds the
  // first): published as one value before the term's first reconcile or
  // preview, which each read one term throughout, never a half-set one.
  struct Term {
    Clock::TimePoint adoption_grace_until{};
    CounterPlacement counter_placement = CounterPlacement::kOwnSlices;
    std::set<std::string> server_dropped_fields;
  };
  void startTerm(Term term);

 private:
  // The outcome of writing one pool's content.
  struct Applied;
  // What writing one pool's content takes, decided before anything is
  // written.
  struct Decision;

  explicit Reconciler(ReconcilerOptions options);
  std::shared_ptr<const Term> term() const;

  // The pool's slices in the cache, plus known slices the cache lost because
  // their managed-by label was removed or changed (read back by name), and
  // so are those in `deleted` (reported gone by the watch). When `gone` is
  // set, it tells whether a slice of `deleted` is gone from the server.
  StatusOr<std::vector<SlicePtr>> liveSlices(const PoolKey& key,
                                             const std::optional<PoolStatus>& status,
                                             const std::vector<std::string>& deleted = {},
                                             bool* gone = nullptr);
  // Plans `pool` over `live` and decides the generation and which slices
  // change. Reads the Node of a node-local pool (cache or GET).
  StatusOr<Decision> decide(const PoolKey& key, const Pool& pool, std::vector<SlicePtr> live,
                            const std::optional<PoolStatus>& status);
  // The slice planned at `i`, as it would be written.
  static client::ResourceSlice buildSlice(const PoolKey& key, const Decision& d, size_t i);
  // The slices withdraw() deletes.
  static std::vector<SlicePtr> ownedForWithdrawal(std::vector<SlicePtr> live,
                                                  const std::optional<PoolStatus>& status);
  // Writes `pool` over `live`. Writes nothing else after the first failure.
  Applied apply(const PoolKey& key, const Pool& pool, std::vector<SlicePtr> live,
                const std::optional<PoolStatus>& status);
  // After the API server refused the desired content: keeps the content
  // last published, writing it back if a refused attempt changed the pool.
  ReconcileResult keepPublished(const PoolKey& key, std::vector<SlicePtr> live,
                                const PoolStatus& status);
  ReconcileResult withdraw(const PoolKey& key, std::vector<SlicePtr> live,
                           const std::optional<PoolStatus>& status);
  // Holds the node-local pool `desired` (its slices were deleted by someone
  // else at `deleted_at`), if the store agrees; returns whether it did.
  bool placeHold(const DesiredPool& desired, Clock::TimePoint deleted_at);
  // A held pool: deletes what is left of its slices and keeps it so.
  ReconcileResult keepHeld(const PoolKey& key, std::vector<SlicePtr> live,
                           const PoolStatus& status);
  // The UID of Node `name`: from the Node cache, or else from one GET.
  StatusOr<std::string> nodeUid(const std::string& name);
  Status deleteSlice(const PoolKey& key, const SlicePtr& slice);
  StatusOr<client::ResourceSlice> updateSlice(const PoolKey& key, client::ResourceSlice slice);
  StatusOr<client::ResourceSlice> createSlice(const PoolKey& key,
                                              const client::ResourceSlice& slice);
  void recordWrite(const std::string& driver, WriteVerb verb, const Status& status);
  void fail(const PoolKey& key, const Status& status);
  // Logs and reports each slice of `edited` as a foreign change written back.
  void reportReverted(const PoolKey& key,
                      const std::vector<std::pair<SlicePtr, std::string>>& edited);

  ReconcilerOptions options_;
  WriteExecutor writes_;
  mutable std::mutex term_mu_;
  std::shared_ptr<const Term> term_;  // guarded by term_mu_
};

}  // namespace rsc::controller::reconcile
