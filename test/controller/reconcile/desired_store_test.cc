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

}  // namespace
}  // namespace rsc::controller::reconcile
