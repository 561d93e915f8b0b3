#include "controller/reconcile/reconciler.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <limits>
#include <mutex>
#include <set>

#include "client/json_diff.h"
#include "common/enum_names.h"
#include "common/log.h"
#include "controller/reconcile/dropped_fields.h"

namespace rsc::controller::reconcile {
namespace {

// The spec a planned slice should have, without the pool generation and
// slice count (those are decided once for the whole pool).
client::ResourceSliceSpec desiredSpec(const PoolKey& key, const Pool& pool,
                                      const PlannedSlice& planned) {
  client::ResourceSliceSpec spec;
  spec.driver = key.driver;
  spec.pool.name = key.pool;
  const NodeSelection& sel = pool.selection;
  if (sel.node_name) spec.node_name = sel.node_name;
  if (sel.node_selector) spec.node_selector = sel.node_selector;
  if (sel.all_nodes) spec.all_nodes = true;
  if (sel.per_device_node_selection) spec.per_device_node_selection = true;
  spec.devices = planned.devices;
  spec.shared_counters = planned.shared_counters;
  spec.partition_type_attribute = planned.options.partition_type_attribute;
  spec.skip_node_operations = planned.options.skip_node_operations;
  return spec;
}

// The owner references of a pool's slices: its Node's, for a node-local pool
// (`node_uid` set), none otherwise.
std::vector<client::OwnerReference> desiredOwners(const NodeSelection& selection,
                                                  const std::optional<std::string>& node_uid) {
  if (!selection.node_name || !node_uid) return {};
  client::OwnerReference ref;
  ref.api_version = "v1";
  ref.kind = "Node";
  ref.name = *selection.node_name;
  ref.uid = *node_uid;
  ref.controller = true;
  return {ref};
}

bool hasManagedLabel(const client::ObjectMeta& meta) {
  auto it = meta.labels.find(kManagedByLabel);
  return it != meta.labels.end() && it->second == kManagedByValue;
}

// Generations saturate at the largest int64: a pool there that needs a bump
// is rewritten at that generation, so that no slice is ever published below
// one the scheduler has seen (an increment would wrap to the lowest value).
constexpr int64_t kMaxGeneration = std::numeric_limits<int64_t>::max();

int64_t nextGeneration(int64_t generation) {
  return generation == kMaxGeneration ? generation : generation + 1;
}

// Whether a 403 comes from the authorizer (RBAC: `User "..." cannot create
// resource "resourceslices" ...`) rather than from an admission policy
// judging the content: an operator fixes it, and then the same content
// succeeds.
bool deniedByAuthorization(const Status& status) {
  const std::string& m = status.message();
  return m.find(" cannot ") != std::string::npos && m.find(" resource \"") != std::string::npos;
}

// Whether the API server (or an admission policy) refused a write for its
// content, so that sending the same content again cannot succeed. Conflicts,
// 429, 5xx, a slice that vanished, our own credentials (401) and missing RBAC
// are retried with backoff.
bool refusedContent(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:  // 400
    case StatusCode::kTooLarge:         // 413
    case StatusCode::kUnprocessable:    // 422
      return true;
    case StatusCode::kPermissionDenied:  // 403
      return !deniedByAuthorization(status);
    default:
      return false;
  }
}

// The live slices of a pool as a pool of explicit slices in index order, if
// they form one whole generation (each at the same generation, as many as
// each says, with one node selection); null otherwise. This is what to put
// back after a refused write when this process has published nothing of
// the pool (after a restart or failover).
std::shared_ptr<const DesiredPool> wholePoolOf(const PoolKey& key, std::vector<SlicePtr> live) {
  if (live.empty()) return nullptr;
  const client::ResourceSliceSpec& first = live.front()->spec;
  for (const SlicePtr& s : live) {
    const client::ResourceSliceSpec& spec = s->spec;
    if (spec.pool.generation != first.pool.generation ||
        spec.pool.resource_slice_count != static_cast<int64_t>(live.size()) ||
        spec.node_name != first.node_name || spec.node_selector != first.node_selector ||
        spec.all_nodes != first.all_nodes ||
        spec.per_device_node_selection != first.per_device_node_selection) {
      return nullptr;
    }
  }
  auto desired = std::make_shared<DesiredPool>();
  desired->key = key;
  NodeSelection& selection = desired->pool.selection;
  selection.node_name = first.node_name;
  selection.node_selector = first.node_selector;
  selection.all_nodes = first.all_nodes.value_or(false);
  selection.per_device_node_selection = first.per_device_node_selection.value_or(false);
  std::sort(live.begin(), live.end(), [](const SlicePtr& a, const SlicePtr& b) {
    const int64_t ia = sliceIndexFromName(a->metadata.name);
    const int64_t ib = sliceIndexFromName(b->metadata.name);
    return ia != ib ? ia < ib : a->metadata.name < b->metadata.name;
  });
  std::vector<DesiredSlice>& slices = desired->pool.slices.emplace();
  for (const SlicePtr& s : live) {
    slices.push_back({s->spec.devices,
                      s->spec.shared_counters,
                      {s->spec.partition_type_attribute, s->spec.skip_node_operations}});
  }
  return desired;
}

WriteOutcome writeOutcome(const Status& status) {
  if (status.ok()) return WriteOutcome::kSuccess;
  if (status.code() == StatusCode::kConflict) return WriteOutcome::kConflict;
  return WriteOutcome::kError;
}

constexpr auto kWriteVerbNames = enumNames<WriteVerb>({{WriteVerb::kCreate, "create"},
                                                       {WriteVerb::kUpdate, "update"},
                                                       {WriteVerb::kDelete, "delete"}});
constexpr auto kWriteOutcomeNames = enumNames<WriteOutcome>({{WriteOutcome::kSuccess, "success"},
                                                             {WriteOutcome::kConflict, "conflict"},
                                                             {WriteOutcome::kError, "error"}});

}  // namespace

