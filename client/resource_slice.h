// The resource.k8s.io/v1 ResourceSlice, modelled whole: devices with
// attributes (scalar and list forms), capacity and request policy, taints,
// counter consumption and compatibility groups, binding conditions, node
// allocatable resources, shared counters, partition types, skipped node
// operations and every node selection field. Fields this model does not know are kept in `unknown`
// and written back unchanged. Equality (operator==) is semantic where the API server normalises:
// quantities compare by value ("1Gi" == "1024Mi"). Plain values: not synchronised.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "client/api_features.h"
#include "client/codec.h"
#include "client/device_form.h"
#include "client/objects.h"
#include "client/quantity.h"

namespace rsc::client {

inline constexpr char kResourceApiVersion[] = "resource.k8s.io/v1";

// A core/v1 NodeSelector. Kept as JSON: the controller copies it, never
// interprets it; equality is JSON equality.
struct NodeSelector {
  Json value = Json::object();
  friend bool operator==(const NodeSelector&, const NodeSelector&) = default;
};

// The shape of a core/v1 NodeSelector, by which pushed selectors are decoded
// strictly and validated; NodeSelector itself stays JSON.
struct NodeSelectorRequirement {
  std::string key;
  std::string operator_;  // "operator"
  std::vector<std::string> values;
};

struct NodeSelectorTerm {
  std::vector<NodeSelectorRequirement> match_expressions;
  std::vector<NodeSelectorRequirement> match_fields;
};

struct NodeSelectorShape {
  std::optional<std::vector<NodeSelectorTerm>> node_selector_terms;
};

// Exactly one member is set in a valid attribute. List forms ("ints",
// "bools", "strings", "versions") exist from Kubernetes 1.36 (DRAListTypeAttributes).
struct DeviceAttribute {
  std::optional<int64_t> int_value;
  std::optional<bool> bool_value;
  std::optional<std::string> string_value;
  std::optional<std::string> version_value;
  std::optional<std::vector<int64_t>> ints;
  std::optional<std::vector<bool>> bools;
  std::optional<std::vector<std::string>> strings;
  std::optional<std::vector<std::string>> versions;
  Json unknown = nullptr;
  friend bool operator==(const DeviceAttribute&, const DeviceAttribute&) = default;
};

struct CapacityRequestPolicyRange {
  std::optional<Quantity> min;
  std::optional<Quantity> max;
  std::optional<Quantity> step;
  Json unknown = nullptr;  // as in every struct here: fields of newer API versions, null when none
  friend bool operator==(const CapacityRequestPolicyRange&,
                         const CapacityRequestPolicyRange&) = default;
};

struct CapacityRequestPolicy {
  std::optional<Quantity> default_value;  // "default"
  std::vector<Quantity> valid_values;
  std::optional<CapacityRequestPolicyRange> valid_range;
  Json unknown = nullptr;
  friend bool operator==(const CapacityRequestPolicy&, const CapacityRequestPolicy&) = default;
};

struct DeviceCapacity {
  Quantity value;
  std::optional<CapacityRequestPolicy> request_policy;
  Json unknown = nullptr;
  friend bool operator==(const DeviceCapacity&, const DeviceCapacity&) = default;
};

struct Counter {
  Quantity value;
  friend bool operator==(const Counter&, const Counter&) = default;
};

struct CounterSet {
  std::string name;
  std::map<std::string, Counter> counters;
  Json unknown = nullptr;
  friend bool operator==(const CounterSet&, const CounterSet&) = default;
};

struct DeviceCounterConsumption {
  std::string counter_set;
  std::map<std::string, Counter> counters;
  std::vector<std::string> compatibility_groups;  // DNS labels, at most 2, from 1.37
  Json unknown = nullptr;
  friend bool operator==(const DeviceCounterConsumption&,
                         const DeviceCounterConsumption&) = default;
};

struct DeviceTaint {
  std::string key;
  std::string value;
  std::string effect;  // None, NoSchedule or NoExecute
  // Defaulted by the API server when unset; see semanticEqual.
  std::optional<std::string> time_added;
  Json unknown = nullptr;
  friend bool operator==(const DeviceTaint&, const DeviceTaint&) = default;
};

// How an allocated device translates into a node allocatable resource (cpu, memory,
// hugepages-*), from 1.37 (DRANodeAllocatableResources): the device count times
// deviceMultiplier, or the consumed capacity `capacityKey` times capacityMultiplier.
struct NodeAllocatableMapping {
  std::optional<std::string> capacity_key;
  std::optional<Quantity> capacity_multiplier;
  std::optional<Quantity> device_multiplier;
  Json unknown = nullptr;
  friend bool operator==(const NodeAllocatableMapping&, const NodeAllocatableMapping&) = default;
};

// What an allocated device costs the node besides itself, per pod and per container.
struct NodeAllocatableOverhead {
  std::optional<Quantity> per_pod;
  std::optional<Quantity> per_container;
  Json unknown = nullptr;
  friend bool operator==(const NodeAllocatableOverhead&, const NodeAllocatableOverhead&) = default;
};

struct NodeAllocatableResource {
  std::optional<NodeAllocatableMapping> mapping;
  std::optional<NodeAllocatableOverhead> overhead;
  Json unknown = nullptr;
  friend bool operator==(const NodeAllocatableResource&, const NodeAllocatableResource&) = default;
};

// The same, as Kubernetes 1.36 alone shaped it (nodeAllocatableResourceMappings, replaced in 1.37).
struct NodeAllocatableResourceMapping {
  std::optional<std::string> capacity_key;
  std::optional<Quantity> allocation_multiplier;
  Json unknown = nullptr;
  friend bool operator==(const NodeAllocatableResourceMapping&,
                         const NodeAllocatableResourceMapping&) = default;
};

struct Device {
  std::string name;
  std::map<std::string, DeviceAttribute> attributes;
  std::map<std::string, DeviceCapacity> capacity;
  std::vector<DeviceCounterConsumption> consumes_counters;
  std::optional<std::string> node_name;
  std::optional<NodeSelector> node_selector;
  std::optional<bool> all_nodes;
  std::vector<DeviceTaint> taints;
  std::optional<bool> binds_to_node;
  std::vector<std::string> binding_conditions;
  std::vector<std::string> binding_failure_conditions;
  std::optional<bool> allow_multiple_allocations;
  // Keyed by node resource name ("cpu", "memory", "hugepages-2Mi").
  std::map<std::string, NodeAllocatableResource> node_allocatable_resources;
  std::map<std::string, NodeAllocatableResourceMapping> node_allocatable_resource_mappings;
  Json unknown = nullptr;
  friend bool operator==(const Device&, const Device&) = default;

