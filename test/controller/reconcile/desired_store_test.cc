#include "controller/reconcile/desired_store.h"

#include <gtest/gtest.h>

#include "test/fakes/fake_clock.h"

namespace rsc::controller::reconcile {
namespace {

Pool onNode(const std::string& node) {
  Pool p;
  p.selection.node_name = node;
  return p;
}

// keysOnNode is what a Node's arrival queues: it follows every way a pool
// comes, moves and goes.
TEST(DesiredStore, KeysOnNodeFollowPutsMovesAndRemovals) {
  testing::FakeClock clock;
  DesiredStore store(clock);
  const PoolKey a{"gpu.example.com", "a"};
  const PoolKey b{"gpu.example.com", "b"};
  const PoolKey c{"nic.example.com", "c"};
  store.put(a, onNode("node-1"));
  store.put(b, onNode("node-1"));
  Pool everywhere;
  everywhere.selection.all_nodes = true;
  store.put(c, everywhere);
  EXPECT_EQ(store.keysOnNode("node-1"), (std::vector<PoolKey>{a, b}));

  store.put(b, onNode("node-2"));  // moved
  EXPECT_EQ(store.keysOnNode("node-1"), std::vector<PoolKey>{a});
  EXPECT_EQ(store.keysOnNode("node-2"), std::vector<PoolKey>{b});

  store.remove(a);
  EXPECT_TRUE(store.keysOnNode("node-1").empty());

  store.replaceDriver("gpu.example.com", {{"d", onNode("node-2")}});  // b is left out
  EXPECT_EQ(store.keysOnNode("node-2"), (std::vector<PoolKey>{{"gpu.example.com", "d"}}));

  Pool leased = onNode("node-3");
  leased.lease = std::chrono::seconds(30);
  store.put(c, leased);
  EXPECT_EQ(store.keysOnNode("node-3"), std::vector<PoolKey>{c});
  clock.advance(std::chrono::seconds(31));
  store.expireLeases();
  EXPECT_TRUE(store.keysOnNode("node-3").empty());
}

PoolHold heldOn(const std::string& node) { return {node, "NodeSlicesDeleted", "deleted"}; }

// A held pool stays held until a push (equal content or not, whole driver
// or one pool) or a renewal, each of which asks for a reconcile; a hold
// never outlives a withdrawal, and the driver's renewal after the delete
// (it came back already) prevents one.
TEST(DesiredStore, HoldsLastUntilThePoolIsPushedOrRenewed) {
  testing::FakeClock clock;
  DesiredStore store(clock);
  std::vector<PoolKey> changed;
  store.setChangeListener([&](const PoolKey& key) { changed.push_back(key); });
  const PoolKey a{"gpu.example.com", "a"};
  const PoolKey unknown{"gpu.example.com", "unknown"};
  const uint64_t version = store.put(a, onNode("node-1"));
  changed.clear();

  EXPECT_FALSE(store.hold(unknown, clock.now(), heldOn("node-1"))) << "not desired";
  ASSERT_TRUE(store.hold(a, clock.now(), heldOn("node-1")));
  EXPECT_FALSE(store.hold(a, clock.now(), heldOn("node-1"))) << "held twice";
  EXPECT_EQ(store.status(a)->phase, PoolPhase::kHeld);
  EXPECT_EQ(store.status(a)->hold->node, "node-1");
  EXPECT_TRUE(changed.empty()) << "holding is the reconciler's own doing";

  auto releasedBy = [&](const std::string& how, const std::function<void()>& release) {
    clock.advance(std::chrono::seconds(1));
    ASSERT_TRUE(store.hold(a, clock.now(), heldOn("node-1"))) << how;
    changed.clear();
    release();
    const std::optional<PoolStatus> status = store.status(a);
    EXPECT_EQ(status->phase, PoolPhase::kPending) << how;
    EXPECT_FALSE(status->hold.has_value()) << how;
    EXPECT_TRUE(status->released) << how;
    EXPECT_EQ(changed, std::vector<PoolKey>{a}) << how << ": the pool must be reconciled";
  };
  store.updateStatus(a, [](PoolStatus& s) { s.hold.reset(); });  // as if republished
  releasedBy("renew", [&] { EXPECT_TRUE(store.renew(a)); });
  releasedBy("equal push", [&] { EXPECT_EQ(store.put(a, onNode("node-1")), version); });
  releasedBy("repeated body", [&] { EXPECT_TRUE(store.repeatPush(a, version)); });
  releasedBy("driver push", [&] { store.replaceDriver(a.driver, {{a.pool, onNode("node-1")}}); });

  // The driver renewed after the delete was seen: it is back, no hold.
  const Clock::TimePoint deleted_at = clock.now();
  clock.advance(std::chrono::seconds(1));
  store.renew(a);
  EXPECT_FALSE(store.hold(a, deleted_at, heldOn("node-1")));

  clock.advance(std::chrono::seconds(1));
  ASSERT_TRUE(store.hold(a, clock.now(), heldOn("node-1")));
  store.remove(a);
  EXPECT_EQ(store.status(a)->phase, PoolPhase::kWithdrawing);
  EXPECT_FALSE(store.status(a)->hold.has_value());
}

TEST(DesiredStore, ABoundNodeIsTheNodeNameOrTheOneNodeOfEveryDevice) {
  EXPECT_EQ(boundNode(onNode("node-1")), "node-1");
  Pool everywhere;
  everywhere.selection.all_nodes = true;
  EXPECT_EQ(boundNode(everywhere), std::nullopt);

  Pool per_device;
  per_device.selection.per_device_node_selection = true;
  auto device = [](const std::string& name, std::optional<std::string> node) {
    client::Device d;
    d.name = name;
    d.node_name = std::move(node);
    return client::DeviceRef(d);
  };
  per_device.devices = {device("a", "node-1"), device("b", "node-1")};
  EXPECT_EQ(boundNode(per_device), "node-1");
  per_device.slices = std::vector<DesiredSlice>{{{device("c", "node-2")}, {}, {}}};
  EXPECT_EQ(boundNode(per_device), std::nullopt) << "spread over two nodes";
  per_device.slices.reset();
  per_device.devices.push_back(device("d", std::nullopt));
  EXPECT_EQ(boundNode(per_device), std::nullopt) << "a device without a node";
}

}  // namespace
}  // namespace rsc::controller::reconcile
