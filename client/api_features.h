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
  kCount,
};

// gate: for logs and hints; since_minor: the first release whose v1 has the fields.
struct FeatureInfo {
  Feature id;
  std::string_view gate;
  int since_minor;
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
};

using FeatureSet = std::bitset<static_cast<size_t>(Feature::kCount)>;

}  // namespace rsc::client
