#include "client/resource_slice.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "client/codec_sax.h"
#include "common/clock.h"

namespace rsc::client {
namespace {

// ---- Semantic comparison ----------------------------------------------------

// True when a JSON value says nothing once the API server has marshalled it:
// null, an empty list, or an object all of whose members say nothing.
bool isAbsent(const Json& v) {
  if (v.is_null()) {
    return true;
  }
  if (v.is_array()) {
    return v.empty();
  }
  if (v.is_object()) {
    for (const auto& item : v) {
      if (!isAbsent(item)) {
        return false;
      }
    }
    return true;
  }
  return false;
}

// JSON equality that ignores members which say nothing, so that a value the
// server re-marshals without its empty omitempty fields still compares equal.
bool jsonSemanticEqual(const Json& a, const Json& b) {
  if (a.is_object() && b.is_object()) {
    for (const auto& [key, value] : a.items()) {
      auto other = b.find(key);
      if (other == b.end()) {
        if (!isAbsent(value)) {
          return false;
        }
      } else if (!jsonSemanticEqual(value, *other)) {
        return false;
      }
    }
    for (const auto& [key, value] : b.items()) {
      if (!a.contains(key) && !isAbsent(value)) {
        return false;
      }
    }
    return true;
  }
  if (a.is_array() && b.is_array()) {
    if (a.size() != b.size()) {
      return false;
    }
    for (size_t i = 0; i < a.size(); ++i) {
      if (!jsonSemanticEqual(a[i], b[i])) {
        return false;
      }
    }
    return true;
  }
  if (isAbsent(a) && isAbsent(b)) {
    return true;
  }
  return a == b;
}

bool nodeSelectorEqual(const std::optional<NodeSelector>& a, const std::optional<NodeSelector>& b) {
  if (a.has_value() != b.has_value()) {
    return false;
  }
  return !a.has_value() || jsonSemanticEqual(a->value, b->value);
}

bool timeEqual(const std::string& a, const std::string& b) {
  if (a == b) {
    return true;
  }
  std::optional<int64_t> sa = rfc3339Seconds(a);
  std::optional<int64_t> sb = rfc3339Seconds(b);
  return sa && sb && *sa == *sb;
}

// What a slice carries anywhere: the tagged fields that are set, and the
// names of captured unknown fields, each by the table (type) that has it.
class Presence {
 public:
  // Called by codec::visitObjects for the spec and every object in it.
  template <typename T>
  void object(const codec::OwnerOf<T>& value) {
    using Info = codec::TableInfo<T>;
    size_t row = 0;
    std::apply([&](const auto&... f) { (note<T>(f, value, row++), ...); }, Info::kFields);
    if constexpr (Info::kCaptures) {
      const Json& unknown = value.*codec::Table<T>::kUnknown;
      if (unknown.is_object()) {
        for (const auto& [key, member] : unknown.items()) {
          unknown_.emplace(type<T>(), key);
        }
      }
    }
  }

  template <typename T>
  bool has(std::string_view name) const {
    const size_t row = codec::TableInfo<T>::find(name);
    if (row == codec::TableInfo<T>::kSize) {
      std::abort();  // a comparer naming a field its table does not have
    }
    return fields_.contains({type<T>(), row});
  }

  template <typename T>
  bool hasUnknown(const std::string& key) const {
    return unknown_.contains({type<T>(), key});
  }

  FeatureSet features() const { return features_; }

 private:
  // One address per table stands for its type.
  template <typename T>
  static const void* type() {
    return &codec::TableInfo<T>::kNames;
  }

  template <typename T, typename Row>
  void note(const Row& f, const codec::OwnerOf<T>& value, size_t row) {
    using Codec = std::remove_cvref_t<decltype(f.codec)>;
    if (f.feature != Feature::kNone && !Codec::isEmpty(std::invoke(f.access, value))) {
      fields_.emplace(type<T>(), row);
      features_.set(static_cast<size_t>(f.feature));
    }
  }

  std::set<std::pair<const void*, size_t>> fields_;
  std::set<std::pair<const void*, std::string>> unknown_;
  FeatureSet features_;
};

// Compares desired with live, collecting the paths of dropped fields. Every
// method returns false at the first genuine difference.
class SemanticComparer {
 public:
  explicit SemanticComparer(const ResourceSliceSpec& live) : live_(live) {}

