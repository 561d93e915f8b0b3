// What a reconcile of one pool would write, without writing it: the answer
// to a dry-run push (?dryRun=All), and the interface that computes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "controller/reconcile/pool.h"

namespace rsc::controller::reconcile {

// One write a reconcile would make (a dry run's answer).
struct PlannedWrite {
  enum class Verb { kCreate, kUpdate, kDelete };
  Verb verb = Verb::kCreate;
  // The live slice written or deleted; empty for a create (the API server
  // names it).
  std::string slice;
  // The slice's index in the pool; -1 for a slice that is deleted.
  int64_t index = -1;
  // For an update: the fields that change, as paths ("spec.devices[gpu-1]
  // .attributes.model", "spec.pool.generation", "metadata.ownerReferences").
  std::vector<std::string> changed_fields;
};

// What a reconcile of one pool would do now, with nothing written.
struct PoolPreview {
  PoolKey key;
  // The pool would be withdrawn (every slice deleted).
  bool withdraw = false;
  // The newest generation among the pool's live slices (0: none) and the
  // generation the pool would be published at (0 when withdrawn).
  int64_t live_generation = 0;
  int64_t generation = 0;
  bool generation_bumped = false;
  // Slices the pool would consist of (0 when withdrawn).
  int64_t slice_count = 0;
  // In the order they would be made: creates and changed slices, then
  // slices that only take the new generation, then deletes.
  std::vector<PlannedWrite> writes;
};

// Previews what reconciling a pool would write, for dry-run pushes.
class PoolPreviewer {
 public:
  virtual ~PoolPreviewer() = default;
  // What a reconcile would write if the pool's desired content were
  // `desired` (null: the pool withdrawn), against the live slices as the
  // cache holds them now. Reads (a Node, slices the cache lost) may reach the
  // API server; nothing is written and no state changes.
  virtual StatusOr<PoolPreview> preview(const PoolKey& key, const Pool* desired) = 0;
};

}  // namespace rsc::controller::reconcile
