#include "controller/pool/pool_json.h"

#include <algorithm>
#include <limits>
#include <set>
#include <utility>

#include "client/api_limits.h"
#include "client/codec.h"
#include "client/inventory_api.h"
#include "client/json_nesting.h"
#include "client/names.h"
#include "client/resource_slice.h"
#include "common/clock.h"
#include "common/strings.h"
#include "controller/reconcile/planner.h"

namespace rsc::controller::pool {

using client::deviceQualifiedNameError;
using client::dnsLabelError;
using client::labelKeyError;
using client::labelValueError;
using client::nodeNameError;
using client::poolNameError;
using client::semverError;

namespace {

// The detail of a field no table lists, as the API server words it.
constexpr std::string_view kUnknownField = "unknown field";

// ---- Field paths ------------------------------------------------------------

std::string fieldPath(const std::string& base, std::string_view name) {
  if (base.empty()) return std::string(name);
  return base + "." + std::string(name);
}

std::string indexPath(const std::string& base, size_t i) {
  return base + "[" + std::to_string(i) + "]";
}

using client::keyPath;

// Collects problems of one kind.
class Problems {
 public:
  Problems(std::vector<FieldError>& out, size_t& omitted) : out_(out), omitted_(omitted) {}
  // Keeps the first kMaxProblemDetails problems and counts the rest, so that
  // a body of a million bad values costs a counter, not a million messages.
  void add(std::string field, std::string message) {
    if (out_.size() >= kMaxProblemDetails) {
      ++omitted_;
      return;
    }
    out_.push_back({std::move(field), std::move(message)});
  }
  // Adds the message of `error` (a name rule's) unless it is OK.
  void check(const std::string& field, const Status& error) {
    if (!error.ok()) add(field, error.message());
  }
  // Every problem found, the omitted ones included.
  size_t size() const { return out_.size() + omitted_; }

 private:
  std::vector<FieldError>& out_;
  size_t& omitted_;
};

// ---- Decoding ---------------------------------------------------------------
// A body as a driver sends it, decoded by field tables with Unknown::kRefuse:
// an unknown field anywhere, down to a node selector requirement, is a
// malformed problem naming its path (DESIGN.md section 10, strict decoding).

struct WireSlice {
  std::vector<client::Device> devices;
  std::optional<std::string> partition_type_attribute;
  std::optional<bool> per_device_node_selection;
  std::vector<client::CounterSet> shared_counters;
  std::optional<std::vector<std::string>> skip_node_operations;
};

// Every member optional: validation needs to know what was sent.
struct WirePool {
  std::optional<bool> all_nodes;
  std::optional<std::vector<client::Device>> devices;
  std::optional<int64_t> generation;
  std::optional<int64_t> lease_seconds;
  std::optional<std::string> node_name;
  std::optional<client::NodeSelector> node_selector;
  std::optional<std::string> partition_type_attribute;
  std::optional<bool> per_device_node_selection;
  std::optional<std::vector<client::CounterSet>> shared_counters;
  std::optional<std::vector<std::string>> skip_node_operations;
  std::optional<std::vector<WireSlice>> slices;
};

}  // namespace
}  // namespace rsc::controller::pool

namespace rsc::client::codec {

template <>
struct Table<controller::pool::WireSlice> : TableOf<controller::pool::WireSlice> {
  static constexpr std::string_view kUnknownHint =
      "a slice has devices, sharedCounters, perDeviceNodeSelection, partitionTypeAttribute and "
      "skipNodeOperations";
  static constexpr auto kFields = std::tuple{
      field("devices", &Owner::devices, ListOf<Obj<Device>>{}),
      field("partitionTypeAttribute", &Owner::partition_type_attribute, Opt<Str>{}),
      field("perDeviceNodeSelection", &Owner::per_device_node_selection, Opt<Bool>{}),
      field("sharedCounters", &Owner::shared_counters, ListOf<Obj<CounterSet>>{}),
      field("skipNodeOperations", &Owner::skip_node_operations, Opt<Strings>{}),
  };
};

template <>
struct Table<controller::pool::WirePool> : TableOf<controller::pool::WirePool> {
  static constexpr std::string_view kUnknownHint =
      "a Pool has nodeName, nodeSelector, allNodes, perDeviceNodeSelection, devices, "
      "sharedCounters, slices, partitionTypeAttribute, skipNodeOperations, generation and "
      "leaseSeconds";
  static constexpr auto kFields = std::tuple{
      field("allNodes", &Owner::all_nodes, Opt<Bool>{}),
      field("devices", &Owner::devices, Opt<ListOf<Obj<Device>>>{}),
      field("generation", &Owner::generation, Opt<Int64>{}),
      field("leaseSeconds", &Owner::lease_seconds, Opt<Int64>{}),
      field("nodeName", &Owner::node_name, Opt<Str>{}),
      field("nodeSelector", &Owner::node_selector, Opt<Selector>{}),
      field("partitionTypeAttribute", &Owner::partition_type_attribute, Opt<Str>{}),
      field("perDeviceNodeSelection", &Owner::per_device_node_selection, Opt<Bool>{}),
      field("sharedCounters", &Owner::shared_counters, Opt<ListOf<Obj<CounterSet>>>{}),
      field("skipNodeOperations", &Owner::skip_node_operations, Opt<Strings>{}),
      field("slices", &Owner::slices, Opt<ListOf<Obj<controller::pool::WireSlice>>>{}),
  };
};

}  // namespace rsc::client::codec

