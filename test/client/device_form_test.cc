#include "client/device_form.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "client/resource_slice.h"

namespace rsc::client {
namespace {

Quantity q(const char* text) { return *Quantity::parse(text); }

Device gpu(const std::string& name) {
  Device d;
  d.name = name;
  d.attributes["model"].string_value = "A100";
  d.attributes["index"].int_value = 3;
  d.capacity["memory"].value = q("80Gi");
  return d;
}

TEST(DeviceForm, HoldsTheDevicesJsonAsTheCodecWritesIt) {
  Device d = gpu("gpu-0");
  d.unknown["futureDeviceField"] = Json::array({"x"});
  d.taints.push_back({"k", "v", "NoSchedule", std::nullopt});
  const DeviceRef ref(d);
  EXPECT_EQ(ref->json(), toJson(d).dump());
  EXPECT_EQ(ref->name(), "gpu-0");
  EXPECT_EQ(ref.device(), d);  // unknown fields round-trip
  EXPECT_TRUE(ref->advanced());
  EXPECT_FALSE(ref->placed());
  EXPECT_TRUE(ref->features().test(static_cast<size_t>(Feature::kDeviceTaints)));
}

TEST(DeviceForm, EqualDevicesShareOneForm) {
  const DeviceRef a(gpu("gpu-0"));
  const DeviceRef b(gpu("gpu-0"));
  const DeviceRef c(gpu("gpu-1"));
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(a, b);
  EXPECT_NE(a.get(), c.get());
  EXPECT_NE(a, c);
  EXPECT_NE(a, DeviceRef());
  EXPECT_EQ(DeviceRef(), DeviceRef());
}

TEST(DeviceForm, EditMakesANewFormAndLeavesTheOldOne) {
  const DeviceRef before(gpu("gpu-0"));
  DeviceRef ref = before;
  ref.edit([](Device& d) { d.attributes["model"].string_value = "H100"; });
  EXPECT_NE(ref, before);
  EXPECT_EQ(ref.device().attributes.at("model").string_value, "H100");
  EXPECT_EQ(before.device().attributes.at("model").string_value, "A100");
}

TEST(DeviceForm, PlacementAndAdvancedFlags) {
  Device d = gpu("gpu-0");
  d.node_name = "node-a";
  EXPECT_TRUE(DeviceRef(d)->placed());
  Device list = gpu("gpu-1");
  list.attributes["numa"].ints = std::vector<int64_t>{0, 1};
  EXPECT_TRUE(DeviceRef(list)->advanced());
  EXPECT_FALSE(DeviceRef(gpu("gpu-2"))->advanced());
}

// Digests are of the JSON: the same value in other words is a different form, and the comparer
// falls back to comparing typed devices, which finds them equal.
TEST(DeviceForm, SameValueInOtherWordsIsEqualByTheSlowPath) {
  Device a = gpu("gpu-0");
  Device b = gpu("gpu-0");
  b.capacity["memory"].value = q("81920Mi");
  const DeviceRef ra(a);
  const DeviceRef rb(b);
  EXPECT_NE(ra, rb);
  ResourceSliceSpec desired;
  desired.driver = "gpu.example.com";
  desired.pool.name = "p";
  ResourceSliceSpec live = desired;
  desired.devices = {ra};
  live.devices = {rb};
  std::vector<std::string> dropped;
  EXPECT_TRUE(semanticEqual(desired, live, &dropped));
  EXPECT_THAT(dropped, ::testing::IsEmpty());
}

TEST(DeviceForm, DecodedSlicesShareTheFormsOfEqualDevices) {
  ResourceSlice slice;
  slice.metadata.name = "s";
  slice.spec.driver = "gpu.example.com";
  slice.spec.pool.name = "p";
  slice.spec.devices = {gpu("gpu-0"), gpu("gpu-1")};
  StatusOr<ResourceSlice> decoded = resourceSliceFromJson(toJson(slice));
  ASSERT_TRUE(decoded.ok()) << decoded.status().toString();
  ASSERT_EQ(decoded->spec.devices.size(), 2u);
  EXPECT_EQ(decoded->spec.devices[0].get(), slice.spec.devices[0].get());
  EXPECT_EQ(decoded->spec.devices[1].get(), slice.spec.devices[1].get());
  EXPECT_EQ(*decoded, slice);
}

TEST(DeviceForm, ExpiredFormsAreSweptFromTheTable) {
  const size_t before = deviceFormStats().entries;
  for (int i = 0; i < 5000; ++i) DeviceRef unused(gpu("sweep-" + std::to_string(i)));
  const DeviceFormStats after = deviceFormStats();
  // Without sweeping the table would have grown by 5,000.
  EXPECT_LT(after.entries, before + 2100);
}

// Many threads interning the same and different devices at once (run under TSan in CI).
TEST(DeviceForm, InterningIsThreadSafe) {
  std::vector<std::thread> threads;
  std::vector<std::vector<DeviceRef>> made(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &made] {
      for (int i = 0; i < 300; ++i) {
        made[t].emplace_back(gpu("shared-" + std::to_string(i % 50)));
        made[t].emplace_back(gpu("own-" + std::to_string(t) + "-" + std::to_string(i)));
        if (i % 7 == 0) made[t].pop_back();
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 1; t < 4; ++t) EXPECT_EQ(made[t][0].get(), made[0][0].get());
}

}  // namespace
}  // namespace rsc::client