  // True when the device uses a feature that lowers the per-slice device
  // limit to 64: taints, counter consumption or list-typed attributes.
  bool usesAdvancedFeatures() const;
};

struct ResourcePool {
  std::string name;
  int64_t generation = 0;
  int64_t resource_slice_count = 0;
  Json unknown = nullptr;
  friend bool operator==(const ResourcePool&, const ResourcePool&) = default;
};

struct ResourceSliceSpec {
  std::string driver;
  ResourcePool pool;
  std::optional<std::string> node_name;
  std::optional<NodeSelector> node_selector;
  std::optional<bool> all_nodes;
  std::optional<bool> per_device_node_selection;
  std::vector<DeviceRef> devices;  // shared compact forms (device_form.h)
  std::vector<CounterSet> shared_counters;
  // From 1.37: the string attribute naming each counter-consuming device's partition type
  // (DRAPartitionableDevicesType), and the node operations the kubelet may skip for the
  // slice's devices (DRAOptionalNodeOperations).
  std::optional<std::string> partition_type_attribute;
  std::vector<std::string> skip_node_operations;
  Json unknown = nullptr;
  friend bool operator==(const ResourceSliceSpec&, const ResourceSliceSpec&) = default;
};

struct ResourceSlice {
  ObjectMeta metadata;
  ResourceSliceSpec spec;
  Json unknown = nullptr;
  friend bool operator==(const ResourceSlice&, const ResourceSlice&) = default;
};

// JSON conversions, by the tables below. Decoding fails with InvalidArgument
// naming every bad field ("spec.devices[3].attributes[\"model\"]: must be an
// object") and never throws.
Json toJson(const ResourceSlice& slice);
// toJson(slice) as text, with apiVersion and kind, without building a DOM:
// request bodies, whose devices are spliced in as their forms' bytes.
std::string toJsonText(const ResourceSlice& slice);
StatusOr<ResourceSlice> resourceSliceFromJson(const Json& j);
// resourceSliceFromJson of the object's text, decoded without a DOM by the
// SAX driver (codec_sax.h): the same slice whenever it succeeds. Its errors
// are worded apart (syntax errors especially), so a caller that reports one
// reads the refused text through the DOM and resourceSliceFromJson instead.
StatusOr<ResourceSlice> resourceSliceFromText(std::string_view text);
// The slice of a name that a client holds already (its informer's), or null.
using HeldSlice = std::function<std::shared_ptr<const ResourceSlice>(const std::string& name)>;
// resourceSliceFromText, except for the state of a slice held already: a
// resourceVersion names one state of one object, so when the metadata, read
// first, has the name, uid and resourceVersion of the slice `held` returns,
// the spec that follows is that slice's: it is taken from the slice held, and
// the rest of the text is neither read nor checked (the controller's watch
// reports each of its own writes back to it, whose answer it holds already).
StatusOr<ResourceSlice> resourceSliceFromText(std::string_view text, const HeldSlice& held);
Json toJson(const Device& device);
StatusOr<Device> deviceFromJson(const Json& j, const std::string& path);
Json toJson(const CounterSet& set);
StatusOr<CounterSet> counterSetFromJson(const Json& j, const std::string& path);

// Returns true when `live` (what the API server stored) says the same as
// `desired` (what we would write): equal, except that a taint's timeAdded
// that `desired` leaves unset is not compared (the server defaults it), and
// fields that `desired` sets but the server dropped (disabled features) are
// reported through `dropped` instead of causing a difference. `dropped` may
// be null.
// A field counts as dropped only when live carries that field nowhere in the
// slice (the server drops a gated field from every device or from none);
// paths look like "spec.devices[3].taints". Fields this model does not know
// count as dropped the same way; one that only `live` has is not compared
// (it may be a server default). `dropped` is appended to only when the
// result is true.
bool semanticEqual(const ResourceSliceSpec& desired, const ResourceSliceSpec& live,
                   std::vector<std::string>* dropped = nullptr);

// The tagged features that `spec` uses anywhere (what a server kept, for a live slice).
FeatureSet featuresOf(const ResourceSliceSpec& spec);
FeatureSet featuresOf(const Device& device);

// ---- Field tables -----------------------------------------------------------
// One row per field of resource.k8s.io/v1, in byte order of the JSON names.
// A Feature tag marks a field that a supported server may drop (api_features.h).
namespace codec {

template <>
struct Table<NodeSelectorRequirement> : TableOf<NodeSelectorRequirement> {
  static constexpr auto kFields = std::tuple{
      field("key", &NodeSelectorRequirement::key, Str{}, Omit::kNever),
      field("operator", &NodeSelectorRequirement::operator_, Str{}, Omit::kNever),
      field("values", &NodeSelectorRequirement::values, Strings{}),
  };
};

template <>
struct Table<NodeSelectorTerm> : TableOf<NodeSelectorTerm> {
  static constexpr auto kFields = std::tuple{
      field("matchExpressions", &NodeSelectorTerm::match_expressions,
            ListOf<Obj<NodeSelectorRequirement>>{}),
      field("matchFields", &NodeSelectorTerm::match_fields, ListOf<Obj<NodeSelectorRequirement>>{}),
  };
};

template <>
struct Table<NodeSelectorShape> : TableOf<NodeSelectorShape> {
  static constexpr auto kFields = std::tuple{
      field("nodeSelectorTerms", &NodeSelectorShape::node_selector_terms,
            Opt<ListOf<Obj<NodeSelectorTerm>>>{}),
  };
};

// A NodeSelector kept as JSON; decoded strictly, its shape is checked too.
struct Selector : RawObject<NodeSelector> {
  static void decode(const Json& v, NodeSelector& out, const FieldPath& at, Decoder& d) {
    RawObject<NodeSelector>::decode(v, out, at, d);
    if (d.unknown() == Unknown::kRefuse && v.is_object()) {
      NodeSelectorShape shape;
      decodeObject<NodeSelectorShape>(v, shape, at, d);
    }
  }
};

template <>
struct Table<DeviceAttribute> : TableKeepingUnknown<DeviceAttribute> {
  static constexpr auto kFields = std::tuple{
      field("bool", &DeviceAttribute::bool_value, Opt<Bool>{}),
      field("bools", &DeviceAttribute::bools, Opt<ListOf<Bool>>{}, Feature::kListTypeAttributes),
      field("int", &DeviceAttribute::int_value, Opt<Int64>{}),
      field("ints", &DeviceAttribute::ints, Opt<ListOf<Int64>>{}, Feature::kListTypeAttributes),
      field("string", &DeviceAttribute::string_value, Opt<Str>{}),
      field("strings", &DeviceAttribute::strings, Opt<ListOf<Str>>{}, Feature::kListTypeAttributes),
      field("version", &DeviceAttribute::version_value, Opt<Str>{}),
      field("versions", &DeviceAttribute::versions, Opt<ListOf<Str>>{},
            Feature::kListTypeAttributes),
  };
};

template <>
struct Table<CapacityRequestPolicyRange> : TableKeepingUnknown<CapacityRequestPolicyRange> {
  static constexpr auto kFields = std::tuple{
      field("max", &CapacityRequestPolicyRange::max, Opt<Qty>{}),
      field("min", &CapacityRequestPolicyRange::min, Opt<Qty>{}),
      field("step", &CapacityRequestPolicyRange::step, Opt<Qty>{}),
  };
};

template <>
struct Table<CapacityRequestPolicy> : TableKeepingUnknown<CapacityRequestPolicy> {
  static constexpr auto kFields = std::tuple{
      // No omitempty in the Go type: unset is written as null.
      field("default", &CapacityRequestPolicy::default_value, Opt<Qty>{}, Omit::kNever),
      field("validRange", &CapacityRequestPolicy::valid_range,
            Opt<Obj<CapacityRequestPolicyRange>>{}),
      field("validValues", &CapacityRequestPolicy::valid_values, ListOf<Qty>{}),
  };
};

template <>
struct Table<DeviceCapacity> : TableKeepingUnknown<DeviceCapacity> {
  static constexpr auto kFields = std::tuple{
      field("requestPolicy", &DeviceCapacity::request_policy, Opt<Obj<CapacityRequestPolicy>>{},
            Feature::kConsumableCapacity),
      field("value", &DeviceCapacity::value, Qty{}, Omit::kNever),
  };
};

template <>
struct Table<Counter> : TableOf<Counter> {
  static constexpr auto kFields = std::tuple{
      field("value", &Counter::value, Qty{}, Omit::kNever),
  };
};

template <>
struct Table<CounterSet> : TableKeepingUnknown<CounterSet> {
  static constexpr auto kFields = std::tuple{
      field("counters", &CounterSet::counters, MapOf<Obj<Counter>>{}),
      field("name", &CounterSet::name, Str{}, Omit::kNever),
  };
};

template <>
struct Table<DeviceCounterConsumption> : TableKeepingUnknown<DeviceCounterConsumption> {
  static constexpr auto kFields = std::tuple{
      field("compatibilityGroups", &DeviceCounterConsumption::compatibility_groups, Strings{},
            Feature::kDeviceCompatibilityGroups),
      field("counterSet", &DeviceCounterConsumption::counter_set, Str{}, Omit::kNever),
      field("counters", &DeviceCounterConsumption::counters, MapOf<Obj<Counter>>{}),
  };
};

template <>
struct Table<DeviceTaint> : TableKeepingUnknown<DeviceTaint> {
  static constexpr auto kFields = std::tuple{
      field("effect", &DeviceTaint::effect, Str{}, Omit::kNever),
      field("key", &DeviceTaint::key, Str{}, Omit::kNever),
      field("timeAdded", &DeviceTaint::time_added, Opt<Str>{}),
      field("value", &DeviceTaint::value, Str{}),
  };
};

template <>
struct Table<NodeAllocatableMapping> : TableKeepingUnknown<NodeAllocatableMapping> {
  static constexpr auto kFields = std::tuple{
      field("capacityKey", &NodeAllocatableMapping::capacity_key, Opt<Str>{}),
      field("capacityMultiplier", &NodeAllocatableMapping::capacity_multiplier, Opt<Qty>{}),
      field("deviceMultiplier", &NodeAllocatableMapping::device_multiplier, Opt<Qty>{}),
  };
};

template <>
struct Table<NodeAllocatableOverhead> : TableKeepingUnknown<NodeAllocatableOverhead> {
  static constexpr auto kFields = std::tuple{
      field("perContainer", &NodeAllocatableOverhead::per_container, Opt<Qty>{}),
      field("perPod", &NodeAllocatableOverhead::per_pod, Opt<Qty>{}),
  };
};

template <>
struct Table<NodeAllocatableResource> : TableKeepingUnknown<NodeAllocatableResource> {
  static constexpr auto kFields = std::tuple{
      field("mapping", &NodeAllocatableResource::mapping, Opt<Obj<NodeAllocatableMapping>>{}),
      field("overhead", &NodeAllocatableResource::overhead, Opt<Obj<NodeAllocatableOverhead>>{}),
  };
};

template <>
struct Table<NodeAllocatableResourceMapping> : TableKeepingUnknown<NodeAllocatableResourceMapping> {
  static constexpr auto kFields = std::tuple{
      field("allocationMultiplier", &NodeAllocatableResourceMapping::allocation_multiplier,
            Opt<Qty>{}),
      field("capacityKey", &NodeAllocatableResourceMapping::capacity_key, Opt<Str>{}),
  };
};

template <>
struct Table<Device> : TableKeepingUnknown<Device> {
  static constexpr auto kFields = std::tuple{
      field("allNodes", &Device::all_nodes, Opt<Bool>{}, Feature::kPartitionableDevices),
      field("allowMultipleAllocations", &Device::allow_multiple_allocations, Opt<Bool>{},
            Feature::kConsumableCapacity),
      field("attributes", &Device::attributes, MapOf<Obj<DeviceAttribute>>{}),
      field("bindingConditions", &Device::binding_conditions, Strings{},
            Feature::kDeviceBindingConditions),
      field("bindingFailureConditions", &Device::binding_failure_conditions, Strings{},
            Feature::kDeviceBindingConditions),
      field("bindsToNode", &Device::binds_to_node, Opt<Bool>{}, Feature::kDeviceBindingConditions),
      field("capacity", &Device::capacity, MapOf<Obj<DeviceCapacity>>{}),
      field("consumesCounters", &Device::consumes_counters, ListOf<Obj<DeviceCounterConsumption>>{},
            Feature::kPartitionableDevices),
      field("name", &Device::name, Str{}, Omit::kNever),
      field("nodeAllocatableResourceMappings", &Device::node_allocatable_resource_mappings,
            MapOf<Obj<NodeAllocatableResourceMapping>>{},
            Feature::kNodeAllocatableResourceMappings),
      field("nodeAllocatableResources", &Device::node_allocatable_resources,
            MapOf<Obj<NodeAllocatableResource>>{}, Feature::kNodeAllocatableResources),
      field("nodeName", &Device::node_name, Opt<Str>{}, Feature::kPartitionableDevices),
      field("nodeSelector", &Device::node_selector, Opt<Selector>{},
            Feature::kPartitionableDevices),
      field("taints", &Device::taints, ListOf<Obj<DeviceTaint>>{}, Feature::kDeviceTaints),
  };
};

// A device held as a DeviceRef: decoded by the Device table, and made into its shared form only
// when it decoded without problems; written as the form's JSON.
struct Form {
  using Type = DeviceRef;
  static void decode(const Json& v, DeviceRef& out, const FieldPath& at, Decoder& d);
  // The SAX driver (codec_sax.h) hands over the device's text as decode() would dump it, so
  // that the intern lookup finds the same bytes.
  static constexpr bool kTakesText = true;
  static void decodeText(std::string_view json, DeviceRef& out, const FieldPath& at, Decoder& d);
  static bool isEmpty(const DeviceRef& ref) { return !ref; }
  // The form's bytes, spliced into the text.
  static void write(const DeviceRef& ref, JsonWriter& w) { w.raw(ref->json()); }
};

namespace detail {
// Visitors (the comparer's presence scan) see the typed device: decoded on the spot.
template <>
struct Children<Form> {
  template <typename Visitor>
  static void visit(const DeviceRef& ref, Visitor& visitor) {
    if (!ref) return;
    const Device device = ref.device();
    visitObjects<Device>(device, visitor);
  }
};
}  // namespace detail

template <>
struct Table<ResourcePool> : TableKeepingUnknown<ResourcePool> {
  static constexpr auto kFields = std::tuple{
      field("generation", &ResourcePool::generation, Int64{}, Omit::kNever),
      field("name", &ResourcePool::name, Str{}, Omit::kNever),
      field("resourceSliceCount", &ResourcePool::resource_slice_count, Int64{}, Omit::kNever),
  };
};

template <>
struct Table<ResourceSliceSpec> : TableKeepingUnknown<ResourceSliceSpec> {
  static constexpr auto kFields = std::tuple{
      field("allNodes", &ResourceSliceSpec::all_nodes, Opt<Bool>{}),
      field("devices", &ResourceSliceSpec::devices, ListOf<Form>{}),
      field("driver", &ResourceSliceSpec::driver, Str{}, Omit::kNever),
      field("nodeName", &ResourceSliceSpec::node_name, Opt<Str>{}),
      field("nodeSelector", &ResourceSliceSpec::node_selector, Opt<Selector>{}),
      field("partitionTypeAttribute", &ResourceSliceSpec::partition_type_attribute, Opt<Str>{},
            Feature::kPartitionableDevicesType),
      field("perDeviceNodeSelection", &ResourceSliceSpec::per_device_node_selection, Opt<Bool>{},
            Feature::kPartitionableDevices),
      field("pool", &ResourceSliceSpec::pool, Obj<ResourcePool>{}, Omit::kNever),
      field("sharedCounters", &ResourceSliceSpec::shared_counters, ListOf<Obj<CounterSet>>{},
            Feature::kPartitionableDevices),
      field("skipNodeOperations", &ResourceSliceSpec::skip_node_operations, Strings{},
            Feature::kOptionalNodeOperations),
  };
};

template <>
struct Table<ResourceSlice> : TableKeepingUnknown<ResourceSlice> {
  static constexpr std::string_view kApiVersion = kResourceApiVersion;
  static constexpr std::string_view kKind = "ResourceSlice";
  static constexpr auto kFields = std::tuple{
      field("metadata", &ResourceSlice::metadata, Obj<ObjectMeta>{}, Omit::kNever),
      field("spec", &ResourceSlice::spec, Obj<ResourceSliceSpec>{}, Omit::kNever),
  };
};

}  // namespace codec
}  // namespace rsc::client