namespace rsc::controller::pool {
namespace {

using client::FieldPath;
using client::codec::Decoder;
using client::codec::Unknown;
using ProblemClass = client::codec::Problems::Class;

// A pool as sent, before validation: what decoding found out about presence.
struct RawPool {
  reconcile::Pool pool;  // devices are made into shared forms once the pool is valid
  std::vector<client::Device> devices;
  std::vector<std::vector<client::Device>> slice_devices;  // slices[i].devices
  bool has_devices = false;
  bool has_shared_counters = false;
  bool has_slices = false;
  bool has_generation = false;
  // slices[i].perDeviceNodeSelection as sent.
  std::vector<std::optional<bool>> slice_per_device;
  // Where each slice's options came from: true for its own, false for the pool's.
  std::vector<std::pair<bool, bool>> slice_own_options;  // partitionTypeAttribute, skipNodeOps
};

// Returns the JSON type name used in messages.
std::string_view typeName(const Json& v) {
  switch (v.type()) {
    case Json::value_t::object:
      return "an object";
    case Json::value_t::array:
      return "a list";
    case Json::value_t::string:
      return "a string";
    case Json::value_t::boolean:
      return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      return "a number";
    default:
      return "null";
  }
}

RawPool decodeRawPool(const Json& body, const FieldPath& at, Decoder& decoder) {
  RawPool raw;
  if (!body.is_object()) {
    decoder.fail(at, "must be a Pool object, not " + std::string(typeName(body)));
    return raw;
  }
  WirePool wire;
  client::codec::decodeInto<WirePool>(body, at, wire, decoder);
  reconcile::NodeSelection& selection = raw.pool.selection;
  selection.node_name = std::move(wire.node_name);
  selection.node_selector = std::move(wire.node_selector);
  selection.all_nodes = wire.all_nodes.value_or(false);
  selection.per_device_node_selection = wire.per_device_node_selection.value_or(false);
  raw.has_devices = wire.devices.has_value();
  if (wire.devices) raw.devices = std::move(*wire.devices);
  raw.has_shared_counters = wire.shared_counters.has_value();
  if (wire.shared_counters) raw.pool.shared_counters = std::move(*wire.shared_counters);
  raw.has_generation = wire.generation.has_value();
  raw.pool.generation = wire.generation.value_or(0);
  if (wire.lease_seconds) {
    raw.pool.lease =
        std::chrono::seconds(std::clamp<int64_t>(*wire.lease_seconds, -1, kMaxLeaseSeconds + 1));
  }
  reconcile::SliceOptions& options = raw.pool.options;
  options.partition_type_attribute = std::move(wire.partition_type_attribute);
  if (wire.skip_node_operations)
    options.skip_node_operations = std::move(*wire.skip_node_operations);
  raw.has_slices = wire.slices.has_value();
  if (wire.slices) {
    std::vector<reconcile::DesiredSlice> slices;
    for (WireSlice& s : *wire.slices) {
      // A slice without options of its own takes the pool's; partitionTypeAttribute only
      // when a device of the slice consumes counters (the API server refuses it elsewhere).
      const bool consumers =
          std::any_of(s.devices.begin(), s.devices.end(),
                      [](const client::Device& d) { return !d.consumes_counters.empty(); });
      raw.slice_own_options.emplace_back(s.partition_type_attribute.has_value(),
                                         s.skip_node_operations.has_value());
      reconcile::SliceOptions own;
      own.partition_type_attribute = s.partition_type_attribute
                                         ? std::move(s.partition_type_attribute)
                                     : consumers ? options.partition_type_attribute
                                                 : std::nullopt;
      own.skip_node_operations = s.skip_node_operations ? std::move(*s.skip_node_operations)
                                                        : options.skip_node_operations;
      slices.push_back({{}, std::move(s.shared_counters), std::move(own)});
      raw.slice_devices.push_back(std::move(s.devices));
      raw.slice_per_device.push_back(s.per_device_node_selection);
    }
    raw.pool.slices = std::move(slices);
  }
  return raw;
}

// ---- Validation -------------------------------------------------------------

// A NodeSelector (core/v1) with exactly one term. Its shape, unknown fields
// included, was checked while decoding; these are the API server's rules.
void validateNodeSelector(const client::NodeSelector& selector, const std::string& path,
                          Problems& bad) {
  client::codec::Problems ignored;
  Decoder decoder(ignored, Unknown::kSkip);
  client::NodeSelectorShape shape;
  client::codec::decodeInto<client::NodeSelectorShape>(selector.value, FieldPath(path), shape,
                                                       decoder);
  const std::string terms_path = fieldPath(path, "nodeSelectorTerms");
  if (!shape.node_selector_terms) {
    bad.add(terms_path, "required: a list with exactly one node selector term");
    return;
  }
  const std::vector<client::NodeSelectorTerm>& terms = *shape.node_selector_terms;
  if (terms.size() != 1) {
    bad.add(terms_path,
            "must have exactly one node selector term, not " + std::to_string(terms.size()));
  }
  for (size_t t = 0; t < terms.size(); ++t) {
    const std::string term_path = indexPath(terms_path, t);
    for (const bool fields : {false, true}) {
      const std::vector<client::NodeSelectorRequirement>& list =
          fields ? terms[t].match_fields : terms[t].match_expressions;
      const std::string list_path =
          fieldPath(term_path, fields ? "matchFields" : "matchExpressions");
      for (size_t r = 0; r < list.size(); ++r) {
        const client::NodeSelectorRequirement& req = list[r];
        const std::string req_path = indexPath(list_path, r);
        const std::string& key = req.key;
        const std::string& op = req.operator_;
        const std::vector<std::string>& values = req.values;
        const std::string key_path = fieldPath(req_path, "key");
        const std::string op_path = fieldPath(req_path, "operator");
        const std::string values_path = fieldPath(req_path, "values");
        if (fields) {
          if (key != "metadata.name") {
            bad.add(key_path, "must be metadata.name, the only field a node selector supports");
          }
          if (op != "In" && op != "NotIn") {
            bad.add(op_path, "must be In or NotIn for matchFields");
          } else if (values.size() != 1) {
            bad.add(values_path, "must have exactly one value for matchFields");
          } else {
            // The API server checks the value as a node name.
            bad.check(indexPath(values_path, 0), nodeNameError(values.front()));
          }
          continue;
        }
        bad.check(key_path, labelKeyError(key));
        if (op == "In" || op == "NotIn") {
          if (values.empty()) bad.add(values_path, "must be specified for In and NotIn");
        } else if (op == "Exists" || op == "DoesNotExist") {
          if (!values.empty()) bad.add(values_path, "must be empty for Exists and DoesNotExist");
        } else if (op == "Gt" || op == "Lt") {
          if (values.size() != 1) {
            bad.add(values_path, "must have exactly one value for Gt and Lt");
          } else {
            const std::string& v = values.front();
            const bool integer = !v.empty() &&
                                 std::all_of(v.begin() + (v[0] == '-' ? 1 : 0), v.end(),
                                             [](char c) { return c >= '0' && c <= '9'; }) &&
                                 v != "-";
            if (!integer) bad.add(indexPath(values_path, 0), "must be an integer for Gt and Lt");
          }
        } else {
          bad.add(op_path,
                  op.empty() ? "required" : "must be In, NotIn, Exists, DoesNotExist, Gt or Lt");
        }
        if (op == "In" || op == "NotIn") {
          for (size_t i = 0; i < values.size(); ++i) {
            bad.check(indexPath(values_path, i), labelValueError(values[i]));
          }
        }
      }
    }
  }
}

// What device validation needs to know about the pool around it.
struct PoolContext {
  bool per_device_node_selection = false;
  // Counter sets of the whole pool, by name.
  std::map<std::string, const client::CounterSet*> counter_sets;
};

size_t attributeValueCount(const client::DeviceAttribute& a) {
  if (a.ints) return a.ints->size();
  if (a.bools) return a.bools->size();
  if (a.strings) return a.strings->size();
  if (a.versions) return a.versions->size();
  return 1;
}

void validateAttribute(const client::DeviceAttribute& a, const std::string& path, Problems& bad) {
  const int set =
      static_cast<int>(a.int_value.has_value()) + static_cast<int>(a.bool_value.has_value()) +
      static_cast<int>(a.string_value.has_value()) + static_cast<int>(a.version_value.has_value()) +
      static_cast<int>(a.ints.has_value()) + static_cast<int>(a.bools.has_value()) +
      static_cast<int>(a.strings.has_value()) + static_cast<int>(a.versions.has_value());
  if (set != 1) {
    bad.add(
        path,
        "must have exactly one of int, bool, string, version, ints, bools, strings or versions");
    return;
  }
  const auto check_string = [&](const std::string& value, const std::string& at, bool version) {
    if (value.size() > client::kAttributeMaxValueLength) {
      bad.add(at, "must be no more than " + std::to_string(client::kAttributeMaxValueLength) +
                      " bytes");
    } else if (version) {
      bad.check(at, semverError(value));
    }
  };
  if (a.string_value) check_string(*a.string_value, fieldPath(path, "string"), false);
  if (a.version_value) check_string(*a.version_value, fieldPath(path, "version"), true);
  const auto check_list_size = [&](size_t size, std::string_view name) {
    if (size == 0) bad.add(fieldPath(path, name), "must not be empty");
  };
  if (a.ints) check_list_size(a.ints->size(), "ints");
  if (a.bools) check_list_size(a.bools->size(), "bools");
  if (a.strings) {
    check_list_size(a.strings->size(), "strings");
    for (size_t i = 0; i < a.strings->size(); ++i) {
      check_string((*a.strings)[i], indexPath(fieldPath(path, "strings"), i), false);
    }
  }
  if (a.versions) {
    check_list_size(a.versions->size(), "versions");
    for (size_t i = 0; i < a.versions->size(); ++i) {
      check_string((*a.versions)[i], indexPath(fieldPath(path, "versions"), i), true);
    }
  }
}

void validateRequestPolicy(const client::CapacityRequestPolicy& policy,
                           const client::Quantity& capacity, const std::string& path,
                           Problems& bad) {
  const bool has_values = !policy.valid_values.empty();
  const bool has_range = policy.valid_range.has_value();
  const std::string default_path = fieldPath(path, "default");
  if (has_values && has_range) {
    bad.add(fieldPath(path, "validRange"), "must not be set together with validValues");
  }
  if (has_values) {
    const std::string values_path = fieldPath(path, "validValues");
    if (policy.valid_values.size() > client::kMaxCapacityValidValues) {
      bad.add(values_path,
              "must have at most " + std::to_string(client::kMaxCapacityValidValues) + " values");
    }
    for (size_t i = 0; i < policy.valid_values.size(); ++i) {
      const client::Quantity& v = policy.valid_values[i];
      if (v > capacity) bad.add(indexPath(values_path, i), "must not exceed the capacity value");
      if (i > 0 && !(policy.valid_values[i - 1] < v)) {
        bad.add(indexPath(values_path, i), "values must be sorted in ascending order and unique");
      }
    }
    if (!policy.default_value) {
      bad.add(default_path, "required when validValues is set");
    } else if (std::find(policy.valid_values.begin(), policy.valid_values.end(),
                         *policy.default_value) == policy.valid_values.end()) {
      bad.add(default_path, "must be one of validValues");
    }
  }
  if (has_range) {
    const client::CapacityRequestPolicyRange& range = *policy.valid_range;
    const std::string range_path = fieldPath(path, "validRange");
    if (!range.min) {
      bad.add(fieldPath(range_path, "min"), "required");
      return;
    }
    if (*range.min > capacity) {
      bad.add(fieldPath(range_path, "min"), "must not exceed the capacity value");
    }
    if (range.max) {
      if (*range.max > capacity) {
        bad.add(fieldPath(range_path, "max"), "must not exceed the capacity value");
      }
      if (*range.max < *range.min) bad.add(fieldPath(range_path, "max"), "must not be below min");
    }
    if (range.step && !(client::Quantity() < *range.step)) {
      bad.add(fieldPath(range_path, "step"), "must be greater than zero");
    }
    if (policy.default_value) {
      const client::Quantity& upper = range.max ? *range.max : capacity;
      if (*policy.default_value < *range.min || *policy.default_value > upper) {
        bad.add(default_path, "must be within validRange");
      }
    }
  }
}

// A list of names (binding conditions, compatibility groups, node operations): at most `max`,
// each one valid by `name_error`, none twice.
void validateNameList(const std::vector<std::string>& list, const std::string& path, size_t max,
                      Status (*name_error)(std::string_view), Problems& bad) {
  if (list.size() > max) {
    bad.add(path, "must have at most " + std::to_string(max) + " entries");
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = indexPath(path, i);
    bad.check(at, name_error(list[i]));
    if (!seen.insert(list[i]).second) bad.add(at, "Duplicate value: " + inQuotes(list[i]));
  }
}

// A node resource a device may stand for or add to (Kubernetes 1.37): cpu, memory or hugepages-*.
bool isNodeAllocatableResourceName(std::string_view name) {
  return name == "cpu" || name == "memory" || name.starts_with("hugepages-");
}

// Kubernetes 1.36's "native resource": no domain, or one in kubernetes.io.
bool isNativeResourceName(std::string_view name) {
  return name.find('/') == std::string_view::npos ||
         name.find("kubernetes.io/") != std::string_view::npos;
}

const client::Quantity& zeroQuantity() {
  static const client::Quantity zero = *client::Quantity::parse("0");
  return zero;
}

void checkPositive(const std::optional<client::Quantity>& q, const std::string& path,
                   Problems& bad) {
  if (q && *q <= zeroQuantity()) bad.add(path, "must be positive");
}

void checkNotNegative(const std::optional<client::Quantity>& q, const std::string& path,
                      Problems& bad) {
  if (q && *q < zeroQuantity()) bad.add(path, "must not be negative");
}

// A capacity key that names one of the device's capacities.
void checkCapacityKey(const client::Device& d, const std::string& key, const std::string& path,
                      Problems& bad) {
  if (key.empty()) {
    bad.add(path, "must not be empty");
  } else if (!d.capacity.contains(key)) {
    bad.add(path, "names capacity " + inQuotes(key) + ", which the device does not have");
  }
}

// nodeAllocatableResources (1.37) and nodeAllocatableResourceMappings (1.36), by the API
// server's rules of each release.
void validateNodeAllocatable(const client::Device& d, const std::string& path, Problems& bad) {
  const std::string resources_path = fieldPath(path, "nodeAllocatableResources");
  for (const auto& [name, r] : d.node_allocatable_resources) {
    const std::string at = keyPath(resources_path, name);
    if (!isNodeAllocatableResourceName(name)) {
      bad.add(at, "must be a node allocatable resource name: cpu, memory or hugepages-<size>");
    }
    if (!r.mapping && !r.overhead) bad.add(at, "must set mapping, overhead or both");
    if (r.mapping) {
      const client::NodeAllocatableMapping& m = *r.mapping;
      const std::string mapping_path = fieldPath(at, "mapping");
      if (m.capacity_key.has_value() == m.device_multiplier.has_value()) {
        bad.add(mapping_path, "must set exactly one of capacityKey and deviceMultiplier");
      }
      if (m.capacity_key) {
        checkCapacityKey(d, *m.capacity_key, fieldPath(mapping_path, "capacityKey"), bad);
        if (!m.capacity_multiplier) {
          bad.add(fieldPath(mapping_path, "capacityMultiplier"),
                  "required when capacityKey is set");
        }
      } else if (m.capacity_multiplier) {
        bad.add(fieldPath(mapping_path, "capacityKey"), "required when capacityMultiplier is set");
      }
      checkPositive(m.capacity_multiplier, fieldPath(mapping_path, "capacityMultiplier"), bad);
      checkPositive(m.device_multiplier, fieldPath(mapping_path, "deviceMultiplier"), bad);
    }
    if (r.overhead) {
      const client::NodeAllocatableOverhead& o = *r.overhead;
      const std::string overhead_path = fieldPath(at, "overhead");
      if (!o.per_pod && !o.per_container) {
        bad.add(overhead_path, "must set perPod, perContainer or both");
      }
      checkNotNegative(o.per_pod, fieldPath(overhead_path, "perPod"), bad);
      checkNotNegative(o.per_container, fieldPath(overhead_path, "perContainer"), bad);
    }
  }
  const std::string mappings_path = fieldPath(path, "nodeAllocatableResourceMappings");
  for (const auto& [name, m] : d.node_allocatable_resource_mappings) {
    const std::string at = keyPath(mappings_path, name);
    if (!isNativeResourceName(name)) bad.add(at, "must be a node allocatable resource name");
    if (!m.allocation_multiplier && !m.capacity_key) {
      bad.add(at, "must set allocationMultiplier, capacityKey or both");
    }
    checkPositive(m.allocation_multiplier, fieldPath(at, "allocationMultiplier"), bad);
    if (m.capacity_key) checkCapacityKey(d, *m.capacity_key, fieldPath(at, "capacityKey"), bad);
  }
}

// Attributes and capacities: names, values and the per-device limits.
void validateAttributesAndCapacity(const client::Device& d, const std::string& path,
                                   Problems& bad) {
  if (d.attributes.size() + d.capacity.size() > client::kMaxAttributesAndCapacitiesPerDevice) {
    bad.add(path, "must have at most " +
                      std::to_string(client::kMaxAttributesAndCapacitiesPerDevice) +
                      " attributes and capacities combined, not " +
                      std::to_string(d.attributes.size() + d.capacity.size()));
  }
  size_t values = 0;
  for (const auto& [name, attribute] : d.attributes) {
    const std::string at = keyPath(fieldPath(path, "attributes"), name);
    bad.check(at, deviceQualifiedNameError(name));
    validateAttribute(attribute, at, bad);
    values += attributeValueCount(attribute);
  }
  if (values > client::kMaxAttributeValuesPerDevice) {
    bad.add(fieldPath(path, "attributes"),
            "must have at most " + std::to_string(client::kMaxAttributeValuesPerDevice) +
                " values in total (each list item counts), not " + std::to_string(values));
  }
  for (const auto& [name, capacity] : d.capacity) {
    const std::string at = keyPath(fieldPath(path, "capacity"), name);
    bad.check(at, deviceQualifiedNameError(name));
    if (capacity.request_policy) {
      const std::string policy_path = fieldPath(at, "requestPolicy");
      if (d.allow_multiple_allocations != true) {
        bad.add(policy_path, "may only be set when allowMultipleAllocations is true");
      }
      validateRequestPolicy(*capacity.request_policy, capacity.value, policy_path, bad);
    }
  }
}

void validateTaints(const client::Device& d, const std::string& path, Problems& bad) {
  const std::string taints_path = fieldPath(path, "taints");
  if (d.taints.size() > client::kMaxTaintsPerDevice) {
    bad.add(taints_path, "must have at most " + std::to_string(client::kMaxTaintsPerDevice) +
                             " taints, not " + std::to_string(d.taints.size()));
  }
  for (size_t i = 0; i < d.taints.size(); ++i) {
    const client::DeviceTaint& taint = d.taints[i];
    const std::string at = indexPath(taints_path, i);
    bad.check(fieldPath(at, "key"), labelKeyError(taint.key));
    bad.check(fieldPath(at, "value"), labelValueError(taint.value));
    if (taint.time_added && !rfc3339Seconds(*taint.time_added)) {
      bad.add(fieldPath(at, "timeAdded"),
              "must be an RFC 3339 time such as 2026-12-01T10:00:00Z, not " +
                  inQuotes(*taint.time_added));
    }
    if (taint.effect != "None" && taint.effect != "NoSchedule" && taint.effect != "NoExecute") {
      bad.add(fieldPath(at, "effect"),
              taint.effect.empty()
                  ? "required: None, NoSchedule or NoExecute"
                  : "must be None, NoSchedule or NoExecute, not " + inQuotes(taint.effect));
    }
  }
}

// Counter consumption: few, unique, and referring to counters the pool has.
void validateConsumption(const client::Device& d, const std::string& path, const PoolContext& pool,
                         Problems& bad) {
  const std::string consumes_path = fieldPath(path, "consumesCounters");
  if (d.consumes_counters.size() > client::kMaxCounterConsumptionsPerDevice) {
    bad.add(consumes_path, "must have at most " +
                               std::to_string(client::kMaxCounterConsumptionsPerDevice) +
                               " entries, not " + std::to_string(d.consumes_counters.size()));
  }
  std::set<std::string> consumed_sets;
  for (size_t i = 0; i < d.consumes_counters.size(); ++i) {
    const client::DeviceCounterConsumption& c = d.consumes_counters[i];
    const std::string at = indexPath(consumes_path, i);
    const std::string set_path = fieldPath(at, "counterSet");
    const std::string counters_path = fieldPath(at, "counters");
    bad.check(set_path, dnsLabelError(c.counter_set));
    if (!consumed_sets.insert(c.counter_set).second) {
      bad.add(set_path, "Duplicate value: " + inQuotes(c.counter_set));
    }
    if (c.counters.empty()) bad.add(counters_path, "must not be empty");
    if (c.counters.size() > client::kMaxCountersPerCounterConsumption) {
      bad.add(counters_path, "must have at most " +
                                 std::to_string(client::kMaxCountersPerCounterConsumption) +
                                 " counters, not " + std::to_string(c.counters.size()));
    }
    validateNameList(c.compatibility_groups, fieldPath(at, "compatibilityGroups"),
                     client::kMaxCompatibilityGroups, dnsLabelError, bad);
    const auto set = pool.counter_sets.find(c.counter_set);
    if (set == pool.counter_sets.end()) {
      if (!c.counter_set.empty()) {
        bad.add(set_path, "refers to counter set " + inQuotes(c.counter_set) +
                              ", which is not in the pool's sharedCounters");
      }
    }
    for (const auto& [name, counter] : c.counters) {
      const std::string counter_path = keyPath(counters_path, name);
      bad.check(counter_path, dnsLabelError(name));
      if (set != pool.counter_sets.end() && !set->second->counters.contains(name)) {
        bad.add(counter_path, "refers to counter " + inQuotes(name) + ", which counter set " +
                                  inQuotes(c.counter_set) + " does not have");
      }
    }
  }
}

// Node selection of the device itself: only under perDeviceNodeSelection, then exactly one way.
void validateDeviceNodeSelection(const client::Device& d, const std::string& path,
                                 const PoolContext& pool, Problems& bad) {
  const int node_fields = static_cast<int>(d.node_name.has_value()) +
                          static_cast<int>(d.node_selector.has_value()) +
                          static_cast<int>(d.all_nodes.has_value());
  if (pool.per_device_node_selection) {
    if (node_fields != 1) {
      bad.add(path,
              "must set exactly one of nodeName, nodeSelector or allNodes, because the "
              "pool uses perDeviceNodeSelection");
    }
  } else if (node_fields > 0) {
    const char* field = d.node_name ? "nodeName" : d.node_selector ? "nodeSelector" : "allNodes";
    bad.add(fieldPath(path, field), "may only be set when the pool uses perDeviceNodeSelection");
  }
  if (pool.per_device_node_selection) {
    if (d.node_name) bad.check(fieldPath(path, "nodeName"), nodeNameError(*d.node_name));
    if (d.node_selector) {
      validateNodeSelector(*d.node_selector, fieldPath(path, "nodeSelector"), bad);
    }
    if (d.all_nodes == false) bad.add(fieldPath(path, "allNodes"), "must be unset or true");
  }
}

void validateBindingConditions(const client::Device& d, const std::string& path, Problems& bad) {
  const std::string conditions_path = fieldPath(path, "bindingConditions");
  const std::string failures_path = fieldPath(path, "bindingFailureConditions");
  validateNameList(d.binding_conditions, conditions_path, client::kMaxBindingConditions,
                   labelKeyError, bad);
  validateNameList(d.binding_failure_conditions, failures_path,
                   client::kMaxBindingFailureConditions, labelKeyError, bad);
  for (size_t i = 0; i < d.binding_failure_conditions.size(); ++i) {
    const std::string& c = d.binding_failure_conditions[i];
    if (std::find(d.binding_conditions.begin(), d.binding_conditions.end(), c) !=
        d.binding_conditions.end()) {
      bad.add(
          indexPath(failures_path, i),
          inQuotes(c) + " must not be both a binding condition and a binding failure condition");
    }
  }
  if (!d.binding_conditions.empty() && d.binding_failure_conditions.empty()) {
    bad.add(failures_path, "required when bindingConditions is set");
  }
  if (d.binding_conditions.empty() && !d.binding_failure_conditions.empty()) {
    bad.add(conditions_path, "required when bindingFailureConditions is set");
  }
}

void validateDevice(const client::Device& d, const std::string& path, const PoolContext& pool,
                    Problems& bad) {
  bad.check(fieldPath(path, "name"), dnsLabelError(d.name));
  validateAttributesAndCapacity(d, path, bad);
  validateTaints(d, path, bad);
  validateConsumption(d, path, pool, bad);
  validateDeviceNodeSelection(d, path, pool, bad);
  validateNodeAllocatable(d, path, bad);
  validateBindingConditions(d, path, bad);
}

void validateCounterSet(const client::CounterSet& set, const std::string& path, Problems& bad) {
  bad.check(fieldPath(path, "name"), dnsLabelError(set.name));
  const std::string counters_path = fieldPath(path, "counters");
  if (set.counters.empty()) bad.add(counters_path, "must not be empty");
  if (set.counters.size() > client::kMaxCountersPerCounterSet) {
    bad.add(counters_path, "must have at most " +
                               std::to_string(client::kMaxCountersPerCounterSet) +
                               " counters, not " + std::to_string(set.counters.size()));
  }
  for (const auto& [name, counter] : set.counters) {
    bad.check(keyPath(counters_path, name), dnsLabelError(name));
  }
}

// One of the operations a slice may let the kubelet skip (Kubernetes 1.37,
// DRAOptionalNodeOperations).
Status nodeOperationError(std::string_view op) {
  if (op == "NodePrepareResources" || op == "NodeUnprepareResources" || op == "*") {
    return okStatus();
  }
  return invalidArgument("must be NodePrepareResources, NodeUnprepareResources or *, not " +
                         inQuotes(op));
}

void validateSkipNodeOperations(const std::vector<std::string>& ops, const std::string& path,
                                Problems& bad) {
  validateNameList(ops, path, std::numeric_limits<size_t>::max(), nodeOperationError, bad);
  const auto has = [&](std::string_view op) {
    return std::find(ops.begin(), ops.end(), op) != ops.end();
  };
  if (has("NodePrepareResources") && !has("NodeUnprepareResources") && !has("*")) {
    bad.add(path, "NodePrepareResources cannot be skipped unless NodeUnprepareResources is too");
  }
}

// partitionTypeAttribute of one slice (or of a pool the planner splits: the slices that hold
// counter consumers carry it): a fully qualified attribute name, on a slice with a device that
// consumes counters, each of which carries that attribute as a string. In the driver's own
// domain the devices may name it bare, as the API server allows.
void validatePartitionType(const std::string& name, const std::string& path,
                           const std::vector<client::Device>& devices,
                           const std::string& devices_path, std::string_view driver,
                           Problems& bad) {
  if (const Status error = deviceQualifiedNameError(name); !error.ok()) {
    bad.add(path, error.message());
    return;
  }
  const size_t slash = name.find('/');
  if (slash == std::string::npos) {
    bad.add(path, "must be a fully qualified name: <domain>/<name>");
    return;
  }
  std::string_view bare;
  if (!driver.empty() && std::string_view(name).substr(0, slash) == driver) {
    bare = std::string_view(name).substr(slash + 1);
  }
  bool consumers = false;
  for (size_t i = 0; i < devices.size(); ++i) {
    const client::Device& d = devices[i];
    if (d.consumes_counters.empty()) continue;
    consumers = true;
    auto it = d.attributes.find(name);
    if (it == d.attributes.end() && !bare.empty()) it = d.attributes.find(std::string(bare));
    const std::string at = keyPath(fieldPath(indexPath(devices_path, i), "attributes"), name);
    if (it == d.attributes.end()) {
      bad.add(at,
              "required: the device consumes counters and partitionTypeAttribute names this "
              "attribute");
    } else if (!it->second.string_value) {
      bad.add(at, "must be a string, because partitionTypeAttribute names this attribute");
    }
  }
  if (!consumers) {
    bad.add(path, "may only be set where a device consumes counters");
  }
}

// The pool's node selection: exactly one way.
void validateSelection(const reconcile::NodeSelection& s, const std::string& prefix,
                       Problems& bad) {
  std::vector<std::string> set_fields;
  if (s.node_name) set_fields.emplace_back("nodeName");
  if (s.node_selector) set_fields.emplace_back("nodeSelector");
  if (s.all_nodes) set_fields.emplace_back("allNodes");
  if (s.per_device_node_selection) set_fields.emplace_back("perDeviceNodeSelection");
  if (set_fields.empty()) {
    bad.add(prefix,
            "exactly one of nodeName, nodeSelector, allNodes: true or "
            "perDeviceNodeSelection: true is required");
  }
  for (size_t i = 1; i < set_fields.size(); ++i) {
    bad.add(fieldPath(prefix, set_fields[i]),
            "must not be set together with " + set_fields.front() +
                "; exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection");
  }
  if (s.node_name) bad.check(fieldPath(prefix, "nodeName"), nodeNameError(*s.node_name));
  if (s.node_selector) {
    validateNodeSelector(*s.node_selector, fieldPath(prefix, "nodeSelector"), bad);
  }
}

// The pool's slice options; each slice's own are checked with that slice (validateSlice).
void validatePoolOptions(const RawPool& raw, const std::string& prefix, std::string_view driver,
                         Problems& bad) {
  const reconcile::Pool& pool = raw.pool;
  validateSkipNodeOperations(pool.options.skip_node_operations,
                             fieldPath(prefix, "skipNodeOperations"), bad);
  if (pool.options.partition_type_attribute && !pool.slices) {
    validatePartitionType(*pool.options.partition_type_attribute,
                          fieldPath(prefix, "partitionTypeAttribute"), raw.devices,
                          fieldPath(prefix, "devices"), driver, bad);
  } else if (pool.options.partition_type_attribute && pool.slices) {
    // With slices, those without their own take it where a device consumes counters.
    bool taken = false;
    for (size_t i = 0; i < pool.slices->size(); ++i) {
      taken = taken || (!raw.slice_own_options[i].first &&
                        (*pool.slices)[i].options.partition_type_attribute.has_value());
    }
    if (!taken) {
      bad.add(fieldPath(prefix, "partitionTypeAttribute"),
              "may only be set where a device consumes counters; no slice without a "
              "partitionTypeAttribute of its own has such a device");
    }
  }
}

void validateGenerationAndLease(const reconcile::Pool& pool, const std::string& prefix,
                                Problems& bad) {
  if (pool.generation < 0) bad.add(fieldPath(prefix, "generation"), "must not be negative");
  if (pool.generation > kMaxPushedGeneration) {
    bad.add(fieldPath(prefix, "generation"),
            "must be at most 2^62 (" + std::to_string(kMaxPushedGeneration) +
                "), so that the pool can still be bumped; generations never go down");
  }
  if (pool.lease.count() < 0) {
    bad.add(fieldPath(prefix, "leaseSeconds"), "must not be negative");
  } else if (pool.lease.count() > kMaxLeaseSeconds) {
    bad.add(fieldPath(prefix, "leaseSeconds"),
            "must be at most " + std::to_string(kMaxLeaseSeconds) + " (one year)");
  }
}

// What one driver-chosen slice may hold, and its own options.
void validateSlice(const RawPool& raw, const reconcile::DesiredSlice& slice, size_t i,
                   const std::string& prefix, std::string_view driver, Problems& bad) {
  const reconcile::NodeSelection& s = raw.pool.selection;
  const std::string slices_path = fieldPath(prefix, "slices");
  const std::vector<client::Device>& slice_devices = raw.slice_devices[i];
  const std::string at = indexPath(slices_path, i);
  const std::string devices_path = fieldPath(at, "devices");
  const std::string sets_path = fieldPath(at, "sharedCounters");
  if (!slice_devices.empty() && !slice.shared_counters.empty()) {
    bad.add(sets_path,
            "must not be in the same slice as devices; put shared counters in "
            "a slice of their own");
  }
  if (slice.shared_counters.size() > client::kMaxCounterSetsPerSlice) {
    bad.add(sets_path, "must have at most " + std::to_string(client::kMaxCounterSetsPerSlice) +
                           " counter sets per slice, not " +
                           std::to_string(slice.shared_counters.size()));
  }
  const bool advanced =
      std::any_of(slice_devices.begin(), slice_devices.end(),
                  [](const client::Device& d) { return d.usesAdvancedFeatures(); });
  const size_t limit = client::deviceLimit(advanced);
  if (slice_devices.size() > limit) {
    bad.add(devices_path,
            "must have at most " + std::to_string(limit) + " devices per slice" +
                (limit < client::kResourceSliceMaxDevices
                     ? " when a device uses taints, consumesCounters or list attributes"
                     : "") +
                ", not " + std::to_string(slice_devices.size()));
  }
  const auto [own_type, own_ops] = raw.slice_own_options[i];
  if (own_ops) {
    validateSkipNodeOperations(slice.options.skip_node_operations,
                               fieldPath(at, "skipNodeOperations"), bad);
  }
  if (slice.options.partition_type_attribute) {
    // Inherited from the pool only by slices with consumers: its path is the pool's then.
    validatePartitionType(*slice.options.partition_type_attribute,
                          own_type ? fieldPath(at, "partitionTypeAttribute")
                                   : fieldPath(prefix, "partitionTypeAttribute"),
                          slice_devices, devices_path, driver, bad);
  }
  const std::optional<bool>& per_device = raw.slice_per_device[i];
  if (per_device && *per_device != s.per_device_node_selection) {
    bad.add(fieldPath(at, "perDeviceNodeSelection"),
            "must match the pool's perDeviceNodeSelection (" +
                std::string(s.per_device_node_selection ? "true" : "unset") + ")");
  }
}

// The devices and counter sets of a pool in either form, each with the path of its list and its
// index there: a path is made only while its item is validated, so that a large pool costs no
// string per item here.
struct PoolItems {
  struct Device {
    const client::Device* device;
    size_t list;
    size_t index;
  };
  struct Set {
    const client::CounterSet* set;
    size_t list;
    size_t index;
  };
  std::vector<std::string> lists;
  std::vector<Device> devices;
  std::vector<Set> sets;

