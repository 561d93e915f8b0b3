#include "controller/reconcile/dropped_fields.h"

#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>

#include "controller/reconcile/controller.h"
#include "test/controller/reconcile/manual_controller.h"
#include "test/fakes/fake_clock.h"
#include "test/fakes/fake_kube_api.h"

namespace rsc::controller::reconcile {
namespace {

const PoolKey kNodeA{"gpu.example.com", "node-a"};

// A server with DRADeviceTaints off: every create and update (dry runs too)
// loses its taints.
void dropTaints(testing::FakeKubeApi& api) {
  auto drop = [](testing::FakeKubeApi::Request& req) {
    if (req.slice) {
      client::editDevices(req.slice->spec.devices, [](client::Device& d) { d.taints.clear(); });
    }
    return okStatus();
  };
  api.prependReactor("create", "resourceslices", drop);
  api.prependReactor("update", "resourceslices", drop);
}

// node-a's pool: two GPUs with a taint.
Pool taintedPool() {
  client::DeviceTaint taint;
  taint.key = "example.com/unhealthy";
  taint.effect = "NoSchedule";
  client::Device gpu;
  gpu.taints = {taint};
  Pool p;
  p.selection.node_name = "node-a";
  for (const char* name : {"gpu-0", "gpu-1"}) {
    gpu.name = name;
    p.devices.push_back(gpu);
  }
  return p;
}

TEST(FieldShape, DropsIndicesAndKeys) {
  EXPECT_EQ(fieldShape("spec.devices[3].taints"), "spec.devices[].taints");
  EXPECT_EQ(fieldShape("spec.devices[12].capacity[\"example.com/mem\"].requestPolicy"),
            "spec.devices[].capacity[].requestPolicy");
  EXPECT_EQ(fieldShape("spec.devices[0].attributes[\"a]\\\"b\"].ints"),
            "spec.devices[].attributes[].ints");
  EXPECT_EQ(fieldShape("spec.sharedCounters"), "spec.sharedCounters");
}

TEST(ProbeDroppedFields, LearnsWhatTheServerDropsAndStoresNothing) {
  testing::FakeClock clock;
  testing::FakeKubeApi api{clock};
  dropTaints(api);
  for (const CounterPlacement placement :
       {CounterPlacement::kOwnSlices, CounterPlacement::kWithConsumers}) {
    StatusOr<std::set<std::string>> dropped = probeDroppedFields(api, placement);
    ASSERT_TRUE(dropped.ok()) << dropped.status().toString();
    EXPECT_EQ(*dropped, std::set<std::string>{"spec.devices[].taints"});
  }
  EXPECT_TRUE(api.resourceSlices().empty());
  EXPECT_EQ(api.countWrites(), 0U);
  EXPECT_GT(api.countActions("create", "resourceslices"), 0U);
}

// A 1.36 server with its alpha gates off keeps none of 1.37's fields (nor its own shape of node
// allocatable resources): each has a probe of its own, in either counter placement.
TEST(ProbeDroppedFields, LearnsTheNewestFieldsOneProbeEach) {
  testing::FakeClock clock;
  testing::FakeKubeApi api{clock};
  auto drop = [](testing::FakeKubeApi::Request& req) {
    if (!req.slice) return okStatus();
    client::ResourceSliceSpec& spec = req.slice->spec;
    spec.partition_type_attribute.reset();
    spec.skip_node_operations.clear();
    client::editDevices(spec.devices, [](client::Device& d) {
      d.node_allocatable_resources.clear();
      d.node_allocatable_resource_mappings.clear();
      for (client::DeviceCounterConsumption& c : d.consumes_counters)
        c.compatibility_groups.clear();
    });
    return okStatus();
  };
  api.prependReactor("create", "resourceslices", drop);
  for (const CounterPlacement placement :
       {CounterPlacement::kOwnSlices, CounterPlacement::kWithConsumers}) {
    StatusOr<std::set<std::string>> dropped = probeDroppedFields(api, placement);
    ASSERT_TRUE(dropped.ok()) << dropped.status().toString();
    EXPECT_EQ(*dropped,
              (std::set<std::string>{"spec.devices[].consumesCounters[].compatibilityGroups",
                                     "spec.devices[].nodeAllocatableResourceMappings",
                                     "spec.devices[].nodeAllocatableResources",
                                     "spec.partitionTypeAttribute", "spec.skipNodeOperations"}));
  }
  EXPECT_TRUE(api.resourceSlices().empty());
}

TEST(ProbeDroppedFields, AProbeRefusedForItsContentTeachesNothing) {
  testing::FakeClock clock;
  testing::FakeKubeApi api{clock};
  dropTaints(api);
  api.prependReactor("create", "resourceslices", [](testing::FakeKubeApi::Request& req) {
    if (req.slice && req.slice->spec.pool.name == "probe-taints") {
      return Status(StatusCode::kUnprocessable, "spec.devices[0].taints: Forbidden");
    }
    return okStatus();
  });
  StatusOr<std::set<std::string>> dropped = probeDroppedFields(api, CounterPlacement::kOwnSlices);
  ASSERT_TRUE(dropped.ok()) << dropped.status().toString();
  EXPECT_TRUE(dropped->empty());
}

TEST(ProbeDroppedFields, FailsWhenTheServerDoesNotAnswer) {
  testing::FakeClock clock;
  testing::FakeKubeApi api{clock};
  api.prependReactor("create", "resourceslices", [](testing::FakeKubeApi::Request&) {
    return Status(StatusCode::kPermissionDenied,
                  "resourceslices.resource.k8s.io is forbidden: User \"x\" cannot create "
                  "resource \"resourceslices\"");
  });
  EXPECT_EQ(probeDroppedFields(api, CounterPlacement::kOwnSlices).status().code(),
            StatusCode::kPermissionDenied);
}

// One controller process on `api`: it starts leading, is pushed `pool` and
// reconciles until nothing is left to do. Returns its slice writes.
struct LeaderRun {
  size_t writes = 0;
  std::optional<PoolStatus> status;
};

LeaderRun leadAndPush(testing::FakeKubeApi& api, testing::FakeClock& clock, const Pool& pool,
                      bool probe) {
  DesiredStore store{clock};
  ControllerOptions o = manualOptions(api, clock, store);
  o.probe_dropped_fields = probe;
  std::unique_ptr<Controller> controller = startManualController(o);
  if (controller == nullptr) return {};
  controller->startLeading();
  const size_t before = api.countWrites();
  store.put(kNodeA, pool);
  for (int round = 0; round < 3; ++round) {
    drain(*controller, clock);
    EXPECT_TRUE(api.waitForWatchesDelivered());
  }
  LeaderRun run{api.countWrites() - before, store.status(kNodeA)};
  controller->stop();
  return run;
}

// A server that drops taints, where a controller that probed published
// node-a's tainted pool with one create.
class ControllerProbe : public ::testing::Test {
 protected:
  void SetUp() override {
    api_.addNode("node-a");
    dropTaints(api_);
    const LeaderRun first = leadAndPush(api_, clock_, pool_, /*probe=*/true);
    EXPECT_EQ(first.writes, 1U);
    ASSERT_TRUE(first.status.has_value());
    EXPECT_EQ(first.status->phase, PoolPhase::kPublished);
  }