client::ObjectReference sliceReference(const client::ResourceSlice& slice) {
  return {client::kResourceApiVersion, "ResourceSlice", "", slice.metadata.name,
          slice.metadata.uid};
}

client::ObjectReference poolReference(const std::vector<SlicePtr>& live,
                                      const std::optional<std::string>& node_name) {
  const SlicePtr* first = nullptr;
  for (const SlicePtr& s : live) {
    if (first == nullptr || s->metadata.name < (*first)->metadata.name) first = &s;
  }
  if (first != nullptr) return sliceReference(**first);
  if (node_name) return {"v1", "Node", "", *node_name, ""};
  return {};
}

StatusOr<std::unique_ptr<Reconciler>> Reconciler::create(ReconcilerOptions options) {
  if (options.api == nullptr) return invalidArgument("reconciler: api is required");
  if (options.clock == nullptr) return invalidArgument("reconciler: clock is required");
  if (options.store == nullptr) return invalidArgument("reconciler: store is required");
  if (options.cache == nullptr) return invalidArgument("reconciler: cache is required");
  if (options.max_conflict_retries < 0) {
    return invalidArgument("reconciler: max_conflict_retries must not be negative");
  }
  if (options.max_parallel_writes < 1) {
    return invalidArgument("reconciler: max_parallel_writes must be at least 1");
  }
  return std::unique_ptr<Reconciler>(new Reconciler(std::move(options)));
}

Reconciler::Reconciler(ReconcilerOptions options)
    : options_(std::move(options)),
      writes_(static_cast<size_t>(std::max(options_.max_parallel_writes, 1) - 1)) {
  startTerm(
      {options_.adoption_grace_until, options_.counter_placement, options_.server_dropped_fields});
}

void Reconciler::startTerm(Term term) {
  auto next = std::make_shared<const Term>(std::move(term));
  std::lock_guard lock(term_mu_);
  term_ = std::move(next);
}

std::shared_ptr<const Reconciler::Term> Reconciler::term() const {
  std::lock_guard lock(term_mu_);
  return term_;
}

std::string_view writeVerbName(WriteVerb verb) { return kWriteVerbNames(verb); }
std::string_view writeOutcomeName(WriteOutcome outcome) { return kWriteOutcomeNames(outcome); }

void Reconciler::recordWrite(const std::string& driver, WriteVerb verb, const Status& status) {
  if (options_.observer != nullptr)
    options_.observer->sliceWrite(driver, verb, writeOutcome(status));
}

void Reconciler::reportReverted(const PoolKey& key,
                                const std::vector<std::pair<SlicePtr, std::string>>& edited) {
  for (const auto& [slice, changed_by] : edited) {
    log::info("Reverted a change to a managed slice by someone else",
              {{"driver", key.driver},
               {"pool", key.pool},
               {"slice", slice->metadata.name},
               {"changedBy", changed_by.empty() ? std::string("unknown") : changed_by}});
    if (options_.observer != nullptr) {
      options_.observer->foreignChangeReverted(key, sliceReference(*slice), changed_by);
    }
  }
}