  std::string pathOf(const auto& located) const {
    return indexPath(lists[located.list], located.index);
  }
};

PoolItems itemsOf(const RawPool& raw, const std::string& prefix) {
  PoolItems items;
  const reconcile::Pool& pool = raw.pool;
  if (!pool.slices) {
    items.lists = {fieldPath(prefix, "devices"), fieldPath(prefix, "sharedCounters")};
    items.devices.reserve(raw.devices.size());
    for (size_t d = 0; d < raw.devices.size(); ++d)
      items.devices.push_back({&raw.devices[d], 0, d});
    items.sets.reserve(pool.shared_counters.size());
    for (size_t c = 0; c < pool.shared_counters.size(); ++c) {
      items.sets.push_back({&pool.shared_counters[c], 1, c});
    }
    return items;
  }
  const std::string slices_path = fieldPath(prefix, "slices");
  for (size_t i = 0; i < pool.slices->size(); ++i) {
    const std::string at = indexPath(slices_path, i);
    const std::vector<client::Device>& slice_devices = raw.slice_devices[i];
    items.lists.push_back(fieldPath(at, "devices"));
    for (size_t d = 0; d < slice_devices.size(); ++d) {
      items.devices.push_back({&slice_devices[d], items.lists.size() - 1, d});
    }
    const std::vector<client::CounterSet>& sets = (*pool.slices)[i].shared_counters;
    items.lists.push_back(fieldPath(at, "sharedCounters"));
    for (size_t c = 0; c < sets.size(); ++c) {
      items.sets.push_back({&sets[c], items.lists.size() - 1, c});
    }
  }
  return items;
}

// Counter sets and devices: each valid, and unique by name across the pool.
void validateItems(const PoolItems& items, bool per_device_node_selection, Problems& bad) {
  PoolContext context;
  context.per_device_node_selection = per_device_node_selection;
  std::map<std::string_view, const PoolItems::Set*> set_at;
  for (const PoolItems::Set& located : items.sets) {
    const std::string path = items.pathOf(located);
    validateCounterSet(*located.set, path, bad);
    auto [it, inserted] = set_at.emplace(located.set->name, &located);
    if (!inserted) {
      bad.add(fieldPath(path, "name"), "Duplicate value: " + inQuotes(located.set->name) +
                                           " (also at " + items.pathOf(*it->second) + ")");
    } else {
      context.counter_sets[located.set->name] = located.set;
    }
  }
  std::map<std::string_view, const PoolItems::Device*> device_at;
  for (const PoolItems::Device& located : items.devices) {
    const std::string path = items.pathOf(located);
    validateDevice(*located.device, path, context, bad);
    auto [it, inserted] = device_at.emplace(located.device->name, &located);
    if (!inserted) {
      bad.add(fieldPath(path, "name"), "Duplicate value: " + inQuotes(located.device->name) +
                                           " (also at " + items.pathOf(*it->second) + ")");
    }
  }
}

void validateRawPool(const RawPool& raw, const std::string& prefix, std::string_view driver,
                     Problems& bad) {
  const reconcile::Pool& pool = raw.pool;
  validateSelection(pool.selection, prefix, bad);
  validatePoolOptions(raw, prefix, driver, bad);
  validateGenerationAndLease(pool, prefix, bad);
  if (pool.slices) {
    const std::string slices_path = fieldPath(prefix, "slices");
    if (raw.has_devices || raw.has_shared_counters) {
      bad.add(slices_path, std::string("must not be set together with ") +
                               (raw.has_devices ? "devices" : "sharedCounters") +
                               "; use either devices and sharedCounters, or slices");
    }
    if (pool.slices->empty()) {
      bad.add(slices_path,
              "must have at least one slice (an empty pool is one slice "
              "without devices)");
    }
    for (size_t i = 0; i < pool.slices->size(); ++i) {
      validateSlice(raw, (*pool.slices)[i], i, prefix, driver, bad);
    }
  }
  validateItems(itemsOf(raw, prefix), pool.selection.per_device_node_selection, bad);
}

// "Kubernetes 1.34.2", from a gitVersion ("v1.34.2").
std::string kubernetesRelease(const reconcile::ServerRelease& server) {
  std::string_view v = server.version;
  if (v.starts_with('v')) v.remove_prefix(1);
  return v.empty() ? "This Kubernetes release" : "Kubernetes " + std::string(v);
}

reconcile::Pool decodeAndValidate(const Json& body, const FieldPath& at, std::string_view driver,
                                  BodyProblems& problems) {
  client::codec::Problems found;
  Decoder decoder(found, Unknown::kRefuse);
  RawPool raw = decodeRawPool(body, at, decoder);
  Problems malformed(problems.malformed, problems.malformed_omitted);
  for (const FieldError& e : found.details(ProblemClass::kMalformed)) {
    malformed.add(e.field, e.message);
  }
  problems.malformed_omitted += found.omitted(ProblemClass::kMalformed);
  if (!found.empty()) return std::move(raw.pool);
  Problems invalid(problems.invalid, problems.invalid_omitted);
  const size_t invalid_before = invalid.size();
  validateRawPool(raw, at.toString(), driver, invalid);
  if (invalid.size() != invalid_before) return std::move(raw.pool);
  // Valid: each device becomes its shared form.
  raw.pool.devices.assign(raw.devices.begin(), raw.devices.end());
  if (raw.pool.slices) {
    for (size_t i = 0; i < raw.pool.slices->size(); ++i) {
      (*raw.pool.slices)[i].devices.assign(raw.slice_devices[i].begin(),
                                           raw.slice_devices[i].end());
    }
  }
  return std::move(raw.pool);
}

// What glibc's malloc takes for a block of `n` bytes: its size and an 8-byte header, rounded up to
// 16, at least 32.
constexpr size_t blockBytes(size_t n) { return std::max<size_t>(32, (n + 8 + 15) / 16 * 16); }

// What a body costs decoded, per JSON value, on libstdc++ and glibc (64-bit). Each value is charged
// the most it can cost wherever it sits, since the first pass does not know the schema: its part
// of nlohmann::json's tree, and the most the pool decoder builds from a value of its kind.
namespace cost {
// The tree: an array element is a 16-byte slot of a vector that grows by doubling (up to twice
// that once built); an object member is a std::map node holding links, the key and the value; an
// object and an array are one allocation each, and a string value another.
constexpr size_t kTreeSlot = 2 * sizeof(Json);
constexpr size_t kTreeMember = blockBytes(32 + sizeof(std::string) + sizeof(Json));
constexpr size_t kTreeObject = blockBytes(sizeof(Json::object_t));
constexpr size_t kTreeArray = blockBytes(sizeof(Json::array_t));
constexpr size_t kTreeString = blockBytes(sizeof(std::string));
// The decoder: every list reserves one item per element before decoding them (the element
// charged the largest item of any list in a pool), and a valid device gets its shared reference;
// validation locates each device and counter set (three words) and indexes it by name (a map
// node); an object that is a member's value may become an entry of a map (attributes, capacity,
// counters).
constexpr size_t kListItem =
    std::max({sizeof(client::Device), sizeof(WireSlice), sizeof(client::CounterSet),
              sizeof(client::NodeSelectorTerm), sizeof(client::NodeSelectorRequirement),
              sizeof(client::DeviceTaint), sizeof(client::DeviceCounterConsumption),
              sizeof(client::Quantity), sizeof(std::string)}) +
    sizeof(client::DeviceRef);
constexpr size_t kValidatedItem =
    3 * sizeof(size_t) + blockBytes(32 + sizeof(std::string_view) + sizeof(void*));
constexpr size_t kMapEntry =
    blockBytes(32 + sizeof(std::string) +
               std::max({sizeof(client::DeviceAttribute), sizeof(client::DeviceCapacity),
                         sizeof(client::Counter)}));
// A string past the short-string buffer is a block of its own, in the tree and again decoded.
constexpr size_t heapBytes(size_t length) { return length > 15 ? blockBytes(length + 1) : 0; }

constexpr size_t kElement = kTreeSlot + kListItem + kValidatedItem;
constexpr size_t kMember = kTreeMember;
constexpr size_t kObject = kTreeObject;
constexpr size_t kMemberObject = kTreeObject + kMapEntry;
constexpr size_t kArray = kTreeArray;
constexpr size_t string(size_t length) { return kTreeString + 2 * heapBytes(length); }
constexpr size_t key(size_t length) { return kMember + 2 * heapBytes(length); }
}  // namespace cost

// A first pass over a body, before any value is built (and after the depth check of
// measureJsonBody): checks the syntax and adds up what the decoded body will cost (namespace
// cost), so that a body of two-byte values ("{},{},...") is refused before it becomes hundreds of
// bytes of heap per input byte. nlohmann's SAX parser keeps its own stack on the heap, so deep
// input cannot exhaust the thread's stack here.
class JsonCost {
 public:
  using number_integer_t = Json::number_integer_t;
  using number_unsigned_t = Json::number_unsigned_t;
  using number_float_t = Json::number_float_t;
  using string_t = Json::string_t;
  using binary_t = Json::binary_t;

