#include "client/resource_slice.h"

#include <array>
#include <chrono>
#include <set>
#include <string>
#include <string_view>
#include <utility>

namespace rsc::client {
namespace {

// ---- Decoding ---------------------------------------------------------------

// A quantity is a string on the wire; the API server also accepts a bare
// JSON number, so a driver may send one.
Status readQuantity(const Json& v, const FieldPath& at, Quantity* out) {
  if (v.is_null()) {
    return okStatus();
  }
  StatusOr<Quantity> parsed = [&]() -> StatusOr<Quantity> {
    if (v.is_string()) {
      return Quantity::parse(v.get_ref<const std::string&>());
    }
    if (v.is_number()) {
      return Quantity::parse(v.dump());
    }
    return invalidArgument("must be a quantity string such as \"40Gi\"");
  }();
  if (!parsed.ok()) {
    return fieldError(at, parsed.status().message());
  }
  *out = std::move(parsed).value();
  return okStatus();
}

Status readNodeSelector(const Json& v, const FieldPath& at, NodeSelector* out) {
  if (v.is_null()) {
    return okStatus();
  }
  RETURN_IF_ERROR(expectObject(v, at));
  out->value = v;
  return okStatus();
}

template <typename T>
using ElementReader = Status (*)(const Json&, const FieldPath&, T*);

// Reads a JSON list, each element with `read`.
template <typename T>
Status readList(const Json& v, const FieldPath& at, std::vector<T>* out, ElementReader<T> read) {
  if (v.is_null()) {
    return okStatus();
  }
  if (!v.is_array()) {
    return fieldError(at, "must be a list");
  }
  out->clear();
  out->reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i].is_null()) {
      return fieldError(at.index(i), "must not be null");
    }
    T item{};  // not read in place: std::vector<bool> has no element addresses
    RETURN_IF_ERROR(read(v[i], at.index(i), &item));
    out->push_back(std::move(item));
  }
  return okStatus();
}

template <typename T>
Status readOptionalList(const Json& v, const FieldPath& at, std::optional<std::vector<T>>* out,
                        ElementReader<T> read) {
  if (v.is_null()) {
    return okStatus();
  }
  std::vector<T> items;
  RETURN_IF_ERROR(readList(v, at, &items, read));
  *out = std::move(items);
  return okStatus();
}

// Reads a JSON object keyed by name, each value with `read`.
template <typename T>
Status readMap(const Json& v, const FieldPath& at, std::map<std::string, T>* out,
               ElementReader<T> read) {
  if (v.is_null()) {
    return okStatus();
  }
  if (!v.is_object()) {
    return fieldError(at, "must be an object");
  }
  out->clear();
  for (const auto& [key, value] : v.items()) {
    FieldPath item_path = at.key(key);
    if (value.is_null()) {
      return fieldError(item_path, "must not be null");
    }
    T item{};
    RETURN_IF_ERROR(read(value, item_path, &item));
    out->emplace_hint(out->end(), key, std::move(item));
  }
  return okStatus();
}

Status readStrictBool(const Json& v, const FieldPath& at, bool* out) {
  if (!v.is_boolean()) {
    return fieldError(at, "must be a boolean");
  }
  *out = v.get<bool>();
  return okStatus();
}

Status readStrictString(const Json& v, const FieldPath& at, std::string* out) {
  if (!v.is_string()) {
    return fieldError(at, "must be a string");
  }
  *out = v.get_ref<const std::string&>();
  return okStatus();
}

Status readCounter(const Json& j, const FieldPath& at, Counter* out) {
  RETURN_IF_ERROR(expectObject(j, at));
  if (auto it = j.find("value"); it != j.end()) {
    RETURN_IF_ERROR(readQuantity(*it, at.field("value"), &out->value));
  }
  return okStatus();
}

