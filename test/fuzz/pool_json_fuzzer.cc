// Fuzz target for the inventory API's body parser (controller/pool/pool_json.h):
// any bytes as the body of PUT /v1/drivers/{driver}/pools/{pool} and of
// PUT /v1/drivers/{driver}. Besides "never crashes, never throws", it checks
// what the parser promises: an error always renders as a JSON error answer; an
// accepted pool plans into slices within the API's limits that survive a JSON
// round trip unchanged; and a pool accepted alone is accepted, equal, inside a
// driver body. A broken promise aborts, so that a fuzzer keeps the input.
// Built with libFuzzer (test/fuzz/run-libfuzzer) or with corpus_main.cc.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "client/resource_slice.h"
#include "controller/pool/pool_json.h"
#include "controller/reconcile/planner.h"
#include "test/fuzz/promises.h"

namespace rsc::controller::pool {
namespace {

[[noreturn]] void broken(std::string_view promise, std::string_view detail = {}) {
  testing::broken("pool_json", promise, detail);
}

// Whatever was wrong, the error answer serialises (bad UTF-8 included).
void checkErrorAnswer(const Status& status) {
  if (status.ok()) {
    broken("a refusal without an error");
  }
  const std::string body =
      dumpJson(errorToJson(422, "Invalid", status.message(), status.details()));
  if (body.empty() || body.front() != '{') {
    broken("an error answer that is not a JSON object");
  }
}

// An accepted pool can be written: its plan has slices within the limits,
// every device once, and each slice survives the JSON round trip.
void checkAccepted(const reconcile::PoolKey& key, const reconcile::Pool& pool) {
  const reconcile::Plan plan = planPool(pool, {});
  if (plan.slices.empty()) {
    broken("an accepted pool planned no slice");
  }
  if (!plan.obsolete.empty()) {
    broken("a plan without live slices has obsolete ones");
  }
  size_t want_devices = pool.devices.size();
  if (pool.slices) {
    want_devices = 0;
    for (const reconcile::DesiredSlice& s : *pool.slices) {
      want_devices += s.devices.size();
    }
  }
  size_t devices = 0;
  for (const reconcile::PlannedSlice& p : plan.slices) {
    if (p.devices.size() > reconcile::deviceLimit(p.devices)) {
      broken("a planned slice over its device limit");
    }
    if (p.shared_counters.size() > client::kMaxCounterSetsPerSlice) {
      broken("a planned slice over its counter set limit");
    }
    devices += p.devices.size();

    client::ResourceSlice slice;
    slice.metadata.name = sliceGenerateName(p.index, key) + "fuzzz";
    slice.spec.driver = key.driver;
    slice.spec.pool = {key.pool, 1, static_cast<int64_t>(plan.slices.size())};
    const reconcile::NodeSelection& sel = pool.selection;
    slice.spec.node_name = sel.node_name;
    slice.spec.node_selector = sel.node_selector;
    if (sel.all_nodes) {
      slice.spec.all_nodes = true;
    }
    if (sel.per_device_node_selection) {
      slice.spec.per_device_node_selection = true;
    }
    slice.spec.devices = p.devices;
    slice.spec.shared_counters = p.shared_counters;
    testing::checkJsonRoundTrip("pool_json", "a planned slice", slice);
  }
  if (devices != want_devices) {
    broken("a plan lost or repeated devices");
  }
}

}  // namespace
}  // namespace rsc::controller::pool

// NOLINTNEXTLINE(readability-identifier-naming): the name libFuzzer calls.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rsc::controller;
  using namespace rsc::controller::pool;
  const std::string_view body(reinterpret_cast<const char*>(data), size);

  // PUT of one pool.
  const rsc::StatusOr<reconcile::Pool> pool = parsePool(body);
  if (pool.ok()) {
    checkAccepted({"fuzz.example.com", "pool"}, *pool);
  } else {
    checkErrorAnswer(pool.status());
  }

  // PUT of a whole driver.
  const rsc::StatusOr<std::map<std::string, reconcile::Pool>> pools = parseDriverPools(body);
  if (pools.ok()) {
    for (const auto& [name, p] : *pools) {
      checkAccepted({"fuzz.example.com", name}, p);
    }
  } else {
    checkErrorAnswer(pools.status());
  }

  // The same pool inside a driver body: the same answer, unless the two
  // extra levels push it over the nesting limit.
  if (pool.ok()) {
    rsc::StatusOr<Json> j = parseJsonBody(body);
    if (!j.ok()) {
      broken("an accepted body does not parse again", j.status().toString());
    }
    Json wrapped = Json::object();
    wrapped["pools"]["p"] = std::move(*j);
    const rsc::StatusOr<std::map<std::string, reconcile::Pool>> again =
        parseDriverPools(wrapped.dump());
    if (again.ok()) {
      if (again->size() != 1 || !(again->begin()->second == *pool)) {
        broken("a pool decodes differently inside a driver body");
      }
    } else if (again.status().message().find("nests deeper") == std::string::npos) {
      broken("a pool accepted alone is refused inside a driver body", again.status().toString());
    }
  }
  return 0;
}
