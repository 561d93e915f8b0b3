#include "client/resource_slice.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace rsc::client {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A node-local GPU slice as kube-apiserver returns it from a GET, with
// server-set metadata, managedFields, every device feature, and fields from
// a newer API in the spec, in a device, in an attribute and in a capacity.
constexpr std::string_view kGpuSlice = R"({
  "apiVersion": "resource.k8s.io/v1",
  "kind": "ResourceSlice",
  "metadata": {
    "name": "00000-gpu.example.com-node-a-x7k2p",
    "generateName": "00000-gpu.example.com-node-a-",
    "uid": "0b9d3c4e-7f61-4a2b-9e55-3f1c2d7a8b90",
    "resourceVersion": "2049",
    "generation": 1,
    "creationTimestamp": "2026-07-01T10:00:00Z",
    "labels": {"app.kubernetes.io/managed-by": "resourceslice-controller"},
    "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "node-a",
                         "uid": "2c3d4e5f-6a7b-4c8d-9e0f-1a2b3c4d5e6f", "controller": true}],
    "managedFields": [{
      "manager": "resourceslice-controller",
      "operation": "Update",
      "apiVersion": "resource.k8s.io/v1",
      "time": "2026-07-01T10:00:00Z",
      "fieldsType": "FieldsV1",
      "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {".": {},
                   "f:app.kubernetes.io/managed-by": {}}}, "f:spec": {"f:devices": {},
                   "f:driver": {}, "f:nodeName": {}, "f:pool": {".": {}, "f:generation": {},
                   "f:name": {}, "f:resourceSliceCount": {}}}}
    }]
  },
  "spec": {
    "driver": "gpu.example.com",
    "nodeName": "node-a",
    "pool": {"name": "node-a", "generation": 3, "resourceSliceCount": 1},
    "futureSliceField": ["Future"],
    "partitionTypeAttribute": "gpu.example.com/profile",
    "skipNodeOperations": ["NodePrepareResources", "NodeUnprepareResources"],
    "devices": [
      {
        "name": "gpu-0",
        "attributes": {
          "model": {"string": "A100-SXM4-80GB"},
          "driverVersion": {"version": "550.54.15"},
          "index": {"int": 0},
          "mig": {"bool": false},
          "gpu.example.com/numaNodes": {"ints": [0, 1]},
          "gpu.example.com/links": {"strings": ["nvlink0", "nvlink1"]},
          "gpu.example.com/flags": {"bools": [true, false]},
          "gpu.example.com/compat": {"versions": ["1.0.0", "2.1.0"]},
          "gpu.example.com/ratio": {"float": "0.5"}
        },
        "capacity": {
          "memory": {"value": "80Gi"},
          "cores": {"value": "6912"},
          "bandwidth": {
            "value": "1500m",
            "requestPolicy": {"default": "500m",
                              "validRange": {"min": "100m", "max": "1500m", "step": "100m"}},
            "futureCapacityField": 7
          },
          "slots": {"value": "4", "requestPolicy": {"default": "1", "validValues": ["1", "2", "4"]}}
        },
        "taints": [
          {"key": "gpu.example.com/unhealthy", "value": "ecc", "effect": "NoSchedule",
           "timeAdded": "2026-07-01T10:00:00Z"},
          {"key": "gpu.example.com/maintenance", "effect": "None",
           "timeAdded": "2026-07-01T10:00:00Z"}
        ],
        "bindsToNode": true,
        "bindingConditions": ["gpu.example.com/attached"],
        "bindingFailureConditions": ["gpu.example.com/attach-failed"],
        "allowMultipleAllocations": true,
        "futureDeviceField": {"cpu": {"perPod": "100m"}},
        "nodeAllocatableResources": {
          "cpu": {"mapping": {"deviceMultiplier": "2"}},
          "memory": {"mapping": {"capacityKey": "memory", "capacityMultiplier": "1"},
                     "overhead": {"perPod": "100Mi", "perContainer": "10Mi"}}
        }
      },
      {
        "name": "gpu-0-mig-1g-10gb-0",
        "attributes": {"profile": {"string": "1g.10gb"}},
        "capacity": {"memory": {"value": "10Gi"}},
        "consumesCounters": [{"counterSet": "gpu-0-counters",
                              "counters": {"memory": {"value": "10Gi"},
                                           "multiprocessors": {"value": "14"}},
                              "compatibilityGroups": ["1g", "shared"]}],
        "nodeAllocatableResourceMappings": {"cpu": {"allocationMultiplier": "1"}}
      }
    ]
  }
})";

Quantity q(std::string_view text) { return Quantity::parse(text).value(); }

ResourceSlice mustDecode(const Json& j) {
  StatusOr<ResourceSlice> slice = resourceSliceFromJson(j);
  EXPECT_TRUE(slice.ok()) << slice.status().toString();
  return slice.ok() ? std::move(slice).value() : ResourceSlice{};
}

TEST(ResourceSlice, RoundTripsWhatTheServerReturns) {
  Json input = Json::parse(kGpuSlice);
  ResourceSlice slice = mustDecode(input);
  EXPECT_EQ(toJson(slice), input);
  // And decoding what was written gives the same struct.
  EXPECT_EQ(mustDecode(toJson(slice)), slice);
}

// What the server returns is written back in the same bytes by the text
// writer, unknown members at every level included.
TEST(ResourceSlice, TextEncodingEqualsTheDomEncoding) {
  Json input = Json::parse(kGpuSlice);
  input["zzz"] = {{"a", 1}};
  input["aaa"] = "first";
  input["metadata"]["annotations"] = {{"x", "y"}};
  input["spec"]["futureSliceField"] = {1.5, "x"};
  input["spec"]["pool"]["futurePoolField"] = true;
  input["spec"]["devices"][0]["futureDeviceField"] = nullptr;
  const ResourceSlice slice = mustDecode(input);
  const std::string text = toJsonText(slice);
  EXPECT_EQ(text, toJson(slice).dump());
  EXPECT_EQ(Json::parse(text), input);
}