  std::vector<std::string>& dropped() { return dropped_; }

  bool spec(const ResourceSliceSpec& d, const ResourceSliceSpec& l) {
    FieldPath at("spec");
    if (d.driver != l.driver || !pool(d.pool, l.pool, at.field("pool")) ||
        d.node_name != l.node_name || !nodeSelectorEqual(d.node_selector, l.node_selector) ||
        d.all_nodes != l.all_nodes) {
      return false;
    }
    if (!optionalField<ResourceSliceSpec>(d.per_device_node_selection, l.per_device_node_selection,
                                          "perDeviceNodeSelection", at)) {
      return false;
    }
    if (!optionalField<ResourceSliceSpec>(d.partition_type_attribute, l.partition_type_attribute,
                                          "partitionTypeAttribute", at) ||
        !listField<ResourceSliceSpec>(d.skip_node_operations, l.skip_node_operations,
                                      "skipNodeOperations", at)) {
      return false;
    }
    if (!listField<ResourceSliceSpec>(
            d.shared_counters, l.shared_counters, "sharedCounters", at,
            [this](const CounterSet& a, const CounterSet& b, const FieldPath& item) {
              return a.name == b.name && a.counters == b.counters &&
                     unknown<CounterSet>(a.unknown, b.unknown, item);
            })) {
      return false;
    }
    if (d.devices.size() != l.devices.size()) {
      return false;
    }
    FieldPath devices = at.field("devices");
    for (size_t i = 0; i < d.devices.size(); ++i) {
      if (!device(d.devices[i], l.devices[i], devices.index(i))) {
        return false;
      }
    }
    return unknown<ResourceSliceSpec>(d.unknown, l.unknown, at);
  }

 private:
  // The tagged fields and unknown fields that live carries anywhere, worked
  // out on first use: a field that desired sets and live lacks counts as
  // dropped only when live carries none of that field at all, since the
  // server drops a gated field from the whole slice or not at all.
  const Presence& presence() {
    if (!presence_) {
      presence_.emplace();
      codec::visitObjects<ResourceSliceSpec>(live_, *presence_);
    }
    return *presence_;
  }

  // desired sets the tagged field `name` of a T that live lacks: dropped,
  // unless live shows the field elsewhere (then the server kept it, and this
  // is a difference).
  template <typename T>
  bool drop(std::string_view name, const FieldPath& at) {
    if (presence().has<T>(name)) {
      return false;
    }
    dropped_.push_back(at.field(name).toString());
    return true;
  }

  template <typename T, typename V>
  bool optionalField(const std::optional<V>& d, const std::optional<V>& l, std::string_view name,
                     const FieldPath& at) {
    if (d.has_value() && !l.has_value()) {
      return drop<T>(name, at);
    }
    return d == l;
  }

  template <typename T, typename V, typename Equal>
  bool listField(const std::vector<V>& d, const std::vector<V>& l, std::string_view name,
                 const FieldPath& at, Equal equal) {
    if (!d.empty() && l.empty()) {
      return drop<T>(name, at);
    }
    if (d.size() != l.size()) {
      return false;
    }
    FieldPath list = at.field(name);
    for (size_t i = 0; i < d.size(); ++i) {
      if (!equal(d[i], l[i], list.index(i))) {
        return false;
      }
    }
    return true;
  }

  template <typename T, typename V>
  bool listField(const std::vector<V>& d, const std::vector<V>& l, std::string_view name,
                 const FieldPath& at) {
    return listField<T>(d, l, name, at,
                        [](const V& a, const V& b, const FieldPath& /*unused*/) { return a == b; });
  }

  // A tagged map: dropped when desired has entries and live none, else equal entry by entry.
  template <typename T, typename V>
  bool mapField(const std::map<std::string, V>& d, const std::map<std::string, V>& l,
                std::string_view name, const FieldPath& at) {
    if (!d.empty() && l.empty()) {
      return drop<T>(name, at);
    }
    return d == l;
  }

  // An empty list is written as nothing, so it equals an unset one.
  template <typename V>
  bool listAttribute(const std::optional<std::vector<V>>& d, const std::optional<std::vector<V>>& l,
                     std::string_view name, const FieldPath& at) {
    bool d_set = d && !d->empty();
    bool l_set = l && !l->empty();
    if (d_set && !l_set) {
      return drop<DeviceAttribute>(name, at);
    }
    return d_set == l_set && (!d_set || *d == *l);
  }