  explicit JsonCost(size_t budget) : budget_(budget) {}

  bool null() { return value(0); }
  bool boolean(bool) { return value(0); }
  bool number_integer(number_integer_t) { return value(0); }
  bool number_unsigned(number_unsigned_t) { return value(0); }
  bool number_float(number_float_t, const string_t&) { return value(0); }
  bool string(string_t& s) { return value(cost::string(s.size())); }
  bool binary(binary_t&) { return value(0); }
  bool key(string_t& k) { return charge(cost::key(k.size())); }
  bool start_object(size_t) {
    const bool member = !in_object_.empty() && in_object_.back();
    return open(true, member ? cost::kMemberObject : cost::kObject);
  }
  bool end_object() { return close(); }
  bool start_array(size_t) { return open(false, cost::kArray); }
  bool end_array() { return close(); }
  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception& e) {
    error_ = invalidArgument(std::string("request body is not JSON: ") + e.what());
    return false;
  }

  // Set when the pass stopped early.
  const Status& error() const { return error_; }
  size_t bytes() const { return bytes_; }

 private:
  bool value(size_t own) {
    const bool in_array = !in_object_.empty() && !in_object_.back();
    return charge(own + (in_array ? cost::kElement : 0));
  }
  bool open(bool object, size_t own) {
    if (!value(own)) return false;
    in_object_.push_back(object);
    return true;
  }
  bool close() {
    if (!in_object_.empty()) in_object_.pop_back();
    return true;
  }
  bool charge(size_t n) {
    bytes_ += n;
    if (bytes_ <= budget_) return true;
    error_ = Status(StatusCode::kTooLarge,
                    "request body would take more than " + std::to_string(budget_) +
                        " bytes of memory decoded (flag --max-decoded-bytes); split it into "
                        "smaller requests");
    return false;
  }