Status readAttribute(const Json& j, const FieldPath& at, DeviceAttribute* out) {
  RETURN_IF_ERROR(expectObject(j, at));
  for (const auto& [key, value] : j.items()) {
    FieldPath f = at.field(key);
    if (key == "int") {
      RETURN_IF_ERROR(readOptional(value, f, &out->int_value, readInt64));
    } else if (key == "bool") {
      RETURN_IF_ERROR(readOptional(value, f, &out->bool_value, readBool));
    } else if (key == "string") {
      RETURN_IF_ERROR(readOptional(value, f, &out->string_value, readString));
    } else if (key == "version") {
      RETURN_IF_ERROR(readOptional(value, f, &out->version_value, readString));
    } else if (key == "ints") {
      RETURN_IF_ERROR(readOptionalList<int64_t>(value, f, &out->ints, readInt64));
    } else if (key == "bools") {
      RETURN_IF_ERROR(readOptionalList<bool>(value, f, &out->bools, readStrictBool));
    } else if (key == "strings") {
      RETURN_IF_ERROR(readOptionalList<std::string>(value, f, &out->strings, readStrictString));
    } else if (key == "versions") {
      RETURN_IF_ERROR(readOptionalList<std::string>(value, f, &out->versions, readStrictString));
    } else {
      out->unknown[key] = value;
    }
  }
  return okStatus();
}

Status readRange(const Json& j, const FieldPath& at, CapacityRequestPolicyRange* out) {
  RETURN_IF_ERROR(expectObject(j, at));
  for (const auto& [key, value] : j.items()) {
    FieldPath f = at.field(key);
    if (key == "min") {
      RETURN_IF_ERROR(readOptional(value, f, &out->min, readQuantity));
    } else if (key == "max") {
      RETURN_IF_ERROR(readOptional(value, f, &out->max, readQuantity));
    } else if (key == "step") {
      RETURN_IF_ERROR(readOptional(value, f, &out->step, readQuantity));
    }
  }
  return okStatus();
}

Status readRequestPolicy(const Json& j, const FieldPath& at, CapacityRequestPolicy* out) {
  RETURN_IF_ERROR(expectObject(j, at));
  for (const auto& [key, value] : j.items()) {
    FieldPath f = at.field(key);
    if (key == "default") {
      RETURN_IF_ERROR(readOptional(value, f, &out->default_value, readQuantity));
    } else if (key == "validValues") {
      RETURN_IF_ERROR(readList<Quantity>(value, f, &out->valid_values, readQuantity));
    } else if (key == "validRange") {
      RETURN_IF_ERROR(readOptional(value, f, &out->valid_range, readRange));
    } else {
      out->unknown[key] = value;
    }
  }
  return okStatus();
}

Status readCapacity(const Json& j, const FieldPath& at, DeviceCapacity* out) {
  RETURN_IF_ERROR(expectObject(j, at));
  for (const auto& [key, value] : j.items()) {
    FieldPath f = at.field(key);
    if (key == "value") {
      RETURN_IF_ERROR(readQuantity(value, f, &out->value));
    } else if (key == "requestPolicy") {
      RETURN_IF_ERROR(readOptional(value, f, &out->request_policy, readRequestPolicy));
    } else {
      out->unknown[key] = value;
    }
  }
  return okStatus();
}

Status readConsumption(const Json& j, const FieldPath& at, DeviceCounterConsumption* out) {
  RETURN_IF_ERROR(expectObject(j, at));
  for (const auto& [key, value] : j.items()) {
    FieldPath f = at.field(key);
    if (key == "counterSet") {
      RETURN_IF_ERROR(readString(value, f, &out->counter_set));
    } else if (key == "counters") {
      RETURN_IF_ERROR(readMap<Counter>(value, f, &out->counters, readCounter));
    }
  }
  return okStatus();
}

Status readTaint(const Json& j, const FieldPath& at, DeviceTaint* out) {
  RETURN_IF_ERROR(expectObject(j, at));
  for (const auto& [key, value] : j.items()) {
    FieldPath f = at.field(key);
    if (key == "key") {
      RETURN_IF_ERROR(readString(value, f, &out->key));
    } else if (key == "value") {
      RETURN_IF_ERROR(readString(value, f, &out->value));
    } else if (key == "effect") {
      RETURN_IF_ERROR(readString(value, f, &out->effect));
    } else if (key == "timeAdded") {
      RETURN_IF_ERROR(readOptional(value, f, &out->time_added, readString));
    }
  }
  return okStatus();
}