// A device read from the server that is byte for byte one held already takes
// the held form; any other is decoded, its unknown members kept.
TEST(ResourceSlice, DevicesAlreadyHeldAreFoundByTheirBytes) {
  const ResourceSlice first = mustDecode(Json::parse(kGpuSlice));
  const ResourceSlice again = mustDecode(Json::parse(kGpuSlice));
  ASSERT_FALSE(first.spec.devices.empty());
  for (size_t i = 0; i < first.spec.devices.size(); ++i) {
    EXPECT_EQ(again.spec.devices[i].get(), first.spec.devices[i].get()) << i;
  }
  EXPECT_EQ(DeviceRef::interned(first.spec.devices[0]->json()).get(), first.spec.devices[0].get());
  EXPECT_FALSE(DeviceRef::interned(std::string(first.spec.devices[0]->json()) + " "));

  Json changed = Json::parse(kGpuSlice);
  changed["spec"]["devices"][0]["futureDeviceField"] = 7;
  const ResourceSlice other = mustDecode(changed);
  EXPECT_NE(other.spec.devices[0].get(), first.spec.devices[0].get());
  EXPECT_EQ(other.spec.devices[0].device().unknown.value("futureDeviceField", 0), 7);
  EXPECT_EQ(toJson(other), changed);
}

TEST(ResourceSlice, DecodesEveryModelledField) {
  ResourceSlice slice = mustDecode(Json::parse(kGpuSlice));
  EXPECT_EQ(slice.metadata.name, "00000-gpu.example.com-node-a-x7k2p");
  EXPECT_EQ(slice.metadata.resource_version, "2049");
  EXPECT_TRUE(slice.metadata.unknown.contains("managedFields"));

  const ResourceSliceSpec& spec = slice.spec;
  EXPECT_EQ(spec.driver, "gpu.example.com");
  EXPECT_EQ(spec.node_name, "node-a");
  EXPECT_EQ(spec.pool, (ResourcePool{"node-a", 3, 1}));
  EXPECT_EQ(spec.unknown, Json::parse(R"({"futureSliceField": ["Future"]})"));
  EXPECT_EQ(spec.partition_type_attribute, "gpu.example.com/profile");
  EXPECT_THAT(spec.skip_node_operations,
              ElementsAre("NodePrepareResources", "NodeUnprepareResources"));
  ASSERT_EQ(spec.devices.size(), 2u);

  const Device gpu = spec.devices[0].device();
  EXPECT_EQ(gpu.name, "gpu-0");
  EXPECT_EQ(gpu.attributes.at("model").string_value, "A100-SXM4-80GB");
  EXPECT_EQ(gpu.attributes.at("driverVersion").version_value, "550.54.15");
  EXPECT_EQ(gpu.attributes.at("index").int_value, 0);
  EXPECT_EQ(gpu.attributes.at("mig").bool_value, false);
  EXPECT_EQ(gpu.attributes.at("gpu.example.com/numaNodes").ints, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(gpu.attributes.at("gpu.example.com/flags").bools, (std::vector<bool>{true, false}));
  EXPECT_EQ(gpu.attributes.at("gpu.example.com/links").strings,
            (std::vector<std::string>{"nvlink0", "nvlink1"}));
  EXPECT_EQ(gpu.attributes.at("gpu.example.com/compat").versions,
            (std::vector<std::string>{"1.0.0", "2.1.0"}));
  EXPECT_EQ(gpu.attributes.at("gpu.example.com/ratio").unknown, Json::parse(R"({"float": "0.5"})"));
  EXPECT_EQ(gpu.capacity.at("memory").value.toInt64(), 80LL << 30);
  const DeviceCapacity& bandwidth = gpu.capacity.at("bandwidth");
  ASSERT_TRUE(bandwidth.request_policy.has_value());
  EXPECT_EQ(bandwidth.request_policy->default_value->text(), "500m");
  ASSERT_TRUE(bandwidth.request_policy->valid_range.has_value());
  EXPECT_EQ(bandwidth.request_policy->valid_range->step->text(), "100m");
  EXPECT_EQ(bandwidth.unknown, Json::parse(R"({"futureCapacityField": 7})"));
  EXPECT_EQ(gpu.capacity.at("slots").request_policy->valid_values.size(), 3u);
  ASSERT_EQ(gpu.taints.size(), 2u);
  EXPECT_EQ(gpu.taints[0].key, "gpu.example.com/unhealthy");
  EXPECT_EQ(gpu.taints[0].value, "ecc");
  EXPECT_EQ(gpu.taints[0].effect, "NoSchedule");
  EXPECT_EQ(gpu.taints[0].time_added, "2026-07-01T10:00:00Z");
  EXPECT_EQ(gpu.binds_to_node, true);
  EXPECT_THAT(gpu.binding_conditions, ElementsAre("gpu.example.com/attached"));
  EXPECT_THAT(gpu.binding_failure_conditions, ElementsAre("gpu.example.com/attach-failed"));
  EXPECT_EQ(gpu.allow_multiple_allocations, true);
  EXPECT_TRUE(gpu.unknown.contains("futureDeviceField"));
  ASSERT_EQ(gpu.node_allocatable_resources.size(), 2u);
  const NodeAllocatableResource& cpu = gpu.node_allocatable_resources.at("cpu");
  ASSERT_TRUE(cpu.mapping.has_value());
  EXPECT_EQ(cpu.mapping->device_multiplier, q("2"));
  EXPECT_FALSE(cpu.overhead.has_value());
  const NodeAllocatableResource& memory = gpu.node_allocatable_resources.at("memory");
  ASSERT_TRUE(memory.mapping.has_value() && memory.overhead.has_value());
  EXPECT_EQ(memory.mapping->capacity_key, "memory");
  EXPECT_EQ(memory.mapping->capacity_multiplier, q("1"));
  EXPECT_EQ(memory.overhead->per_pod, q("100Mi"));
  EXPECT_EQ(memory.overhead->per_container, q("10Mi"));

  const Device mig = spec.devices[1].device();
  ASSERT_EQ(mig.consumes_counters.size(), 1u);
  EXPECT_EQ(mig.consumes_counters[0].counter_set, "gpu-0-counters");
  EXPECT_EQ(mig.consumes_counters[0].counters.at("memory").value,
            Quantity::parse("10240Mi").value());
  EXPECT_THAT(mig.consumes_counters[0].compatibility_groups, ElementsAre("1g", "shared"));
  EXPECT_EQ(mig.node_allocatable_resource_mappings.at("cpu").allocation_multiplier, q("1"));
}

TEST(ResourceSlice, RoundTripsSharedCountersAndNodeSelection) {
  Json input = Json::parse(R"({
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
    "metadata": {"name": "00001-gpu.example.com-fabric-abcde"},
    "spec": {
      "driver": "gpu.example.com",
      "pool": {"name": "fabric/rack-1", "generation": 0, "resourceSliceCount": 2},
      "perDeviceNodeSelection": true,
      "sharedCounters": [{"name": "gpu-0-counters",
                          "counters": {"memory": {"value": "80Gi"}, "multiprocessors": {"value": "98"}}},
                         {"name": "empty"}]
    }
  })");
  EXPECT_EQ(toJson(mustDecode(input)), input);

  Json selected = Json::parse(R"({
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {},
    "spec": {
      "driver": "nic.example.com",
      "pool": {"name": "rack-1", "generation": 7, "resourceSliceCount": 1},
      "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
          {"key": "rack", "operator": "In", "values": ["1"]}]}]},
      "devices": [
        {"name": "nic-0", "nodeName": "node-a"},
        {"name": "nic-1", "allNodes": true},
        {"name": "nic-2", "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["node-b"]}]}]}}
      ]
    }
  })");
  EXPECT_EQ(toJson(mustDecode(selected)), selected);
}

