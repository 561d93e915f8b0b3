// WatchMetrics: how often the ResourceSlice watch had to be started again, and
// why. client/ knows nothing of metrics, so the controller's wiring calls this
// when the informer reports a restart. Thread-safe.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include <array>
#include <string_view>

namespace rsc::metrics {

// Why a watch was started again; the `reason` label.
enum class WatchRestartReason {
  kClosed,   // "closed": the server ended the stream (timeoutSeconds ran out); normal
  kExpired,  // "expired": 410 Gone, the resourceVersion is too old; the cache relists
  kError,    // "error": a transport, HTTP or decoding error
};

std::string_view watchRestartReasonName(WatchRestartReason reason);

class WatchMetrics {
 public:
  // Registers the family in `registry`, which must outlive this object, with
  // every reason at 0.
  explicit WatchMetrics(prometheus::Registry& registry);
  WatchMetrics(const WatchMetrics&) = delete;
  WatchMetrics& operator=(const WatchMetrics&) = delete;

  void restarted(WatchRestartReason reason);

 private:
  std::array<prometheus::Counter*, 3> restarts_{};
};

}  // namespace rsc::metrics