  const size_t budget_;
  size_t bytes_ = 0;
  std::vector<bool> in_object_;
  Status error_ = okStatus();
};

std::string phaseOf(const reconcile::PoolStatus& status) {
  return std::string(reconcile::poolPhaseName(status.phase));
}

}  // namespace

size_t decodedJsonBytes(std::string_view body) {
  JsonCost cost(SIZE_MAX);
  Json::sax_parse(body.begin(), body.end(), &cost);
  return cost.bytes();
}

StatusOr<size_t> measureJsonBody(std::string_view body, size_t max_decoded_bytes) {
  if (client::jsonDepthExceeds(body, kMaxJsonDepth)) {
    return invalidArgument("request body nests deeper than " + std::to_string(kMaxJsonDepth) +
                           " levels");
  }
  try {
    JsonCost cost(max_decoded_bytes);
    if (!Json::sax_parse(body.begin(), body.end(), &cost)) {
      if (!cost.error().ok()) return cost.error();
      return invalidArgument("request body is not JSON");
    }
    return cost.bytes();
  } catch (const std::exception& e) {
    return Status(StatusCode::kInvalidArgument,
                  std::string("request body is not JSON: ") + e.what());
  }
}

StatusOr<Json> parseMeasuredJsonBody(std::string_view body) {
  try {
    return Json::parse(body.begin(), body.end());
  } catch (const std::exception& e) {
    // The library's message names the byte offset and what it expected.
    return Status(StatusCode::kInvalidArgument,
                  std::string("request body is not JSON: ") + e.what());
  }
}