TEST(ResourceSlice, WritesOnlyWhatIsSet) {
  ResourceSlice slice;
  slice.metadata.generate_name = "00000-gpu.example.com-node-a-";
  slice.spec.driver = "gpu.example.com";
  slice.spec.pool = {"node-a", 0, 1};
  slice.spec.all_nodes = true;
  Device device;
  device.name = "gpu-0";
  device.attributes["empty-list"].ints = std::vector<int64_t>{};  // omitempty, like the Go type
  device.capacity["slots"].value = Quantity::parse("4").value();
  device.capacity["slots"].request_policy.emplace();  // "default" has no omitempty
  device.taints.push_back({"k", "", "NoSchedule", std::nullopt});
  device.consumes_counters.push_back({"set", {}, {}});
  slice.spec.devices.push_back(device);
  EXPECT_EQ(toJson(slice), Json::parse(R"({
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
    "metadata": {"generateName": "00000-gpu.example.com-node-a-"},
    "spec": {
      "driver": "gpu.example.com",
      "pool": {"name": "node-a", "generation": 0, "resourceSliceCount": 1},
      "allNodes": true,
      "devices": [{
        "name": "gpu-0",
        "attributes": {"empty-list": {}},
        "capacity": {"slots": {"value": "4", "requestPolicy": {"default": null}}},
        "consumesCounters": [{"counterSet": "set"}],
        "taints": [{"key": "k", "effect": "NoSchedule"}]
      }]
    }
  })"));
}

TEST(ResourceSlice, QuantitiesKeepTheirTextAndAcceptNumbers) {
  Json input = Json::parse(R"({"name": "d", "capacity": {
    "a": {"value": "1024Mi"}, "b": {"value": 5}, "c": {"value": 1.5}}})");
  StatusOr<Device> device = deviceFromJson(input, "devices[0]");
  ASSERT_TRUE(device.ok()) << device.status().toString();
  EXPECT_EQ(device->capacity.at("a").value.text(), "1024Mi");
  EXPECT_EQ(device->capacity.at("a").value, Quantity::parse("1Gi").value());
  EXPECT_EQ(device->capacity.at("b").value.text(), "5");
  EXPECT_EQ(device->capacity.at("c").value, Quantity::parse("1500m").value());
  EXPECT_EQ(toJson(*device)["capacity"]["b"]["value"], "5");
}

TEST(ResourceSlice, AcceptsListItemsAndBookmarksWithoutTypeMeta) {
  StatusOr<ResourceSlice> item = resourceSliceFromJson(Json::parse(
      R"({"metadata": {"name": "x"}, "spec": {"driver": "d", "pool": {"name": "p",
          "generation": 1, "resourceSliceCount": 1}}})"));
  ASSERT_TRUE(item.ok()) << item.status().toString();
  EXPECT_EQ(item->spec.driver, "d");

  StatusOr<ResourceSlice> bookmark = resourceSliceFromJson(Json::parse(
      R"({"kind": "ResourceSlice", "apiVersion": "resource.k8s.io/v1",
          "metadata": {"resourceVersion": "12345",
                       "annotations": {"k8s.io/initial-events-end": "true"}}})"));
  ASSERT_TRUE(bookmark.ok()) << bookmark.status().toString();
  EXPECT_EQ(bookmark->metadata.resource_version, "12345");
}