Status readDevice(const Json& j, const FieldPath& at, Device* out) {
  RETURN_IF_ERROR(expectObject(j, at));
  for (const auto& [key, value] : j.items()) {
    FieldPath f = at.field(key);
    if (key == "name") {
      RETURN_IF_ERROR(readString(value, f, &out->name));
    } else if (key == "attributes") {
      RETURN_IF_ERROR(readMap<DeviceAttribute>(value, f, &out->attributes, readAttribute));
    } else if (key == "capacity") {
      RETURN_IF_ERROR(readMap<DeviceCapacity>(value, f, &out->capacity, readCapacity));
    } else if (key == "consumesCounters") {
      RETURN_IF_ERROR(
          readList<DeviceCounterConsumption>(value, f, &out->consumes_counters, readConsumption));
    } else if (key == "nodeName") {
      RETURN_IF_ERROR(readOptional(value, f, &out->node_name, readString));
    } else if (key == "nodeSelector") {
      RETURN_IF_ERROR(readOptional(value, f, &out->node_selector, readNodeSelector));
    } else if (key == "allNodes") {
      RETURN_IF_ERROR(readOptional(value, f, &out->all_nodes, readBool));
    } else if (key == "taints") {
      RETURN_IF_ERROR(readList<DeviceTaint>(value, f, &out->taints, readTaint));
    } else if (key == "bindsToNode") {
      RETURN_IF_ERROR(readOptional(value, f, &out->binds_to_node, readBool));
    } else if (key == "bindingConditions") {
      RETURN_IF_ERROR(readStringList(value, f, &out->binding_conditions));
    } else if (key == "bindingFailureConditions") {
      RETURN_IF_ERROR(readStringList(value, f, &out->binding_failure_conditions));
    } else if (key == "allowMultipleAllocations") {
      RETURN_IF_ERROR(readOptional(value, f, &out->allow_multiple_allocations, readBool));
    } else {
      out->unknown[key] = value;
    }
  }
  return okStatus();
}

Status readCounterSet(const Json& j, const FieldPath& at, CounterSet* out) {
  RETURN_IF_ERROR(expectObject(j, at));
  for (const auto& [key, value] : j.items()) {
    FieldPath f = at.field(key);
    if (key == "name") {
      RETURN_IF_ERROR(readString(value, f, &out->name));
    } else if (key == "counters") {
      RETURN_IF_ERROR(readMap<Counter>(value, f, &out->counters, readCounter));
    }
  }
  return okStatus();
}

Status readPool(const Json& j, const FieldPath& at, ResourcePool* out) {
  RETURN_IF_ERROR(expectObject(j, at));
  for (const auto& [key, value] : j.items()) {
    FieldPath f = at.field(key);
    if (key == "name") {
      RETURN_IF_ERROR(readString(value, f, &out->name));
    } else if (key == "generation") {
      RETURN_IF_ERROR(readInt64(value, f, &out->generation));
    } else if (key == "resourceSliceCount") {
      RETURN_IF_ERROR(readInt64(value, f, &out->resource_slice_count));
    }
  }
  return okStatus();
}

Status readSpec(const Json& j, const FieldPath& at, ResourceSliceSpec* out) {
  RETURN_IF_ERROR(expectObject(j, at));
  for (const auto& [key, value] : j.items()) {
    FieldPath f = at.field(key);
    if (key == "driver") {
      RETURN_IF_ERROR(readString(value, f, &out->driver));
    } else if (key == "pool") {
      if (!value.is_null()) {
        RETURN_IF_ERROR(readPool(value, f, &out->pool));
      }
    } else if (key == "nodeName") {
      RETURN_IF_ERROR(readOptional(value, f, &out->node_name, readString));
    } else if (key == "nodeSelector") {
      RETURN_IF_ERROR(readOptional(value, f, &out->node_selector, readNodeSelector));
    } else if (key == "allNodes") {
      RETURN_IF_ERROR(readOptional(value, f, &out->all_nodes, readBool));
    } else if (key == "perDeviceNodeSelection") {
      RETURN_IF_ERROR(readOptional(value, f, &out->per_device_node_selection, readBool));
    } else if (key == "devices") {
      RETURN_IF_ERROR(readList<Device>(value, f, &out->devices, readDevice));
    } else if (key == "sharedCounters") {
      RETURN_IF_ERROR(readList<CounterSet>(value, f, &out->shared_counters, readCounterSet));
    } else {
      out->unknown[key] = value;
    }
  }
  return okStatus();
}

