#include "controller/reconcile/planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

namespace rsc::controller::reconcile {
namespace {

client::Device device(const std::string& name, bool tainted = false) {
  client::Device d;
  d.name = name;
  client::DeviceAttribute model;
  model.string_value = "A100";
  d.attributes["model"] = model;
  if (tainted) {
    client::DeviceTaint t;
    t.key = "example.com/unhealthy";
    t.effect = "NoSchedule";
    d.taints.push_back(t);
  }
  return d;
}

std::vector<client::DeviceRef> devices(const std::string& prefix, int n, bool tainted = false) {
  std::vector<client::DeviceRef> out;
  for (int i = 0; i < n; ++i) out.push_back(device(prefix + std::to_string(i), tainted));
  return out;
}

client::CounterSet counterSet(const std::string& name) {
  client::CounterSet c;
  c.name = name;
  c.counters["memory"] = client::Counter{*client::Quantity::parse("40Gi")};
  return c;
}

SlicePtr liveSlice(int64_t index, std::vector<client::DeviceRef> devs,
                   std::vector<client::CounterSet> counters = {}) {
  auto s = std::make_shared<client::ResourceSlice>();
  const PoolKey key{"gpu.example.com", "node-a"};
  s->metadata.name = sliceGenerateName(index, key) + "abcde";
  s->metadata.uid = "uid-" + std::to_string(index);
  s->spec.driver = key.driver;
  s->spec.pool.name = key.pool;
  s->spec.devices = std::move(devs);
  s->spec.shared_counters = std::move(counters);
  return s;
}

std::vector<std::string> names(const PlannedSlice& p) {
  std::vector<std::string> out;
  for (const auto& d : p.devices) out.push_back(d->name());
  return out;
}

// Turns a plan into the live slices it would produce (for replanning).
std::vector<SlicePtr> materialize(const Plan& plan) {
  std::vector<SlicePtr> out;
  for (const PlannedSlice& p : plan.slices)
    out.push_back(liveSlice(p.index, p.devices, p.shared_counters));
  return out;
}

TEST(SliceName, IndexComesFirstAndRoundTrips) {
  const PoolKey key{"gpu.example.com", "rack-1/node-a"};
  EXPECT_EQ(sliceGenerateName(0, key), "00000-gpu.example.com-rack-1-node-a-");
  EXPECT_EQ(sliceGenerateName(0x1a, key), "0001a-gpu.example.com-rack-1-node-a-");
  EXPECT_EQ(sliceIndexFromName("0001a-gpu.example.com-rack-1-node-a-x7k2p"), 0x1a);
  EXPECT_EQ(sliceIndexFromName("node-a-gpu"), -1);
  EXPECT_EQ(sliceIndexFromName("nodash"), -1);
}

TEST(SliceName, LongNamesAreCutTo58SoGeneratedNamesFit63) {
  const PoolKey key{"a-very-long-driver-name.devices.example.com",
                    "a-rather-long-pool-name-that-goes-on/and-on"};
  const std::string name = sliceGenerateName(3, key);
  EXPECT_EQ(name.size(), 58U);
  EXPECT_EQ(name.substr(0, 6), "00003-");
}

TEST(Planner, NewPoolIsSplitAt128Devices) {
  Pool pool;
  pool.devices = devices("gpu-", 300);
  const Plan plan = planPool(pool, {});
  ASSERT_EQ(plan.slices.size(), 3U);
  EXPECT_EQ(plan.slices[0].devices.size(), 128U);
  EXPECT_EQ(plan.slices[1].devices.size(), 128U);
  EXPECT_EQ(plan.slices[2].devices.size(), 44U);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(plan.slices[i].index, static_cast<int64_t>(i));
    EXPECT_EQ(plan.slices[i].live, nullptr);
  }
  EXPECT_TRUE(plan.obsolete.empty());
}

TEST(Planner, AdvancedFeaturesLowerTheLimitTo64) {
  Pool pool;
  pool.devices = devices("gpu-", 100, /*tainted=*/true);
  const Plan plan = planPool(pool, {});
  ASSERT_EQ(plan.slices.size(), 2U);
  EXPECT_EQ(plan.slices[0].devices.size(), 64U);
  EXPECT_EQ(plan.slices[1].devices.size(), 36U);
}

TEST(Planner, EmptyPoolHasOneEmptySlice) {
  const Plan plan = planPool(Pool{}, {});
  ASSERT_EQ(plan.slices.size(), 1U);
  EXPECT_TRUE(plan.slices[0].devices.empty());

  // ...and keeps the one it has, deleting the rest.
  const Plan again =
      planPool(Pool{}, {liveSlice(0, devices("a", 2)), liveSlice(1, devices("b", 2))});
  ASSERT_EQ(again.slices.size(), 1U);
  EXPECT_NE(again.slices[0].live, nullptr);
  EXPECT_EQ(again.obsolete.size(), 1U);
}

TEST(Planner, ReplanningItsOwnResultChangesNothing) {
  Pool pool;
  pool.devices = devices("gpu-", 300);
  pool.shared_counters = {counterSet("a"), counterSet("b")};
  const Plan first = planPool(pool, {});
  const std::vector<SlicePtr> live = materialize(first);
  const Plan second = planPool(pool, live);
  ASSERT_EQ(second.slices.size(), first.slices.size());
  EXPECT_TRUE(second.obsolete.empty());
  for (size_t i = 0; i < second.slices.size(); ++i) {
    EXPECT_EQ(second.slices[i].live, live[i]) << i;
    EXPECT_EQ(second.slices[i].devices, live[i]->spec.devices) << i;
    EXPECT_EQ(second.slices[i].shared_counters, live[i]->spec.shared_counters) << i;
  }
}

// The property the generation rule relies on: one device added, changed or
// removed touches exactly one slice.
TEST(Planner, OneDeviceChangeTouchesOneSlice) {
  Pool pool;
  pool.devices = devices("gpu-", 300);
  const std::vector<SlicePtr> live = materialize(planPool(pool, {}));

  auto changedSlices = [&](const Pool& p) {
    const Plan plan = planPool(p, live);
    EXPECT_TRUE(plan.obsolete.empty());
    int changed = 0;
    for (const PlannedSlice& s : plan.slices) {
      if (s.live == nullptr || s.devices != s.live->spec.devices) ++changed;
    }
    return changed;
  };

  Pool added = pool;
  added.devices.push_back(device("gpu-new"));
  EXPECT_EQ(changedSlices(added), 1);

  Pool removed = pool;
  removed.devices.erase(removed.devices.begin() + 140);
  EXPECT_EQ(changedSlices(removed), 1);

  Pool modified = pool;
  modified.devices[200].edit(
      [&](client::Device& d_) { d_.attributes["model"].string_value = "H100"; });
  EXPECT_EQ(changedSlices(modified), 1);

  // Reordering the push does not move devices between slices.
  Pool reversed = pool;
  std::reverse(reversed.devices.begin(), reversed.devices.end());
  const Plan plan = planPool(reversed, live);
  for (const PlannedSlice& s : plan.slices) {
    ASSERT_NE(s.live, nullptr);
    std::set<std::string> want;
    for (const auto& d : s.live->spec.devices) want.insert(d->name());
    std::set<std::string> got;
    for (const auto& d : s.devices) got.insert(d->name());
    EXPECT_EQ(got, want);
  }
}

TEST(Planner, DeviceThatNoLongerFitsMovesToFreeRoom) {
  // Slice 0 is full of plain devices; one of them gains a taint, which would
  // make the slice's limit 64: it must move, the others stay.
  Pool pool;
  pool.devices = devices("gpu-", 128);
  pool.devices.push_back(device("extra"));
  const std::vector<SlicePtr> live = materialize(planPool(pool, {}));
  ASSERT_EQ(live.size(), 2U);

  pool.devices[5] = device("gpu-5", /*tainted=*/true);
  const Plan plan = planPool(pool, live);
  ASSERT_EQ(plan.slices.size(), 2U);
  EXPECT_EQ(plan.slices[0].devices.size(), 127U);
  EXPECT_EQ(names(plan.slices[1]), (std::vector<std::string>{"gpu-5", "extra"}));
}

TEST(Planner, SharedCountersGoInSlicesOfTheirOwn) {
  Pool pool;
  pool.devices = devices("part-", 3);
  for (int i = 0; i < 10; ++i)
    pool.shared_counters.push_back(counterSet("gpu-" + std::to_string(i)));
  const Plan plan = planPool(pool, {});
  int counter_slices = 0;
  for (const PlannedSlice& s : plan.slices) {
    if (!s.shared_counters.empty()) {
      ++counter_slices;
      EXPECT_TRUE(s.devices.empty());
      EXPECT_LE(s.shared_counters.size(), kMaxCounterSetsPerSlice);
    }
  }
  EXPECT_EQ(counter_slices, 2);
  EXPECT_EQ(plan.slices.size(), 3U);
}

// A server that drops sharedCounters (DRAPartitionableDevices off) stores the
// counter slices empty: they stay the counter slices, chunk i in the i-th of
// them by index, instead of being deleted and created again.
TEST(Planner, EmptiedCounterSlicesStayCounterSlices) {
  Pool pool;
  pool.devices = devices("part-", 3);
  for (int i = 0; i < 10; ++i)
    pool.shared_counters.push_back(counterSet("gpu-" + std::to_string(i)));
  const std::vector<SlicePtr> live = {liveSlice(0, {}), liveSlice(1, {}),
                                      liveSlice(2, pool.devices)};
  const Plan plan = planPool(pool, live);
  EXPECT_TRUE(plan.obsolete.empty());
  ASSERT_EQ(plan.slices.size(), 3U);
  for (size_t i = 0; i < plan.slices.size(); ++i) EXPECT_EQ(plan.slices[i].live, live[i]) << i;
  EXPECT_EQ(plan.slices[0].shared_counters.front().name, "gpu-0");
  EXPECT_EQ(plan.slices[1].shared_counters.front().name, "gpu-8");
  EXPECT_EQ(names(plan.slices[2]), (std::vector<std::string>{"part-0", "part-1", "part-2"}));

  // Not when a live slice still holds counter sets (the server keeps them):
  // an empty slice then is only an emptied device slice, and goes.
  const std::vector<SlicePtr> kept = {liveSlice(0, {}), liveSlice(1, {}, {counterSet("gpu-8")}),
                                      liveSlice(2, pool.devices)};
  const Plan replaced = planPool(pool, kept);
  ASSERT_EQ(replaced.obsolete.size(), 1U);
  EXPECT_EQ(replaced.obsolete[0], kept[0]);
  ASSERT_EQ(replaced.slices.size(), 3U);
  EXPECT_EQ(replaced.slices[0].live, nullptr);
  EXPECT_EQ(replaced.slices[0].shared_counters.front().name, "gpu-0");
  EXPECT_EQ(replaced.slices[1].live, kept[1]);
  EXPECT_EQ(replaced.slices[1].shared_counters.front().name, "gpu-8");
}

// A device that consumes memory of each of `sets`.
client::DeviceRef consumer(const std::string& name, const std::vector<std::string>& sets) {
  client::Device d = device(name);
  for (const std::string& set : sets) {
    client::DeviceCounterConsumption c;
    c.counter_set = set;
    c.counters["memory"] = client::Counter{*client::Quantity::parse("10Gi")};
    d.consumes_counters.push_back(c);
  }
  return d;
}

std::vector<std::string> setNames(const PlannedSlice& p) {
  std::vector<std::string> out;
  for (const auto& c : p.shared_counters) out.push_back(c.name);
  return out;
}

// Kubernetes 1.34: a device may consume only counter sets of its own slice.
TEST(PlannerWithConsumers, EachCounterSetSharesTheSliceOfItsConsumers) {
  Pool pool;
  // Two GPUs of 40 partitions each: 80 devices do not fit in one slice of
  // 64, so each GPU's counter set and partitions get a slice; the plain
  // devices fill the free room.
  for (const std::string gpu : {"gpu-0", "gpu-1"}) {
    pool.shared_counters.push_back(counterSet(gpu));
    for (int i = 0; i < 40; ++i)
      pool.devices.push_back(consumer(gpu + "-p" + std::to_string(i), {gpu}));
  }
  for (const client::DeviceRef& d : devices("cpu-", 3)) pool.devices.push_back(d);
  const Plan plan = planPool(pool, {}, CounterPlacement::kWithConsumers);
  ASSERT_EQ(plan.slices.size(), 2U);
  for (size_t i = 0; i < 2; ++i) {
    const std::string gpu = "gpu-" + std::to_string(i);
    EXPECT_EQ(setNames(plan.slices[i]), std::vector<std::string>{gpu});
    for (const client::DeviceRef& d : plan.slices[i].devices) {
      for (const auto& c : d.device().consumes_counters) EXPECT_EQ(c.counter_set, gpu);
    }
    EXPECT_LE(plan.slices[i].devices.size(), 64U);
  }
  EXPECT_EQ(plan.slices[0].devices.size() + plan.slices[1].devices.size(), 83U);

  // Planning its own result again changes nothing.
  const Plan again = planPool(pool, materialize(plan), CounterPlacement::kWithConsumers);
  EXPECT_TRUE(again.obsolete.empty());
  ASSERT_EQ(again.slices.size(), plan.slices.size());
  for (size_t i = 0; i < plan.slices.size(); ++i) {
    EXPECT_EQ(again.slices[i].index, plan.slices[i].index);
    EXPECT_EQ(names(again.slices[i]), names(plan.slices[i]));
    EXPECT_EQ(setNames(again.slices[i]), setNames(plan.slices[i]));
  }
}

TEST(PlannerWithConsumers, ADeviceConsumingTwoSetsKeepsBothWithIt) {
  Pool pool;
  pool.shared_counters = {counterSet("a"), counterSet("b"), counterSet("c"), counterSet("idle")};
  pool.devices = {consumer("on-a", {"a"}), consumer("on-c", {"c"}),
                  consumer("on-a-and-b", {"a", "b"}), consumer("on-b", {"b"})};
  const Plan plan = planPool(pool, {}, CounterPlacement::kWithConsumers);
  // Everything fits one slice: one slice with all four sets.
  ASSERT_EQ(plan.slices.size(), 1U);
  EXPECT_EQ(setNames(plan.slices[0]), (std::vector<std::string>{"a", "b", "c", "idle"}));
  EXPECT_EQ(names(plan.slices[0]),
            (std::vector<std::string>{"on-a", "on-c", "on-a-and-b", "on-b"}));

  // With 61 more consumers of "c" (3 + 62 devices), the groups {a, b} and
  // {c} must part.
  for (int i = 0; i < 61; ++i) pool.devices.push_back(consumer("c-" + std::to_string(i), {"c"}));
  const Plan split = planPool(pool, {}, CounterPlacement::kWithConsumers);
  ASSERT_EQ(split.slices.size(), 2U);
  std::map<std::string, std::set<std::string>> sets_of_device_slice;
  for (const PlannedSlice& s : split.slices) {
    const std::vector<std::string> sets = setNames(s);
    for (const client::DeviceRef& d : s.devices) {
      for (const auto& c : d.device().consumes_counters) {
        EXPECT_NE(std::find(sets.begin(), sets.end(), c.counter_set), sets.end())
            << d->name() << " consumes " << c.counter_set << " of another slice";
      }
    }
    EXPECT_LE(s.devices.size(), 64U);
  }
}

TEST(PlannerWithConsumers, ALiveSliceOfCountersAloneIsEmptiedIntoTheConsumers) {
  // What kOwnSlices published (on a server that then turned out to be 1.34):
  // the counter set moves into its consumers' slice, and the counter slice
  // goes.
  Pool pool;
  pool.shared_counters = {counterSet("gpu-0")};
  pool.devices = {consumer("p0", {"gpu-0"}), consumer("p1", {"gpu-0"})};
  const Plan own = planPool(pool, {});
  ASSERT_EQ(own.slices.size(), 2U);
  const std::vector<SlicePtr> live = materialize(own);
  const Plan plan = planPool(pool, live, CounterPlacement::kWithConsumers);
  ASSERT_EQ(plan.slices.size(), 1U);
  EXPECT_EQ(setNames(plan.slices[0]), std::vector<std::string>{"gpu-0"});
  EXPECT_EQ(names(plan.slices[0]), (std::vector<std::string>{"p0", "p1"}));
  ASSERT_EQ(plan.obsolete.size(), 1U);
  EXPECT_TRUE(plan.obsolete[0]->spec.devices.empty());
}

TEST(PlannerWithConsumers, AnEmptyPoolStillHasOneSlice) {
  const Plan plan = planPool(Pool{}, {}, CounterPlacement::kWithConsumers);
  ASSERT_EQ(plan.slices.size(), 1U);
  EXPECT_TRUE(plan.slices[0].devices.empty());
}

TEST(Planner, DuplicateIndicesAndForeignNamesAreObsolete) {
  Pool pool;
  pool.devices = devices("gpu-", 2);
  auto dup = liveSlice(0, devices("gpu-", 2));
  auto first = std::make_shared<client::ResourceSlice>(*dup);
  first->metadata.name = "00000-gpu.example.com-node-a-aaaaa";
  auto second = std::make_shared<client::ResourceSlice>(*dup);
  second->metadata.name = "00000-gpu.example.com-node-a-bbbbb";
  auto foreign = std::make_shared<client::ResourceSlice>(*dup);
  foreign->metadata.name = "handmade";
  const Plan plan = planPool(pool, {second, foreign, first});
  ASSERT_EQ(plan.slices.size(), 1U);
  EXPECT_EQ(plan.slices[0].live, first);
  ASSERT_EQ(plan.obsolete.size(), 2U);
}

TEST(Planner, ExplicitSlicesMatchLiveSlicesByIndex) {
  Pool pool;
  pool.slices = std::vector<DesiredSlice>{{devices("a", 2), {}, {}}, {devices("b", 3), {}, {}}};
  const std::vector<SlicePtr> live = {liveSlice(1, devices("x", 1)), liveSlice(5, devices("y", 1))};
  const Plan plan = planPool(pool, live);
  ASSERT_EQ(plan.slices.size(), 2U);
  EXPECT_EQ(plan.slices[0].live, nullptr);
  EXPECT_EQ(plan.slices[1].live, live[0]);
  EXPECT_EQ(names(plan.slices[1]), (std::vector<std::string>{"b0", "b1", "b2"}));
  ASSERT_EQ(plan.obsolete.size(), 1U);
  EXPECT_EQ(plan.obsolete[0], live[1]);
}

// The pool's slice options go on every slice of the automatic split, partitionTypeAttribute only
// on those with a device that consumes counters, in either counter placement; explicit slices
// keep their own.
TEST(Planner, SliceOptionsGoWhereTheServerTakesThem) {
  Pool pool;
  pool.devices = {consumer("part-0", {"gpu-0"})};
  for (const client::DeviceRef& d : devices("plain-", 64, /*tainted=*/true))
    pool.devices.push_back(d);
  pool.shared_counters = {counterSet("gpu-0")};
  pool.options.partition_type_attribute = "example.com/type";
  pool.options.skip_node_operations = {"*"};
  for (const CounterPlacement placement :
       {CounterPlacement::kOwnSlices, CounterPlacement::kWithConsumers}) {
    const Plan plan = planPool(pool, {}, placement);
    ASSERT_GE(plan.slices.size(), 2U);
    int typed = 0;
    for (const PlannedSlice& p : plan.slices) {
      const bool consumers = std::any_of(p.devices.begin(), p.devices.end(),
                                         [](const auto& d) { return d->consumesCounters(); });
      EXPECT_EQ(p.options.partition_type_attribute.has_value(), consumers) << p.index;
      EXPECT_EQ(p.options.skip_node_operations, std::vector<std::string>{"*"}) << p.index;
      typed += consumers ? 1 : 0;
    }
    EXPECT_EQ(typed, 1);
  }

  Pool explicit_slices;
  SliceOptions own;
  own.skip_node_operations = {"NodeUnprepareResources"};
  explicit_slices.slices =
      std::vector<DesiredSlice>{{devices("a", 1), {}, own}, {devices("b", 1), {}, {}}};
  const Plan plan = planPool(explicit_slices, {});
  ASSERT_EQ(plan.slices.size(), 2U);
  EXPECT_EQ(plan.slices[0].options, own);
  EXPECT_EQ(plan.slices[1].options, SliceOptions{});
}

TEST(Planner, NewSlicesTakeTheLowestFreeIndices) {
  Pool pool;
  pool.devices = devices("gpu-", 300);
  // Live: only slice 1 exists, holding the first 128 devices.
  std::vector<client::DeviceRef> first(pool.devices.begin(), pool.devices.begin() + 128);
  const Plan plan = planPool(pool, {liveSlice(1, first)});
  ASSERT_EQ(plan.slices.size(), 3U);
  EXPECT_EQ(plan.slices[0].index, 0);
  EXPECT_EQ(plan.slices[1].index, 1);
  EXPECT_NE(plan.slices[1].live, nullptr);
  EXPECT_EQ(plan.slices[2].index, 2);
}

}  // namespace
}  // namespace rsc::controller::reconcile