void Reconciler::fail(const PoolKey& key, const Status& status) {
  options_.store->updateStatus(key, [&](PoolStatus& s) {
    if (s.phase != PoolPhase::kWithdrawing && !s.hold) s.phase = PoolPhase::kFailed;
    s.last_error = status;
  });
}

StatusOr<std::string> Reconciler::nodeUid(const std::string& name) {
  if (options_.nodes != nullptr) {
    if (std::optional<std::string> uid = options_.nodes->nodeUid(name)) return std::move(*uid);
  }
  // Not in the cache (yet): a Node created a moment ago, or none at all.
  StatusOr<client::Node> got = options_.api->getNode(name);
  if (!got.ok()) return got.status();  // the client names the call and the node
  return std::move(got->metadata.uid);
}

Status Reconciler::deleteSlice(const PoolKey& key, const SlicePtr& slice) {
  client::Preconditions pre;
  pre.uid = slice->metadata.uid;
  pre.resource_version = slice->metadata.resource_version;
  options_.cache->deleting(slice->metadata.name);
  Status status = options_.api->deleteResourceSlice(slice->metadata.name, pre);
  if (status.code() == StatusCode::kNotFound) status = okStatus();  // someone was quicker
  recordWrite(key.driver, WriteVerb::kDelete, status);
  if (!status.ok()) {
    // Unavailable (429, 5xx, a connection that broke) and timeouts leave it
    // open whether the slice went.
    const StatusCode code = status.code();
    if (code != StatusCode::kUnavailable && code != StatusCode::kDeadlineExceeded &&
        code != StatusCode::kCancelled && code != StatusCode::kInternal) {
      options_.cache->deleteFailed(slice->metadata.name);
    }
    return status;  // the client names the call and the slice
  }
  options_.cache->assumeDeleted(*slice);
  log::debug(2, "Deleted slice",
             {{"driver", key.driver}, {"pool", key.pool}, {"slice", slice->metadata.name}});
  return okStatus();
}

StatusOr<client::ResourceSlice> Reconciler::updateSlice(const PoolKey& key,
                                                        client::ResourceSlice slice) {
  for (int attempt = 0;; ++attempt) {
    StatusOr<client::ResourceSlice> stored = options_.api->updateResourceSlice(slice);
    recordWrite(key.driver, WriteVerb::kUpdate, stored.status());
    if (stored.ok()) {
      options_.cache->assumeWritten(*stored);
      return stored;
    }
    if (stored.status().code() != StatusCode::kConflict ||
        attempt >= options_.max_conflict_retries) {
      return stored.status();  // the client names the call and the slice
    }
    // Someone else wrote the slice since we read it: take its current
    // resourceVersion and write ours over it (manual edits are undone).
    StatusOr<client::ResourceSlice> current = options_.api->getResourceSlice(slice.metadata.name);
    if (!current.ok()) {
      return current.status();
    }
    slice.metadata.resource_version = current->metadata.resource_version;
    slice.metadata.uid = current->metadata.uid;
  }
}

StatusOr<client::ResourceSlice> Reconciler::createSlice(const PoolKey& key,
                                                        const client::ResourceSlice& slice) {
  StatusOr<client::ResourceSlice> stored = options_.api->createResourceSlice(slice);
  recordWrite(key.driver, WriteVerb::kCreate, stored.status());
  if (!stored.ok()) return stored.status();  // the client names the call and the slice
  options_.cache->assumeWritten(*stored);
  return stored;
}

struct Reconciler::Applied {
  // OK, or the error of the write that failed (nothing was written after it).
  Status status;
  int64_t generation = 0;
  int64_t count = 0;
  // The name of each planned slice, in index order (complete on success).
  std::vector<std::string> names;
  // Fields the server dropped from what we wrote, or that a live slice lacks
  // and the server drops from every slice (server_dropped_fields).
  std::vector<std::string> dropped;
  size_t writes = 0;
  // Live slices whose content or pool someone else changed, all written
  // back when status is OK, with who changed them (read before our writes
  // replace what the cache knows of them).
  std::vector<std::pair<SlicePtr, std::string>> edited;
  // The pool's slices after this attempt: those seen, plus those created,
  // minus those deleted.
  std::vector<std::string> known;
};

