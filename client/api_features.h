// Features of resource.k8s.io/v1 whose fields a supported API server may not keep: behind a
// feature gate that may be off, or added after the server's release. The field tables of
// resource_slice.h tag each such field; semanticEqual reports a tagged field that the server
// dropped instead of rewriting the slice. A new Kubernetes release adds rows and tags and moves
// kNewestModelledMinor. Constants only: thread-safe.
#pragma once

#include <array>
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace rsc::client {

enum class Feature : uint8_t {
  kNone,
  kDeviceTaints,
  kPartitionableDevices,
  kConsumableCapacity,
  kDeviceBindingConditions,
  kListTypeAttributes,
  kNodeAllocatableResourceMappings,
  kNodeAllocatableResources,
  kDeviceCompatibilityGroups,
  kPartitionableDevicesType,
  kOptionalNodeOperations,
  kCount,
};

// gate: for logs and hints; since_minor: the first release whose v1 has the fields; until_minor:
// the last one (0: every release since). The conformance test
// (test/integration/schema_conformance_test.cc) checks both against each server's OpenAPI.
struct FeatureInfo {
  Feature id;
  std::string_view gate;
  int since_minor;
  int until_minor = 0;
};

// DESIGN.md section 10: Kubernetes 1.34 to 1.37.
inline constexpr int kOldestSupportedMinor = 34;
inline constexpr int kNewestModelledMinor = 37;

inline constexpr std::array kFeatures = {
    FeatureInfo{Feature::kDeviceTaints, "DRADeviceTaints", 34},
    FeatureInfo{Feature::kPartitionableDevices, "DRAPartitionableDevices", 34},
    FeatureInfo{Feature::kConsumableCapacity, "DRAConsumableCapacity", 34},
    FeatureInfo{Feature::kDeviceBindingConditions, "DRADeviceBindingConditions", 34},
    FeatureInfo{Feature::kListTypeAttributes, "DRAListTypeAttributes", 36},
    // 1.36's alpha shape of node allocatable resources, replaced in 1.37 by the next row.
    FeatureInfo{Feature::kNodeAllocatableResourceMappings, "DRANodeAllocatableResources", 36, 36},
    FeatureInfo{Feature::kNodeAllocatableResources, "DRANodeAllocatableResources", 37},
    FeatureInfo{Feature::kDeviceCompatibilityGroups, "DRADeviceCompatibilityGroups", 37},
    FeatureInfo{Feature::kPartitionableDevicesType, "DRAPartitionableDevicesType", 37},
    FeatureInfo{Feature::kOptionalNodeOperations, "DRAOptionalNodeOperations", 37},
};

// The row of `id`; null for kNone and kCount.
constexpr const FeatureInfo* featureInfo(Feature id) {
  for (const FeatureInfo& f : kFeatures) {
    if (f.id == id) return &f;
  }
  return nullptr;
}

using FeatureSet = std::bitset<static_cast<size_t>(Feature::kCount)>;

}  // namespace rsc::client