  // Unknown fields: one that desired sets and live lacks was dropped by a
  // server that does not know it. One that only live has is not compared: a
  // field this model does not know may be a server default, and comparing it
  // would rewrite the slice forever.
  template <typename T>
  bool unknown(const Json& d, const Json& l, const FieldPath& at) {
    if (!d.is_object() || d.empty()) {
      return true;
    }
    for (const auto& [key, value] : d.items()) {
      auto other = l.is_object() ? l.find(key) : l.end();
      if (l.is_object() && other != l.end()) {
        if (!jsonSemanticEqual(value, *other)) {
          return false;
        }
      } else if (!isAbsent(value)) {
        if (presence().hasUnknown<T>(key)) {
          return false;
        }
        dropped_.push_back(at.field(key).toString());
      }
    }
    return true;
  }

  bool attribute(const DeviceAttribute& d, const DeviceAttribute& l, const FieldPath& at) {
    if (d.int_value != l.int_value || d.bool_value != l.bool_value ||
        d.string_value != l.string_value || d.version_value != l.version_value) {
      return false;
    }
    return listAttribute(d.ints, l.ints, "ints", at) &&
           listAttribute(d.bools, l.bools, "bools", at) &&
           listAttribute(d.strings, l.strings, "strings", at) &&
           listAttribute(d.versions, l.versions, "versions", at) &&
           unknown<DeviceAttribute>(d.unknown, l.unknown, at);
  }

  bool requestPolicy(const CapacityRequestPolicy& d, const CapacityRequestPolicy& l,
                     const FieldPath& at) {
    if (d.valid_range.has_value() != l.valid_range.has_value()) {
      return false;
    }
    if (d.valid_range) {
      const CapacityRequestPolicyRange& dr = *d.valid_range;
      const CapacityRequestPolicyRange& lr = *l.valid_range;
      if (dr.min != lr.min || dr.max != lr.max || dr.step != lr.step ||
          !unknown<CapacityRequestPolicyRange>(dr.unknown, lr.unknown, at.field("validRange"))) {
        return false;
      }
    }
    return d.default_value == l.default_value && d.valid_values == l.valid_values &&
           unknown<CapacityRequestPolicy>(d.unknown, l.unknown, at);
  }

  bool capacity(const DeviceCapacity& d, const DeviceCapacity& l, const FieldPath& at) {
    if (d.value != l.value) {
      return false;
    }
    FieldPath policy = at.field("requestPolicy");
    if (d.request_policy && !l.request_policy) {
      if (!drop<DeviceCapacity>("requestPolicy", at)) {
        return false;
      }
    } else if (d.request_policy.has_value() != l.request_policy.has_value() ||
               (d.request_policy && !requestPolicy(*d.request_policy, *l.request_policy, policy))) {
      return false;
    }
    return unknown<DeviceCapacity>(d.unknown, l.unknown, at);
  }

  static bool taint(SemanticComparer& self, const DeviceTaint& d, const DeviceTaint& l,
                    const FieldPath& at) {
    if (d.key != l.key || d.value != l.value || d.effect != l.effect) {
      return false;
    }
    // Unset in desired: the server fills in the time, so any value is fine.
    if (d.time_added && (!l.time_added || !timeEqual(*d.time_added, *l.time_added))) {
      return false;
    }
    return self.unknown<DeviceTaint>(d.unknown, l.unknown, at);
  }

  bool pool(const ResourcePool& d, const ResourcePool& l, const FieldPath& at) {
    return d.name == l.name && d.generation == l.generation &&
           d.resource_slice_count == l.resource_slice_count &&
           unknown<ResourcePool>(d.unknown, l.unknown, at);
  }

  // Equal digests: equal JSON, so equal with nothing dropped. Otherwise the typed devices are
  // compared field by field.
  bool device(const DeviceRef& d, const DeviceRef& l, const FieldPath& at) {
    if (d == l) {
      return true;
    }
    if (!d || !l || d->name() != l->name()) {
      return false;
    }
    return device(d.device(), l.device(), at);
  }

