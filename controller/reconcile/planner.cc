#include "controller/reconcile/planner.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "common/strings.h"

namespace rsc::controller::reconcile {
namespace {

// The API server appends five random characters to a generateName and cuts
// the prefix to 58 so that generated names fit in 63 characters.
constexpr size_t kMaxGenerateNamePrefix = 58;

bool isCounterSlice(const client::ResourceSlice& s) {
  return !s.spec.shared_counters.empty() && s.spec.devices.empty();
}

bool isEmptySlice(const client::ResourceSlice& s) {
  return s.spec.shared_counters.empty() && s.spec.devices.empty();
}

// A live slice with its index, sorted by index then name so that among
// duplicates of one index the choice is deterministic.
struct IndexedSlice {
  int64_t index;
  SlicePtr slice;
};

std::vector<IndexedSlice> sortedByIndex(const std::vector<SlicePtr>& live) {
  std::vector<IndexedSlice> out;
  out.reserve(live.size());
  for (const SlicePtr& s : live) out.push_back({sliceIndexFromName(s->metadata.name), s});
  std::sort(out.begin(), out.end(), [](const IndexedSlice& a, const IndexedSlice& b) {
    if (a.index != b.index) return a.index < b.index;
    return a.slice->metadata.name < b.slice->metadata.name;
  });
  return out;
}

// The live slices the plan may keep, by index: one per index (the first by
// name); the rest, and names without an index (not ours to keep), go to
// `obsolete`.
std::vector<IndexedSlice> keepableSlices(const std::vector<SlicePtr>& live,
                                         std::vector<SlicePtr>& obsolete) {
  std::vector<IndexedSlice> kept;
  std::set<int64_t> seen;
  for (const IndexedSlice& s : sortedByIndex(live)) {
    if (s.index < 0 || !seen.insert(s.index).second) {
      obsolete.push_back(s.slice);
    } else {
      kept.push_back(s);
    }
  }
  return kept;
}

// Whether the server dropped the pool's counter sets: a server that drops
// sharedCounters (DRAPartitionableDevices off: the default of Kubernetes 1.34
// and 1.35) stores each counter slice empty. Planned as device slices, they
// would be deleted and created again, bumping the pool, on every reconcile;
// as counter slices they are kept, and the reconciler compares them as they
// really are (what the server dropped is no change). Only when no live slice
// holds counter sets (the server drops them from every slice) and there are
// enough empty slices for every chunk of counter sets: then chunk i goes to
// the i-th of them by index, as it went when they were created.
bool countersDropped(const Pool& pool, const std::vector<SlicePtr>& live,
                     const std::vector<IndexedSlice>& keepable) {
  if (pool.shared_counters.empty()) return false;
  if (std::any_of(live.begin(), live.end(),
                  [](const SlicePtr& s) { return !s->spec.shared_counters.empty(); })) {
    return false;
  }
  const size_t chunks =
      (pool.shared_counters.size() + kMaxCounterSetsPerSlice - 1) / kMaxCounterSetsPerSlice;
  const auto empty = std::count_if(keepable.begin(), keepable.end(),
                                   [](const IndexedSlice& s) { return isEmptySlice(*s.slice); });
  return static_cast<size_t>(empty) >= chunks;
}

void orderByIndex(Plan& plan) {
  std::sort(plan.slices.begin(), plan.slices.end(),
            [](const PlannedSlice& a, const PlannedSlice& b) { return a.index < b.index; });
}

// Hands out indices not used by any kept slice, lowest first.
class IndexAllocator {
 public:
  void reserve(int64_t index) { used_.insert(index); }
  int64_t next() {
    while (used_.contains(next_)) ++next_;
    used_.insert(next_);
    return next_;
  }

 private:
  std::set<int64_t> used_;
  int64_t next_ = 0;
};

Plan planExplicit(const std::vector<DesiredSlice>& desired, const std::vector<SlicePtr>& live) {
  Plan plan;
  std::map<int64_t, SlicePtr> by_index;
  for (const IndexedSlice& s : sortedByIndex(live)) {
    const bool wanted = s.index >= 0 && s.index < static_cast<int64_t>(desired.size());
    if (wanted && !by_index.contains(s.index)) {
      by_index[s.index] = s.slice;
    } else {
      plan.obsolete.push_back(s.slice);
    }
  }
  for (size_t i = 0; i < desired.size(); ++i) {
    PlannedSlice p;
    p.index = static_cast<int64_t>(i);
    auto it = by_index.find(p.index);
    if (it != by_index.end()) p.live = it->second;
    p.devices = desired[i].devices;
    p.shared_counters = desired[i].shared_counters;
    p.options = desired[i].options;
    plan.slices.push_back(std::move(p));
  }
  return plan;
}

// Union-find over counter-set positions.
class SetGroups {
 public:
  explicit SetGroups(size_t n) : parent_(n) {
    for (size_t i = 0; i < n; ++i) parent_[i] = i;
  }
  size_t root(size_t i) {
    while (parent_[i] != i) i = parent_[i] = parent_[parent_[i]];
    return i;
  }
  void join(size_t a, size_t b) { parent_[root(a)] = root(b); }