StatusOr<std::vector<SlicePtr>> Reconciler::liveSlices(const PoolKey& key,
                                                       const std::optional<PoolStatus>& status,
                                                       const std::vector<std::string>& deleted,
                                                       bool* gone) {
  std::vector<SlicePtr> live = options_.cache->slicesOfPool(key);
  if (gone != nullptr) *gone = false;
  if ((!status || status->known_slices.empty()) && deleted.empty()) return live;
  std::set<std::string> cached;
  for (const SlicePtr& s : live) cached.insert(s->metadata.name);
  std::set<std::string> missing(deleted.begin(), deleted.end());
  if (status) missing.insert(status->known_slices.begin(), status->known_slices.end());
  for (const std::string& name : missing) {
    if (cached.contains(name)) continue;
    // Gone from the cache: deleted, or no longer labelled as ours. Only the
    // server can tell; a slice of this pool that still exists is taken back
    // (relabelled by the update that follows), never duplicated.
    StatusOr<client::ResourceSlice> got = options_.api->getResourceSlice(name);
    if (got.status().code() == StatusCode::kNotFound) {
      if (gone != nullptr && std::find(deleted.begin(), deleted.end(), name) != deleted.end()) {
        *gone = true;
      }
      continue;
    }
    if (!got.ok()) return got.status();  // the client names the call and the slice
    if (got->spec.driver != key.driver || got->spec.pool.name != key.pool) continue;
    if (!hasManagedLabel(got->metadata)) {
      log::info("Taking back a slice of the pool that lost its managed-by label",
                {{"driver", key.driver}, {"pool", key.pool}, {"slice", name}});
    }
    live.push_back(std::make_shared<const client::ResourceSlice>(std::move(*got)));
  }
  return live;
}

std::vector<SlicePtr> Reconciler::ownedForWithdrawal(std::vector<SlicePtr> live,
                                                     const std::optional<PoolStatus>& status) {
  // A pool nobody desires owns only the slices labelled as ours or known to
  // be ours; someone else's slices of that driver and pool are not ours to
  // delete (a cache without the label selector holds them too).
  std::erase_if(live, [&](const SlicePtr& s) {
    return !hasManagedLabel(s->metadata) &&
           !(status && std::find(status->known_slices.begin(), status->known_slices.end(),
                                 s->metadata.name) != status->known_slices.end());
  });
  return live;
}

ReconcileResult Reconciler::withdraw(const PoolKey& key, std::vector<SlicePtr> live,
                                     const std::optional<PoolStatus>& status) {
  const bool withdrawn = status && status->phase == PoolPhase::kWithdrawing;
  live = ownedForWithdrawal(std::move(live), status);
  if (live.empty()) {
    if (withdrawn || !status) options_.store->eraseStatus(key);
    return {};
  }
  // Slices of a pool nobody has pushed yet since this process started: wait
  // for the driver to push again before deleting anything.
  const Clock::TimePoint now = options_.clock->now();
  const Clock::TimePoint grace_until = term()->adoption_grace_until;
  if (!withdrawn && now < grace_until) {
    return {okStatus(), grace_until - now};
  }
  for (const SlicePtr& slice : live) {
    Status s = deleteSlice(key, slice);
    if (!s.ok()) {
      fail(key, s);
      return {s, std::nullopt};
    }
  }
  log::info(
      "Withdrew pool",
      {{"driver", key.driver}, {"pool", key.pool}, {"slices", static_cast<int64_t>(live.size())}});
  options_.store->eraseStatus(key);
  return {};
}

bool Reconciler::placeHold(const DesiredPool& desired, Clock::TimePoint deleted_at) {
  const std::optional<std::string> node = boundNode(desired.pool);
  if (!node) return false;
  PoolHold hold;
  hold.node = *node;
  hold.reason = "NodeSlicesDeleted";
  hold.message = "The slices of the pool on node " + *node +
                 " were deleted by someone else (the kubelet deletes them when it starts and "
                 "when the driver's kubelet plugin has gone): withdrawn until the driver pushes "
                 "or renews the pool";
  if (!options_.store->hold(desired.key, deleted_at, hold)) return false;
  log::info(
      "Holding pool: its node's slices were deleted by someone else; republished when its "
      "driver pushes or renews it",
      {{"driver", desired.key.driver}, {"pool", desired.key.pool}, {"node", *node}});
  if (options_.observer != nullptr) {
    client::ObjectReference regarding{"v1", "Node", "", *node, ""};
    if (options_.nodes != nullptr) regarding.uid = options_.nodes->nodeUid(*node).value_or("");
    options_.observer->poolHeld(desired.key, regarding, *node);
  }
  return true;
}