  bool device(const Device& d, const Device& l, const FieldPath& at) {
    if (d.name != l.name) {
      return false;
    }

    // Attributes and capacities: the same names, each the same.
    if (d.attributes.size() != l.attributes.size() || d.capacity.size() != l.capacity.size()) {
      return false;
    }
    FieldPath attributes = at.field("attributes");
    for (auto di = d.attributes.begin(), li = l.attributes.begin(); di != d.attributes.end();
         ++di, ++li) {
      if (di->first != li->first || !attribute(di->second, li->second, attributes.key(di->first))) {
        return false;
      }
    }
    FieldPath capacities = at.field("capacity");
    for (auto di = d.capacity.begin(), li = l.capacity.begin(); di != d.capacity.end();
         ++di, ++li) {
      if (di->first != li->first || !capacity(di->second, li->second, capacities.key(di->first))) {
        return false;
      }
    }

    // Tagged fields.
    if (!optionalField<Device>(d.node_name, l.node_name, "nodeName", at)) {
      return false;
    }
    if (d.node_selector && !l.node_selector) {
      if (!drop<Device>("nodeSelector", at)) {
        return false;
      }
    } else if (!nodeSelectorEqual(d.node_selector, l.node_selector)) {
      return false;
    }
    const auto consumption = [this](const DeviceCounterConsumption& a,
                                    const DeviceCounterConsumption& b, const FieldPath& item) {
      return a.counter_set == b.counter_set && a.counters == b.counters &&
             listField<DeviceCounterConsumption>(a.compatibility_groups, b.compatibility_groups,
                                                 "compatibilityGroups", item) &&
             unknown<DeviceCounterConsumption>(a.unknown, b.unknown, item);
    };
    const auto taint = [this](const DeviceTaint& a, const DeviceTaint& b, const FieldPath& item) {
      return SemanticComparer::taint(*this, a, b, item);
    };
    return optionalField<Device>(d.all_nodes, l.all_nodes, "allNodes", at) &&
           listField<Device>(d.consumes_counters, l.consumes_counters, "consumesCounters", at,
                             consumption) &&
           listField<Device>(d.taints, l.taints, "taints", at, taint) &&
           optionalField<Device>(d.binds_to_node, l.binds_to_node, "bindsToNode", at) &&
           listField<Device>(d.binding_conditions, l.binding_conditions, "bindingConditions", at) &&
           listField<Device>(d.binding_failure_conditions, l.binding_failure_conditions,
                             "bindingFailureConditions", at) &&
           optionalField<Device>(d.allow_multiple_allocations, l.allow_multiple_allocations,
                                 "allowMultipleAllocations", at) &&
           mapField<Device>(d.node_allocatable_resources, l.node_allocatable_resources,
                            "nodeAllocatableResources", at) &&
           mapField<Device>(d.node_allocatable_resource_mappings,
                            l.node_allocatable_resource_mappings, "nodeAllocatableResourceMappings",
                            at) &&
           unknown<Device>(d.unknown, l.unknown, at);
  }

