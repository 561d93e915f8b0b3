// Planner: from the desired state of one pool and the live slices of that
// pool, decides which slices the pool should consist of and which live slice
// each of them becomes. It writes nothing and knows nothing of generations
// (the Reconciler decides those). Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "client/api_limits.h"
#include "client/resource_slice.h"
#include "controller/reconcile/pool.h"

namespace rsc::controller::reconcile {

using SlicePtr = std::shared_ptr<const client::ResourceSlice>;

// The API limits live in client/api_limits.h.
using client::deviceLimit;
using client::kMaxCounterSetsPerSlice;

struct PlannedSlice {
  // The index in the slice's name: allocation order follows it.
  int64_t index = 0;
  // The live slice this one becomes; null when it must be created.
  SlicePtr live;
  std::vector<client::DeviceRef> devices;
  std::vector<client::CounterSet> shared_counters;
  SliceOptions options;
};

struct Plan {
  // Ordered by index.
  std::vector<PlannedSlice> slices;
  // Live slices of the pool that are not wanted any more.
  std::vector<SlicePtr> obsolete;
};

// Returns the most devices a slice holding `devices` may hold: 64 when any of
// them uses taints, counters or list attributes, else 128.
size_t deviceLimit(const std::vector<client::DeviceRef>& devices);

// Where the automatic split puts a pool's shared counter sets.
enum class CounterPlacement {
  // In slices of their own (Kubernetes 1.35 and later accept a device that
  // consumes a counter set of another slice of its pool).
  kOwnSlices,
  // Each counter set in the slice of the devices that consume it, as
  // Kubernetes 1.34 requires: a counter set, its consumers and every other
  // set those consume form a group that one slice holds (at most 64 devices
  // and kMaxCounterSetsPerSlice sets; the push validation refuses larger
  // groups). Counter sets nobody consumes join the slices like a group of
  // their own.
  kWithConsumers,
};

// What one slice must hold together in CounterPlacement::kWithConsumers: a
// group of counter sets with every device that consumes one of them, or a
// single device that consumes none (no sets). Positions index the pool's
// devices and shared_counters, in push order.
struct CounterGroup {
  std::vector<size_t> sets;
  std::vector<size_t> devices;
  bool advanced = false;  // a device uses taints, counters or list attributes
};

// The groups of an automatically split pool, in the order of their first
// device (groups without devices last, in counter-set order). Each fits one
// slice when it has at most deviceLimit(advanced) devices and
// kMaxCounterSetsPerSlice sets.
std::vector<CounterGroup> counterGroupsOf(const Pool& pool);

// The placement a Kubernetes release accepts: kWithConsumers up to 1.34,
// kOwnSlices from 1.35 on.
CounterPlacement counterPlacementFor(int major, int minor);

// Plans a pool. With Pool::slices the driver's split is kept and slice i of
// the push becomes the live slice with index i. Otherwise devices are split
// automatically and stably: a device stays in the live slice it is in while
// that slice has room, so adding, changing or removing one device touches one
// slice; devices that must move or are new fill the free room of live slices
// first, in index order, then new slices; shared counters go in slices of
// their own. A pool always has at least one slice (an empty pool publishes
// one empty slice, so the scheduler sees it exists). Live slices with neither
// devices nor counter sets count as the pool's counter slices when no live
// slice holds counter sets: a server that drops sharedCounters stores them so.
Plan planPool(const Pool& pool, const std::vector<SlicePtr>& live,
              CounterPlacement counters = CounterPlacement::kOwnSlices);

// Returns the index encoded in a slice name ("0000a-gpu.example.com-x-ab12c"
// is 10), or -1 if the name has no index prefix.
int64_t sliceIndexFromName(const std::string& name);

// Returns the generateName for slice `index` of a pool: the index in hex,
// zero-padded to at least five digits, then driver and pool ('/' becomes '-'),
// cut so that the API server's generated name stays within 63 characters.
std::string sliceGenerateName(int64_t index, const PoolKey& key);

}  // namespace rsc::controller::reconcile