TEST(ResourceSlice, DecodingErrorsNameTheFieldPath) {
  struct Case {
    std::string name;
    std::function<void(Json&)> edit;
    std::string field;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"apiVersion", [](Json& j) { j["apiVersion"] = "resource.k8s.io/v1beta1"; }, "apiVersion",
       "must be resource.k8s.io/v1, not resource.k8s.io/v1beta1"},
      {"kind", [](Json& j) { j["kind"] = "ResourceClaim"; }, "kind",
       "must be ResourceSlice, not ResourceClaim"},
      {"metadata", [](Json& j) { j["metadata"]["labels"] = "x"; }, "metadata.labels",
       "must be an object"},
      {"spec", [](Json& j) { j["spec"] = Json::array(); }, "spec", "must be an object"},
      {"driver", [](Json& j) { j["spec"]["driver"] = 1; }, "spec.driver", "must be a string"},
      {"pool", [](Json& j) { j["spec"]["pool"]["generation"] = "3"; }, "spec.pool.generation",
       "must be an integer"},
      {"devices", [](Json& j) { j["spec"]["devices"] = Json::object(); }, "spec.devices",
       "must be a list"},
      {"device", [](Json& j) { j["spec"]["devices"][1] = "gpu"; }, "spec.devices[1]",
       "must be an object"},
      {"attribute", [](Json& j) { j["spec"]["devices"][0]["attributes"]["model"] = "A100"; },
       "spec.devices[0].attributes[\"model\"]", "must be an object"},
      {"attributeInt", [](Json& j) { j["spec"]["devices"][0]["attributes"]["index"]["int"] = "0"; },
       "spec.devices[0].attributes[\"index\"].int", "must be an integer"},
      {"attributeInts",
       [](Json& j) {
         j["spec"]["devices"][0]["attributes"]["gpu.example.com/numaNodes"]["ints"][1] = true;
       },
       "spec.devices[0].attributes[\"gpu.example.com/numaNodes\"].ints[1]", "must be an integer"},
      {"attributeBools",
       [](Json& j) { j["spec"]["devices"][0]["attributes"]["gpu.example.com/flags"]["bools"] = 1; },
       "spec.devices[0].attributes[\"gpu.example.com/flags\"].bools", "must be a list"},
      {"capacity", [](Json& j) { j["spec"]["devices"][0]["capacity"]["memory"]["value"] = "80GB"; },
       "spec.devices[0].capacity[\"memory\"].value", "invalid quantity \"80GB\": unknown suffix"},
      {"capacityType",
       [](Json& j) { j["spec"]["devices"][0]["capacity"]["memory"]["value"] = true; },
       "spec.devices[0].capacity[\"memory\"].value", "must be a quantity string such as \"40Gi\""},
      {"requestPolicy",
       [](Json& j) {
         j["spec"]["devices"][0]["capacity"]["slots"]["requestPolicy"]["validValues"][2] = "4x";
       },
       "spec.devices[0].capacity[\"slots\"].requestPolicy.validValues[2]",
       "invalid quantity \"4x\": unknown suffix"},
      {"validRange",
       [](Json& j) {
         j["spec"]["devices"][0]["capacity"]["bandwidth"]["requestPolicy"]["validRange"]["step"] =
             "";
       },
       "spec.devices[0].capacity[\"bandwidth\"].requestPolicy.validRange.step",
       "invalid quantity \"\": empty"},
      {"taint", [](Json& j) { j["spec"]["devices"][0]["taints"][1]["effect"] = 2; },
       "spec.devices[0].taints[1].effect", "must be a string"},
      {"counters",
       [](Json& j) {
         j["spec"]["devices"][1]["consumesCounters"][0]["counters"]["memory"]["value"] = "ten";
       },
       "spec.devices[1].consumesCounters[0].counters[\"memory\"].value",
       "invalid quantity \"ten\": expected a number before any suffix"},
      {"bindingConditions",
       [](Json& j) { j["spec"]["devices"][0]["bindingConditions"] = "attached"; },
       "spec.devices[0].bindingConditions", "must be a list of strings"},
      {"allowMultipleAllocations",
       [](Json& j) { j["spec"]["devices"][0]["allowMultipleAllocations"] = "true"; },
       "spec.devices[0].allowMultipleAllocations", "must be a boolean"},
      {"nodeSelector", [](Json& j) { j["spec"]["nodeSelector"] = "rack=1"; }, "spec.nodeSelector",
       "must be an object"},
      {"sharedCounters",
       [](Json& j) { j["spec"]["sharedCounters"] = Json::parse(R"([{"name": 1}])"); },
       "spec.sharedCounters[0].name", "must be a string"},
  };
  for (const Case& c : cases) {
    Json j = Json::parse(kGpuSlice);
    c.edit(j);
    StatusOr<ResourceSlice> slice = resourceSliceFromJson(j);
    ASSERT_FALSE(slice.ok()) << c.name;
    EXPECT_EQ(slice.status().code(), StatusCode::kInvalidArgument) << c.name;
    EXPECT_EQ(slice.status().message(), c.field + ": " + c.message) << c.name;
    EXPECT_THAT(slice.status().details(), ElementsAre(FieldError{c.field, c.message})) << c.name;
  }

  StatusOr<ResourceSlice> not_object = resourceSliceFromJson(Json("slice"));
  ASSERT_FALSE(not_object.ok());
  EXPECT_EQ(not_object.status().code(), StatusCode::kInvalidArgument);
}

