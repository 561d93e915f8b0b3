#include "controller/reconcile/reconciler.h"

#include <algorithm>
#include <set>

#include "common/log.h"

namespace rsc::controller {
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
  return spec;
}

std::vector<client::OwnerReference> desiredOwners(const std::optional<client::Node>& node) {
  if (!node) return {};
  client::OwnerReference ref;
  ref.api_version = "v1";
  ref.kind = "Node";
  ref.name = node->metadata.name;
  ref.uid = node->metadata.uid;
  ref.controller = true;
  return {ref};
}

bool hasManagedLabel(const client::ObjectMeta& meta) {
  auto it = meta.labels.find(kManagedByLabel);
  return it != meta.labels.end() && it->second == kManagedByValue;
}

// The result label of a slice write for metrics.
std::string_view writeResult(const Status& status) {
  if (status.ok()) return "success";
  if (status.code() == StatusCode::kConflict) return "conflict";
  return "error";
}

}  // namespace

StatusOr<std::unique_ptr<Reconciler>> Reconciler::create(ReconcilerOptions options) {
  if (options.api == nullptr) return invalidArgument("reconciler: api is required");
  if (options.clock == nullptr) return invalidArgument("reconciler: clock is required");
  if (options.store == nullptr) return invalidArgument("reconciler: store is required");
  if (options.cache == nullptr) return invalidArgument("reconciler: cache is required");
  if (options.max_conflict_retries < 0) {
    return invalidArgument("reconciler: max_conflict_retries must not be negative");
  }
  return std::unique_ptr<Reconciler>(new Reconciler(options));
}

void Reconciler::recordWrite(const std::string& driver, std::string_view verb,
                             const Status& status) {
  if (options_.observer != nullptr)
    options_.observer->sliceWrite(driver, verb, writeResult(status));
}

void Reconciler::fail(const PoolKey& key, const Status& status) {
  options_.store->updateStatus(key, [&](PoolStatus& s) {
    if (s.phase != PoolPhase::kWithdrawing) s.phase = PoolPhase::kFailed;
    s.last_error = status;
  });
}

Status Reconciler::deleteSlice(const PoolKey& key, const SlicePtr& slice) {
  client::Preconditions pre;
  pre.uid = slice->metadata.uid;
  pre.resource_version = slice->metadata.resource_version;
  Status status = options_.api->deleteResourceSlice(slice->metadata.name, pre);
  if (status.code() == StatusCode::kNotFound) status = okStatus();  // someone was quicker
  recordWrite(key.driver, "delete", status);
  if (!status.ok()) return status;  // the client names the call and the slice
  options_.cache->assumeDeleted(*slice);
  log::debug(2, "Deleted slice",
             {{"driver", key.driver}, {"pool", key.pool}, {"slice", slice->metadata.name}});
  return okStatus();
}