 private:
  std::vector<size_t> parent_;
};

}  // namespace

std::vector<CounterGroup> counterGroupsOf(const Pool& pool) {
  std::unordered_map<std::string, size_t> set_position;
  for (size_t i = 0; i < pool.shared_counters.size(); ++i) {
    set_position.emplace(pool.shared_counters[i].name, i);
  }
  SetGroups groups(pool.shared_counters.size());
  // consumed[d]: the first counter set device d consumes, if any.
  std::vector<std::optional<size_t>> consumed(pool.devices.size());
  for (size_t d = 0; d < pool.devices.size(); ++d) {
    // Only an advanced device can consume counters: decode only those.
    if (!pool.devices[d]->advanced()) continue;
    for (const client::DeviceCounterConsumption& c : pool.devices[d].device().consumes_counters) {
      auto it = set_position.find(c.counter_set);
      if (it == set_position.end()) continue;  // refused by the push validation
      std::optional<size_t>& first = consumed[d];
      if (first.has_value()) {
        groups.join(it->second, *first);
      } else {
        first = it->second;
      }
    }
  }
  std::vector<CounterGroup> units;
  std::unordered_map<size_t, size_t> unit_of_root;
  auto group_unit = [&](size_t set) -> CounterGroup& {
    auto [it, added] = unit_of_root.emplace(groups.root(set), units.size());
    if (added) units.emplace_back();
    return units[it->second];
  };
  for (size_t d = 0; d < pool.devices.size(); ++d) {
    if (const std::optional<size_t> first = consumed[d]; first.has_value()) {
      group_unit(*first).devices.push_back(d);
    } else {
      units.push_back({{}, {d}, false});
    }
  }
  for (size_t s = 0; s < pool.shared_counters.size(); ++s) group_unit(s).sets.push_back(s);
  for (CounterGroup& u : units) {
    u.advanced = std::any_of(u.devices.begin(), u.devices.end(),
                             [&](size_t d) { return pool.devices[d]->advanced(); });
  }
  return units;
}

namespace {

Plan planWithConsumers(const Pool& pool, const std::vector<SlicePtr>& live) {
  Plan plan;
  IndexAllocator indices;
  const std::vector<IndexedSlice> slots = keepableSlices(live, plan.obsolete);
  // Where each device and counter set lives now, by name.
  std::unordered_map<std::string, size_t> slot_of_device;
  std::unordered_map<std::string, size_t> slot_of_set;
  for (size_t i = 0; i < slots.size(); ++i) {
    for (const client::DeviceRef& d : slots[i].slice->spec.devices) {
      slot_of_device.emplace(d->name(), i);
    }
    for (const client::CounterSet& c : slots[i].slice->spec.shared_counters) {
      slot_of_set.emplace(c.name, i);
    }
  }

  struct Content {
    std::vector<size_t> devices;
    std::vector<size_t> sets;
    bool advanced = false;
  };
  auto fits = [](const Content& c, const CounterGroup& u) {
    return c.devices.size() + u.devices.size() <= deviceLimit(c.advanced || u.advanced) &&
           c.sets.size() + u.sets.size() <= kMaxCounterSetsPerSlice;
  };
  auto put = [](Content& c, const CounterGroup& u) {
    c.devices.insert(c.devices.end(), u.devices.begin(), u.devices.end());
    c.sets.insert(c.sets.end(), u.sets.begin(), u.sets.end());
    c.advanced = c.advanced || u.advanced;
  };

  const std::vector<CounterGroup> units = counterGroupsOf(pool);
  std::vector<Content> kept(slots.size());
  // A unit goes back to the slice of its first device, else of its first
  // counter set, while there is room; plain units first, so that a device
  // that gains a feature is the one that moves (as in kOwnSlices).
  std::vector<size_t> unplaced;
  for (const bool advanced_pass : {false, true}) {
    for (size_t u = 0; u < units.size(); ++u) {
      const CounterGroup& unit = units[u];
      if (unit.advanced != advanced_pass) continue;
      std::optional<size_t> home;
      if (!unit.devices.empty()) {
        auto it = slot_of_device.find(pool.devices[unit.devices.front()]->name());
        if (it != slot_of_device.end()) home = it->second;
      }
      if (!home && !unit.sets.empty()) {
        auto it = slot_of_set.find(pool.shared_counters[unit.sets.front()].name);
        if (it != slot_of_set.end()) home = it->second;
      }
      if (home && fits(kept[*home], unit)) {
        put(kept[*home], unit);
      } else {
        unplaced.push_back(u);
      }
    }
  }
  std::sort(unplaced.begin(), unplaced.end());
  // Then free room in live slices that hold something of this push, in
  // index order; then new slices, each filled while the next unit fits.
  std::vector<Content> added;
  for (const size_t u : unplaced) {
    const CounterGroup& unit = units[u];
    size_t slot = 0;
    while (slot < kept.size() &&
           ((kept[slot].devices.empty() && kept[slot].sets.empty()) || !fits(kept[slot], unit))) {
      ++slot;
    }
    if (slot < kept.size()) {
      put(kept[slot], unit);
      continue;
    }
    if (added.empty() || !fits(added.back(), unit)) added.emplace_back();
    put(added.back(), unit);
  }

  // Devices and counter sets keep the order of the push within a slice.
  auto planned = [&](Content& c, int64_t index, SlicePtr slice) {
    std::sort(c.devices.begin(), c.devices.end());
    std::sort(c.sets.begin(), c.sets.end());
    PlannedSlice p;
    p.index = index;
    p.live = std::move(slice);
    p.devices.reserve(c.devices.size());
    for (const size_t d : c.devices) p.devices.push_back(pool.devices[d]);
    for (const size_t s : c.sets) p.shared_counters.push_back(pool.shared_counters[s]);
    return p;
  };
  const bool empty_pool = pool.devices.empty() && pool.shared_counters.empty();
  for (size_t i = 0; i < slots.size(); ++i) {
    if (kept[i].devices.empty() && kept[i].sets.empty() && !(empty_pool && i == 0)) {
      plan.obsolete.push_back(slots[i].slice);
      continue;
    }
    indices.reserve(slots[i].index);
    plan.slices.push_back(planned(kept[i], slots[i].index, slots[i].slice));
  }
  if (empty_pool && plan.slices.empty()) added.emplace_back();
  for (Content& c : added) plan.slices.push_back(planned(c, indices.next(), nullptr));
  orderByIndex(plan);
  return plan;
}

}  // namespace

CounterPlacement counterPlacementFor(int major, int minor) {
  return major == 1 && minor <= 34 ? CounterPlacement::kWithConsumers
                                   : CounterPlacement::kOwnSlices;
}

size_t deviceLimit(const std::vector<client::DeviceRef>& devices) {
  return deviceLimit(std::any_of(devices.begin(), devices.end(),
                                 [](const client::DeviceRef& d) { return d->advanced(); }));
}

namespace {

// Counter sets: chunks of kMaxCounterSetsPerSlice, matched with the live counter slices (those
// left over are obsolete). Chunks that keep a live slice reserve its index; the others have none.
std::vector<PlannedSlice> planCounterSlices(const Pool& pool,
                                            const std::vector<IndexedSlice>& live_counters,
                                            IndexAllocator& indices,
                                            std::vector<SlicePtr>& obsolete) {
  std::vector<PlannedSlice> counter_slices;
  for (size_t i = 0; i < pool.shared_counters.size(); i += kMaxCounterSetsPerSlice) {
    PlannedSlice p;
    const size_t end = std::min(pool.shared_counters.size(), i + kMaxCounterSetsPerSlice);
    p.shared_counters.assign(pool.shared_counters.begin() + static_cast<std::ptrdiff_t>(i),
                             pool.shared_counters.begin() + static_cast<std::ptrdiff_t>(end));
    counter_slices.push_back(std::move(p));
  }
  // A chunk goes back to the live counter slice that holds its first counter
  // set, so that planning a plan again changes nothing; chunks without one
  // take the remaining live counter slices in order.
  std::vector<bool> taken(live_counters.size(), false);
  auto assign = [&](PlannedSlice& chunk, size_t i) {
    taken[i] = true;
    chunk.live = live_counters[i].slice;
    chunk.index = live_counters[i].index;
    indices.reserve(chunk.index);
  };
  for (PlannedSlice& chunk : counter_slices) {
    for (size_t i = 0; i < live_counters.size(); ++i) {
      if (taken[i]) continue;
      const auto& sets = live_counters[i].slice->spec.shared_counters;
      if (std::any_of(sets.begin(), sets.end(), [&](const client::CounterSet& c) {
            return c.name == chunk.shared_counters.front().name;
          })) {
        assign(chunk, i);
        break;
      }
    }
  }
  for (PlannedSlice& chunk : counter_slices) {
    if (chunk.live != nullptr) continue;
    for (size_t i = 0; i < live_counters.size(); ++i) {
      if (!taken[i]) {
        assign(chunk, i);
        break;
      }
    }
  }
  for (size_t i = 0; i < live_counters.size(); ++i) {
    if (!taken[i]) obsolete.push_back(live_counters[i].slice);
  }

  return counter_slices;
}

// Where the devices go: assigned[slot] holds the positions in pool.devices that stay in (or move
// to) the live device slice at that slot, in no order; `rest` need new slices.
struct DevicePlacement {
  std::vector<std::vector<size_t>> assigned;
  std::vector<const client::DeviceRef*> rest;
};

DevicePlacement placeDevices(const Pool& pool, const std::vector<IndexedSlice>& live_devices) {
  // Devices: first pass keeps each device in its live slice while there is
  // room; the rest are placed afterwards.
  std::unordered_map<std::string, size_t> live_slice_of;  // device -> live_devices position
  for (size_t i = 0; i < live_devices.size(); ++i) {
    for (const client::DeviceRef& d : live_devices[i].slice->spec.devices) {
      live_slice_of.emplace(d->name(), i);
    }
  }
  // assigned[slot] holds positions in pool.devices; advanced[slot] says
  // whether the slot holds a device that lowers its limit to 64.
  std::vector<std::vector<size_t>> assigned(live_devices.size());
  std::vector<bool> advanced(live_devices.size(), false);
  auto fits = [&](size_t slot, const client::DeviceRef& d) {
    return assigned[slot].size() + 1 <= deviceLimit(advanced[slot] || d->advanced());
  };
  auto place = [&](size_t slot, size_t pos) {
    advanced[slot] = advanced[slot] || pool.devices[pos]->advanced();
    assigned[slot].push_back(pos);
  };
  // Plain devices go back to their slices first, then those with taints,
  // counters or list attributes: a device that gains such a feature must
  // not lower the limit of a full slice and push its neighbours out; it is
  // the one that moves.
  std::vector<size_t> unplaced;
  for (const bool advanced_pass : {false, true}) {
    for (size_t pos = 0; pos < pool.devices.size(); ++pos) {
      const client::DeviceRef& d = pool.devices[pos];
      if (d->advanced() != advanced_pass) continue;
      auto it = live_slice_of.find(d->name());
      if (it != live_slice_of.end() && fits(it->second, d)) {
        place(it->second, pos);
      } else {
        unplaced.push_back(pos);
      }
    }
  }
  std::sort(unplaced.begin(), unplaced.end());
  // Second pass: free room in live slices that already hold devices of this
  // push, in index order; emptied slices are not refilled, so that they can
  // go away.
  std::vector<const client::DeviceRef*> rest;
  for (const size_t pos : unplaced) {
    const client::DeviceRef& d = pool.devices[pos];
    size_t slot = 0;
    while (slot < live_devices.size() && (assigned[slot].empty() || !fits(slot, d))) ++slot;
    if (slot < live_devices.size()) {
      place(slot, pos);
    } else {
      rest.push_back(&d);
    }
  }

  return {std::move(assigned), std::move(rest)};
}

// New slices for the devices left over, each filled up to its limit: full at 128 devices, or at
// 64 once it holds an advanced one.
std::vector<PlannedSlice> newDeviceSlices(const std::vector<const client::DeviceRef*>& rest) {
  std::vector<PlannedSlice> new_slices;
  bool new_advanced = false;
  for (const client::DeviceRef* d : rest) {
    const bool advanced_after = new_advanced || (*d)->advanced();
    if (new_slices.empty() || new_slices.back().devices.size() + 1 > deviceLimit(advanced_after)) {
      new_slices.emplace_back();
      new_advanced = (*d)->advanced();
    } else {
      new_advanced = advanced_after;
    }
    new_slices.back().devices.push_back(*d);
  }
  return new_slices;
}

// The automatic split with counter sets in slices of their own.
Plan planOwnSlices(const Pool& pool, const std::vector<SlicePtr>& live) {
  Plan plan;
  IndexAllocator indices;

  // Split the keepable live slices into counter slices and device slices.
  const std::vector<IndexedSlice> keepable = keepableSlices(live, plan.obsolete);
  const bool emptied = countersDropped(pool, live, keepable);
  std::vector<IndexedSlice> live_counters;
  std::vector<IndexedSlice> live_devices;
  for (const IndexedSlice& s : keepable) {
    const bool counters = isCounterSlice(*s.slice) || (emptied && isEmptySlice(*s.slice));
    (counters ? live_counters : live_devices).push_back(s);
  }
  std::vector<PlannedSlice> counter_slices =
      planCounterSlices(pool, live_counters, indices, plan.obsolete);
  DevicePlacement placement = placeDevices(pool, live_devices);
  std::vector<std::vector<size_t>>& assigned = placement.assigned;

  // Devices keep the order of the push within each slice. A live slice left
  // without devices goes, except that an empty pool keeps (or gets) exactly
  // one empty slice.
  const bool empty_pool = pool.devices.empty() && pool.shared_counters.empty();
  std::vector<PlannedSlice> device_slices;
  for (size_t i = 0; i < live_devices.size(); ++i) {
    if (assigned[i].empty() && !(empty_pool && i == 0)) {
      plan.obsolete.push_back(live_devices[i].slice);
      continue;
    }
    std::sort(assigned[i].begin(), assigned[i].end());
    PlannedSlice p;
    p.index = live_devices[i].index;
    p.live = live_devices[i].slice;
    p.devices.reserve(assigned[i].size());
    for (const size_t pos : assigned[i]) p.devices.push_back(pool.devices[pos]);
    indices.reserve(p.index);
    device_slices.push_back(std::move(p));
  }

  std::vector<PlannedSlice> new_slices = newDeviceSlices(placement.rest);
  if (empty_pool && device_slices.empty()) new_slices.emplace_back();

  // Indices: counter slices without a live slice first, then new device
  // slices, each taking the lowest free index.
  for (PlannedSlice& p : counter_slices) {
    if (p.live == nullptr) p.index = indices.next();
  }
  for (PlannedSlice& p : new_slices) p.index = indices.next();

  for (PlannedSlice& p : counter_slices) plan.slices.push_back(std::move(p));
  for (PlannedSlice& p : device_slices) plan.slices.push_back(std::move(p));
  for (PlannedSlice& p : new_slices) plan.slices.push_back(std::move(p));
  orderByIndex(plan);
  return plan;
}

// The pool's slice options as one slice of the automatic split carries them.
SliceOptions optionsFor(const SliceOptions& pool, const std::vector<client::DeviceRef>& devices) {
  SliceOptions out = pool;
  if (std::none_of(devices.begin(), devices.end(),
                   [](const client::DeviceRef& d) { return d->consumesCounters(); })) {
    out.partition_type_attribute.reset();
  }
  return out;
}

}  // namespace

Plan planPool(const Pool& pool, const std::vector<SlicePtr>& live, CounterPlacement counters) {
  if (pool.slices.has_value()) return planExplicit(*pool.slices, live);
  Plan plan = counters == CounterPlacement::kWithConsumers ? planWithConsumers(pool, live)
                                                           : planOwnSlices(pool, live);
  for (PlannedSlice& p : plan.slices) p.options = optionsFor(pool.options, p.devices);
  return plan;
}

int64_t sliceIndexFromName(const std::string& name) {
  const size_t dash = name.find('-');
  if (dash == std::string::npos || dash == 0 || dash > 15) return -1;
  int64_t value = 0;
  for (size_t i = 0; i < dash; ++i) {
    const char c = name[i];
    int digit = 0;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else {
      return -1;
    }
    value = value * 16 + digit;
  }
  return value;
}

std::string sliceGenerateName(int64_t index, const PoolKey& key) {
  char prefix[24];
  std::snprintf(prefix, sizeof(prefix), "%05llx-", static_cast<unsigned long long>(index));
  std::string name = prefix;
  name += asciiLower(key.driver);
  name += '-';
  std::string pool = asciiLower(key.pool);
  std::replace(pool.begin(), pool.end(), '/', '-');
  name += pool;
  name += '-';
  if (name.size() > kMaxGenerateNamePrefix) name.resize(kMaxGenerateNamePrefix);
  return name;
}

}  // namespace rsc::controller::reconcile