TEST(ResourceSlice, DeviceAndCounterSetErrorsUseTheGivenPath) {
  StatusOr<Device> device = deviceFromJson(
      Json::parse(R"({"name": "gpu-3", "attributes": {"model": []}})"), "devices[3]");
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().message(), "devices[3].attributes[\"model\"]: must be an object");
  EXPECT_THAT(device.status().details(),
              ElementsAre(FieldError{"devices[3].attributes[\"model\"]", "must be an object"}));

  StatusOr<CounterSet> set = counterSetFromJson(
      Json::parse(R"({"name": "s", "counters": {"memory": {"value": "1.5.2"}}})"),
      "slices[1].sharedCounters[0]");
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().message(),
            "slices[1].sharedCounters[0].counters[\"memory\"].value: invalid quantity \"1.5.2\": "
            "more than one decimal point");

  set =
      counterSetFromJson(Json::parse(R"({"name": "s", "counters": {"memory": {"value": "2Gi"}}})"),
                         "sharedCounters[0]");
  ASSERT_TRUE(set.ok()) << set.status().toString();
  EXPECT_EQ(set->counters.at("memory").value.toInt64(), 2LL << 30);
  EXPECT_EQ(toJson(*set),
            Json::parse(R"({"name": "s", "counters": {"memory": {"value": "2Gi"}}})"));
}

TEST(Device, UsesAdvancedFeatures) {
  struct Case {
    const char* name;
    const char* json;
    bool want;
  };
  const std::vector<Case> cases = {
      {"plain", R"({"name": "d", "attributes": {"a": {"int": 1}}, "capacity": {"m": {"value": "1"}},
                   "bindingConditions": ["x"], "allowMultipleAllocations": true})",
       false},
      {"taints", R"({"name": "d", "taints": [{"key": "k", "effect": "NoSchedule"}]})", true},
      {"counters", R"({"name": "d", "consumesCounters": [{"counterSet": "s"}]})", true},
      {"ints", R"({"name": "d", "attributes": {"a": {"ints": [1]}}})", true},
      {"bools", R"({"name": "d", "attributes": {"a": {"bools": [true]}}})", true},
      {"strings", R"({"name": "d", "attributes": {"a": {"strings": ["x"]}}})", true},
      {"versions", R"({"name": "d", "attributes": {"a": {"versions": ["1.0.0"]}}})", true},
  };
  for (const auto& c : cases) {
    StatusOr<Device> device = deviceFromJson(Json::parse(c.json), "devices[0]");
    ASSERT_TRUE(device.ok()) << c.name << ": " << device.status().toString();
    EXPECT_EQ(device->usesAdvancedFeatures(), c.want) << c.name;
  }
}

// The features a slice uses are those of its tagged fields that are set.
TEST(ResourceSlice, FeaturesOfNamesTheTaggedFieldsThatAreSet) {
  const FeatureSet all = featuresOf(mustDecode(Json::parse(kGpuSlice)).spec);
  for (Feature f : {Feature::kDeviceTaints, Feature::kPartitionableDevices,
                    Feature::kConsumableCapacity, Feature::kDeviceBindingConditions,
                    Feature::kListTypeAttributes, Feature::kNodeAllocatableResourceMappings,
                    Feature::kNodeAllocatableResources, Feature::kDeviceCompatibilityGroups,
                    Feature::kPartitionableDevicesType, Feature::kOptionalNodeOperations}) {
    EXPECT_TRUE(all.test(static_cast<size_t>(f))) << static_cast<int>(f);
  }
  EXPECT_FALSE(all.test(static_cast<size_t>(Feature::kNone)));

  ResourceSliceSpec plain;
  Device device;
  device.attributes["a"].ints = std::vector<int64_t>{};  // empty: not set
  plain.devices.emplace_back(device);
  EXPECT_TRUE(featuresOf(plain).none());
  plain.devices.back().edit([](Device& d) { d.binds_to_node = false; });  // set, though false
  EXPECT_EQ(featuresOf(plain),
            FeatureSet().set(static_cast<size_t>(Feature::kDeviceBindingConditions)));
}

// ---- semanticEqual ----------------------------------------------------------

// A spec like the one the controller would write for the GPU slice: no
// server-set fields, taints without timeAdded.
ResourceSliceSpec desiredGpuSpec() {
  ResourceSliceSpec spec = mustDecode(Json::parse(kGpuSlice)).spec;
  client::editDevices(spec.devices, [&](Device& d) {
    for (DeviceTaint& t : d.taints) {
      t.time_added.reset();
    }
  });
  return spec;
}

ResourceSliceSpec liveGpuSpec() { return mustDecode(Json::parse(kGpuSlice)).spec; }

TEST(SemanticEqual, IdenticalSpecsAreEqual) {
  std::vector<std::string> dropped;
  EXPECT_TRUE(semanticEqual(liveGpuSpec(), liveGpuSpec(), &dropped));
  EXPECT_THAT(dropped, IsEmpty());
  EXPECT_TRUE(semanticEqual(ResourceSliceSpec{}, ResourceSliceSpec{}));
}

