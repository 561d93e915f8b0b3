#include "controller/pool/pool_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "client/inventory_api.h"
#include "controller/reconcile/planner.h"

namespace rsc::controller::pool {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAreArray;

Json device(const std::string& name) { return {{"name", name}}; }

Json devices(size_t n, const std::string& prefix = "dev-") {
  Json list = Json::array();
  for (size_t i = 0; i < n; ++i) list.push_back(device(prefix + std::to_string(i)));
  return list;
}

Json nodePool(Json device_list = Json::array()) {
  return {{"nodeName", "node-a"}, {"devices", std::move(device_list)}};
}

Json counterSet(const std::string& name) {
  return {{"name", name}, {"counters", {{"memory", {{"value", "80Gi"}}}}}};
}

Json selector(Json terms) { return {{"nodeSelectorTerms", std::move(terms)}}; }

Json fabricTerm() {
  return {{"matchExpressions",
           {{{"key", "nic.example.com/fabric"}, {"operator", "In"}, {"values", {"fabric-1"}}}}}};
}

std::vector<std::string> fieldsOf(const Status& status) {
  std::vector<std::string> out;
  for (const FieldError& e : status.details()) out.push_back(e.field);
  return out;
}

// One table row: a body and what parsing it must say.
struct Case {
  std::string name;
  Json body;
  StatusCode code;                  // kOk when valid
  std::vector<std::string> fields;  // every detail's field path, any order
  std::string message = {};         // a part of the first detail's message
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class PoolValidation : public ::testing::TestWithParam<Case> {};

TEST_P(PoolValidation, ReportsEveryProblemWithItsFieldPath) {
  const Case& c = GetParam();
  StatusOr<reconcile::Pool> pool = parsePool(c.body.dump());
  EXPECT_EQ(pool.status().code(), c.code) << pool.status().toString();
  EXPECT_THAT(fieldsOf(pool.status()), UnorderedElementsAreArray(c.fields))
      << pool.status().toString();
  if (!c.message.empty() && !pool.status().details().empty()) {
    EXPECT_THAT(pool.status().details().front().message, HasSubstr(c.message));
  }
}

Json with(Json base, const std::string& key, Json value) {
  base[key] = std::move(value);
  return base;
}

Json deviceWith(const std::string& key, Json value) {
  Json d = device("gpu-0");
  d[key] = std::move(value);
  return d;
}

Json attributes(size_t n) {
  Json a = Json::object();
  for (size_t i = 0; i < n; ++i) a["attr" + std::to_string(i)] = {{"int", i}};
  return a;
}

Json taints(size_t n) {
  Json list = Json::array();
  for (size_t i = 0; i < n; ++i) {
    list.push_back({{"key", "t" + std::to_string(i)}, {"effect", "NoSchedule"}});
  }
  return list;
}

Json taintedDevices(size_t n) {
  Json list = devices(n);
  for (Json& d : list) d["taints"] = taints(1);
  return list;
}

// A partitionable pool of Kubernetes 1.37: devices consuming a counter set, each with its
// partition type, compatibility groups, node allocatable resources and skipped operations.
Json consumer(const std::string& name, const std::string& type) {
  Json d = with(device(name), "consumesCounters",
                {{{"counterSet", "gpu-0"},
                  {"counters", {{"memory", {{"value", "10Gi"}}}}},
                  {"compatibilityGroups", {"small", "shared"}}}});
  d["attributes"] = {{"example.com/type", {{"string", type}}}};
  return d;
}

Json partitionedPool() {
  Json pool = nodePool({consumer("part-0", "half"), consumer("part-1", "half"), device("plain")});
  pool["sharedCounters"] = {counterSet("gpu-0")};
  pool["partitionTypeAttribute"] = "example.com/type";
  pool["skipNodeOperations"] = {"NodePrepareResources", "NodeUnprepareResources"};
  return pool;
}

Json allocatable(Json resources) {
  Json d = deviceWith("capacity", {{"cores", {{"value", "8"}}}});
  d["nodeAllocatableResources"] = std::move(resources);
  return d;
}

std::vector<Case> validCases() {
  Json per_device = {{"perDeviceNodeSelection", true},
                     {"devices",
                      {with(device("a"), "nodeName", "node-a"), with(device("b"), "allNodes", true),
                       with(device("c"), "nodeSelector", selector({fabricTerm()}))}}};
  Json counters = nodePool(
      {with(device("part-0"), "consumesCounters",
            {{{"counterSet", "gpu-0"}, {"counters", {{"memory", {{"value", "10Gi"}}}}}}})});
  counters["sharedCounters"] = {counterSet("gpu-0")};
  Json explicit_slices = {
      {"allNodes", true},
      {"slices",
       {{{"sharedCounters", {counterSet("gpu-0")}}},
        {{"devices",
          {with(device("part-0"), "consumesCounters",
                {{{"counterSet", "gpu-0"}, {"counters", {{"memory", {{"value", "1Gi"}}}}}}})}}},
        {{"devices", devices(128, "plain-")}}}}};
  Json policy = deviceWith(
      "capacity",
      {{"memory",
        {{"value", "80Gi"},
         {"requestPolicy", {{"default", "10Gi"}, {"validValues", {"10Gi", "20Gi", "80Gi"}}}}}}});
  policy["allowMultipleAllocations"] = true;
  Json lists = deviceWith("attributes", {{"ints", {{"ints", {1, 2}}}},
                                         {"strings", {{"strings", {"a", "b"}}}},
                                         {"versions", {{"versions", {"1.0.0", "2.0.0-rc.1"}}}},
                                         {"bools", {{"bools", {true}}}}});
  return {
      {"MinimalNodePool", {{"nodeName", "node-a"}}, StatusCode::kOk, {}},
      {"AllNodes", {{"allNodes", true}, {"devices", devices(3)}}, StatusCode::kOk, {}},
      {"NodeSelector", {{"nodeSelector", selector({fabricTerm()})}}, StatusCode::kOk, {}},
      {"AllNodesFalseCountsAsUnset", with(nodePool(), "allNodes", false), StatusCode::kOk, {}},
      {"NullReadsAsAbsent", with(nodePool(), "slices", nullptr), StatusCode::kOk, {}},
      {"PerDeviceNodeSelection", per_device, StatusCode::kOk, {}},
      {"SharedCounters", counters, StatusCode::kOk, {}},
      {"ExplicitSlices", explicit_slices, StatusCode::kOk, {}},
      {"RequestPolicy", nodePool({policy}), StatusCode::kOk, {}},
      {"ListAttributes", nodePool({lists}), StatusCode::kOk, {}},
      {"AttributesAndCapacityAt32",
       nodePool({deviceWith("attributes", attributes(32))}),
       StatusCode::kOk,
       {}},
      {"StringOf64Bytes",
       nodePool({deviceWith("attributes", {{"model", {{"string", std::string(64, 'x')}}}})}),
       StatusCode::kOk,
       {}},
      {"SixteenTaints", nodePool({deviceWith("taints", taints(16))}), StatusCode::kOk, {}},
      {"GenerationAndLease",
       with(with(nodePool(), "generation", 7), "leaseSeconds", 300),
       StatusCode::kOk,
       {}},
      // Fields of newer API versions that the tables know (tagged with their
      // feature) are accepted; a server that drops them reports droppedFields.
      {"TaggedNewerFieldsAccepted",
       nodePool({with(with(with(deviceWith("taints", taints(1)), "bindsToNode", true),
                           "bindingConditions", {"ready"}),
                      "bindingFailureConditions", {"failed"})}),
       StatusCode::kOk,
       {}},
      {"PartitionTypesGroupsAndSkippedOperations", partitionedPool(), StatusCode::kOk, {}},
      {"NodeAllocatableResources",
       nodePool({allocatable(
           {{"cpu", {{"mapping", {{"capacityKey", "cores"}, {"capacityMultiplier", "2"}}}}},
            {"memory", {{"overhead", {{"perPod", "1Gi"}, {"perContainer", "0"}}}}},
            {"hugepages-2Mi", {{"mapping", {{"deviceMultiplier", "4"}}}}}})}),
       StatusCode::kOk,
       {}},
      {"NodeAllocatableResourceMappingsOf136",
       nodePool({with(allocatable(Json::object()), "nodeAllocatableResourceMappings",
                      {{"cpu", {{"capacityKey", "cores"}, {"allocationMultiplier", "2"}}}})}),
       StatusCode::kOk,
       {}},
      {"SkipEveryNodeOperation",
       with(nodePool(), "skipNodeOperations", {"*"}),
       StatusCode::kOk,
       {}},
      {"AutomaticSplitHasNoDeviceLimit",
       with(nodePool(), "devices", taintedDevices(200)),
       StatusCode::kOk,
       {}},
  };
}

std::vector<Case> malformedCases() {
  return {
      {"NotAnObject", Json::array(), StatusCode::kInvalidArgument, {""}},
      {"UnknownField",
       with(nodePool(), "nodeNmae", "node-a"),
       StatusCode::kInvalidArgument,
       {"nodeNmae"},
       "unknown field"},
      {"NodeNameNotAString", {{"nodeName", 5}}, StatusCode::kInvalidArgument, {"nodeName"}},
      {"DevicesNotAList",
       {{"nodeName", "a"}, {"devices", {{"name", "x"}}}},
       StatusCode::kInvalidArgument,
       {"devices"}},
      {"DeviceNotAnObject", nodePool({"gpu-0"}), StatusCode::kInvalidArgument, {"devices[0]"}},
      {"AttributeNotAnObject",
       nodePool({deviceWith("attributes", {{"model", "x"}})}),
       StatusCode::kInvalidArgument,
       {"devices[0].attributes[\"model\"]"}},
      {"BadQuantity",
       nodePool({deviceWith("capacity", {{"memory", {{"value", "lots"}}}})}),
       StatusCode::kInvalidArgument,
       {"devices[0].capacity[\"memory\"].value"}},
      {"GenerationNotAnInteger",
       with(nodePool(), "generation", "1"),
       StatusCode::kInvalidArgument,
       {"generation"}},
      {"AllNodesNotABoolean", {{"allNodes", "true"}}, StatusCode::kInvalidArgument, {"allNodes"}},
      {"UnknownSliceField",
       {{"allNodes", true}, {"slices", {{{"devicse", devices(1)}}}}},
       StatusCode::kInvalidArgument,
       {"slices[0].devicse"}},
      // Strict decoding: an unknown field anywhere is refused with its path.
      {"TaintTypo",
       nodePool({deviceWith("taints", {{{"key", "k"}, {"valu", "v"}, {"effect", "None"}}})}),
       StatusCode::kInvalidArgument,
       {"devices[0].taints[0].valu"},
       "unknown field"},
      {"DeviceTypo",
       nodePool({deviceWith("atributes", {{"model", {{"string", "x"}}}})}),
       StatusCode::kInvalidArgument,
       {"devices[0].atributes"},
       "unknown field"},
      {"AttributeTypo",
       nodePool({deviceWith("attributes", {{"model", {{"strnig", "x"}}}})}),
       StatusCode::kInvalidArgument,
       {"devices[0].attributes[\"model\"].strnig"},
       "unknown field"},
      {"CounterTypo",
       with(nodePool(
                {with(device("p"), "consumesCounters",
                      {{{"counterSet", "gpu-0"}, {"counters", {{"memory", {{"valeu", "1"}}}}}}})}),
            "sharedCounters",
            {{{"name", "gpu-0"}, {"counters", {{"memory", {{"valeu", "80Gi"}}}}}}}),
       StatusCode::kInvalidArgument,
       {"devices[0].consumesCounters[0].counters[\"memory\"].valeu",
        "sharedCounters[0].counters[\"memory\"].valeu"},
       "unknown field"},
      {"RequestPolicyTypo",
       nodePool({with(
           deviceWith("capacity", {{"memory",
                                    {{"value", "80Gi"},
                                     {"requestPolicy", {{"validRnage", {{"min", "1Gi"}}}}}}}}),
           "allowMultipleAllocations", true)}),
       StatusCode::kInvalidArgument,
       {"devices[0].capacity[\"memory\"].requestPolicy.validRnage"},
       "unknown field"},
      {"SelectorTypo",
       {{"nodeSelector", {{"nodeSelectorTerms", {fabricTerm()}}, {"nodeSelectorTerm", 1}}}},
       StatusCode::kInvalidArgument,
       {"nodeSelector.nodeSelectorTerm"},
       "unknown field"},
      {"SelectorTermTypo",
       {{"nodeSelector",
         selector({{{"matchExpresions", {{{"key", "zone"}, {"operator", "Exists"}}}}}})}},
       StatusCode::kInvalidArgument,
       {"nodeSelector.nodeSelectorTerms[0].matchExpresions"},
       "unknown field"},
      {"DeviceSelectorRequirementTypo",
       {{"perDeviceNodeSelection", true},
        {"devices",
         {with(
             device("a"), "nodeSelector",
             selector(
                 {{{"matchFields",
                    {{{"key", "metadata.name"}, {"operator", "In"}, {"value", {"node-a"}}}}}}}))}}},
       StatusCode::kInvalidArgument,
       {"devices[0].nodeSelector.nodeSelectorTerms[0].matchFields[0].value"},
       "unknown field"},
      // A field of a newer API version that this controller does not model
      // (alpha, its shape still changing) is refused, not passed through.
      {"UnlistedNewerFieldRefused",
       nodePool({deviceWith("futureDeviceField", {{"cpu", {{"perDevice", "1"}}}})}),
       StatusCode::kInvalidArgument,
       {"devices[0].futureDeviceField"},
       "unknown field"},
      {"EveryShapeErrorIsReported",
       {{"nodeName", 1}, {"generation", true}, {"extra", 1}, {"devices", {"a", device("b"), 3}}},
       StatusCode::kInvalidArgument,
       {"nodeName", "generation", "extra", "devices[0]", "devices[2]"}},
  };
}

std::vector<Case> invalidCases() {
  Json two_selections = nodePool();
  two_selections["nodeSelector"] = selector({fabricTerm()});
  two_selections["allNodes"] = true;
  Json bad_counter_ref =
      nodePool({with(device("p"), "consumesCounters",
                     {{{"counterSet", "missing"}, {"counters", {{"memory", {{"value", "1"}}}}}}})});
  Json bad_counter_name =
      nodePool({with(device("p"), "consumesCounters",
                     {{{"counterSet", "gpu-0"}, {"counters", {{"cores", {{"value", "1"}}}}}}})});
  bad_counter_name["sharedCounters"] = {counterSet("gpu-0")};
  Json three_consumptions = Json::array();
  for (const char* set : {"a", "b", "c"}) {
    three_consumptions.push_back(
        {{"counterSet", set}, {"counters", {{"memory", {{"value", "1"}}}}}});
  }
  Json too_many_consumptions = nodePool({deviceWith("consumesCounters", three_consumptions)});
  too_many_consumptions["sharedCounters"] = {counterSet("a"), counterSet("b"), counterSet("c")};
  Json policy_without_flag = nodePool({deviceWith(
      "capacity",
      {{"memory", {{"value", "80Gi"}, {"requestPolicy", {{"validRange", {{"min", "1Gi"}}}}}}}})});
  Json policy_bad_default = deviceWith(
      "capacity", {{"memory",
                    {{"value", "80Gi"},
                     {"requestPolicy", {{"default", "5Gi"}, {"validValues", {"10Gi", "20Gi"}}}}}}});
  policy_bad_default["allowMultipleAllocations"] = true;
  Json nine_sets = Json::array();
  for (int i = 0; i < 9; ++i) nine_sets.push_back(counterSet("set-" + std::to_string(i)));
  Json many_values = deviceWith("attributes", {{"a", {{"ints", std::vector<int>(30, 1)}}},
                                               {"b", {{"ints", std::vector<int>(19, 1)}}}});
  Json three_errors = nodePool({device("Bad_Name"), device("ok"), device("ok")});
  three_errors["generation"] = -1;

  return {
      // Node selection.
      {"NoNodeSelection",
       {{"devices", devices(1)}},
       StatusCode::kUnprocessable,
       {""},
       "exactly one of"},
      {"TwoNodeSelections",
       two_selections,
       StatusCode::kUnprocessable,
       {"nodeSelector", "allNodes"}},
      {"InvalidNodeName", {{"nodeName", "Node_A"}}, StatusCode::kUnprocessable, {"nodeName"}},
      {"EmptyNodeName", {{"nodeName", ""}}, StatusCode::kUnprocessable, {"nodeName"}},
      {"TwoSelectorTerms",
       {{"nodeSelector", selector({fabricTerm(), fabricTerm()})}},
       StatusCode::kUnprocessable,
       {"nodeSelector.nodeSelectorTerms"},
       "exactly one"},
      {"SelectorWithoutTerms",
       {{"nodeSelector", Json::object()}},
       StatusCode::kUnprocessable,
       {"nodeSelector.nodeSelectorTerms"}},
      {"SelectorBadOperator",
       {{"nodeSelector",
         selector({{{"matchExpressions", {{{"key", "zone"}, {"operator", "Like"}}}}}})}},
       StatusCode::kUnprocessable,
       {"nodeSelector.nodeSelectorTerms[0].matchExpressions[0].operator"}},
      {"SelectorInWithoutValues",
       {{"nodeSelector",
         selector({{{"matchExpressions", {{{"key", "zone"}, {"operator", "In"}}}}}})}},
       StatusCode::kUnprocessable,
       {"nodeSelector.nodeSelectorTerms[0].matchExpressions[0].values"}},
      {"SelectorMatchFieldsOtherThanName",
       {{"nodeSelector",
         selector({{{"matchFields",
                     {{{"key", "spec.unschedulable"}, {"operator", "In"}, {"values", {"x"}}}}}}})}},
       StatusCode::kUnprocessable,
       {"nodeSelector.nodeSelectorTerms[0].matchFields[0].key"}},
      // The API server checks a matchFields value as a node name; a pool it
      // would refuse must be refused here, before the published one is touched.
      {"SelectorMatchFieldsNotANodeName",
       {{"nodeSelector",
         selector({{{"matchFields",
                     {{{"key", "metadata.name"}, {"operator", "In"}, {"values", {"N_021"}}}}}}})}},
       StatusCode::kUnprocessable,
       {"nodeSelector.nodeSelectorTerms[0].matchFields[0].values[0]"}},
      // Devices or slices.
      {"DevicesAndSlices",
       with(nodePool(devices(1)), "slices", {{{"devices", devices(1)}}}),
       StatusCode::kUnprocessable,
       {"slices"}},
      {"SharedCountersAndSlices",
       {{"allNodes", true}, {"sharedCounters", {counterSet("a")}}, {"slices", {Json::object()}}},
       StatusCode::kUnprocessable,
       {"slices"}},
      {"NoSlices",
       {{"allNodes", true}, {"slices", Json::array()}},
       StatusCode::kUnprocessable,
       {"slices"}},
      // Generation and lease.
      {"NegativeGeneration",
       with(nodePool(), "generation", -1),
       StatusCode::kUnprocessable,
       {"generation"}},
      {"NegativeLease",
       with(nodePool(), "leaseSeconds", -5),
       StatusCode::kUnprocessable,
       {"leaseSeconds"}},
      {"LeaseOverAYear",
       with(nodePool(), "leaseSeconds", kMaxLeaseSeconds + 1),
       StatusCode::kUnprocessable,
       {"leaseSeconds"}},
      // Device names.
      {"DeviceNameNotALabel",
       nodePool({device("GPU_0")}),
       StatusCode::kUnprocessable,
       {"devices[0].name"}},
      {"DeviceNameMissing",
       nodePool({Json::object()}),
       StatusCode::kUnprocessable,
       {"devices[0].name"}},
      {"DuplicateDeviceName",
       nodePool({device("gpu-0"), device("gpu-1"), device("gpu-0")}),
       StatusCode::kUnprocessable,
       {"devices[2].name"},
       "Duplicate value"},
      {"DuplicateDeviceNameAcrossSlices",
       {{"allNodes", true},
        {"slices", {{{"devices", {device("a")}}}, {{"devices", {device("b"), device("a")}}}}}},
       StatusCode::kUnprocessable,
       {"slices[1].devices[1].name"},
       "also at slices[0].devices[0]"},
      // Attributes and capacity.
      {"AttributeNameNotQualified",
       nodePool({deviceWith("attributes", {{"model-name", {{"string", "x"}}}})}),
       StatusCode::kUnprocessable,
       {"devices[0].attributes[\"model-name\"]"}},
      {"AttributeDomainTooLong",
       nodePool({deviceWith("attributes", {{std::string(64, 'a') + "/model", {{"string", "x"}}}})}),
       StatusCode::kUnprocessable,
       {"devices[0].attributes[\"" + std::string(64, 'a') + "/model\"]"}},
      {"AttributeWithTwoValues",
       nodePool({deviceWith("attributes", {{"model", {{"string", "x"}, {"int", 1}}}})}),
       StatusCode::kUnprocessable,
       {"devices[0].attributes[\"model\"]"},
       "exactly one"},
      {"StringOf65Bytes",
       nodePool({deviceWith("attributes", {{"model", {{"string", std::string(65, 'x')}}}})}),
       StatusCode::kUnprocessable,
       {"devices[0].attributes[\"model\"].string"},
       "64 bytes"},
      {"VersionNotSemver",
       nodePool({deviceWith("attributes", {{"driverVersion", {{"version", "v550"}}}})}),
       StatusCode::kUnprocessable,
       {"devices[0].attributes[\"driverVersion\"].version"}},
      {"EmptyList",
       nodePool({deviceWith("attributes", {{"cores", {{"ints", Json::array()}}}})}),
       StatusCode::kUnprocessable,
       {"devices[0].attributes[\"cores\"].ints"}},
      {"ListVersionNotSemver",
       nodePool({deviceWith("attributes", {{"v", {{"versions", {"1.0.0", "1.0"}}}}})}),
       StatusCode::kUnprocessable,
       {"devices[0].attributes[\"v\"].versions[1]"}},
      {"AttributesAndCapacityOver32",
       nodePool({with(deviceWith("attributes", attributes(32)), "capacity",
                      {{"memory", {{"value", "1Gi"}}}})}),
       StatusCode::kUnprocessable,
       {"devices[0]"},
       "at most 32"},
      {"AttributeValuesOver48",
       nodePool({many_values}),
       StatusCode::kUnprocessable,
       {"devices[0].attributes"},
       "48"},
      {"CapacityNameNotQualified",
       nodePool({deviceWith("capacity", {{"a/b/c", {{"value", "1"}}}})}),
       StatusCode::kUnprocessable,
       {"devices[0].capacity[\"a/b/c\"]"}},
      {"RequestPolicyNeedsMultipleAllocations",
       policy_without_flag,
       StatusCode::kUnprocessable,
       {"devices[0].capacity[\"memory\"].requestPolicy"},
       "allowMultipleAllocations"},
      {"RequestPolicyDefaultNotValid",
       nodePool({policy_bad_default}),
       StatusCode::kUnprocessable,
       {"devices[0].capacity[\"memory\"].requestPolicy.default"}},
      // Taints.
      {"SeventeenTaints",
       nodePool({deviceWith("taints", taints(17))}),
       StatusCode::kUnprocessable,
       {"devices[0].taints"},
       "at most 16"},
      {"TaintBadEffect",
       nodePool({deviceWith("taints", {{{"key", "k"}, {"effect", "NoRun"}}})}),
       StatusCode::kUnprocessable,
       {"devices[0].taints[0].effect"}},
      {"GenerationTooCloseToTheEnd",
       {{"nodeName", "node-a"}, {"generation", int64_t{1} << 62 | 1}, {"devices", Json::array()}},
       StatusCode::kUnprocessable,
       {"generation"},
       "at most 2^62"},
      {"TaintTimeNotRfc3339",
       nodePool({deviceWith(
           "taints", {{{"key", "k"}, {"effect", "NoSchedule"}, {"timeAdded", "yesterday"}}})}),
       StatusCode::kUnprocessable,
       {"devices[0].taints[0].timeAdded"},
       "RFC 3339"},
      {"TaintBadKeyAndValue",
       nodePool({deviceWith("taints", {{{"key", "-k"}, {"value", "a b"}, {"effect", "None"}}})}),
       StatusCode::kUnprocessable,
       {"devices[0].taints[0].key", "devices[0].taints[0].value"}},
      // Counters.
      {"CounterSetNotInPool",
       bad_counter_ref,
       StatusCode::kUnprocessable,
       {"devices[0].consumesCounters[0].counterSet"},
       "not in the pool"},
      {"CounterNotInSet",
       bad_counter_name,
       StatusCode::kUnprocessable,
       {"devices[0].consumesCounters[0].counters[\"cores\"]"}},
      {"ThreeCounterConsumptions",
       too_many_consumptions,
       StatusCode::kUnprocessable,
       {"devices[0].consumesCounters"},
       "at most 2"},
      {"DuplicateCounterSet",
       {{"allNodes", true}, {"sharedCounters", {counterSet("gpu-0"), counterSet("gpu-0")}}},
       StatusCode::kUnprocessable,
       {"sharedCounters[1].name"}},
      {"CounterSetBadNameAndNoCounters",
       {{"allNodes", true}, {"sharedCounters", {{{"name", "GPU 0"}}}}},
       StatusCode::kUnprocessable,
       {"sharedCounters[0].name", "sharedCounters[0].counters"}},
      // Binding conditions.
      {"BindingConditionsNeedFailureConditions",
       nodePool({deviceWith("bindingConditions", {"ready"})}),
       StatusCode::kUnprocessable,
       {"devices[0].bindingFailureConditions"}},
      {"FiveBindingConditions",
       nodePool({with(deviceWith("bindingConditions", {"a", "b", "c", "d", "e"}),
                      "bindingFailureConditions", {"f"})}),
       StatusCode::kUnprocessable,
       {"devices[0].bindingConditions"}},
      {"BindingConditionInBothLists",
       nodePool({with(deviceWith("bindingConditions", {"a"}), "bindingFailureConditions", {"a"})}),
       StatusCode::kUnprocessable,
       {"devices[0].bindingFailureConditions[0]"}},
      // Per-device node selection.
      {"PerDeviceWithoutNodeField",
       {{"perDeviceNodeSelection", true}, {"devices", devices(1)}},
       StatusCode::kUnprocessable,
       {"devices[0]"}},
      {"DeviceNodeNameWithoutPerDevice",
       nodePool({deviceWith("nodeName", "node-b")}),
       StatusCode::kUnprocessable,
       {"devices[0].nodeName"}},
      {"DeviceAllNodesFalse",
       {{"perDeviceNodeSelection", true}, {"devices", {deviceWith("allNodes", false)}}},
       StatusCode::kUnprocessable,
       {"devices[0].allNodes"}},
      // Explicit slices.
      {"SliceOf129Devices",
       {{"allNodes", true}, {"slices", {{{"devices", devices(129)}}}}},
       StatusCode::kUnprocessable,
       {"slices[0].devices"},
       "at most 128"},
      {"SliceOf65DevicesWithTaints",
       {{"allNodes", true}, {"slices", {{{"devices", taintedDevices(65)}}}}},
       StatusCode::kUnprocessable,
       {"slices[0].devices"},
       "at most 64"},
      {"SliceWithDevicesAndCounters",
       {{"allNodes", true},
        {"slices", {{{"devices", devices(1)}, {"sharedCounters", {counterSet("a")}}}}}},
       StatusCode::kUnprocessable,
       {"slices[0].sharedCounters"}},
      {"SliceWithNineCounterSets",
       {{"allNodes", true}, {"slices", {{{"sharedCounters", nine_sets}}}}},
       StatusCode::kUnprocessable,
       {"slices[0].sharedCounters"},
       "at most 8"},
      {"SlicePerDeviceMismatch",
       {{"allNodes", true}, {"slices", {{{"perDeviceNodeSelection", true}}}}},
       StatusCode::kUnprocessable,
       {"slices[0].perDeviceNodeSelection"}},
      {"SkipNodeOperationsUnknownAndDuplicate",
       with(nodePool(), "skipNodeOperations",
            {"NodeUnprepareResources", "Reboot", "NodeUnprepareResources"}),
       StatusCode::kUnprocessable,
       {"skipNodeOperations[1]", "skipNodeOperations[2]"}},
      {"SkipPrepareWithoutUnprepare",
       with(nodePool(), "skipNodeOperations", {"NodePrepareResources"}),
       StatusCode::kUnprocessable,
       {"skipNodeOperations"},
       "NodeUnprepareResources"},
      {"PartitionTypeNotFullyQualified",
       with(partitionedPool(), "partitionTypeAttribute", "type"),
       StatusCode::kUnprocessable,
       {"partitionTypeAttribute"},
       "fully qualified"},
      {"PartitionTypeWithoutConsumers",
       with(nodePool(devices(2)), "partitionTypeAttribute", "example.com/type"),
       StatusCode::kUnprocessable,
       {"partitionTypeAttribute"},
       "consumes counters"},
      {"PartitionTypeMissingOrNotAString",
       [] {
         Json pool = partitionedPool();
         pool["devices"][0]["attributes"] = Json::object();
         pool["devices"][1]["attributes"]["example.com/type"] = {{"int", 2}};
         return pool;
       }(),
       StatusCode::kUnprocessable,
       {"devices[0].attributes[\"example.com/type\"]",
        "devices[1].attributes[\"example.com/type\"]"}},
      {"PartitionTypeOnAnExplicitSliceWithoutConsumers",
       {{"allNodes", true},
        {"slices", {{{"devices", devices(1)}, {"partitionTypeAttribute", "example.com/type"}}}}},
       StatusCode::kUnprocessable,
       {"slices[0].partitionTypeAttribute"}},
      {"CompatibilityGroupsTooManyDuplicateOrNotLabels",
       [] {
         Json pool = partitionedPool();
         pool["devices"][0]["consumesCounters"][0]["compatibilityGroups"] = {"a", "b", "c"};
         pool["devices"][1]["consumesCounters"][0]["compatibilityGroups"] = {"Big", "Big"};
         return pool;
       }(),
       StatusCode::kUnprocessable,
       {"devices[0].consumesCounters[0].compatibilityGroups",
        "devices[1].consumesCounters[0].compatibilityGroups[0]",
        "devices[1].consumesCounters[0].compatibilityGroups[1]",
        "devices[1].consumesCounters[0].compatibilityGroups[1]"}},
      {"NodeAllocatableResourcesByTheServersRules",
       nodePool({allocatable(
           {{"example.com/gpus", {{"overhead", {{"perPod", "1"}}}}},
            {"cpu", Json::object()},
            {"memory", {{"mapping", {{"capacityKey", "missing"}, {"deviceMultiplier", "1"}}}}},
            {"hugepages-1Gi",
             {{"mapping", {{"capacityMultiplier", "0"}}}, {"overhead", {{"perPod", "-1"}}}}}})}),
       StatusCode::kUnprocessable,
       {"devices[0].nodeAllocatableResources[\"example.com/gpus\"]",
        "devices[0].nodeAllocatableResources[\"cpu\"]",
        "devices[0].nodeAllocatableResources[\"memory\"].mapping",
        "devices[0].nodeAllocatableResources[\"memory\"].mapping.capacityKey",
        "devices[0].nodeAllocatableResources[\"memory\"].mapping.capacityMultiplier",
        "devices[0].nodeAllocatableResources[\"hugepages-1Gi\"].mapping",
        "devices[0].nodeAllocatableResources[\"hugepages-1Gi\"].mapping.capacityKey",
        "devices[0].nodeAllocatableResources[\"hugepages-1Gi\"].mapping.capacityMultiplier",
        "devices[0].nodeAllocatableResources[\"hugepages-1Gi\"].overhead.perPod"}},
      // Everything at once.
      {"EveryProblemIsReported",
       three_errors,
       StatusCode::kUnprocessable,
       {"generation", "devices[0].name", "devices[2].name"}},
  };
}

INSTANTIATE_TEST_SUITE_P(Valid, PoolValidation, ::testing::ValuesIn(validCases()),
                         [](const auto& info) { return info.param.name; });
INSTANTIATE_TEST_SUITE_P(Malformed, PoolValidation, ::testing::ValuesIn(malformedCases()),
                         [](const auto& info) { return info.param.name; });
INSTANTIATE_TEST_SUITE_P(Invalid, PoolValidation, ::testing::ValuesIn(invalidCases()),
                         [](const auto& info) { return info.param.name; });

TEST(PoolJson, DecodesEveryPoolField) {
  Json body = {
      {"nodeName", "node-a"},
      {"generation", 4},
      {"leaseSeconds", 30},
      {"sharedCounters", {counterSet("gpu-0")}},
      {"devices", {{{"name", "gpu-0"}, {"attributes", {{"model", {{"string", "H100"}}}}}}}}};
  StatusOr<reconcile::Pool> pool = parsePool(body.dump());
  ASSERT_TRUE(pool.ok()) << pool.status().toString();
  EXPECT_EQ(pool->selection.node_name, "node-a");
  EXPECT_EQ(pool->generation, 4);
  EXPECT_EQ(pool->lease, std::chrono::seconds(30));
  ASSERT_EQ(pool->shared_counters.size(), 1U);
  EXPECT_EQ(pool->shared_counters[0].name, "gpu-0");
  ASSERT_EQ(pool->devices.size(), 1U);
  EXPECT_EQ(pool->devices[0].device().attributes.at("model").string_value, "H100");
  EXPECT_TRUE(pool->devices[0].device().unknown.is_null());
  EXPECT_FALSE(pool->slices.has_value());

  // A field no table lists is refused, not kept for the API server to prune.
  body["devices"][0]["futureField"] = {{"x", 1}};
  pool = parsePool(body.dump());
  EXPECT_EQ(pool.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(fieldsOf(pool.status()), ElementsAre("devices[0].futureField"));
}

// The message of a strict decoding error is the API server's: every unknown
// field's path, in document order, joined with ", ".
TEST(PoolJson, StrictDecodingErrorsNameEveryPath) {
  Json body = nodePool({deviceWith("atributes", Json::object()),
                        deviceWith("taints", {{{"key", "k"}, {"valu", "v"}, {"effect", "None"}}})});
  StatusOr<reconcile::Pool> pool = parsePool(body.dump());
  EXPECT_EQ(pool.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(pool.status().message(),
            "strict decoding error: unknown field \"devices[0].atributes\", unknown field "
            "\"devices[1].taints[0].valu\"");
  EXPECT_THAT(pool.status().details(),
              ElementsAre(FieldError{"devices[0].atributes", "unknown field"},
                          FieldError{"devices[1].taints[0].valu", "unknown field"}));

  // Inside a driver body, paths name the pool.
  StatusOr<std::map<std::string, reconcile::Pool>> pools =
      parseDriverPools(Json{{"pools", {{"node-a", body}}}}.dump());
  EXPECT_THAT(fieldsOf(pools.status()), ElementsAre("pools[\"node-a\"].devices[0].atributes",
                                                    "pools[\"node-a\"].devices[1].taints[0].valu"));
}

// A body of bad values gets 100 details and a count of the rest, however
// many there are.
TEST(PoolJson, ProblemsAreCappedAtAHundredWithACount) {
  Json list = Json::array();
  for (int i = 0; i < 500; ++i) list.push_back(1);
  StatusOr<reconcile::Pool> pool = parsePool(nodePool(list).dump());
  EXPECT_EQ(pool.status().code(), StatusCode::kInvalidArgument);
  ASSERT_EQ(pool.status().details().size(), kMaxProblemDetails + 1);
  EXPECT_EQ(pool.status().details().front(), (FieldError{"devices[0]", "must be an object"}));
  EXPECT_EQ(pool.status().details().back().message,
            "400 more problems not listed (at most 100 are)");
  EXPECT_THAT(pool.status().message(), ::testing::StartsWith("500 malformed fields"));

  // Unknown fields past the cap: the message says how many more.
  Json typos = Json::array();
  for (int i = 0; i < 150; ++i) typos.push_back({{"name", "d" + std::to_string(i)}, {"x", 1}});
  pool = parsePool(nodePool(typos).dump());
  ASSERT_EQ(pool.status().details().size(), kMaxProblemDetails + 1);
  EXPECT_THAT(pool.status().message(), ::testing::StartsWith("strict decoding error: unknown "
                                                             "field \"devices[0].x\", "));
  EXPECT_THAT(pool.status().message(), ::testing::EndsWith("(and 50 more)"));
}

TEST(PoolJson, DecodesExplicitSlicesInOrder) {
  Json body = {{"allNodes", true},
               {"slices", {{{"devices", devices(2, "a-")}}, {{"devices", devices(1, "b-")}}}}};
  StatusOr<reconcile::Pool> pool = parsePool(body.dump());
  ASSERT_TRUE(pool.ok()) << pool.status().toString();
  ASSERT_TRUE(pool->slices.has_value());
  ASSERT_EQ(pool->slices->size(), 2U);
  EXPECT_EQ((*pool->slices)[0].devices.size(), 2U);
  EXPECT_EQ((*pool->slices)[1].devices[0].device().name, "b-0");
  EXPECT_TRUE(pool->selection.all_nodes);
}

// Pool-level slice options reach the slices that set none of their own; partitionTypeAttribute
// only those with a device that consumes counters (the API server refuses it elsewhere).
TEST(PoolJson, SlicesTakeThePoolsOptionsUnlessTheyHaveTheirOwn) {
  Json body = {{"allNodes", true},
               {"partitionTypeAttribute", "example.com/type"},
               {"skipNodeOperations", {"*"}},
               {"slices",
                {{{"sharedCounters", {counterSet("gpu-0")}}},
                 {{"devices", {consumer("part-0", "half")}}},
                 {{"devices", devices(1)}, {"skipNodeOperations", {"NodeUnprepareResources"}}}}}};
  StatusOr<reconcile::Pool> pool = parsePool(body.dump());
  ASSERT_TRUE(pool.ok()) << pool.status().toString();
  const std::vector<reconcile::DesiredSlice>& slices = *pool->slices;
  ASSERT_EQ(slices.size(), 3U);
  EXPECT_EQ(slices[0].options.partition_type_attribute, std::nullopt);
  EXPECT_THAT(slices[0].options.skip_node_operations, ElementsAre("*"));
  EXPECT_EQ(slices[1].options.partition_type_attribute, "example.com/type");
  EXPECT_THAT(slices[1].options.skip_node_operations, ElementsAre("*"));
  EXPECT_EQ(slices[2].options.partition_type_attribute, std::nullopt);
  EXPECT_THAT(slices[2].options.skip_node_operations, ElementsAre("NodeUnprepareResources"));

  // Where no slice takes it, the pool's partitionTypeAttribute would be lost: refused.
  body["slices"].erase(1);
  pool = parsePool(body.dump());
  EXPECT_EQ(pool.status().code(), StatusCode::kUnprocessable);
  EXPECT_THAT(fieldsOf(pool.status()), ElementsAre("partitionTypeAttribute"));
}

// Devices may name the partition type bare when it is in the driver's own domain.
TEST(PoolJson, APartitionTypeInTheDriversDomainMayBeNamedBare) {
  Json pool = partitionedPool();
  for (Json& d : pool["devices"]) {
    if (!d.contains("attributes")) continue;
    d["attributes"] = {{"type", d["attributes"]["example.com/type"]}};
  }
  BodyProblems problems;
  (void)decodePool(pool, "", problems, "example.com");
  EXPECT_TRUE(problems.empty()) << problemsStatus(problems).toString();
  BodyProblems other;
  (void)decodePool(pool, "", other, "gpu.example.com");
  EXPECT_EQ(other.invalid.size(), 2U) << problemsStatus(other).toString();
}

TEST(PoolJson, ShapeErrorsComeFirstWithoutValidationNoise) {
  // An unknown field and an invalid device name: only the shape error is
  // reported, the validation runs once the body has the right shape.
  StatusOr<reconcile::Pool> pool = parsePool(with(nodePool({device("BAD")}), "typo", 1).dump());
  EXPECT_EQ(pool.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(fieldsOf(pool.status()), ElementsAre("typo"));
}

TEST(PoolJson, RejectsTextThatIsNotJson) {
  StatusOr<reconcile::Pool> pool = parsePool("{\"nodeName\": ");
  EXPECT_EQ(pool.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(pool.status().message(), HasSubstr("not JSON"));
}

TEST(PoolJson, RejectsDeepNestingBeforeParsing) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  StatusOr<Json> parsed = parseJsonBody(deep);
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(parsed.status().message(), HasSubstr("deeper"));
  // Brackets inside strings do not count.
  EXPECT_TRUE(parseJsonBody("{\"a\": \"" + std::string(1000, '[') + "\"}").ok());
}

TEST(PoolJson, DriverBodyPathsNameThePool) {
  Json body = {{"pools",
                {{"node-a", nodePool({device("gpu-0")})},
                 {"node-b", nodePool({device("Bad")})},
                 {"Bad/Name", nodePool()}}}};
  StatusOr<std::map<std::string, reconcile::Pool>> pools = parseDriverPools(body.dump());
  EXPECT_EQ(pools.status().code(), StatusCode::kUnprocessable);
  EXPECT_THAT(
      fieldsOf(pools.status()),
      UnorderedElementsAreArray({"pools[\"node-b\"].devices[0].name", "pools[\"Bad/Name\"]"}));
}

TEST(PoolJson, DriverBodyShape) {
  EXPECT_EQ(parseDriverPools("{}").status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(fieldsOf(parseDriverPools("{}").status()), ElementsAre("pools"));
  EXPECT_THAT(fieldsOf(parseDriverPools(R"({"pools": {}, "pool": {}})").status()),
              ElementsAre("pool"));
  EXPECT_THAT(fieldsOf(parseDriverPools(R"({"pools": []})").status()), ElementsAre("pools"));
  EXPECT_THAT(fieldsOf(parseDriverPools(R"({"pools": {"a": {"nodeName": 1}}})").status()),
              ElementsAre("pools[\"a\"].nodeName"));
  StatusOr<std::map<std::string, reconcile::Pool>> empty = parseDriverPools(R"({"pools": {}})");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST(PoolJson, StatusJsonHasEveryField) {
  reconcile::PoolStatus status;
  status.key = {"gpu.example.com", "node-a"};
  status.phase = reconcile::PoolPhase::kFailed;
  status.desired_version = 7;
  status.published_version = 5;
  status.published_generation = 3;
  status.slice_names = {"00000-gpu.example.com-node-a-x7k2p"};
  status.last_error = Status(StatusCode::kConflict, "update ResourceSlice x: conflict");
  status.last_push = Clock::SystemTime(std::chrono::seconds(1767225600));
  status.dropped_fields = {"spec.devices[0].taints"};
  auto desired = std::make_shared<reconcile::DesiredPool>();
  desired->pool.generation = 9;
  desired->pool.lease = std::chrono::seconds(60);
  const Json j = poolStatusToJson(status, desired, "replica-1");
  EXPECT_EQ(j.at("driver"), "gpu.example.com");
  EXPECT_EQ(j.at("pool"), "node-a");
  EXPECT_EQ(j.at("phase"), "Failed");
  EXPECT_EQ(j.at("desiredGeneration"), 9);
  EXPECT_EQ(j.at("publishedGeneration"), 3);
  EXPECT_EQ(j.at("desiredVersion"), 7);
  EXPECT_EQ(j.at("publishedVersion"), 5);
  EXPECT_EQ(j.at("sliceNames"), Json({"00000-gpu.example.com-node-a-x7k2p"}));
  EXPECT_EQ(j.at("lastError"),
            Json({{"reason", "Conflict"}, {"message", "update ResourceSlice x: conflict"}}));
  EXPECT_EQ(j.at("lastPushTime"), "2026-01-01T00:00:00.000000Z");
  EXPECT_EQ(j.at("droppedFields"), Json({"spec.devices[0].taints"}));
  EXPECT_EQ(j.at("leaseSeconds"), 60);
  EXPECT_EQ(j.at("leader"), "replica-1");
  // resourceslicectl reads it back with the same table, whole.
  const StatusOr<client::PoolStatusJson> read = client::poolStatusFromJson(j);
  ASSERT_TRUE(read.ok()) << read.status().toString();
  EXPECT_EQ(client::toJson(*read), j);

  status.last_error = okStatus();
  EXPECT_FALSE(poolStatusToJson(status, nullptr, "").contains("lastError"));
  EXPECT_EQ(poolStatusToJson(status, nullptr, "", "Withdrawn").at("phase"), "Withdrawn");
}

TEST(PoolJson, ErrorJsonShape) {
  const Json j = errorToJson(422, "Invalid", "1 invalid field", {{"devices[0].name", "bad"}});
  EXPECT_EQ(j, Json::parse(R"({"code": 422, "reason": "Invalid", "message": "1 invalid field",
                               "details": [{"field": "devices[0].name", "message": "bad"}]})"));
  // Invalid UTF-8 from a URL does not throw.
  EXPECT_NO_THROW(dumpJson(errorToJson(404, "NotFound", "no pool \xff", {})));
}

// ---- The example inventory --------------------------------------------------

std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

TEST(InventoryExamples, EveryExampleIsValid) {
  size_t pools_seen = 0;
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(RSC_INVENTORY_EXAMPLES_DIR)) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() != ".json") continue;
    ++files;
    const std::string text = readFile(entry.path());
    if (name.ends_with(".driver.json")) {
      StatusOr<std::map<std::string, reconcile::Pool>> pools = parseDriverPools(text);
      ASSERT_TRUE(pools.ok()) << name << ": " << pools.status().toString();
      EXPECT_FALSE(pools->empty()) << name;
      pools_seen += pools->size();
    } else {
      ASSERT_TRUE(name.ends_with(".pool.json")) << name << ": name it *.pool.json or *.driver.json";
      StatusOr<reconcile::Pool> pool = parsePool(text);
      ASSERT_TRUE(pool.ok()) << name << ": " << pool.status().toString();
      ++pools_seen;
    }
  }
  EXPECT_GE(files, 4U);
  EXPECT_GE(pools_seen, 5U);
}

TEST(InventoryExamples, PartitionableGpuConsumesCounters) {
  StatusOr<reconcile::Pool> pool = parsePool(readFile(
      std::filesystem::path(RSC_INVENTORY_EXAMPLES_DIR) / "gpu.example.com-node-c.pool.json"));
  ASSERT_TRUE(pool.ok()) << pool.status().toString();
  EXPECT_FALSE(pool->shared_counters.empty());
  size_t consuming = 0;
  for (const client::Device& d : client::decodeAll(pool->devices))
    consuming += d.consumes_counters.empty() ? 0 : 1;
  EXPECT_EQ(consuming, pool->devices.size());
}

TEST(InventoryExamples, GpuPoolsLookLikeRealGpuDrivers) {
  for (const char* file :
       {"gpu.example.com-node-a.pool.json", "gpu.example.com-node-b.pool.json"}) {
    StatusOr<reconcile::Pool> pool =
        parsePool(readFile(std::filesystem::path(RSC_INVENTORY_EXAMPLES_DIR) / file));
    ASSERT_TRUE(pool.ok()) << file << ": " << pool.status().toString();
    EXPECT_TRUE(pool->selection.node_name.has_value()) << file;
    ASSERT_GE(pool->devices.size(), 4U) << file;
    for (const client::Device& d : client::decodeAll(pool->devices)) {
      EXPECT_GE(d.attributes.size(), 10U) << file << " " << d.name;
      EXPECT_EQ(d.capacity.size(), 2U) << file << " " << d.name;
    }
  }
}

}  // namespace
}  // namespace rsc::controller::pool