// ---- Encoding ---------------------------------------------------------------
// Field by field as the API's Go types marshal them: omitempty fields are
// left out when empty or unset; required ones are always written.

Json startWith(const Json& unknown) { return unknown.is_object() ? unknown : Json::object(); }

Json counterMapToJson(const std::map<std::string, Counter>& counters) {
  Json j = Json::object();
  for (const auto& [name, counter] : counters) {
    j[name] = {{"value", counter.value.text()}};
  }
  return j;
}

Json attributeToJson(const DeviceAttribute& a) {
  Json j = startWith(a.unknown);
  if (a.int_value) {
    j["int"] = *a.int_value;
  }
  if (a.bool_value) {
    j["bool"] = *a.bool_value;
  }
  if (a.string_value) {
    j["string"] = *a.string_value;
  }
  if (a.version_value) {
    j["version"] = *a.version_value;
  }
  if (a.ints && !a.ints->empty()) {
    j["ints"] = *a.ints;
  }
  if (a.bools && !a.bools->empty()) {
    j["bools"] = *a.bools;
  }
  if (a.strings && !a.strings->empty()) {
    j["strings"] = *a.strings;
  }
  if (a.versions && !a.versions->empty()) {
    j["versions"] = *a.versions;
  }
  return j;
}

Json requestPolicyToJson(const CapacityRequestPolicy& p) {
  Json j = startWith(p.unknown);
  // "default" has no omitempty in the Go type: unset is written as null.
  j["default"] = p.default_value ? Json(p.default_value->text()) : Json(nullptr);
  if (!p.valid_values.empty()) {
    Json values = Json::array();
    for (const Quantity& q : p.valid_values) {
      values.push_back(q.text());
    }
    j["validValues"] = std::move(values);
  }
  if (p.valid_range) {
    Json range = Json::object();
    if (p.valid_range->min) {
      range["min"] = p.valid_range->min->text();
    }
    if (p.valid_range->max) {
      range["max"] = p.valid_range->max->text();
    }
    if (p.valid_range->step) {
      range["step"] = p.valid_range->step->text();
    }
    j["validRange"] = std::move(range);
  }
  return j;
}

Json capacityToJson(const DeviceCapacity& c) {
  Json j = startWith(c.unknown);
  j["value"] = c.value.text();
  if (c.request_policy) {
    j["requestPolicy"] = requestPolicyToJson(*c.request_policy);
  }
  return j;
}

Json taintToJson(const DeviceTaint& t) {
  Json j = {{"key", t.key}, {"effect", t.effect}};
  if (!t.value.empty()) {
    j["value"] = t.value;
  }
  if (t.time_added) {
    j["timeAdded"] = *t.time_added;
  }
  return j;
}

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

// Fields the API server drops when their feature gate is off.
enum class Gated : unsigned {
  kSharedCounters,
  kPerDeviceNodeSelection,
  kConsumesCounters,
  kDeviceNodeName,
  kDeviceNodeSelector,
  kDeviceAllNodes,
  kTaints,
  kBindsToNode,
  kBindingConditions,
  kBindingFailureConditions,
  kAllowMultipleAllocations,
  kRequestPolicy,
  kInts,
  kBools,
  kStrings,
  kVersions,
};

// Where an unknown field sits, for the same purpose.
enum class Level { kSpec, kDevice, kAttribute, kCapacity, kRequestPolicy };