  const ResourceSliceSpec& live_;
  std::optional<Presence> presence_;
  std::vector<std::string> dropped_;
};

}  // namespace

bool Device::usesAdvancedFeatures() const {
  if (!taints.empty() || !consumes_counters.empty()) {
    return true;
  }
  for (const auto& [name, a] : attributes) {
    if (a.ints || a.bools || a.strings || a.versions) {
      return true;
    }
  }
  return false;
}

Json toJson(const Device& device) { return codec::toJson<Device>(device); }

StatusOr<Device> deviceFromJson(const Json& j, const std::string& path) {
  return codec::decode<Device>(j, path);
}

Json toJson(const CounterSet& set) { return codec::toJson<CounterSet>(set); }

StatusOr<CounterSet> counterSetFromJson(const Json& j, const std::string& path) {
  return codec::decode<CounterSet>(j, path);
}

Json toJson(const ResourceSlice& slice) { return codec::toJson<ResourceSlice>(slice); }

std::string toJsonText(const ResourceSlice& slice) {
  return codec::toJsonText<ResourceSlice>(slice);
}

StatusOr<ResourceSlice> resourceSliceFromJson(const Json& j) {
  return codec::decode<ResourceSlice>(j, "");
}

StatusOr<ResourceSlice> resourceSliceFromText(std::string_view text) {
  return codec::decodeText<ResourceSlice>(text, "");
}

StatusOr<ResourceSlice> resourceSliceFromText(std::string_view text, const HeldSlice& held) {
  if (!held) return resourceSliceFromText(text);
  codec::SaxDecoder<ResourceSlice> decoder;
  std::shared_ptr<const ResourceSlice> same;
  decoder.stopBefore("spec", [&](const ResourceSlice& read) {
    const ObjectMeta& meta = read.metadata;
    if (meta.name.empty() || meta.uid.empty() || meta.resource_version.empty()) return false;
    same = held(meta.name);
    return same && same->metadata.uid == meta.uid &&
           same->metadata.resource_version == meta.resource_version;
  });
  StatusOr<ResourceSlice> slice = decoder.decode(text);
  if (!slice.ok() || !decoder.stopped()) return slice;
  // Members after the spec were not read either; the held state has them all.
  slice->spec = same->spec;
  slice->unknown = same->unknown;
  return slice;
}

FeatureSet featuresOf(const Device& device) {
  Presence presence;
  codec::visitObjects<Device>(device, presence);
  return presence.features();
}

namespace codec {

void Form::decode(const Json& v, DeviceRef& out, const FieldPath& at, Decoder& d) {
  // An object read from the API server whose device is one we hold already
  // (the answer to our write, its watch event): its bytes find the form,
  // without a typed decoding and a second encoding. Pushed devices are
  // always decoded, for their problems.
  if (d.unknown() == Unknown::kCapture && v.is_object()) {
    if (DeviceRef known =
            DeviceRef::interned(v.dump(-1, ' ', false, Json::error_handler_t::replace))) {
      out = std::move(known);
      return;
    }
  }
  Device device;
  const size_t before = d.failures();
  decodeObject<Device>(v, device, at, d);
  if (d.failures() == before) out = DeviceRef(device);
}

void Form::decodeText(std::string_view json, DeviceRef& out, const FieldPath& at, Decoder& d) {
  // As decode(): held bytes need no typed decoding.
  if (d.unknown() == Unknown::kCapture && json.starts_with('{')) {
    if (DeviceRef known = DeviceRef::interned(json)) {
      out = std::move(known);
      return;
    }
  }
  Device device;
  const size_t before = d.failures();
  decodeTextInto<Device>(json, at, device, d);
  if (d.failures() == before) out = DeviceRef(device);
}

}  // namespace codec

FeatureSet featuresOf(const ResourceSliceSpec& spec) {
  Presence presence;
  codec::visitObjects<ResourceSliceSpec>(spec, presence);
  return presence.features();
}

bool semanticEqual(const ResourceSliceSpec& desired, const ResourceSliceSpec& live,
                   std::vector<std::string>* dropped) {
  SemanticComparer comparer(live);
  if (!comparer.spec(desired, live)) {
    return false;
  }
  if (dropped != nullptr) {
    for (std::string& path : comparer.dropped()) {
      dropped->push_back(std::move(path));
    }
  }
  return true;
}

// The members of DeviceForm and DeviceRef that take or give a typed Device:
// here, with the device's codec, so that device_form.cc does not depend on it.

Device DeviceForm::decode() const {
  StatusOr<Device> device = deviceFromJson(Json::parse(parts_.json), "");
  if (!device.ok()) {
    // The JSON was encoded from a typed device by the same tables.
    std::fprintf(stderr, "internal error: a device form does not decode: %s\n",
                 device.status().message().c_str());
    std::abort();
  }
  return *std::move(device);
}

DeviceRef::DeviceRef(const Device& device) {
  DeviceForm::Parts parts;
  parts.name = device.name;
  parts.json = codec::toJsonText<Device>(device);
  parts.features = featuresOf(device);
  parts.advanced = device.usesAdvancedFeatures();
  parts.consumes_counters = !device.consumes_counters.empty();
  parts.placed = device.node_name || device.node_selector || device.all_nodes;
  form_ = intern(std::move(parts));
}

const Device DeviceRef::device() const { return form_->decode(); }

void DeviceRef::edit(const std::function<void(Device&)>& change) {
  Device device = form_->decode();
  change(device);
  *this = DeviceRef(device);
}

void editDevices(std::vector<DeviceRef>& devices, const std::function<void(Device&)>& change) {
  for (DeviceRef& ref : devices) ref.edit(change);
}

std::vector<Device> decodeAll(const std::vector<DeviceRef>& devices) {
  std::vector<Device> out;
  out.reserve(devices.size());
  for (const DeviceRef& ref : devices) out.push_back(ref->decode());
  return out;
}

}  // namespace rsc::client