ReconcileResult Reconciler::keepHeld(const PoolKey& key, std::vector<SlicePtr> live,
                                     const PoolStatus& status) {
  // The scheduler must not see a part of the pool: what the deleter left of
  // it goes too (the kubelet deletes every slice of its node, so usually
  // nothing is left).
  live = ownedForWithdrawal(std::move(live), status);
  std::set<std::string> known;
  for (const SlicePtr& slice : live) known.insert(slice->metadata.name);
  Status deleted = okStatus();
  for (const SlicePtr& slice : live) {
    deleted = deleteSlice(key, slice);
    if (!deleted.ok()) break;
    known.erase(slice->metadata.name);
  }
  options_.store->updateStatus(key, [&](PoolStatus& s) {
    s.known_slices.assign(known.begin(), known.end());
    s.slice_names.clear();
    s.last_error = deleted;
  });
  if (!deleted.ok()) return {deleted, std::nullopt};
  if (!live.empty()) {
    log::info("Withdrew the rest of a held pool", {{"driver", key.driver},
                                                   {"pool", key.pool},
                                                   {"slices", static_cast<int64_t>(live.size())}});
  }
  return {};
}

struct Reconciler::Decision {
  Plan plan;  // obsolete slices include those on another node
  std::vector<client::OwnerReference> owners;
  // The spec of each planned slice, without generation and count.
  std::vector<client::ResourceSliceSpec> specs;
  // Whether each planned live slice's content differs from what is wanted.
  std::vector<bool> differs;
  int64_t live_generation = 0;
  int64_t generation = 0;
  int64_t count = 0;
  bool bump = false;
  // Fields a live slice lacks that the server drops from every slice.
  std::vector<std::string> dropped;
  // Live slices that differ from what is wanted (content, generation or
  // count), each with the last manager other than this controller.
  std::vector<std::pair<SlicePtr, std::string>> edited;

  bool isCreate(size_t i) const { return plan.slices[i].live == nullptr; }
  // The first step of writes: new content (the writes the server may refuse).
  bool newContent(size_t i) const { return isCreate(i) || differs[i]; }
  // The second step: live slices that only take the new generation and count.
  bool onlyGeneration(size_t i) const { return !newContent(i) && bump; }
};

StatusOr<Reconciler::Decision> Reconciler::decide(const PoolKey& key, const Pool& pool,
                                                  std::vector<SlicePtr> live,
                                                  const std::optional<PoolStatus>& status) {
  Decision d;
  // Slices on another node cannot be moved (spec.nodeName is immutable):
  // they are replaced.
  std::vector<SlicePtr> stale;
  std::erase_if(live, [&](const SlicePtr& s) {
    if (s->spec.node_name == pool.selection.node_name) return false;
    stale.push_back(s);
    return true;
  });

  // Plan which slices the pool consists of.
  const std::shared_ptr<const Term> term = this->term();
  d.plan = planPool(pool, live, term->counter_placement);
  d.plan.obsolete.insert(d.plan.obsolete.end(), stale.begin(), stale.end());

  // Node-local slices are owned by their Node (its live UID), so that the
  // garbage collector removes them with the node.
  std::optional<std::string> node_uid;
  if (pool.selection.node_name) {
    StatusOr<std::string> uid = nodeUid(*pool.selection.node_name);
    if (!uid.ok()) return uid.status();
    node_uid = std::move(*uid);
  }
  d.owners = desiredOwners(pool.selection, node_uid);

  // Classify: which live slices change, which are new.
  const Plan& plan = d.plan;
  d.count = static_cast<int64_t>(plan.slices.size());
  d.specs.reserve(plan.slices.size());
  bool consistent = plan.obsolete.empty();
  for (const SlicePtr& s : live)
    d.live_generation = std::max(d.live_generation, s->spec.pool.generation);
  for (const SlicePtr& s : plan.obsolete) {
    d.live_generation = std::max(d.live_generation, s->spec.pool.generation);
  }
  const int64_t published = status ? status->published_generation : 0;
  std::set<std::string> known_dropped;
  if (status) known_dropped.insert(status->dropped_fields.begin(), status->dropped_fields.end());
  size_t changed = 0;
  size_t added = 0;
  d.differs.assign(plan.slices.size(), false);
  for (size_t i = 0; i < plan.slices.size(); ++i) {
    const PlannedSlice& p = plan.slices[i];
    d.specs.push_back(desiredSpec(key, pool, p));
    if (p.live == nullptr) {
      ++added;
      continue;
    }
    const client::ResourceSlice& l = *p.live;
    const bool pool_differs = l.spec.pool.generation != d.live_generation ||
                              l.spec.pool.generation < published ||
                              l.spec.pool.resource_slice_count != d.count;
    if (pool_differs) consistent = false;
    // Generation and count are compared for the whole pool above.
    client::ResourceSliceSpec want = d.specs.back();
    want.pool = l.spec.pool;
    std::vector<std::string> missing;
    bool same = client::semanticEqual(want, l.spec, &missing) && hasManagedLabel(l.metadata) &&
                l.metadata.owner_references == d.owners;
    // A field we want but the live slice lacks counts as dropped by the
    // server only if the server's answer to one of our writes said so, or
    // the server drops that field from every slice (learnt when leading
    // started); a slice that was never sent the field (a taint just added)
    // is updated.
    for (std::string& field : missing) {
      if (known_dropped.contains(field)) continue;
      if (term->server_dropped_fields.contains(fieldShape(field))) {
        d.dropped.push_back(std::move(field));  // reported in the pool's status
        continue;
      }
      same = false;
    }
    if (!same) {
      d.differs[i] = true;
      ++changed;
    }
    if (!same || pool_differs) {
      d.edited.emplace_back(p.live, options_.cache->lastForeignManager(l.metadata.name));
    }
  }
  // Never below what this process published: a generation lowered by
  // someone else, or slices the cache cannot see, must not make the
  // scheduler see an older generation as the newest.
  d.bump = !consistent || added > 0 || changed > 1 || d.live_generation < pool.generation ||
           d.live_generation < published || live.empty();
  d.generation = d.bump ? std::max({nextGeneration(std::max(d.live_generation, published)),
                                    pool.generation, int64_t{1}})
                        : d.live_generation;
  return d;
}

