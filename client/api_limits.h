// The limits of resource.k8s.io/v1 that the controller enforces before it
// writes (k8s.io/api resource/v1 types.go, Kubernetes 1.36+), in one place:
// the planner splits pools by them and the inventory API validates pushed
// pools against them, so that what is accepted can be written. Constants only.
#pragma once

#include <cstddef>

namespace rsc::client {

// Devices per slice, and per slice with a device that uses taints, counters
// or list attributes ("advanced" features).
inline constexpr size_t kResourceSliceMaxDevices = 128;
inline constexpr size_t kResourceSliceMaxDevicesWithAdvancedFeatures = 64;
// Counter sets per slice (ResourceSliceMaxCounterSets, 1.35+).
inline constexpr size_t kMaxCounterSetsPerSlice = 8;

// Per device.
inline constexpr size_t kMaxAttributesAndCapacitiesPerDevice = 32;
inline constexpr size_t kMaxAttributeValuesPerDevice = 48;
inline constexpr size_t kAttributeMaxValueLength = 64;
inline constexpr size_t kMaxTaintsPerDevice = 16;
inline constexpr size_t kMaxCounterConsumptionsPerDevice = 2;
inline constexpr size_t kMaxBindingConditions = 4;
inline constexpr size_t kMaxBindingFailureConditions = 4;
inline constexpr size_t kMaxCapacityValidValues = 10;
// Per counter set and per counter consumption.
inline constexpr size_t kMaxCountersPerCounterSet = 32;
inline constexpr size_t kMaxCountersPerCounterConsumption = 32;
// compatibilityGroups of one counter consumption (Kubernetes 1.37).
inline constexpr size_t kMaxCompatibilityGroups = 2;

// Returns the most devices a slice may hold: 64 when it holds an advanced
// device (`advanced`), else 128.
constexpr size_t deviceLimit(bool advanced) {
  return advanced ? kResourceSliceMaxDevicesWithAdvancedFeatures : kResourceSliceMaxDevices;
}

}  // namespace rsc::client
