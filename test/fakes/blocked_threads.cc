#include "test/fakes/blocked_threads.h"

namespace rsc::testing {

void BlockedThreads::set(const void* source, size_t blocked) {
  {
    std::lock_guard lock(mu_);
    if (blocked == 0) {
      blocked_.erase(source);
    } else {
      blocked_[source] = blocked;
    }
  }
  cv_.notify_all();
}

size_t BlockedThreads::count() const {
  std::lock_guard lock(mu_);
  return countLocked();
}

bool BlockedThreads::waitFor(size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return countLocked() == n; });
}

size_t BlockedThreads::countLocked() const {
  size_t n = 0;
  for (const auto& [source, blocked] : blocked_) n += blocked;
  return n;
}

}  // namespace rsc::testing