// What the live slice carries anywhere, worked out on first use: a field that
// desired sets and live lacks counts as dropped only when live carries none
// of that field at all, since the server drops a gated field from the whole
// slice or not at all.
class LivePresence {
 public:
  explicit LivePresence(const ResourceSliceSpec& live) : live_(live) {}

  bool has(Gated field) {
    scan();
    return (bits_ >> static_cast<unsigned>(field)) & 1U;
  }
  bool hasUnknown(Level level, const std::string& key) {
    scan();
    return unknown_[static_cast<size_t>(level)].contains(key);
  }

 private:
  void set(Gated field) { bits_ |= 1U << static_cast<unsigned>(field); }
  void addUnknown(Level level, const Json& unknown) {
    if (!unknown.is_object()) {
      return;
    }
    for (const auto& [key, value] : unknown.items()) {
      unknown_[static_cast<size_t>(level)].insert(key);
    }
  }

  void scan() {
    if (scanned_) {
      return;
    }
    scanned_ = true;
    if (!live_.shared_counters.empty()) {
      set(Gated::kSharedCounters);
    }
    if (live_.per_device_node_selection) {
      set(Gated::kPerDeviceNodeSelection);
    }
    addUnknown(Level::kSpec, live_.unknown);
    for (const Device& d : live_.devices) {
      if (!d.consumes_counters.empty()) {
        set(Gated::kConsumesCounters);
      }
      if (d.node_name) {
        set(Gated::kDeviceNodeName);
      }
      if (d.node_selector) {
        set(Gated::kDeviceNodeSelector);
      }
      if (d.all_nodes) {
        set(Gated::kDeviceAllNodes);
      }
      if (!d.taints.empty()) {
        set(Gated::kTaints);
      }
      if (d.binds_to_node) {
        set(Gated::kBindsToNode);
      }
      if (!d.binding_conditions.empty()) {
        set(Gated::kBindingConditions);
      }
      if (!d.binding_failure_conditions.empty()) {
        set(Gated::kBindingFailureConditions);
      }
      if (d.allow_multiple_allocations) {
        set(Gated::kAllowMultipleAllocations);
      }
      addUnknown(Level::kDevice, d.unknown);
      for (const auto& [name, a] : d.attributes) {
        if (a.ints && !a.ints->empty()) {
          set(Gated::kInts);
        }
        if (a.bools && !a.bools->empty()) {
          set(Gated::kBools);
        }
        if (a.strings && !a.strings->empty()) {
          set(Gated::kStrings);
        }
        if (a.versions && !a.versions->empty()) {
          set(Gated::kVersions);
        }
        addUnknown(Level::kAttribute, a.unknown);
      }
      for (const auto& [name, c] : d.capacity) {
        if (c.request_policy) {
          set(Gated::kRequestPolicy);
          addUnknown(Level::kRequestPolicy, c.request_policy->unknown);
        }
        addUnknown(Level::kCapacity, c.unknown);
      }
    }
  }

  const ResourceSliceSpec& live_;
  bool scanned_ = false;
  unsigned bits_ = 0;
  std::array<std::set<std::string, std::less<>>, 5> unknown_;
};

// Compares desired with live, collecting the paths of dropped fields. Every
// method returns false at the first genuine difference.
class SemanticComparer {
 public:
  explicit SemanticComparer(const ResourceSliceSpec& live) : presence_(live) {}

  std::vector<std::string>& dropped() { return dropped_; }

