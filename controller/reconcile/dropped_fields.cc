#include "controller/reconcile/dropped_fields.h"

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/log.h"

namespace rsc::controller::reconcile {
namespace {

constexpr char kProbeName[] = "resourceslice-controller.dra.k8s.io/probe";

client::Quantity one() { return *client::Quantity::parse("1"); }

client::ResourceSlice probeSlice(const std::string& feature) {
  client::ResourceSlice s;
  s.metadata.generate_name = "resourceslice-controller-probe-";
  s.spec.driver = kProbeDriver;
  s.spec.pool.name = "probe-" + feature;
  s.spec.pool.generation = 1;
  s.spec.pool.resource_slice_count = 1;
  s.spec.all_nodes = true;
  return s;
}

client::ResourceSlice withDevice(client::ResourceSlice s,
                                 const std::function<void(client::Device&)>& fill) {
  client::Device d;
  d.name = "probe";
  fill(d);
  s.spec.devices.emplace_back(d);
  return s;
}

client::CounterSet probeCounterSet() {
  client::CounterSet set;
  set.name = "probe";
  set.counters["probe"] = client::Counter{one()};
  return set;
}

void consumeProbeCounters(client::Device& d) {
  client::DeviceCounterConsumption c;
  c.counter_set = "probe";
  c.counters["probe"] = client::Counter{one()};
  d.consumes_counters.push_back(c);
}

// A slice named for `feature` whose one device consumes the probe counter set, which the slice
// holds too when the server wants counter sets beside their consumers.
client::ResourceSlice consumerSlice(const std::string& feature, CounterPlacement placement,
                                    const std::function<void(client::Device&)>& fill) {
  client::ResourceSlice s = withDevice(probeSlice(feature), [&](client::Device& d) {
    consumeProbeCounters(d);
    fill(d);
  });
  if (placement == CounterPlacement::kWithConsumers) {
    s.spec.shared_counters.push_back(probeCounterSet());
  }
  return s;
}

client::NodeAllocatableResource oneCpuPerDevice() {
  client::NodeAllocatableResource r;
  r.mapping.emplace().device_multiplier = one();
  return r;
}

// One slice per feature (partitionable devices: two, when counter sets go in
// slices of their own), so that a server refusing one feature's fields still
// answers for the others.
std::vector<client::ResourceSlice> probeSlices(CounterPlacement placement) {
  std::vector<client::ResourceSlice> out;
  out.push_back(withDevice(probeSlice("taints"), [](client::Device& d) {
    client::DeviceTaint taint;
    taint.key = kProbeName;
    taint.effect = "NoSchedule";
    d.taints.push_back(taint);
  }));
  if (placement == CounterPlacement::kWithConsumers) {
    client::ResourceSlice s = withDevice(probeSlice("counters"), consumeProbeCounters);
    s.spec.shared_counters.push_back(probeCounterSet());
    out.push_back(std::move(s));
  } else {
    out.push_back(withDevice(probeSlice("consumers"), consumeProbeCounters));
    client::ResourceSlice counters = probeSlice("counters");
    counters.spec.shared_counters.push_back(probeCounterSet());
    out.push_back(std::move(counters));
  }
  out.push_back(withDevice(probeSlice("capacity"), [](client::Device& d) {
    d.allow_multiple_allocations = true;
    client::CapacityRequestPolicy policy;
    policy.default_value = one();
    policy.valid_values = {one()};
    d.capacity["probe"] = client::DeviceCapacity{.value = one(), .request_policy = policy};
  }));
  out.push_back(withDevice(probeSlice("binding"), [](client::Device& d) {
    d.binds_to_node = true;
    d.binding_conditions = {"probe"};
    d.binding_failure_conditions = {"probe-failed"};
  }));
  out.push_back(withDevice(probeSlice("list-attributes"), [](client::Device& d) {
    client::DeviceAttribute ints;
    ints.ints = std::vector<int64_t>{1};
    d.attributes["probe"] = ints;
  }));
  out.push_back(withDevice(probeSlice("node-allocatable"), [](client::Device& d) {
    d.node_allocatable_resources["cpu"] = oneCpuPerDevice();
  }));
  out.push_back(withDevice(probeSlice("node-allocatable-mappings"), [](client::Device& d) {
    d.node_allocatable_resource_mappings["cpu"].allocation_multiplier = one();
  }));
  out.push_back(consumerSlice("compatibility-groups", placement, [](client::Device& d) {
    d.consumes_counters.front().compatibility_groups = {"probe"};
  }));
  {
    const std::string type = std::string(kProbeDriver) + "/type";
    client::ResourceSlice s = consumerSlice("partition-type", placement, [&](client::Device& d) {
      d.attributes[type].string_value = "full";
    });
    s.spec.partition_type_attribute = type;
    out.push_back(std::move(s));
  }
  {
    client::ResourceSlice s = withDevice(probeSlice("node-operations"), [](client::Device&) {});
    s.spec.skip_node_operations = {"*"};
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

std::string fieldShape(std::string_view path) {
  std::string out;
  out.reserve(path.size());
  for (size_t i = 0; i < path.size(); ++i) {
    out.push_back(path[i]);
    if (path[i] != '[') continue;
    // Skip to the closing bracket; a quoted key may hold brackets, and
    // escapes its quotes and backslashes.
    bool quoted = false;
    for (++i; i < path.size(); ++i) {
      const char c = path[i];
      if (quoted && c == '\\') {
        ++i;
      } else if (c == '"') {
        quoted = !quoted;
      } else if (!quoted && c == ']') {
        out.push_back(']');
        break;
      }
    }
  }
  return out;
}

StatusOr<std::set<std::string>> probeDroppedFields(client::KubeApi& api,
                                                   CounterPlacement placement) {
  std::set<std::string> shapes;
  for (const client::ResourceSlice& probe : probeSlices(placement)) {
    StatusOr<client::ResourceSlice> answer = api.dryRunCreateResourceSlice(probe);
    const StatusCode code = answer.status().code();
    if (code == StatusCode::kInvalidArgument || code == StatusCode::kUnprocessable) {
      log::debug(2, "The API server refused a probe slice: its fields are learnt from writes",
                 {{"pool", probe.spec.pool.name}, {"error", answer.status().toString()}});
      continue;
    }
    if (!answer.ok()) return answer.status();  // the client names the call
    // What the reconciler does with the answer to a write of its own.
    client::ResourceSliceSpec sent = probe.spec;
    sent.pool = answer->spec.pool;
    std::vector<std::string> dropped;
    if (!client::semanticEqual(sent, answer->spec, &dropped)) {
      log::debug(2, "A probe slice came back changed beyond dropped fields",
                 {{"pool", probe.spec.pool.name}});
      continue;
    }
    for (const std::string& path : dropped) shapes.insert(fieldShape(path));
  }
  return shapes;
}

}  // namespace rsc::controller::reconcile