client::ResourceSlice Reconciler::buildSlice(const PoolKey& key, const Decision& d, size_t i) {
  const PlannedSlice& planned = d.plan.slices[i];
  client::ResourceSlice slice;
  if (planned.live != nullptr) {
    slice.metadata = planned.live->metadata;
    slice.unknown = planned.live->unknown;
  } else {
    slice.metadata.generate_name = sliceGenerateName(planned.index, key);
  }
  slice.metadata.labels[kManagedByLabel] = kManagedByValue;
  slice.metadata.owner_references = d.owners;
  slice.spec = d.specs[i];
  slice.spec.pool.generation = d.generation;
  slice.spec.pool.resource_slice_count = d.count;
  return slice;
}

Reconciler::Applied Reconciler::apply(const PoolKey& key, const Pool& pool,
                                      std::vector<SlicePtr> live,
                                      const std::optional<PoolStatus>& status) {
  Applied out;
  std::set<std::string> known;
  for (const SlicePtr& s : live) known.insert(s->metadata.name);
  auto stop = [&](Status error) {
    out.status = std::move(error);
    out.known.assign(known.begin(), known.end());
    return std::move(out);
  };
  StatusOr<Decision> decided = decide(key, pool, std::move(live), status);
  if (!decided.ok()) return stop(decided.status());
  const Decision& d = *decided;
  const Plan& plan = d.plan;
  const std::vector<client::ResourceSliceSpec>& specs = d.specs;
  out.generation = d.generation;
  out.count = d.count;
  out.dropped = d.dropped;
  out.edited = d.edited;

  // Writes of one step run concurrently: `out` and `known` are shared.
  std::mutex out_mu;
  auto write = [&](size_t i) -> Status {
    const bool create = plan.slices[i].live == nullptr;
    StatusOr<client::ResourceSlice> stored =
        create ? createSlice(key, buildSlice(key, d, i)) : updateSlice(key, buildSlice(key, d, i));
    if (!stored.ok()) return stored.status();
    std::vector<std::string> dropped;
    client::ResourceSliceSpec want = specs[i];
    want.pool = stored->spec.pool;
    client::semanticEqual(want, stored->spec, &dropped);
    std::lock_guard lock(out_mu);
    out.names[i] = stored->metadata.name;
    known.insert(stored->metadata.name);
    out.dropped.insert(out.dropped.end(), dropped.begin(), dropped.end());
    ++out.writes;
    return okStatus();
  };

  // Write the new generation before anything goes, so that a write the
  // server refuses leaves the published generation whole for the scheduler:
  // new content first (the writes the server may refuse: creates and changed
  // slices, together), then slices that only take the new generation and
  // count, and obsolete slices last. Obsolete slices keep their older
  // generation, so the new one never has more slices than it should. The
  // writes of each step run concurrently, so the scheduler sees the new
  // generation incomplete for about one round trip per step.
  out.names.resize(plan.slices.size());
  for (size_t i = 0; i < plan.slices.size(); ++i) {
    if (plan.slices[i].live != nullptr) out.names[i] = plan.slices[i].live->metadata.name;
  }
  auto write_each = [&](const std::function<bool(size_t)>& wanted) {
    std::vector<size_t> chosen;
    for (size_t i = 0; i < plan.slices.size(); ++i) {
      if (wanted(i)) chosen.push_back(i);
    }
    return writes_.forEach(chosen.size(), static_cast<size_t>(options_.max_parallel_writes),
                           [&](size_t k) { return write(chosen[k]); });
  };
  for (const auto& wanted : std::initializer_list<std::function<bool(size_t)>>{
           [&](size_t i) { return d.newContent(i); },
           [&](size_t i) { return d.onlyGeneration(i); },
       }) {
    if (Status s = write_each(wanted); !s.ok()) return stop(std::move(s));
  }
  Status deleted =
      writes_.forEach(plan.obsolete.size(), static_cast<size_t>(options_.max_parallel_writes),
                      [&](size_t k) -> Status {
                        const SlicePtr& slice = plan.obsolete[k];
                        RETURN_IF_ERROR(deleteSlice(key, slice));
                        std::lock_guard lock(out_mu);
                        known.erase(slice->metadata.name);
                        ++out.writes;
                        return okStatus();
                      });
  return stop(std::move(deleted));
}

