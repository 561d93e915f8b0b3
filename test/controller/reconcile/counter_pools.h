// A pool builder shared by the reconcile tests.
#pragma once

#include <string>

#include "client/quantity.h"
#include "client/resource_slice.h"
#include "controller/reconcile/pool.h"

namespace rsc::controller::reconcile {

// Adds counter set `name` (80Gi of memory) to `pool`, and makes every device
// of the pool consume half of it.
inline void addCounterSetConsumedByAll(Pool& pool, const std::string& name) {
  client::CounterSet set;
  set.name = name;
  set.counters["memory"] = client::Counter{*client::Quantity::parse("80Gi")};
  pool.shared_counters.push_back(set);
  client::editDevices(pool.devices, [&name](client::Device& d) {
    client::DeviceCounterConsumption use;
    use.counter_set = name;
    use.counters["memory"] = client::Counter{*client::Quantity::parse("40Gi")};
    d.consumes_counters.push_back(use);
  });
}

}  // namespace rsc::controller::reconcile