TEST(SemanticEqual, ComparesQuantitiesByValue) {
  ResourceSliceSpec desired = desiredGpuSpec();
  desired.devices[0].edit([&](Device& d_) { d_.capacity["memory"].value = q("81920Mi"); });
  desired.devices[0].edit(
      [&](Device& d_) { d_.capacity["bandwidth"].request_policy->default_value = q("0.5"); });
  desired.devices[0].edit(
      [&](Device& d_) { d_.capacity["slots"].request_policy->valid_values[2] = q("4000m"); });
  desired.devices[1].edit(
      [&](Device& d_) { d_.consumes_counters[0].counters["memory"].value = q("10737418240"); });
  std::vector<std::string> dropped;
  EXPECT_TRUE(semanticEqual(desired, liveGpuSpec(), &dropped));
  EXPECT_THAT(dropped, IsEmpty());

  desired.devices[0].edit([&](Device& d_) { d_.capacity["memory"].value = q("80G"); });
  EXPECT_FALSE(semanticEqual(desired, liveGpuSpec()));
}

TEST(SemanticEqual, TaintTimeAddedUnsetInDesiredIsNotCompared) {
  ResourceSliceSpec desired = desiredGpuSpec();
  EXPECT_TRUE(semanticEqual(desired, liveGpuSpec()));

  // Set in desired: compared as a time (the server stores seconds, in UTC).
  desired.devices[0].edit(
      [&](Device& d_) { d_.taints[0].time_added = "2026-07-01T12:00:00.75+02:00"; });
  EXPECT_TRUE(semanticEqual(desired, liveGpuSpec()));
  desired.devices[0].edit([&](Device& d_) { d_.taints[0].time_added = "2026-07-01T10:00:01Z"; });
  EXPECT_FALSE(semanticEqual(desired, liveGpuSpec()));

  // The rest of the taint is compared as ever.
  desired = desiredGpuSpec();
  desired.devices[0].edit([&](Device& d_) { d_.taints[0].effect = "NoExecute"; });
  EXPECT_FALSE(semanticEqual(desired, liveGpuSpec()));
}

// Each case removes from live what a server with one feature gate off drops
// from the whole slice; desired still has it.
TEST(SemanticEqual, ReportsFieldsTheServerDropped) {
  struct Case {
    std::string name;
    std::function<void(ResourceSliceSpec&)> drop_from_live;
    std::vector<std::string> want;
  };
  const std::vector<Case> cases = {
      {"taints",
       [](ResourceSliceSpec& s) { s.devices[0].edit([&](Device& d_) { d_.taints.clear(); }); },
       {"spec.devices[0].taints"}},
      {"bindingConditions",
       [](ResourceSliceSpec& s) {
         s.devices[0].edit([&](Device& d_) { d_.binds_to_node.reset(); });
         s.devices[0].edit([&](Device& d_) { d_.binding_conditions.clear(); });
         s.devices[0].edit([&](Device& d_) { d_.binding_failure_conditions.clear(); });
       },
       {"spec.devices[0].bindsToNode", "spec.devices[0].bindingConditions",
        "spec.devices[0].bindingFailureConditions"}},
      {"consumableCapacity",
       [](ResourceSliceSpec& s) {
         s.devices[0].edit([&](Device& d_) { d_.allow_multiple_allocations.reset(); });
         s.devices[0].edit([](Device& d) {
           for (auto& [name, c] : d.capacity) c.request_policy.reset();
         });
       },
       {"spec.devices[0].capacity[\"bandwidth\"].requestPolicy",
        "spec.devices[0].capacity[\"slots\"].requestPolicy",
        "spec.devices[0].allowMultipleAllocations"}},
      {"partitionable",
       [](ResourceSliceSpec& s) {
         s.devices[1].edit([&](Device& d_) { d_.consumes_counters.clear(); });
       },
       {"spec.devices[1].consumesCounters"}},
      {"listAttributes",
       [](ResourceSliceSpec& s) {
         s.devices[0].edit([](Device& d) {
           for (auto& [name, a] : d.attributes) {
             a.ints.reset();
             a.bools.reset();
             a.strings.reset();
             a.versions.reset();
           }
         });
       },
       {"spec.devices[0].attributes[\"gpu.example.com/compat\"].versions",
        "spec.devices[0].attributes[\"gpu.example.com/flags\"].bools",
        "spec.devices[0].attributes[\"gpu.example.com/links\"].strings",
        "spec.devices[0].attributes[\"gpu.example.com/numaNodes\"].ints"}},
      {"nodeAllocatableResources",
       [](ResourceSliceSpec& s) {
         s.devices[0].edit([](Device& d) { d.node_allocatable_resources.clear(); });
       },
       {"spec.devices[0].nodeAllocatableResources"}},
      {"nodeAllocatableResourceMappings",
       [](ResourceSliceSpec& s) {
         s.devices[1].edit([](Device& d) { d.node_allocatable_resource_mappings.clear(); });
       },
       {"spec.devices[1].nodeAllocatableResourceMappings"}},
      {"compatibilityGroups",
       [](ResourceSliceSpec& s) {
         s.devices[1].edit([](Device& d) { d.consumes_counters[0].compatibility_groups.clear(); });
       },
       {"spec.devices[1].consumesCounters[0].compatibilityGroups"}},
      {"sliceOptions",
       [](ResourceSliceSpec& s) {
         s.partition_type_attribute.reset();
         s.skip_node_operations.clear();
       },
       {"spec.partitionTypeAttribute", "spec.skipNodeOperations"}},
      {"unknownFields",
       [](ResourceSliceSpec& s) {
         s.unknown.erase("futureSliceField");
         s.devices[0].edit([&](Device& d_) { d_.unknown.erase("futureDeviceField"); });
         s.devices[0].edit(
             [&](Device& d_) { d_.capacity["bandwidth"].unknown.erase("futureCapacityField"); });
       },
       {"spec.devices[0].capacity[\"bandwidth\"].futureCapacityField",
        "spec.devices[0].futureDeviceField", "spec.futureSliceField"}},
  };
  for (const Case& c : cases) {
    ResourceSliceSpec live = liveGpuSpec();
    c.drop_from_live(live);
    std::vector<std::string> dropped = {"kept"};
    EXPECT_TRUE(semanticEqual(desiredGpuSpec(), live, &dropped)) << c.name;
    std::vector<std::string> want = {"kept"};
    want.insert(want.end(), c.want.begin(), c.want.end());
    EXPECT_EQ(dropped, want) << c.name;
    EXPECT_TRUE(semanticEqual(desiredGpuSpec(), live, nullptr)) << c.name;
  }
}

