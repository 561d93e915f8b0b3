// One device of a ResourceSlice in its compact, shared form (CODEC.md section 3): the device's
// JSON exactly as the controller writes it, a keyed 128-bit digest of that JSON, and the few
// facts the planner, the node restriction and the comparer ask for. A DeviceRef holds one.
//
// Forms are interned process-wide: two devices with the same JSON share one form, so the desired
// store, the informer's cache, plans and answers to writes hold one copy of each device and
// 16 bytes per reference. A typed Device exists only while it is decoded, validated or edited.
//
// The members that take or give a typed Device (decode, the DeviceRef from a Device, edit) are
// defined with the device's codec in resource_slice.cc: this file knows Device by name only.
// Thread-safe: a form never changes; the intern table has its own lock.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "client/api_features.h"
#include "common/siphash.h"

namespace rsc::client {

struct Device;

class DeviceForm {
 public:
  const std::string& name() const { return parts_.name; }
  // Compact JSON of the device (codec encoding, keys in table order).
  std::string_view json() const { return parts_.json; }
  // SipHash-2-4-128 of json() under a key chosen at process start. Equal digests mean equal
  // JSON, so equal devices with nothing dropped: the comparer's fast path.
  const Digest128& digest() const { return parts_.digest; }
  // The tagged fields the device sets (api_features.h).
  FeatureSet features() const { return parts_.features; }
  // Taints, consumesCounters or list attributes: the slice limit is then 64 devices.
  bool advanced() const { return parts_.advanced; }
  // consumesCounters set: a slice naming a partitionTypeAttribute needs one such device.
  bool consumesCounters() const { return parts_.consumes_counters; }
  // nodeName, nodeSelector or allNodes set on the device itself.
  bool placed() const { return parts_.placed; }
  // The typed device again; for slow paths (a difference to explain, an edit, tests).
  Device decode() const;

  // What a form is made of, as the accessors above say. Use DeviceRef, which
  // makes and interns forms.
  struct Parts {
    std::string name;
    std::string json;
    Digest128 digest;
    FeatureSet features;
    bool advanced = false;
    bool consumes_counters = false;
    bool placed = false;
  };
  explicit DeviceForm(Parts&& parts) : parts_(std::move(parts)) {}

 private:
  Parts parts_;
};

class DeviceRef {
 public:
  DeviceRef() = default;
  // Encodes, digests and interns `device`. Implicit, so that builders and tests can write
  // `spec.devices = {gpu0, gpu1}`.
  DeviceRef(const Device& device);  // NOLINT(google-explicit-constructor)
  // The form whose JSON is exactly `json`, if some reference holds one; else a null reference.
  // Canonical JSON decodes to the device it was encoded from, so a decoder that finds the
  // bytes it reads here needs no typed decoding.
  static DeviceRef interned(std::string_view json);

  const DeviceForm* operator->() const { return form_.get(); }
  const DeviceForm& operator*() const { return *form_; }
  const DeviceForm* get() const { return form_.get(); }
  explicit operator bool() const { return form_ != nullptr; }

  // A typed copy (const: editing it would change nothing; use edit()).
  const Device device() const;  // NOLINT(readability-const-return-type)
  // Replaces this reference by the form of the device after `change`.
  void edit(const std::function<void(Device&)>& change);

  // Same JSON (by digest): the same device. A null reference equals only a null one.
  friend bool operator==(const DeviceRef& a, const DeviceRef& b);

 private:
  // Digests `parts` (its json) and returns the interned form of that JSON.
  static std::shared_ptr<const DeviceForm> intern(DeviceForm::Parts&& parts);

  std::shared_ptr<const DeviceForm> form_;
};

// Applies `change` to every device of `devices` (each decoded, changed and made again).
void editDevices(std::vector<DeviceRef>& devices, const std::function<void(Device&)>& change);

// Typed copies of `devices`, in order (slow path: tests, tools).
std::vector<Device> decodeAll(const std::vector<DeviceRef>& devices);

// The intern table, for tests and memory accounting.
struct DeviceFormStats {
  size_t entries = 0;  // slots in the table, expired ones included
  size_t live = 0;     // forms some DeviceRef still holds
};
DeviceFormStats deviceFormStats();

}  // namespace rsc::client
