// The desired state of one pool, as a driver pushed it through the inventory
// API (already validated there), and the key every piece of work is filed
// under. Plain values, shared between threads only as shared_ptr<const>.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "client/resource_slice.h"

namespace rsc::controller::reconcile {

// Identifies a pool: the driver that owns it and its name. Pool names may
// contain '/'.
struct PoolKey {
  std::string driver;
  std::string pool;

  friend bool operator==(const PoolKey&, const PoolKey&) = default;
  friend auto operator<=>(const PoolKey&, const PoolKey&) = default;
  // "driver/pool", for logs and errors.
  std::string toString() const { return driver + "/" + pool; }
};

struct PoolKeyHash {
  size_t operator()(const PoolKey& k) const {
    const size_t h = std::hash<std::string>()(k.driver);
    return h ^ (std::hash<std::string>()(k.pool) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
  }
};

// The fields of a ResourceSliceSpec that hold for the slice as a whole, besides its node
// selection (Kubernetes 1.37, alpha). A pool's values go on every slice the planner makes,
// except that partitionTypeAttribute goes only on slices holding a device that consumes
// counters (the API server refuses it on others); a slice the driver chose has its own.
struct SliceOptions {
  std::optional<std::string> partition_type_attribute;
  std::vector<std::string> skip_node_operations;
  friend bool operator==(const SliceOptions&, const SliceOptions&) = default;
};

// One slice the driver chose itself (Pool::slices).
struct DesiredSlice {
  std::vector<client::DeviceRef> devices;
  std::vector<client::CounterSet> shared_counters;
  SliceOptions options;
  friend bool operator==(const DesiredSlice&, const DesiredSlice&) = default;
};

// Where the devices of a pool may be used: exactly one member is set.
struct NodeSelection {
  std::optional<std::string> node_name;               // a node-local pool
  std::optional<client::NodeSelector> node_selector;  // one NodeSelectorTerm
  bool all_nodes = false;
  bool per_device_node_selection = false;  // each device says where it lives
  friend bool operator==(const NodeSelection&, const NodeSelection&) = default;
};

// The desired content of a pool: either `devices` (and `shared_counters`),
// which the planner splits into slices, or `slices` chosen by the driver.
struct Pool {
  NodeSelection selection;
  std::vector<client::DeviceRef> devices;
  std::vector<client::CounterSet> shared_counters;
  std::optional<std::vector<DesiredSlice>> slices;
  // With `devices`: for the slices the planner makes. With `slices`, each slice's own
  // options hold (the push's pool-level values are copied into slices that set none).
  SliceOptions options;
  // Publish at least this generation.
  int64_t generation = 0;
  // Withdraw the pool when it is neither renewed nor re-pushed within this
  // time; zero means never.
  std::chrono::seconds lease{0};
  friend bool operator==(const Pool&, const Pool&) = default;
};

}  // namespace rsc::controller::reconcile

template <>
struct std::hash<rsc::controller::reconcile::PoolKey> : rsc::controller::reconcile::PoolKeyHash {};
