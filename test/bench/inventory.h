// The benchmark's inventory: GPU-like node-local pools and NIC-like
// network-attached pools, generated deterministically so that the pushed
// bodies, the baseline's slices and the expected state of a check all come
// from one description. Also the check that the slices on the API server are
// exactly the pushed pools, complete and consistent. Used by bench.cc.
// Plain values and pure functions: not synchronised.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "client/resource_slice.h"
#include "common/status.h"

namespace rsc::bench {

using Json = client::Json;

enum class PoolKind {
  kGpu,  // node-local, GPU-like devices: 10 attributes, 2 capacities
  kNic,  // network-attached (nodeSelector), NIC-like devices: 10 attributes, 2 capacities
};

struct BenchPool {
  PoolKind kind = PoolKind::kGpu;
  std::string driver;
  std::string name;
  // kGpu: the Node; kNic: the fabric label value the node selector matches.
  std::string node_or_fabric;
  int index = 0;  // distinguishes devices of different pools
  int devices = 0;
  // How many times one attribute of one device was changed (churn).
  int revision = 0;

  // The device list, as pushed.
  Json deviceJson() const;
  // Whether `slice` holds the device churn changes as it is at `revision`:
  // a watch's test that an event carries the pool's new content.
  bool carriesRevision(const client::ResourceSlice& slice) const;
  // The body of PUT /v1/drivers/{driver}/pools/{pool}.
  std::string body() const;
  // The node selector of a kNic pool (null for kGpu).
  Json nodeSelector() const;
  // "/v1/drivers/<driver>/pools/<name>", with an optional "?query".
  std::string target(const std::string& query = "") const;
};

// The drivers of the benchmark and of its baseline: same length names, so the
// baseline's slices are the controller's byte for byte but for these words.
inline constexpr char kGpuDriver[] = "gpu.example.com";
inline constexpr char kNicDriver[] = "nic.example.com";
inline constexpr char kControllerLabel[] = "resourceslice-controller";
inline constexpr char kBaselineLabel[] = "resourceslice-benchmarks";
inline constexpr char kManagedByKey[] = "app.kubernetes.io/managed-by";
// ".com" -> ".net".
std::string baselineDriver(const std::string& driver);

// "node-00042".
std::string nodeName(int index);

// `gpu_pools` node-local pools of `gpu_devices` devices on node-00000.. and
// `nic_pools` network-attached pools of `nic_devices` devices.
std::vector<BenchPool> makeInventory(int gpu_pools, int gpu_devices, int nic_pools, int nic_devices,
                                     int first_index = 0);

// The slices the controller should publish for `pool`, as created directly:
// devices split 128 per slice in push order, generation 1, labelled
// `managed_by`, owned by the Node with `node_uid` (node-local pools).
std::vector<client::ResourceSlice> baselineSlices(const BenchPool& pool, const std::string& driver,
                                                  const std::string& managed_by,
                                                  const std::string& node_uid);

// The minimal number of slices of a pool (128 devices each, at least one).
int64_t minimalSliceCount(const BenchPool& pool);

struct CheckReport {
  int64_t pools = 0;
  int64_t slices = 0;
  int64_t devices = 0;
  // Compact JSON of the slices as the API server returned them.
  int64_t json_bytes = 0;
  // Pool name -> generation.
  std::map<std::string, int64_t> generations;
};

// Checks that `live` (every slice of the drivers of `expected`) is exactly
// `expected`: each pool has minimalSliceCount slices, all at one generation
// and each saying so in resourceSliceCount; the union of their devices equals
// the pushed devices (semantic equality); node-local slices name their Node
// and are owned by it (`node_uids`), network-attached ones carry the node
// selector; no other pool has slices. Reports up to ten problems.
StatusOr<CheckReport> checkSlices(const std::vector<client::ResourceSlice>& live,
                                  const std::vector<const BenchPool*>& expected,
                                  const std::map<std::string, std::string>& node_uids);

}  // namespace rsc::bench
