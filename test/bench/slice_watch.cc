#include "test/bench/slice_watch.h"

#include <utility>

namespace rsc::bench {

SliceWatch::SliceWatch(client::KubeApi& api, client::ListOptions options,
                       std::string resource_version, Accept accept, Clock& clock)
    : clock_(clock) {
  options.resource_version = std::move(resource_version);
  options.limit = 0;
  options.continue_token.clear();
  thread_ = std::thread([this, &api, options = std::move(options), accept = std::move(accept)] {
    // The API server closes a watcher that falls behind ("Forcing ... watcher
    // close due to unresponsiveness"), as it may on a busy machine while a
    // burst streams in; the watch then goes on from the last version seen,
    // as an informer's would, and only an error ends it.
    client::ListOptions at = options;
    at.allow_watch_bookmarks = true;
    Status ended;
    while (!stop_.stop_requested()) {
      ended = api.watchResourceSlices(
          at,
          [&](const client::WatchEvent<client::ResourceSlice>& e) {
            // The time of arrival, before any work of ours.
            const Clock::TimePoint now = clock_.now();
            if (!e.object.metadata.resource_version.empty()) {
              at.resource_version = e.object.metadata.resource_version;
            }
            if ((e.type != client::WatchEventType::kAdded &&
                 e.type != client::WatchEventType::kModified) ||
                !accept(e.type, e.object)) {
              return true;
            }
            std::lock_guard<std::mutex> lock(mu_);
            if (seen_.insert(e.object.metadata.name).second) {
              arrivals_.push_back(now);
              if (arrivals_.size() >= wanted_) {
                done_.request_stop();
              }
            }
            return true;
          },
          stop_.get_token());
      if (!ended.ok()) {
        break;
      }
      std::lock_guard<std::mutex> lock(mu_);
      ++restarts_;
    }
    std::lock_guard<std::mutex> lock(mu_);
    ended_ = ended.ok() ? cancelled("the watch was stopped") : std::move(ended);
    running_ = false;
    done_.request_stop();
  });
}

SliceWatch::~SliceWatch() {
  stop_.request_stop();
  thread_.join();
}

StatusOr<std::vector<Clock::TimePoint>> SliceWatch::waitFor(size_t count, Clock::Duration timeout) {
  const Clock::TimePoint deadline = clock_.now() + timeout;
  {
    std::lock_guard<std::mutex> lock(mu_);
    wanted_ = count;
    if (arrivals_.size() >= count || !running_) {
      done_.request_stop();
    }
  }
  clock_.sleepUntil(deadline, done_.get_token());
  std::lock_guard<std::mutex> lock(mu_);
  if (arrivals_.size() >= count) {
    return arrivals_;
  }
  const std::string saw =
      "saw " + std::to_string(arrivals_.size()) + " of " + std::to_string(count) + " slices";
  return running_ ? deadlineExceeded(saw + " in time (" + std::to_string(restarts_) +
                                     " watches closed by the API server and resumed)")
                  : ended_.withContext(saw);
}

}  // namespace rsc::bench