StatusOr<Json> parseJsonBody(std::string_view body, size_t max_decoded_bytes) {
  RETURN_IF_ERROR(measureJsonBody(body, max_decoded_bytes).status());
  return parseMeasuredJsonBody(body);
}

void validateCounterPlacement(const reconcile::Pool& pool, const std::string& prefix,
                              const reconcile::ServerRelease& server, BodyProblems& problems) {
  if (server.counter_placement != reconcile::CounterPlacement::kWithConsumers || pool.slices)
    return;
  Problems invalid(problems.invalid, problems.invalid_omitted);
  const std::string rule = kubernetesRelease(server) +
                           " requires each counter set in the slice of the devices that "
                           "consume it: ";
  for (const reconcile::CounterGroup& group : counterGroupsOf(pool)) {
    if (group.sets.empty()) continue;
    const std::string first = inQuotes(pool.shared_counters[group.sets.front()].name);
    if (group.sets.size() > client::kMaxCounterSetsPerSlice) {
      const size_t beyond = group.sets[client::kMaxCounterSetsPerSlice];
      std::string message = rule;
      message += "counter set ";
      message += first;
      message += ", the devices that consume it and the ";
      message += std::to_string(group.sets.size() - 1);
      message += " counter sets those consume too must share one slice, which holds at most ";
      message += std::to_string(client::kMaxCounterSetsPerSlice);
      message += " counter sets";
      invalid.add(indexPath(fieldPath(prefix, "sharedCounters"), beyond), std::move(message));
    }
    const size_t limit = client::deviceLimit(group.advanced);
    if (group.devices.size() > limit) {
      const size_t beyond = group.devices[limit];
      std::string message = rule;
      message += "the ";
      message += std::to_string(group.devices.size());
      message += " devices that consume counter set ";
      message += first;
      message += " (or a counter set consumed with it) must share one slice, which holds at most ";
      message += std::to_string(limit);
      message += " devices";
      invalid.add(fieldPath(indexPath(fieldPath(prefix, "devices"), beyond), "consumesCounters"),
                  std::move(message));
    }
  }
}