TEST(SemanticEqual, ReportsDroppedSliceLevelFields) {
  ResourceSliceSpec desired;
  desired.driver = "gpu.example.com";
  desired.pool = {"fabric", 1, 2};
  desired.per_device_node_selection = true;
  desired.shared_counters.push_back({"set", {{"memory", {q("80Gi")}}}});
  Device device;
  device.name = "gpu-0";
  device.node_name = "node-a";
  desired.devices.push_back(device);
  device.name = "gpu-1";
  device.node_name.reset();
  device.all_nodes = true;
  desired.devices.push_back(device);

  ResourceSliceSpec live = desired;
  live.per_device_node_selection.reset();
  live.shared_counters.clear();
  live.devices[0].edit([&](Device& d_) { d_.node_name.reset(); });
  live.devices[1].edit([&](Device& d_) { d_.all_nodes.reset(); });
  std::vector<std::string> dropped;
  EXPECT_TRUE(semanticEqual(desired, live, &dropped));
  EXPECT_THAT(dropped, ElementsAre("spec.perDeviceNodeSelection", "spec.sharedCounters",
                                   "spec.devices[0].nodeName", "spec.devices[1].allNodes"));
}

// A field missing from one device while live carries that field elsewhere
// was not dropped by a feature gate: it is a real difference.
TEST(SemanticEqual, MissingFieldIsADifferenceWhenLiveHasItElsewhere) {
  ResourceSliceSpec desired = desiredGpuSpec();
  desired.devices[1].edit([&](Device& d_) {
    d_.taints.push_back({"k", "", "NoSchedule", std::nullopt});
  });
  std::vector<std::string> dropped = {"kept"};
  EXPECT_FALSE(semanticEqual(desired, liveGpuSpec(), &dropped));
  EXPECT_THAT(dropped, ElementsAre("kept"));  // untouched on a difference

  desired = desiredGpuSpec();
  desired.devices[1].edit(
      [&](Device& d_) { d_.attributes["profile"].ints = std::vector<int64_t>{1}; });
  EXPECT_FALSE(semanticEqual(desired, liveGpuSpec()));

  // Fewer taints than desired (but some) is a difference too.
  ResourceSliceSpec live = liveGpuSpec();
  live.devices[0].edit([&](Device& d_) { d_.taints.pop_back(); });
  EXPECT_FALSE(semanticEqual(desiredGpuSpec(), live));
}