ReconcileResult Reconciler::keepPublished(const PoolKey& key, std::vector<SlicePtr> live,
                                          const PoolStatus& status) {
  // Nothing was published that could be kept.
  if (status.published_pool == nullptr) return {};
  const Applied applied = apply(key, status.published_pool->pool, std::move(live), status);
  options_.store->updateStatus(key, [&](PoolStatus& s) {
    s.known_slices = applied.known;
    if (applied.status.ok()) {
      s.published_generation = applied.generation;
      s.slice_names = applied.names;
    }
  });
  if (!applied.status.ok()) return {applied.status, std::nullopt};
  if (applied.writes > 0) {
    log::info("Put the published pool back after the API server refused its new content",
              {{"driver", key.driver},
               {"pool", key.pool},
               {"generation", applied.generation},
               {"writes", static_cast<int64_t>(applied.writes)}});
  }
  return {};
}

ReconcileResult Reconciler::reconcile(const PoolKey& key) {
  const std::shared_ptr<const DesiredPool> desired = options_.store->get(key);
  std::optional<PoolStatus> status = options_.store->status(key);
  const SliceCache::ForeignDeletes deleted = options_.cache->takeForeignDeletes(key);
  bool gone = false;
  StatusOr<std::vector<SlicePtr>> live = liveSlices(key, status, deleted.names, &gone);
  if (!live.ok()) {
    fail(key, live.status());
    return {live.status(), std::nullopt};
  }
  if (desired == nullptr) return withdraw(key, std::move(*live), status);

  // Someone else deleted a slice of a node-local pool: the kubelet does so
  // when it starts, and when the driver's kubelet plugin has gone, and
  // expects the driver to publish again once its plugin registers. The pool
  // is held, not recreated, until the driver pushes or renews it.
  if (gone && placeHold(*desired, deleted.first_seen)) status = options_.store->status(key);
  if (status && status->hold) return keepHeld(key, std::move(*live), *status);

  // The server refused this content already: it is not written again (nor
  // the pool bumped again) until the driver pushes something else.
  if (status && status->rejected_version == desired->version) {
    return keepPublished(key, std::move(*live), *status);
  }

  // What to put back if the server refuses this content and nothing was
  // published by this process.
  std::vector<SlicePtr> before;
  if (!status || status->published_pool == nullptr) before = *live;
  const client::ObjectReference regarding = poolReference(*live, desired->pool.selection.node_name);
  const Applied applied = apply(key, desired->pool, std::move(*live), status);
  if (!applied.status.ok()) {
    if (options_.observer != nullptr && applied.status.code() != StatusCode::kCancelled) {
      options_.observer->publishFailed(key, regarding, applied.status);
    }
    const bool refused = refusedContent(applied.status);
    options_.store->updateStatus(key, [&](PoolStatus& s) {
      s.phase = PoolPhase::kFailed;
      s.last_error = applied.status;
      s.known_slices = applied.known;
      if (!refused) return;
      s.rejected_version = desired->version;
      if (s.published_pool == nullptr) s.published_pool = wholePoolOf(key, std::move(before));
    });
    if (refused) {
      log::error("API server refused the pool's content; keeping what is published", applied.status,
                 {{"driver", key.driver}, {"pool", key.pool}});
      // Put back what an earlier write of this attempt changed, at once.
      const std::optional<PoolStatus> now = options_.store->status(key);
      StatusOr<std::vector<SlicePtr>> after = liveSlices(key, now);
      if (after.ok() && now) (void)keepPublished(key, std::move(*after), *now);
    }
    return {applied.status, std::nullopt};
  }

  // Record the outcome.
  uint64_t previously_published = 0;
  bool republished = false;
  std::vector<std::string> newly_dropped;  // not in the pool's status before
  options_.store->updateStatus(key, [&](PoolStatus& s) {
    previously_published = s.published_version;
    republished = s.released;
    s.released = false;
    s.phase = PoolPhase::kPublished;
    s.published_version = std::max(s.published_version, desired->version);
    s.published_generation = applied.generation;
    s.slice_names = applied.names;
    s.last_error = okStatus();
    s.published_pool = desired;
    s.rejected_version = 0;
    s.known_slices = applied.known;
    // Kept as a union: a write to one slice must not forget what the server
    // dropped from the others.
    for (const std::string& field : applied.dropped) {
      if (std::find(s.dropped_fields.begin(), s.dropped_fields.end(), field) ==
          s.dropped_fields.end()) {
        s.dropped_fields.push_back(field);
        newly_dropped.push_back(field);
      }
    }
  });
  if (previously_published < desired->version) {
    if (options_.observer != nullptr) {
      options_.observer->published(key.driver, options_.clock->now() - desired->pushed_at);
    }
    if (applied.writes > 0) {
      log::info("Published pool", {{"driver", key.driver},
                                   {"pool", key.pool},
                                   {"generation", applied.generation},
                                   {"slices", applied.count},
                                   {"writes", static_cast<int64_t>(applied.writes)}});
    }
  }
  if (republished) {
    log::info("Republished a held pool: its driver pushed or renewed it",
              {{"driver", key.driver},
               {"pool", key.pool},
               {"generation", applied.generation},
               {"slices", applied.count}});
  }
  // Published before and pushed no further since: what was written put back
  // someone else's change.
  if (status && previously_published >= desired->version) reportReverted(key, applied.edited);
  // Once per field and pool: the status keeps reporting them.
  if (!newly_dropped.empty()) {
    log::warning("API server dropped fields of the pool (features disabled there)",
                 {{"driver", key.driver},
                  {"pool", key.pool},
                  {"fields", static_cast<int64_t>(newly_dropped.size())},
                  {"first", newly_dropped.front()}});
  }
  return {};
}