reconcile::Pool decodePool(const Json& body, const std::string& prefix, BodyProblems& problems,
                           std::string_view driver) {
  return decodeAndValidate(body, FieldPath(prefix), driver, problems);
}

std::map<std::string, reconcile::Pool> decodeDriverPools(const Json& body, BodyProblems& problems,
                                                         std::string_view driver) {
  std::map<std::string, reconcile::Pool> pools;
  Problems malformed(problems.malformed, problems.malformed_omitted);
  Problems invalid(problems.invalid, problems.invalid_omitted);
  if (!body.is_object()) {
    malformed.add(
        "", "must be an object {\"pools\": {name: Pool}}, not " + std::string(typeName(body)));
    return pools;
  }
  const Json* pool_map = nullptr;
  for (const auto& [key, value] : body.items()) {
    if (key == "pools") {
      pool_map = &value;
    } else {
      malformed.add(key, "unknown field; the body is {\"pools\": {name: Pool}}");
    }
  }
  if (pool_map == nullptr || pool_map->is_null()) {
    malformed.add("pools", "required: an object of pools by name ({} withdraws every pool)");
    return pools;
  }
  if (!pool_map->is_object()) {
    malformed.add("pools",
                  "must be an object of pools by name, not " + std::string(typeName(*pool_map)));
    return pools;
  }
  const FieldPath root("");
  const FieldPath pools_path = root.field("pools");
  for (const auto& [name, value] : pool_map->items()) {
    const FieldPath at = pools_path.key(name);
    invalid.check(at.toString(), poolNameError(name));
    pools[name] = decodeAndValidate(value, at, driver, problems);
  }
  return pools;
}