  bool spec(const ResourceSliceSpec& d, const ResourceSliceSpec& l) {
    FieldPath at("spec");
    if (d.driver != l.driver || d.pool != l.pool || d.node_name != l.node_name ||
        !nodeSelectorEqual(d.node_selector, l.node_selector) || d.all_nodes != l.all_nodes) {
      return false;
    }
    if (!optionalField(d.per_device_node_selection, l.per_device_node_selection,
                       Gated::kPerDeviceNodeSelection, at.field("perDeviceNodeSelection"))) {
      return false;
    }
    if (!listField(d.shared_counters, l.shared_counters, Gated::kSharedCounters,
                   at.field("sharedCounters"))) {
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
    return unknown(d.unknown, l.unknown, Level::kSpec, at);
  }

 private:
  // desired sets a gated field that live lacks: dropped, unless live shows
  // the field elsewhere (then the server kept it, and this is a difference).
  bool drop(Gated field, const FieldPath& at) {
    if (presence_.has(field)) {
      return false;
    }
    dropped_.push_back(at.toString());
    return true;
  }

  template <typename T>
  bool optionalField(const std::optional<T>& d, const std::optional<T>& l, Gated field,
                     const FieldPath& at) {
    if (d.has_value() && !l.has_value()) {
      return drop(field, at);
    }
    return d == l;
  }

  template <typename T>
  bool listField(const std::vector<T>& d, const std::vector<T>& l, Gated field,
                 const FieldPath& at) {
    if (!d.empty() && l.empty()) {
      return drop(field, at);
    }
    return d == l;
  }

  // An empty list is written as nothing, so it equals an unset one.
  template <typename T>
  bool listAttribute(const std::optional<std::vector<T>>& d, const std::optional<std::vector<T>>& l,
                     Gated field, const FieldPath& at) {
    bool d_set = d && !d->empty();
    bool l_set = l && !l->empty();
    if (d_set && !l_set) {
      return drop(field, at);
    }
    return d_set == l_set && (!d_set || *d == *l);
  }

  // Unknown fields: one that desired sets and live lacks was dropped by a
  // server that does not know it. One that only live has is not compared: a
  // field this model does not know may be a server default, and comparing it
  // would rewrite the slice forever.
  bool unknown(const Json& d, const Json& l, Level level, const FieldPath& at) {
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
        if (presence_.hasUnknown(level, key)) {
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
    return listAttribute(d.ints, l.ints, Gated::kInts, at.field("ints")) &&
           listAttribute(d.bools, l.bools, Gated::kBools, at.field("bools")) &&
           listAttribute(d.strings, l.strings, Gated::kStrings, at.field("strings")) &&
           listAttribute(d.versions, l.versions, Gated::kVersions, at.field("versions")) &&
           unknown(d.unknown, l.unknown, Level::kAttribute, at);
  }

  bool requestPolicy(const CapacityRequestPolicy& d, const CapacityRequestPolicy& l,
                     const FieldPath& at) {
    return d.default_value == l.default_value && d.valid_values == l.valid_values &&
           d.valid_range == l.valid_range &&
           unknown(d.unknown, l.unknown, Level::kRequestPolicy, at);
  }

  bool capacity(const DeviceCapacity& d, const DeviceCapacity& l, const FieldPath& at) {
    if (d.value != l.value) {
      return false;
    }
    FieldPath policy = at.field("requestPolicy");
    if (d.request_policy && !l.request_policy) {
      if (!drop(Gated::kRequestPolicy, policy)) {
        return false;
      }
    } else if (d.request_policy.has_value() != l.request_policy.has_value() ||
               (d.request_policy && !requestPolicy(*d.request_policy, *l.request_policy, policy))) {
      return false;
    }
    return unknown(d.unknown, l.unknown, Level::kCapacity, at);
  }

  bool taints(const std::vector<DeviceTaint>& d, const std::vector<DeviceTaint>& l,
              const FieldPath& at) {
    if (!d.empty() && l.empty()) {
      return drop(Gated::kTaints, at);
    }
    if (d.size() != l.size()) {
      return false;
    }
    for (size_t i = 0; i < d.size(); ++i) {
      if (d[i].key != l[i].key || d[i].value != l[i].value || d[i].effect != l[i].effect) {
        return false;
      }
      // Unset in desired: the server fills in the time, so any value is fine.
      if (d[i].time_added && (!l[i].time_added || !timeEqual(*d[i].time_added, *l[i].time_added))) {
        return false;
      }
    }
    return true;
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

    // Gated fields.
    if (!optionalField(d.node_name, l.node_name, Gated::kDeviceNodeName, at.field("nodeName"))) {
      return false;
    }
    if (d.node_selector && !l.node_selector) {
      if (!drop(Gated::kDeviceNodeSelector, at.field("nodeSelector"))) {
        return false;
      }
    } else if (!nodeSelectorEqual(d.node_selector, l.node_selector)) {
      return false;
    }
    return optionalField(d.all_nodes, l.all_nodes, Gated::kDeviceAllNodes, at.field("allNodes")) &&
           listField(d.consumes_counters, l.consumes_counters, Gated::kConsumesCounters,
                     at.field("consumesCounters")) &&
           taints(d.taints, l.taints, at.field("taints")) &&
           optionalField(d.binds_to_node, l.binds_to_node, Gated::kBindsToNode,
                         at.field("bindsToNode")) &&
           listField(d.binding_conditions, l.binding_conditions, Gated::kBindingConditions,
                     at.field("bindingConditions")) &&
           listField(d.binding_failure_conditions, l.binding_failure_conditions,
                     Gated::kBindingFailureConditions, at.field("bindingFailureConditions")) &&
           optionalField(d.allow_multiple_allocations, l.allow_multiple_allocations,
                         Gated::kAllowMultipleAllocations, at.field("allowMultipleAllocations")) &&
           unknown(d.unknown, l.unknown, Level::kDevice, at);
  }

  LivePresence presence_;
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

Json toJson(const Device& device) {
  Json j = startWith(device.unknown);
  j["name"] = device.name;
  if (!device.attributes.empty()) {
    Json attributes = Json::object();
    for (const auto& [name, a] : device.attributes) {
      attributes[name] = attributeToJson(a);
    }
    j["attributes"] = std::move(attributes);
  }
  if (!device.capacity.empty()) {
    Json capacity = Json::object();
    for (const auto& [name, c] : device.capacity) {
      capacity[name] = capacityToJson(c);
    }
    j["capacity"] = std::move(capacity);
  }
  if (!device.consumes_counters.empty()) {
    Json consumes = Json::array();
    for (const DeviceCounterConsumption& c : device.consumes_counters) {
      Json item = {{"counterSet", c.counter_set}};
      if (!c.counters.empty()) {
        item["counters"] = counterMapToJson(c.counters);
      }
      consumes.push_back(std::move(item));
    }
    j["consumesCounters"] = std::move(consumes);
  }
  if (device.node_name) {
    j["nodeName"] = *device.node_name;
  }
  if (device.node_selector) {
    j["nodeSelector"] = device.node_selector->value;
  }
  if (device.all_nodes) {
    j["allNodes"] = *device.all_nodes;
  }
  if (!device.taints.empty()) {
    Json taints = Json::array();
    for (const DeviceTaint& t : device.taints) {
      taints.push_back(taintToJson(t));
    }
    j["taints"] = std::move(taints);
  }
  if (device.binds_to_node) {
    j["bindsToNode"] = *device.binds_to_node;
  }
  if (!device.binding_conditions.empty()) {
    j["bindingConditions"] = device.binding_conditions;
  }
  if (!device.binding_failure_conditions.empty()) {
    j["bindingFailureConditions"] = device.binding_failure_conditions;
  }
  if (device.allow_multiple_allocations) {
    j["allowMultipleAllocations"] = *device.allow_multiple_allocations;
  }
  return j;
}

StatusOr<Device> deviceFromJson(const Json& j, const std::string& path) {
  Device device;
  RETURN_IF_ERROR(readDevice(j, FieldPath(path), &device));
  return device;
}

Json toJson(const CounterSet& set) {
  Json j = {{"name", set.name}};
  if (!set.counters.empty()) {
    j["counters"] = counterMapToJson(set.counters);
  }
  return j;
}

StatusOr<CounterSet> counterSetFromJson(const Json& j, const std::string& path) {
  CounterSet set;
  RETURN_IF_ERROR(readCounterSet(j, FieldPath(path), &set));
  return set;
}

Json toJson(const ResourceSlice& slice) {
  const ResourceSliceSpec& s = slice.spec;
  Json spec = startWith(s.unknown);
  spec["driver"] = s.driver;
  spec["pool"] = {{"name", s.pool.name},
                  {"generation", s.pool.generation},
                  {"resourceSliceCount", s.pool.resource_slice_count}};
  if (s.node_name) {
    spec["nodeName"] = *s.node_name;
  }
  if (s.node_selector) {
    spec["nodeSelector"] = s.node_selector->value;
  }
  if (s.all_nodes) {
    spec["allNodes"] = *s.all_nodes;
  }
  if (s.per_device_node_selection) {
    spec["perDeviceNodeSelection"] = *s.per_device_node_selection;
  }
  if (!s.devices.empty()) {
    Json devices = Json::array();
    devices.get_ref<Json::array_t&>().reserve(s.devices.size());
    for (const Device& d : s.devices) {
      devices.push_back(toJson(d));
    }
    spec["devices"] = std::move(devices);
  }
  if (!s.shared_counters.empty()) {
    Json sets = Json::array();
    for (const CounterSet& c : s.shared_counters) {
      sets.push_back(toJson(c));
    }
    spec["sharedCounters"] = std::move(sets);
  }

  Json j = startWith(slice.unknown);
  j["apiVersion"] = kResourceApiVersion;
  j["kind"] = "ResourceSlice";
  j["metadata"] = toJson(slice.metadata);
  j["spec"] = std::move(spec);
  return j;
}

StatusOr<ResourceSlice> resourceSliceFromJson(const Json& j) {
  if (!j.is_object()) {
    return invalidArgument("ResourceSlice: must be a JSON object");
  }
  RETURN_IF_ERROR(checkTypeMeta(j, kResourceApiVersion, "ResourceSlice"));
  ResourceSlice slice;
  for (const auto& [key, value] : j.items()) {
    if (key == "apiVersion" || key == "kind") {
      continue;
    }
    if (key == "metadata") {
      if (value.is_null()) {
        continue;
      }
      ASSIGN_OR_RETURN(slice.metadata, objectMetaFromJson(value));
    } else if (key == "spec") {
      if (!value.is_null()) {
        RETURN_IF_ERROR(readSpec(value, FieldPath("spec"), &slice.spec));
      }
    } else {
      slice.unknown[key] = value;
    }
  }
  return slice;
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

// Seconds since the epoch of an RFC 3339 time, fractions dropped (the API
// server stores metav1.Time to the second, in UTC).
std::optional<int64_t> rfc3339Seconds(std::string_view s) {
  auto number = [&](size_t pos, size_t len) -> std::optional<int> {
    if (pos + len > s.size()) {
      return std::nullopt;
    }
    int value = 0;
    for (size_t i = pos; i < pos + len; ++i) {
      if (s[i] < '0' || s[i] > '9') {
        return std::nullopt;
      }
      value = value * 10 + (s[i] - '0');
    }
    return value;
  };
  auto year = number(0, 4), month = number(5, 2), day = number(8, 2);
  auto hour = number(11, 2), minute = number(14, 2), second = number(17, 2);
  if (!year || !month || !day || !hour || !minute || !second || s[4] != '-' || s[7] != '-' ||
      (s[10] != 'T' && s[10] != 't') || s[13] != ':' || s[16] != ':') {
    return std::nullopt;
  }
  size_t pos = 19;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      ++pos;
    }
  }
  int64_t offset = 0;
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    auto off_hour = number(pos + 1, 2), off_minute = number(pos + 4, 2);
    if (!off_hour || !off_minute || s[pos + 3] != ':') {
      return std::nullopt;
    }
    offset = (s[pos] == '-' ? -1 : 1) * (int64_t{*off_hour} * 3600 + int64_t{*off_minute} * 60);
    pos += 6;
  } else {
    return std::nullopt;
  }
  if (pos != s.size()) {
    return std::nullopt;
  }
  std::chrono::year_month_day date{std::chrono::year(*year),
                                   std::chrono::month(static_cast<unsigned>(*month)),
                                   std::chrono::day(static_cast<unsigned>(*day))};
  if (!date.ok()) {
    return std::nullopt;
  }
  int64_t days = std::chrono::sys_days(date).time_since_epoch().count();
  return days * 86400 + int64_t{*hour} * 3600 + int64_t{*minute} * 60 + *second - offset;
}

}  // namespace rsc::client
