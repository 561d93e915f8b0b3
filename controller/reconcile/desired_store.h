// DesiredStore: the desired state of every pool, as drivers pushed it, and
// the status of each pool as the reconciler last saw it. The inventory API
// writes desired pools and reads statuses; the reconciler reads desired pools
// and writes statuses. A change of a pool's content calls the change listener
// with its key (the controller enqueues it); a status change calls the status
// listener (the inventory API answers waiting pushes).
// A pool's content is immutable once put; a repeated push of equal content
// or a renewal moves its lease without copying it.
// Thread-safe: one mutex; listeners are called outside it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/siphash.h"
#include "common/status.h"
#include "controller/reconcile/planner.h"
#include "controller/reconcile/pool.h"

namespace rsc::controller::reconcile {

// One content of a pool, shared as shared_ptr<const>: the store keeps it for
// as long as pushes bring equal content, so each content exists once.
struct DesiredPool {
  PoolKey key;
  Pool pool;
  // Increases with every change of any pool's content; a status whose
  // published_version reaches it has published this content.
  uint64_t version = 0;
  // When this content was first pushed (publish latency counts from here).
  Clock::TimePoint pushed_at;
};

// What the controller learns of the API server's release when leading starts.
struct ServerRelease {
  // Where the automatic split must put counter sets (counterPlacementFor).
  CounterPlacement counter_placement = CounterPlacement::kOwnSlices;
  // gitVersion ("v1.34.2"), for messages; empty when unknown.
  std::string version;
};

// kHeld: the pool's node-local slices were deleted by someone else (the
// kubelet at its start, or 30 s after the driver's kubelet plugin went), so
// its slices are withdrawn and stay so until the driver pushes or renews it.
enum class PoolPhase { kPending, kPublished, kFailed, kWithdrawing, kHeld };

std::string_view poolPhaseName(PoolPhase phase);

// The node a pool is bound to: its nodeName, or under perDeviceNodeSelection
// the one node every device names (slices chosen by the driver included);
// nullopt for a pool placed by selector or on all nodes, or spread over nodes.
std::optional<std::string> boundNode(const Pool& pool);

// Why a pool is held (PoolPhase::kHeld).
struct PoolHold {
  std::string node;
  // For the pool's status: a CamelCase reason and a sentence.
  std::string reason;
  std::string message;
};

struct PoolStatus {
  PoolKey key;
  PoolPhase phase = PoolPhase::kPending;
  uint64_t desired_version = 0;
  uint64_t published_version = 0;
  int64_t published_generation = 0;
  std::vector<std::string> slice_names;
  // The last reconcile error, OK when the last reconcile succeeded.
  Status last_error;
  std::optional<Clock::SystemTime> last_push;
  // Fields the API server dropped (features disabled there), as field paths.
  std::vector<std::string> dropped_fields;
  // Set while the pool is held (phase kHeld).
  std::optional<PoolHold> hold;

  // The reconciler's memory of the pool (not part of the API's answer):
  // The content last published in full (or, after a restart, the pool as
  // it was live); put back when the API server refuses a newer one.
  std::shared_ptr<const DesiredPool> published_pool;
  // The desired version whose writes the API server refused (400, 403, 413,
  // 422): not written again, and the pool not bumped again, until the
  // content changes. 0: none.
  uint64_t rejected_version = 0;
  // Every slice of the pool this process has seen or written, so that one
  // that lost the managed-by label (and so left the label-selected cache) is
  // found again by name and taken back rather than duplicated.
  std::vector<std::string> known_slices;
  // A push or renewal released the pool from a hold: its next publication
  // is a republication (logged as such).
  bool released = false;
};

class DesiredStore {
 public:
  using Listener = std::function<void(const PoolKey&)>;

  explicit DesiredStore(Clock& clock) : clock_(clock) {}

  // Set once, before concurrent use.
  void setChangeListener(Listener listener) { on_change_ = std::move(listener); }
  void setStatusListener(Listener listener) { on_status_ = std::move(listener); }

  // Sets the desired state of one pool and renews its lease. Returns the
  // version to wait for: a push equal to the current content keeps its
  // version and does not call the change listener (it costs no reconcile).
  // `body_digest`, when set, is the digest of the request body `pool` was
  // decoded from: it is kept with the content until the content changes, so
  // that the same body again can be taken for this content without decoding
  // it (getByBodyDigest, repeatPush).
  uint64_t put(const PoolKey& key, Pool pool,
               const std::optional<Digest128>& body_digest = std::nullopt);

  // The pool's content, if a body with this digest set it or was put for it
  // since it last changed; else null. A different body of equal content
  // replaces the digest; other content, a removal or an expired lease drops it.
  std::shared_ptr<const DesiredPool> getByBodyDigest(const PoolKey& key,
                                                     const Digest128& body_digest) const;

