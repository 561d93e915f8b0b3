#include "test/bench/inventory.h"

#include <array>
#include <cstdio>
#include <set>
#include <sstream>

#include "controller/reconcile/planner.h"

namespace rsc::bench {

namespace {

// The device whose attribute churn changes.
constexpr int kChurnDevice = 3;

std::string hex(int value, int width) {
  std::array<char, 32> buf{};
  std::snprintf(buf.data(), buf.size(), "%0*x", width, value);
  return buf.data();
}

Json stringAttr(std::string v) { return {{"string", std::move(v)}}; }
Json intAttr(int64_t v) { return {{"int", v}}; }
Json versionAttr(std::string v) { return {{"version", std::move(v)}}; }

Json gpuDevice(int pool, int i, int revision) {
  Json attrs = {
      {"type", stringAttr("gpu")},
      {"uuid", stringAttr("GPU-" + hex(pool, 8) + "-4a1e-9c3b-" + hex(i, 4) + "-7d2f0ca1b9e0")},
      {"productName", stringAttr("NVIDIA H100 80GB HBM3")},
      {"brand", stringAttr("Nvidia")},
      {"architecture", stringAttr("Hopper")},
      {"cudaComputeCapability", versionAttr("9.0.0")},
      {"driverVersion",
       versionAttr("570.124." + std::to_string(6 + (i == kChurnDevice ? revision : 0)))},
      {"index", intAttr(i)},
      {"minor", intAttr(i)},
      {"resource.kubernetes.io/pcieRoot", stringAttr("pci0000:" + hex(i / 2 * 16, 2))},
  };
  return {{"name", "gpu-" + std::to_string(i)},
          {"attributes", std::move(attrs)},
          {"capacity", {{"memory", {{"value", "80Gi"}}}, {"multiprocessors", {{"value", "132"}}}}}};
}

Json nicDevice(const std::string& fabric, int pool, int i, int revision) {
  Json attrs = {
      {"model", stringAttr("ConnectX-7")},
      {"vendor", stringAttr("example")},
      {"fabric", stringAttr(fabric)},
      {"linkSpeedGbps", intAttr(400)},
      {"firmwareVersion",
       versionAttr("28.39." + std::to_string(1002 + (i == kChurnDevice ? revision : 0)))},
      {"rdma", {{"bool", true}}},
      {"port", intAttr(i % 2)},
      {"rail", intAttr(i % 8)},
      {"chassis", stringAttr("chassis-" + std::to_string(i / 64))},
      {"serial", stringAttr("MT" + hex(pool, 4) + hex(i, 6))},
  };
  return {
      {"name", "nic-" + std::to_string(i)},
      {"attributes", std::move(attrs)},
      {"capacity", {{"bandwidth", {{"value", "400G"}}}, {"virtualFunctions", {{"value", "16"}}}}}};
}

// Device `i` of `pool` as pushed.
Json poolDevice(const BenchPool& pool, int i) {
  return pool.kind == PoolKind::kGpu ? gpuDevice(pool.index, i, pool.revision)
                                     : nicDevice(pool.node_or_fabric, pool.index, i, pool.revision);
}

}  // namespace

std::string baselineDriver(const std::string& driver) {
  std::string out = driver;
  const size_t dot = out.rfind(".com");
  if (dot != std::string::npos) {
    out.replace(dot, 4, ".net");
  }
  return out;
}

std::string nodeName(int index) {
  std::array<char, 32> buf{};
  std::snprintf(buf.data(), buf.size(), "node-%05d", index);
  return buf.data();
}

Json BenchPool::deviceJson() const {
  Json list = Json::array();
  for (int i = 0; i < devices; ++i) {
    list.push_back(poolDevice(*this, i));
  }
  return list;
}

bool BenchPool::carriesRevision(const client::ResourceSlice& slice) const {
  const Json want_json = poolDevice(*this, kChurnDevice);
  const std::string name = want_json["name"];
  for (const client::DeviceRef& d : slice.spec.devices) {
    if (d->name() == name) {
      StatusOr<client::Device> want = client::deviceFromJson(want_json, "devices");
      return want.ok() && d->decode() == *want;
    }
  }
  return false;
}

Json BenchPool::nodeSelector() const {
  if (kind == PoolKind::kGpu) {
    return nullptr;
  }
  Json expr = {{"key", "fabric"}, {"operator", "In"}, {"values", {node_or_fabric}}};
  return {{"nodeSelectorTerms", {{{"matchExpressions", {expr}}}}}};
}

std::string BenchPool::body() const {
  Json j = {{"devices", deviceJson()}};
  if (kind == PoolKind::kGpu) {
    j["nodeName"] = node_or_fabric;
  } else {
    j["nodeSelector"] = nodeSelector();
  }
  return j.dump();
}

std::string BenchPool::target(const std::string& query) const {
  return "/v1/drivers/" + driver + "/pools/" + name + (query.empty() ? "" : "?" + query);
}

std::vector<BenchPool> makeInventory(int gpu_pools, int gpu_devices, int nic_pools, int nic_devices,
                                     int first_index) {
  std::vector<BenchPool> out;
  out.reserve(static_cast<size_t>(gpu_pools) + static_cast<size_t>(nic_pools));
  for (int i = 0; i < gpu_pools; ++i) {
    BenchPool p;
    p.kind = PoolKind::kGpu;
    p.driver = kGpuDriver;
    p.index = first_index + i;
    p.name = nodeName(p.index);
    p.node_or_fabric = p.name;
    p.devices = gpu_devices;
    out.push_back(std::move(p));
  }
  for (int i = 0; i < nic_pools; ++i) {
    BenchPool p;
    p.kind = PoolKind::kNic;
    p.driver = kNicDriver;
    p.index = i;
    p.name = "fabric-" + std::to_string(i + 1);
    p.node_or_fabric = p.name;
    p.devices = nic_devices;
    out.push_back(std::move(p));
  }
  return out;
}

int64_t minimalSliceCount(const BenchPool& pool) {
  const auto per = static_cast<int64_t>(client::kResourceSliceMaxDevices);
  return std::max<int64_t>(1, (pool.devices + per - 1) / per);
}

std::vector<client::ResourceSlice> baselineSlices(const BenchPool& pool, const std::string& driver,
                                                  const std::string& managed_by,
                                                  const std::string& node_uid) {
  const Json devices = pool.deviceJson();
  const int64_t count = minimalSliceCount(pool);
  std::vector<client::ResourceSlice> out(static_cast<size_t>(count));
  for (int64_t s = 0; s < count; ++s) {
    client::ResourceSlice& slice = out[static_cast<size_t>(s)];
    slice.metadata.generate_name = controller::reconcile::sliceGenerateName(s, {driver, pool.name});
    slice.metadata.labels[kManagedByKey] = managed_by;
    slice.spec.driver = driver;
    slice.spec.pool = {pool.name, 1, count};
    if (pool.kind == PoolKind::kGpu) {
      slice.spec.node_name = pool.node_or_fabric;
      client::OwnerReference owner;
      owner.api_version = "v1";
      owner.kind = "Node";
      owner.name = pool.node_or_fabric;
      owner.uid = node_uid;
      owner.controller = true;
      slice.metadata.owner_references.push_back(owner);
    } else {
      slice.spec.node_selector = client::NodeSelector{pool.nodeSelector()};
    }
    const size_t per = client::kResourceSliceMaxDevices;
    for (size_t i = static_cast<size_t>(s) * per;
         i < devices.size() && i < (static_cast<size_t>(s) + 1) * per; ++i) {
      StatusOr<client::Device> d = client::deviceFromJson(devices[i], "devices");
      if (d.ok()) {
        slice.spec.devices.push_back(std::move(*d));
      }
    }
  }
  return out;
}

StatusOr<CheckReport> checkSlices(const std::vector<client::ResourceSlice>& live,
                                  const std::vector<const BenchPool*>& expected,
                                  const std::map<std::string, std::string>& node_uids) {
  CheckReport report;
  std::vector<std::string> problems;
  auto problem = [&](const std::string& what) {
    if (problems.size() < 10) {
      problems.push_back(what);
    }
  };

  // Group the live slices by (driver, pool).
  std::map<std::pair<std::string, std::string>, std::vector<const client::ResourceSlice*>> by_pool;
  for (const client::ResourceSlice& s : live) {
    by_pool[{s.spec.driver, s.spec.pool.name}].push_back(&s);
    report.json_bytes += static_cast<int64_t>(client::toJson(s).dump().size());
  }
  report.slices = static_cast<int64_t>(live.size());

  std::set<std::pair<std::string, std::string>> wanted;
  for (const BenchPool* pool : expected) {
    const std::string id = pool->driver + "/" + pool->name;
    wanted.insert({pool->driver, pool->name});
    auto it = by_pool.find({pool->driver, pool->name});
    if (it == by_pool.end()) {
      problem(id + ": no slices");
      continue;
    }
    const std::vector<const client::ResourceSlice*>& slices = it->second;
    ++report.pools;
    const int64_t want_count = minimalSliceCount(*pool);
    if (static_cast<int64_t>(slices.size()) != want_count) {
      problem(id + ": " + std::to_string(slices.size()) + " slices, want " +
              std::to_string(want_count));
    }
    const int64_t generation = slices.front()->spec.pool.generation;
    report.generations[pool->name] = generation;

    // Devices as pushed, by name.
    std::map<std::string, client::Device> want;
    for (const Json& d : pool->deviceJson()) {
      StatusOr<client::Device> device = client::deviceFromJson(d, "devices");
      if (!device.ok()) {
        return device.status().withContext(id);
      }
      want.emplace(device->name, std::move(*device));
    }
    std::set<std::string> seen;
    for (const client::ResourceSlice* s : slices) {
      const std::string sid = id + " slice " + s->metadata.name;
      if (s->spec.pool.generation != generation) {
        problem(sid + ": generations differ");
      }
      if (s->spec.pool.resource_slice_count != static_cast<int64_t>(slices.size())) {
        problem(sid + ": resourceSliceCount " + std::to_string(s->spec.pool.resource_slice_count) +
                " but " + std::to_string(slices.size()) + " slices");
      }
      if (s->spec.devices.size() > client::kResourceSliceMaxDevices) {
        problem(sid + ": " + std::to_string(s->spec.devices.size()) + " devices");
      }
      if (pool->kind == PoolKind::kGpu) {
        auto uid = node_uids.find(pool->node_or_fabric);
        const bool owned = uid != node_uids.end() && s->metadata.owner_references.size() == 1 &&
                           s->metadata.owner_references[0].kind == "Node" &&
                           s->metadata.owner_references[0].uid == uid->second;
        if (s->spec.node_name != pool->node_or_fabric) {
          problem(sid + ": wrong nodeName");
        }
        if (!owned) {
          problem(sid + ": not owned by its Node");
        }
      } else if (!s->spec.node_selector || s->spec.node_selector->value != pool->nodeSelector()) {
        problem(sid + ": wrong nodeSelector");
      }
      for (const client::Device& d : client::decodeAll(s->spec.devices)) {
        ++report.devices;
        if (!seen.insert(d.name).second) {
          problem(sid + ": device " + d.name + " twice");
        }
        auto w = want.find(d.name);
        if (w == want.end()) {
          problem(sid + ": unexpected device " + d.name);
        } else if (!(w->second == d)) {
          problem(sid + ": device " + d.name + " differs from the push");
        }
      }
    }
    if (seen.size() != want.size()) {
      problem(id + ": " + std::to_string(seen.size()) + " of " + std::to_string(want.size()) +
              " devices published");
    }
  }
  for (const auto& [key, slices] : by_pool) {
    if (wanted.count(key) == 0) {
      problem(key.first + "/" + key.second + ": slices of no pushed pool");
    }
  }
  if (!problems.empty()) {
    std::ostringstream msg;
    msg << "published slices are wrong:";
    for (const std::string& p : problems) {
      msg << "\n  " << p;
    }
    return failedPrecondition(msg.str());
  }
  return report;
}

}  // namespace rsc::bench