StatusOr<PoolPreview> Reconciler::preview(const PoolKey& key, const Pool* desired) {
  const std::optional<PoolStatus> status = options_.store->status(key);
  ASSIGN_OR_RETURN(std::vector<SlicePtr> live, liveSlices(key, status));
  PoolPreview out;
  out.key = key;
  for (const SlicePtr& s : live) {
    out.live_generation = std::max(out.live_generation, s->spec.pool.generation);
  }
  auto deletes = [&](const std::vector<SlicePtr>& slices) {
    for (const SlicePtr& s : slices) {
      out.writes.push_back({PlannedWrite::Verb::kDelete, s->metadata.name, -1, {}});
    }
  };
  if (desired == nullptr) {
    // An explicit withdrawal deletes at once, adoption grace or not.
    out.withdraw = true;
    deletes(ownedForWithdrawal(std::move(live), status));
    return out;
  }
  ASSIGN_OR_RETURN(Decision d, decide(key, *desired, std::move(live), status));
  out.generation = d.generation;
  out.generation_bumped = d.bump;
  out.slice_count = d.count;
  // In the order apply() writes them.
  for (const auto step : {&Decision::newContent, &Decision::onlyGeneration}) {
    for (size_t i = 0; i < d.plan.slices.size(); ++i) {
      if (!(d.*step)(i)) continue;
      const PlannedSlice& planned = d.plan.slices[i];
      PlannedWrite write;
      write.index = planned.index;
      if (planned.live == nullptr) {
        write.verb = PlannedWrite::Verb::kCreate;
      } else {
        write.verb = PlannedWrite::Verb::kUpdate;
        write.slice = planned.live->metadata.name;
        client::jsonDifferences(client::toJson(buildSlice(key, d, i)),
                                client::toJson(*planned.live), "", write.changed_fields);
      }
      out.writes.push_back(std::move(write));
    }
  }
  deletes(d.plan.obsolete);
  return out;
}

}  // namespace rsc::controller::reconcile
