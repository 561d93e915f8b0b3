// WatchMetrics: how often the watches of the controller's informers (the
// managed ResourceSlices and the Node cache) had to be started again, and why.
// client/ knows nothing of metrics, so the controller's wiring calls this when
// an informer reports a restart. Thread-safe.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include <array>
#include <string_view>

namespace rsc::metrics {

// What was watched; the `resource` label.
enum class WatchedResource {
  kResourceSlices,  // "resourceslices"
  kNodes,           // "nodes": the Node cache (metadata only)
};

// Why a watch was started again; the `reason` label.
enum class WatchRestartReason {
  kClosed,   // "closed": the server ended the stream (timeoutSeconds ran out); normal
  kExpired,  // "expired": 410 Gone, the resourceVersion is too old; the cache relists
  kError,    // "error": a transport, HTTP or decoding error
};

std::string_view watchedResourceName(WatchedResource resource);
std::string_view watchRestartReasonName(WatchRestartReason reason);

class WatchMetrics {
 public:
  // Registers the family in `registry`, which must outlive this object, with
  // every resource and reason at 0.
  explicit WatchMetrics(prometheus::Registry& registry);
  WatchMetrics(const WatchMetrics&) = delete;
  WatchMetrics& operator=(const WatchMetrics&) = delete;

  void restarted(WatchedResource resource, WatchRestartReason reason);

 private:
  static constexpr size_t kResources = 2;
  static constexpr size_t kReasons = 3;
  std::array<std::array<prometheus::Counter*, kReasons>, kResources> restarts_{};
};

}  // namespace rsc::metrics