  testing::FakeClock clock_;
  testing::FakeKubeApi api_{clock_};
  const Pool pool_ = taintedPool();
};

// A restarted controller learns again that the server drops taints when it
// starts leading: it writes nothing, and still reports the dropped fields in
// the pool's status.
TEST_F(ControllerProbe, ARestartedControllerKnowsWhatTheServerDropsAndWritesNothing) {
  const LeaderRun restarted = leadAndPush(api_, clock_, pool_, /*probe=*/true);
  EXPECT_EQ(restarted.writes, 0U);
  ASSERT_TRUE(restarted.status.has_value());
  EXPECT_EQ(restarted.status->phase, PoolPhase::kPublished);
  EXPECT_EQ(restarted.status->dropped_fields,
            (std::vector<std::string>{"spec.devices[0].taints", "spec.devices[1].taints"}));
  EXPECT_EQ(restarted.status->published_generation, 1);
}

// When the probe fails (here: a server without dryRun), a restarted
// controller learns from the answer to one update per slice, as before.
TEST_F(ControllerProbe, WhenTheProbeFailsARestartedControllerLearnsFromItsWrites) {
  api_.prependReactor("create", "resourceslices", [](testing::FakeKubeApi::Request& req) {
    if (!req.dry_run) return okStatus();
    return Status(StatusCode::kNotFound, "the server could not find the requested resource");
  });
  const LeaderRun restarted = leadAndPush(api_, clock_, pool_, /*probe=*/true);
  EXPECT_EQ(restarted.writes, 1U);  // one update, then nothing
  ASSERT_TRUE(restarted.status.has_value());
  EXPECT_EQ(restarted.status->phase, PoolPhase::kPublished);
  EXPECT_EQ(restarted.status->dropped_fields.size(), 2U);
}

}  // namespace
}  // namespace rsc::controller::reconcile