TEST(SemanticEqual, DetectsGenuineDifferences) {
  struct Case {
    std::string name;
    std::function<void(ResourceSliceSpec&)> edit_live;
  };
  const std::vector<Case> cases = {
      {"driver", [](ResourceSliceSpec& s) { s.driver = "other.example.com"; }},
      {"poolGeneration", [](ResourceSliceSpec& s) { s.pool.generation = 4; }},
      {"poolCount", [](ResourceSliceSpec& s) { s.pool.resource_slice_count = 2; }},
      {"nodeName", [](ResourceSliceSpec& s) { s.node_name = "node-b"; }},
      {"allNodesAdded", [](ResourceSliceSpec& s) { s.all_nodes = true; }},
      {"deviceRemoved", [](ResourceSliceSpec& s) { s.devices.pop_back(); }},
      {"deviceAdded", [](ResourceSliceSpec& s) { s.devices.push_back(s.devices[1]); }},
      {"devicesReordered", [](ResourceSliceSpec& s) { std::swap(s.devices[0], s.devices[1]); }},
      {"deviceName",
       [](ResourceSliceSpec& s) { s.devices[1].edit([&](Device& d_) { d_.name = "gpu-1"; }); }},
      {"attributeValue",
       [](ResourceSliceSpec& s) {
         s.devices[0].edit([&](Device& d_) { d_.attributes["model"].string_value = "H100"; });
       }},
      {"attributeType",
       [](ResourceSliceSpec& s) {
         s.devices[0].edit([&](Device& d_) { d_.attributes["index"].int_value.reset(); });
         s.devices[0].edit([&](Device& d_) { d_.attributes["index"].string_value = "0"; });
       }},
      {"attributeAdded",
       [](ResourceSliceSpec& s) {
         s.devices[0].edit([&](Device& d_) { d_.attributes["extra"].bool_value = true; });
       }},
      {"attributeRemoved",
       [](ResourceSliceSpec& s) {
         s.devices[0].edit([&](Device& d_) { d_.attributes.erase("mig"); });
       }},
      {"listValue",
       [](ResourceSliceSpec& s) {
         s.devices[0].edit([&](Device& d_) {
           d_.attributes["gpu.example.com/numaNodes"].ints = std::vector<int64_t>{1, 0};
         });
       }},
      {"capacityRemoved",
       [](ResourceSliceSpec& s) {
         s.devices[0].edit([&](Device& d_) { d_.capacity.erase("cores"); });
       }},
      {"capacityValue",
       [](ResourceSliceSpec& s) {
         s.devices[0].edit([&](Device& d_) { d_.capacity["cores"].value = q("6913"); });
       }},
      {"requestPolicyRange",
       [](ResourceSliceSpec& s) {
         s.devices[0].edit([&](Device& d_) {
           d_.capacity["bandwidth"].request_policy->valid_range->step = q("200m");
         });
       }},
      {"requestPolicyAddedOnLive",
       [](ResourceSliceSpec& s) {
         s.devices[0].edit([&](Device& d_) { d_.capacity["cores"].request_policy.emplace(); });
       }},
      {"taintAddedOnLive",
       [](ResourceSliceSpec& s) {
         s.devices[1].edit([&](Device& d_) {
           d_.taints.push_back({"k", "v", "NoExecute", "2026-07-01T10:00:00Z"});
         });
       }},
      {"taintValue",
       [](ResourceSliceSpec& s) {
         s.devices[0].edit([&](Device& d_) { d_.taints[0].value = "xid"; });
       }},
      {"counterValue",
       [](ResourceSliceSpec& s) {
         s.devices[1].edit(
             [&](Device& d_) { d_.consumes_counters[0].counters["memory"].value = q("20Gi"); });
       }},
      {"counterSetName",
       [](ResourceSliceSpec& s) {
         s.devices[1].edit([&](Device& d_) { d_.consumes_counters[0].counter_set = "other"; });
       }},
      {"bindsToNodeFalse",
       [](ResourceSliceSpec& s) {
         s.devices[0].edit([&](Device& d_) { d_.binds_to_node = false; });
       }},
      {"bindingConditions",
       [](ResourceSliceSpec& s) {
         s.devices[0].edit([&](Device& d_) { d_.binding_conditions.emplace_back("more"); });
       }},
      {"allowMultipleAllocationsOnLive",
       [](ResourceSliceSpec& s) {
         s.devices[1].edit([&](Device& d_) { d_.allow_multiple_allocations = true; });
       }},
      {"deviceNodeNameOnLive",
       [](ResourceSliceSpec& s) {
         s.devices[1].edit([&](Device& d_) { d_.node_name = "node-a"; });
       }},
      {"sharedCountersOnLive",
       [](ResourceSliceSpec& s) {
         s.shared_counters.push_back({"set", {}});
       }},
      {"unknownValue",
       [](ResourceSliceSpec& s) { s.unknown["futureSliceField"] = Json::array({"Other"}); }},
      {"deviceUnknownValue",
       [](ResourceSliceSpec& s) {
         s.devices[0].edit([&](Device& d_) { d_.unknown["futureDeviceField"] = 1; });
       }},
      {"skipNodeOperations", [](ResourceSliceSpec& s) { s.skip_node_operations = {"*"}; }},
      {"partitionTypeAttribute",
       [](ResourceSliceSpec& s) { s.partition_type_attribute = "gpu.example.com/other"; }},
      {"compatibilityGroup",
       [](ResourceSliceSpec& s) {
         s.devices[1].edit([](Device& d) { d.consumes_counters[0].compatibility_groups = {"1g"}; });
       }},
      {"nodeAllocatableMultiplier",
       [](ResourceSliceSpec& s) {
         s.devices[0].edit([](Device& d) {
           d.node_allocatable_resources["cpu"].mapping->device_multiplier = q("4");
         });
       }},
      {"nodeAllocatableOverheadByValue",
       [](ResourceSliceSpec& s) {
         s.devices[0].edit([](Device& d) {
           d.node_allocatable_resources["memory"].overhead->per_pod = q("200Mi");
         });
       }},
  };
  for (const Case& c : cases) {
    ResourceSliceSpec live = liveGpuSpec();
    c.edit_live(live);
    std::vector<std::string> dropped;
    EXPECT_FALSE(semanticEqual(desiredGpuSpec(), live, &dropped)) << c.name;
    EXPECT_THAT(dropped, IsEmpty()) << c.name;
  }
}

TEST(SemanticEqual, NodeSelectorsCompareAsTheServerWritesThem) {
  ResourceSliceSpec desired;
  desired.driver = "nic.example.com";
  desired.pool = {"rack-1", 1, 1};
  desired.node_selector = NodeSelector{Json::parse(R"({"nodeSelectorTerms": [{
      "matchExpressions": [{"key": "rack", "operator": "In", "values": ["1"]}],
      "matchFields": []}]})")};
  ResourceSliceSpec live = desired;
  live.node_selector = NodeSelector{Json::parse(R"({"nodeSelectorTerms": [{
      "matchExpressions": [{"key": "rack", "operator": "In", "values": ["1"]}]}]})")};
  EXPECT_TRUE(semanticEqual(desired, live));

  live.node_selector->value["nodeSelectorTerms"][0]["matchExpressions"][0]["values"][0] = "2";
  EXPECT_FALSE(semanticEqual(desired, live));
  live.node_selector.reset();
  EXPECT_FALSE(semanticEqual(desired, live));
}

TEST(SemanticEqual, UnknownFieldsOnlyOnLiveAreNotCompared) {
  ResourceSliceSpec live = liveGpuSpec();
  live.unknown["serverDefaultedField"] = "x";
  live.devices[1].edit([&](Device& d_) { d_.unknown["serverDefaultedField"] = 1; });
  std::vector<std::string> dropped;
  EXPECT_TRUE(semanticEqual(desiredGpuSpec(), live, &dropped));
  EXPECT_THAT(dropped, IsEmpty());

  // An empty unknown value in desired is what the server writes as nothing.
  ResourceSliceSpec desired = desiredGpuSpec();
  desired.devices[1].edit([&](Device& d_) { d_.unknown["emptyFutureList"] = Json::array(); });
  EXPECT_TRUE(semanticEqual(desired, liveGpuSpec(), &dropped));
  EXPECT_THAT(dropped, IsEmpty());
}

}  // namespace
}  // namespace rsc::client