  // Records a push of the content the pool has, at `version`, exactly as a
  // put() of equal content would (lease renewed, push time, status listener),
  // without the content. Returns false and changes nothing when the pool's
  // content is no longer at `version` (withdrawn or changed meanwhile).
  bool repeatPush(const PoolKey& key, uint64_t version);

  // Replaces everything `driver` has: pools missing from `pools` are removed.
  // Returns the version of each pool put.
  std::map<std::string, uint64_t> replaceDriver(const std::string& driver,
                                                std::map<std::string, Pool> pools);

  // Removes a pool (its slices are withdrawn). Returns false if unknown.
  bool remove(const PoolKey& key);

  // Extends a pool's lease without changing it. Returns false if unknown.
  // A held pool is released (and reconciled: republished).
  bool renew(const PoolKey& key);

  // Holds a desired pool (phase kHeld, `hold` in its status) because its
  // slices were deleted by someone else at `deleted_at`, unless its driver
  // pushed or renewed it since then (the driver is back already) or it is
  // held already. Every push of the pool and every renewal releases it.
  // Returns whether the pool is newly held.
  bool hold(const PoolKey& key, Clock::TimePoint deleted_at, PoolHold hold);

  // Removes the pools whose lease ran out by now and returns their keys.
  std::vector<PoolKey> expireLeases();
  // Returns the earliest lease deadline, if any pool has a lease.
  std::optional<Clock::TimePoint> nextLeaseDeadline() const;
  // When the pool is withdrawn unless renewed, TimePoint::max() for never;
  // nullopt for a pool not desired.
  std::optional<Clock::TimePoint> leaseDeadline(const PoolKey& key) const;

  std::shared_ptr<const DesiredPool> get(const PoolKey& key) const;
  // Keys of every desired pool, sorted; of one driver if `driver` is set.
  std::vector<PoolKey> keys(const std::optional<std::string>& driver = std::nullopt) const;
  // Keys of the desired node-local pools of Node `node` (selection.nodeName),
  // sorted: what to reconcile when that Node appears or changes identity.
  std::vector<PoolKey> keysOnNode(const std::string& node) const;

  // Statuses. A pool that is neither desired nor has slices has none.
  std::optional<PoolStatus> status(const PoolKey& key) const;
  std::vector<PoolStatus> statuses(const std::optional<std::string>& driver = std::nullopt) const;
  // Applies `update` to the pool's status (creating it) and notifies.
  void updateStatus(const PoolKey& key, const std::function<void(PoolStatus&)>& update);
  // Forgets the status of a pool that is gone (withdrawn and deleted).
  void eraseStatus(const PoolKey& key);

  // The API server's release, once leading has asked it (nullopt before):
  // push validation refuses pools its counter placement cannot hold, which
  // before then are accepted and refused when written.
  void setServerRelease(ServerRelease release);
  std::optional<ServerRelease> serverRelease() const;

 private:
  // A desired pool: its content and what changes without it.
  struct Entry {
    std::shared_ptr<const DesiredPool> desired;
    // When the pool is withdrawn unless renewed; TimePoint::max() for never.
    Clock::TimePoint lease_deadline = Clock::TimePoint::max();
    // The digest of a request body that decodes to `desired`, if one was put.
    std::optional<Digest128> body_digest;
    // When it was last pushed or renewed.
    Clock::TimePoint last_push{};
  };

  // Puts without notifying; returns whether the pool needs a reconcile (its
  // content changed, or a hold was released).
  bool putLocked(const PoolKey& key, Pool pool, const std::optional<Digest128>& body_digest,
                 uint64_t* version);
  // What every push of the entry's content does: renew the lease, record the
  // push in the status, release a hold. Returns whether it released one.
  bool recordPushLocked(const PoolKey& key, Entry& entry, bool changed);
  // Releases the pool's hold, if it has one; returns whether it had.
  bool releaseLocked(const PoolKey& key);
  bool removeLocked(const PoolKey& key);
  // Takes `key` (whose pool is `desired`) out of by_node_.
  void unindexNodeLocked(const PoolKey& key, const DesiredPool& desired);
  void notifyChange(const std::vector<PoolKey>& keys);
  void notifyStatus(const PoolKey& key);

  Clock& clock_;
  Listener on_change_;
  Listener on_status_;
  mutable std::mutex mu_;
  uint64_t next_version_ = 1;
  std::map<PoolKey, Entry> pools_;
  // The keys of pools_ with a selection.node_name, by that name.
  std::map<std::string, std::set<PoolKey>> by_node_;
  std::map<PoolKey, PoolStatus> statuses_;
  std::optional<ServerRelease> server_release_;
};

}  // namespace rsc::controller::reconcile