StatusOr<client::ResourceSlice> Reconciler::updateSlice(const PoolKey& key,
                                                        client::ResourceSlice slice) {
  for (int attempt = 0;; ++attempt) {
    StatusOr<client::ResourceSlice> stored = options_.api->updateResourceSlice(slice);
    recordWrite(key.driver, "update", stored.status());
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
  recordWrite(key.driver, "create", stored.status());
  if (!stored.ok()) return stored.status();  // the client names the call and the slice
  options_.cache->assumeWritten(*stored);
  return stored;
}

ReconcileResult Reconciler::withdraw(const PoolKey& key, const std::vector<SlicePtr>& live) {
  const std::optional<PoolStatus> status = options_.store->status(key);
  const bool withdrawn = status && status->phase == PoolPhase::kWithdrawing;
  if (live.empty()) {
    if (withdrawn || !status) options_.store->eraseStatus(key);
    return {};
  }
  // Slices of a pool nobody has pushed yet since this process started: wait
  // for the driver to push again before deleting anything.
  const Clock::TimePoint now = options_.clock->now();
  if (!withdrawn && now < options_.adoption_grace_until) {
    return {okStatus(), options_.adoption_grace_until - now};
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

ReconcileResult Reconciler::reconcile(const PoolKey& key) {
  const std::shared_ptr<const DesiredPool> desired = options_.store->get(key);
  std::vector<SlicePtr> live = options_.cache->slicesOfPool(key);
  if (desired == nullptr) return withdraw(key, live);
  const Pool& pool = desired->pool;

  // Slices on another node cannot be moved (spec.nodeName is immutable):
  // they are replaced.
  std::vector<SlicePtr> stale;
  std::erase_if(live, [&](const SlicePtr& s) {
    if (s->spec.node_name == pool.selection.node_name) return false;
    stale.push_back(s);
    return true;
  });

  // Plan which slices the pool consists of.
  Plan plan = planPool(pool, live);
  plan.obsolete.insert(plan.obsolete.end(), stale.begin(), stale.end());

  // Node-local slices are owned by their Node (its live UID), so that the
  // garbage collector removes them with the node.
  std::optional<client::Node> node;
  if (pool.selection.node_name) {
    StatusOr<client::Node> got = options_.api->getNode(*pool.selection.node_name);
    if (!got.ok()) {
      Status s = got.status();  // the client names the call and the node
      fail(key, s);
      return {s, std::nullopt};
    }
    node = std::move(*got);
  }
  const std::vector<client::OwnerReference> owners = desiredOwners(node);

  // Classify: which live slices change, which are new.
  const int64_t count = static_cast<int64_t>(plan.slices.size());
  std::vector<client::ResourceSliceSpec> specs;
  specs.reserve(plan.slices.size());
  int64_t live_generation = 0;
  bool consistent = plan.obsolete.empty();
  for (const SlicePtr& s : live)
    live_generation = std::max(live_generation, s->spec.pool.generation);
  for (const SlicePtr& s : plan.obsolete) {
    live_generation = std::max(live_generation, s->spec.pool.generation);
  }
  std::set<std::string> known_dropped;
  if (const std::optional<PoolStatus> status = options_.store->status(key)) {
    known_dropped.insert(status->dropped_fields.begin(), status->dropped_fields.end());
  }
  size_t changed = 0;
  size_t added = 0;
  std::vector<bool> differs(plan.slices.size(), false);
  for (size_t i = 0; i < plan.slices.size(); ++i) {
    const PlannedSlice& p = plan.slices[i];
    specs.push_back(desiredSpec(key, pool, p));
    if (p.live == nullptr) {
      ++added;
      continue;
    }
    const client::ResourceSlice& l = *p.live;
    if (l.spec.pool.generation != live_generation || l.spec.pool.resource_slice_count != count) {
      consistent = false;
    }
    // Generation and count are compared for the whole pool above.
    client::ResourceSliceSpec want = specs.back();
    want.pool = l.spec.pool;
    std::vector<std::string> missing;
    bool same = client::semanticEqual(want, l.spec, &missing) && hasManagedLabel(l.metadata) &&
                l.metadata.owner_references == owners;
    // A field we want but the live slice lacks counts as dropped by the
    // server only if the server's answer to one of our writes said so; a
    // slice that was never sent the field (a taint just added) is updated.
    for (const std::string& field : missing) {
      if (!known_dropped.contains(field)) same = false;
    }
    if (!same) {
      differs[i] = true;
      ++changed;
    }
  }
  const bool bump =
      !consistent || added > 0 || changed > 1 || live_generation < pool.generation || live.empty();
  const int64_t generation =
      bump ? std::max({live_generation + 1, pool.generation, int64_t{1}}) : live_generation;

  // Delete obsolete slices first, so that a bumped pool never has more
  // slices at the new generation than it should.
  for (const SlicePtr& slice : plan.obsolete) {
    Status s = deleteSlice(key, slice);
    if (!s.ok()) {
      fail(key, s);
      return {s, std::nullopt};
    }
  }

  // Then update, then create.
  std::vector<std::string> names(plan.slices.size());
  std::vector<std::string> dropped;
  auto build = [&](size_t i) {
    client::ResourceSlice slice;
    if (plan.slices[i].live != nullptr) {
      slice.metadata = plan.slices[i].live->metadata;
      slice.unknown = plan.slices[i].live->unknown;
    } else {
      slice.metadata.generate_name = sliceGenerateName(plan.slices[i].index, key);
    }
    slice.metadata.labels[kManagedByLabel] = kManagedByValue;
    slice.metadata.owner_references = owners;
    slice.spec = specs[i];
    slice.spec.pool.generation = generation;
    slice.spec.pool.resource_slice_count = count;
    return slice;
  };
  auto noteDropped = [&](size_t i, const client::ResourceSlice& stored) {
    std::vector<std::string> d;
    client::ResourceSliceSpec want = specs[i];
    want.pool = stored.spec.pool;
    client::semanticEqual(want, stored.spec, &d);
    dropped.insert(dropped.end(), d.begin(), d.end());
  };
  size_t writes = plan.obsolete.size();
  for (size_t i = 0; i < plan.slices.size(); ++i) {
    if (plan.slices[i].live == nullptr) continue;
    names[i] = plan.slices[i].live->metadata.name;
    if (!bump && !differs[i]) continue;
    StatusOr<client::ResourceSlice> stored = updateSlice(key, build(i));
    if (!stored.ok()) {
      fail(key, stored.status());
      return {stored.status(), std::nullopt};
    }
    noteDropped(i, *stored);
    ++writes;
  }
  for (size_t i = 0; i < plan.slices.size(); ++i) {
    if (plan.slices[i].live != nullptr) continue;
    StatusOr<client::ResourceSlice> stored = createSlice(key, build(i));
    if (!stored.ok()) {
      fail(key, stored.status());
      return {stored.status(), std::nullopt};
    }
    names[i] = stored->metadata.name;
    noteDropped(i, *stored);
    ++writes;
  }

  // Record the outcome.
  uint64_t previously_published = 0;
  options_.store->updateStatus(key, [&](PoolStatus& s) {
    previously_published = s.published_version;
    s.phase = PoolPhase::kPublished;
    s.published_version = std::max(s.published_version, desired->version);
    s.published_generation = generation;
    s.slice_names = names;
    s.last_error = okStatus();
    // Kept as a union: a write to one slice must not forget what the server
    // dropped from the others.
    for (const std::string& field : dropped) {
      if (std::find(s.dropped_fields.begin(), s.dropped_fields.end(), field) ==
          s.dropped_fields.end()) {
        s.dropped_fields.push_back(field);
      }
    }
  });
  if (previously_published < desired->version) {
    if (options_.observer != nullptr) {
      options_.observer->published(key.driver, options_.clock->now() - desired->pushed_at);
    }
    if (writes > 0) {
      log::info("Published pool", {{"driver", key.driver},
                                   {"pool", key.pool},
                                   {"generation", generation},
                                   {"slices", count},
                                   {"writes", static_cast<int64_t>(writes)}});
    }
  }
  if (!dropped.empty()) {
    log::warning("API server dropped fields of the pool (features disabled there)",
                 {{"driver", key.driver}, {"pool", key.pool}, {"fields", dropped.front()}});
  }
  return {};
}

}  // namespace rsc::controller
