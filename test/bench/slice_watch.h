// A watch of ResourceSlices, on a thread of its own, that notes when each
// slice first arrives in an event the caller accepts: how the benchmark times
// slice events as a scheduler's informer sees them (workload 6: first to last
// slice of a new generation; workload 7: first push to last changed slice).
// Threading: the watch thread calls `accept` and records under a mutex; the
// constructor, waitFor and the destructor belong to one other thread.
#pragma once

#include <cstddef>
#include <functional>
#include <limits>
#include <mutex>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "client/kube_api.h"
#include "common/clock.h"
#include "common/status.h"

namespace rsc::bench {

class SliceWatch {
 public:
  // Whether an ADDED or MODIFIED event (its type and slice) counts; other
  // events never do.
  using Accept = std::function<bool(client::WatchEventType, const client::ResourceSlice&)>;

  // Watches the slices `options` selects from `resource_version` on: that of
  // a list made just before, so that no later event is missed.
  SliceWatch(client::KubeApi& api, client::ListOptions options, std::string resource_version,
             Accept accept, Clock& clock);
  // Stops the watch and joins its thread.
  ~SliceWatch();
  SliceWatch(const SliceWatch&) = delete;
  SliceWatch& operator=(const SliceWatch&) = delete;

  // Waits until `count` slices (by name) have arrived in accepted events and
  // returns the time each first did, in the order they came. An error when
  // `timeout` passes or the watch fails first (a watch the server ends is
  // resumed from the last version seen). Once per watch.
  StatusOr<std::vector<Clock::TimePoint>> waitFor(size_t count, Clock::Duration timeout);

 private:
  Clock& clock_;
  std::mutex mu_;
  std::set<std::string> seen_;                          // guarded by mu_
  std::vector<Clock::TimePoint> arrivals_;              // guarded by mu_
  size_t wanted_ = std::numeric_limits<size_t>::max();  // guarded by mu_
  Status ended_;                                        // guarded by mu_; why the watch ended
  bool running_ = true;                                 // guarded by mu_
  int restarts_ = 0;       // guarded by mu_; watches the server ended, resumed
  std::stop_source done_;  // wakes waitFor: `wanted_` arrivals, or the watch ended
  std::stop_source stop_;  // ends the watch
  std::thread thread_;
};

}  // namespace rsc::bench