std::map<std::string, reconcile::Pool> decodeDriverInventory(
    const Json& body, const std::optional<reconcile::ServerRelease>& server, BodyProblems& problems,
    std::string_view driver) {
  std::map<std::string, reconcile::Pool> pools = decodeDriverPools(body, problems, driver);
  if (server && problems.empty()) {
    for (const auto& [name, pool] : pools) {
      validateCounterPlacement(pool, keyPath("pools", name), *server, problems);
    }
  }
  return pools;
}

Status problemsStatus(const BodyProblems& problems) {
  // The message counts every problem; the details list the first
  // kMaxProblemDetails and say how many more there are.
  const auto status = [](StatusCode code, const std::vector<FieldError>& list, size_t omitted,
                         std::string_view what) {
    const size_t total = list.size() + omitted;
    std::string message = std::to_string(total) + " " + std::string(what) + (total == 1 ? "" : "s");
    const FieldError& first = list.front();
    message += ": " + (first.field.empty() ? first.message : first.field + ": " + first.message);
    if (total > 1) message += " (and " + std::to_string(total - 1) + " more)";
    std::vector<FieldError> details = list;
    if (omitted > 0) {
      details.push_back({"", std::to_string(omitted) + " more problem" + (omitted == 1 ? "" : "s") +
                                 " not listed (at most " + std::to_string(kMaxProblemDetails) +
                                 " are)"});
    }
    return Status(code, std::move(message), std::move(details));
  };
  if (!problems.malformed.empty()) {
    Status answer = status(StatusCode::kInvalidArgument, problems.malformed,
                           problems.malformed_omitted, "malformed field");
    // Only unknown fields: the API server's strict decoding error, every
    // listed path in the message (CODEC.md section 2.2).
    const bool strict =
        std::all_of(problems.malformed.begin(), problems.malformed.end(),
                    [](const FieldError& e) { return e.message.starts_with(kUnknownField); });
    if (!strict) return answer;
    std::string message = "strict decoding error: ";
    for (size_t i = 0; i < problems.malformed.size(); ++i) {
      message += (i == 0 ? "" : ", ") + std::string(kUnknownField) + " " +
                 inQuotes(problems.malformed[i].field);
    }
    if (problems.malformed_omitted > 0) {
      message += " (and " + std::to_string(problems.malformed_omitted) + " more)";
    }
    return Status(StatusCode::kInvalidArgument, std::move(message), answer.details());
  }
  if (!problems.invalid.empty()) {
    return status(StatusCode::kUnprocessable, problems.invalid, problems.invalid_omitted,
                  "invalid field");
  }
  return okStatus();
}

StatusOr<reconcile::Pool> parsePool(std::string_view body) {
  ASSIGN_OR_RETURN(Json j, parseJsonBody(body));
  BodyProblems problems;
  reconcile::Pool pool = decodePool(j, "", problems);
  RETURN_IF_ERROR(problemsStatus(problems));
  return pool;
}

StatusOr<std::map<std::string, reconcile::Pool>> parseDriverPools(std::string_view body) {
  ASSIGN_OR_RETURN(Json j, parseJsonBody(body));
  BodyProblems problems;
  std::map<std::string, reconcile::Pool> pools = decodeDriverPools(j, problems);
  RETURN_IF_ERROR(problemsStatus(problems));
  return pools;
}

client::PoolDryRunJson poolPreviewWire(const reconcile::PoolPreview& preview) {
  using Verb = reconcile::PlannedWrite::Verb;
  client::PoolDryRunJson out;
  out.pool = preview.key.pool;
  out.action = preview.withdraw ? "withdraw" : "publish";
  out.live_generation = preview.live_generation;
  for (const reconcile::PlannedWrite& write : preview.writes) {
    client::PlannedWriteJson& w = out.writes.emplace_back();
    w.verb = write.verb == Verb::kCreate   ? "create"
             : write.verb == Verb::kUpdate ? "update"
                                           : "delete";
    w.slice = write.slice;
    if (write.index >= 0) w.index = write.index;
    if (write.verb == Verb::kUpdate) w.changed_fields = write.changed_fields;
  }
  if (!preview.withdraw) {
    out.generation = preview.generation;
    out.generation_bumped = preview.generation_bumped;
    out.slice_count = preview.slice_count;
  }
  return out;
}

Json poolPreviewToJson(const reconcile::PoolPreview& preview) {
  return client::toJson(poolPreviewWire(preview));
}

Json poolStatusToJson(const reconcile::PoolStatus& status,
                      const std::shared_ptr<const reconcile::DesiredPool>& desired,
                      const std::string& leader, std::string_view phase_override) {
  client::PoolStatusJson j;
  j.driver = status.key.driver;
  j.pool = status.key.pool;
  j.phase = phase_override.empty() ? phaseOf(status) : std::string(phase_override);
  j.desired_generation = desired ? desired->pool.generation : 0;
  j.published_generation = status.published_generation;
  j.desired_version = static_cast<int64_t>(status.desired_version);
  j.published_version = static_cast<int64_t>(status.published_version);
  j.slice_names = status.slice_names;
  if (!status.last_error.ok()) {
    const std::string reason = status.last_error.reason().empty()
                                   ? std::string(statusCodeName(status.last_error.code()))
                                   : status.last_error.reason();
    j.last_error = client::PoolStatusError{reason, status.last_error.message()};
  }
  if (status.hold) {
    j.reason = status.hold->reason;
    j.message = status.hold->message;
  }
  if (status.last_push) j.last_push_time = formatMicroTime(*status.last_push);
  j.dropped_fields = status.dropped_fields;
  if (desired && desired->pool.lease.count() > 0) j.lease_seconds = desired->pool.lease.count();
  j.leader = leader;
  return client::toJson(j);
}

Json errorToJson(int http_code, std::string_view reason, std::string_view message,
                 const std::vector<FieldError>& details) {
  Json j = Json::object();
  j["code"] = http_code;
  j["reason"] = std::string(reason);
  j["message"] = std::string(message);
  Json list = Json::array();
  for (const FieldError& e : details) list.push_back({{"field", e.field}, {"message", e.message}});
  j["details"] = std::move(list);
  return j;
}

std::string dumpJson(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace rsc::controller::pool
